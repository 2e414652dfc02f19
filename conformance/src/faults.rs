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
//! The history is judged key by key by the linearizability checker with faults tolerated
//! ([`Faults::Tolerated`]): an operation that failed with a determinate storage error did not
//! happen, an indeterminate one may have. A ledger key whose history fails, but is linearizable
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

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant as WallInstant};

use reservation_store::rules::Rule;
use reservation_store::spec::{self, Reservation};
use reservation_store::{
    AbandonOutcome, AggregateRef, ConfirmOutcome, HoldId, Instant, Key, ManualClock, Operation, Outcome,
    ReleaseOutcome, ReleaseVersion, Request, ReservationScope, ReservationStore, ReserveOutcome, StorageError,
    StoreResult, StoredReservation, Ttl, Version,
};

use crate::failure::Failure;
use crate::harness::{Capabilities, Harness, START};
use crate::linearizability::{
    self, Call, Event, Faults, KEYS, Names, Recorder, Return, XorShift, by_key, generators, key_named, linearizable,
    next_round, panicked, random_call,
};
use crate::session::panic_message;

/// A fault in the store's world. A harness offers the ones it can cause
/// ([`Harness::faults`](crate::Harness::faults)) and causes them on the suite's call
/// ([`Harness::inject`](crate::Harness::inject)); the suite causes [`Fault::Restart`] and
/// [`Fault::ClockJump`] itself.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[non_exhaustive]
pub enum Fault {
    /// Every connection between the store and its server is cut; the server keeps running and the
    /// store must connect again by itself. Operations in flight fail.
    CutConnections,
    /// The server is killed (SIGKILL: nothing is flushed) and started again on the same storage;
    /// the store must connect again by itself.
    Crash,
    /// The server is stopped (SIGSTOP) for a while, then let go on (SIGCONT): it neither answers
    /// nor closes its connections meanwhile.
    Pause,
    /// The primary is killed and a replica promoted in its place; the store must follow it.
    Failover,
    /// The suite's own, for a durable harness: the store is closed and a new one opened on the
    /// same storage ([`Harness::reopen`](crate::Harness::reopen)), as a restarting process.
    Restart,
    /// The suite's own: the store's clock jumps ahead, past every reservation's expiry.
    ClockJump,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 6] =
        [Fault::CutConnections, Fault::Crash, Fault::Pause, Fault::Failover, Fault::Restart, Fault::ClockJump];

    /// The fault's name, as reports print it: `cut-connections`, `crash`, `pause`, `failover`,
    /// `restart`, `clock-jump`.
    pub const fn name(self) -> &'static str {
        match self {
            Fault::CutConnections => "cut-connections",
            Fault::Crash => "crash",
            Fault::Pause => "pause",
            Fault::Failover => "failover",
            Fault::Restart => "restart",
            Fault::ClockJump => "clock-jump",
        }
    }

    /// Whether the fault may lose writes that were acknowledged: a crash, a failover or a
    /// restart. The fault check looks up every acknowledged confirmation after each.
    pub const fn may_lose_writes(self) -> bool {
        matches!(self, Fault::Crash | Fault::Failover | Fault::Restart)
    }

    /// The fault named `name` ([`Fault::name`]), if any.
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether the suite causes the fault itself, rather than the harness.
    pub const fn is_the_suites(self) -> bool {
        matches!(self, Fault::Restart | Fault::ClockJump)
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The error of [`Harness::inject`](crate::Harness::inject) for a fault the harness does not
/// offer.
pub fn not_offered(fault: Fault) -> StorageError {
    StorageError::new(format!("this harness cannot cause the fault `{fault}`"))
}

/// The check's name, as the suite lists it.
const CHECK: &str = "faults";

/// Contended workers.
const CONTENDED: usize = 4;
/// Ledger workers.
const LEDGERS: usize = 2;
/// The time to live of a ledger key's reservation, in milliseconds: long enough that owner B's
/// reserve right after the confirmation meets it live, whether or not the confirmation happened.
const LEDGER_TTL: u64 = 200;
/// How far a [`Fault::ClockJump`] moves the clock, in milliseconds: past every time to live of
/// the run.
const JUMP: u64 = 1_000;
/// How long the nemesis waits for the store to answer again after a fault.
const RECOVERY: Duration = Duration::from_secs(30);
/// Owner A of the ledger keys, and owner B, by their index in [`Names::owners`].
const OWNER_A: u8 = 0;
const OWNER_B: u8 = 2;
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
}

