//! Whom a key's failure is to blame on: a harm, or the store's answers alone (see the runner's
//! documentation for what "before a harm" means).

use std::collections::{BTreeMap, BTreeSet};

use reservation_store::spec::{self, Reservation};
use reservation_store::{HoldId, Instant, Operation, ReleaseVersion, StoredReservation, Version};

use super::Harm;
use crate::failure::Failure;
use crate::history::{Call, Event, Names, Return};
use crate::search::{Undecided, final_states, linearizable, linearizable_from, shortest_failing_prefix};
use crate::verdict;

/// A key's failure that a harm is to blame for: what a check says of it.
pub(crate) struct Blamed<'e> {
    /// The key.
    pub(crate) key: usize,
    /// The harm.
    pub(crate) harm: &'e Harm,
    /// The key's operations up to the one that went wrong, the last (the shortest prefix by call
    /// that no order explains).
    pub(crate) ops: &'e [&'e Event],
    /// The states that what came before the harm allows the key to hold.
    pub(crate) allowed: Vec<Option<StoredReservation>>,
    /// A state the harm left the key in, which explains what the store answered after it, when
    /// `allowed` does not hold it.
    pub(crate) left: Option<Option<StoredReservation>>,
}

/// What [`blame`] found.
enum Found {
    /// The history is linearizable.
    Nothing,
    /// The harm of this index is to blame for the failure of the first `len` operations.
    Harm { harm: usize, len: usize, allowed: Vec<Option<StoredReservation>>, left: Option<Option<StoredReservation>> },
    /// The store's answers alone: the failure of `ops`, and what to add to it.
    Answers(Vec<Event>, Option<String>),
}

