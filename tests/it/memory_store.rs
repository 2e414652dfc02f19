//! What only `MemoryStore` promises: the documented bound on rows under workloads that reserve
//! forever, its amortised sweeps, and its clocks. The rules themselves are checked against it by
//! the conformance suite (`conformance/tests/it/memory.rs`), and on the spec functions by
//! `spec_rules`.

use std::collections::BTreeSet;
use std::sync::Arc;

use reservation_store::spec::{Pending, Reservation};
use reservation_store::*;

/// The shards of a `MemoryStore`, as its documentation states them.
const SHARDS: usize = 1024;
/// The rows a shard holds before its first sweep, as `MemoryStore`'s documentation states them
/// (a shard is swept when an insertion takes it past `max(8, 2 × L)` rows).
const SWEEP_FLOOR: usize = 8;

/// The store's clock when a test starts, in milliseconds.
const START: u64 = 1_000;
/// The default time to live, in milliseconds.
const TTL: u64 = 100;

fn owner(tenant: &str, id: &str) -> AggregateRef {
    AggregateRef::parse("user", Some(tenant), id).unwrap()
}

fn alice() -> AggregateRef {
    owner("acme", "alice")
}

fn bob() -> AggregateRef {
    owner("acme", "bob")
}

fn hold(n: u8) -> HoldId {
    HoldId::new(format!("attempt-{n}")).unwrap()
}

fn v(n: u64) -> Version {
    Version::stream(n).unwrap()
}

fn ttl(ms: u64) -> Ttl {
    Ttl::from_millis(ms).unwrap()
}

fn key(name: &str) -> Key {
    Key::new(name).unwrap()
}

fn pending(owner: &AggregateRef, holds: &[u8], expires_at: u64) -> Option<StoredReservation> {
    let holds: BTreeSet<HoldId> = holds.iter().map(|h| hold(*h)).collect();
    Some(Reservation::pending(owner.clone(), holds, Instant::from_millis(expires_at)).unwrap())
}

fn confirmed(owner: &AggregateRef, version: Version) -> Option<StoredReservation> {
    Some(Reservation::confirmed(owner.clone(), version))
}

/// A store on a manual clock reading [`START`], and one scope to work on.
struct Fx {
    clock: ManualClock,
    store: MemoryStore<ManualClock>,
    scope: ReservationScope,
}

impl Fx {
    fn new() -> Self {
        let clock = ManualClock::new(Instant::from_millis(START));
        Fx {
            store: MemoryStore::with_clock(clock.clone()),
            clock,
            scope: ReservationScope::parse("user", Some("acme"), "user-name").unwrap(),
        }
    }

    fn set(&self, millis: u64) {
        self.clock.set(Instant::from_millis(millis));
    }
}

// ---------------------------------------------------------------------------------------------
// sweeping: the bound on rows

/// The bound that [`MemoryStore`] documents on its rows, given the most live reservations it
/// ever held at once.
fn row_bound(peak_live: usize) -> usize {
    SHARDS * SWEEP_FLOOR + 2 * peak_live
}

const ITERATIONS: u64 = 200_000;

#[test]
fn rows_stay_bounded_when_reserved_keys_expire_forever() {
    // One fresh key per millisecond with a ttl of 10 ms: never more than 10 live at once.
    let fx = Fx::new();
    let peak_live = 10;
    let bound = row_bound(peak_live);
    // Without sweeping every key would stay: the bound must be far below the keys reserved.
    assert!(ITERATIONS as usize > 20 * bound);
    for i in 0..ITERATIONS {
        fx.set(START + i);
        let k = key(&format!("user-{i}"));
        let outcome = block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl(peak_live as u64)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
        if i % 1_000 == 999 {
            let len = fx.store.len();
            assert!(len <= bound, "{len} rows after {} reservations, over the bound {bound}", i + 1);
        }
    }
    // A full sweep leaves exactly the live ones.
    assert_eq!(fx.store.sweep(), peak_live);
    assert_eq!(fx.store.len(), peak_live);
}

