//! Faults on a seeded schedule: what a harness can do to its store's world, and the check that
//! runs operations while those faults fire.
//!
//! [`run`] records one concurrent history on one store of the harness while a *nemesis* fires
//! faults, and judges it with the specification:
//!
//! - *contended workers* run random operations on a few hot keys while the clock moves, as the
//!   linearizability check does ([`crate::linearizability`]);
//! - *ledger workers* take fresh key after fresh key: owner A reserves it and confirms it at
//!   version 1, then owner B tries to reserve it, which must conflict. Nobody releases these keys,
//!   so an acknowledged confirmation can never legitimately disappear;
//! - the *nemesis* waits a seeded gap, picks one of the faults offered now (the harness's
//!   [`Harness::faults`], [`Fault::ClockJump`] always, [`Fault::Restart`] for a durable harness),
//!   fires it, and probes the store with lookups until it answers again. After every
//!   fault that may lose writes ([`Fault::may_lose_writes`]: a crash, a failover, a partition, a
//!   long pause, a restart) it looks up every ledger key whose confirmation was acknowledged so far.
//!
//! At the end the workers stop, the clock jumps past every expiry, every ledger key is looked
//! up once more, and owner B tries to reserve each acknowledged one again. These lookups and
//! reserves are operations of the history too.
//!
//! The history is judged key by key by the linearizability checker with storage errors tolerated
//! ([`StorageErrors::Tolerated`](crate::linearizability::StorageErrors::Tolerated)): an operation
//! that failed with a determinate storage error did not happen, an indeterminate one may have. A ledger key whose history fails, but is linearizable
//! once its acknowledged confirmation (and its owner's operations before it) are taken as ones
//! that may not have happened, lost that confirmation ([`lost_confirmations`]). A ledger key
//! whose acknowledged confirmation's owner and another owner were each told they hold it has two
//! owners; whether an outcome tells its owner that it holds the key is asked of the
//! specification, never restated. Either fails the run with rule P1; otherwise a key whose
//! history is not linearizable fails it as the linearizability check does. A failure lists every
//! fault fired, with the seed and the command that replays the schedule (the suite's one seed:
//! `RESERVATION_CONFORMANCE_SEED`, `reservation conform --seed`).
//!
//! [`Simulated`] gives any harness [`Fault::CutConnections`] and [`Fault::Pause`], for stores
//! with no server to cut or pause.
//!
//! The run's parts: this module holds the faults, the settings, the report and [`run`]; the
//! workers and the nemesis that record the history are in `nemesis`, the verdict on it in
//! `judge`, the simulated faults in `simulated`. The history (`history`), its recording (`record`)
//! and its search (`search`) are modules of their own, which the linearizability check and the
//! crash check share.

mod judge;
mod nemesis;
mod simulated;

use std::fmt;
use std::time::{Duration, Instant as WallInstant};

use reservation_store::ManualClock;

use crate::erased::{DynHarness, Erased};
use crate::failure::Failure;
use crate::gate::Ceilings;
use crate::harm::{self, Harm, Parts, RECOVERY, Runner};
use crate::harness::{Harness, START};
use crate::history::{History, KEYS, Names, Return, key_named};

pub use crate::harness::{Fault, not_offered};
pub use crate::settings::FaultSettings;
use judge::judge;
pub use judge::lost_confirmations;
use nemesis::World;
pub use simulated::{Simulated, SimulatedStore};

/// The check's name, as the suite lists it.
const CHECK: &str = "faults";

/// The default seed of a fault run, when its settings give none.
const DEFAULT_SEED: u64 = 0x5eed_fa17_0000_0001;

/// A fault the nemesis fired.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Fired {
    /// The fault.
    pub fault: Fault,
    /// When it was fired, from the start of the run.
    pub at: Duration,
    /// How long causing it took, until it had ended ([`Harness::inject`] returned).
    pub took: Duration,
    /// How long after it ended the store answered a lookup again; `None` if it did not within
    /// 30 seconds.
    pub recovered_after: Option<Duration>,
}

impl From<&Harm> for Fired {
    fn from(harm: &Harm) -> Self {
        Fired { fault: harm.fault, at: harm.at, took: harm.took, recovered_after: harm.recovered_after }
    }
}

impl fmt::Display for Fired {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {:.2?}, took {:.2?}, ", self.fault, self.at, self.took)?;
        match self.recovered_after {
            Some(d) => write!(f, "answering {d:.2?} after"),
            None => write!(f, "no answer within {RECOVERY:.0?} after"),
        }
    }
}

