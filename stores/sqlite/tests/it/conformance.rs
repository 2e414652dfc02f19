//! The whole conformance suite against `SqliteStore` through its `SqliteHarness` (feature
//! `conformance`), with the durable capability on.

use reservation_conformance::Settings;
use reservation_sqlite::SqliteHarness;

/// The crate's `SqliteHarness`: one database file in a scratch directory, every store
/// another handle on it.
fn harness() -> SqliteHarness {
    SqliteHarness::new()
        .unwrap_or_else(|e| panic!("opening a scratch database: {}", reservation_store::error_chain(&e)))
}

// A quarter of the default differential scripts keep this test to seconds; every rule is still
// reached, and RESERVATION_CONFORMANCE_CASES runs more.
reservation_conformance::tests!(sqlite_store, harness(), power_cuts, settings = Settings::default().with_cases(1_000));

/// The suite's check of D10 across a restart has teeth here: on the planted bug that neither
/// persists the instant of a change nor reads it back, it fails, on D10.
#[test]
fn d10_restart_catches_a_store_that_forgets_its_clock() {
    let options = reservation_sqlite::SqliteOptions::default().broken_forgets_clock();
    let harness = SqliteHarness::scratch(options).unwrap();
    let failure = reservation_conformance::checks::d10_restart(&harness, &reservation_conformance::Settings::default())
        .expect_err("a store that forgets its clock passed the check of D10 across a restart");
    assert_eq!(failure.rule, Some(reservation_store::rules::Rule::D10), "{failure}");
}
