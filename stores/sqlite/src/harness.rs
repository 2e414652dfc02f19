//! [`SqliteHarness`]: the conformance suite's harness for [`SqliteStore`] (feature `conformance`),
//! the one that the command line, this crate's tests and the fuzzer share.

use std::path::{Path, PathBuf};

use reservation_conformance::{Capabilities, Harness, Persistence};
use reservation_store::{ManualClock, StorageError};

use crate::{SqliteOptions, SqliteStore, Synchronous};

/// `SqliteStore` handles on one database file. Every store the suite asks for is another handle
/// on that file, so the checks also exercise several handles sharing it; every check works in a
/// namespace of its own. Durable: [`Harness::reopen`] closes the handle and opens the file again,
/// as a process restart would; the reopened store's clock never goes back behind the latest change
/// of a scope (rule D10 across a restart, which every durable store keeps), which the store
/// persists per scope, so that the checks sharing the file never move each other's clocks.
///
/// A store that cannot be opened panics inside [`Harness::store`], which the suite reports as the
/// failure of the check that asked for it.
pub struct SqliteHarness {
    path: PathBuf,
    options: SqliteOptions,
    /// Keeps the file open between the suite's stores, as a long-lived process would, so that
    /// closing a store is not the last close (which checkpoints the log and syncs the file).
    _keeper: SqliteStore<ManualClock>,
    /// The scratch directory to remove on drop, if this harness made it.
    scratch: Option<PathBuf>,
}

impl SqliteHarness {
    /// A harness on a new database file in a fresh scratch directory under the system's
    /// temporary directory, removed when the harness is dropped. Its stores use
    /// [`Synchronous::Normal`]: a reopen is a process restart, which `NORMAL` survives, and the
    /// suite's thousands of transactions are spared a disk sync each.
    pub fn new() -> Result<Self, StorageError> {
        Self::scratch(SqliteOptions { synchronous: Synchronous::Normal, ..SqliteOptions::default() })
    }

    /// A harness on a new database file in a fresh scratch directory, removed when the harness is
    /// dropped, whose stores open with `options`.
    pub fn scratch(options: SqliteOptions) -> Result<Self, StorageError> {
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("reservation-conformance-{}-{stamp}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::with_source("creating a scratch directory", e))?;
        match Self::at(dir.join("conformance.db"), options) {
            Ok(mut h) => {
                h.scratch = Some(dir);
                Ok(h)
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// A harness on the database file at `path` (created if missing, never removed), whose stores
    /// open with `options`.
    fn at(path: impl Into<PathBuf>, options: SqliteOptions) -> Result<Self, StorageError> {
        let path = path.into();
        let keeper = SqliteStore::open_with(&path, ManualClock::default(), options.clone())?;
        Ok(SqliteHarness { path, options, _keeper: keeper, scratch: None })
    }
}

impl Drop for SqliteHarness {
    fn drop(&mut self) {
        if let Some(dir) = &self.scratch {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Harness for SqliteHarness {
    type Store = SqliteStore<ManualClock>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        SqliteStore::open_with(&self.path, clock, self.options.clone())
            .unwrap_or_else(|e| panic!("opening {}: {}", self.path.display(), reservation_store::error_chain(&e)))
    }

    /// Durable, with the promise its synchronous setting makes: `FULL` survives a power cut under
    /// every model (each commit is synced); `NORMAL`, a process crash only (the log is synced at
    /// checkpoints), as SQLite documents.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_power_cuts(match self.options.synchronous {
            Synchronous::Full => Persistence::Reorder,
            Synchronous::Normal => Persistence::Process,
        })
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        drop(store);
        Some(self.store(clock))
    }

    /// A store on `reservations.db` in `dir`, with this harness's options.
    fn store_in(&self, dir: &Path, clock: ManualClock) -> Option<Self::Store> {
        let path = dir.join("reservations.db");
        let store = SqliteStore::open_with(&path, clock, self.options.clone())
            .unwrap_or_else(|e| panic!("opening {}: {}", path.display(), reservation_store::error_chain(&e)));
        Some(store)
    }
}
