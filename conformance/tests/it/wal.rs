//! A durable store as a team outside might write one, with seven recovery bugs behind a switch
//! each, and the crash check ([`reservation_conformance::crashes`]) catching every one on every
//! seed, headlined P1 or D10 with the key and the field; the correct store passes every seed and
//! the whole suite.
//!
//! The store keeps its rows in memory under one lock and appends a record of every change (the
//! key, the instant, the operation, its rule and the row after it) to a write-ahead log. A
//! writer thread commits the records in groups: asked for a commit, it gathers records for a
//! short window, then makes them durable at once. An operation is acknowledged once its record
//! is durable. A crash loses the records not yet durable and rebuilds the rows, and the clock's
//! latest instant, from the log.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use reservation_conformance::crashes::{CrashKind, CrashRun, CrashSettings, run};
use reservation_conformance::faults::{Fault, not_offered};
use reservation_conformance::{Capabilities, Harness, Settings};
use reservation_store::rules::Rule;
use reservation_store::spec::{self, Reservation};
use reservation_store::{
    AggregateRef, Clock, HoldId, Instant, Key, ManualClock, Operation, Outcome, Request, ReservationScope,
    ReservationStore, StorageError, StoreResult, StoredReservation,
};

/// A recovery bug of the kind real teams write, planted in [`WalHarness`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Bug {
    /// An operation is acknowledged once its record is queued to the log writer, before it is
    /// written.
    AckBeforeWrite,
    /// Recovery drops the last record of the log, even when it is whole.
    DropLastRecord,
    /// Recovery skips a second confirm of the same owner, taking it for a replayed duplicate, and
    /// then decides a later release again, against the version it kept.
    SkipDuplicateConfirm,
    /// A confirm answered `AlreadyConfirmed` is logged with the request's lower version instead
    /// of the version kept.
    LogRequestedVersion,
    /// Recovery does not restore the store's clock: after a crash it starts from nothing.
    ClockNotRestored,
    /// Recovery recomputes a join's expiry from the old expiry instead of the join's instant.
    JoinFromOldExpiry,
    /// A write lets its lock go before its record is written and durable: a lookup can show a
    /// row that a crash then loses.
    UnlockBeforeDurable,
}

/// How long the log writer gathers records before it commits them.
const WINDOW: Duration = Duration::from_millis(2);
/// How long a write of [`Bug::UnlockBeforeDurable`] that makes a new row waits, its lock let go,
/// before it writes its record: a log that must grow, slow as disks can be. Only a lookup in that
/// moment shows the bug, and the crash must come before it ends. With the record written before
/// the lock was let go, another write's commit made it durable within the log writer's 2 ms
/// whatever the wait, and a machine running eight tests beside a CPU hog on each core sometimes
/// ran neither the looking thread nor the crash in time (one seed of 20 passed). Only new rows
/// wait, so that the other writes of the run stay quick.
const UNLOCKED: Duration = Duration::from_millis(30);
/// How long the log writer sleeps when nobody asks for a commit.
const IDLE: Duration = Duration::from_millis(200);

/// A record of the log: one change.
#[derive(Clone, Debug)]
struct Record {
    slot: (ReservationScope, Key),
    at: Instant,
    op: Operation<AggregateRef, HoldId>,
    rule: Rule,
    row: Option<StoredReservation>,
}

/// What the store holds in memory, under its lock.
#[derive(Default)]
struct Memory {
    rows: HashMap<(ReservationScope, Key), StoredReservation>,
    /// The latest instant the store decided at (D10).
    latest: Instant,
}

/// The log: records queued for the writer, and those durable.
#[derive(Default)]
struct Log {
    queued: Vec<Record>,
    durable: Vec<Record>,
    /// Records appended so far, and made durable so far.
    appended: u64,
    committed: u64,
    /// Crashes so far: a record queued before a crash is gone.
    crashes: u64,
    /// Whether an operation waits for a commit.
    wanted: bool,
}

