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
//!   [`Fault::Crash`], [`Fault::Failover`] and [`Fault::Restart`] it looks up every ledger key
//!   whose confirmation was acknowledged so far.
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
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant as WallInstant};

use reservation_store::ManualClock;

use crate::erased::{DynHarness, Erased};
use crate::failure::Failure;
use crate::gate::{Ceilings, Gates};
use crate::harness::{Harness, START};
use crate::history::{History, KEYS, Names, Return, key_named};
use crate::record::Recorder;

pub use crate::harness::{Fault, not_offered};
pub use judge::lost_confirmations;
use judge::{judge, with_faults};
use nemesis::World;
pub use simulated::{Simulated, SimulatedStore};

/// The check's name, as the suite lists it.
const CHECK: &str = "faults";

/// How long the nemesis waits for the store to answer again after a fault.
const RECOVERY: Duration = Duration::from_secs(30);
/// The default seed of a fault run, when its settings give none.
const DEFAULT_SEED: u64 = 0x5eed_fa17_0000_0001;

/// How a fault run ([`run`]) goes: which faults, for how long, how often, and from which seed.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FaultSettings {
    /// `None`: every fault offered.
    faults: Option<Vec<Fault>>,
    duration: Duration,
    seed: Option<u64>,
    max_faults: usize,
    gap: Duration,
    ops: usize,
    ledger_keys: usize,
    ceilings: Ceilings,
}

impl Default for FaultSettings {
    /// Every fault offered, for 2 seconds, a fault every 200 ms or so and at most 8; 4,000
    /// contended operations and 400 ledger keys at most, spread over the run.
    fn default() -> Self {
        FaultSettings {
            faults: None,
            duration: Duration::from_secs(2),
            seed: None,
            max_faults: 8,
            gap: Duration::from_millis(200),
            ops: 4_000,
            ledger_keys: 400,
            ceilings: Ceilings::default(),
        }
    }
}

impl FaultSettings {
    /// These settings with only `faults` fired, among those offered.
    pub fn with_faults(mut self, faults: &[Fault]) -> Self {
        self.faults = Some(faults.to_vec());
        self
    }

    /// These settings with a run of `duration` (wall time).
    pub fn with_duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// These settings with the seed `seed`, of the schedule and of the workload. Without one, a
    /// run's seed is the suite's ([`crate::Settings::seed`]: `RESERVATION_CONFORMANCE_SEED`,
    /// `reservation conform --seed`), which every randomized check shares, or a fixed one.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// These settings with the seed `seed` when they set none of their own: the suite's one seed
    /// ([`crate::Settings::seed`]) given to the fault check.
    pub fn seeded(mut self, seed: Option<u64>) -> Self {
        self.seed = self.seed.or(seed);
        self
    }

    /// These settings with at most `n` faults fired in one run.
    pub fn with_max_faults(mut self, n: usize) -> Self {
        self.max_faults = n;
        self
    }

    /// These settings with faults `gap` apart on average (each gap drawn between half and one
    /// and a half of it).
    pub fn with_gap(mut self, gap: Duration) -> Self {
        self.gap = gap;
        self
    }

    /// These settings with at most `ops` operations of the contended workers, over all of them,
    /// spread over the run (0: no contended workers).
    pub fn with_ops(mut self, ops: usize) -> Self {
        self.ops = ops;
        self
    }

    /// These settings with at most `keys` ledger keys, spread over the run (0: no ledger).
    pub fn with_ledger_keys(mut self, keys: usize) -> Self {
        self.ledger_keys = keys;
        self
    }

    /// These settings with histories recorded within `ceilings` ([`Ceilings`]).
    pub fn with_ceilings(mut self, ceilings: Ceilings) -> Self {
        self.ceilings = ceilings;
        self
    }

    /// The ceilings the histories are recorded within.
    pub fn ceilings(&self) -> Ceilings {
        self.ceilings
    }

    /// The seed: these settings', or a fixed one.
    fn seed(&self) -> u64 {
        self.seed.unwrap_or(DEFAULT_SEED)
    }

    /// Whether these settings let `fault` fire.
    fn lets(&self, fault: Fault) -> bool {
        self.faults.as_ref().is_none_or(|faults| faults.contains(&fault))
    }
}

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
    /// Lookups of ledger keys whose confirmation was acknowledged, after every crash, failover
    /// and restart, and at the end.
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

/// A fault fired, with the stamp of the history's counter when it had ended.
struct Shot {
    fired: Fired,
    stamp: u64,
}

/// Records a history on one store of `harness` while faults fire on a seeded schedule, and judges
/// it (see the module's documentation). Never panics: a harness that panics fails the verdict.
pub fn run(harness: &dyn DynHarness, settings: &FaultSettings) -> FaultRun {
    let harness = &Erased::new(harness);
    let seed = settings.seed();
    let mut report = FaultReport { seed, ceilings: settings.ceilings, ..FaultReport::default() };
    let clock = ManualClock::new(START);
    let mut names = Names::new();
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (harness.store(clock.clone()), harness.capabilities())
    }));
    let (store, capabilities) = match opened {
        Ok(opened) => opened,
        Err(p) => {
            let verdict = Err(Failure::panicked(CHECK, &*p));
            return FaultRun { report, verdict, history: History { names, events: Vec::new() } };
        }
    };
    let stamp = AtomicU64::new(0);
    let ceilings = settings.ceilings;
    let gates = Gates::new(ceilings);
    let recorder = Recorder { harness, names: &names, clock: &clock, stamp: &stamp, gates: &gates };
    let world = World::new(harness, settings, seed, capabilities, recorder);
    let (mut events, nemesis) = world.record(store);
    report.confirmations_checked = nemesis.checked;
    report.fired = nemesis.shots.iter().map(|s| s.fired).collect();
    events.sort_by_key(|e| e.called);
    let ledger_count = world.ledger_count();
    drop(world);
    names.keys.extend((KEYS..KEYS + ledger_count).map(key_named));
    report.ops = events.len();
    report.determinate =
        events.iter().filter(|e| matches!(e.ret, Return::Storage { indeterminate: false, .. })).count();
    report.indeterminate =
        events.iter().filter(|e| matches!(e.ret, Return::Storage { indeterminate: true, .. })).count();
    let judged = WallInstant::now();
    let verdict = judge(&names, &events, &nemesis.shots, &mut report).and(nemesis.trouble.map_or(Ok(()), Err));
    report.judge = judged.elapsed();
    FaultRun { verdict: verdict.map_err(|f| with_faults(f, &report)), report, history: History { names, events } }
}
