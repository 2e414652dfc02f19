//! The PostgreSQL store's tests, against a real server: `RESERVATION_PG_URL`, by default
//! `postgres://postgres@127.0.0.1:5432/test`. Each run works in schemas of its own. Without a
//! server the tests say so in one line and pass, unless `RESERVATION_REQUIRE_SERVICES=1`.

mod auto_failover;
mod clock;
mod conformance;
mod corrupt;
mod fault_check;
mod linearizability;
mod options;
mod patroni;
mod power_cut;
mod schema;
mod silent;
mod storage_errors;
mod sweep;
mod write_skew;

use reservation_conformance::services::service;
use reservation_postgres::{PostgresHarness, PostgresOptions};

/// A harness of its own for one test: its own schema and pool, dropped with it; or `None`
/// (said once) without a server. Tests never share tables: each store's sweep deletes what its
/// own clock calls expired, and the tests' clocks differ.
pub fn harness() -> Option<PostgresHarness> {
    harness_with(PostgresOptions::default())
}

/// As [`harness`], with `options`.
pub fn harness_with(options: PostgresOptions) -> Option<PostgresHarness> {
    service("PostgreSQL", PostgresHarness::connect(&reservation_postgres::pg_url(), options))
}

/// A harness whose store locks existing rows only (`SELECT … FOR UPDATE`): the planted bug.
pub fn broken_harness() -> Option<PostgresHarness> {
    harness_with(PostgresOptions::default().broken_row_lock_only())
}

/// A plain client on the test server, for what the store never does: altering its tables,
/// terminating its backends.
pub async fn admin() -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&reservation_postgres::pg_url(), tokio_postgres::NoTls)
        .await
        .expect("the test server answered the harness");
    tokio::spawn(connection);
    client
}

/// docs/stores.md quotes the crate's example (a doctest, so it compiles) exactly.
#[test]
fn the_stores_guide_quotes_the_crate_example() {
    let (lib, guide) = (include_str!("../../src/lib.rs"), include_str!("../../../../docs/stores.md"));
    reservation_testkit::assert_guide_quotes_example(lib, guide, "docs/stores.md", "reservation-postgres");
}