/// The store's server: memory, the log, and the writer thread.
struct Server {
    bug: Option<Bug>,
    memory: Mutex<Memory>,
    log: Mutex<Log>,
    changed: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Server {
    fn start(bug: Option<Bug>) -> Arc<Server> {
        let server = Arc::new(Server { bug, memory: Mutex::default(), log: Mutex::default(), changed: Condvar::new() });
        let weak = Arc::downgrade(&server);
        std::thread::spawn(move || writer(&weak));
        server
    }

    /// Queues `record`: its number and the crash count it belongs to.
    fn append(&self, record: Record) -> (u64, u64) {
        let mut log = lock(&self.log);
        log.queued.push(record);
        log.appended += 1;
        (log.appended, log.crashes)
    }

    /// Waits until record `n` of crash epoch `epoch` is durable: an indeterminate error when a
    /// crash lost it first.
    fn commit(&self, n: u64, epoch: u64) -> Result<(), StorageError> {
        let mut log = lock(&self.log);
        log.wanted = true;
        self.changed.notify_all();
        loop {
            if log.crashes != epoch {
                return Err(StorageError::indeterminate("the server crashed before the record was durable"));
            }
            if log.committed >= n {
                return Ok(());
            }
            log = self.changed.wait(log).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A crash: the records not yet durable are lost; memory is rebuilt from the log.
    fn crash(&self) {
        let mut memory = lock(&self.memory);
        let mut log = lock(&self.log);
        log.queued.clear();
        log.appended = log.committed;
        log.crashes += 1;
        *memory = recover(&log.durable, self.bug);
        self.changed.notify_all();
    }
}

/// The log writer of `server`, until the server is gone.
fn writer(server: &Weak<Server>) {
    loop {
        let Some(s) = server.upgrade() else { return };
        let mut log = lock(&s.log);
        if !log.wanted {
            log = s.changed.wait_timeout(log, IDLE).unwrap_or_else(PoisonError::into_inner).0;
        }
        let asked = log.wanted;
        drop(log);
        if asked {
            // Group commit: gather what else comes in the window.
            std::thread::sleep(WINDOW);
        }
        let mut log = lock(&s.log);
        let records = std::mem::take(&mut log.queued);
        log.committed += records.len() as u64;
        log.durable.extend(records);
        log.wanted = false;
        s.changed.notify_all();
    }
}

/// The rows and the clock that the durable records give, as recovery (with `bug`) rebuilds them.
fn recover(records: &[Record], bug: Option<Bug>) -> Memory {
    let records = match bug {
        Some(Bug::DropLastRecord) => &records[..records.len().saturating_sub(1)],
        _ => records,
    };
    let mut memory = Memory::default();
    let mut skipped: HashSet<(ReservationScope, Key)> = HashSet::new();
    for r in records {
        let current = memory.rows.get(&r.slot).cloned();
        let row = match (bug, &r.op, &current) {
            (Some(Bug::SkipDuplicateConfirm), Operation::Confirm { owner, .. }, Some(Reservation::Confirmed(c)))
                if c.owner == *owner =>
            {
                skipped.insert(r.slot.clone());
                continue;
            }
            (Some(Bug::SkipDuplicateConfirm), Operation::Release { .. }, _) if skipped.contains(&r.slot) => {
                spec::apply(current.clone(), r.at, r.op.as_ref()).next
            }
            (Some(Bug::JoinFromOldExpiry), Operation::Reserve { ttl, .. }, Some(Reservation::Pending(p)))
                if matches!(r.rule, Rule::R3 | Rule::R4) =>
            {
                let holds = r.row.as_ref().and_then(|row| row.as_pending()).map(|p| p.holds().clone());
                holds.and_then(|h| Reservation::pending(p.owner().clone(), h, p.expires_at().saturating_add(*ttl)))
            }
            _ => r.row.clone(),
        };
        match row {
            Some(row) => memory.rows.insert(r.slot.clone(), row),
            None => memory.rows.remove(&r.slot),
        };
        memory.latest = memory.latest.max(r.at);
    }
    if bug == Some(Bug::ClockNotRestored) {
        memory.latest = Instant::ZERO;
    }
    memory
}

/// A store on a [`Server`], deciding by the suite's clock.
pub struct WalStore {
    server: Arc<Server>,
    clock: ManualClock,
}

impl WalStore {
    /// The instant to decide at: the clock, or the latest instant decided at if later (D10).
    fn now(&self, memory: &mut Memory) -> Instant {
        memory.latest = memory.latest.max(self.clock.now());
        memory.latest
    }
}

impl ReservationStore for WalStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        request.admitted()?;
        let server = &self.server;
        let mut memory = lock(&server.memory);
        let now = self.now(&mut memory);
        let slot = (request.scope.clone(), request.key.clone());
        let current = memory.rows.get(&slot).cloned();
        let step = spec::apply(current.clone(), now, request.operation);
        let op = request.operation.map(Clone::clone, Clone::clone);
        let row = match (server.bug, &op, step.outcome) {
            (Some(Bug::LogRequestedVersion), Operation::Confirm { owner, version }, Outcome::AlreadyConfirmed) => {
                Some(Some(Reservation::confirmed(owner.clone(), *version)))
            }
            _ => (step.next != current).then(|| step.next.clone()),
        };
        match &step.next {
            Some(next) => memory.rows.insert(slot.clone(), next.clone()),
            None => memory.rows.remove(&slot),
        };
        if let Some(row) = row {
            if matches!(server.bug, Some(Bug::UnlockBeforeDurable)) {
                drop(memory);
                if current.is_none() {
                    std::thread::sleep(UNLOCKED);
                }
            }
            let (n, epoch) = server.append(Record { slot, at: now, op, rule: step.rule, row });
            if matches!(server.bug, Some(Bug::AckBeforeWrite)) {
                return Ok(step.outcome);
            }
            server.commit(n, epoch)?;
        }
        Ok(step.outcome)
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        let mut memory = lock(&self.server.memory);
        let now = self.now(&mut memory);
        Ok(spec::lookup(memory.rows.get(&(scope.clone(), key.clone())), now).cloned())
    }
}

/// The harness of [`WalStore`]: a server per store; a crash of the latest one on
/// [`Fault::Crash`], and a restart (a crash, then a new store on the same server) on reopen.
pub struct WalHarness {
    bug: Option<Bug>,
    current: Mutex<Option<Arc<Server>>>,
    /// Whether it offers [`Fault::Crash`].
    crashes: bool,
}

impl WalHarness {
    /// The store, with `bug` planted or none.
    pub fn new(bug: Option<Bug>) -> Self {
        WalHarness { bug, current: Mutex::new(None), crashes: true }
    }

