//! The linearizability check: several threads run operations on a few keys while the clock moves
//! (by a random step between rounds, and by a millisecond at a time during a round); every call
//! and return is stamped, with the clock read just before the call and just after the return,
//! and the history is decided against the specification by a Wing–Gong–Lowe search with a memo
//! of (linearized set, state, last instant), one key at a time.
//!
//! Each operation takes effect at one point between its call and its return, and acts at the
//! store's clock at that point: the search gives each operation an instant within its clock
//! window, never earlier than the instant of an operation placed before it. A store that reads
//! its clock before it takes its lock can act at an instant earlier than an operation that
//! completed before it took effect: no such order exists, and the history fails.
//!
//! A storage error is judged by [`Faults`]: the suite's own run forbids them (every operation of
//! a healthy store completes), while a run that injects faults tolerates them. Then a
//! determinate [`reservation_store::StorageError`] is an operation that did not happen, and an
//! indeterminate one an operation that may have happened, with any outcome, at one point between
//! its call and its return, or never (Jepsen's `:info`). This assumes that a store's operation
//! whose error was returned can no longer take effect later, as holds when its transaction dies
//! with its connection.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant as WallInstant};

use reservation_store::rules::Rule;
use reservation_store::{
    AggregateRef, Clock, HoldId, Instant, Key, ManualClock, Operation, Outcome, ReleaseVersion, ReservationScope,
    ReservationStore, StoredReservation, Tenant, Ttl, Version, spec,
};

use crate::driver::ProtocolError;
use crate::failure::Failure;
use crate::harness::{Harness, START, unique_namespace};
use crate::session::{Entry, call, lookup_rule, panic_message, show_error, show_state};

/// The property this check decides, as its failures state it.
pub const ATOMICITY: &str =
    "atomicity (H1) broken: each operation must be one linearizable read-modify-write of one key";

/// The property a failure states when a single thread's history already breaks a rule: no
/// concurrency is needed to show the bug.
pub const SEQUENTIAL: &str =
    "a single thread's operations already break the rule: the bug is not a race (no concurrency needed)";

/// Most operations of the failing prefix a report prints.
const SHOWN: usize = 24;

/// Keys of the check.
pub const KEYS: usize = 3;
const OWNERS: usize = 3;
const HOLDS: usize = 2;
/// Operations each thread runs in one round before the clock moves.
pub(crate) const ROUND: usize = 16;
/// The longest time to live of the check's reservations, in milliseconds.
pub(crate) const MAX_TTL: u64 = 30;

/// One operation of a history, on key `key`: an [`Operation`] with owners and holds named by
/// their index in [`Names`], or a lookup.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Call {
    /// An operation, decided by [`spec::apply`].
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
    /// ([`ProtocolError`]), as the message says.
    Protocol(String),
}

/// How [`check_history_with`] judges the storage errors of a history.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Faults {
    /// A storage error fails the history: the suite's own run, on a healthy store.
    Forbidden,
    /// A determinate storage error is an operation that did not happen; an indeterminate one may
    /// have happened (with any outcome) or not. For runs that inject faults: killed connections,
    /// restarted servers.
    Tolerated,
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
fn entry(called: u64) -> Entry {
    Entry::nth((called / 2 % 2) as usize)
}

/// The names a history's indices stand for.
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
        let clock = if e.clock_at_call == e.clock_at_return {
            format!("{}", e.clock_at_call)
        } else {
            format!("{}..{}", e.clock_at_call, e.clock_at_return)
        };
        format!("[{:>5} .. {:>5}] round {} {clock}: {call} -> {ret}", e.called, e.returned, e.round)
    }
}

/// The key of index `i` in a history: `k{i}`.
pub(crate) fn key_named(i: usize) -> Key {
    Key::new(format!("k{i}")).expect("a short non-empty key is valid")
}