/// A fault fired, with the stamp of the history's counter when it had ended.
struct Shot {
    fired: Fired,
    stamp: u64,
}

/// What the threads of a run share.
struct World<'a, H: Harness> {
    harness: &'a H,
    settings: &'a FaultSettings,
    seed: u64,
    capabilities: Capabilities,
    recorder: Recorder<'a, H>,
    started: WallInstant,
    /// Set at the end of the run.
    stop: AtomicBool,
    /// Set while the workers stop for a restart.
    restart: AtomicBool,
    /// The next ledger key's number.
    next_ledger: AtomicUsize,
    /// Ledger keys whose confirmation was acknowledged, by index.
    acknowledged: Mutex<Vec<usize>>,
}

/// A worker, between two stretches of work: a restart stops every worker, and starts them again
/// on the reopened store where they were.
struct Worker {
    thread: usize,
    /// Contended workers: their own generator and the shared one ([`generators`]); `None` for a
    /// ledger worker.
    generators: Option<(XorShift, XorShift)>,
    /// The round, and the operations run in it; or the ledger keys done.
    round: usize,
    in_round: usize,
    hot: usize,
    out: Vec<Event>,
}

/// The restart the nemesis asked for: when.
struct Restart {
    at: Duration,
    began: WallInstant,
}

/// The nemesis: the schedule's generator, the next fault's time, and what it did.
struct Nemesis {
    thread: usize,
    r: XorShift,
    next: WallInstant,
    shots: Vec<Shot>,
    /// The lookups of acknowledged keys after faults.
    events: Vec<Event>,
    checked: usize,
    /// A fault that could not be caused, or after which the store did not answer.
    trouble: Option<Failure>,
}

/// Records a history on one store of `harness` while faults fire on a seeded schedule, and judges
/// it (see the module's documentation). Never panics: a harness that panics fails the verdict.
pub fn run<H: Harness>(harness: &H, settings: &FaultSettings) -> FaultRun {
    let seed = settings.seed();
    let mut report = FaultReport { seed, ..FaultReport::default() };
    let clock = ManualClock::new(START);
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (harness.store(clock.clone()), harness.capabilities())
    }));
    let (store, capabilities) = match opened {
        Ok(opened) => opened,
        Err(p) => return FaultRun { report, verdict: Err(Failure::panicked(CHECK, &*p)) },
    };
    let mut names = Names::new();
    let stamp = AtomicU64::new(0);
    let world = World {
        harness,
        settings,
        seed,
        capabilities,
        recorder: Recorder { harness, names: &names, clock: &clock, stamp: &stamp },
        started: WallInstant::now(),
        stop: AtomicBool::new(false),
        restart: AtomicBool::new(false),
        next_ledger: AtomicUsize::new(0),
        acknowledged: Mutex::new(Vec::new()),
    };
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
    let verdict = judge(&names, &events, &nemesis.shots, &mut report).and(nemesis.trouble.map_or(Ok(()), Err));
    FaultRun { verdict: verdict.map_err(|f| with_faults(f, &report)), report }
}

