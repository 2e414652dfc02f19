//! Crashes at points the suite chooses, and every key's whole state checked after each (P1, and
//! D10 across a restart).
//!
//! A durable store's recovery code runs only after a crash, and a crash that lands at a random
//! moment under load rarely meets its bugs: the last record of the log belongs to an operation
//! still in flight, which may or may not have happened, and a lookup of confirmations alone never
//! sees a version lowered, a hold lost or an expiry moved. [`run`] instead drives keys through
//! every state a row can hold, then crashes the store where recovery bugs show:
//!
//! - *quiet points*: right after an acknowledged change (an *anchor*, the reservation of a fresh
//!   key), with nothing in flight, so that the last record of the log is one whose effect must
//!   survive; before the anchor, a *churn* of changes on two keys of its own, their number drawn
//!   from the seed over every magnitude from none to thousands, so that where a crash lands in a
//!   store's period (a compaction, a checkpoint every so many changes) is the seed's to say, not
//!   the recipes' (`churn`);
//! - *burst points*: while operations run on several threads, at the moment a lookup first shows
//!   a write that has not been acknowledged yet (a write whose lock is let go before its record is
//!   durable), or in the middle of the burst when none does.
//!
//! Each round takes fresh keys through the recipes of [`RECIPE_NAMES`] in four phases, the clock moving between
//! phases: pending with several holds whose expiry joins moved, expired, taken afresh by another
//! owner, confirmed and raised, confirmed again at a lower version (`AlreadyConfirmed`), released,
//! kept (an older fact's release), freed by `ANY` and confirmed again lower, one hold abandoned,
//! the last hold abandoned, a pending reservation released, and conflicts that change nothing.
//! A round ends at a quiet point; then a burst round runs the same recipes on several threads and
//! crashes in its middle. A crash is the harness's [`Fault::Crash`] when it offers one (the server
//! killed and started again: the store object lives on and must find its way back), otherwise a
//! restart through [`Harness::reopen`]; a harness that offers both gets both, one quiet point in
//! two each.
//!
//! After every crash every key the run has touched is looked up, and its whole state (owner,
//! holds, expiry, version, or free) is judged against what the acknowledged history allows: the
//! history is decided key by key by the linearizability checker with faults tolerated, so an
//! operation that failed with an indeterminate error may or may not have happened, and nothing
//! else may be missing or changed. Then, since a durable store's clock survives a restart
//! ([`crate::Capabilities::durable`]), the suite sets its clock back before the
//! instant of the anchor and looks every key up again: the store must still decide at the
//! anchor's instant, the latest at which it acknowledged a change (D10 across a restart), so an
//! expired reservation stays expired.
//!
//! A state that a crash changed fails the run with P1 (D10 when only the clock set back shows
//! it), naming the key, the field, the acknowledged operation whose effect is missing or changed,
//! and the crash; the operations listed are those of that key around the crash.

mod burst;
mod churn;
mod explain;
mod power;
mod recipes;

use churn::Churn;
use explain::crash_failure;
use power::{POWER_CHECK, Power, first_trap, mount_power};
pub use recipes::RECIPE_NAMES;
use recipes::{A, RECIPES, Step};

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant as WallInstant};

use reservation_disk::{CutReport, Persistence};
use reservation_store::{
    AggregateId, AggregateRef, AggregateType, Clock, HoldId, Instant, Key, ManualClock, ReservationScope, Tenant,
};

use crate::erased::{DynHarness, Erased};
use crate::failure::Failure;
use crate::gate::Ceilings;
use crate::harm::{self, Harm, Parts, Runner};
use crate::harness::{Capabilities, Fault, Harness, START, unique_namespace};
use crate::history::{Call, Event, History, Names, Return, by_key, key_named};
use crate::record::{XorShift, panicked};
pub use crate::settings::CrashSettings;
use crate::verdict::{self, StorageErrors};