/// A tiny deterministic generator, one per thread.
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A call on the round's hot key three times in four, so that threads collide on one key.
pub(crate) fn random_call(r: &mut XorShift, hot: usize) -> (usize, Call) {
    let key = if r.below(4) == 0 { r.below(KEYS as u64) as usize } else { hot };
    let owner = r.below(OWNERS as u64) as u8;
    let hold = r.below(HOLDS as u64) as u8;
    let version = Version::from_u64(r.below(4));
    let call = match r.below(14) {
        0..=4 => Ttl::from_millis(1 + r.below(MAX_TTL))
            .map_or(Call::Lookup, |ttl| Call::Op(Operation::Reserve { owner, hold, ttl })),
        5..=7 => Call::Op(Operation::Confirm { owner, version }),
        8 | 9 => Call::Op(Operation::Release { owner, version: ReleaseVersion::Any }),
        10 => Call::Op(Operation::Release { owner, version: ReleaseVersion::At(version) }),
        11 | 12 => Call::Op(Operation::Abandon { owner, hold }),
        _ => Call::Lookup,
    };
    (key, call)
}

async fn invoke<S: ReservationStore>(store: &S, names: &Names, k: &Key, op: Call, entry: Entry) -> Return {
    let scope = &names.scope;
    match op {
        Call::Op(op) => {
            let operation = op.map(|o| names.owner(o), |h| names.hold(h));
            call(store, entry, scope, k, operation).await.map_or_else(error_return, Return::Outcome)
        }
        Call::Lookup => store.lookup(scope, k).await.map_or_else(error_return, Return::Lookup),
    }
}

/// What a store's error returns in a history.
fn error_return(e: reservation_store::StoreError) -> Return {
    match e {
        reservation_store::StoreError::Storage(s) => match ProtocolError::of(&s) {
            Some(p) => Return::Protocol(p.to_string()),
            None => {
                Return::Storage { message: reservation_store::error_chain(&s), indeterminate: s.is_indeterminate() }
            }
        },
        other => Return::Error(show_error(&other)),
    }
}

/// Runs a history's operations on a store and stamps each: its call and return on one shared
/// counter, and the clock just before and just after.
pub(crate) struct Recorder<'a, H> {
    pub(crate) harness: &'a H,
    pub(crate) names: &'a Names,
    pub(crate) clock: &'a ManualClock,
    pub(crate) stamp: &'a AtomicU64,
}

impl<H: Harness> Recorder<'_, H> {
    /// Runs `call` on `store` from `(thread, round)`, on the key of index `key.0`, named `key.1`;
    /// a panic of the store is its result.
    pub(crate) fn run(
        &self,
        store: &H::Store,
        (thread, round): (usize, usize),
        key: (usize, &Key),
        call: Call,
    ) -> Event {
        let clock_at_call = self.clock.now();
        let called = self.stamp.fetch_add(1, Ordering::SeqCst);
        let ret = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.harness.block_on(invoke(store, self.names, key.1, call, entry(called)))
        }))
        .unwrap_or_else(|p| Return::Error(format!("the store panicked: {}", panic_message(&*p))));
        let returned = self.stamp.fetch_add(1, Ordering::SeqCst);
        let clock_at_return = self.clock.now();
        Event { thread, round, clock_at_call, clock_at_return, key: key.0, call, ret, called, returned }
    }

    /// Looks up `keys` (each an index and its name) on `store` from `thread` at once
    /// ([`Harness::lookups`]): they share one call and one return stamp.
    pub(crate) fn lookups(&self, store: &H::Store, thread: usize, keys: &[(usize, Key)]) -> Vec<Event> {
        let scope = &self.names.scope;
        let asked: Vec<(&ReservationScope, &Key)> = keys.iter().map(|(_, k)| (scope, k)).collect();
        let clock_at_call = self.clock.now();
        let called = self.stamp.fetch_add(1, Ordering::SeqCst);
        let answers = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.harness.lookups(store, &asked)))
            .map_err(|p| format!("the store panicked: {}", panic_message(&*p)));
        let returned = self.stamp.fetch_add(1, Ordering::SeqCst);
        let clock_at_return = self.clock.now();
        let count = keys.len();
        let answers: Vec<Return> = match answers {
            Ok(answers) if answers.len() == count => {
                answers.into_iter().map(|a| a.map_or_else(error_return, Return::Lookup)).collect()
            }
            Ok(answers) => {
                let message = format!("the harness gave {} answers to {count} lookups", answers.len());
                vec![Return::Error(message); count]
            }
            Err(message) => vec![Return::Error(message); count],
        };
        keys.iter()
            .zip(answers)
            .map(|((key, _), ret)| Event {
                thread,
                round: 0,
                clock_at_call,
                clock_at_return,
                key: *key,
                call: Call::Lookup,
                ret,
                called,
                returned,
            })
            .collect()
    }
}