    /// The store, restarted only through its reopen: it offers no crash.
    pub fn without_crash(bug: Option<Bug>) -> Self {
        WalHarness { crashes: false, ..WalHarness::new(bug) }
    }
}

impl Harness for WalHarness {
    type Store = WalStore;

    fn store(&self, clock: ManualClock) -> WalStore {
        let server = Server::start(self.bug);
        *lock(&self.current) = Some(server.clone());
        WalStore { server, clock }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(true)
    }

    fn reopen(&self, store: WalStore, clock: ManualClock) -> Option<WalStore> {
        store.server.crash();
        Some(WalStore { server: store.server, clock })
    }

    fn faults(&self) -> Vec<Fault> {
        if self.crashes { vec![Fault::Crash] } else { Vec::new() }
    }

    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        match (fault, lock(&self.current).clone()) {
            (Fault::Crash, Some(server)) => {
                server.crash();
                Ok(())
            }
            (fault, _) => Err(not_offered(fault)),
        }
    }
}

// Fewer differential scripts than the default: every write waits for a group commit.
reservation_conformance::tests!(
    wal_store,
    WalHarness::new(None),
    durable,
    settings = reservation_conformance::Settings::default().with_cases(300)
);

/// Seeds each variant runs.
const SEEDS: u64 = 20;

/// The crash check on `bug`'s store for every seed, several seeds at once.
fn runs(bug: Option<Bug>) -> Vec<CrashRun> {
    let seeds: Vec<u64> = (1..=SEEDS).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = seeds
            .chunks(5)
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|&seed| {
                            run(&WalHarness::new(bug), &Settings::from(CrashSettings::default()).with_seed(seed))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("a crash run does not panic")).collect()
    })
}

#[test]
fn p1_the_correct_log_store_passes_the_crash_check_on_every_seed() {
    for run in runs(None) {
        if let Err(f) = &run.verdict {
            panic!("seed {}: {f}", run.report.seed);
        }
        let r = &run.report;
        assert!(r.count(CrashKind::Crash) >= 4 && r.count(CrashKind::Reopen) >= 2, "{r}");
        assert!(r.clock_set_back && r.keys_checked > 100, "{r}");
    }
}

