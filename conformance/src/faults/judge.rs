//! The judge of a fault run's history: key by key, linearizable with storage errors tolerated;
//! a ledger key that lost an acknowledged confirmation, or that two owners were each told they
//! hold, fails the run with rule P1.

use std::collections::BTreeSet;

use reservation_store::rules::Rule;
use reservation_store::spec::{self, Reservation};
use reservation_store::{AggregateRef, HoldId, Instant, Operation, StoredReservation, Version};

use super::{CHECK, FaultReport};
use crate::drawing::Drawing;
use crate::failure::Failure;
use crate::harm::{Blamed, Harm, blame};
use crate::history::{Call, Event, KEYS, Names, Return, by_key};
use crate::search::{Undecided, linearizable};
use crate::verdict::{self, StorageErrors};

/// Whether `ops`, one key's operations, are linearizable; [`Undecided`] when the budget ran out.
fn decided(names: &Names, key: usize, ops: &[&Event]) -> Result<bool, Undecided> {
    match linearizable(names, ops) {
        Ok(decided) => Ok(decided.verdict.is_ok()),
        Err(u) => Err(Undecided { key, ..u }),
    }
}

/// Whether `e`, an operation with an outcome, told its owner that it holds the key, as the
/// specification decides it: among states of every shape (free; pending, live or expired, the
/// owner's or another's; confirmed at several versions, the owner's or another's), some gives
/// `e`'s outcome, and every one that does leaves the key to its owner.
fn tells_holder(names: &Names, e: &Event) -> bool {
    let (Call::Op(op), Return::Outcome(outcome)) = (&e.call, &e.ret) else { return false };
    let me = names.owner(*op.owner());
    let now = e.clock_at_call;
    let mut told = None;
    for state in probe_states(names, me, now) {
        let step = spec::apply(state, now, op.map(|o| names.owner(o), |h| names.hold(h)));
        if step.outcome == *outcome {
            let holds = spec::lookup(step.next.as_ref(), now).is_some_and(|r| r.owner() == me);
            told = Some(told.unwrap_or(true) && holds);
        }
    }
    told.unwrap_or(false)
}

/// One state of every shape, for `me` and for another owner, at `now`.
fn probe_states(names: &Names, me: &AggregateRef, now: Instant) -> Vec<Option<StoredReservation>> {
    let mut states = vec![None];
    let all: BTreeSet<HoldId> = names.holds.iter().cloned().collect();
    let holds = names.holds.iter().map(|h| BTreeSet::from([h.clone()])).chain([all]);
    let owners = names.owners.iter().filter(|o| *o != me).take(1).chain([me]);
    for owner in owners {
        for held in holds.clone() {
            for expires in [now, now.saturating_add_millis(1)] {
                states.push(Reservation::pending(owner.clone(), held.clone(), expires));
            }
        }
        states.extend((0..5).map(|v| Some(Reservation::confirmed(owner.clone(), Version::from_u64(v)))));
    }
    states
}

/// Whether `e` is a confirmation its owner was told it holds: an acknowledged confirmation.
pub(super) fn acknowledged_confirmation(names: &Names, e: &Event) -> bool {
    matches!(e.call, Call::Op(Operation::Confirm { .. })) && tells_holder(names, e)
}

/// The owner of `e`'s operation, if it is one.
fn owner_of<'n>(names: &'n Names, e: &Event) -> Option<&'n AggregateRef> {
    match e.call {
        Call::Op(op) => Some(names.owner(*op.owner())),
        Call::Lookup => None,
    }
}