/// The generators of thread `t` of a history of seed `seed`: its own, for its calls, and the one
/// every thread shares, for the rounds' clock moves and hot keys ([`next_round`]).
pub(crate) fn generators(seed: u64, t: usize) -> (XorShift, XorShift) {
    (XorShift(seed ^ (0x2545_f491_4f6c_dd1d_u64.wrapping_mul(t as u64 + 1)) | 1), XorShift(seed | 1))
}

/// The next round's clock move (often zero) and hot key, drawn from the shared generator.
pub(crate) fn next_round(mover: &mut XorShift) -> (u64, usize) {
    let step = if mover.below(2) == 0 { 0 } else { mover.below(25) };
    (step, mover.below(KEYS as u64) as usize)
}

/// The event that stands for thread `t`, which panicked outside a store call with `payload`.
pub(crate) fn panicked(t: usize, payload: &(dyn std::any::Any + Send)) -> Event {
    Event {
        thread: t,
        round: 0,
        clock_at_call: START,
        clock_at_return: START,
        key: 0,
        call: Call::Lookup,
        ret: Return::Error(format!("thread {t} panicked: {}", panic_message(payload))),
        called: 0,
        returned: 0,
    }
}

/// Runs `ops` operations (about; whole rounds) from `threads` threads on a fresh store of
/// `harness` and returns the history, ordered by call. Between rounds the clock moves by a random
/// step (often zero); during a round thread 0 moves it by a millisecond after one operation in
/// four, so that other threads' operations see it move.
pub fn record<H: Harness>(harness: &H, threads: usize, ops: usize, seed: u64) -> (Names, Vec<Event>) {
    let threads = threads.max(1);
    let names = Names::new();
    let clock = ManualClock::new(START);
    let store = harness.store(clock.clone());
    let rounds = ops.div_ceil(threads * ROUND).max(1);
    let stamp = AtomicU64::new(0);
    let recorder = Recorder { harness, names: &names, clock: &clock, stamp: &stamp };
    let barrier = Barrier::new(threads);
    let mut events: Vec<Event> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (names, store, clock, barrier, recorder) = (&names, &store, &clock, &barrier, &recorder);
                scope.spawn(move || {
                    let (mut r, mut mover) = generators(seed, t);
                    let mut out = Vec::with_capacity(rounds * ROUND);
                    for round in 0..rounds {
                        // Every thread draws the same move and hot key; the leader applies the
                        // move while the others wait, so every round starts together.
                        let (step, hot) = next_round(&mut mover);
                        if barrier.wait().is_leader() && round > 0 {
                            clock.advance(step);
                        }
                        barrier.wait();
                        for _ in 0..ROUND {
                            let (key, call) = random_call(&mut r, hot);
                            out.push(recorder.run(store, (t, round), (key, &names.keys[key]), call));
                            if t == 0 && r.below(4) == 0 {
                                clock.advance(1);
                            }
                        }
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().enumerate().flat_map(|(t, h)| h.join().unwrap_or_else(|p| vec![panicked(t, &*p)])).collect()
    });
    events.sort_by_key(|e| e.called);
    (names, events)
}

/// The specification's answer to `e` on `state` at `now`: the next state, if it gives the
/// recorded result (any result, for an indeterminate operation), and the rule that decided it
/// (`None` for a lookup, which writes nothing).
fn apply(
    names: &Names,
    state: &Option<StoredReservation>,
    e: &Event,
    now: Instant,
) -> Option<(Option<StoredReservation>, Option<Rule>)> {
    let any = matches!(e.ret, Return::Storage { indeterminate: true, .. });
    let (next, ok, rule) = match e.call {
        Call::Op(op) => {
            let s = spec::apply(state.clone(), now, op.map(|o| names.owner(o), |h| names.hold(h)));
            (s.next, any || e.ret == Return::Outcome(s.outcome), Some(s.rule))
        }
        Call::Lookup => {
            let seen = spec::lookup(state.as_ref(), now).cloned();
            (state.clone(), any || e.ret == Return::Lookup(seen), None)
        }
    };
    ok.then_some((next, rule))
}

/// A search node: the linearized operations (a bit set), the key's state, and the instant of the
/// last operation placed.
type Node = (Vec<u64>, Option<StoredReservation>, Instant);

/// The WGL search over one key's operations (ordered by call): whether some order that respects
/// real time, with instants that never go back, gives every recorded result.
struct Search<'a> {
    names: &'a Names,
    ops: &'a [&'a Event],
    memo: HashSet<Node>,
    nodes: u64,
    /// The rule of the deepest operation that could not be placed, for the report.
    stuck: Option<(usize, Rule)>,
    /// `Some` to collect every state a whole order ends in ([`final_states`]) rather than stop at
    /// the first order found.
    found: Option<Vec<Option<StoredReservation>>>,
}

