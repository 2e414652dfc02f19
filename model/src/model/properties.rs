//! The model's always-properties: each one's sentence, and the predicate that decides it on a
//! state.

use std::sync::atomic::Ordering;

use reservation_store::spec;
use reservation_store::{Instant, Outcome};

use super::ReservationModel;
use crate::state::*;

/// One safety property of the model: the sentence that names it and the predicate that decides
/// it on a state.
#[derive(Clone, Copy)]
pub struct SafetyProperty {
    /// The property, as a sentence; the checker reports it by this name.
    pub name: &'static str,
    /// Whether a state satisfies it.
    pub holds: fn(&ReservationModel, &State) -> bool,
}

/// The always-properties, in the order `check` reports them: the one table of them.
pub const PROPERTIES: [SafetyProperty; 8] = [
    SafetyProperty { name: P_UNIQUE, holds: unique },
    SafetyProperty { name: P_ONE_OWNER, holds: one_owner },
    SafetyProperty { name: P_CONFIRMED_MOVES, holds: |_, s| s.flags & STEP_CONFIRMED_MOVED == 0 },
    SafetyProperty { name: P_OTHERS, holds: |_, s| s.flags & STEP_TOUCHED_OTHER == 0 },
    SafetyProperty { name: P_NEVER_ABANDONED, holds: |_, s| s.flags & STEP_ABANDONED_CONFIRMED == 0 },
    SafetyProperty { name: P_OLD_RELEASE, holds: |_, s| s.flags & STEP_OLD_RELEASE_FREED == 0 },
    SafetyProperty { name: P_CRASHED_FREE, holds: crashed_free },
    SafetyProperty { name: P_NO_LEAK, holds: no_leak },
];

/// The names of the always-properties, in the order the checker reports them: the names that
/// [`crate::check::CheckOptions::target`], [`crate::check::Verdict::name`] and
/// [`crate::Violation::property`] hold.
pub const ALWAYS: [&str; PROPERTIES.len()] = {
    let mut names = [""; PROPERTIES.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = PROPERTIES[i].name;
        i += 1;
    }
    names
};

/// The names a check hands the checker for the always-properties, in table order: short, because
/// the checker looks each property up by its name (a SipHash of the name) at every state it visits,
/// and with the sentences of [`ALWAYS`] those lookups were a sixth of a check's instructions. The
/// reports name each property by its sentence ([`checker_name`] translates).
pub(crate) const CHECKER_NAMES: [&str; PROPERTIES.len()] = ["P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7"];

