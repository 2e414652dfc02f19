//! `MemoryStore` against a baseline map that does the same map operations without any rule.
//!
//! The baseline (`common::Baseline`) is a sharded `Mutex<HashTable>` of rows doing the same
//! table operations per call without any rule. The figure that matters is the ratio of the two
//! in each group; `benches/ratios.rs` measures the ratios with the runs interleaved.
//!
//! Groups:
//! - `cycle`: reserve → confirm → release of a key, on one thread; on two threads with disjoint
//!   keys; on two threads sharing one key. Throughput is in cycles per second; the two-thread
//!   benches count both threads' cycles.
//! - `lookup`: the lookup of a confirmed key among 1024.

mod common;

use std::hint::black_box;

use common::{Baseline, Fixture, fixture, manual_store, run_threads};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use reservation_store::{Key, MemoryStore, ReservationStore, SystemClock, block_on};

fn bench_cycle(c: &mut Criterion) {
    let f = fixture();
    let mut g = c.benchmark_group("cycle");

    g.throughput(Throughput::Elements(1));
    let store = manual_store();
    g.bench_function("memory/1-thread", |b| b.iter_custom(|n| run_threads(&store, &f, 1, n)));
    let baseline = Baseline::new();
    g.bench_function("baseline/1-thread", |b| b.iter_custom(|n| run_threads(&baseline, &f, 1, n)));
    let system = MemoryStore::with_clock(SystemClock);
    g.bench_function("memory-system-clock/1-thread", |b| b.iter_custom(|n| run_threads(&system, &f, 1, n)));

    // Both threads' cycles count: 2 per iteration.
    g.throughput(Throughput::Elements(2));
    let store = manual_store();
    g.bench_function("memory/2-threads-disjoint-keys", |b| b.iter_custom(|n| run_threads(&store, &f, 2, n)));
    let baseline = Baseline::new();
    g.bench_function("baseline/2-threads-disjoint-keys", |b| b.iter_custom(|n| run_threads(&baseline, &f, 2, n)));
    // One contended key: both owners cycle `keys[0][0]`, so each operation may meet the other's
    // reservation (Conflict, NotHeld) and both threads queue on one shard's lock.
    let one_key = Fixture { keys: [vec![f.keys[0][0].clone()], vec![f.keys[0][0].clone()]], ..fixture() };
    let store = manual_store();
    g.bench_function("memory/2-threads-one-key", |b| b.iter_custom(|n| run_threads(&store, &one_key, 2, n)));
    let baseline = Baseline::new();
    g.bench_function("baseline/2-threads-one-key", |b| b.iter_custom(|n| run_threads(&baseline, &one_key, 2, n)));
    g.finish();
}

fn bench_lookup(c: &mut Criterion) {
    let f = fixture();
    let mut g = c.benchmark_group("lookup");
    g.throughput(Throughput::Elements(1));
    let keys: Vec<Key> = (0..1024).filter_map(|i| Key::new(format!("user-name-{i:04}")).ok()).collect();

    let store = manual_store();
    let baseline = Baseline::new();
    for key in &keys {
        let _ = block_on(store.confirm(&f.scope, key, &f.owners[0], f.version));
        baseline.reserve(&f.scope, key, &f.owners[0], &f.holds[0], 0);
        baseline.confirm(&f.scope, key, f.version.as_u64());
    }
    let mut i = 0;
    g.bench_function("memory/confirmed-of-1024", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            black_box(block_on(store.lookup(&f.scope, &keys[i])))
        })
    });
    g.bench_function("baseline/confirmed-of-1024", |b| {
        b.iter(|| {
            i = (i + 1) % keys.len();
            black_box(baseline.lookup(&f.scope, &keys[i]))
        })
    });
    g.finish();
}

criterion_group!(benches, bench_cycle, bench_lookup);
criterion_main!(benches);