#[test]
fn rows_stay_bounded_when_attempts_reserve_and_abandon_forever() {
    // Each key gets two attempts; one abandons at once, the other either abandons too (the key
    // is freed) or never comes back (the key expires 10 ms later).
    let fx = Fx::new();
    let peak_live = 10;
    let bound = row_bound(peak_live);
    let t = ttl(peak_live as u64);
    for i in 0..ITERATIONS {
        fx.set(START + i);
        let k = key(&format!("user-{i}"));
        let s = &fx.scope;
        assert_eq!(block_on(fx.store.reserve(s, &k, &alice(), &hold(1), t)).unwrap(), ReserveOutcome::Taken);
        assert_eq!(block_on(fx.store.reserve(s, &k, &alice(), &hold(2), t)).unwrap(), ReserveOutcome::Joined);
        assert_eq!(block_on(fx.store.abandon(s, &k, &alice(), &hold(1))).unwrap(), AbandonOutcome::StillReserved);
        if i % 2 == 0 {
            assert_eq!(block_on(fx.store.abandon(s, &k, &alice(), &hold(2))).unwrap(), AbandonOutcome::Abandoned);
        }
        if i % 1_000 == 999 {
            let len = fx.store.len();
            assert!(len <= bound, "{len} rows after {} attempts, over the bound {bound}", i + 1);
        }
    }
    assert_eq!(fx.store.sweep(), peak_live / 2);
}

#[test]
fn rows_return_to_the_floor_after_a_burst_of_live_reservations() {
    let fx = Fx::new();
    let burst = 5_000;
    for i in 0..burst {
        let k = key(&format!("burst-{i}"));
        let outcome = block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl(TTL)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
    }
    assert_eq!(fx.store.len(), burst);
    // The burst expires; a trickle of short-lived keys follows.
    for i in 0..ITERATIONS / 2 {
        fx.set(START + TTL + i);
        let k = key(&format!("user-{i}"));
        let outcome = block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl(10)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
        if i % 1_000 == 999 {
            assert!(fx.store.len() <= row_bound(burst));
        }
    }
    let len = fx.store.len();
    assert!(len <= row_bound(10), "{len} rows long after the burst expired, over {}", row_bound(10));
}

#[test]
fn sweeps_are_amortised_expired_rows_wait_for_the_threshold() {
    // A shard is swept only when an insertion takes it past max(SWEEP_FLOOR, 2 × the rows its
    // last sweep kept): with many live rows, expired ones pile up to about as many again before
    // a sweep drops them, so sweeping costs O(1) amortised per insertion, not O(live rows).
    let fx = Fx::new();
    let live = SHARDS * 100;
    for i in 0..live {
        let k = key(&format!("long-{i}"));
        let outcome = block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl(u64::MAX)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
    }
    // Short-lived keys, each expired by the time the next one comes: at most one is live.
    let mut most_expired_kept = 0;
    for i in 0..(SHARDS as u64 * 300) {
        fx.set(START + i);
        let k = key(&format!("short-{i}"));
        let outcome = block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl(1)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
        if i % 64 == 0 {
            let len = fx.store.len();
            assert!(len <= row_bound(live + 1), "{len} rows");
            most_expired_kept = most_expired_kept.max(len - live - 1);
        }
    }
    let floor = SHARDS * SWEEP_FLOOR / 2;
    assert!(most_expired_kept >= floor, "at most {most_expired_kept} expired rows waited: sweeping too eagerly");
}

