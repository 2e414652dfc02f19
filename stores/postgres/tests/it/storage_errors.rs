//! Storage failures: backends terminated mid-operation, connections cut before and after the
//! `COMMIT`, a statement timeout. Each is a `StorageError`, indeterminate exactly when the
//! operation may have taken effect, and the histories stay linearizable.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use reservation_conformance::linearizability;
use reservation_conformance::{START, unique_namespace};
use reservation_postgres::{PostgresOptions, PostgresStore, Time};
use reservation_store::error_chain;
use reservation_store::{
    AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, ReserveOutcome, Tenant, TenantId, Ttl,
};
use reservation_testkit::proxy::CuttingProxy;

use crate::{admin, harness_with};

fn scope(label: &str) -> ReservationScope {
    ReservationScope::new(
        reservation_store::AggregateType::new("user").expect("a valid type"),
        Tenant::Id(TenantId::new("acme").expect("a valid tenant")),
        unique_namespace(label),
    )
}

fn owner(id: &str) -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), id).expect("a valid owner")
}

#[test]
fn killed_backends_give_storage_errors_and_linearizable_histories() {
    let Some(h) = harness_with(PostgresOptions::default()) else { return };
    let app = h.options().application_name.clone();
    let killed = AtomicU64::new(0);
    let terminate = |stop: &AtomicBool| {
        h.runtime().block_on(async {
                let admin = admin().await;
                let mut i = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(2 + i % 9));
                    i += 1;
                    let n = admin
                        .query_one(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND state <> 'idle'",
                            &[&app],
                        )
                        .await
                        .map_or(0, |r| r.get::<_, i64>(0));
                    killed.fetch_add(n.unsigned_abs(), Ordering::SeqCst);
                }
        });
    };
    let (names, events) =
        reservation_testkit::while_running(terminate, || linearizability::record(&h, 8, 4_000, 0x0bad_c0de));
    assert!(killed.load(Ordering::SeqCst) > 0, "no backend was killed mid-operation");
    reservation_testkit::judge_faults(&names, &events, "terminated backends");
}

/// Cuts the connection when the client sends `pattern` (forwarding it or not) during a first
/// reserve of a free key; returns the error and whether the reservation exists afterwards.
fn cut_reserve(label: &str, pattern: &[u8], forward: bool) -> Option<(reservation_store::StoreError, bool)> {
    let h = harness_with(PostgresOptions::default())?;
    let config: tokio_postgres::Config = reservation_postgres::pg_url().parse().expect("a valid test URL");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let cutter = CuttingProxy::start((host.as_str(), port)).expect("a proxy");
    let url = format!(
        "host=127.0.0.1 port={} user={} dbname={}",
        cutter.port(),
        config.get_user().unwrap_or("postgres"),
        config.get_dbname().unwrap_or("test")
    );
    let clock = ManualClock::new(START);
    let options = h.options().clone().with_max_connections(1);
    let through = h
        .runtime()
        .block_on(PostgresStore::connect(&url, Time::Local(clock.clone()), options))
        .expect("connected through the proxy");
    let direct = h.store_with(Time::Local(clock));
    Some(reservation_testkit::cut_first_reserve(h.runtime(), &cutter, &through, &direct, label, pattern, forward))
}

#[test]
fn a_connection_cut_before_the_commit_is_determinate_and_changed_nothing() {
    let Some((error, exists)) = cut_reserve("cut-begin", b"BEGIN", false) else { return };
    assert!(!error.is_indeterminate(), "{}", error_chain(&error));
    assert!(matches!(error, reservation_store::StoreError::Storage(_)), "{}", error_chain(&error));
    assert!(error_chain(&error).starts_with("PostgreSQL: "), "{}", error_chain(&error));
    assert!(!exists, "a determinate error, yet the reservation was made");
}

#[test]
fn a_connection_cut_after_the_commit_was_sent_is_indeterminate() {
    // The COMMIT reaches the server, which commits; its answer never comes back.
    let Some((error, exists)) = cut_reserve("cut-commit", b"COMMIT", true) else { return };
    assert!(error.is_indeterminate(), "{}", error_chain(&error));
    assert!(error_chain(&error).contains("may have taken effect"), "{}", error_chain(&error));
    assert!(exists, "the server got the COMMIT, so the reservation was made");
    // The COMMIT never reaches the server: the outcome is still unknown to the caller.
    let Some((error, exists)) = cut_reserve("cut-commit-lost", b"COMMIT", false) else { return };
    assert!(error.is_indeterminate(), "{}", error_chain(&error));
    assert!(!exists, "the COMMIT never reached the server, yet the reservation was made");
}

