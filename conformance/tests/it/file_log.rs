//! A store that keeps its log in a file, as a team outside might write one, on the suite's
//! power-cut check ([`reservation_conformance::crashes::power_cuts`]): the correct store syncs
//! each record before it answers and syncs its directory when it creates the log, and passes
//! every seed; three sync bugs of the kind the LazyFS and ALICE studies found in real systems are
//! each caught on every seed, P1, the cut's report naming the unsynced write or name it took back.
//!
//! The store keeps its rows in memory under one lock and appends, for every change, a record of
//! 24 bytes to `log` in its directory: the key, the row after the change and the instant of the
//! change. The values behind a key's and a row's numbers are interned in the harness, which
//! outlives every store it opens: what the file holds, and what a cut takes back, is which
//! changes were made, the part that durability is about. Recovery reads the whole records of the
//! log (a torn last record is cut off the file) and takes the rows and the latest instant (D10)
//! from them.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use reservation_conformance::crashes::{CrashKind, power_cuts};
use reservation_conformance::{Capabilities, Harness, Persistence, Settings};
use reservation_store::rules::Rule;
use reservation_store::spec;
use reservation_store::{
    Clock, Instant, Key, ManualClock, Outcome, Request, ReservationScope, ReservationStore, StorageError, StoreResult,
    StoredReservation,
};

/// A sync bug, planted in [`FileLogHarness`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SyncBug {
    /// The log is written and never synced: what the page cache holds is all there is.
    NeverSynced,
    /// A change is answered once its record is written; the record is synced when the next
    /// change comes (a group commit that acknowledges a batch before its sync).
    AckBeforeSync,
    /// The log is created, written and synced, but its directory never is: a power cut can take
    /// back the log's name, and every record with it.
    DirNeverSynced,
}

/// A record's size: the key's number, the row's number, the instant, 8 bytes each.
const RECORD: usize = 24;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn failed(what: &str, e: &std::io::Error) -> StorageError {
    StorageError::indeterminate(format!("the log: {what}: {e}"))
}

/// The keys and rows the records name by number; row 0 is a free key.
#[derive(Default)]
struct Interned {
    slots: Vec<(ReservationScope, Key)>,
    rows: Vec<Option<StoredReservation>>,
}

impl Interned {
    fn slot(&mut self, slot: &(ReservationScope, Key)) -> u64 {
        number(&mut self.slots, slot)
    }

    fn row(&mut self, row: &Option<StoredReservation>) -> u64 {
        if self.rows.is_empty() {
            self.rows.push(None);
        }
        number(&mut self.rows, row)
    }
}

fn number<T: PartialEq + Clone>(values: &mut Vec<T>, value: &T) -> u64 {
    let at = values.iter().position(|v| v == value).unwrap_or_else(|| {
        values.push(value.clone());
        values.len() - 1
    });
    at as u64
}

/// What a store holds under its lock.
struct Inner {
    log: File,
    rows: HashMap<(ReservationScope, Key), StoredReservation>,
    latest: Instant,
    /// A record written and not yet synced ([`SyncBug::AckBeforeSync`]).
    unsynced: bool,
}

/// The store: its log in `dir`.
pub struct FileLogStore {
    dir: PathBuf,
    inner: Mutex<Inner>,
    clock: ManualClock,
    bug: Option<SyncBug>,
    names: Arc<Mutex<Interned>>,
}

