//! A history as data: the operations threads ran on a store's keys, each with its call and
//! return stamps, the store's clock around it, and what it returned; the names its indices stand
//! for. Recording ([`crate::record`]) makes one; the search ([`crate::search`]) and the checks
//! judge it.

use std::collections::BTreeMap;

use reservation_store::{
    AggregateRef, HoldId, Instant, Key, Operation, Outcome, ReservationScope, StoredReservation, Tenant,
};

use crate::entry::Entry;
use crate::harness::unique_namespace;
use crate::show::show_state;

/// Keys of a contended history.
pub const KEYS: usize = 3;
/// Owners of a history.
pub(crate) const OWNERS: usize = 3;
/// Holds of a history.
pub(crate) const HOLDS: usize = 2;

/// One operation of a history, on key `key`: an [`Operation`] with owners and holds named by
/// their index in [`Names`], or a lookup.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Call {
    /// An operation, decided by [`reservation_store::spec::apply`].
    Op(Operation<u8, u8>),
    /// A lookup.
    Lookup,
}

/// What an operation of a history returned.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Return {
    /// An operation's outcome.
    Outcome(Outcome),
    /// A lookup's answer.
    Lookup(Option<StoredReservation>),
    /// An invalid argument, or a panic: never expected of the check's operations.
    Error(String),
    /// A [`reservation_store::StorageError`]; `indeterminate` when the operation may have taken
    /// effect.
    Storage {
        /// The error, as displayed.
        message: String,
        /// Whether the operation may have taken effect.
        indeterminate: bool,
    },
    /// No answer of the store: the adapter behind the driver broke its protocol
    /// ([`ProtocolError`](crate::protocol::ProtocolError)), as the message says.
    Protocol(String),
}

/// One completed operation: who ran it, on which key, the store's clock just before its call and
/// just after its return, and its call and return stamps (a shared counter: `a` precedes `b`
/// when `a.returned < b.called`). Every other call by stamp ([`Event::typed`]) went to the store
/// through the operation's typed method (`reserve`, …), the others through `execute`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Event {
    /// The thread.
    pub thread: usize,
    /// The round.
    pub round: usize,
    /// The store's clock just before the call.
    pub clock_at_call: Instant,
    /// The store's clock just after the return; the operation acted at an instant in
    /// `clock_at_call..=clock_at_return`.
    pub clock_at_return: Instant,
    /// The key's index.
    pub key: usize,
    /// The operation.
    pub call: Call,
    /// Its result.
    pub ret: Return,
    /// The call's stamp.
    pub called: u64,
    /// The return's stamp.
    pub returned: u64,
}

impl Event {
    /// Whether the operation went to the store through its typed method (`reserve`, `confirm`,
    /// `release`, `abandon`) rather than `execute`: every other call stamp of each thread.
    pub fn typed(&self) -> bool {
        entry(self.called) == Entry::Typed
    }
}

/// The entry point of the call stamped `called`: stamps come in pairs (call, return), so that
/// `called / 2` counts one thread's calls when it runs alone.
pub(crate) fn entry(called: u64) -> Entry {
    Entry::nth((called / 2 % 2) as usize)
}

/// The names a history's indices stand for.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Names {
    /// The scope of every key.
    pub scope: ReservationScope,
    /// Keys.
    pub keys: Vec<Key>,
    /// Owners; the first two differ in their id's case only.
    pub owners: Vec<AggregateRef>,
    /// Holds.
    pub holds: Vec<HoldId>,
}

impl Default for Names {
    fn default() -> Self {
        Self::new()
    }
}

