//! The `SqliteStore` harness of the `sqlite` fuzz target, shared with the workspace test that
//! replays its corpus, so that both run the store the same way.

use std::path::PathBuf;

use reservation_conformance::Harness;
use reservation_store::{ManualClock, SqliteOptions, SqliteStore, Synchronous};

/// `SqliteStore` on one database file (every script works in a namespace of its own), sweeping
/// expired rows after every new row, so that the sweep's expiry comparison meets every script.
pub struct SqliteHarness(pub PathBuf);

impl Harness for SqliteHarness {
    type Store = SqliteStore<ManualClock>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        let mut options = SqliteOptions::default();
        options.synchronous = Synchronous::Normal;
        options.sweep_every = 1;
        SqliteStore::open_with(&self.0, clock, options).unwrap_or_else(|e| panic!("opening the store: {e}"))
    }
}
