//! Silent network paths: the proxy holds the store's connection open and relays nothing. Every
//! wait ends within [`RedisOptions::timeout`], with a `StorageError` that is indeterminate exactly
//! when the `EXEC` was sent; the connection is closed, and the store works again once the path
//! does.

use std::time::Duration;

use reservation_conformance::START;
use reservation_redis::{RedisOptions, RedisStore, Time};
use reservation_store::error_chain;
use reservation_store::{ManualClock, StoreError};
use reservation_testkit::Silent;
use reservation_testkit::proxy::CuttingProxy;

use crate::harness_with;

/// The bound of the stores that go through the proxy: short, to keep the tests short, yet far
/// above any answer a loaded machine gives on a working path.
fn bounded() -> RedisOptions {
    let mut options = RedisOptions::default();
    options.timeout = Duration::from_secs(3);
    options
}

/// A proxy to the server of `h`, and its URL through the proxy.
fn proxy(h: &reservation_redis::RedisHarness) -> (CuttingProxy, String) {
    let url = h.url();
    let authority = url.trim_start_matches("redis://").split('/').next().unwrap_or_default();
    let port = authority.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(6379);
    let proxy = CuttingProxy::start(("127.0.0.1", port)).expect("a proxy");
    let url = format!("redis://127.0.0.1:{}/", proxy.port());
    (proxy, url)
}

/// Pauses the proxy at `pattern` (forwarding it or not) during a first reserve of a free key by
/// a store of one connection with `options`, through the proxy.
fn silent_reserve(label: &str, options: RedisOptions, pattern: &[u8], forward: bool) -> Option<Silent> {
    let h = harness_with(options)?;
    let (proxy, url) = proxy(&h);
    let clock = ManualClock::new(START);
    let options = h.options().clone().with_max_connections(1);
    let through = h
        .runtime()
        .block_on(RedisStore::connect(&url, Time::Local(clock.clone()), options))
        .expect("connected through the proxy");
    let direct = h.store_with(Time::Local(clock));
    let stores = (&through, &direct);
    Some(reservation_testkit::silent_first_reserve(
        h.runtime(),
        &proxy,
        stores,
        |s| s.connections(),
        label,
        pattern,
        forward,
    ))
}

fn assert_timed_out(error: &StoreError, indeterminate: bool) {
    assert_eq!(error.is_indeterminate(), indeterminate, "{}", error_chain(&error));
    let said = error_chain(&error);
    assert!(matches!(error, StoreError::Storage(_)), "{said}");
    assert!(said.contains("Redis: ") && said.contains("timed out"), "{said}");
}

#[test]
fn a_reserve_that_goes_silent_before_the_exec_fails_in_time_determinate_and_changed_nothing() {
    let Some(silent) = silent_reserve("silent-watch", bounded(), b"WATCH", false) else { return };
    assert_timed_out(&silent.error, false);
    assert!(!silent.exists, "a determinate error, yet the reservation was made");
    let Some(silent) = silent_reserve("silent-watch-sent", bounded(), b"WATCH", true) else { return };
    assert_timed_out(&silent.error, false);
    assert!(!silent.exists, "a determinate error, yet the reservation was made");
}

#[test]
fn a_reserve_that_goes_silent_after_the_exec_was_sent_fails_in_time_indeterminate() {
    // The EXEC reaches the server, which runs the transaction; its answer never comes back.
    let Some(silent) = silent_reserve("silent-exec", bounded(), b"EXEC", true) else { return };
    assert_timed_out(&silent.error, true);
    assert!(silent.exists, "the server got the EXEC, so the reservation was made");
    // The EXEC is held back: the caller cannot tell this case from the one above.
    let Some(silent) = silent_reserve("silent-exec-held", bounded(), b"EXEC", false) else { return };
    assert_timed_out(&silent.error, true);
    assert!(!silent.exists, "the EXEC never reached the server, yet the reservation was made");
}

#[test]
fn a_connect_through_a_silent_path_fails_in_time() {
    let Some(h) = harness_with(bounded()) else { return };
    let (proxy, url) = proxy(&h);
    let options = h.options().clone();
    let connect = || RedisStore::connect(&url, Time::Local(ManualClock::new(START)), options.clone());
    let (error, _) = reservation_testkit::silent_connect(h.runtime(), &proxy, "silent-connect", connect);
    assert!(!error.is_indeterminate(), "{}", error_chain(&error));
    assert!(error_chain(&error).contains("Redis: no connection"), "{}", error_chain(&error));
}

#[test]
fn a_reserve_waiting_for_the_pool_while_its_only_connection_is_silent_fails_in_time() {
    let Some(h) = harness_with(bounded()) else { return };
    let (proxy, url) = proxy(&h);
    let options = h.options().clone().with_max_connections(1);
    let through = h
        .runtime()
        .block_on(RedisStore::connect(&url, Time::Local(ManualClock::new(START)), options))
        .expect("connected through the proxy");
    let (waiting, silent) = reservation_testkit::silent_checkout(h.runtime(), &proxy, &through, "silent-checkout");
    // It waits for the pool, or, once the first reserve gave its connection up, for a new one.
    assert!(!waiting.is_indeterminate(), "{}", error_chain(&waiting));
    assert!(error_chain(&waiting).contains("Redis: no connection"), "{}", error_chain(&waiting));
    assert_timed_out(&silent, false);
}

#[test]
fn the_default_bound_is_the_documented_one() {
    assert_eq!(RedisOptions::default().timeout, Duration::from_secs(5));
}

/// The long tier (`reservation_conformance::tiers`): run by its own command, and by CI.
mod long {
    use super::*;

    #[test]
    fn with_the_default_options_a_silent_path_fails_within_their_bounds() {
        if !reservation_conformance::tiers::long_tier(
            "silent::long::with_the_default_options_a_silent_path_fails_within_their_bounds",
        ) {
            return;
        }
        // Measured, for the record: a reserve and a connect each fail after about `timeout` (5 s).
        // Run with `--nocapture` to see the figures.
        let Some(silent) = silent_reserve("silent-default", RedisOptions::default(), b"WATCH", false) else { return };
        assert_timed_out(&silent.error, false);
        let Some(h) = harness_with(RedisOptions::default()) else { return };
        let (proxy, url) = proxy(&h);
        let connect = || RedisStore::connect(&url, Time::Local(ManualClock::new(START)), h.options().clone());
        reservation_testkit::silent_connect(h.runtime(), &proxy, "silent-connect-default", connect);
    }
}