/// Every seed's run of `bug` fails with `rule`, naming a key and one of `fields`.
fn caught(bug: Bug, rule: Rule, fields: &[&str]) {
    let mut first = None;
    for run in runs(Some(bug)) {
        let seed = run.report.seed;
        let failure = run.verdict.expect_err(&format!("{bug:?} passed on seed {seed}: {}", run.report));
        let text = failure.to_string();
        assert_eq!(failure.rule, Some(rule), "{bug:?}, seed {seed}:\n{text}");
        let named = fields.iter().any(|f| text.contains(f));
        assert!(text.contains("after crash") && named, "{bug:?}, seed {seed}:\n{text}");
        assert!(text.contains(&format!("RESERVATION_CONFORMANCE_SEED={seed}")), "{text}");
        first.get_or_insert(text);
    }
    eprintln!("{bug:?}, caught on {SEEDS} of {SEEDS} seeds; seed 1:\n{}", first.unwrap_or_default());
}

/// What a lost write leaves: a reservation gone, or (its release lost: the churn before a quiet
/// crash releases keys too) a reservation back where the key must be free, or (a group commit's
/// whole batch lost: the churn's last changes) the key as an earlier change left it: confirmed at
/// another version, or confirmed where its last reserve made it pending. ("gone" covers a lost
/// confirmation too: "the confirmation is gone".)
const LOST: [&str; 4] = [
    "gone",
    "a reservation is there where the key must be free",
    "the version changed",
    "the key is confirmed where it must be pending",
];

#[test]
fn p1_an_acknowledgement_before_the_record_is_written_is_caught() {
    caught(Bug::AckBeforeWrite, Rule::P1, &LOST);
}

#[test]
fn p1_recovery_that_drops_the_last_record_is_caught() {
    caught(Bug::DropLastRecord, Rule::P1, &LOST);
}

#[test]
fn p1_recovery_that_skips_a_second_confirm_is_caught() {
    caught(Bug::SkipDuplicateConfirm, Rule::P1, &["the version changed"]);
}

#[test]
fn p1_an_already_confirmed_logged_with_the_lower_version_is_caught() {
    caught(Bug::LogRequestedVersion, Rule::P1, &["the version changed"]);
}

#[test]
fn d10_recovery_that_does_not_restore_the_clock_is_caught() {
    caught(Bug::ClockNotRestored, Rule::D10, &["clock went back across the crash"]);
}

#[test]
fn p1_recovery_that_recomputes_a_join_from_the_old_expiry_is_caught() {
    caught(Bug::JoinFromOldExpiry, Rule::P1, &["the expiry changed"]);
}

#[test]
fn p1_a_write_that_unlocks_before_it_is_durable_is_caught() {
    caught(Bug::UnlockBeforeDurable, Rule::P1, &["after crash"]);
}

#[test]
fn the_report_says_whether_durability_was_checked_through_crashes_or_only_reopen() {
    let only = |name: &str| name.starts_with("p1_crashes");
    let crashed = reservation_conformance::run_matching(
        &WalHarness::new(None),
        &reservation_conformance::Settings::default(),
        only,
    );
    let reopened = reservation_conformance::run_matching(
        &WalHarness::without_crash(None),
        &reservation_conformance::Settings::default(),
        only,
    );
    assert!(crashed.is_ok() && reopened.is_ok(), "{crashed}\n{reopened}");
    let (crashed, reopened) = (crashed.to_string(), reopened.to_string());
    assert!(crashed.contains("checked through crashes the harness caused"), "{crashed}");
    assert!(reopened.contains("checked only through the harness's reopen"), "{reopened}");
    // Restarts alone still reach this store's recovery: a planted recovery bug is caught.
    let run = run(
        &WalHarness::without_crash(Some(Bug::DropLastRecord)),
        &Settings::from(CrashSettings::default()).with_seed(3),
    );
    let r = &run.report;
    assert!(r.count(CrashKind::Crash) == 0 && r.count(CrashKind::Reopen) == 8, "{r}");
    assert_eq!(run.verdict.expect_err("a dropped record went unseen").rule, Some(Rule::P1));
}

#[test]
fn the_same_seed_crashes_at_the_same_points() {
    let one = run(&WalHarness::new(None), &Settings::from(CrashSettings::default().with_rounds(2)).with_seed(7));
    let two = run(&WalHarness::new(None), &Settings::from(CrashSettings::default().with_rounds(2)).with_seed(7));
    let points = |r: &CrashRun| r.report.crashes.iter().map(|c| (c.kind, c.n)).collect::<Vec<_>>();
    assert_eq!(points(&one), points(&two));
    assert_eq!(one.report.keys, two.report.keys);
}