impl FileLogStore {
    /// Opens the log in `dir`, creating it when missing, and recovers from it.
    fn open(dir: &Path, clock: ManualClock, bug: Option<SyncBug>, names: Arc<Mutex<Interned>>) -> StoreResult<Self> {
        let path = dir.join("log");
        let existed = path.try_exists().map_err(|e| failed("looking for the log", &e))?;
        let mut log = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| failed("opening the log", &e))?;
        if !existed && bug != Some(SyncBug::DirNeverSynced) {
            File::open(dir).and_then(|d| d.sync_all()).map_err(|e| failed("syncing the directory", &e))?;
        }
        let mut bytes = Vec::new();
        log.read_to_end(&mut bytes).map_err(|e| failed("reading the log", &e))?;
        let whole = bytes.len() - bytes.len() % RECORD;
        if whole < bytes.len() {
            // A torn last record: cut off, so that the next record starts where a record does.
            log.set_len(whole as u64).and_then(|()| log.sync_all()).map_err(|e| failed("cutting a torn record", &e))?;
        }
        let (mut rows, mut latest) = (HashMap::new(), Instant::ZERO);
        {
            let interned = lock(&names);
            for record in bytes[..whole].chunks_exact(RECORD) {
                let field = |i: usize| u64::from_le_bytes(record[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
                let slot = interned.slots.get(field(0) as usize).cloned();
                let row = interned.rows.get(field(1) as usize).cloned();
                let (Some(slot), Some(row)) = (slot, row) else {
                    return Err(StorageError::new("the log names a key or a row it never wrote").into());
                };
                match row {
                    Some(row) => rows.insert(slot, row),
                    None => rows.remove(&slot),
                };
                latest = latest.max(Instant::from_millis(field(2)));
            }
        }
        let inner = Inner { log, rows, latest, unsynced: false };
        Ok(FileLogStore { dir: dir.to_path_buf(), inner: Mutex::new(inner), clock, bug, names })
    }

    /// Appends the record of `slot` becoming `row` at `at`, made durable as the bug allows.
    fn append(
        &self,
        inner: &mut Inner,
        slot: &(ReservationScope, Key),
        row: &Option<StoredReservation>,
        at: Instant,
    ) -> StoreResult<()> {
        let mut record = Vec::with_capacity(RECORD);
        {
            let mut interned = lock(&self.names);
            record.extend(interned.slot(slot).to_le_bytes());
            record.extend(interned.row(row).to_le_bytes());
        }
        record.extend(at.as_millis().to_le_bytes());
        if self.bug == Some(SyncBug::AckBeforeSync) && inner.unsynced {
            inner.log.sync_data().map_err(|e| failed("syncing the last batch", &e))?;
        }
        inner.log.write_all(&record).map_err(|e| failed("writing a record", &e))?;
        match self.bug {
            Some(SyncBug::NeverSynced) => {}
            Some(SyncBug::AckBeforeSync) => inner.unsynced = true,
            _ => inner.log.sync_data().map_err(|e| failed("syncing a record", &e))?,
        }
        Ok(())
    }
}

impl ReservationStore for FileLogStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        request.admitted()?;
        let mut inner = lock(&self.inner);
        inner.latest = inner.latest.max(self.clock.now());
        let now = inner.latest;
        let slot = (request.scope.clone(), request.key.clone());
        let current = inner.rows.get(&slot).cloned();
        let step = spec::apply(current.clone(), now, request.operation);
        if step.next != current {
            self.append(&mut inner, &slot, &step.next, now)?;
            match step.next {
                Some(next) => inner.rows.insert(slot, next),
                None => inner.rows.remove(&slot),
            };
        }
        Ok(step.outcome)
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        let mut inner = lock(&self.inner);
        inner.latest = inner.latest.max(self.clock.now());
        let now = inner.latest;
        Ok(spec::lookup(inner.rows.get(&(scope.clone(), key.clone())), now).cloned())
    }
}

/// The harness of [`FileLogStore`]: a store per directory, which a reopen opens again; it
/// promises to survive a power cut under `names`, bug or not.
pub struct FileLogHarness {
    bug: Option<SyncBug>,
    names: Arc<Mutex<Interned>>,
    scratch: tempfile::TempDir,
    promise: Persistence,
    /// Whether it says `durable` too.
    durable: bool,
}

impl FileLogHarness {
    /// The store, with `bug` planted or none.
    pub fn new(bug: Option<SyncBug>) -> Self {
        let scratch = tempfile::tempdir().expect("a temporary directory");
        FileLogHarness { bug, names: Arc::default(), scratch, promise: Persistence::Names, durable: false }
    }

    /// The same store, promising to survive `promise` instead.
    pub fn promising(self, promise: Persistence) -> Self {
        FileLogHarness { promise, ..self }
    }

    fn open(&self, dir: &Path, clock: ManualClock) -> FileLogStore {
        FileLogStore::open(dir, clock, self.bug, Arc::clone(&self.names))
            .unwrap_or_else(|e| panic!("opening the log in {}: {e}", dir.display()))
    }
}

impl Harness for FileLogHarness {
    type Store = FileLogStore;

    /// A store in a directory of its own: the suite's stores share no log.
    fn store(&self, clock: ManualClock) -> FileLogStore {
        let dir = tempfile::tempdir_in(self.scratch.path()).expect("a directory").keep();
        self.open(&dir, clock)
    }

    /// The promise alone, `durable` left unset: a promise implies it, and the suite takes it so
    /// (the clock set back after each quiet cut included).
    fn capabilities(&self) -> Capabilities {
        let mut capabilities = Capabilities::default().with_durable(self.durable);
        capabilities.power_cuts = Some(self.promise);
        capabilities
    }

    fn reopen(&self, store: FileLogStore, clock: ManualClock) -> Option<FileLogStore> {
        let dir = store.dir.clone();
        drop(store);
        Some(self.open(&dir, clock))
    }

    fn store_in(&self, dir: &Path, clock: ManualClock) -> Option<FileLogStore> {
        Some(self.open(dir, clock))
    }
}