impl<H: Harness> World<'_, H> {
    /// Runs the workers and the nemesis on `store` (and on the stores that restarts open) until
    /// the run ends; then the last looks. The events, and the nemesis with what it did.
    fn record(&self, store: H::Store) -> (Vec<Event>, Nemesis) {
        let mut store = Some(store);
        let mut workers: Vec<Worker> = (0..CONTENDED + LEDGERS)
            .map(|t| Worker {
                thread: t,
                generators: (t < CONTENDED).then(|| generators(self.seed, t)),
                round: 0,
                in_round: 0,
                hot: 0,
                out: Vec::new(),
            })
            .collect();
        let mut nemesis = Nemesis {
            thread: CONTENDED + LEDGERS,
            r: XorShift(self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xfa17 | 1),
            next: self.started,
            shots: Vec::new(),
            events: Vec::new(),
            checked: 0,
            trouble: None,
        };
        let mut events = Vec::new();
        while let Some(current) = store.as_ref() {
            let restart = std::thread::scope(|scope| {
                self.restart.store(false, Ordering::SeqCst);
                let handles: Vec<_> = workers
                    .drain(..)
                    .map(|mut w| {
                        let thread = w.thread;
                        (
                            thread,
                            scope.spawn(move || {
                                self.work(current, &mut w);
                                w
                            }),
                        )
                    })
                    .collect();
                let restart = nemesis.faults(self, current);
                match restart {
                    Some(_) => self.restart.store(true, Ordering::SeqCst),
                    None => {
                        self.wait_until(self.started + self.settings.duration);
                        self.stop.store(true, Ordering::SeqCst);
                    }
                }
                for (thread, handle) in handles {
                    match handle.join() {
                        Ok(w) => workers.push(w),
                        Err(p) => events.push(panicked(thread, &*p)),
                    }
                }
                restart
            });
            let Some(restart) = restart else { break };
            let old = store.take();
            let reopened = old.map(|old| {
                let clock = self.recorder.clock.clone();
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.harness.reopen(old, clock)))
            });
            let caused = match reopened {
                Some(Ok(Some(new))) => {
                    store = Some(new);
                    Ok(())
                }
                Some(Ok(None)) | None => {
                    Err("the harness declares the durable capability, but its reopen gave no store".to_owned())
                }
                Some(Err(p)) => Err(format!("the harness's reopen panicked: {}", panic_message(&*p))),
            };
            nemesis.ended(self, store.as_ref(), Fault::Restart, (restart.at, restart.began), caused);
        }
        for w in workers {
            events.extend(w.out);
        }
        if let Some(store) = store.as_ref() {
            events.extend(self.last_looks(store, nemesis.thread, &mut nemesis.checked));
        }
        events.append(&mut nemesis.events);
        (events, nemesis)
    }

    /// Sleeps until `at`, or until the run stops.
    fn wait_until(&self, at: WallInstant) {
        while !self.stop.load(Ordering::SeqCst) {
            let now = WallInstant::now();
            if now >= at {
                return;
            }
            std::thread::sleep((at - now).min(Duration::from_millis(20)));
        }
    }

    /// Whether the run is over: stopped, or past its duration.
    fn over(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.started.elapsed() >= self.settings.duration
    }

    /// Whether a worker stops now: the run is over, or the store restarts.
    fn halted(&self) -> bool {
        self.over() || self.restart.load(Ordering::SeqCst)
    }

    /// The ledger keys taken so far.
    fn ledger_count(&self) -> usize {
        self.next_ledger.load(Ordering::SeqCst).min(self.settings.ledger_keys)
    }

    /// The time between two operations of a worker that runs `count` of them over the run.
    fn pace(&self, count: usize) -> Duration {
        self.settings.duration / u32::try_from(count.max(1)).unwrap_or(u32::MAX)
    }

    /// Runs worker `w` on `store` until it halts.
    fn work(&self, store: &H::Store, w: &mut Worker) {
        match w.generators.as_mut() {
            Some((r, mover)) => {
                let quota = self.settings.ops.div_ceil(CONTENDED);
                let pace = self.pace(quota);
                let t = w.thread;
                while w.out.len() < quota && !self.halted() {
                    if w.in_round == 0 {
                        let (step, hot) = next_round(mover);
                        w.hot = hot;
                        if t == 0 && w.round > 0 {
                            self.recorder.clock.advance(step);
                        }
                    }
                    self.wait_until(self.started + pace * u32::try_from(w.out.len()).unwrap_or(u32::MAX));
                    let (key, call) = random_call(r, w.hot);
                    let names = self.recorder.names;
                    w.out.push(self.recorder.run(store, (t, w.round), (key, &names.keys[key]), call));
                    if t == 0 && r.below(4) == 0 {
                        self.recorder.clock.advance(1);
                    }
                    w.in_round += 1;
                    if w.in_round == linearizability::ROUND {
                        w.in_round = 0;
                        w.round += 1;
                    }
                }
            }
            None => self.ledger(store, w),
        }
    }

    /// A ledger worker: fresh key after fresh key, owner A reserves and confirms it, then owner
    /// B tries to reserve it.
    fn ledger(&self, store: &H::Store, w: &mut Worker) {
        let ttl = Ttl::from_millis(LEDGER_TTL).expect("a non-zero ttl");
        let pace = self.pace(self.settings.ledger_keys.div_ceil(LEDGERS));
        while !self.halted() {
            self.wait_until(self.started + pace * u32::try_from(w.round).unwrap_or(u32::MAX));
            let n = self.next_ledger.fetch_add(1, Ordering::SeqCst);
            if n >= self.settings.ledger_keys || self.halted() {
                return;
            }
            let index = KEYS + n;
            let key = key_named(index);
            let calls = [
                Call::Op(Operation::Reserve { owner: OWNER_A, hold: 0, ttl }),
                Call::Op(Operation::Confirm { owner: OWNER_A, version: Version::from_u64(1) }),
                Call::Op(Operation::Reserve { owner: OWNER_B, hold: 1, ttl }),
            ];
            for call in calls {
                let e = self.recorder.run(store, (w.thread, n), (index, &key), call);
                if acknowledged_confirmation(self.recorder.names, &e) {
                    self.acknowledged.lock().unwrap_or_else(PoisonError::into_inner).push(index);
                }
                w.out.push(e);
            }
            w.round += 1;
        }
    }

    /// The faults offered now: the harness's and the suite's own, that the settings let fire.
    fn offered(&self) -> Vec<Fault> {
        let mut offered: BTreeSet<Fault> = self.harness.faults().into_iter().filter(|f| !f.is_the_suites()).collect();
        offered.insert(Fault::ClockJump);
        if self.capabilities.durable {
            offered.insert(Fault::Restart);
        }
        offered.into_iter().filter(|f| self.settings.lets(*f)).collect()
    }

    /// Causes `fault`, one the harness causes or a clock jump.
    fn fire(&self, fault: Fault) -> Result<(), String> {
        if fault == Fault::ClockJump {
            self.recorder.clock.advance(JUMP);
            return Ok(());
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.harness.inject(fault))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("the harness could not cause it: {}", reservation_store::error_chain(&e))),
            Err(p) => Err(format!("the harness's inject panicked: {}", panic_message(&*p))),
        }
    }

    /// Looks up a key of no history until the store answers, for at most [`RECOVERY`]: how long
    /// that took.
    fn probe(&self, store: &H::Store) -> Option<Duration> {
        let began = WallInstant::now();
        let key = Key::new("probe").expect("a valid key");
        let scope = &self.recorder.names.scope;
        while began.elapsed() < RECOVERY {
            // An adapter that died or broke the protocol will not answer: no use waiting.
            if self.harness.broken().is_some() {
                return None;
            }
            let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.harness.block_on(store.lookup(scope, &key))
            }));
            if answered.is_ok_and(|r| r.is_ok()) {
                return Some(began.elapsed());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    /// The acknowledged ledger keys so far, each with its name.
    fn acknowledged_keys(&self) -> Vec<(usize, Key)> {
        let keys = self.acknowledged.lock().unwrap_or_else(PoisonError::into_inner).clone();
        keys.into_iter().map(|i| (i, key_named(i))).collect()
    }

    /// The end, as thread `thread`: the clock jumps past every expiry, every ledger key is looked
    /// up, and owner B tries to reserve each acknowledged one again.
    fn last_looks(&self, store: &H::Store, thread: usize, checked: &mut usize) -> Vec<Event> {
        self.recorder.clock.advance(JUMP);
        let keys: Vec<(usize, Key)> = (KEYS..KEYS + self.ledger_count()).map(|i| (i, key_named(i))).collect();
        let mut events = self.recorder.lookups(store, thread, &keys);
        let acknowledged = self.acknowledged_keys();
        *checked += acknowledged.len();
        let ttl = Ttl::from_millis(LEDGER_TTL).expect("a non-zero ttl");
        for (index, key) in &acknowledged {
            let call = Call::Op(Operation::Reserve { owner: OWNER_B, hold: 1, ttl });
            events.push(self.recorder.run(store, (thread, 0), (*index, key), call));
        }
        events
    }
}

