//! The optimistic transaction, proven by the linearizability check under eight connections, and
//! the planted bug of a store that does not watch its key, caught by it.

use reservation_conformance::linearizability::{self, ATOMICITY};
use reservation_conformance::{Harness, START, unique_namespace};
use reservation_redis::{RedisOptions, Time};
use reservation_store::{
    AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, ReserveOutcome, Ttl,
};

use crate::{harness, harness_with, raw, row_key};

#[test]
fn watch_multi_exec_is_linearizable_under_eight_connections() {
    let Some(h) = harness() else { return };
    let idle = h.store_with(Time::Local(ManualClock::new(START))).connections();
    assert_eq!(idle, 1, "connecting leaves the one connection it made in the pool");
    let stats = linearizability::run(&h).unwrap_or_else(|f| panic!("{f}"));
    assert!(stats.ops >= 3_000, "one history at least: {stats:?}");
    let connections = h.store_with(Time::Local(ManualClock::new(START))).connections();
    assert!((8..=16).contains(&connections), "the check ran on {connections} connections, of at most 16");
    assert_eq!(h.settings().threads, 8);
}

#[test]
fn without_watch_two_writers_both_win_and_atomicity_fails() {
    let Some(h) = harness_with(RedisOptions::default().broken_without_watch()) else { return };
    let failure = linearizability::run(&h).expect_err("a store without WATCH passed the check");
    assert_eq!(failure.property, Some(ATOMICITY), "{failure}");
}

#[test]
fn without_writing_back_what_changed_nothing_a_stale_clock_decision_lands_late() {
    // The planted bug: an operation that changes nothing does not write its key, so a reserve
    // that read t+9 can commit its join after a lookup saw the key expire at t+10. The suite's
    // D10 check holds the reserve between its clock reading and its EXEC to show it; the store
    // itself passes that check (the conformance tests run it).
    let Some(h) = harness_with(RedisOptions::default().broken_without_write_back()) else { return };
    // The option turns off the write-back only: a change is written, a lookup of a free key
    // leaves no tombstone.
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("touch").as_str()).expect("scope");
    let (taken, free) = (Key::new("taken").expect("key"), Key::new("free").expect("key"));
    let owner = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let (hold, ttl) = (HoldId::new("h").expect("hold"), Ttl::from_millis(60_000).expect("ttl"));
    let outcome = h.runtime().block_on(store.reserve(&scope, &taken, &owner, &hold, ttl)).expect("reserved");
    assert_eq!(outcome, ReserveOutcome::Taken);
    assert!(
        h.runtime().block_on(store.lookup(&scope, &taken)).expect("looked up").is_some(),
        "a change was not written"
    );
    assert_eq!(h.runtime().block_on(store.lookup(&scope, &free)).expect("looked up"), None);
    let mut conn = raw(&h);
    let exists: u64 = h
        .runtime()
        .block_on(redis::cmd("EXISTS").arg(row_key(&h, &scope, &free)).query_async(&mut conn))
        .expect("EXISTS");
    assert_eq!(exists, 0, "a lookup of a free key wrote a tombstone without write-back");
    let failure = reservation_conformance::checks::d10(&h).expect_err("a store whose reads do not write passed D10");
    assert_eq!(failure.rule, Some(reservation_store::rules::Rule::D10), "{failure}");
    assert!(failure.to_string().contains("Joined"), "{failure}");
}
