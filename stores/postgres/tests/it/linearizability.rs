//! The key's lock, proven by the linearizability check under eight connections, and the planted
//! bug of a lock that misses absent rows, caught by it.

use reservation_conformance::linearizability::{self, ATOMICITY};
use reservation_conformance::{Harness, START};
use reservation_postgres::Time;
use reservation_store::ManualClock;

use crate::{broken_harness, harness};

#[test]
fn advisory_lock_is_linearizable_under_eight_connections() {
    let Some(h) = harness() else { return };
    let stats = linearizability::run(&h).unwrap_or_else(|f| panic!("{f}"));
    assert!(stats.ops >= 3_000, "one history at least: {stats:?}");
    let connections = h.store_with(Time::Local(ManualClock::new(START))).connections();
    assert!((8..=16).contains(&connections), "the check ran on {connections} connections, of at most 16");
    assert_eq!(h.settings().threads, 8);
}

#[test]
fn row_lock_alone_misses_the_absent_row_and_fails_atomicity() {
    let Some(h) = broken_harness() else { return };
    let failure =
        linearizability::run(&h).expect_err("two first reserves of a free key both won, and the check passed");
    assert_eq!(failure.property, Some(ATOMICITY), "{failure}");
}

#[test]
fn operations_on_different_keys_do_not_wait_for_each_other() {
    use std::sync::mpsc;
    use std::time::Duration;

    use reservation_store::{AggregateRef, HoldId, Key, ReservationScope, ReservationStore, Ttl};

    let Some(h) = harness() else { return };
    let held_clock = ManualClock::new(START);
    let held_store = h.store_with(Time::Local(held_clock.clone()));
    let free_store = h.store_with(Time::Local(ManualClock::new(START)));
    let scope =
        ReservationScope::parse("user", Some("acme"), reservation_conformance::unique_namespace("keys").as_str())
            .expect("scope");
    let owner = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let hold = HoldId::new("h").expect("hold");
    let ttl = Ttl::from_millis(60_000).expect("ttl");
    let (k1, k2) = (Key::new("first").expect("key"), Key::new("second").expect("key"));
    // The reserve of the first key reads its clock with its key's lock held, and is held there.
    let gate = held_clock.hold_next_reading();
    let rt = h.runtime();
    std::thread::scope(|s| {
        s.spawn(|| rt.block_on(held_store.reserve(&scope, &k1, &owner, &hold, ttl)).expect("reserved"));
        assert!(gate.wait_reached(Duration::from_secs(5)), "the reserve read its clock");
        let (done, finished) = mpsc::channel();
        let (free_store, scope, k2, owner, hold) = (&free_store, &scope, &k2, &owner, &hold);
        s.spawn(move || {
            let outcome = rt.block_on(free_store.reserve(scope, k2, owner, hold, ttl));
            let _ = done.send(outcome.is_ok());
        });
        let other_key = finished.recv_timeout(Duration::from_secs(3));
        drop(gate);
        assert_eq!(other_key, Ok(true), "a reserve of another key waited for the first key's lock");
    });
}