/// The check's name, as the suite lists it.
const CHECK: &str = "crashes";
/// How far the clock moves between two phases of a round, in milliseconds.
const PHASE: u64 = 10;
/// A short time to live: a reservation of the first phase has expired by the third.
const SHORT: u64 = 15;
/// A time to live that outlasts the run.
const LONG: u64 = 1_000_000;
/// How far the suite sets its clock back after a quiet crash: before the expiry of the first
/// phase's short reservations, which had expired by the anchor.
const BACK: u64 = 2 * PHASE;
/// How long a watch point looks for an unacknowledged write before it crashes anyway.
const WATCH: Duration = Duration::from_secs(2);
/// Where a burst's crash lands when its watch point saw a write before it was acknowledged.
const WATCHED: &str = "burst: the moment a lookup showed a write not yet acknowledged";
/// Worker threads of a burst round.
const WORKERS: usize = 3;
/// The most writes a burst round's watch point makes, one after another, before it crashes.
const WATCHES: usize = 16;
/// How a crash was caused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum CrashKind {
    /// The harness's [`Fault::Crash`]: the server killed and started again, the store object kept.
    Crash,
    /// [`Harness::reopen`]: the store closed and a new one opened on the same storage. Whether
    /// that reaches the store's storage (its recovery) depends on the harness.
    Reopen,
    /// A power cut ([`power_cuts`]): the disk under the store lost power, what was never synced
    /// was taken back under a persistence model, and the store was opened again on what was left
    /// ([`Harness::store_in`]).
    Cut,
}

impl fmt::Display for CrashKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CrashKind::Crash => "a crash (the harness's Fault::Crash)",
            CrashKind::Reopen => "a restart through the harness's reopen",
            CrashKind::Cut => "a power cut",
        })
    }
}

/// A crash the run caused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrashPoint {
    /// Its number in the run, from 1.
    pub n: usize,
    /// How it was caused.
    pub kind: CrashKind,
    /// Where: `"quiet"` (right after an acknowledged change, nothing in flight) or the burst's
    /// point (`"burst, a lookup saw an unacknowledged write"`, `"burst, midway"`).
    pub point: &'static str,
    /// The stamp of the history's counter when the crash began and when the store answered again.
    pub began: u64,
    /// See `began`.
    pub ended: u64,
    /// The instant of the latest change acknowledged before it: what the store must not decide
    /// earlier than afterwards (D10 across a restart).
    pub latest: Instant,
    /// How many writes the store had acknowledged in the run before it: where it landed in the
    /// store's life (its compactions and checkpoints come every so many changes).
    pub writes: u64,
    /// For a power cut, what it did: its model, its seed, the operation it held, the unsynced
    /// effects it took back.
    pub cut: Option<CutReport>,
}

impl CrashPoint {
    /// The crash `harm` was, with `latest`, the instant of the latest change acknowledged before
    /// it, and `cut`, what it did when it was a power cut.
    fn of(harm: &Harm, (latest, writes): (Instant, u64), cut: Option<CutReport>) -> Self {
        CrashPoint {
            n: harm.n,
            kind: CrashKind::of(harm.fault),
            point: harm.point,
            began: harm.began,
            ended: harm.ended,
            latest,
            writes,
            cut,
        }
    }
}

impl CrashKind {
    /// How a crash by `fault` is caused: a restart through the reopen, a power cut, or the
    /// harness's crash.
    fn of(fault: Fault) -> Self {
        match fault {
            Fault::Restart => CrashKind::Reopen,
            Fault::PowerCut => CrashKind::Cut,
            _ => CrashKind::Crash,
        }
    }
}

/// The default seed of a run, when its settings give none.
const DEFAULT_SEED: u64 = 0x5eed_c4a5_0000_0001;

/// What a crash run did.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct CrashReport {
    /// The seed of the run.
    pub seed: u64,
    /// Operations recorded, lookups included.
    pub ops: usize,
    /// The crashes, in order.
    pub crashes: Vec<CrashPoint>,
    /// Keys the run touched.
    pub keys: usize,
    /// Lookups after crashes: every key touched, after each.
    pub keys_checked: usize,
    /// Whether the clock was set back after the quiet crashes (a store whose clock survives a
    /// restart).
    pub clock_set_back: bool,
    /// How long judging the history took.
    pub judge: Duration,
    /// The ceilings the history was recorded within.
    pub ceilings: Ceilings,
    /// What the run made of each key, by index: the recipe it went through, or its own role.
    pub labels: Vec<&'static str>,
}