#[test]
fn a_statement_timeout_is_a_determinate_storage_error_that_changed_nothing() {
    let mut options = PostgresOptions::default();
    options.statement_timeout = Duration::from_millis(300);
    let Some(h) = harness_with(options) else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let (scope, key, alice, hold) =
        (scope("timeout"), Key::new("k").expect("key"), owner("alice"), HoldId::new("h").expect("hold"));
    let ttl = Ttl::from_millis(60_000).expect("non-zero");
    let blocker = h.runtime().block_on(async {
        let admin = admin().await;
        let table = format!("\"{}\".reservation", h.options().schema);
        admin.batch_execute(&format!("BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")).await.expect("locked");
        admin
    });
    let error =
        h.runtime().block_on(store.reserve(&scope, &key, &alice, &hold, ttl)).expect_err("a locked table answered");
    h.runtime().block_on(blocker.batch_execute("ROLLBACK")).expect("unlocked");
    assert!(!error.is_indeterminate(), "{}", error_chain(&error));
    assert!(error_chain(&error).contains("statement timeout"), "{}", error_chain(&error));
    assert_eq!(h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up"), None);
    let outcome =
        h.runtime().block_on(store.reserve(&scope, &key, &alice, &hold, ttl)).expect("reserved after the timeout");
    assert_eq!(outcome, ReserveOutcome::Taken);
}

/// Makes every write to the harness's table fail with SQLSTATE `code` while fewer than
/// `failures` writes have been tried (a trigger counts them in a sequence, which no rollback
/// undoes), and resets the count.
fn refuse_writes(h: &reservation_postgres::PostgresHarness, code: &str, failures: i64) {
    let schema = format!("\"{}\"", h.options().schema);
    let statements = format!(
        "DROP TRIGGER IF EXISTS refuse ON {schema}.reservation;
         DROP SEQUENCE IF EXISTS {schema}.attempts;
         CREATE SEQUENCE {schema}.attempts;
         CREATE OR REPLACE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF nextval('{schema}.attempts') <= {failures} THEN
             RAISE EXCEPTION 'refused by the test' USING ERRCODE = '{code}';
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON {schema}.reservation
           FOR EACH ROW EXECUTE FUNCTION {schema}.refuse();"
    );
    h.runtime().block_on(async { admin().await.batch_execute(&statements).await.expect("the trigger is installed") });
}

/// How many writes the trigger of [`refuse_writes`] has seen.
fn attempts(h: &reservation_postgres::PostgresHarness) -> i64 {
    let sql = format!("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM \"{}\".attempts", h.options().schema);
    h.runtime().block_on(async { admin().await.query_one(&sql, &[]).await.expect("the count").get(0) })
}

#[test]
fn serialization_failures_and_deadlocks_are_retried_up_to_the_bound_and_nothing_else_is() {
    let Some(h) = harness_with(PostgresOptions::default()) else { return };
    assert_eq!(h.options().retries, 3);
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let (alice, hold, ttl) = (owner("alice"), HoldId::new("h").expect("hold"), Ttl::from_millis(60_000).expect("ttl"));
    let scope = scope("retries");
    let reserve =
        |key: &str| h.runtime().block_on(store.reserve(&scope, &Key::new(key).expect("key"), &alice, &hold, ttl));
    let found =
        |key: &str| h.runtime().block_on(store.lookup(&scope, &Key::new(key).expect("key"))).expect("looked up");

    // A retryable failure within the bound: the operation is tried again and succeeds.
    for (code, failures) in [("40001", 2), ("40P01", 3)] {
        refuse_writes(&h, code, failures);
        let key = format!("passes-{code}");
        assert_eq!(reserve(&key).expect("retried until it passed"), ReserveOutcome::Taken, "{code}");
        assert_eq!(attempts(&h), failures + 1, "{code}: one write per attempt");
        assert!(found(&key).is_some(), "{code}");
    }

    // Past the bound: a storage error after 1 + 3 attempts. The server answered each write with
    // an ERROR, which aborts the transaction, so it is determinate although COMMIT was sent.
    refuse_writes(&h, "40001", 1_000);
    let error = reserve("exhausted").expect_err("a write the server always refuses");
    assert_eq!(attempts(&h), 4, "the first attempt and three retries");
    assert!(!error.is_indeterminate(), "{}", error_chain(&error));
    let said = error_chain(&error);
    assert!(said.contains("write the row: SQLSTATE 40001: db error: ERROR: refused by the test"), "{said}");
    assert!(found("exhausted").is_none());

    // Any other error is not retried.
    refuse_writes(&h, "P0001", 1_000);
    let error = reserve("refused").expect_err("a write the server refuses");
    assert_eq!(attempts(&h), 1, "an error that no retry can pass was retried");
    assert!(!error.is_indeterminate(), "{}", error_chain(&error));
    let said = error_chain(&error);
    assert!(said.contains("SQLSTATE P0001: db error: ERROR: refused by the test"), "{said}");
    assert!(found("refused").is_none());
}