/// Another seed crashes after another number of writes (the churn before a quiet crash is the
/// seed's to draw; the first crash, before any burst, comes after the recipes, that churn and
/// the anchor alone), and a run's report carries its seed and the ceilings it was recorded
/// within.
#[test]
fn other_seeds_crash_after_other_numbers_of_writes() {
    let ceilings = reservation_conformance::Ceilings { in_flight: 7, ..reservation_conformance::Ceilings::default() };
    let settings =
        |seed| Settings::from(CrashSettings::default().with_rounds(1).with_ceilings(ceilings)).with_seed(seed);
    let first = |seed| {
        let run = run(&WalHarness::new(None), &settings(seed));
        assert!(run.verdict.is_ok(), "seed {seed}: {}", run.report);
        assert_eq!((run.report.ceilings, run.report.seed), (ceilings, seed), "seed {seed}");
        // The writes counted before a crash are the operations answered with an outcome before
        // it, lookups not among them.
        use reservation_conformance::linearizability::{Call, Return};
        let crash = run.report.crashes.first().expect("a crash");
        let answered = run.history.events.iter().filter(|e| {
            e.returned < crash.began && matches!(e.call, Call::Op(_)) && matches!(e.ret, Return::Outcome(_))
        });
        assert_eq!(crash.writes, answered.count() as u64, "seed {seed}");
        Some(crash.writes)
    };
    let seven = first(7);
    assert_eq!(seven, first(7), "the same seed, another first crash");
    assert!([9, 11].into_iter().any(|seed| first(seed) != seven), "seeds 7, 9 and 11 first crashed at {seven:?}");
}

/// On a harness that offers both, the quiet crashes take a crash and a restart through the reopen
/// in turn, and every burst a crash (a reopen cannot happen while operations are in flight).
#[test]
fn quiet_crashes_take_each_kind_in_turn_and_bursts_a_crash() {
    let run = run(&WalHarness::new(None), &Settings::from(CrashSettings::default().with_rounds(2)).with_seed(3));
    assert!(run.verdict.is_ok(), "{}", run.report);
    let kinds: Vec<CrashKind> = run.report.crashes.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [CrashKind::Crash, CrashKind::Crash, CrashKind::Reopen, CrashKind::Crash], "{}", run.report);
}

/// The long tier (`reservation_conformance::tiers`): run by its own command, and by CI.
mod long {
    /// The same log store in Python behind the driver (`adapters/python/wal_store.py`), with its
    /// recovery bugs: the crash check reaches them through the protocol, the crash caused by a
    /// command (SIGUSR1 to the adapter), as `reservation conform --fault crash=…` causes it.
    mod through_the_driver {
        use reservation_conformance::crashes::{CrashRun, CrashSettings, run};
        use reservation_conformance::driver::CommandHarness;
        use reservation_conformance::faults::Fault;
        use reservation_conformance::services::service;
        use reservation_store::rules::Rule;

        const WAL_STORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/python/wal_store.py");

        /// The crash check of the Python log store with `bug` (`""`: none) on `seed`; `None` without
        /// python3.
        fn crash_run(bug: &str, seed: u64) -> Option<CrashRun> {
            let present =
                std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
            service(
                "python3 (for the Python log store behind the driver)",
                if present { Ok(()) } else { Err("not installed") },
            )?;
            let dir = tempfile::tempdir().expect("a temporary directory");
            let pid = dir.path().join("pid");
            let pid = pid.display().to_string();
            let adapter = format!("echo $$ > {pid}; RESERVATION_WAL_BUG={bug} exec python3 {WAL_STORE}");
            let harness = CommandHarness::start(&adapter).expect("the Python log store starts");
            // The adapter wrote its process id before it answered hello: the crash is one signal.
            let id = std::fs::read_to_string(dir.path().join("pid")).expect("the adapter's process id");
            let harness = harness.with_fault(Fault::Crash, format!("kill -USR1 {}", id.trim()));
            Some(run(&harness, &reservation_conformance::Settings::from(CrashSettings::default()).with_seed(seed)))
        }

        /// Seeds each variant runs through the driver.
        const SEEDS: u64 = 20;

        /// The runs of `bug` on every seed, four at once.
        fn runs(bug: &'static str) -> Option<Vec<CrashRun>> {
            let seeds: Vec<u64> = (1..=SEEDS).collect();
            let runs: Vec<Option<CrashRun>> = std::thread::scope(|s| {
                let handles: Vec<_> = seeds
                    .chunks(SEEDS.div_ceil(4) as usize)
                    .map(|chunk| s.spawn(move || chunk.iter().map(|&seed| crash_run(bug, seed)).collect::<Vec<_>>()))
                    .collect();
                handles.into_iter().flat_map(|h| h.join().expect("a crash run does not panic")).collect()
            });
            runs.into_iter().collect()
        }

