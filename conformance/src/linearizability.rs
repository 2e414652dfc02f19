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
//! The recorders keep every history within [`crate::Ceilings`] (operations in flight on one key,
//! operations and unknown outcomes between two quiet points of a key, clock windows), and the
//! search cuts a key's history at its quiet points and judges it segment by segment, each with a
//! budget: a judge that always ends, saying *undecided* (a failure of its own, naming no rule)
//! where a history beyond the ceilings exhausts it. See the module `search` in the source for
//! the bound.
//!
//! The history (its types are re-exported here), its recording (the one contended workload), the
//! search and the verdict on a history are modules of their own, shared with the fault check and
//! the crash check; this module holds the check's runs.

use std::time::{Duration, Instant as WallInstant};

use crate::erased::DynHarness;
use crate::failure::Failure;
use crate::gate::Ceilings;
use crate::histories;
pub use crate::history::{Call, Event, History, KEYS, Names, Return};
pub use crate::record::{record, record_with};
pub use crate::verdict::{ATOMICITY, StorageErrors, check_history, check_history_with};

/// The property a failure states when a single thread's history already breaks a rule: no
/// concurrency is needed to show the bug.
pub const SEQUENTIAL: &str =
    "a single thread's operations already break the rule: the bug is not a race (no concurrency needed)";

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
    /// The longest time one history took to decide.
    pub longest_check: Duration,
    /// The ceilings the histories were recorded within.
    pub ceilings: Ceilings,
}

/// The check's name, as the suite lists it.
const CHECK: &str = "linearizability";

/// Replays a failing history's seed on one thread: if that history fails too, the bug needs no
/// concurrency, and its failure says so and names the sequential rule; otherwise `failure`, the
/// concurrent one, stands.
fn sequential_or(harness: &dyn DynHarness, ops: usize, seed: u64, failure: Failure) -> Failure {
    if failure.property != Some(ATOMICITY) {
        return failure;
    }
    let (names, events) = record_with(harness, 1, ops, seed, Ceilings::default());
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
/// [`crate::Settings::history_dir`] of them, within [`crate::Settings::concurrency_budget`].
pub fn run(harness: &dyn DynHarness, settings: &crate::Settings) -> Result<Stats, Failure> {
    let run_seed = settings.seed_or(0x5eed_1234_abcd_0001);
    let dir = settings.history_dir_or_default();
    let ceilings = histories::effective(&dir, CHECK, settings.ceilings);
    let mut stats = Stats {
        ops: 0,
        nodes: 0,
        record: Duration::ZERO,
        check: Duration::ZERO,
        longest_check: Duration::ZERO,
        ceilings,
    };
    // A race shows in some histories only: record several, each on a fresh store, until the
    // count or the time budget runs out (at least one).
    let budget = WallInstant::now();
    for attempt in 0..settings.histories.max(1) {
        if attempt > 0 && budget.elapsed() >= settings.concurrency_budget {
            break;
        }
        let started = WallInstant::now();
        let seed = run_seed.wrapping_add(attempt as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let (names, events) = record_with(harness, settings.threads, settings.concurrent_ops, seed, ceilings);
        stats.record += started.elapsed();
        let started = WallInstant::now();
        let verdict = check_history(&names, &events);
        let took = started.elapsed();
        stats.check += took;
        stats.longest_check = stats.longest_check.max(took);
        match verdict {
            Ok(nodes) => stats.nodes += nodes,
            Err(failure) if failure.undecided.is_some() => {
                let history = History { names, events };
                let mut failure = crate::verdict::with_undecided(failure, &dir, (CHECK, seed), ceilings, &history);
                let written = failure.replay.take().unwrap_or_default();
                failure.replay =
                    Some(format!("{}\n{written}", crate::settings::replay(&failure.check.clone(), run_seed)));
                return Err(failure);
            }
            Err(failure) => {
                let mut failure = sequential_or(harness, settings.concurrent_ops, seed, failure);
                failure.replay = Some(crate::settings::replay(&failure.check.clone(), run_seed));
                return Err(failure);
            }
        }
        stats.ops += events.len();
    }
    Ok(stats)
}