/// Judges key `key`'s operations `ops` (ordered by call), recorded by check `check` while `harms`
/// were caused (in order): nothing when linearizable; otherwise `explain`'s failure when a harm
/// is to blame, and the history's own failure (naming the rule it breaks) when not. Undecided
/// when the search could not decide within its budget.
///
/// `set_back` holds the lookups (by call stamp) that the suite made with its clock set back,
/// recorded at the instant the store must still decide at (D10 across a restart), each with the
/// instant the suite's clock read: a harm that lost the store's clock would have it decide there,
/// so that is the window such a lookup has when asking what state a harm could have left.
pub(crate) fn blame(
    check: &str,
    names: &Names,
    (key, ops): (usize, &[&Event]),
    harms: &[Harm],
    set_back: &BTreeMap<u64, Instant>,
    explain: impl Fn(&Blamed<'_>) -> Failure,
) -> Result<(), Failure> {
    let owned: Vec<Event> = ops.iter().map(|e| (*e).clone()).collect();
    let found = find(names, &owned, harms, set_back).map_err(|u| verdict::undecided(check, Undecided { key, ..u }))?;
    match found {
        Found::Nothing => Ok(()),
        Found::Harm { harm, len, allowed, left } => {
            Err(explain(&Blamed { key, harm: &harms[harm], ops: &ops[..len], allowed, left }))
        }
        Found::Answers(events, note) => {
            let refs: Vec<&Event> = events.iter().collect();
            let mut f = verdict::report(check, names, key, &refs);
            f.context.extend(note);
            Err(f)
        }
    }
}

/// The operations of `ops` called before `at`, those that had not returned by then taken as
/// operations whose outcome is unknown. `at` is a harm's start, the history counter's next stamp
/// then: an event stamped `at` or later came after it.
fn called_before(ops: &[Event], at: u64) -> Vec<Event> {
    ops.iter().filter(|e| e.called < at).map(|e| if e.returned >= at { unknown(e) } else { e.clone() }).collect()
}

/// `e`, its outcome unknown.
fn unknown(e: &Event) -> Event {
    Event { ret: Return::Storage { message: "in flight when a harm began".into(), indeterminate: true }, ..e.clone() }
}

fn refs(ops: &[Event]) -> Vec<&Event> {
    ops.iter().collect()
}

/// Whom the failure of `ops` (if any) is to blame on, among `harms`. The operations before a harm
/// are a prefix of `ops` by call: the indices of what is found are those of `ops`.
fn find(names: &Names, ops: &[Event], harms: &[Harm], set_back: &BTreeMap<u64, Instant>) -> Result<Found, Undecided> {
    let Some((len, _)) = shortest_failing_prefix(names, &refs(ops))? else { return Ok(Found::Nothing) };
    let wrong = &ops[len - 1];
    // The last harm that may have lost or changed a write and began before the wrong answer.
    let Some(i) = harms.iter().rposition(|h| h.may_lose_writes() && h.began < wrong.returned) else {
        return Ok(Found::Answers(ops.to_vec(), None));
    };
    let harm = &harms[i];
    let before = called_before(ops, harm.began);
    if linearizable(names, &refs(&before))?.verdict.is_err() {
        // The history already broke a rule before this harm: an earlier harm, or none.
        return match find(names, &before, &harms[..i], set_back)? {
            Found::Answers(events, None) => Ok(Found::Answers(
                events,
                Some(format!(
                    "this precedes harm {} ({}): what came before it already breaks the rule",
                    harm.n, harm.fault
                )),
            )),
            found => Ok(found),
        };
    }
    // What the history before the harm allows the key to hold: with the operations in flight
    // when it began as they answered, when that is consistent (an operation acknowledged after
    // the harm took effect before it or after it, and either way its effect must be there);
    // otherwise with those taken as unknown.
    let recorded: Vec<Event> = ops.iter().filter(|e| e.called < harm.began).cloned().collect();
    let mut allowed = final_states(names, &refs(&recorded))?;
    if allowed.is_empty() {
        allowed = final_states(names, &refs(&before))?;
    }
    // What followed: the operations up to the wrong one that were in flight when the harm began
    // or called since, from a state the harm could have left. The harm took effect at one moment
    // of its span: those called before it ended may have run before that moment or after it, so
    // their outcomes are taken as unknown.
    let after: Vec<Event> = ops[..len]
        .iter()
        .filter(|e| e.returned >= harm.began)
        .map(|e| match set_back.get(&e.called) {
            _ if e.called < harm.ended => unknown(e),
            Some(back) => Event { clock_at_call: *back, clock_at_return: *back, ..e.clone() },
            None => e.clone(),
        })
        .collect();
    // A lookup right after the harm, with nothing else on the key in flight, shows what the harm
    // left: an allowed state, and the harm changed nothing of this key; another, and it did.
    if let Some((shown, at)) = right_after(ops, harm) {
        let allowed_shown = |now| allowed.iter().any(|s| spec::lookup(s.as_ref(), now).cloned() == shown);
        if allowed_shown(at) {
            return Ok(Found::Answers(
                ops.to_vec(),
                Some(format!(
                    "harm {} ({}) came before, but a lookup right after it showed what the key may hold: the harm \
                     changed nothing of this key, and the store broke the rule after it",
                    harm.n, harm.fault
                )),
            ));
        }
        let explained = linearizable_from(names, &refs(&after), std::slice::from_ref(&shown))?.verdict.is_ok();
        if explained {
            return Ok(Found::Harm { harm: i, len, allowed, left: Some(shown) });
        }
    }
    // Otherwise any state the history names could be what the harm left: one a lookup showed, one
    // the history before it allows, or one made of the history's owners, holds and versions.
    for start in candidates(names, ops, &allowed) {
        if linearizable_from(names, &refs(&after), std::slice::from_ref(&start))?.verdict.is_ok() {
            let left = (!allowed.contains(&start)).then_some(start);
            return Ok(Found::Harm { harm: i, len, allowed, left });
        }
    }
    Ok(Found::Answers(
        ops.to_vec(),
        Some(format!(
            "harm {} ({}) came before, but no state it could have left the key in explains what the store answered \
             after it: the store broke the rule after the harm, not across it",
            harm.n, harm.fault
        )),
    ))
}

/// The first lookup of the key called once `harm` had ended, when nothing else on the key was in
/// flight with it or since the harm began: what it showed, and the instant it asked at (for a
/// lookup made with the suite's clock set back, the instant the store must decide at).
fn right_after(ops: &[Event], harm: &Harm) -> Option<(Option<StoredReservation>, Instant)> {
    let first = ops.iter().position(|e| e.called >= harm.began)?;
    let e = &ops[first];
    let quiet =
        ops[..first].iter().all(|o| o.returned < e.called) && ops[first + 1..].iter().all(|o| o.called > e.returned);
    match (&e.call, &e.ret) {
        (Call::Lookup, Return::Lookup(shown)) if quiet && e.called >= harm.ended => {
            Some((shown.clone(), e.clock_at_call))
        }
        _ => None,
    }
}

/// The states a harm could have left a key in, for a history `ops` of it whose operations before
/// the harm allow `allowed`: free; each state a lookup showed; each allowed; each owner's
/// confirmation at each version the history names; each owner's pending reservation with each set
/// of the history's holds, at each expiry a lookup showed or an allowed state has.
fn candidates(names: &Names, ops: &[Event], allowed: &[Option<StoredReservation>]) -> Vec<Option<StoredReservation>> {
    let mut states: Vec<Option<StoredReservation>> = vec![None];
    let mut add = |s: Option<StoredReservation>| {
        if !states.contains(&s) {
            states.push(s);
        }
    };
    let shown: Vec<Option<StoredReservation>> = ops
        .iter()
        .filter_map(|e| match &e.ret {
            Return::Lookup(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    for s in shown.iter().chain(allowed) {
        add(s.clone());
    }
    let mut versions: Vec<u64> = vec![0];
    let mut expiries: Vec<Instant> = Vec::new();
    for s in shown.iter().chain(allowed).flatten() {
        match s {
            Reservation::Confirmed(c) => versions.push(c.version.as_u64()),
            Reservation::Pending(p) => expiries.push(p.expires_at()),
        }
    }
    for e in ops {
        if let Call::Op(
            Operation::Confirm { version, .. } | Operation::Release { version: ReleaseVersion::At(version), .. },
        ) = e.call
        {
            versions.push(version.as_u64());
        }
    }
    versions.sort_unstable();
    versions.dedup();
    expiries.sort_unstable();
    expiries.dedup();
    let holds: Vec<BTreeSet<HoldId>> = (1..1u32 << names.holds.len())
        .map(|mask| {
            names.holds.iter().enumerate().filter(|(i, _)| mask & (1 << i) != 0).map(|(_, h)| h.clone()).collect()
        })
        .collect();
    for owner in &names.owners {
        for v in &versions {
            add(Some(Reservation::confirmed(owner.clone(), Version::from_u64(*v))));
        }
        for held in &holds {
            for at in &expiries {
                add(Reservation::pending(owner.clone(), held.clone(), *at));
            }
        }
    }
    states
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use reservation_store::{Operation, Outcome, Ttl};

    use super::blame;
    use crate::failure::Failure;
    use crate::harm::Harm;
    use crate::harness::{Fault, START};
    use crate::history::{Call, Event, Names, Return};

    fn event(thread: usize, (called, returned): (u64, u64), owner: u8, ret: Outcome) -> Event {
        let call = Call::Op(Operation::Reserve { owner, hold: 0, ttl: Ttl::from_millis(1_000_000).unwrap() });
        let ret = Return::Outcome(ret);
        Event { thread, round: 0, clock_at_call: START, clock_at_return: START, key: 0, call, ret, called, returned }
    }

    /// A crash between stamps 2 and 3, after Alice's pending reservation: then Alice's reserve
    /// joins it (the crash lost nothing) and Bob takes the key too. No state the crash could have left lets both take it,
    /// so the store's answers after the crash are to blame (the operations that returned before
    /// the crash, which linearize, are not what came after it).
    #[test]
    fn answers_after_a_harm_that_no_state_it_left_explains_are_the_stores_not_the_harms() {
        let names = Names::new();
        let ops = [
            event(0, (0, 1), 0, Outcome::Taken),
            event(0, (4, 5), 0, Outcome::Joined),
            event(1, (6, 7), 2, Outcome::Taken),
        ];
        let refs: Vec<&Event> = ops.iter().collect();
        let harm = Harm {
            n: 1,
            fault: Fault::Crash,
            point: "between",
            at: Duration::ZERO,
            took: Duration::ZERO,
            recovered_after: Some(Duration::ZERO),
            began: 2,
            ended: 3,
        };
        let blamed_on_the_harm = |_: &super::Blamed<'_>| Failure::without_rule("test", "blamed on the harm");
        let failure = blame("test", &names, (0, &refs), &[harm], &BTreeMap::new(), blamed_on_the_harm)
            .expect_err("two owners took one key");
        let text = failure.to_string();
        assert!(!text.contains("blamed on the harm"), "{text}");
        assert!(text.contains("the store broke the rule after the harm, not across it"), "{text}");
    }
}
