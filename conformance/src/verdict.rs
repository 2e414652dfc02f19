//! The verdict on a history: linearizable against the specification key by key (the search,
//! [`crate::search`]), with storage errors forbidden or tolerated ([`StorageErrors`]); or the
//! failure, with a per-thread timeline of the shortest prefix of the failing key's operations
//! that no order explains. The linearizability check, the fault check and the crash check judge
//! their histories so.

use std::fmt::Write as _;
use std::path::Path;

use crate::drawing::Drawing;
use crate::failure::Failure;
use crate::gate::Ceilings;
use crate::harness::START;
use crate::histories;
use crate::history::{Event, History, Names, Return, by_key};
use crate::search::{BUDGET, Undecided, expected_rule, final_states, linearizable, shortest_failing_prefix};
use crate::show::show_state;

/// The property this check decides, as its failures state it.
pub const ATOMICITY: &str =
    "atomicity (H1) broken: each operation must be one linearizable read-modify-write of one key";

/// Most operations of the failing prefix a report prints.
const SHOWN: usize = 24;

/// How [`check_history_with`] judges the storage errors of a history.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StorageErrors {
    /// A storage error fails the history: the suite's own run, on a healthy store.
    Forbidden,
    /// A determinate storage error is an operation that did not happen; an indeterminate one may
    /// have happened (with any outcome) or not. For runs that inject faults: killed connections,
    /// restarted servers.
    Tolerated,
}

/// Decides whether `events` (ordered by call) are linearizable against the specification, key by
/// key, with every storage error a failure ([`StorageErrors::Forbidden`]); see
/// [`check_history_with`].
pub fn check_history(names: &Names, events: &[Event]) -> Result<u64, Failure> {
    check_history_with(names, events, StorageErrors::Forbidden)
}

/// Decides whether `events` (ordered by call) are linearizable against the specification, key by
/// key, judging storage errors by `errors`; if not, a failure with a per-thread timeline of the
/// shortest prefix (by call) of the failing key's operations that cannot be linearized. An
/// invalid argument or a panic always fails: the check's operations are all valid.
pub fn check_history_with(names: &Names, events: &[Event], errors: StorageErrors) -> Result<u64, Failure> {
    const CHECK: &str = "linearizability";
    precheck(CHECK, names, events, errors).map_err(|f| f.with_whole_history(&whole(names, events)))?;
    let mut nodes = 0;
    for (key, ops) in by_key(events) {
        match linearizable(names, &ops) {
            Ok(decided) if decided.verdict.is_ok() => nodes += decided.cost.nodes,
            Ok(_) => return Err(report(CHECK, names, key, &ops).with_whole_history(&whole(names, events))),
            Err(u) => return Err(undecided(CHECK, Undecided { key, ..u })),
        }
    }
    Ok(nodes)
}

/// The history of `names` and `events`, for a failure's drawing.
fn whole(names: &Names, events: &[Event]) -> History {
    History { names: names.clone(), events: events.to_vec() }
}

/// The failure of check `check` whose judge could not decide the history of key `u.key` within
/// its budget: headlined as undecided, no rule named, with the segment's shape.
pub(crate) fn undecided(check: &str, u: Undecided) -> Failure {
    let mut f = Failure::without_rule(
        check,
        format!(
            "the history of key k{key} could not be decided within the judge's budget of {BUDGET} steps: its \
             segment of {ops} operations from its operation {first} on (no quiet point inside) has {in_flight} in \
             flight at once at most, {unknown} with an unknown outcome and clock windows up to {window} ms; the \
             search stopped after {steps} steps",
            key = u.key,
            ops = u.ops,
            first = u.first + 1,
            in_flight = u.in_flight,
            unknown = u.unknown,
            window = u.window,
            steps = u.steps,
        ),
    );
    f.undecided = Some(u);
    f
}

/// `failure`, when it is undecided, with `history`, of check `check`'s run of seed `seed`,
/// written in `dir` where its replay line says, and the narrower ceilings (than `ceilings`, those
/// it recorded with) that the next run of the check records with, noted there.
pub(crate) fn with_undecided(
    mut failure: Failure,
    dir: &Path,
    (check, seed): (&str, u64),
    ceilings: Ceilings,
    history: &History,
) -> Failure {
    let Some(undecided) = failure.undecided else { return failure };
    failure.context.push(format!("recorded with the ceilings: {ceilings}"));
    let narrower = ceilings.narrower_than(&undecided);
    match histories::narrow(dir, check, narrower) {
        Ok(path) => failure.context.push(format!(
            "the next run of this check records narrower histories ({narrower}), as {} says",
            path.display()
        )),
        Err(e) => failure.context.push(format!("the narrower ceilings could not be noted: {e}")),
    }
    let written = match histories::write(dir, check, seed, history) {
        Ok(path) => format!("the history is written to {}", path.display()),
        Err(e) => format!("the history could not be written to {}: {e}", dir.display()),
    };
    failure.replay = Some(match failure.replay.take() {
        Some(replay) => format!("{replay}\n{written}"),
        None => written,
    });
    failure
}

/// What fails a history of check `check` before any order is searched: an adapter that broke the
/// protocol, an invalid argument or a panic, a storage error where `errors` forbids them, a
/// clock that went back during an operation, or names that name no owner or hold.
pub(crate) fn precheck(check: &str, names: &Names, events: &[Event], errors: StorageErrors) -> Result<(), Failure> {
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
        Return::Storage { .. } => errors == StorageErrors::Forbidden,
        Return::Outcome(_) | Return::Lookup(_) => false,
    };
    if let Some(e) = events.iter().find(failed) {
        let rule = expected_rule(names, &None, e, e.clock_at_call, None);
        let mut f = Failure::new(check, rule, format!("an operation failed: {}", names.show(e)))
            .with_drawing(Drawing::at(names, &[], e));
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

/// The failure of check `check` for key `key`, whose operations `ops` are not linearizable.
pub(crate) fn report(check: &str, names: &Names, key: usize, ops: &[&Event]) -> Failure {
    // The shortest prefix by call that no order explains.
    let (len, rule) = match shortest_failing_prefix(names, ops) {
        Ok(found) => found.unwrap_or((ops.len(), None)),
        Err(u) => return undecided(check, Undecided { key, ..u }),
    };
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
    f = f.with_drawing(drawn(names, key, ops, len));
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

/// What a failure's page draws of key `key`, whose operations `ops` no order explains past the
/// first `len`: those before the last placed, the last the one no order can place, and the states
/// the key can be in after each of the last few placed.
fn drawn(names: &Names, key: usize, ops: &[&Event], len: usize) -> Drawing {
    let events: Vec<Event> = ops.iter().map(|e| (*e).clone()).collect();
    let mut d = Drawing::new(History { names: names.clone(), events });
    let placed = &ops[..len.saturating_sub(1)];
    d.key = Some(key);
    d.placed = placed.iter().map(|e| e.called).collect();
    d.failing = ops.get(len.saturating_sub(1)).map(|e| e.called);
    for end in placed.len().saturating_sub(SHOWN)..placed.len() {
        if let Ok(states) = final_states(names, &placed[..=end]) {
            d.states.push((placed[end].called, states.iter().map(|s| show_state(s.as_ref())).collect()));
        }
    }
    d
}