impl Nemesis {
    /// Fires faults on `store` on the schedule until the run ends, the most faults have fired, a
    /// fault goes wrong, or a restart is due: that restart, which the caller causes.
    fn faults<H: Harness>(&mut self, world: &World<'_, H>, store: &H::Store) -> Option<Restart> {
        let gap_ms = u64::try_from(world.settings.gap.as_millis()).unwrap_or(u64::MAX).max(2);
        while self.shots.len() < world.settings.max_faults && self.trouble.is_none() {
            self.next += Duration::from_millis(gap_ms / 2 + self.r.below(gap_ms));
            world.wait_until(self.next);
            if world.over() {
                return None;
            }
            let offered = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.offered())) {
                Ok(offered) => offered,
                Err(p) => {
                    self.trouble = Some(Failure::panicked(CHECK, &*p));
                    return None;
                }
            };
            if offered.is_empty() {
                return None;
            }
            let fault = offered[self.r.below(offered.len() as u64) as usize];
            let at = world.started.elapsed();
            let began = WallInstant::now();
            if fault == Fault::Restart {
                return Some(Restart { at, began });
            }
            let caused = world.fire(fault);
            self.ended(world, Some(store), fault, (at, began), caused);
        }
        None
    }

    /// Records `fault`, fired at `at` and begun at `began`, which `caused` says whether it could
    /// be caused, with the history's stamp now that it has ended: a write acknowledged while the
    /// fault was under way (a primary that takes writes its replica never gets, until it is
    /// killed) is one it may lose too. Probes the store until it answers, and after a crash,
    /// failover or restart looks up every acknowledged ledger key.
    fn ended<H: Harness>(
        &mut self,
        world: &World<'_, H>,
        store: Option<&H::Store>,
        fault: Fault,
        (at, began): (Duration, WallInstant),
        caused: Result<(), String>,
    ) {
        let stamp = world.recorder.stamp.load(Ordering::SeqCst);
        let took = began.elapsed();
        let recovered_after = match (&caused, store) {
            (Ok(()), Some(store)) => world.probe(store),
            _ => None,
        };
        // The next gap starts once the store answers again.
        self.next = WallInstant::now();
        self.shots.push(Shot { fired: Fired { fault, at, took, recovered_after }, stamp });
        let problem = match (caused, recovered_after) {
            (Err(why), _) => format!("the fault {fault} could not be caused: {why}"),
            (Ok(()), None) => format!("the store did not answer within {RECOVERY:.0?} after the fault {fault}"),
            (Ok(()), Some(_)) => {
                if let (true, Some(store)) = (fault.may_lose_writes(), store) {
                    let keys = world.acknowledged_keys();
                    self.events.extend(world.recorder.lookups(store, self.thread, &keys));
                    self.checked += keys.len();
                }
                return;
            }
        };
        self.trouble = Some(Failure::without_rule(CHECK, problem));
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
fn acknowledged_confirmation(names: &Names, e: &Event) -> bool {
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
fn lost_key(names: &Names, ops: &[&Event], losses: &[u64]) -> bool {
    ops.iter().filter(|e| acknowledged_confirmation(names, e)).any(|ack| {
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
        linearizable(names, &refs).is_ok()
    })
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
/// lose writes (a crash, a failover, a restart) ended after the confirmation was acknowledged,
/// every operation that returned before the first such fault ended. `losses` are the stamps of
/// the history's counter at which those faults had ended: a write acknowledged while one was under
/// way may be lost by it. A confirmation is acknowledged when the
/// specification says that its outcome tells its owner it holds the key.
pub fn lost_confirmations(names: &Names, events: &[Event], losses: &[u64]) -> Vec<usize> {
    by_key(events)
        .into_iter()
        .filter(|(_, ops)| linearizable(names, ops).is_err() && lost_key(names, ops, losses))
        .map(|(key, _)| key)
        .collect()
}

/// Judges a fault run's history (ordered by call), filling the report's counts of lost
/// confirmations and of keys with two owners.
fn judge(names: &Names, events: &[Event], shots: &[Shot], report: &mut FaultReport) -> Result<(), Failure> {
    linearizability::precheck(CHECK, names, events, Faults::Tolerated)?;
    let keys = by_key(events);
    let failing: Vec<usize> =
        keys.iter().filter(|(_, ops)| linearizable(names, ops).is_err()).map(|(key, _)| *key).collect();
    let ledger = |key: &usize| *key >= KEYS;
    let losses: Vec<u64> = shots.iter().filter(|s| s.fired.fault.may_lose_writes()).map(|s| s.stamp).collect();
    let lost: Vec<usize> =
        failing.iter().copied().filter(ledger).filter(|k| lost_key(names, &keys[k], &losses)).collect();
    let two: Vec<usize> =
        keys.iter().filter(|(key, ops)| ledger(key) && two_owners(names, ops)).map(|(key, _)| *key).collect();
    report.lost = lost.len();
    report.two_owners = two.len();
    if !lost.is_empty() || !two.is_empty() {
        return Err(p1_failure(names, &keys, shots, &lost, &two));
    }
    match failing.first() {
        Some(key) => Err(after_loss(names, *key, &keys[key], shots)
            .unwrap_or_else(|| linearizability::report(CHECK, names, *key, &keys[key]))),
        None => Ok(()),
    }
}

/// The failure of key `key`, whose history `ops` is not linearizable, when what went wrong came
/// after a fault that may lose writes (a crash, a failover, a restart) and everything called
/// before that fault is linearizable: the fault lost or changed what the store had acknowledged
/// (P1), not a race (H1). `None` otherwise.
fn after_loss(names: &Names, key: usize, ops: &[&Event], shots: &[Shot]) -> Option<Failure> {
    let len = (1..=ops.len()).find(|n| linearizable(names, &ops[..*n]).is_err())?;
    let wrong = ops[len - 1];
    let (n, shot) =
        shots.iter().enumerate().rfind(|(_, s)| s.fired.fault.may_lose_writes() && s.stamp <= wrong.called)?;
    let before: Vec<&Event> = ops.iter().copied().filter(|e| e.called < shot.stamp).collect();
    if linearizable(names, &before).is_err() {
        return None;
    }
    let mut f = linearizability::report(CHECK, names, key, &ops[..len]);
    f.rule = Some(Rule::P1);
    f.check_rule = Some(Rule::P1);
    f.property = None;
    f.step_rule = None;
    f.problem = format!(
        "k{key}: after fault {} ({}), {}; what the store had answered before it is explained by the specification, \
         so the fault lost or changed a state the store acknowledged",
        n + 1,
        shot.fired,
        names.show(wrong)
    );
    Some(f)
}

/// Most keys whose operations a P1 failure shows.
const SHOWN_KEYS: usize = 4;

/// The failure of a run that lost acknowledged confirmations (`lost`) or told two owners they
/// hold one key (`two`).
fn p1_failure(
    names: &Names,
    keys: &std::collections::BTreeMap<usize, Vec<&Event>>,
    shots: &[Shot],
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
        let after = match shots.iter().position(|s| s.stamp > ack.returned && s.fired.fault.may_lose_writes()) {
            Some(i) => format!("after fault {} ({})", i + 1, shots[i].fired),
            None => "with no fault after it".to_owned(),
        };
        let what = if lost.contains(*key) { "lost" } else { "then told to another owner" };
        f.context.push(format!("k{key}: the confirmation acknowledged at stamp {} was {what} {after}", ack.returned));
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

/// `failure`, with the faults fired, the run's figures, and the command that replays it.
fn with_faults(mut failure: Failure, report: &FaultReport) -> Failure {
    failure.context.push(format!("fault run: {report}"));
    for (i, fired) in report.fired.iter().enumerate() {
        failure.context.push(format!("fault {}: {fired}", i + 1));
    }
    failure.replay = Some(format!(
        "RESERVATION_CONFORMANCE_SEED={seed} cargo test {}   (or the test that ran this fault check)\n\
         reservation conform … --seed {seed}   (through the driver: the command that ran, with this seed)",
        failure.check,
        seed = report.seed
    ));
    failure
}

/// Any harness, with [`Fault::CutConnections`] and [`Fault::Pause`] simulated in front of its
/// store, for stores with no server to cut or pause. Its other faults are the harness's own.
///
/// While a cut lasts, each operation fails, one of three ways drawn from the seed: before it
/// reaches the store, with a determinate error; after the store applied it, with an indeterminate
/// error (the answer was lost); or without reaching the store, with an indeterminate error (the
/// request was lost). While a pause lasts, each operation stalls until it ends, on the thread
/// that runs it. Each lasts for the window (30 ms by default), and [`Harness::inject`] returns
/// when it has ended.
#[derive(Debug)]
pub struct Simulated<H> {
    inner: H,
    window: Duration,
    faults: Arc<SimulatedFaults>,
}

/// The faults a [`Simulated`] harness has in force, shared with its stores.
#[derive(Debug, Default)]
struct SimulatedFaults {
    seed: u64,
    draws: AtomicU64,
    cut_until: Mutex<Option<WallInstant>>,
    paused_until: Mutex<Option<WallInstant>>,
}

/// How an operation fails during a simulated cut.
#[derive(Clone, Copy)]
enum Cut {
    /// Before it reaches the store: determinate.
    Before,
    /// After the store applied it: indeterminate.
    After,
    /// Lost on its way: indeterminate, not applied.
    Lost,
}

impl Cut {
    /// The error an operation that met this cut fails with.
    fn error(self) -> reservation_store::StoreError {
        match self {
            Cut::Before => StorageError::new("simulated cut connection: the request was not sent").into(),
            Cut::After => StorageError::indeterminate("simulated cut connection: the answer was lost").into(),
            Cut::Lost => {
                StorageError::indeterminate("simulated cut connection: the request was lost on its way").into()
            }
        }
    }
}

impl SimulatedFaults {
    /// When the fault of `slot` ends, if it has not.
    fn until(slot: &Mutex<Option<WallInstant>>) -> Option<WallInstant> {
        let until = *slot.lock().unwrap_or_else(PoisonError::into_inner);
        until.filter(|u| *u > WallInstant::now())
    }

    /// Stalls while a pause lasts; then how the operation fails, if a cut lasts.
    fn meet(&self) -> Option<Cut> {
        if let Some(until) = Self::until(&self.paused_until) {
            std::thread::sleep(until.saturating_duration_since(WallInstant::now()));
        }
        Self::until(&self.cut_until)?;
        let n = self.draws.fetch_add(1, Ordering::SeqCst);
        let mut r = XorShift((self.seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
        r.next();
        Some(match r.below(3) {
            0 => Cut::Before,
            1 => Cut::After,
            _ => Cut::Lost,
        })
    }

    /// Sets the fault of `slot` for `window` from now, waits for it to end, and clears it.
    fn hold(slot: &Mutex<Option<WallInstant>>, window: Duration) {
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(WallInstant::now() + window);
        std::thread::sleep(window);
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl<H> Simulated<H> {
    /// `inner`, with cut connections and pauses simulated for 30 ms each, seeded with 1.
    pub fn new(inner: H) -> Self {
        Simulated { inner, window: Duration::from_millis(30), faults: Arc::new(SimulatedFaults::default()) }
            .with_seed(1)
    }

    /// This harness with cuts and pauses that last `window`.
    pub fn with_window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// This harness with the ways operations fail during a cut drawn from `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.faults = Arc::new(SimulatedFaults { seed, ..SimulatedFaults::default() });
        self
    }

    /// The harness inside.
    pub fn inner(&self) -> &H {
        &self.inner
    }
}

/// A store of a [`Simulated`] harness: the inner store, behind the simulated faults.
#[derive(Debug)]
pub struct SimulatedStore<S> {
    inner: S,
    faults: Arc<SimulatedFaults>,
}

impl<S> SimulatedStore<S> {
    /// The store inside.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Runs `op` unless a simulated fault stops it.
    async fn faulted<T>(&self, op: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
        match self.faults.meet() {
            None => op.await,
            Some(Cut::After) => {
                let _ = op.await;
                Err(Cut::After.error())
            }
            Some(cut) => Err(cut.error()),
        }
    }
}

impl<S: ReservationStore + Sync> ReservationStore for SimulatedStore<S> {
    fn execute(&self, request: Request<'_>) -> impl Future<Output = StoreResult<Outcome>> + Send {
        self.faulted(self.inner.execute(request))
    }

    fn lookup(
        &self,
        scope: &ReservationScope,
        key: &Key,
    ) -> impl Future<Output = StoreResult<Option<StoredReservation>>> + Send {
        self.faulted(self.inner.lookup(scope, key))
    }

    fn reserve<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
        ttl: Ttl,
    ) -> impl Future<Output = StoreResult<ReserveOutcome>> + Send + 'a {
        self.faulted(self.inner.reserve(scope, key, owner, hold, ttl))
    }

    fn confirm<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: Version,
    ) -> impl Future<Output = StoreResult<ConfirmOutcome>> + Send + 'a {
        self.faulted(self.inner.confirm(scope, key, owner, version))
    }

    fn release<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: ReleaseVersion,
    ) -> impl Future<Output = StoreResult<ReleaseOutcome>> + Send + 'a {
        self.faulted(self.inner.release(scope, key, owner, version))
    }

    fn abandon<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
    ) -> impl Future<Output = StoreResult<AbandonOutcome>> + Send + 'a {
        self.faulted(self.inner.abandon(scope, key, owner, hold))
    }
}