impl Names {
    /// The names of a fresh history: a tenant scope in a namespace of its own, keys `k0`..,
    /// owners `alice`, `Alice` and `bob`, holds `h0`, `h1`.
    pub fn new() -> Self {
        let ty = reservation_store::AggregateType::new("rc-user").expect("valid");
        let tenant = Tenant::id("acme").expect("valid");
        let o = |id: &str| {
            AggregateRef::new(ty.clone(), tenant.clone(), reservation_store::AggregateId::new(id).expect("valid"))
        };
        Names {
            scope: ReservationScope::new(ty.clone(), tenant.clone(), unique_namespace("rc-linearizability")),
            keys: (0..KEYS).map(key_named).collect(),
            owners: vec![o("alice"), o("Alice"), o("bob")],
            holds: (0..HOLDS).map(|i| HoldId::new(format!("h{i}")).expect("valid")).collect(),
        }
    }

    pub(crate) fn owner(&self, i: u8) -> &AggregateRef {
        &self.owners[usize::from(i) % self.owners.len()]
    }

    pub(crate) fn hold(&self, i: u8) -> &HoldId {
        &self.holds[usize::from(i) % self.holds.len()]
    }

    /// One operation of a history, as a failure's timeline shows it.
    pub(crate) fn show(&self, e: &Event) -> String {
        let (call, ret) = self.call_and_return(e);
        let clock = if e.clock_at_call == e.clock_at_return {
            format!("{}", e.clock_at_call)
        } else {
            format!("{}..{}", e.clock_at_call, e.clock_at_return)
        };
        format!("[{:>5} .. {:>5}] round {} {clock}: {call} -> {ret}", e.called, e.returned, e.round)
    }

    /// What an operation of a history called, and what it returned, as a failure's timeline
    /// shows them (without its stamps and clock).
    pub(crate) fn call_and_return(&self, e: &Event) -> (String, String) {
        let k = e.key;
        let call = match e.call {
            Call::Op(op) => {
                let shown = op.map(|o| self.owner(o).id.as_str(), |h| self.hold(h).as_str());
                match e.typed() {
                    true => format!("k{k} {shown}"),
                    false => format!("k{k} execute({shown})"),
                }
            }
            Call::Lookup => format!("lookup(k{k})"),
        };
        let ret = match &e.ret {
            Return::Lookup(r) => show_state(r.as_ref()),
            Return::Storage { message, .. } => format!("StorageError({message})"),
            Return::Protocol(message) => format!("no answer: {message}"),
            other => format!("{other:?}"),
        };
        (call, ret)
    }
}

/// A recorded history: its operations, ordered by call, and the names their indices stand for.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct History {
    /// The names.
    pub names: Names,
    /// The operations.
    pub events: Vec<Event>,
}

/// The key of index `i` in a history: `k{i}`.
pub(crate) fn key_named(i: usize) -> Key {
    Key::new(format!("k{i}")).expect("a short non-empty key is valid")
}

/// The operations of each key of `events` (ordered by call), by key, leaving out those that
/// failed with a determinate storage error: they did not happen.
pub(crate) fn by_key(events: &[Event]) -> BTreeMap<usize, Vec<&Event>> {
    let mut keys: BTreeMap<usize, Vec<&Event>> = BTreeMap::new();
    for e in events.iter().filter(|e| !matches!(e.ret, Return::Storage { indeterminate: false, .. })) {
        keys.entry(e.key).or_default().push(e);
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line of a failure's timeline: its stamps, its round, its clock (an instant, or a window
    /// when the clock moved during the call), what it called and what it returned.
    #[test]
    fn an_operation_is_shown_with_its_stamps_clock_call_and_return() {
        let names = Names::new();
        let mut e = Event {
            thread: 0,
            round: 2,
            clock_at_call: Instant::from_millis(1_000),
            clock_at_return: Instant::from_millis(1_000),
            key: 1,
            call: Call::Lookup,
            ret: Return::Lookup(None),
            called: 4,
            returned: 9,
        };
        assert_eq!(names.show(&e), "[    4 ..     9] round 2 t=1000ms: lookup(k1) -> free");
        e.clock_at_return = Instant::from_millis(1_002);
        assert_eq!(names.show(&e), "[    4 ..     9] round 2 t=1000ms..t=1002ms: lookup(k1) -> free");
        assert_eq!(names.call_and_return(&e), ("lookup(k1)".to_owned(), "free".to_owned()));
    }
}