        /// Every seed's run of `bug` fails with `rule`, naming the field. Through a process boundary a
        /// crash lands as soon as a signal is handled, which a loaded machine can delay past the
        /// store's 5 ms commit: a seed whose run passed is run again, twice at most, before it counts
        /// as missed (on a quiet machine every seed catches every bug the first time: RELIABILITY.md).
        /// What a lost write shows after the crash: the key as it was before the write, which
        /// through the driver depends on where the crash fell (a lost first reserve leaves the
        /// key free, a lost join leaves the holds and the expiry as they were, a lost release of the
        /// churn before a quiet crash leaves a reservation where the key must be free).
        const LOST: &[&str] = &[
            "gone",
            "the key is confirmed where it must be pending",
            "the holds changed",
            "the expiry changed",
            "the owner changed",
            "the version changed",
            "a reservation is there where the key must be free",
        ];

        /// Every seed's run of `bug` through the driver fails with `rule`, after a crash, naming
        /// one of `fields`.
        fn caught(bug: &'static str, rule: Rule, fields: &[&str]) {
            caught_as(bug, &[rule], fields);
        }

        /// Every seed's run of `bug` through the driver fails with one of `rules`, after a crash,
        /// naming one of `fields`.
        fn caught_as(bug: &'static str, rules: &[Rule], fields: &[&str]) {
            let Some(runs) = runs(bug) else { return };
            let mut again = 0;
            for mut run in runs {
                let seed = run.report.seed;
                while run.verdict.is_ok() && again < 2 {
                    again += 1;
                    run = crash_run(bug, seed).expect("python3 ran a moment ago");
                }
                let failure = run.verdict.as_ref().expect_err(&format!("{bug} passed on seed {seed}: {}", run.report));
                let text = failure.to_string();
                assert!(failure.rule.is_some_and(|r| rules.contains(&r)), "{bug}, seed {seed}:\n{text}");
                assert!(text.contains("after crash"), "{bug}, seed {seed}:\n{text}");
                assert!(fields.iter().any(|f| text.contains(f)), "{bug}, seed {seed}, none of {fields:?}:\n{text}");
            }
            eprintln!("{bug}: caught on every one of {SEEDS} seeds through the driver, {again} run again");
        }

        #[test]
        fn p1_the_correct_python_log_store_passes_on_every_seed() {
            if !reservation_conformance::tiers::long_tier(
                "wal::long::through_the_driver::p1_the_correct_python_log_store_passes_on_every_seed",
            ) {
                return;
            }
            let _alone = crate::LONG_ALONE.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            let Some(runs) = runs("") else { return };
            for run in &runs {
                if let Err(f) = &run.verdict {
                    panic!("seed {}: {f}", run.report.seed);
                }
                assert!(run.report.count(reservation_conformance::crashes::CrashKind::Crash) >= 4, "{}", run.report);
            }
        }

        /// A crash command that kills the adapter itself: the check ends at once with the adapter's
        /// failure, rather than waiting out its recovery time for a store that can no longer answer.
        #[test]
        fn an_adapter_killed_by_its_crash_command_ends_the_check_at_once() {
            if !reservation_conformance::tiers::long_tier(
                "wal::long::through_the_driver::an_adapter_killed_by_its_crash_command_ends_the_check_at_once",
            ) {
                return;
            }
            let _alone = crate::LONG_ALONE.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            if crash_run("", 1).is_none() {
                return;
            }
            let dir = tempfile::tempdir().expect("a temporary directory");
            let pid = dir.path().join("pid").display().to_string();
            let adapter = format!("echo $$ > {pid}; exec python3 {WAL_STORE}");
            let harness = CommandHarness::start(&adapter).expect("the Python log store starts");
            let id = std::fs::read_to_string(&pid).expect("the adapter's process id");
            let harness = harness.with_fault(Fault::Crash, format!("kill -KILL {}", id.trim()));
            let started = std::time::Instant::now();
            let run = run(&harness, &reservation_conformance::Settings::from(CrashSettings::default()).with_seed(1));
            let failure = run.verdict.expect_err("a dead adapter passed");
            assert!(failure.is_protocol(), "{failure}");
            assert!(started.elapsed() < std::time::Duration::from_secs(5), "the check took {:?}", started.elapsed());

            // The fault check too: its nemesis stops waiting for a store that can no longer answer.
            let harness = CommandHarness::start(&adapter).expect("the Python log store starts");
            let id = std::fs::read_to_string(&pid).expect("the adapter's process id");
            let harness = harness.with_fault(Fault::Crash, format!("kill -KILL {}", id.trim()));
            let started = std::time::Instant::now();
            let settings = reservation_conformance::faults::FaultSettings::default().with_faults(&[Fault::Crash]);
            let run = reservation_conformance::faults::run(&harness, &settings.into());
            let failure = run.verdict.expect_err("a dead adapter passed the fault check");
            assert!(failure.is_protocol(), "{failure}");
            assert!(
                started.elapsed() < std::time::Duration::from_secs(8),
                "the fault check took {:?}",
                started.elapsed()
            );
        }

