//! `SqliteStore` on a disk that loses power ([`reservation_disk`]): a confirmation acknowledged
//! before a cut, and the conformance suite's crash check with every restart a cut. With
//! `Synchronous::Full` (each commit synced) everything acknowledged survives every persistence
//! model; with `Synchronous::Normal`, which SQLite documents as surviving a process crash only,
//! it survives `process` and is lost under `data` and `names`, the log's unsynced bytes named.

use std::sync::{Mutex, PoisonError};

use reservation_conformance::crashes::{CrashKind, CrashSettings, run};

use reservation_conformance::services::service;
use reservation_conformance::{Capabilities, Harness};
use reservation_disk::{CutReport, Disk, Persistence, Tree};
use reservation_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use reservation_store::rules::Rule;
use reservation_store::spec::Reservation;
use reservation_store::*;

/// A disk mounted in a fresh temporary directory, or `None` (said once) where FUSE cannot mount;
/// a failure under `RESERVATION_REQUIRE_SERVICES=1`.
fn mount() -> Option<(tempfile::TempDir, Disk)> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let disk = service("FUSE (a mount of /dev/fuse)", Disk::mount_tree(dir.path(), Tree::new()))?;
    Some((dir, disk))
}

/// What a reopened store says of a key confirmed (acknowledged) before a cut under `model`: its
/// row (or the reopen's error), and the cut's report. `None` where FUSE cannot mount.
fn confirmed_then_cut(
    synchronous: Synchronous,
    model: Persistence,
    seed: u64,
) -> Option<(Result<Option<StoredReservation>, String>, CutReport)> {
    let (dir, mut disk) = mount()?;
    let path = dir.path().join("reservations.db");
    let mut options = SqliteOptions::default();
    options.synchronous = synchronous;
    let scope = ReservationScope::parse("user", Some("acme"), "user-name").unwrap();
    let owner = AggregateRef::parse("user", Some("acme"), "u-1").unwrap();
    let key = Key::new("ada").unwrap();
    let store = SqliteStore::open_with(&path, SystemClock, options.clone()).unwrap();
    let ttl = Ttl::from_millis(3_600_000).unwrap();
    let hold = HoldId::new("attempt").unwrap();
    assert_eq!(block_on(store.reserve(&scope, &key, &owner, &hold, ttl)).unwrap(), ReserveOutcome::Taken);
    let v1 = Version::stream(1).unwrap();
    assert_eq!(block_on(store.confirm(&scope, &key, &owner, v1)).unwrap(), ConfirmOutcome::Confirmed);
    let report = disk.cut(model, seed).unwrap();
    drop(store);
    let reopened = match SqliteStore::open_with(&path, SystemClock, options) {
        Ok(s) => block_on(s.lookup(&scope, &key)).map_err(|e| e.to_string()),
        Err(e) => Err(error_chain(&e)),
    };
    Some((reopened, report))
}

#[test]
fn p1_sqlite_full_keeps_an_acknowledged_confirmation_through_every_power_cut() {
    for model in Persistence::ALL {
        for seed in 0..4 {
            let Some((row, report)) = confirmed_then_cut(Synchronous::Full, model, seed) else { return };
            let row = row.unwrap_or_else(|e| panic!("{model}: the reopen failed: {e}\n{report}"));
            assert!(matches!(row, Some(Reservation::Confirmed(_))), "{model}, seed {seed}: {row:?}\n{report}");
        }
    }
}

#[test]
fn p1_sqlite_normal_survives_a_process_crash_and_loses_the_confirmation_to_a_power_cut() {
    let Some((row, report)) = confirmed_then_cut(Synchronous::Normal, Persistence::Process, 0) else { return };
    assert!(matches!(row, Ok(Some(Reservation::Confirmed(_)))), "{row:?}\n{report}");
    for model in [Persistence::Data, Persistence::Names] {
        let Some((row, report)) = confirmed_then_cut(Synchronous::Normal, model, 0) else { return };
        assert!(!matches!(row, Ok(Some(Reservation::Confirmed(_)))), "{model}: the confirmation survived\n{report}");
        let said = report.to_string();
        assert!(said.contains("of /reservations.db-wal were written and never synced"), "{said}");
    }
}

/// `SqliteStore` on a [`Disk`]: every restart the crash check asks for is a power cut under
/// `model`, the store dropped on the dead mount and opened again on what the cut left.
struct PowerCutHarness {
    dir: tempfile::TempDir,
    disk: Mutex<Disk>,
    options: SqliteOptions,
    model: Persistence,
    cuts: Mutex<Vec<CutReport>>,
}

impl PowerCutHarness {
    fn new(synchronous: Synchronous, model: Persistence) -> Option<Self> {
        let (dir, disk) = mount()?;
        let mut options = SqliteOptions::default();
        options.synchronous = synchronous;
        Some(PowerCutHarness { dir, disk: Mutex::new(disk), options, model, cuts: Mutex::default() })
    }

    fn cuts(&self) -> Vec<CutReport> {
        self.cuts.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Harness for PowerCutHarness {
    type Store = SqliteStore<ManualClock>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        let path = self.dir.path().join("reservations.db");
        SqliteStore::open_with(&path, clock, self.options.clone())
            .unwrap_or_else(|e| panic!("opening {}: {}", path.display(), error_chain(&e)))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(true)
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        let mut cuts = self.cuts.lock().unwrap_or_else(PoisonError::into_inner);
        let seed = cuts.len() as u64;
        let report = self.disk.lock().unwrap_or_else(PoisonError::into_inner).cut(self.model, seed);
        cuts.push(report.unwrap_or_else(|e| panic!("the disk would not mount again after a cut: {e}")));
        drop(store);
        Some(self.store(clock))
    }
}

#[test]
fn p1_the_crash_check_with_power_cuts_passes_sqlite_full_under_every_model() {
    for model in Persistence::ALL {
        let Some(h) = PowerCutHarness::new(Synchronous::Full, model) else { return };
        let started = std::time::Instant::now();
        let run = run(&h, &CrashSettings::default().into());
        let taken: usize = h.cuts().iter().map(|c| c.taken_back.len()).sum();
        eprintln!(
            "SQLite FULL, crash check with power cuts under `{model}`: {}; {} cuts took back {taken} unsynced effects, in {:.2?}",
            run.report,
            h.cuts().len(),
            started.elapsed()
        );
        if let Err(failure) = run.verdict {
            panic!("{model}: {failure}\n{:#?}", h.cuts());
        }
        assert_eq!(run.report.count(CrashKind::Reopen), h.cuts().len(), "{}", run.report);
        assert!(!h.cuts().is_empty());
    }
}

#[test]
fn p1_the_crash_check_with_power_cuts_catches_sqlite_normal() {
    for model in [Persistence::Data, Persistence::Names] {
        let Some(h) = PowerCutHarness::new(Synchronous::Normal, model) else { return };
        let failure = run(&h, &CrashSettings::default().into()).verdict.expect_err("SQLite NORMAL passed power cuts");
        let first = h.cuts().into_iter().next().map(|c| c.to_string()).unwrap_or_default();
        eprintln!(
            "SQLite NORMAL under `{model}`: {}\nits first cut: {first}",
            failure.to_string().lines().next().unwrap_or("")
        );
        assert_eq!(failure.rule, Some(Rule::P1), "{model}: {failure}");
    }
}