impl CrashReport {
    /// The crashes caused by `kind`.
    pub fn count(&self, kind: CrashKind) -> usize {
        self.crashes.iter().filter(|c| c.kind == kind).count()
    }

    /// The unsynced effects the power cuts took back, over every cut.
    pub fn taken_back(&self) -> usize {
        self.crashes.iter().filter_map(|c| c.cut.as_ref()).map(|c| c.taken_back.len()).sum()
    }
}

impl fmt::Display for CrashReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seed {}: {} operations on {} keys, ", self.seed, self.ops, self.keys)?;
        let cuts = self.count(CrashKind::Cut);
        if cuts > 0 {
            let mut models: Vec<Persistence> =
                self.crashes.iter().filter_map(|c| c.cut.as_ref()).map(|c| c.model).collect();
            models.sort();
            models.dedup();
            let models: Vec<&str> = models.iter().map(|m| m.name()).collect();
            let held = self.crashes.iter().filter(|c| c.cut.as_ref().is_some_and(|c| c.held.is_some())).count();
            write!(
                f,
                "{cuts} power cuts (under {}; {held} inside the disk, an operation held), taking back {} unsynced \
                 effects, ",
                models.join(", "),
                self.taken_back()
            )?;
        } else {
            write!(
                f,
                "{} crashes through Fault::Crash and {} restarts through reopen, ",
                self.count(CrashKind::Crash),
                self.count(CrashKind::Reopen)
            )?;
        }
        if !self.crashes.is_empty() {
            let at: Vec<String> = self.crashes.iter().map(|c| c.writes.to_string()).collect();
            write!(f, "after {} acknowledged writes, ", at.join(", "))?;
        }
        write!(
            f,
            "{} lookups of whole states after them, clock {}",
            self.keys_checked,
            if self.clock_set_back { "set back after each quiet crash" } else { "never set back" },
        )
    }
}

/// A crash run: its report and its verdict.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CrashRun {
    /// What the run did.
    pub report: CrashReport,
    /// `Ok` when every key's history is linearizable with faults tolerated; otherwise the
    /// failure, headlined P1 (or D10) when a crash changed a state.
    pub verdict: Result<(), Failure>,
    /// The history recorded.
    pub history: History,
}

/// Whether `harness` can be crashed or restarted by the check: it offers [`Fault::Crash`], or it
/// is durable (its [`Harness::reopen`]).
fn kinds<H: Harness>(harness: &H, capabilities: Capabilities) -> Vec<CrashKind> {
    let mut kinds = Vec::new();
    if harness.faults().contains(&Fault::Crash) {
        kinds.push(CrashKind::Crash);
    }
    if capabilities.durable {
        kinds.push(CrashKind::Reopen);
    }
    kinds
}

/// What the run shares with its threads.
struct Run<'a, H: Harness> {
    runner: Runner<'a, H>,
    kinds: Vec<CrashKind>,
    clock_survives: bool,
    /// Stamps (call) of the lookups made with the clock set back.
    set_back: Mutex<BTreeMap<u64, Instant>>,
    /// The instant of the latest change acknowledged before each crash, and the writes
    /// acknowledged before it, in order.
    latest_before: Vec<(Instant, u64)>,
    /// The instant of the latest change acknowledged so far.
    latest: AtomicU64,
    /// The writes acknowledged so far.
    writes: AtomicU64,
    /// The churn before quiet crashes and in power cuts' bursts.
    churn: Churn,
    /// The first trap kind of a power-cut run's bursts, by its index in [`power::TRAPS`].
    traps_from: usize,
    /// Lookups made after crashes.
    checked: AtomicUsize,
    trouble: Option<Failure>,
    /// The disk of a power-cut run.
    power: Option<&'a Power>,
}

/// Records a history on one store of `harness` while crashing it at the points this module
/// describes, and judges it, with `settings.crashes` and the run's seed
/// ([`crate::Settings::seed_or`]). Never panics: a harness that panics fails the verdict. A
/// harness that can neither crash nor restart its store passes without running, with an empty
/// report.
pub fn run(harness: &dyn DynHarness, settings: &crate::Settings) -> CrashRun {
    run_with(harness, settings, false)
}

