//! The Redis store's tests, against a real server: `RESERVATION_REDIS_URL`, by default
//! `redis://127.0.0.1:6379/`, under key prefixes of their own; and, for durability and server
//! restarts, a `redis-server` of their own with an append-only file. Without a server the tests
//! say so in one line and pass, unless `RESERVATION_REQUIRE_SERVICES=1`.

mod conformance;
mod corrupt;
mod faults;
mod linearizability;
mod sweep;

use reservation_conformance::services::service;
use reservation_redis::{RedisHarness, RedisOptions};

/// A harness of its own for one test, on the shared server; or `None` (said once) without one.
pub fn harness() -> Option<RedisHarness> {
    harness_with(RedisOptions::default())
}

/// As [`harness`], with `options`.
pub fn harness_with(options: RedisOptions) -> Option<RedisHarness> {
    service("Redis", RedisHarness::connect(&reservation_redis::redis_url(), options))
}

/// A harness on a `redis-server` of its own that keeps every write on disk; or `None` (said
/// once) when `redis-server` cannot be started.
pub fn durable_harness() -> Option<RedisHarness> {
    service("redis-server (for the append-only server of the durable tests)", RedisHarness::durable())
}

/// The README quotes the crate's example (a doctest, so it compiles) exactly.
#[test]
fn the_readme_quotes_the_crate_example() {
    let (lib, readme) = (include_str!("../../src/lib.rs"), include_str!("../../../../README.md"));
    reservation_testkit::assert_readme_quotes_example(lib, readme, "reservation-redis");
}
