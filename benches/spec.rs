//! The spec functions on representative states, with the store's types (`AggregateRef` owners,
//! `BTreeSet<HoldId>` holds): what every store pays for the rules on each operation.
//!
//! The functions take the current reservation by value, so each measured call gets a fresh
//! clone made outside the timing (`iter_batched`).

use std::collections::BTreeSet;
use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use reservation_store::spec::Reservation;
use reservation_store::{AggregateRef, HoldId, Instant, ReleaseVersion, StoredReservation, Ttl, Version, spec};

struct Fixture {
    alice: AggregateRef,
    bob: AggregateRef,
    first: HoldId,
    second: HoldId,
    ttl: Ttl,
    now: Instant,
    /// Alice's live pending reservation, held by `first`.
    pending: StoredReservation,
    /// Alice's live pending reservation, held by `first` and `second`.
    pending_two: StoredReservation,
    /// Confirmed to Alice at version 5.
    confirmed: StoredReservation,
}

fn fixture() -> Result<Fixture, Box<dyn std::error::Error>> {
    let alice = AggregateRef::parse("user", Some("acme"), "alice-0001")?;
    let bob = AggregateRef::parse("user", Some("acme"), "bob-0002")?;
    let first = HoldId::new("attempt-0001")?;
    let second = HoldId::new("attempt-0002")?;
    let now = Instant::from_millis(1_000_000);
    let expires = Instant::from_millis(1_005_000);
    let pending = Reservation::pending(alice.clone(), BTreeSet::from([first.clone()]), expires).ok_or("holds")?;
    let pending_two =
        Reservation::pending(alice.clone(), BTreeSet::from([first.clone(), second.clone()]), expires).ok_or("holds")?;
    let confirmed = Reservation::confirmed(alice.clone(), Version::stream(5)?);
    Ok(Fixture { alice, bob, first, second, ttl: Ttl::from_millis(5_000)?, now, pending, pending_two, confirmed })
}

fn bench_spec(c: &mut Criterion) {
    let f = match fixture() {
        Ok(f) => f,
        Err(e) => panic!("bench fixture: {e}"),
    };
    let mut g = c.benchmark_group("spec");
    let small = BatchSize::SmallInput;

    g.bench_function("reserve/R1-free", |b| {
        b.iter(|| spec::reserve::<_, BTreeSet<HoldId>>(None, f.now, black_box(&f.alice), &f.first, f.ttl))
    });
    g.bench_function("reserve/R3-join", |b| {
        b.iter_batched(
            || Some(f.pending.clone()),
            |cur| spec::reserve(cur, f.now, black_box(&f.alice), &f.second, f.ttl),
            small,
        )
    });
    g.bench_function("reserve/R5-conflict", |b| {
        b.iter_batched(
            || Some(f.pending.clone()),
            |cur| spec::reserve(cur, f.now, black_box(&f.bob), &f.second, f.ttl),
            small,
        )
    });
    g.bench_function("confirm/C2-pending", |b| {
        b.iter_batched(
            || Some(f.pending.clone()),
            |cur| spec::confirm(cur, f.now, black_box(&f.alice), Version::from_u64(6)),
            small,
        )
    });
    g.bench_function("confirm/C7-replay", |b| {
        b.iter_batched(
            || Some(f.confirmed.clone()),
            |cur| spec::confirm(cur, f.now, black_box(&f.alice), Version::from_u64(4)),
            small,
        )
    });
    g.bench_function("release/L4-confirmed", |b| {
        b.iter_batched(
            || Some(f.confirmed.clone()),
            |cur| spec::release(cur, f.now, black_box(&f.alice), ReleaseVersion::At(Version::from_u64(5))),
            small,
        )
    });
    g.bench_function("release/L5-kept", |b| {
        b.iter_batched(
            || Some(f.confirmed.clone()),
            |cur| spec::release(cur, f.now, black_box(&f.alice), ReleaseVersion::At(Version::from_u64(4))),
            small,
        )
    });
    g.bench_function("abandon/A2-last-hold", |b| {
        b.iter_batched(
            || Some(f.pending.clone()),
            |cur| spec::abandon(cur, f.now, black_box(&f.alice), &f.first),
            small,
        )
    });
    g.bench_function("abandon/A3-one-of-two", |b| {
        b.iter_batched(
            || Some(f.pending_two.clone()),
            |cur| spec::abandon(cur, f.now, black_box(&f.alice), &f.first),
            small,
        )
    });
    g.bench_function("lookup/live-pending", |b| b.iter(|| spec::lookup(Some(black_box(&f.pending)), f.now)));
    g.bench_function("lookup/expired-pending", |b| {
        b.iter(|| spec::lookup(Some(black_box(&f.pending)), Instant::from_millis(2_000_000)))
    });
    g.finish();
}

criterion_group!(benches, bench_spec);
criterion_main!(benches);