/// Most states [`final_states`] collects, and most search nodes it visits.
const MOST_FOUND: usize = 64;
const MOST_NODES: usize = 200_000;

impl Search<'_> {
    /// `written` is the rule of the operation that last wrote `state`, for the report.
    fn run(
        &mut self,
        done: &mut Vec<u64>,
        count: usize,
        state: &Option<StoredReservation>,
        last: Instant,
        written: Option<Rule>,
    ) -> bool {
        if count == self.ops.len() {
            let Some(found) = self.found.as_mut() else { return true };
            if !found.contains(state) {
                found.push(state.clone());
            }
            return false;
        }
        if self.found.as_ref().is_some_and(|f| f.len() >= MOST_FOUND || self.memo.len() >= MOST_NODES) {
            return false;
        }
        if !self.memo.insert((done.clone(), state.clone(), last)) {
            return false;
        }
        self.nodes += 1;
        let is_done = |done: &Vec<u64>, i: usize| done[i / 64] & (1 << (i % 64)) != 0;
        let min_ret = (0..self.ops.len()).filter(|&i| !is_done(done, i)).map(|i| self.ops[i].returned).min();
        let Some(min_ret) = min_ret else { return true };
        for i in 0..self.ops.len() {
            let e = self.ops[i];
            if e.called > min_ret {
                break;
            }
            if is_done(done, i) {
                continue;
            }
            done[i / 64] |= 1 << (i % 64);
            // An indeterminate operation may never have happened.
            if matches!(e.ret, Return::Storage { indeterminate: true, .. })
                && self.run(done, count + 1, state, last, written)
            {
                return true;
            }
            // Each instant of its window not before `last`; of the instants that give one next
            // state, the earliest leaves the most room to the operations after it.
            let mut tried: Vec<Option<StoredReservation>> = Vec::new();
            let mut placed = false;
            let from = e.clock_at_call.max(last);
            let mut now = from;
            while now <= e.clock_at_return {
                if let Some((next, rule)) = apply(self.names, state, e, now) {
                    placed = true;
                    if !tried.contains(&next) {
                        if self.run(done, count + 1, &next, now, rule.or(written)) {
                            return true;
                        }
                        tried.push(next);
                    }
                }
                if now == Instant::MAX {
                    break;
                }
                now = now.saturating_add_millis(1);
            }
            done[i / 64] &= !(1 << (i % 64));
            if !placed && self.stuck.is_none_or(|(depth, _)| count >= depth) {
                self.stuck = Some((count, expected_rule(self.names, state, e, from, written)));
            }
        }
        false
    }
}

/// The rule by which the specification decides `e` on `state` at `now`; for a lookup, the rule
/// that decides what it must show ([`lookup_rule`]), given `written`, the rule of the operation
/// that last wrote `state`.
fn expected_rule(
    names: &Names,
    state: &Option<StoredReservation>,
    e: &Event,
    now: Instant,
    written: Option<Rule>,
) -> Rule {
    match e.call {
        Call::Op(op) => spec::apply(state.clone(), now, op.map(|o| names.owner(o), |h| names.hold(h))).rule,
        Call::Lookup => {
            let shown = match &e.ret {
                Return::Lookup(r) => r.as_ref(),
                _ => None,
            };
            lookup_rule(state.as_ref(), shown, now, written).unwrap_or(Rule::D7)
        }
    }
}

