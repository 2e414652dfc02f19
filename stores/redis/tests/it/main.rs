//! The Redis store's tests, against a real server: `RESERVATION_REDIS_URL`, by default
//! `redis://127.0.0.1:6379/`, under key prefixes of their own; and, for durability and server
//! restarts, a `redis-server` of their own with an append-only file. Without a server the tests
//! say so in one line and pass, unless `RESERVATION_REQUIRE_SERVICES=1`.

mod clock;
mod cluster;
mod conformance;
mod corrupt;
mod fault_check;
mod linearizability;
mod options;
mod orchestrated;
mod power_cut;
mod sentinel;
mod servers;
mod silent;
mod storage_errors;
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

/// A plain connection to the harness's server, for what the store never does itself.
pub fn raw(h: &RedisHarness) -> redis::aio::MultiplexedConnection {
    h.runtime().block_on(async {
        let client = redis::Client::open(h.url()).expect("a client");
        client.get_multiplexed_async_connection().await.expect("a connection")
    })
}

/// The Redis key of `key` in `scope` under the harness's prefix, spelled as the crate
/// documentation of the row format says.
pub fn row_key(h: &RedisHarness, scope: &reservation_store::ReservationScope, key: &reservation_store::Key) -> Vec<u8> {
    let mut out = format!("{}:r:", h.options().prefix).into_bytes();
    let parts =
        [scope.aggregate_type.as_str().as_bytes(), scope.tenant.as_bytes(), scope.namespace.as_str().as_bytes()];
    for part in parts.into_iter().chain([key.as_str().as_bytes()]) {
        out.extend(format!("{}:", part.len()).into_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// docs/stores.md quotes the crate's example (a doctest, so it compiles) exactly.
#[test]
fn the_stores_guide_quotes_the_crate_example() {
    let (lib, guide) = (include_str!("../../src/lib.rs"), include_str!("../../../../docs/stores.md"));
    reservation_testkit::assert_guide_quotes_example(lib, guide, "docs/stores.md", "reservation-redis");
}

/// The `INFO server` line `name:` of the server at `url`.
pub fn info_line(h: &reservation_redis::RedisHarness, url: &str, name: &str) -> String {
    answering_line(h, url, name).expect("the server answers INFO")
}

/// As [`info_line`], or `None` if nothing answers at `url` within a second.
pub fn answering_line(h: &reservation_redis::RedisHarness, url: &str, name: &str) -> Option<String> {
    h.runtime().block_on(async {
        let ask = async {
            let client = redis::Client::open(url).ok()?;
            let mut conn = client.get_multiplexed_async_connection().await.ok()?;
            let info: String = redis::cmd("INFO").arg("server").query_async(&mut conn).await.ok()?;
            let line = info.lines().find(|l| l.starts_with(&format!("{name}:")))?;
            Some(line[name.len() + 1..].trim().to_owned())
        };
        tokio::time::timeout(std::time::Duration::from_secs(1), ask).await.ok().flatten()
    })
}
