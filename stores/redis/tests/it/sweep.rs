//! Expiry: on a local clock, the sweep deletes exactly the rows `spec::lookup` calls free; on
//! Redis's clock, Redis removes an expired pending row itself.

use std::collections::BTreeSet;

use reservation_conformance::{START, unique_namespace};
use reservation_redis::Time;
use reservation_store::{
    AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, ReserveOutcome, Ttl,
};

use crate::harness;

fn owner(i: u64) -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), &format!("owner-{i}")).expect("a valid owner")
}

#[test]
fn sweep_deletes_exactly_the_rows_spec_lookup_calls_free() {
    let Some(h) = harness() else { return };
    let clock = ManualClock::new(START);
    let store = h.store_with(Time::Local(clock.clone()));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("sweep").as_str()).expect("scope");
    let (case, now) = reservation_testkit::sweep_case(h.runtime(), &store, &clock, &scope);
    let swept = h.runtime().block_on(store.sweep()).expect("the sweep ran");
    let mut left = BTreeSet::new();
    // A row the sweep deleted reads as free at any instant; one it kept still reads at the start,
    // when nothing had expired yet.
    clock.set(START);
    for (key, _) in &case {
        if h.runtime().block_on(store.lookup(&scope, key)).expect("looked up").is_some() {
            left.insert(key.as_str().to_owned());
        }
    }
    reservation_testkit::assert_sweep(&case, now, &left, swept);
}

#[test]
fn on_redis_clock_redis_removes_an_expired_pending_row() {
    let Some(h) = harness() else { return };
    let store = h.store_with(Time::REDIS);
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("redis-clock").as_str()).expect("scope");
    let (hold, key) = (HoldId::new("attempt").expect("hold"), Key::new("short").expect("key"));
    let one = Ttl::from_millis(1).expect("non-zero");
    let outcome = h.runtime().block_on(store.reserve(&scope, &key, &owner(0), &hold, one)).expect("reserved");
    assert_eq!(outcome, ReserveOutcome::Taken);
    std::thread::sleep(std::time::Duration::from_millis(30));
    assert_eq!(h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up"), None, "D7 on Redis's clock");
    let long = Ttl::from_millis(60_000).expect("non-zero");
    let outcome = h.runtime().block_on(store.reserve(&scope, &key, &owner(1), &hold, long)).expect("reserved");
    assert_eq!(outcome, ReserveOutcome::Taken, "R2 on Redis's clock");
    let found = h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up").expect("live");
    let expires = found.as_pending().expect("pending").expires_at();
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_millis() as u64;
    assert!(expires.as_millis().abs_diff(now + 60_000) < 5_000, "expiry {expires:?} is not Redis's clock plus the TTL");
    assert_eq!(h.runtime().block_on(store.sweep()).expect("swept"), 0, "on Redis's clock nothing is left to sweep");
}