impl<H: Harness> Harness for Simulated<H> {
    type Store = SimulatedStore<H::Store>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        SimulatedStore { inner: self.inner.store(clock), faults: self.faults.clone() }
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.inner.block_on(future)
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        let faults = store.faults;
        self.inner.reopen(store.inner, clock).map(|inner| SimulatedStore { inner, faults })
    }

    fn lookups(
        &self,
        store: &Self::Store,
        keys: &[(&ReservationScope, &Key)],
    ) -> Vec<StoreResult<Option<StoredReservation>>> {
        // The batch meets the simulated faults once, as the requests of one round trip would; it
        // changes nothing, so a cut after it is as one before.
        match store.faults.meet() {
            None => self.inner.lookups(&store.inner, keys),
            Some(cut) => keys.iter().map(|_| Err(cut.error())).collect(),
        }
    }

    fn send_raw(&self, store: &Self::Store, requests: &[crate::RawRequest]) -> Option<Vec<crate::RawAnswer>> {
        self.inner.send_raw(&store.inner, requests)
    }

    fn broken(&self) -> Option<String> {
        self.inner.broken()
    }

    /// The inner harness's faults, with [`Fault::CutConnections`] and [`Fault::Pause`].
    fn faults(&self) -> Vec<Fault> {
        let mut faults: BTreeSet<Fault> = self.inner.faults().into_iter().collect();
        faults.extend([Fault::CutConnections, Fault::Pause]);
        faults.into_iter().collect()
    }

    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        match fault {
            Fault::CutConnections => SimulatedFaults::hold(&self.faults.cut_until, self.window),
            Fault::Pause => SimulatedFaults::hold(&self.faults.paused_until, self.window),
            fault => return self.inner.inject(fault),
        }
        Ok(())
    }
}
