//! Silent network paths: the proxy holds the store's connection open and relays nothing. Every
//! wait ends within its configured bound, with a `StorageError` that is indeterminate exactly when
//! the `COMMIT` was sent; the connection is closed, and the store works again once the path does.

use std::time::Duration;

use reservation_conformance::START;
use reservation_postgres::{PostgresOptions, PostgresStore, Time};
use reservation_store::error_chain;
use reservation_store::{ManualClock, StoreError};
use reservation_testkit::Silent;
use reservation_testkit::proxy::CuttingProxy;

use crate::{harness, harness_with};

/// The bounds of the stores that go through the proxy: short, to keep the tests short, yet far
/// above any answer a loaded machine gives on a working path.
fn bounded() -> PostgresOptions {
    let mut options = PostgresOptions::default();
    options.connect_timeout = Duration::from_secs(3);
    options.response_timeout = Duration::from_secs(3);
    options.idle_transaction_timeout = Duration::from_secs(2);
    options
}

/// `options` in the harness's schema, under its connections' name: the stores under test take
/// their bounds from `options`, while the harness made its schema and tables with the default
/// ones (a loaded server may take more than the short bounds to create tables; only the paths
/// through the proxy are meant to be bounded short).
fn in_harness(options: PostgresOptions, h: &reservation_postgres::PostgresHarness) -> PostgresOptions {
    options.with_schema(h.options().schema.clone()).with_application_name(h.options().application_name.clone())
}

/// A proxy to the test server, and a connection string to the server through it.
fn proxy() -> (CuttingProxy, String) {
    let config: tokio_postgres::Config = reservation_postgres::pg_url().parse().expect("a valid test URL");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let proxy = CuttingProxy::start((host.as_str(), port)).expect("a proxy");
    let url = format!(
        "host=127.0.0.1 port={} user={} dbname={}",
        proxy.port(),
        config.get_user().unwrap_or("postgres"),
        config.get_dbname().unwrap_or("test")
    );
    (proxy, url)
}

/// Pauses the proxy at `pattern` (forwarding it or not) during a first reserve of a free key by
/// a store of one connection with `options`, through the proxy.
fn silent_reserve(label: &str, options: PostgresOptions, pattern: &[u8], forward: bool) -> Option<Silent> {
    let h = harness()?;
    let (proxy, url) = proxy();
    let clock = ManualClock::new(START);
    let options = in_harness(options, &h).with_max_connections(1);
    let through = h
        .runtime()
        .block_on(PostgresStore::connect(&url, Time::Local(clock.clone()), options))
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
    assert!(said.contains("PostgreSQL: ") && said.contains(": no answer within 3s"), "{said}");
}

#[test]
fn a_reserve_that_goes_silent_before_the_commit_fails_in_time_determinate_and_changed_nothing() {
    // The server never gets the transaction.
    let Some(silent) = silent_reserve("silent-begin", bounded(), b"BEGIN", false) else { return };
    assert_timed_out(&silent.error, false);
    assert!(!silent.exists, "a determinate error, yet the reservation was made");
    // The server gets the BEGIN (and what else of the transaction came in the same chunk); its
    // answers never come back. The transaction is never committed: the store closed its
    // connection without sending the COMMIT.
    let Some(silent) = silent_reserve("silent-begin-sent", bounded(), b"BEGIN", true) else { return };
    assert_timed_out(&silent.error, false);
    assert!(!silent.exists, "a determinate error, yet the reservation was made");
}

#[test]
fn a_reserve_that_goes_silent_after_the_commit_was_sent_fails_in_time_indeterminate() {
    // The COMMIT reaches the server, which commits; its answer never comes back.
    let Some(silent) = silent_reserve("silent-commit", bounded(), b"COMMIT", true) else { return };
    assert_timed_out(&silent.error, true);
    assert!(silent.exists, "the server got the COMMIT, so the reservation was made");
    // The COMMIT is held back: the caller cannot tell this case from the one above. The server
    // ends the idle transaction, rolling it back, before the direct lookup gets the key's lock.
    let Some(silent) = silent_reserve("silent-commit-held", bounded(), b"COMMIT", false) else { return };
    assert_timed_out(&silent.error, true);
    assert!(!silent.exists, "the COMMIT never reached the server, yet the reservation was made");
}

#[test]
fn a_connect_through_a_silent_path_fails_in_time() {
    let Some(h) = harness() else { return };
    let (proxy, url) = proxy();
    let options = in_harness(bounded(), &h);
    let connect = || PostgresStore::connect(&url, Time::Local(ManualClock::new(START)), options.clone());
    let (error, _) = reservation_testkit::silent_connect(h.runtime(), &proxy, "silent-connect", connect);
    assert!(!error.is_indeterminate(), "{}", error_chain(&error));
    assert!(
        error_chain(&error).contains("PostgreSQL: no connection: Timeout occurred while creating"),
        "{}",
        error_chain(&error)
    );
    // Connected, the checks of the store's tables go silent.
    proxy.pause_at(b"to_regclass", false);
    let (result, _) = reservation_testkit::within_hang(h.runtime(), "silent-schema", connect());
    let error = result.expect_err("connected through a silent proxy");
    assert!(
        error_chain(&error).contains("PostgreSQL: the store's tables: no answer within 3s"),
        "{}",
        error_chain(&error)
    );
    proxy.resume();
    h.runtime().block_on(connect()).expect("connected once the proxy resumed");
}

#[test]
fn a_reserve_waiting_for_the_pool_while_its_only_connection_is_silent_fails_in_time() {
    let mut options = bounded();
    options.connect_timeout = Duration::from_secs(2);
    options.response_timeout = Duration::from_secs(6);
    let Some(h) = harness() else { return };
    let (proxy, url) = proxy();
    let options = in_harness(options, &h).with_max_connections(1);
    let through = h
        .runtime()
        .block_on(PostgresStore::connect(&url, Time::Local(ManualClock::new(START)), options))
        .expect("connected through the proxy");
    let (waiting, silent) = reservation_testkit::silent_checkout(h.runtime(), &proxy, &through, "silent-checkout");
    assert!(!waiting.is_indeterminate(), "{}", error_chain(&waiting));
    assert!(
        error_chain(&waiting).contains("PostgreSQL: no connection: Timeout occurred while waiting"),
        "{}",
        error_chain(&waiting)
    );
    assert!(!silent.is_indeterminate(), "{}", error_chain(&silent));
    assert!(error_chain(&silent).contains("no answer within 6s"), "{}", error_chain(&silent));
}

#[test]
fn the_default_bounds_are_the_documented_ones() {
    let options = PostgresOptions::default();
    let bounds = (
        options.connect_timeout,
        options.statement_timeout,
        options.response_timeout,
        options.idle_transaction_timeout,
    );
    let secs = Duration::from_secs;
    assert_eq!(bounds, (secs(5), secs(5), secs(10), secs(4)));
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
        // Measured, for the record: a reserve fails after about `response_timeout` (10 s), a connect
        // after about `connect_timeout` (5 s). Run with `--nocapture` to see the figures.
        let Some(silent) = silent_reserve("silent-default", PostgresOptions::default(), b"BEGIN", false) else {
            return;
        };
        assert!(error_chain(&silent.error).contains("no answer within 10s"), "{}", error_chain(&silent.error));
        let Some(h) = harness_with(PostgresOptions::default()) else { return };
        let (proxy, url) = proxy();
        let connect = || PostgresStore::connect(&url, Time::Local(ManualClock::new(START)), h.options().clone());
        reservation_testkit::silent_connect(h.runtime(), &proxy, "silent-connect-default", connect);
    }
}
