//! The key's lock, proven by the linearizability check under eight connections, and the planted
//! bug of a lock that misses absent rows, caught by it.

use reservation_conformance::START;
use reservation_conformance::linearizability::{self, ATOMICITY};
use reservation_postgres::Time;
use reservation_store::ManualClock;
use reservation_store::error_chain;

use crate::{broken_harness, harness};

#[test]
fn advisory_lock_is_linearizable_under_eight_connections() {
    let Some(h) = harness() else { return };
    // One history of 3,000 operations on eight threads: the connections are what this test is
    // about; the conformance run's `linearizability_under_threads` records histories for its
    // whole budget.
    let one = reservation_postgres::PostgresHarness::settings().with_concurrency(8, 3_000, 1);
    let stats = linearizability::run(&h, &one).unwrap_or_else(|f| panic!("{f}"));
    assert!(stats.ops >= 3_000, "one history at least: {stats:?}");
    let connections = h.store_with(Time::Local(ManualClock::new(START))).connections();
    assert!((8..=16).contains(&connections), "the check ran on {connections} connections, of at most 16");
}

#[test]
fn row_lock_alone_misses_the_absent_row_and_fails_atomicity() {
    let Some(h) = broken_harness() else { return };
    let failure = linearizability::run(&h, &reservation_postgres::PostgresHarness::settings())
        .expect_err("two first reserves of a free key both won, and the check passed");
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

#[test]
fn a_key_is_locked_by_the_documented_fnv_1a_hash_of_its_parts() {
    // Every build of the store, and any program sharing its tables, must lock a key by the same
    // advisory lock: class `RSRV` (0x52535256) and the 32-bit FNV-1a hash of the aggregate type,
    // tenant, namespace and key, each preceded by its length as 4 bytes big-endian. The value
    // below was computed from FNV-1a's definition over those bytes, independently of the store.
    const CLASS: i32 = 0x5253_5256;
    const USER_ACME_VECTOR_K: i32 = -1_937_886_199;
    let mut options = reservation_postgres::PostgresOptions::default();
    options.statement_timeout = std::time::Duration::from_millis(300);
    let Some(h) = crate::harness_with(options) else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let scope = reservation_store::ReservationScope::parse("user", Some("acme"), "lock-id-vector").expect("scope");
    let owner = reservation_store::AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let (hold, ttl) =
        (reservation_store::HoldId::new("h").expect("hold"), reservation_store::Ttl::from_millis(60_000).expect("ttl"));
    let reserve = |key: &str| {
        let key = reservation_store::Key::new(key).expect("key");
        h.runtime().block_on(reservation_store::ReservationStore::reserve(&store, &scope, &key, &owner, &hold, ttl))
    };
    let holder = h.runtime().block_on(async {
        let admin = crate::admin().await;
        admin.batch_execute("BEGIN").await.expect("begun");
        admin.execute("SELECT pg_advisory_xact_lock($1, $2)", &[&CLASS, &USER_ACME_VECTOR_K]).await.expect("locked");
        admin
    });
    let waited = reserve("k").expect_err("the key's lock was held elsewhere, yet the reserve did not wait");
    assert!(error_chain(&waited).contains("statement timeout"), "{}", error_chain(&waited));
    assert!(reserve("other").is_ok(), "another key waited for the lock of `k`");
    h.runtime().block_on(holder.batch_execute("ROLLBACK")).expect("released");
    assert!(reserve("k").is_ok(), "the key stayed locked after the holder let go");
}
