//! The whole conformance suite against `SqliteStore`, linked as any third party would: a
//! `Harness` that opens stores on one file per test, with the durable capability on.
#![cfg(feature = "sqlite")]

use std::path::{Path, PathBuf};

use reservation_conformance::{Capabilities, Harness, Settings};
use reservation_store::{ManualClock, SqliteOptions, SqliteStore, Synchronous};

/// Stores on one SQLite file in a fresh temporary directory. Every store the suite asks for is
/// another handle on that file, so the checks also exercise several handles (and the
/// connections of each) sharing it.
struct SqliteHarness {
    path: PathBuf,
    /// Keeps the file open between the suite's stores (as another process would), so that closing
    /// a store is not the last close, which checkpoints the write-ahead log and syncs the file.
    _keeper: SqliteStore<ManualClock>,
    _dir: tempfile::TempDir,
}

impl SqliteHarness {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("conformance.db");
        let keeper = open(&path, ManualClock::default());
        SqliteHarness { path, _keeper: keeper, _dir: dir }
    }
}

fn open(path: &Path, clock: ManualClock) -> SqliteStore<ManualClock> {
    let mut options = SqliteOptions::default();
    // A reopen is a process restart, not a power loss: NORMAL keeps every commit across it, and
    // spares the suite's thousands of transactions a disk sync each.
    options.synchronous = Synchronous::Normal;
    SqliteStore::open_with(path, clock, options).unwrap_or_else(|e| panic!("opening the store: {e}"))
}

impl Harness for SqliteHarness {
    type Store = SqliteStore<ManualClock>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        open(&self.path, clock)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(true)
    }

    fn settings(&self) -> Settings {
        // Half the default differential scripts keep this test to seconds; every rule is still
        // reached. RESERVATION_CONFORMANCE_CASES runs more.
        Settings::default().with_cases(1_000)
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Self::Store {
        drop(store);
        self.store(clock)
    }
}

reservation_conformance::tests!(sqlite_store, SqliteHarness::new());