#[test]
fn p1_the_power_cut_check_passes_the_log_store_that_syncs() {
    for seed in 1..=2 {
        let run = power_cuts(&FileLogHarness::new(None), &Settings::default().with_seed(seed));
        if let Err(failure) = run.verdict {
            panic!("seed {seed}: {failure}");
        }
        assert_eq!(run.report.crashes.is_empty(), !mounts(), "{}", run.report);
    }
}

/// The failure of the power-cut check on `bug` with `seed`, and its text; `Ok(None)` where FUSE
/// cannot mount (the check passed without running), `Err` with the run's report when it passed.
fn caught(bug: SyncBug, seed: u64) -> Result<Option<(Option<Rule>, String)>, String> {
    let run = power_cuts(&FileLogHarness::new(Some(bug)), &Settings::default().with_seed(seed));
    match run.verdict {
        Err(failure) => Ok(Some((failure.rule, failure.to_string()))),
        Ok(()) if !mounts() => Ok(None),
        Ok(()) => Err(format!("{bug:?} passed the power-cut check on seed {seed}: {}", run.report)),
    }
}

/// Whether FUSE mounts here, asked of the disk itself (said once where it does not; a failure
/// under `RESERVATION_REQUIRE_SERVICES=1`): a run of the check with no cut is then a check that
/// did not run, never a pass.
fn mounts() -> bool {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let disk = reservation_disk::Disk::mount(dir.path());
    reservation_conformance::services::service("FUSE (a mount of /dev/fuse)", disk).is_some()
}

/// What a failure must name as the cause of `bug`: the effect the cut took back.
fn cause(bug: SyncBug) -> &'static str {
    match bug {
        SyncBug::NeverSynced | SyncBug::AckBeforeSync => "of /log were written and never synced",
        SyncBug::DirNeverSynced => "log in / was made and never made durable",
    }
}

#[test]
fn p1_the_power_cut_check_catches_a_log_never_synced_and_names_its_unsynced_bytes() {
    let Some((rule, text)) = caught(SyncBug::NeverSynced, 1).unwrap_or_else(|e| panic!("{e}")) else { return };
    assert_eq!(rule, Some(Rule::P1), "{text}");
    assert!(text.contains(cause(SyncBug::NeverSynced)), "{text}");
}

#[test]
fn p1_the_power_cut_check_catches_an_answer_before_the_sync() {
    let Some((rule, text)) = caught(SyncBug::AckBeforeSync, 1).unwrap_or_else(|e| panic!("{e}")) else { return };
    assert_eq!(rule, Some(Rule::P1), "{text}");
    assert!(text.contains(cause(SyncBug::AckBeforeSync)), "{text}");
}

#[test]
fn p1_the_power_cut_check_catches_a_log_whose_directory_was_never_synced() {
    let Some((rule, text)) = caught(SyncBug::DirNeverSynced, 1).unwrap_or_else(|e| panic!("{e}")) else { return };
    assert_eq!(rule, Some(Rule::P1), "{text}");
    assert!(text.contains(cause(SyncBug::DirNeverSynced)), "{text}");
}

/// The power-cut check on seeds 1 to 20 against the correct store and each bug; prints the table
/// RELIABILITY.md gives:
/// `cargo test --release -p reservation-conformance --test it power_cut_rates_of_the_log_store -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: 80 runs of the power-cut check"]
fn power_cut_rates_of_the_log_store() {
    println!(
        "| the log store in a file (`conformance/tests/it/file_log.rs`) | power-cut check, seeds 1-20: caught, cause named | headline |"
    );
    println!("|---|---:|---|");
    let mut passed = 0;
    for seed in 1..=20 {
        let run = power_cuts(&FileLogHarness::new(None), &Settings::default().with_seed(seed));
        passed += usize::from(run.verdict.is_ok() && !run.report.crashes.is_empty());
    }
    println!("| none: the correct store | passes {passed}/20 | |");
    let mut all = passed == 20;
    for bug in [SyncBug::NeverSynced, SyncBug::AckBeforeSync, SyncBug::DirNeverSynced] {
        let mut rules = std::collections::BTreeSet::new();
        let mut n = 0;
        for seed in 1..=20 {
            if let Ok(Some((rule, text))) = caught(bug, seed) {
                n += usize::from(text.contains(cause(bug)));
                rules.insert(rule.map_or("none".to_owned(), |r| r.to_string()));
            }
        }
        let rules: Vec<String> = rules.into_iter().collect();
        println!("| {bug:?} | {n}/20 | {} |", rules.join(", "));
        all &= n == 20;
    }
    assert!(all, "a bug went uncaught on some seed, or the correct store failed");
}

