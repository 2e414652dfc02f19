//! The whole conformance suite, durable and D10 across a restart included, against PostgreSQL.

use crate::harness;

reservation_conformance::tests!(
    postgres,
    ?harness(),
    durable,
    settings = reservation_postgres::PostgresHarness::settings()
);
