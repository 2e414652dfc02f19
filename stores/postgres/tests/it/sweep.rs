//! The sweep, the one statement that restates a rule, proven equal to `spec::lookup`; and the
//! database's clock deciding expiry.

use std::collections::BTreeSet;

use reservation_conformance::{START, unique_namespace};
use reservation_postgres::Time;
use reservation_store::{
    AggregateRef, AggregateType, HoldId, Instant, Key, ManualClock, ReservationScope, ReservationStore, ReserveOutcome,
    Tenant, TenantId, Ttl,
};

use crate::{admin, harness};

fn scope(label: &str) -> ReservationScope {
    ReservationScope::new(
        AggregateType::new("user").expect("a valid type"),
        Tenant::Id(TenantId::new("acme").expect("a valid tenant")),
        unique_namespace(label),
    )
}

fn owner(i: usize) -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), &format!("owner-{i}")).expect("a valid owner")
}

#[test]
fn sweep_deletes_exactly_the_rows_spec_lookup_calls_free() {
    let Some(h) = harness() else { return };
    let clock = ManualClock::new(START);
    let store = h.store_with(Time::Local(clock.clone()));
    let scope = scope("sweep");
    let (case, now) = reservation_testkit::sweep_case(h.runtime(), &store, &clock, &scope);
    let swept = h.runtime().block_on(store.sweep()).expect("the sweep ran");
    let left: BTreeSet<String> = h.runtime().block_on(async {
        let rows = admin()
            .await
            .query(
                &format!(
                    "SELECT convert_from(key, 'UTF8') FROM \"{}\".reservation WHERE namespace = $1",
                    h.options().schema
                ),
                &[&scope.namespace.as_str().as_bytes()],
            )
            .await
            .expect("the rows were read");
        rows.iter().map(|r| r.get(0)).collect()
    });
    reservation_testkit::assert_sweep(&case, now, &left, swept);
}

#[test]
fn the_database_clock_decides_expiry() {
    let Some(h) = harness() else { return };
    let store = h.store_with(Time::<reservation_store::SystemClock>::Database);
    let scope = scope("database-clock");
    let hold = HoldId::new("attempt").expect("a valid hold");
    let (a, b) = (owner(0), owner(1));
    let key = Key::new("long").expect("a valid key");
    let server_now = || {
        h.runtime().block_on(async {
            let row = admin()
                .await
                .query_one("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint", &[])
                .await
                .expect("the clock was read");
            Instant::from_millis(row.get::<_, i64>(0).unsigned_abs())
        })
    };
    let before = server_now();
    let ttl = Ttl::from_millis(60_000).expect("non-zero");
    h.runtime().block_on(store.reserve(&scope, &key, &a, &hold, ttl)).expect("reserved");
    let after = server_now();
    let found = h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up").expect("live");
    let expires = found.as_pending().expect("pending").expires_at();
    assert!(
        before.saturating_add(ttl) <= expires && expires <= after.saturating_add(ttl),
        "expiry {expires:?} is not the server's clock plus the TTL ({before:?}..{after:?})"
    );
    let short = Key::new("short").expect("a valid key");
    let one = Ttl::from_millis(1).expect("non-zero");
    let outcome = h.runtime().block_on(store.reserve(&scope, &short, &a, &hold, one)).expect("reserved");
    assert_eq!(outcome, reservation_store::ReserveOutcome::Taken);
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        h.runtime().block_on(store.lookup(&scope, &short)).expect("looked up"),
        None,
        "D7 on the server's clock"
    );
    let outcome = h.runtime().block_on(store.reserve(&scope, &short, &b, &hold, ttl)).expect("reserved");
    assert_eq!(outcome, reservation_store::ReserveOutcome::Taken, "R2 on the server's clock");
}

#[test]
fn the_store_sweeps_by_itself_after_every_n_new_rows_and_counts_only_new_rows() {
    let mut options = reservation_postgres::PostgresOptions::default();
    options.sweep_every = 3;
    let Some(h) = crate::harness_with(options) else { return };
    let clock = ManualClock::new(START);
    let store = h.store_with(Time::Local(clock.clone()));
    let scope = scope("every");
    let hold = HoldId::new("attempt").expect("hold");
    let rows = || h.runtime().block_on(store.len()).expect("counted");
    let run = |key: &str, ttl: u64| {
        let ttl = Ttl::from_millis(ttl).expect("non-zero");
        h.runtime()
            .block_on(store.reserve(&scope, &Key::new(key).expect("key"), &owner(0), &hold, ttl))
            .expect("reserved")
    };
    assert_eq!(run("short", 1), ReserveOutcome::Taken, "new row 1");
    clock.set(START.saturating_add_millis(10));
    assert_eq!(run("long", 60_000), ReserveOutcome::Taken, "new row 2");
    // Operations on a stored row change it but add none: joins, a confirm.
    for _ in 0..4 {
        assert_eq!(run("long", 60_000), ReserveOutcome::Joined);
    }
    let version = reservation_store::Version::stream(1).expect("a stream version");
    let long = Key::new("long").expect("key");
    h.runtime().block_on(store.confirm(&scope, &long, &owner(0), version)).expect("confirmed");
    assert_eq!(rows(), 2, "the store swept before its third new row");
    assert_eq!(run("third", 60_000), ReserveOutcome::Taken, "new row 3");
    assert_eq!(rows(), 2, "the third new row did not start a sweep of the expired one");
    assert!(h.runtime().block_on(store.lookup(&scope, &long)).expect("looked up").is_some());
}

#[test]
fn with_sweep_every_zero_only_an_explicit_sweep_sweeps() {
    let mut options = reservation_postgres::PostgresOptions::default();
    options.sweep_every = 0;
    let Some(h) = crate::harness_with(options) else { return };
    let clock = ManualClock::new(START);
    let store = h.store_with(Time::Local(clock.clone()));
    let scope = scope("never");
    reservation_testkit::five_rows_each_expired_before_the_next(h.runtime(), &store, &clock, &scope);
    assert_eq!(h.runtime().block_on(store.sweep()).expect("swept"), 5, "a new row started a sweep");
}