/// What a fault run did and found.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct FaultReport {
    /// The seed of the run.
    pub seed: u64,
    /// Operations recorded, lookups after faults included.
    pub ops: usize,
    /// The faults fired, in order.
    pub fired: Vec<Fired>,
    /// Storage errors that were determinate: the operation did not happen.
    pub determinate: usize,
    /// Storage errors that were indeterminate: the operation may have happened.
    pub indeterminate: usize,
    /// Lookups of ledger keys whose confirmation was acknowledged, after every fault that may
    /// lose writes (a crash, a failover, a partition, a long pause, a restart), and at the end.
    pub confirmations_checked: usize,
    /// Acknowledged confirmations found lost (rule P1).
    pub lost: usize,
    /// Keys two owners were each told they hold.
    pub two_owners: usize,
    /// How long judging the history took.
    pub judge: Duration,
    /// The ceilings the history was recorded within (the settings', narrowed after an undecided
    /// run: [`crate::histories`]).
    pub ceilings: Ceilings,
}

impl FaultReport {
    /// The longest time the store took to answer again after a fault.
    pub fn recovery(&self) -> Option<Duration> {
        self.fired.iter().filter_map(|f| f.recovered_after).max()
    }
}

impl fmt::Display for FaultReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut kinds: Vec<(Fault, usize)> = Vec::new();
        for fired in &self.fired {
            match kinds.iter_mut().find(|(k, _)| *k == fired.fault) {
                Some((_, n)) => *n += 1,
                None => kinds.push((fired.fault, 1)),
            }
        }
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        write!(
            f,
            "seed {}: {} operations, {} faults ({}), storage errors {} determinate and {} indeterminate, \
             {} acknowledged confirmations checked, {} lost, {} keys with two owners",
            self.seed,
            self.ops,
            self.fired.len(),
            if kinds.is_empty() { "none".to_owned() } else { kinds.join(", ") },
            self.determinate,
            self.indeterminate,
            self.confirmations_checked,
            self.lost,
            self.two_owners,
        )?;
        match self.recovery() {
            Some(d) => write!(f, ", longest recovery {d:.2?}"),
            None => Ok(()),
        }
    }
}

/// A fault run: its report, and its verdict.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FaultRun {
    /// What the run did and found.
    pub report: FaultReport,
    /// `Ok` when the history is linearizable with faults tolerated and nothing acknowledged was
    /// lost; otherwise the failure, with every fault fired and the seed that replays them.
    pub verdict: Result<(), Failure>,
    /// The history recorded.
    pub history: History,
}

/// Records a history on one store of `harness` while faults fire on a seeded schedule, and judges
/// it (see the module's documentation), with `settings.faults` and the run's seed
/// ([`crate::Settings::seed_or`]). Never panics: a harness that panics fails the verdict.
pub fn run(harness: &dyn DynHarness, settings: &crate::Settings) -> FaultRun {
    let harness = &Erased::new(harness);
    let seed = settings.seed_or(DEFAULT_SEED);
    let faults = &settings.faults;
    let mut report = FaultReport { seed, ceilings: faults.ceilings, ..FaultReport::default() };
    let parts = Parts::new(Names::new(), ManualClock::new(START), faults.ceilings);
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (harness.store(parts.clock.clone()), harness.capabilities())
    }));
    let (store, capabilities) = match opened {
        Ok(opened) => opened,
        Err(p) => {
            let verdict = Err(Failure::panicked(CHECK, &*p));
            return FaultRun { report, verdict, history: History { names: parts.names, events: Vec::new() } };
        }
    };
    let runner = Runner::new(harness, &parts, capabilities, KEYS);
    let world = World::new(runner, faults, seed);
    let (mut events, nemesis) = world.record(store);
    let runner = world.into_runner();
    let harms = runner.harms();
    let ledger_count = runner.keys_taken();
    drop(runner);
    report.confirmations_checked = nemesis.checked;
    report.fired = harms.iter().map(Fired::from).collect();
    events.sort_by_key(|e| e.called);
    let mut names = parts.names;
    names.keys.extend((KEYS..KEYS + ledger_count).map(key_named));
    report.ops = events.len();
    report.determinate =
        events.iter().filter(|e| matches!(e.ret, Return::Storage { indeterminate: false, .. })).count();
    report.indeterminate =
        events.iter().filter(|e| matches!(e.ret, Return::Storage { indeterminate: true, .. })).count();
    let judged = WallInstant::now();
    let verdict = match nemesis.trouble {
        Some(trouble) => Err(trouble),
        None => judge(&names, &events, &harms, &mut report),
    };
    report.judge = judged.elapsed();
    let verdict = verdict.map_err(|f| {
        let f = harm::with_schedule(f, format!("fault run: {report}"), &harms, seed);
        f.with_whole_history(&History { names: names.clone(), events: events.clone() })
            .with_bands(harms.iter().map(crate::drawing::Band::from))
    });
    FaultRun { verdict, report, history: History { names, events } }
}
