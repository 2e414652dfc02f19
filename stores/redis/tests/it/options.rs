//! The store's surface besides the trait: the options it was made with, its pool, its `Debug`.

use reservation_conformance::{START, unique_namespace};
use reservation_redis::{RedisOptions, RedisStore, Time};
use reservation_store::error_chain;
use reservation_store::spec::Reservation;
use reservation_store::{AggregateRef, Key, ManualClock, ReservationScope, ReservationStore, SystemClock, Version};

use crate::harness;

#[test]
fn options_are_the_ones_the_store_was_made_with() {
    let Some(h) = harness() else { return };
    let options = h.options().clone().with_max_connections(3);
    let store = h
        .runtime()
        .block_on(RedisStore::connect(h.url(), Time::Local(ManualClock::new(START)), options))
        .expect("connected");
    assert_eq!(store.options().prefix, h.options().prefix);
    assert_eq!(store.options().max_connections, 3);
    assert_eq!(store.options().retries, RedisOptions::default().retries);
    assert_eq!(store.connections(), 1, "connecting keeps the connection it made");
    let redis_clock = store.with_time(Time::REDIS);
    assert_eq!(redis_clock.options().prefix, h.options().prefix, "with_time keeps the options");
}

#[test]
fn debug_names_the_prefix_the_clock_and_the_connections() {
    let Some(h) = harness() else { return };
    let local = h.store_with(Time::Local(ManualClock::new(START)));
    let shown = format!("{local:?}");
    let expected = format!("RedisStore {{ prefix: {:?}, clock: \"local\", connections: 1 }}", h.options().prefix);
    assert_eq!(shown, expected);
    let shown = format!("{:?}", h.store_with(Time::<SystemClock>::Redis));
    assert!(shown.contains("clock: \"redis\""), "{shown}");
}

#[test]
fn an_empty_prefix_is_refused() {
    let Some(h) = harness() else { return };
    let refused = h
        .runtime()
        .block_on(RedisStore::connect(h.url(), Time::REDIS, RedisOptions::default().with_prefix("")))
        .expect_err("an empty prefix was accepted");
    assert!(error_chain(&refused).contains("the key prefix is empty"), "{}", error_chain(&refused));
}

#[test]
fn the_benchmarks_baseline_writes_the_row_it_is_given() {
    let Some(h) = harness() else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("baseline").as_str()).expect("scope");
    let key = Key::new("k").expect("key");
    let owner = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let row = Reservation::confirmed(owner, Version::stream(2).expect("a stream version"));
    let committed = h.runtime().block_on(store.baseline_write(&scope, &key, Some(&row))).expect("written");
    assert!(committed, "nothing else wrote the key, yet the write did not commit");
    assert_eq!(h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up"), Some(row));
    assert!(h.runtime().block_on(store.baseline_write(&scope, &key, None)).expect("written"));
    assert_eq!(h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up"), None);
}

#[test]
fn options_show_their_nodes_by_address_never_by_password() {
    let options = RedisOptions::default()
        .with_nodes(["redis://user:s3cret@replica.internal:6380/0", "redis://primary.internal:6379/", "not a url"])
        .with_replica_acks(1, std::time::Duration::from_millis(250));
    let shown = format!("{options:?}");
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(
        shown.contains(r#"nodes: ["replica.internal:6380", "primary.internal:6379", "an invalid URL"]"#),
        "{shown}"
    );
    assert!(shown.contains("replica_acks: 1, replica_timeout: 250ms"), "{shown}");
    assert!(
        shown.starts_with(r#"RedisOptions { prefix: "rsv", max_connections: 16, timeout: 5s, retries: 100"#),
        "{shown}"
    );
    assert!(shown.ends_with("watch: true, touch: true, persist_clock: true }"), "{shown}");
}
