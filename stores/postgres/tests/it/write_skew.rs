//! A write-skew probe, the shape of Jepsen's G2-item finding in PostgreSQL 12.3: two owners
//! reserve one free key at once, from two connections, and never both succeed. The store's
//! advisory lock on the (scope, key) makes the second wait for the first, so one is told it took
//! the key and the other that the key is held; a lock on existing rows alone, the planted bug,
//! lets both in.

use reservation_conformance::{START, unique_namespace};
use reservation_postgres::{PostgresHarness, Time};
use reservation_store::{
    AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, ReserveOutcome, Ttl, error_chain,
};

use crate::{broken_harness, harness};

/// How many keys each probe reserves from both sides at once.
const KEYS: usize = 200;

/// Reserves `KEYS` fresh keys, each by two owners at once on two connections of `h`'s pool: how
/// many both took.
fn both_took(h: &PostgresHarness) -> usize {
    let (a, b) =
        (h.store_with(Time::Local(ManualClock::new(START))), h.store_with(Time::Local(ManualClock::new(START))));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("write-skew").as_str()).expect("scope");
    let owner = |id: &str| AggregateRef::parse("user", Some("acme"), id).expect("owner");
    let (alice, bob) = (owner("alice"), owner("bob"));
    let hold = HoldId::new("decision").expect("hold");
    let ttl = Ttl::from_millis(60_000).expect("ttl");
    let mut both = 0;
    for n in 0..KEYS {
        let key = Key::new(format!("k{n}")).expect("key");
        let (first, second) = h.runtime().block_on(async {
            tokio::join!(a.reserve(&scope, &key, &alice, &hold, ttl), b.reserve(&scope, &key, &bob, &hold, ttl))
        });
        let (first, second) = (
            first.unwrap_or_else(|e| panic!("{}", error_chain(&e))),
            second.unwrap_or_else(|e| panic!("{}", error_chain(&e))),
        );
        both += usize::from(first == ReserveOutcome::Taken && second == ReserveOutcome::Taken);
    }
    assert!(a.connections() >= 2, "both reserves ran on one connection");
    both
}

#[test]
fn two_owners_reserving_one_free_key_from_two_connections_never_both_take_it() {
    let Some(h) = harness() else { return };
    assert_eq!(both_took(&h), 0, "two owners were each told they took one key");
}

#[test]
fn the_write_skew_probe_catches_a_lock_on_existing_rows_alone() {
    let Some(h) = broken_harness() else { return };
    let both = both_took(&h);
    eprintln!("a lock on existing rows alone: {both} of {KEYS} keys taken by both owners");
    assert!(both > 0, "no key was taken by both owners under a lock that misses absent rows");
}
