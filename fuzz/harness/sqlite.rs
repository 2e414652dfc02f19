//! The `SqliteStore` harness of the `sqlite` fuzz target, shared with the workspace test that
//! replays its corpus, so that both run the store the same way.

use reservation_sqlite::{SqliteHarness, SqliteOptions, Synchronous};

/// The store's `SqliteHarness` on a scratch database file (every script works in a
/// namespace of its own), sweeping expired rows after every new row, so that the sweep meets
/// every script.
pub fn harness() -> SqliteHarness {
    let mut options = SqliteOptions::default();
    options.synchronous = Synchronous::Normal;
    options.sweep_every = 1;
    SqliteHarness::scratch(options).unwrap_or_else(|e| panic!("opening a scratch database: {e}"))
}
