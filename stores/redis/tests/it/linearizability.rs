//! The optimistic transaction, proven by the linearizability check under eight connections, and
//! the planted bug of a store that does not watch its key, caught by it.

use reservation_conformance::linearizability::{self, ATOMICITY};
use reservation_conformance::{START, unique_namespace};
use reservation_redis::{RedisOptions, Time};
use reservation_store::{
    AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, ReserveOutcome, StoredReservation, Ttl,
};

use crate::{harness, harness_with, raw, row_key};

#[test]
fn watch_multi_exec_is_linearizable_under_eight_connections() {
    let Some(h) = harness() else { return };
    let idle = h.store_with(Time::Local(ManualClock::new(START))).connections();
    assert_eq!(idle, 1, "connecting leaves the one connection it made in the pool");
    // One history of 3,000 operations on eight threads: the connections are what this test is
    // about; the conformance run's `linearizability_under_threads` records histories for its
    // whole budget.
    let one = reservation_redis::RedisHarness::settings().with_concurrency(8, 3_000, 1);
    let stats = linearizability::run(&h, &one).unwrap_or_else(|f| panic!("{f}"));
    assert!(stats.ops >= 3_000, "one history at least: {stats:?}");
    let connections = h.store_with(Time::Local(ManualClock::new(START))).connections();
    // Eight threads overlap as the scheduler lets them: on a loaded machine seven at most were
    // ever in flight together. More than one, and never beyond the pool's bound, is the claim.
    assert!((2..=16).contains(&connections), "the check ran on {connections} connections, of at most 16");
}

#[test]
fn without_watch_two_writers_both_win_and_atomicity_fails() {
    let Some(h) = harness_with(RedisOptions::default().broken_without_watch()) else { return };
    let failure = linearizability::run(&h, &reservation_redis::RedisHarness::settings())
        .expect_err("a store without WATCH passed the check");
    assert_eq!(failure.property, Some(ATOMICITY), "{failure}");
}

/// Two stores on one prefix and one clock, as two processes of one application: alice's pending
/// reservation (taken at `START`) expires at `START + 10`; through the first store she reserves
/// again with a second hold, its clock reading `START + 9` held between that reading and its
/// `EXEC` while the clock moves to `START + 10` and the second store looks the key up. Returns the
/// reserve's outcome, the lookup's answer and a lookup's afterwards.
fn stale_join(options: RedisOptions) -> Option<(ReserveOutcome, Option<StoredReservation>, Option<StoredReservation>)> {
    let h = harness_with(options)?;
    let clock = ManualClock::new(START);
    let (writer, reader) = (h.store_with(Time::Local(clock.clone())), h.store_with(Time::Local(clock.clone())));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("stale").as_str()).expect("scope");
    let key = Key::new("alice").expect("key");
    let owner = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let (h1, h2, ttl) =
        (HoldId::new("h1").expect("hold"), HoldId::new("h2").expect("hold"), Ttl::from_millis(10).expect("ttl"));
    let first = h.runtime().block_on(writer.reserve(&scope, &key, &owner, &h1, ttl)).expect("reserved");
    assert_eq!(first, ReserveOutcome::Taken);
    clock.set(START.saturating_add_millis(9));
    let held = clock.hold_next_reading();
    let (written, seen) = std::thread::scope(|s| {
        let join = s.spawn(|| h.runtime().block_on(writer.reserve(&scope, &key, &owner, &h2, ttl)).expect("reserved"));
        assert!(held.wait_reached(std::time::Duration::from_secs(5)), "the reserve never read its clock");
        clock.set(START.saturating_add_millis(10));
        let seen = h.runtime().block_on(reader.lookup(&scope, &key)).expect("looked up");
        drop(held);
        (join.join().expect("the reserve panicked"), seen)
    });
    let after = h.runtime().block_on(reader.lookup(&scope, &key)).expect("looked up");
    Some((written, seen, after))
}

#[test]
fn without_writing_back_what_changed_nothing_a_stale_clock_decision_lands_late() {
    // The planted bug: an operation that changes nothing does not write its key, so a reserve
    // that read t+9 can commit its join after a lookup of another store (another process) saw
    // the key expire at t+10. (Within one store object the store's clock never goes back, which
    // hides the bug from the suite's D10 check: it runs on one store.)
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
    // The bug: the lookup saw the key free at t+10, and the reserve then joined at t+9, which
    // no order of the two explains.
    let (written, seen, _) =
        stale_join(RedisOptions::default().broken_without_write_back()).expect("the server answered above");
    assert_eq!((written, seen), (ReserveOutcome::Joined, None), "the planted bug went unseen");
    // The store: the lookup's write-back makes the held reserve's EXEC fail, and its retry reads
    // t+10, where the key is free: a fresh take, after the lookup.
    let (written, seen, after) = stale_join(RedisOptions::default()).expect("the server answered above");
    assert_eq!((written, seen), (ReserveOutcome::Taken, None));
    assert_eq!(after.map(|r| r.as_pending().map(|p| p.expires_at())), Some(Some(START.saturating_add_millis(20))));
}