/// The crash check with every crash a power cut: for a harness that declares
/// [`Capabilities::power_cuts`], the suite mounts a disk that can lose power
/// ([`reservation_disk::Disk`]) in a directory of its own, opens the store there
/// ([`Harness::store_in`]), and runs the rounds of [`run`], each crash a cut under the declared
/// model (every other cut) or a milder one, drawn from the run's seed. A quiet cut comes right
/// after an acknowledged change; a burst's comes *inside the disk*: a trap holds the k-th write,
/// sync, either, or change of names of the burst (the kinds in turn, burst after burst, from one
/// the seed draws; `k` drawn from the seed) and the disk is cut while the store waits for it, or,
/// when no operation reaches the trap first, at the burst's watch point. A burst's churn goes on
/// changing until the trap holds an operation (4,096 changes or the watch's two seconds at
/// most), so that a trap on names meets the store's next compaction (a snapshot made and renamed
/// into place) whatever its period; that burst is cut under the declared model and is never the
/// run's last, so that a later round lets the store finish the compaction and cuts after it. A
/// store that promises `torn` or `reorder` gets, in the turn of the trap on either, a trap on a
/// tear (the sync of a log whose unsynced write crosses a sector), cut under `torn`, which tears
/// that write. After each cut the store is dropped and opened again on what the cut left, and
/// every key is judged as after any crash; a failure names the cut, its model and every unsynced
/// effect it took back ("bytes 4096-4120 of /log were written and never synced").
///
/// Where FUSE cannot mount (no `/dev/fuse`, no right to mount) the check says so on standard
/// error and passes with an empty report, as a missing server does
/// ([`crate::services::service`]); under `RESERVATION_REQUIRE_SERVICES=1` it fails instead. A
/// harness that declares no promise passes without running, with an empty report.
pub fn power_cuts(harness: &dyn DynHarness, settings: &crate::Settings) -> CrashRun {
    run_with(harness, settings, true)
}

