//! `reservation-model stores`: the conformance suite against the built-in stores.

use std::path::PathBuf;
use std::time::Instant;

use reservation_conformance::{Capabilities, Harness, MemoryHarness, Report, Settings, run_all};
use reservation_store::{ManualClock, SqliteOptions, SqliteStore, StorageError, Synchronous};

/// `SqliteStore` handles on one file in a fresh directory, removed when the harness is dropped.
struct SqliteHarness {
    dir: PathBuf,
    path: PathBuf,
    /// Keeps the file open between the suite's stores, as a long-lived process would, so closing
    /// one store does not checkpoint and sync the file.
    _keeper: SqliteStore<ManualClock>,
}

impl SqliteHarness {
    fn new() -> Result<Self, StorageError> {
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("reservation-stores-{}-{stamp}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::with_source("creating a scratch directory", e))?;
        let path = dir.join("stores.db");
        let keeper = open(&path, ManualClock::default())?;
        Ok(SqliteHarness { dir, path, _keeper: keeper })
    }
}

impl Drop for SqliteHarness {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn open(path: &std::path::Path, clock: ManualClock) -> Result<SqliteStore<ManualClock>, StorageError> {
    let mut options = SqliteOptions::default();
    // A reopen in the durable check is a process restart, which NORMAL survives.
    options.synchronous = Synchronous::Normal;
    SqliteStore::open_with(path, clock, options)
}

impl Harness for SqliteHarness {
    type Store = SqliteStore<ManualClock>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        // run_all reports a panicking check as failed, naming the panic.
        open(&self.path, clock).unwrap_or_else(|e| panic!("opening {}: {e}", self.path.display()))
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(true)
    }

    fn settings(&self) -> Settings {
        Settings::default().with_cases(1_000)
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Self::Store {
        drop(store);
        self.store(clock)
    }
}

fn section(name: &str, run: impl FnOnce() -> Report) -> bool {
    println!("conformance suite against {name}:");
    let started = Instant::now();
    let report = run();
    print!("{report}");
    println!("{name}: {} in {:.2?}\n", if report.is_ok() { "conforms" } else { "DOES NOT CONFORM" }, started.elapsed());
    report.is_ok()
}

/// Runs the whole suite against `MemoryStore` and `SqliteStore`; whether both conform.
pub fn run() -> bool {
    let memory = section("MemoryStore", || run_all(&MemoryHarness));
    let sqlite = match SqliteHarness::new() {
        Ok(harness) => section("SqliteStore", || run_all(&harness)),
        Err(e) => {
            println!("SqliteStore: cannot open a scratch database: {e}");
            false
        }
    };
    memory && sqlite
}