        #[test]
        fn p1_python_ack_before_write_is_caught() {
            if !reservation_conformance::tiers::long_tier(
                "wal::long::through_the_driver::p1_python_ack_before_write_is_caught",
            ) {
                return;
            }
            let _alone = crate::LONG_ALONE.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            // When the write lost is the one that carried the latest instant, a key whose state is
            // right may show it at an earlier one first: the clock went back with the lost write.
            caught_as(
                "ack-before-write",
                &[Rule::P1, Rule::D10],
                &[LOST, &["clock went back across the crash"]].concat(),
            );
        }

        #[test]
        fn p1_python_drop_last_record_is_caught() {
            if !reservation_conformance::tiers::long_tier(
                "wal::long::through_the_driver::p1_python_drop_last_record_is_caught",
            ) {
                return;
            }
            let _alone = crate::LONG_ALONE.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            caught("drop-last-record", Rule::P1, LOST);
        }

        #[test]
        fn p1_python_skip_duplicate_is_caught() {
            if !reservation_conformance::tiers::long_tier(
                "wal::long::through_the_driver::p1_python_skip_duplicate_is_caught",
            ) {
                return;
            }
            let _alone = crate::LONG_ALONE.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            caught("skip-duplicate", Rule::P1, &["the version changed"]);
        }

        #[test]
        fn p1_python_log_requested_version_is_caught() {
            if !reservation_conformance::tiers::long_tier(
                "wal::long::through_the_driver::p1_python_log_requested_version_is_caught",
            ) {
                return;
            }
            let _alone = crate::LONG_ALONE.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            caught("log-requested-version", Rule::P1, &["the version changed"]);
        }

        #[test]
        fn d10_python_clock_not_restored_is_caught() {
            if !reservation_conformance::tiers::long_tier(
                "wal::long::through_the_driver::d10_python_clock_not_restored_is_caught",
            ) {
                return;
            }
            let _alone = crate::LONG_ALONE.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            caught("clock-not-restored", Rule::D10, &["clock went back across the crash"]);
        }

        #[test]
        fn p1_python_join_from_old_expiry_is_caught() {
            if !reservation_conformance::tiers::long_tier(
                "wal::long::through_the_driver::p1_python_join_from_old_expiry_is_caught",
            ) {
                return;
            }
            let _alone = crate::LONG_ALONE.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            caught("join-from-old-expiry", Rule::P1, &["the expiry changed"]);
        }

        #[test]
        fn p1_python_unlock_before_durable_is_caught() {
            if !reservation_conformance::tiers::long_tier(
                "wal::long::through_the_driver::p1_python_unlock_before_durable_is_caught",
            ) {
                return;
            }
            let _alone = crate::LONG_ALONE.read().unwrap_or_else(std::sync::PoisonError::into_inner);
            caught("unlock-before-durable", Rule::P1, &["after crash"]);
        }
    }
}