/// The replay line a failure prints gives the same failure: its seed, run again, fails the same
/// key after the same cut, with the same unsynced effects named.
#[test]
fn p1_the_replay_line_of_a_power_cut_failure_fails_again_the_same_way() {
    let run = power_cuts(&FileLogHarness::new(Some(SyncBug::NeverSynced)), &Settings::default().with_seed(7));
    let Err(failure) = run.verdict else {
        assert!(!mounts(), "the unsynced log passed: {}", run.report);
        return;
    };
    let replay = failure.replay.clone().expect("a replay line");
    let seed: u64 = replay
        .split_once("RESERVATION_CONFORMANCE_SEED=")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no seed in the replay line: {replay}"));
    assert_eq!(seed, 7, "{replay}");
    assert!(replay.contains("cargo test power_cuts"), "{replay}");
    let again = power_cuts(&FileLogHarness::new(Some(SyncBug::NeverSynced)), &Settings::default().with_seed(seed));
    let again = again.verdict.expect_err("the replay passed");
    assert_eq!(again.problem, failure.problem);
    assert_eq!(again.context.first(), failure.context.first(), "the cut named first");
}

/// The check's entry point, as `tests!` and `reservation conform` call it, fails the unsynced log
/// and passes the synced one (where FUSE cannot mount, both pass: it said so).
#[test]
fn p1_the_power_cut_check_through_its_entry_point() {
    use reservation_conformance::checks;
    let settings = Settings::default().with_seed(3);
    let mounts = mounts();
    let unsynced = checks::power_cuts(&FileLogHarness::new(Some(SyncBug::NeverSynced)), &settings);
    assert_eq!(unsynced.is_err(), mounts, "{unsynced:?}");
    if let Err(failure) = unsynced {
        assert_eq!(failure.rule, Some(Rule::P1), "{failure}");
        assert_eq!(failure.check, "power_cuts", "{failure}");
    }
    checks::power_cuts(&FileLogHarness::new(None), &settings).unwrap_or_else(|f| panic!("{f}"));
}

/// A passing or failing run's report says what the cuts did: every crash a power cut, the
/// unsynced effects they took back counted, and a failure headlined as after a power cut.
#[test]
fn p1_the_report_of_a_power_cut_run_counts_its_cuts_and_what_they_took_back() {
    let run = power_cuts(&FileLogHarness::new(Some(SyncBug::NeverSynced)), &Settings::default().with_seed(2));
    if !mounts() {
        return;
    }
    // Four rounds, each ending in a quiet cut and a burst's.
    assert_eq!(run.report.crashes.len(), 8, "{}", run.report);
    assert_eq!(run.report.count(CrashKind::Cut), run.report.crashes.len(), "{}", run.report);
    assert!(run.report.taken_back() > 0, "{}", run.report);
    assert!(run.report.to_string().contains("power cuts (under "), "{}", run.report);
    assert!(run.report.clock_set_back, "a promise implies durable: the clock is set back after each quiet cut");
    let failure = run.verdict.expect_err("the unsynced log passed");
    assert!(failure.problem.contains("(a power cut, "), "{failure}");
}

/// A promise of a process crash only: every cut under `process`, nothing taken back, and the
/// unsynced log passes, since a process crash keeps what the page cache holds.
#[test]
fn p1_a_promise_of_a_process_crash_is_cut_under_process_only() {
    let harness = FileLogHarness::new(Some(SyncBug::NeverSynced)).promising(Persistence::Process);
    let run = power_cuts(&harness, &Settings::default().with_seed(4));
    if let Err(failure) = run.verdict {
        panic!("{failure}");
    }
    if !mounts() {
        return;
    }
    // Four rounds, each ending in a quiet cut and a burst's.
    assert_eq!(run.report.crashes.len(), 8, "{}", run.report);
    assert_eq!(run.report.taken_back(), 0, "{}", run.report);
    assert!(run.report.crashes.iter().all(|c| c.cut.as_ref().is_some_and(|c| c.model == Persistence::Process)));
    assert!(run.report.clock_set_back, "{}", run.report);
}

/// A promise alone is taken as durable: the same run, the harness saying `durable` too or not,
/// makes the same lookups after its cuts, those with the clock set back included.
#[test]
fn d10_a_promise_to_survive_power_cuts_sets_the_clock_back_as_durable_does() {
    let settings = Settings::default().with_seed(5);
    let alone = power_cuts(&FileLogHarness::new(None), &settings);
    let mut durable = FileLogHarness::new(None);
    durable.durable = true;
    let said = power_cuts(&durable, &settings);
    assert!(alone.verdict.is_ok() && said.verdict.is_ok(), "{:?} {:?}", alone.verdict, said.verdict);
    assert_eq!(alone.report.crashes.len(), if mounts() { 8 } else { 0 }, "{}", alone.report);
    assert_eq!(alone.report.keys_checked, said.report.keys_checked, "{}\n{}", alone.report, said.report);
}