/// Whether the operations `ops` of one key (ordered by call) are linearizable; if not, the rule
/// of the deepest operation no order could place, if any operation was tried.
pub(crate) fn linearizable(names: &Names, ops: &[&Event]) -> Result<u64, Option<Rule>> {
    let mut search = Search { names, ops, memo: HashSet::new(), nodes: 0, stuck: None, found: None };
    let mut done = vec![0u64; ops.len().div_ceil(64)];
    if search.run(&mut done, 0, &None, Instant::ZERO, None) {
        Ok(search.nodes)
    } else {
        Err(search.stuck.map(|(_, r)| r))
    }
}

/// Every state in which some order of all of `ops` (one key's operations, ordered by call) that
/// respects real time and gives every recorded result leaves the key: what a history allows the
/// key to hold after it. The search of [`linearizable`], going on past the first order found; at
/// most 64 states, and it stops after 200,000 nodes (with what it found by then).
pub(crate) fn final_states(names: &Names, ops: &[&Event]) -> Vec<Option<StoredReservation>> {
    let mut search = Search { names, ops, memo: HashSet::new(), nodes: 0, stuck: None, found: Some(Vec::new()) };
    let mut done = vec![0u64; ops.len().div_ceil(64)];
    search.run(&mut done, 0, &None, Instant::ZERO, None);
    search.found.unwrap_or_default()
}

/// What a linearizability run did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Stats {
    /// Operations in the histories.
    pub ops: usize,
    /// Search nodes visited, over all keys.
    pub nodes: u64,
    /// Time to record the history.
    pub record: Duration,
    /// Time to decide it.
    pub check: Duration,
}

/// Decides whether `events` (ordered by call) are linearizable against the specification, key by
/// key, with every storage error a failure ([`Faults::Forbidden`]); see [`check_history_with`].
pub fn check_history(names: &Names, events: &[Event]) -> Result<u64, Failure> {
    check_history_with(names, events, Faults::Forbidden)
}

/// Decides whether `events` (ordered by call) are linearizable against the specification, key by
/// key, judging storage errors by `faults`; if not, a failure with a per-thread timeline of the
/// shortest prefix (by call) of the failing key's operations that cannot be linearized. An
/// invalid argument or a panic always fails: the check's operations are all valid.
pub fn check_history_with(names: &Names, events: &[Event], faults: Faults) -> Result<u64, Failure> {
    const CHECK: &str = "linearizability";
    precheck(CHECK, names, events, faults)?;
    let mut nodes = 0;
    for (key, ops) in by_key(events) {
        match linearizable(names, &ops) {
            Ok(n) => nodes += n,
            Err(_) => return Err(report(CHECK, names, key, &ops)),
        }
    }
    Ok(nodes)
}