fn run_with(harness: &dyn DynHarness, settings: &crate::Settings, cuts: bool) -> CrashRun {
    let harness = &Erased::new(harness);
    let seed = settings.seed_or(DEFAULT_SEED);
    let crashes = &settings.crashes;
    let check = if cuts { POWER_CHECK } else { CHECK };
    let mut report = CrashReport { seed, ceilings: crashes.ceilings, ..CrashReport::default() };
    let parts = Parts::new(names(), ManualClock::new(START), crashes.ceilings);
    let empty = |names: Names, verdict| CrashRun {
        report: report.clone(),
        verdict,
        history: History { names, events: Vec::new() },
    };
    let power = if cuts {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| mount_power(harness))) {
            Ok(Ok(Some(power))) => Some(power),
            Ok(Ok(None)) => return empty(parts.names, Ok(())),
            Ok(Err(f)) => return empty(parts.names, Err(f)),
            Err(p) => return empty(parts.names, Err(Failure::panicked(check, &*p))),
        }
    } else {
        None
    };
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let capabilities = harness.capabilities();
        let clock = parts.clock.clone();
        match &power {
            Some(power) => (Some(harness.store_in(power.dir.path(), clock)), capabilities, vec![CrashKind::Cut]),
            None => {
                let kinds = kinds(harness, capabilities);
                ((!kinds.is_empty()).then(|| Some(harness.store(clock))), capabilities, kinds)
            }
        }
    }));
    let (store, capabilities, kinds) = match opened {
        Ok(opened) => opened,
        Err(p) => return empty(parts.names, Err(Failure::panicked(check, &*p))),
    };
    let store = match store {
        None => return empty(parts.names, Ok(())),
        Some(None) => {
            let why = "the harness declares a promise to survive power cuts (Capabilities::power_cuts), but its \
                       store_in gave no store";
            return empty(parts.names, Err(Failure::without_rule(check, why)));
        }
        Some(Some(store)) => store,
    };
    let mut r = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    r.next();
    let runner = Runner::new(harness, &parts, capabilities, 0);
    let churned =
        runner.take_keys(churn::KEYS, "a key changed over and over, so that crashes land where the seed says");
    let mut run = Run {
        runner,
        kinds,
        clock_survives: capabilities.durable || power.is_some(),
        set_back: Mutex::new(BTreeMap::new()),
        latest_before: Vec::new(),
        latest: AtomicU64::new(START.as_millis()),
        writes: AtomicU64::new(0),
        churn: Churn::new(churned.start),
        traps_from: first_trap(crashes.rounds, &mut r),
        checked: AtomicUsize::new(0),
        trouble: None,
        power: power.as_ref(),
    };
    let mut events = Vec::new();
    let mut store = Some(store);
    for round in 0..crashes.rounds.max(1) {
        for burst in [false, true] {
            let Some(current) = store.take() else { break };
            let kind = run.kind_for(round, burst);
            store = run.round(current, &mut r, burst, kind, &mut events);
            if run.trouble.is_some() {
                break;
            }
        }
        if run.trouble.is_some() || store.is_none() {
            break;
        }
    }
    // The last store closes before its disk is unmounted.
    drop(store);
    let set_back = std::mem::take(&mut *run.set_back.lock().unwrap_or_else(PoisonError::into_inner));
    let trouble = run.trouble.take();
    let harms = run.runner.harms();
    let labels = run.runner.labels();
    report.keys_checked = run.checked.load(Ordering::SeqCst);
    let mut cut_reports = power
        .as_ref()
        .map(|p| std::mem::take(&mut *p.cuts.lock().unwrap_or_else(PoisonError::into_inner)))
        .unwrap_or_default();
    report.crashes = harms
        .iter()
        .zip(run.latest_before.iter().copied().chain(std::iter::repeat((START, 0))))
        .map(|(h, latest)| CrashPoint::of(h, latest, cut_reports.remove(&h.n)))
        .collect();
    drop(run);
    drop(power);
    let mut names = parts.names;
    names.keys.extend((0..labels.len()).map(key_named));
    events.sort_by_key(|e| e.called);
    report.ops = events.len();
    report.keys = labels.len();
    report.labels = labels.clone();
    report.clock_set_back = capabilities.durable || cuts;
    let judged = WallInstant::now();
    let verdict = match trouble {
        // A store that could not be opened again after a cut: the cut, with what it took back, is
        // its cause as much as the store's error.
        Some(mut f) => {
            if let Some((n, cut)) = report.crashes.last().and_then(|c| c.cut.as_ref().map(|cut| (c.n, cut))) {
                f.context.insert(0, format!("crash {n} was {cut}"));
            }
            Err(f)
        }
        None => judge(check, &names, &events, (&harms, &report.crashes), &labels, &set_back),
    };
    report.judge = judged.elapsed();
    let verdict = verdict.map_err(|f| {
        let f = harm::with_schedule(f, format!("crash run: {report}"), &harms, seed);
        f.with_whole_history(&History { names: names.clone(), events: events.clone() })
            .with_bands(harms.iter().map(crate::drawing::Band::from))
    });
    CrashRun { verdict, report, history: History { names, events } }
}

/// The names of a crash run: a tenant scope in a namespace of its own, owners alice and bob, holds
/// `h0` to `h2`; keys are added as the run takes them.
fn names() -> Names {
    let ty = AggregateType::new("rc-user").expect("a valid type");
    let tenant = Tenant::id("acme").expect("a valid tenant");
    let owner = |id: &str| AggregateRef::new(ty.clone(), tenant.clone(), AggregateId::new(id).expect("a valid id"));
    Names {
        scope: ReservationScope::new(ty.clone(), tenant.clone(), unique_namespace("rc-crashes")),
        keys: Vec::new(),
        owners: vec![owner("alice"), owner("bob")],
        holds: (0..3).map(|i| HoldId::new(format!("h{i}")).expect("a valid hold")).collect(),
    }
}