/// Whether the history `ops` of one key (ordered by call), which is not linearizable, becomes
/// linearizable once an acknowledged confirmation is taken as one that may not have happened,
/// with what came before the loss: its owner's operations called before it, and, when a fault
/// that may lose writes ended after it was acknowledged (at a stamp of `losses`), every
/// operation that returned before the first such fault ended. The confirmation was lost.
fn lost_key(names: &Names, key: usize, ops: &[&Event], losses: &[u64]) -> Result<bool, Undecided> {
    for ack in ops.iter().filter(|e| acknowledged_confirmation(names, e)) {
        let owner = owner_of(names, ack);
        let loss = losses.iter().copied().filter(|s| *s > ack.returned).min();
        let maybe = |e: &Event| {
            (e.called <= ack.called && e.call != Call::Lookup && owner_of(names, e) == owner)
                || loss.is_some_and(|loss| e.returned < loss)
        };
        let rewritten: Vec<Event> = ops
            .iter()
            .map(|e| match maybe(e) {
                true => Event {
                    ret: Return::Storage { message: "taken as may not have happened".into(), indeterminate: true },
                    ..(*e).clone()
                },
                false => (*e).clone(),
            })
            .collect();
        let refs: Vec<&Event> = rewritten.iter().collect();
        if decided(names, key, &refs)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether an owner whose confirmation of the key was acknowledged and another owner were each
/// told they hold it, in `ops`, one key's operations.
fn two_owners(names: &Names, ops: &[&Event]) -> bool {
    let confirmed: Vec<&AggregateRef> =
        ops.iter().filter(|e| acknowledged_confirmation(names, e)).filter_map(|e| owner_of(names, e)).collect();
    ops.iter().any(|e| tells_holder(names, e) && owner_of(names, e).is_some_and(|o| confirmed.iter().any(|c| *c != o)))
}

/// The keys of `events`, a history recorded under faults (ordered by call), that lost an
/// acknowledged confirmation, in key order: each one's history is not linearizable (faults
/// tolerated), but becomes so once an acknowledged confirmation is taken as one that may not have
/// happened, together with its owner's operations called before it and, when a fault that may
/// lose writes (a crash, a failover, a partition, a long pause, a restart) ended after the confirmation was acknowledged,
/// every operation that returned before the first such fault ended. `losses` are the stamps of
/// the history's counter at which those faults had ended: a write acknowledged while one was under
/// way may be lost by it. A confirmation is acknowledged when the
/// specification says that its outcome tells its owner it holds the key.
///
/// [`Undecided`] when the judge's search could not decide a key's history within its budget.
pub fn lost_confirmations(names: &Names, events: &[Event], losses: &[u64]) -> Result<Vec<usize>, Undecided> {
    let mut lost = Vec::new();
    for (key, ops) in by_key(events) {
        if !decided(names, key, &ops)? && lost_key(names, key, &ops, losses)? {
            lost.push(key);
        }
    }
    Ok(lost)
}

/// Judges a fault run's history (ordered by call), filling the report's counts of lost
/// confirmations and of keys with two owners.
pub(super) fn judge(names: &Names, events: &[Event], harms: &[Harm], report: &mut FaultReport) -> Result<(), Failure> {
    verdict::precheck(CHECK, names, events, StorageErrors::Tolerated)?;
    let undecided = |u| verdict::undecided(CHECK, u);
    let keys = by_key(events);
    let mut failing: Vec<usize> = Vec::new();
    for (key, ops) in &keys {
        if !decided(names, *key, ops).map_err(undecided)? {
            failing.push(*key);
        }
    }
    let ledger = |key: &usize| *key >= KEYS;
    // A write acknowledged while a harm that may lose writes was under way may be lost by it too:
    // the stamps at which those harms had ended.
    let losses: Vec<u64> = harms.iter().filter(|h| h.may_lose_writes()).map(|h| h.ended).collect();
    let mut lost: Vec<usize> = Vec::new();
    for key in failing.iter().copied().filter(ledger) {
        if lost_key(names, key, &keys[&key], &losses).map_err(undecided)? {
            lost.push(key);
        }
    }
    let two: Vec<usize> =
        keys.iter().filter(|(key, ops)| ledger(key) && two_owners(names, ops)).map(|(key, _)| *key).collect();
    report.lost = lost.len();
    report.two_owners = two.len();
    if !lost.is_empty() || !two.is_empty() {
        return Err(p1_failure(names, &keys, harms, &lost, &two));
    }
    match failing.first() {
        Some(key) => blame(CHECK, names, (*key, &keys[key]), harms, &Default::default(), |b| after_harm(names, b)),
        None => Ok(()),
    }
}

/// The failure of a key whose history went wrong after a harm that may lose writes, while what
/// came before it is explained by the specification: the harm lost or changed a state the store
/// acknowledged (P1).
fn after_harm(names: &Names, b: &Blamed<'_>) -> Failure {
    let wrong = b.ops[b.ops.len() - 1];
    let mut f = verdict::report(CHECK, names, b.key, b.ops);
    f.rule = Some(Rule::P1);
    f.check_rule = Some(Rule::P1);
    f.property = None;
    f.step_rule = None;
    let left = match &b.left {
        Some(state) => format!(", as if it had left the key {}", crate::show::show_state(state.as_ref())),
        None => String::new(),
    };
    f.problem = format!(
        "k{}: after harm {} ({}), {}; what the store had answered before it is explained by the specification, \
         so the harm lost or changed a state the store acknowledged{left}",
        b.key,
        b.harm.n,
        b.harm.fault,
        names.show(wrong)
    );
    f
}

/// Most keys whose operations a P1 failure shows.
const SHOWN_KEYS: usize = 4;

/// The failure of a run that lost acknowledged confirmations (`lost`) or told two owners they
/// hold one key (`two`).
fn p1_failure(
    names: &Names,
    keys: &std::collections::BTreeMap<usize, Vec<&Event>>,
    harms: &[Harm],
    lost: &[usize],
    two: &[usize],
) -> Failure {
    let list = |keys: &[usize]| {
        let mut shown: Vec<String> = keys.iter().take(SHOWN_KEYS * 2).map(|k| format!("k{k}")).collect();
        if keys.len() > shown.len() {
            shown.push(format!("and {} more", keys.len() - shown.len()));
        }
        shown.join(", ")
    };
    let mut f = Failure::new(
        CHECK,
        Rule::P1,
        format!(
            "{} acknowledged confirmations lost ({}), and {} keys that two owners were each told they hold ({})",
            lost.len(),
            list(lost),
            two.len(),
            list(two)
        ),
    );
    f.check_rule = Some(Rule::P1);
    let named: BTreeSet<&usize> = lost.iter().chain(two).collect();
    for key in named.iter().take(SHOWN_KEYS * 2) {
        let ops = &keys[*key];
        let Some(ack) = ops.iter().find(|e| acknowledged_confirmation(names, e)) else { continue };
        let after = match harms.iter().find(|h| h.ended > ack.returned && h.may_lose_writes()) {
            Some(h) => format!("after harm {h}"),
            None => "with no harm after it".to_owned(),
        };
        let what = if lost.contains(*key) { "lost" } else { "then told to another owner" };
        let said = format!("k{key}: the confirmation acknowledged at stamp {} was {what} {after}", ack.returned);
        // The page draws the first key named, its acknowledged confirmation marked.
        if f.drawing.is_none() {
            let mut drawing = Drawing::at(names, &[], ack);
            drawing.differs = Some(said.clone());
            f = f.with_drawing(drawing);
        }
        f.context.push(said);
    }
    if named.len() > SHOWN_KEYS * 2 {
        f.context.push(format!("and {} more keys", named.len() - SHOWN_KEYS * 2));
    }
    for key in named.into_iter().take(SHOWN_KEYS) {
        let lines: Vec<String> = keys[key].iter().map(|e| format!("\n      {}", names.show(e))).collect();
        f.transcript.push(format!("k{key}:{}", lines.concat()));
    }
    f
}
