//! Expiry: on a local clock, the sweep deletes exactly the rows `spec::lookup` calls free; on
//! Redis's clock, Redis removes an expired pending row itself.

use std::collections::BTreeSet;

use reservation_conformance::{START, unique_namespace};
use reservation_redis::Time;
use reservation_store::{
    AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, ReserveOutcome, Ttl,
};

use crate::{harness, harness_with, raw, row_key};

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
    let mut conn = raw(&h);
    let mut exists = redis::cmd("EXISTS");
    exists.arg(row_key(&h, &scope, &key));
    let stored: u64 = h.runtime().block_on(exists.query_async(&mut conn)).expect("EXISTS answered");
    assert_eq!(stored, 0, "Redis kept the expired row");
    assert_eq!(h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up"), None, "D7 on Redis's clock");
    let long = Ttl::from_millis(60_000).expect("non-zero");
    let outcome = h.runtime().block_on(store.reserve(&scope, &key, &owner(1), &hold, long)).expect("reserved");
    assert_eq!(outcome, ReserveOutcome::Taken, "R2 on Redis's clock");
    // The expiry is Redis's TIME, to the millisecond, plus the TTL: read TIME around a reserve
    // (three keys, so that no reading's sub-millisecond digits can pass by chance).
    let mut conn = raw(&h);
    for i in 0..3 {
        let key = Key::new(format!("timed-{i}")).expect("key");
        let before = redis_millis(&h, &mut conn);
        h.runtime().block_on(store.reserve(&scope, &key, &owner(1), &hold, long)).expect("reserved");
        let after = redis_millis(&h, &mut conn);
        let found = h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up").expect("live");
        let at = found.as_pending().expect("pending").expires_at().as_millis() - 60_000;
        assert!(
            (before..=after).contains(&at),
            "reserved at {at} ms by the store, between {before} and {after} by Redis"
        );
    }
    assert_eq!(h.runtime().block_on(store.sweep()).expect("swept"), 0, "on Redis's clock nothing is left to sweep");
}

/// The expiry index's score of `member`, or `None` when it is not in the index.
fn score(
    h: &reservation_redis::RedisHarness,
    conn: &mut redis::aio::MultiplexedConnection,
    member: &[u8],
) -> Option<f64> {
    let index = format!("{}:x", h.options().prefix);
    h.runtime().block_on(redis::cmd("ZSCORE").arg(index).arg(member).query_async(conn)).expect("ZSCORE answered")
}

#[test]
fn sweep_keeps_a_live_row_whose_index_score_rounds_down_to_now() {
    // Scores are doubles: 2^53 + 1 ms rounds to 2^53, so at 2^53 the index offers a row that is
    // still live. The sweep must ask spec::lookup, keep the row and its index entry, and count
    // nothing; one millisecond later the row has expired and goes.
    let Some(h) = harness() else { return };
    let at = reservation_store::Instant::from_millis(1 << 53);
    let clock = ManualClock::new(at);
    let store = h.store_with(Time::Local(clock.clone()));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("rounding").as_str()).expect("scope");
    let (hold, key) = (HoldId::new("attempt").expect("hold"), Key::new("late").expect("key"));
    let one = Ttl::from_millis(1).expect("non-zero");
    let outcome = h.runtime().block_on(store.reserve(&scope, &key, &owner(0), &hold, one)).expect("reserved");
    assert_eq!(outcome, ReserveOutcome::Taken);
    let mut conn = raw(&h);
    let member = row_key(&h, &scope, &key);
    assert_eq!(score(&h, &mut conn, &member), Some((1u64 << 53) as f64), "the score rounds down to now");

    assert_eq!(h.runtime().block_on(store.sweep()).expect("swept"), 0, "a live row was counted as swept");
    assert!(h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up").is_some(), "a live row was swept");
    assert!(score(&h, &mut conn, &member).is_some(), "a live row lost its index entry");

    clock.set(at.saturating_add_millis(1));
    assert_eq!(h.runtime().block_on(store.sweep()).expect("swept"), 1, "the expired row was not swept");
    assert_eq!(score(&h, &mut conn, &member), None, "a swept row kept its index entry");
    clock.set(at);
    assert_eq!(h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up"), None, "the row is still there");
}

#[test]
fn sweep_drops_stale_index_entries_without_counting_them() {
    // Index entries whose key is free or confirmed (left by a writer that died between its
    // writes, or by another application): the sweep removes them, keeps the rows, counts nothing.
    let Some(h) = harness() else { return };
    let clock = ManualClock::new(START);
    let store = h.store_with(Time::Local(clock.clone()));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("stale").as_str()).expect("scope");
    let (free, confirmed) = (Key::new("free").expect("key"), Key::new("confirmed").expect("key"));
    let version = reservation_store::Version::stream(3).expect("a stream version");
    h.runtime().block_on(store.confirm(&scope, &confirmed, &owner(1), version)).expect("confirmed");
    let mut conn = raw(&h);
    let index = format!("{}:x", h.options().prefix);
    for key in [&free, &confirmed] {
        let member = row_key(&h, &scope, key);
        let _: u64 = h
            .runtime()
            .block_on(redis::cmd("ZADD").arg(&index).arg(0).arg(&member).query_async(&mut conn))
            .expect("an index entry added");
    }
    clock.set(START.saturating_add_millis(1));
    assert_eq!(h.runtime().block_on(store.sweep()).expect("swept"), 0, "a stale index entry was counted as a row");
    for key in [&free, &confirmed] {
        assert_eq!(score(&h, &mut conn, &row_key(&h, &scope, key)), None, "{key:?}: the stale entry stayed");
    }
    let found = h.runtime().block_on(store.lookup(&scope, &confirmed)).expect("looked up");
    assert!(found.is_some_and(|r| r.as_confirmed().is_some()), "the confirmed row was swept");
}