impl<H: Harness> Run<'_, H> {
    /// How round `round`'s crash is caused: a burst's by a crash when the harness offers one (a
    /// reopen cannot happen while operations are in flight); quiet points alternate.
    fn kind_for(&self, round: usize, burst: bool) -> CrashKind {
        match (burst, self.kinds.as_slice()) {
            (true, [first, ..]) => *first,
            (false, kinds) if !kinds.is_empty() => kinds[round % kinds.len()],
            _ => CrashKind::Reopen,
        }
    }

    /// Notes the instant of the latest change acknowledged so far, and the writes acknowledged, as
    /// those before the crash being caused (a burst's: by the burst's end).
    fn note_latest(&mut self) {
        let latest = Instant::from_millis(self.latest.load(Ordering::SeqCst));
        self.latest_before.push((latest, self.writes.load(Ordering::SeqCst)));
    }

    /// Every key taken so far, with its name.
    fn all_keys(&self) -> Vec<(usize, Key)> {
        (0..self.runner.keys_taken()).map(|k| (k, key_named(k))).collect()
    }

    /// A fresh key for each recipe, labelled with the recipe's name.
    fn fresh_recipes(&self) -> Vec<usize> {
        RECIPES.iter().map(|(name, _)| self.runner.take_keys(1, name).start).collect()
    }

    /// Runs `call` on key `key` from `thread`, and notes the instant of an acknowledged change.
    fn op(&self, store: &H::Store, thread: usize, round: usize, key: usize, call: Call) -> Event {
        let e = self.runner.recorder.run(store, (thread, round), (key, &key_named(key)), call);
        if matches!(e.ret, Return::Outcome(_)) && matches!(e.call, Call::Op(_)) {
            self.latest.fetch_max(e.clock_at_return.as_millis(), Ordering::SeqCst);
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
        e
    }

    /// One round on `store`: fresh keys through every recipe, then a crash of `kind`, quiet or in
    /// the middle of a burst; every key looked up after it. The store to go on with.
    fn round(
        &mut self,
        store: H::Store,
        r: &mut XorShift,
        burst: bool,
        kind: CrashKind,
        events: &mut Vec<Event>,
    ) -> Option<H::Store> {
        let keys = self.fresh_recipes();
        let round = self.latest_before.len();
        let recorder = &self.runner.recorder;
        let store = if burst && kind != CrashKind::Reopen {
            let store = self.burst(store, r, &keys, round, events);
            self.note_latest();
            store?
        } else {
            for phase in 0..4 {
                self.phase(&store, r, &keys, phase, round, burst, events);
            }
            // Changes of the seed's number, so that the crash lands anywhere in a store's period.
            let n = churn::length(r);
            events.extend(self.churn(&store, (0, round), n, &|| false));
            // The anchor: an acknowledged change at the latest instant, the last before the crash.
            let anchor = self.runner.take_keys(1, "a key of its own, written last before the crash").start;
            events.push(self.op(&store, 0, round, anchor, Step::Reserve(A, 0, LONG).call()));
            // Every key as the store holds it before the crash: what the crash is blamed for is
            // only what changed across it.
            events.extend(recorder.lookups(&store, 0, &self.all_keys()));
            // The clock is set back before the crash, so that the store's first readings after it
            // are earlier than the anchor: a store whose clock survives a restart must still
            // decide at the anchor's instant (D10 across a restart).
            let now = recorder.clock.now();
            if self.clock_survives {
                recorder.set_clock(now.saturating_sub_millis(BACK));
            }
            self.note_latest();
            let store = self.crash(store, kind, r)?;
            let recorder = &self.runner.recorder;
            if self.clock_survives {
                let all = self.all_keys();
                let mut seen = recorder.lookups(&store, 0, &all);
                self.checked.fetch_add(all.len(), Ordering::SeqCst);
                for e in &mut seen {
                    e.clock_at_call = now;
                    e.clock_at_return = now;
                }
                if let Some(e) = seen.first() {
                    let back = now.saturating_sub_millis(BACK);
                    self.set_back.lock().unwrap_or_else(PoisonError::into_inner).insert(e.called, back);
                }
                events.extend(seen);
                recorder.set_clock(now);
            }
            store
        };
        if self.trouble.is_some() {
            return None;
        }
        // Every key touched so far, whole, at the suite's clock.
        let recorder = &self.runner.recorder;
        let all = self.all_keys();
        events.extend(recorder.lookups(&store, 0, &all));
        self.checked.fetch_add(all.len(), Ordering::SeqCst);
        recorder.advance(PHASE);
        Some(store)
    }

    /// Phase `phase` of `keys`' recipes, one key after another in a seeded order (on several
    /// threads when `concurrent`); the clock moves first, but for the first phase.
    #[expect(clippy::too_many_arguments, reason = "one phase's whole context; a struct for it would be used once")]
    fn phase(
        &self,
        store: &H::Store,
        r: &mut XorShift,
        keys: &[usize],
        phase: u8,
        round: usize,
        concurrent: bool,
        events: &mut Vec<Event>,
    ) {
        if phase > 0 {
            self.runner.recorder.advance(PHASE);
        }
        let mut order: Vec<usize> = (0..keys.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, r.below(i as u64 + 1) as usize);
        }
        let steps = |recipe: usize| RECIPES[recipe].1.iter().filter(move |(p, _)| *p == phase).map(|(_, s)| *s);
        if !concurrent {
            for &recipe in &order {
                for step in steps(recipe) {
                    events.push(self.op(store, 0, round, keys[recipe], step.call()));
                }
            }
            return;
        }
        let chunks: Vec<Vec<usize>> =
            (0..WORKERS).map(|w| order.iter().copied().skip(w).step_by(WORKERS).collect()).collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = chunks
                .iter()
                .enumerate()
                .map(|(w, chunk)| {
                    s.spawn(move || {
                        let mut out = Vec::new();
                        for &recipe in chunk {
                            for step in steps(recipe) {
                                out.push(self.op(store, w + 1, round, keys[recipe], step.call()));
                            }
                        }
                        out
                    })
                })
                .collect();
            for (w, h) in handles.into_iter().enumerate() {
                match h.join() {
                    Ok(out) => events.extend(out),
                    Err(p) => events.push(panicked(w + 1, &*p)),
                }
            }
        });
    }

    /// Crashes `store` quietly by `kind` (a power cut's model and seed drawn from `r`): the store
    /// to go on with, or `None` (the trouble noted).
    fn crash(&mut self, store: H::Store, kind: CrashKind, r: &mut XorShift) -> Option<H::Store> {
        const QUIET: &str = "quiet: right after an acknowledged change, nothing in flight";
        if let (CrashKind::Cut, Some(power)) = (kind, self.power) {
            let model = power.model(self.runner.harms().len(), None, r);
            let seed = r.next();
            let began = self.runner.begin();
            // Bound first: the disk's lock must be let go before the store is opened again.
            let off = lock(&power.disk).power_off(model, seed);
            return match off {
                Ok(report) => self.reopen_on(store, began, QUIET, power, report),
                Err(e) => {
                    self.trouble = Some(Failure::without_rule(POWER_CHECK, format!("the disk could not be cut: {e}")));
                    None
                }
            };
        }
        let runner = &self.runner;
        let crashed = match kind {
            CrashKind::Crash => {
                runner.cause(CHECK, Some(&store), (Fault::Crash, QUIET), || runner.inject(Fault::Crash)).map(|()| store)
            }
            CrashKind::Reopen | CrashKind::Cut => runner.restart(CHECK, store, QUIET),
        };
        crashed.map_err(|f| self.trouble = Some(f)).ok()
    }
}

