//! The store's surface besides the trait: the options it was made with, its pool, its `Debug`,
//! its row count, closing it.

use reservation_conformance::{START, unique_namespace};
use reservation_postgres::{PostgresOptions, PostgresStore, Time};
use reservation_store::error_chain;
use reservation_store::spec::Reservation;
use reservation_store::{
    AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, SystemClock, Ttl, Version,
};

use crate::harness;

#[test]
fn options_are_the_ones_the_store_was_made_with() {
    let Some(h) = harness() else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    assert_eq!(store.options().schema, h.options().schema);
    assert_eq!(store.options().application_name, h.options().schema, "the harness names its connections by schema");
    assert_eq!(store.options().max_connections, PostgresOptions::default().max_connections);
    assert_eq!(store.with_time(Time::DATABASE).options().schema, h.options().schema, "with_time keeps the options");
}

#[test]
fn debug_names_the_schema_the_clock_and_the_pool() {
    let Some(h) = harness() else { return };
    let local = h.store_with(Time::Local(ManualClock::new(START)));
    let expected = format!(
        "PostgresStore {{ schema: {:?}, clock: \"local\", connections: {}, max_connections: 16 }}",
        h.options().schema,
        local.connections()
    );
    assert_eq!(format!("{local:?}"), expected);
    let shown = format!("{:?}", h.store_with(Time::<SystemClock>::Database));
    assert!(shown.contains("clock: \"database\""), "{shown}");
}

#[test]
fn len_counts_every_row_live_or_expired() {
    let Some(h) = harness() else { return };
    let clock = ManualClock::new(START);
    let store = h.store_with(Time::Local(clock.clone()));
    assert_eq!(h.runtime().block_on(store.len()).expect("counted"), 0);
    assert!(h.runtime().block_on(store.is_empty()).expect("counted"));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("len").as_str()).expect("scope");
    let owner = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let (hold, ttl) = (HoldId::new("h").expect("hold"), Ttl::from_millis(5).expect("ttl"));
    for key in ["a", "b"] {
        h.runtime()
            .block_on(store.reserve(&scope, &Key::new(key).expect("key"), &owner, &hold, ttl))
            .expect("reserved");
    }
    clock.set(START.saturating_add_millis(10));
    assert_eq!(h.runtime().block_on(store.len()).expect("counted"), 2, "expired rows are rows until swept");
    assert!(!h.runtime().block_on(store.is_empty()).expect("counted"));
}

#[test]
fn a_closed_store_answers_storage_errors() {
    let Some(h) = harness() else { return };
    let store = h
        .runtime()
        .block_on(PostgresStore::connect(h.url(), Time::Local(ManualClock::new(START)), h.options().clone()))
        .expect("connected");
    store.close();
    let error = h.runtime().block_on(store.len()).expect_err("a closed pool gave a connection");
    assert!(error_chain(&error).contains("no connection"), "{}", error_chain(&error));
    assert!(!error.is_indeterminate(), "{}", error_chain(&error));
}

#[test]
fn the_benchmarks_baseline_writes_the_row_it_is_given() {
    let Some(h) = harness() else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("baseline").as_str()).expect("scope");
    let key = Key::new("k").expect("key");
    let owner = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let row = Reservation::confirmed(owner, Version::stream(2).expect("a stream version"));
    h.runtime().block_on(store.baseline_write(&scope, &key, Some(&row))).expect("written");
    assert_eq!(h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up"), Some(row));
    h.runtime().block_on(store.baseline_write(&scope, &key, None)).expect("written");
    assert_eq!(h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up"), None);
}