/// What fails a history of check `check` before any order is searched: an adapter that broke the
/// protocol, an invalid argument or a panic, a storage error where `faults` forbids them, a
/// clock that went back during an operation, or names that name no owner or hold.
pub(crate) fn precheck(check: &str, names: &Names, events: &[Event], faults: Faults) -> Result<(), Failure> {
    if names.owners.is_empty() || names.holds.is_empty() {
        return Err(Failure::without_rule(
            check,
            "the history's Names lists no owners or no holds, so its owner and hold indices name nothing",
        ));
    }
    if let Some(e) = events.iter().find(|e| matches!(e.ret, Return::Protocol(_))) {
        let mut f = Failure::protocol(check, format!("thread {}: {}", e.thread, names.show(e)));
        f.context.push(format!("scope s0 = {}", names.scope));
        return Err(f);
    }
    let failed = |e: &&Event| match e.ret {
        Return::Error(_) | Return::Protocol(_) => true,
        Return::Storage { .. } => faults == Faults::Forbidden,
        Return::Outcome(_) | Return::Lookup(_) => false,
    };
    if let Some(e) = events.iter().find(failed) {
        let rule = expected_rule(names, &None, e, e.clock_at_call, None);
        let mut f = Failure::new(check, rule, format!("an operation failed: {}", names.show(e)));
        f.step_rule = Some(rule);
        f.property = Some("every operation of a concurrent run must complete; one failed or panicked");
        f.context.push(format!("scope s0 = {}", names.scope));
        return Err(f);
    }
    if let Some(e) = events.iter().find(|e| e.clock_at_return < e.clock_at_call) {
        return Err(Failure::without_rule(
            check,
            format!("the history's clock went back during an operation: {}", names.show(e)),
        ));
    }
    Ok(())
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

/// The failure of check `check` for key `key`, whose operations `ops` are not linearizable.
pub(crate) fn report(check: &str, names: &Names, key: usize, ops: &[&Event]) -> Failure {
    // The shortest prefix by call that no order explains.
    let (len, rule) =
        (1..=ops.len()).find_map(|n| linearizable(names, &ops[..n]).err().map(|r| (n, r))).unwrap_or((ops.len(), None));
    let prefix = &ops[..len];
    let mut f = Failure::without_rule(
        check,
        format!(
            "the history of key k{key} is not linearizable: no order of its first {len} operations that \
             respects real time gives the results the store returned"
        ),
    );
    f.rule = rule;
    f.property = Some(ATOMICITY);
    f.step_rule = rule;
    let last = names.keys.len().max(key + 1) - 1;
    f.context.push(format!("scope s0 = {}; keys k0..k{last}; clock started at {START}", names.scope));
    f.context.push("[call .. return] stamps of one shared counter; an operation precedes another when its return stamp is below the other's call stamp".into());
    f.context.push("each operation acts at one instant of its clock window (the clock just before its call .. just after its return), never before an operation that takes effect earlier".into());
    // The operations just before the one no order can place: the earlier ones are summarised.
    let hidden = prefix.len().saturating_sub(SHOWN);
    if hidden > 0 {
        f.context.push(format!("{hidden} earlier operations of k{key}, all placed, are not shown"));
    }
    let shown = prefix.get(hidden..).unwrap_or_default();
    let threads = shown.iter().map(|e| e.thread).max().map_or(0, |t| t + 1);
    for t in 0..threads {
        let mut lines = String::new();
        for e in shown.iter().filter(|e| e.thread == t) {
            let _ = write!(lines, "\n      {}", names.show(e));
        }
        f.transcript.push(format!("thread {t}:{lines}"));
    }
    f
}

/// Replays a failing history's seed on one thread: if that history fails too, the bug needs no
/// concurrency, and its failure says so and names the sequential rule; otherwise `failure`, the
/// concurrent one, stands.
fn sequential_or<H: Harness>(harness: &H, ops: usize, seed: u64, failure: Failure) -> Failure {
    if failure.property != Some(ATOMICITY) {
        return failure;
    }
    let (names, events) = record(harness, 1, ops, seed);
    match check_history(&names, &events) {
        Err(mut single) if single.property == Some(ATOMICITY) => {
            // The headline names the rule of the step the single thread could not explain.
            single.property = Some(SEQUENTIAL);
            single.step_rule = None;
            single
        }
        _ => failure,
    }
}

/// Records histories on `harness` with `settings` and decides each: up to
/// [`crate::Settings::histories`] of them, within [`crate::Settings::concurrency_budget`].
pub fn run<H: Harness>(harness: &H, settings: &crate::Settings) -> Result<Stats, Failure> {
    let seed = settings.seed.unwrap_or(0x5eed_1234_abcd_0001);
    let mut stats = Stats { ops: 0, nodes: 0, record: Duration::ZERO, check: Duration::ZERO };
    // A race shows in some histories only: record several, each on a fresh store, until the
    // count or the time budget runs out (at least one).
    let budget = WallInstant::now();
    for attempt in 0..settings.histories.max(1) {
        if attempt > 0 && budget.elapsed() >= settings.concurrency_budget {
            break;
        }
        let started = WallInstant::now();
        let seed = seed.wrapping_add(attempt as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let (names, events) = record(harness, settings.threads, settings.concurrent_ops, seed);
        stats.record += started.elapsed();
        let started = WallInstant::now();
        match check_history(&names, &events) {
            Ok(nodes) => stats.nodes += nodes,
            Err(failure) => return Err(sequential_or(harness, settings.concurrent_ops, seed, failure)),
        }
        stats.check += started.elapsed();
        stats.ops += events.len();
    }
    Ok(stats)
}