/// Judges a crash run's history (ordered by call): key by key, linearizable with faults tolerated.
/// A key that fails after a crash, whose operations before it are explained and whose operations
/// after it are explained from some state the crash could have left, lost or changed what the
/// crash should have kept: P1, or D10 when only a lookup with the clock set back shows it
/// ([`harm::blame`]).
///
/// A power cut's failure names the cut: its model, the operation it held and every unsynced
/// effect it took back.
fn judge(
    check: &str,
    names: &Names,
    events: &[Event],
    (harms, crashes): (&[Harm], &[CrashPoint]),
    labels: &[&'static str],
    set_back: &BTreeMap<u64, Instant>,
) -> Result<(), Failure> {
    verdict::precheck(check, names, events, StorageErrors::Tolerated)?;
    for (key, ops) in by_key(events) {
        harm::blame(check, names, (key, &ops), harms, set_back, |b| {
            let wrong = b.ops[b.ops.len() - 1];
            let label = labels.get(key).copied().unwrap_or("a key of its own");
            let mut f = crash_failure(names, b, label, set_back.get(&wrong.called).copied());
            check.clone_into(&mut f.check);
            let cut = crashes.iter().find(|c| c.n == b.harm.n).and_then(|c| c.cut.as_ref());
            if let Some(cut) = cut {
                f.context.insert(0, format!("crash {} was {cut}", b.harm.n));
            }
            f
        })?;
    }
    Ok(())
}

/// `m`, locked, poisoned or not.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use reservation_disk::{CutReport, Persistence, TakenBack};
    use reservation_store::Instant;

    use super::{BACK, CrashKind, CrashPoint, CrashReport, PHASE, SHORT};
    use crate::harness::Fault;

    /// A report's count of what its cuts took back sums every cut's, and its line says so.
    #[test]
    fn a_reports_effects_taken_back_are_every_cuts() {
        let size = |len| TakenBack::Size { path: "/log".to_owned(), len };
        let cut = |taken_back| CutReport {
            model: Persistence::Names,
            seed: 1,
            held: None,
            taken_back,
            counts: reservation_disk::Counts::default(),
        };
        let point = |n, cut| CrashPoint {
            n,
            kind: CrashKind::Cut,
            point: "quiet",
            began: 0,
            ended: 0,
            latest: Instant::ZERO,
            writes: 0,
            cut,
        };
        let report = CrashReport {
            crashes: vec![
                point(1, Some(cut(vec![size(0), size(8)]))),
                point(2, None),
                point(3, Some(cut(vec![size(4)]))),
            ],
            ..CrashReport::default()
        };
        assert_eq!(report.taken_back(), 3);
        assert!(report.to_string().contains("taking back 3 unsynced effects"), "{report}");
        assert!(report.to_string().contains("after 0, 0, 0 acknowledged writes"), "{report}");
        // Without a cut, the crashes by kind; without a crash, no writes before one.
        let crashed = |kind, n| CrashPoint { kind, ..point(n, None) };
        let report = CrashReport {
            crashes: vec![crashed(CrashKind::Crash, 1), crashed(CrashKind::Reopen, 2), crashed(CrashKind::Reopen, 3)],
            ..CrashReport::default()
        };
        let line = report.to_string();
        assert!(line.contains("1 crashes through Fault::Crash and 2 restarts through reopen"), "{line}");
        assert!(!line.contains("power cuts"), "{line}");
        let line = CrashReport::default().to_string();
        assert!(line.contains("0 crashes through Fault::Crash") && !line.contains("acknowledged writes"), "{line}");
    }

    /// A reservation of a round's first phase, with the short time to live, has expired by the
    /// anchor (three phases later), and the clock set back from there lands before its expiry: a
    /// store that forgets its clock across the crash shows it live again.
    #[test]
    fn the_clock_set_back_lands_before_the_first_phases_short_expiry() {
        let anchor = 3 * PHASE;
        assert!(SHORT <= anchor, "the short reservation is live at the anchor");
        assert!(anchor - BACK < SHORT, "the clock set back to {} is past the expiry at {SHORT}", anchor - BACK);
    }

    /// Each fault that crashes a store is reported as the kind of crash it was, by name.
    #[test]
    fn a_crash_is_named_by_the_fault_that_caused_it() {
        let kinds = [Fault::Restart, Fault::PowerCut, Fault::Crash, Fault::Failover].map(CrashKind::of);
        assert_eq!(kinds, [CrashKind::Reopen, CrashKind::Cut, CrashKind::Crash, CrashKind::Crash]);
        let named = [CrashKind::Crash, CrashKind::Reopen, CrashKind::Cut].map(|k| k.to_string());
        assert_eq!(
            named,
            ["a crash (the harness's Fault::Crash)", "a restart through the harness's reopen", "a power cut"]
        );
    }
}
