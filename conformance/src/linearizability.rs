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
//! A storage error is judged by [`StorageErrors`]: the suite's own run forbids them (every
//! operation of a healthy store completes), while a run that injects faults tolerates them. Then a
//! determinate [`reservation_store::StorageError`] is an operation that did not happen, and an
//! indeterminate one an operation that may have happened, with any outcome, at one point between
//! its call and its return, or never (Jepsen's `:info`). This assumes that a store's operation
//! whose error was returned can no longer take effect later, as holds when its transaction dies
//! with its connection.
//!
//! The history's types are shared with the fault check and the crash check, and so are its
//! recording (the one contended workload) and the search; this module holds the check: the
//! verdict on a history, the failure it reports, and the runs.

use std::fmt::Write as _;
use std::time::{Duration, Instant as WallInstant};

use crate::failure::Failure;
use crate::harness::{Harness, START};
use crate::history::by_key;
pub use crate::history::{Call, Event, KEYS, Names, Return};
pub use crate::record::record;
use crate::search::{expected_rule, linearizable};

/// The property this check decides, as its failures state it.
pub const ATOMICITY: &str =
    "atomicity (H1) broken: each operation must be one linearizable read-modify-write of one key";

/// The property a failure states when a single thread's history already breaks a rule: no
/// concurrency is needed to show the bug.
pub const SEQUENTIAL: &str =
    "a single thread's operations already break the rule: the bug is not a race (no concurrency needed)";

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
    precheck(CHECK, names, events, errors)?;
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