/// Redis's clock (`TIME`) in milliseconds.
fn redis_millis(h: &reservation_redis::RedisHarness, conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (secs, micros): (u64, u64) = h.runtime().block_on(redis::cmd("TIME").query_async(conn)).expect("TIME");
    secs * 1000 + micros / 1000
}

#[test]
fn on_redis_clock_a_pending_row_expires_in_redis_at_its_expiry_and_a_confirmed_one_never() {
    let Some(h) = harness() else { return };
    let store = h.store_with(Time::REDIS);
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("pxat").as_str()).expect("scope");
    let hold = HoldId::new("attempt").expect("hold");
    let mut conn = raw(&h);
    let mut expiry_in_redis = |key: &Key| -> i64 {
        let mut at = redis::cmd("PEXPIRETIME");
        at.arg(row_key(&h, &scope, key));
        h.runtime().block_on(at.query_async(&mut conn)).expect("PEXPIRETIME answered")
    };
    let key = Key::new("pending").expect("key");
    let minute = Ttl::from_millis(60_000).expect("non-zero");
    h.runtime().block_on(store.reserve(&scope, &key, &owner(0), &hold, minute)).expect("reserved");
    let found = h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up").expect("live");
    let expires = found.as_pending().expect("pending").expires_at().as_millis();
    assert_eq!(u64::try_from(expiry_in_redis(&key)).ok(), Some(expires), "Redis expires the row at its expiry");
    let version = reservation_store::Version::stream(1).expect("a stream version");
    h.runtime().block_on(store.confirm(&scope, &key, &owner(0), version)).expect("confirmed");
    assert_eq!(expiry_in_redis(&key), -1, "a confirmed row must never expire");

    // An expiry past what Redis takes (i64::MAX ms): the row is written without one, and lives.
    let forever = Key::new("forever").expect("key");
    let longest = Ttl::from_millis(u64::MAX).expect("non-zero");
    let outcome = h.runtime().block_on(store.reserve(&scope, &forever, &owner(1), &hold, longest)).expect("reserved");
    assert_eq!(outcome, ReserveOutcome::Taken);
    assert_eq!(expiry_in_redis(&forever), -1);
    assert!(h.runtime().block_on(store.lookup(&scope, &forever)).expect("looked up").is_some());
}

#[test]
fn the_store_sweeps_by_itself_after_every_n_new_rows_and_counts_only_new_rows() {
    let mut options = reservation_redis::RedisOptions::default();
    options.sweep_every = 3;
    let Some(h) = harness_with(options) else { return };
    let clock = ManualClock::new(START);
    let store = h.store_with(Time::Local(clock.clone()));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("every").as_str()).expect("scope");
    let hold = HoldId::new("attempt").expect("hold");
    let mut conn = raw(&h);
    let mut stored = |key: &Key| -> bool {
        let mut exists = redis::cmd("EXISTS");
        exists.arg(row_key(&h, &scope, key));
        h.runtime().block_on(exists.query_async::<u64>(&mut conn)).expect("EXISTS answered") == 1
    };
    let (short, long, third) =
        (Key::new("short").expect("key"), Key::new("long").expect("key"), Key::new("third").expect("key"));
    let run = |key: &Key, ttl: u64| {
        let ttl = Ttl::from_millis(ttl).expect("non-zero");
        h.runtime().block_on(store.reserve(&scope, key, &owner(0), &hold, ttl)).expect("reserved")
    };
    assert_eq!(run(&short, 1), ReserveOutcome::Taken, "new row 1");
    clock.set(START.saturating_add_millis(10));
    assert_eq!(run(&long, 60_000), ReserveOutcome::Taken, "new row 2");
    // Operations on a stored row write it but add none: joins, lookups, a confirm.
    for _ in 0..4 {
        assert_eq!(run(&long, 60_000), ReserveOutcome::Joined);
        assert!(h.runtime().block_on(store.lookup(&scope, &long)).expect("looked up").is_some());
    }
    let version = reservation_store::Version::stream(1).expect("a stream version");
    h.runtime().block_on(store.confirm(&scope, &long, &owner(0), version)).expect("confirmed");
    assert!(stored(&short), "the store swept before its third new row");
    assert_eq!(run(&third, 60_000), ReserveOutcome::Taken, "new row 3");
    assert!(!stored(&short), "the third new row did not start a sweep");
    assert!(stored(&long) && stored(&third), "the sweep took a live or confirmed row");
}

#[test]
fn with_sweep_every_zero_only_an_explicit_sweep_sweeps() {
    let mut options = reservation_redis::RedisOptions::default();
    options.sweep_every = 0;
    let Some(h) = harness_with(options) else { return };
    let clock = ManualClock::new(START);
    let store = h.store_with(Time::Local(clock.clone()));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("never").as_str()).expect("scope");
    reservation_testkit::five_rows_each_expired_before_the_next(h.runtime(), &store, &clock, &scope);
    assert_eq!(h.runtime().block_on(store.sweep()).expect("swept"), 5, "a new row started a sweep");
}