#[test]
fn a_shard_below_its_threshold_is_not_swept() {
    // 20 rows in SHARDS shards: no shard reaches SWEEP_FLOOR, so nothing is swept; the expired rows
    // stay (invisible to lookups, rule D7) until a sweep or an operation on their key.
    let fx = Fx::new();
    for i in 0..20 {
        let outcome = block_on(fx.store.reserve(&fx.scope, &key(&format!("k{i}")), &alice(), &hold(1), ttl(1)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
    }
    fx.set(START + 1);
    assert_eq!(
        block_on(fx.store.reserve(&fx.scope, &key("new"), &alice(), &hold(1), ttl(1))).unwrap(),
        ReserveOutcome::Taken
    );
    assert_eq!(fx.store.len(), 21);
    assert_eq!(block_on(fx.store.lookup(&fx.scope, &key("k0"))).unwrap(), None);
    assert_eq!(fx.store.sweep(), 1);
}

/// The shards are allocated lazily, in groups: an empty store is its clock, its hasher and one
/// pointer-sized slot per group, about 2 KiB (`SHARDS / 8` groups).
#[test]
fn an_empty_memory_store_takes_about_two_kib() {
    let size = size_of::<MemoryStore<ManualClock>>();
    assert!((2 * 1024..3 * 1024).contains(&size), "{size} bytes");
}

/// With keys spread over all [`SHARDS`] shards, half as many keys as shards put nowhere near
/// [`SWEEP_FLOOR`] rows in any shard: every expired row is kept until a sweep. Fewer shards (a
/// wrong shard index) would reach the floor and sweep them early.
#[test]
fn expired_rows_below_every_shard_s_floor_are_kept_until_a_sweep() {
    let fx = Fx::new();
    let n = SHARDS / 2;
    for i in 0..n {
        fx.set(START + 2 * i as u64);
        let outcome = block_on(fx.store.reserve(&fx.scope, &key(&format!("k{i}")), &alice(), &hold(1), ttl(1)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
    }
    fx.set(START + 2 * n as u64);
    assert_eq!(fx.store.len(), n, "expired rows were swept before their shard reached its floor");
    assert_eq!(fx.store.sweep(), 0);
    assert!(fx.store.is_empty());
}

#[test]
fn sweep_drops_only_expired_pending_reservations() {
    let fx = Fx::new();
    let t = ttl(TTL);
    for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
        let k = key(name);
        let ttl_i = ttl(TTL * (i as u64 + 1));
        assert_eq!(
            block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl_i)).unwrap(),
            ReserveOutcome::Taken
        );
    }
    assert_eq!(block_on(fx.store.confirm(&fx.scope, &key("a"), &alice(), v(1))).unwrap(), ConfirmOutcome::Confirmed);
    assert_eq!(block_on(fx.store.reserve(&fx.scope, &key("e"), &bob(), &hold(1), t)).unwrap(), ReserveOutcome::Taken);
    assert_eq!(fx.store.sweep(), 5);
    // At START + 2 TTL: "a" is confirmed, "b" and "e" expired, "c" and "d" live.
    fx.set(START + 2 * TTL);
    assert_eq!(fx.store.len(), 5);
    assert_eq!(fx.store.sweep(), 3);
    assert_eq!(fx.store.len(), 3);
    assert_eq!(block_on(fx.store.lookup(&fx.scope, &key("a"))).unwrap(), confirmed(&alice(), v(1)));
    assert_eq!(block_on(fx.store.lookup(&fx.scope, &key("c"))).unwrap(), pending(&alice(), &[1], START + 3 * TTL));
    fx.set(u64::MAX);
    assert_eq!(fx.store.sweep(), 1);
    assert!(!fx.store.is_empty());
}

// ---------------------------------------------------------------------------------------------
// clocks

#[test]
fn manual_clock_handles_share_one_time() {
    let clock = ManualClock::new(Instant::from_millis(5));
    let handle = clock.clone();
    handle.advance(10);
    assert_eq!(clock.now(), Instant::from_millis(15));
    handle.set(Instant::from_millis(3));
    assert_eq!(clock.now(), Instant::from_millis(3));
    handle.advance(u64::MAX);
    assert_eq!(clock.now(), Instant::MAX);
    assert_eq!(ManualClock::default().now(), Instant::ZERO);
    // A store reads its clock through a reference or an Arc as well.
    fn read<C: Clock>(clock: C) -> Instant {
        clock.now()
    }
    assert_eq!(read(&clock), Instant::MAX);
    assert_eq!(read(Arc::new(clock.clone())), Instant::MAX);
    let store = MemoryStore::with_clock(Arc::new(clock.clone()));
    assert_eq!(store.clock().now(), Instant::MAX);
}

#[test]
fn system_clock_reads_milliseconds_since_the_unix_epoch() {
    // 2020-01-01 and 2200-01-01, in milliseconds since the Unix epoch.
    let now = SystemClock.now().as_millis();
    assert!((1_577_836_800_000..7_258_118_400_000).contains(&now), "{now}");
    let store = MemoryStore::new();
    let scope = ReservationScope::parse("user", Some("acme"), "user-name").unwrap();
    let outcome = block_on(store.reserve(&scope, &key("k"), &alice(), &hold(1), ttl(60_000))).unwrap();
    assert_eq!(outcome, ReserveOutcome::Taken);
    let expires_at =
        block_on(store.lookup(&scope, &key("k"))).unwrap().and_then(|r| r.as_pending().map(Pending::expires_at));
    let expires_at = expires_at.unwrap().as_millis();
    assert!((now + 60_000..now + 60_000 + 3_600_000).contains(&expires_at), "{expires_at} vs {now}");
    assert!(MemoryStore::default().is_empty());
}
