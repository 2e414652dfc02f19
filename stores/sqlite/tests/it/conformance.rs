//! The whole conformance suite against `SqliteStore` through its `SqliteHarness` (feature
//! `conformance`), with the durable capability on.

use reservation_conformance::Settings;
use reservation_sqlite::SqliteHarness;

/// The crate's `SqliteHarness`: one database file in a scratch directory, every store
/// another handle on it. Half the default differential scripts keep this test to seconds; every
/// rule is still reached, and RESERVATION_CONFORMANCE_CASES runs more.
fn harness() -> SqliteHarness {
    SqliteHarness::new()
        .unwrap_or_else(|e| panic!("opening a scratch database: {}", reservation_store::error_chain(&e)))
        .with_settings(Settings::default().with_cases(1_000))
}

reservation_conformance::tests!(sqlite_store, harness(), durable);