/// The name the checker knows the always-property `name` (one of [`ALWAYS`]) by, in a check: its
/// [`CHECKER_NAMES`] entry; `name` itself when it names no always-property.
pub(crate) fn checker_name(name: &'static str) -> &'static str {
    ALWAYS.iter().position(|p| *p == name).and_then(|i| CHECKER_NAMES.get(i).copied()).unwrap_or(name)
}

/// G, uniqueness of committed facts: within the scope, no two different owners each have a
/// latest committed fact that holds the same key.
pub const P_UNIQUE: &str = "no two owners' latest committed facts hold the same key";
/// The store never has two owners for one key: every hold of a pending reservation is an attempt
/// of its owner.
pub const P_ONE_OWNER: &str = "the store never has two owners for one key";
/// A confirmed reservation changes owner or becomes free only through a release by its owner.
pub const P_CONFIRMED_MOVES: &str = "a confirmed key changes owner or is freed only by its owner's release";
/// An operation by one owner never creates, extends, confirms, releases or abandons another
/// owner's live reservation.
pub const P_OTHERS: &str = "an owner's operation never changes another owner's live reservation";
/// A confirmed key is never abandoned.
pub const P_NEVER_ABANDONED: &str = "a confirmed key is never abandoned";
/// A release of an older fact never frees a key that a later fact of the owner confirmed.
pub const P_OLD_RELEASE: &str = "an older fact's release never frees a key a later fact confirmed";
/// A pending reservation all of whose attempts crashed before appending is free once its TTL
/// passes: lookup sees nothing and another owner's reserve takes it.
pub const P_CRASHED_FREE: &str = "a pending key whose attempts all crashed before appending is free after its TTL";
/// No key leaks: once the subscription has applied every committed fact, every confirmed key is
/// held by its owner's latest fact, and every key held by a latest fact is confirmed to its owner.
pub const P_NO_LEAK: &str = "no key leaks once the subscription has applied every fact";

fn unique(m: &ReservationModel, s: &State) -> bool {
    let mut seen = 0u8;
    for o in s.owners.iter().take(usize::from(m.owners())) {
        if let Some(k) = o.latest_key() {
            if seen & (1 << k) != 0 {
                return false;
            }
            seen |= 1 << k;
        }
    }
    true
}

fn one_owner(m: &ReservationModel, s: &State) -> bool {
    s.store.iter().take(usize::from(m.keys())).all(|slot| !slot.has_foreign_hold())
}

fn crashed_free(m: &ReservationModel, s: &State) -> bool {
    let now = Instant::from_millis(u64::from(s.now));
    s.store.iter().take(usize::from(m.keys())).all(|slot| {
        if slot.tag != PENDING || slot.is_live(s.now) || !m.all_crashed_before(s, *slot) {
            return true;
        }
        // Free means: lookup sees nothing, and another owner's reserve takes it.
        let other = (slot.owner + 1) % m.owners().max(1);
        let taken = m.owners() == 1
            || m.reserve_op(other, 0)
                .and_then(|op| m.transition(*slot, s.now, op))
                .is_some_and(|(_, o, _)| o == Outcome::Taken);
        spec::lookup(slot.to_reservation().as_ref(), now).is_none() && taken
    })
}

fn no_leak(m: &ReservationModel, s: &State) -> bool {
    let owners = usize::from(m.owners());
    if !s.owners.iter().take(owners).all(Owner::caught_up) {
        return true;
    }
    let confirmed_held = s.store.iter().take(usize::from(m.keys())).enumerate().all(|(k, slot)| {
        slot.tag != CONFIRMED || s.owners.get(usize::from(slot.owner)).and_then(Owner::latest_key) == Some(k as u8)
    });
    let held_confirmed = s.owners.iter().take(owners).enumerate().all(|(i, o)| match o.latest_key() {
        Some(k) => {
            s.store.get(usize::from(k)).is_some_and(|slot| slot.tag == CONFIRMED && usize::from(slot.owner) == i)
        }
        None => true,
    });
    confirmed_held && held_confirmed
}

// The checker calls these at every state. Each reports only the first state that breaks its
// property: stateright keeps one path per property and a later failure would overwrite it, so
// breadth first would not report the shortest counterexample (it looks for the end of the search
// only every so many states). Later failures are still failures of the same property.
fn first_failure(m: &ReservationModel, holds: bool, property: u8) -> bool {
    holds || m.failed.fetch_or(1 << property, Ordering::Relaxed) & (1 << property) != 0
}
/// Property `I` of [`PROPERTIES`], as the checker calls it on `M`, the model or a search of it
/// (stateright takes function pointers, so the index is a const parameter).
fn checked<M: AsRef<ReservationModel>, const I: usize>(m: &M, s: &State) -> bool {
    let m = m.as_ref();
    PROPERTIES.get(I).is_none_or(|p| first_failure(m, (p.holds)(m, s), I as u8))
}

/// [`checked`] for every property, in table order: a table of another length does not compile.
pub(crate) fn checked_all<M: AsRef<ReservationModel>>() -> [fn(&M, &State) -> bool; PROPERTIES.len()] {
    [
        checked::<M, 0>,
        checked::<M, 1>,
        checked::<M, 2>,
        checked::<M, 3>,
        checked::<M, 4>,
        checked::<M, 5>,
        checked::<M, 6>,
        checked::<M, 7>,
    ]
}