/// The figures of RELIABILITY.md's comparison: for each planted bug, on how many of 20 seeds the
/// fault check (a seeded schedule of crashes and restarts under load, its contended operations
/// capped at 400) and the crash check each catch it; fails unless the crash check catches every
/// bug on every seed and both checks pass the correct store. A measurement of minutes: run it with
/// `cargo test --release -p reservation-conformance --test it catch_rates -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: prints the catch rates of the fault check and the crash check"]
fn catch_rates_of_the_fault_check_and_the_crash_check() {
    use reservation_conformance::faults::{self, FaultSettings};
    let bugs: [Option<Bug>; 8] = [
        None,
        Some(Bug::AckBeforeWrite),
        Some(Bug::DropLastRecord),
        Some(Bug::SkipDuplicateConfirm),
        Some(Bug::LogRequestedVersion),
        Some(Bug::ClockNotRestored),
        Some(Bug::JoinFromOldExpiry),
        Some(Bug::UnlockBeforeDurable),
    ];
    eprintln!("| planted bug | fault check: caught | crash check: caught | crash check: headline |");
    eprintln!("|---|---:|---:|---|");
    for bug in bugs {
        // The contended operations capped: on a store that holds its lock through a 2 ms commit,
        // a history of the default 4,000 overlaps so much that deciding it takes minutes.
        let settings = |seed| Settings::from(FaultSettings::default().with_ops(400)).with_seed(seed);
        let faults_caught =
            (1..=SEEDS).filter(|&seed| faults::run(&WalHarness::new(bug), &settings(seed)).verdict.is_err()).count();
        let crash_runs = runs(bug);
        let rules: BTreeSet<String> = crash_runs
            .iter()
            .filter_map(|r| r.verdict.as_ref().err())
            .map(|f| f.rule.map_or_else(|| "no rule".to_owned(), |r| r.to_string()))
            .collect();
        let crash_caught = crash_runs.iter().filter(|r| r.verdict.is_err()).count();
        let name = bug.map_or_else(|| "none (the correct store)".to_owned(), |b| format!("{b:?}"));
        eprintln!(
            "| {name} | {faults_caught}/{SEEDS} | {crash_caught}/{SEEDS} | {} |",
            rules.into_iter().collect::<Vec<_>>().join(", ")
        );
        // The crash check catches every planted bug on every seed and passes the correct store;
        // so does the fault check the correct store. Its rates on the bugs are what is measured.
        let want = if bug.is_some() { SEEDS as usize } else { 0 };
        assert_eq!(crash_caught, want, "{name}: the crash check");
        if bug.is_none() {
            assert_eq!(faults_caught, 0, "{name}: the fault check failed the correct store");
        }
    }
}

/// The fault check, when it meets a recovery bug, headlines P1 on some seed: the key's history up
/// to the crash is explained, so the crash lost or changed what was acknowledged. Not on every
/// seed: on a machine with four threads spinning on two cores beside seven other tests, seed 2
/// once failed as "atomicity (H1)" with every operation of the key before the crash, a lookup
/// showing a version that no recorded operation of the key wrote; that headline is not explained
/// yet, and this test does not claim its absence.
#[test]
fn p1_the_fault_check_headlines_a_recovery_bug_p1() {
    use reservation_conformance::faults::{self, FaultSettings};
    let settings = |seed| Settings::from(FaultSettings::default().with_ops(400)).with_seed(seed);
    let failures: Vec<_> = std::thread::scope(|s| {
        let runs: Vec<_> = (1..=6)
            .map(|seed| s.spawn(move || faults::run(&WalHarness::new(Some(Bug::LogRequestedVersion)), &settings(seed))))
            .collect();
        runs.into_iter().filter_map(|r| r.join().expect("a fault run does not panic").verdict.err()).collect()
    });
    assert!(failures.iter().any(|f| f.rule == Some(Rule::P1)), "the lowered version went unseen as P1 on six seeds");
}

/// The judge's times on this store's histories, as `reservation conform … --judge-times` prints
/// them for the built-in stores: `cargo test --release -p reservation-conformance --test it
/// judge_times_of_the_log_store -- --ignored --nocapture` (`RESERVATION_JUDGE_BUSY=2` spins two
/// threads meanwhile).
#[test]
#[ignore = "a measurement: prints the judge's times on the log store's histories"]
fn judge_times_of_the_log_store() {
    use reservation_conformance::judge_times::{Load, measure};
    let busy = std::env::var("RESERVATION_JUDGE_BUSY").ok().and_then(|b| b.parse().ok()).unwrap_or(0);
    let load = Load { runs: 200, at_once: 8, busy };
    let settings = reservation_conformance::Settings::default().with_seed(1);
    // A harness for each run at a time: a harness crashes the server of the store it opened last.
    let harnesses: Vec<WalHarness> = (0..load.at_once).map(|_| WalHarness::new(None)).collect();
    let harnesses: Vec<&dyn reservation_conformance::DynHarness> = harnesses.iter().map(|h| h as _).collect();
    for figures in measure(&harnesses, &settings, load, |_| true) {
        eprintln!("{figures}");
        assert!(figures.failed.is_empty(), "{figures}");
    }
}
