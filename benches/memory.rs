//! `MemoryStore` against a baseline map that does the same map operations without any rule.
//!
//! The baseline is the least a store of reservations can do: a table of rows keyed by
//! (scope, key), holding a copy of the owner, the hold and one number, behind sharded mutexes,
//! with one hash, one lock and one table operation per call: insert on reserve, update on
//! confirm, remove on release, find and copy on lookup. `MemoryStore` does the same table
//! operations and adds the rules (the spec functions), the clock read and the hold set. The
//! figure that matters is the ratio of the two in each group.
//!
//! Groups:
//! - `cycle`: reserve → confirm → release of a key, on one thread; on two threads with disjoint
//!   keys; on two threads sharing one key. Throughput is in cycles per second; the two-thread
//!   benches count both threads' cycles.
//! - `lookup`: the lookup of a confirmed key among 1024.

use std::hash::BuildHasher;
use std::hint::black_box;
use std::sync::{Barrier, Mutex, PoisonError};
use std::time::{Duration, Instant as WallInstant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use hashbrown::HashTable;
use reservation_store::{
    AggregateRef, Clock, HoldId, Instant, Key, ManualClock, MemoryStore, ReleaseVersion, ReservationScope,
    ReservationStore, SHARDS, SystemClock, Ttl, Version, block_on,
};

/// Keys each thread cycles through, so that a thread's keys spread over the shards.
const KEYS_PER_THREAD: usize = 256;

struct Fixture {
    scope: ReservationScope,
    owners: [AggregateRef; 2],
    holds: [HoldId; 2],
    /// `KEYS_PER_THREAD` keys for each of two threads, disjoint.
    keys: [Vec<Key>; 2],
    ttl: Ttl,
    version: Version,
}

fn fixture() -> Fixture {
    let built = (|| -> Result<Fixture, reservation_store::InvalidArgument> {
        let key = |t: usize, i: usize| Key::new(format!("user-name-{t}-{i:04}"));
        Ok(Fixture {
            scope: ReservationScope::parse("user", Some("acme"), "user-name")?,
            owners: [
                AggregateRef::parse("user", Some("acme"), "7f1c2a64-alice")?,
                AggregateRef::parse("user", Some("acme"), "0b9e44d1-bob")?,
            ],
            holds: [HoldId::new("attempt-7f1c2a64-0001")?, HoldId::new("attempt-0b9e44d1-0001")?],
            keys: [
                (0..KEYS_PER_THREAD).map(|i| key(0, i)).collect::<Result<_, _>>()?,
                (0..KEYS_PER_THREAD).map(|i| key(1, i)).collect::<Result<_, _>>()?,
            ],
            ttl: Ttl::from_millis(5_000)?,
            version: Version::stream(3)?,
        })
    })();
    match built {
        Ok(f) => f,
        Err(e) => panic!("bench fixture: {e}"),
    }
}

/// One reserve → confirm → release cycle, as a store or the baseline runs it.
trait Cycle: Sync {
    fn cycle(&self, f: &Fixture, thread: usize, key: &Key);
}

impl<C: Clock> Cycle for MemoryStore<C> {
    fn cycle(&self, f: &Fixture, thread: usize, key: &Key) {
        let (owner, hold) = (&f.owners[thread], &f.holds[thread]);
        let _ = black_box(block_on(self.reserve(&f.scope, key, owner, hold, f.ttl)));
        let _ = black_box(block_on(self.confirm(&f.scope, key, owner, f.version)));
        let _ = black_box(block_on(self.release(&f.scope, key, owner, ReleaseVersion::At(f.version))));
    }
}

/// A baseline row: what any store keeps for a reservation.
struct Row {
    scope: ReservationScope,
    key: Key,
    owner: AggregateRef,
    hold: Option<HoldId>,
    /// The expiry while pending, the version once confirmed.
    number: u64,
}

/// One baseline shard on its own cache lines, as the store's are: without it, two threads on
/// neighbouring shards contend for one line and the baseline stops scaling.
#[repr(align(128))]
struct Padded(Mutex<HashTable<Row>>);

/// The baseline: sharded `Mutex<HashTable>` of rows, with the store's hasher and shard count.
struct Baseline {
    hasher: foldhash::fast::RandomState,
    shards: Box<[Padded]>,
}

impl Baseline {
    fn new() -> Self {
        Self {
            hasher: foldhash::fast::RandomState::default(),
            shards: (0..SHARDS).map(|_| Padded(Mutex::new(HashTable::new()))).collect(),
        }
    }

    /// Runs `op` on the shard of (scope, key) under its lock, with the key's hash.
    fn with<R>(&self, scope: &ReservationScope, key: &Key, op: impl FnOnce(&mut HashTable<Row>, u64) -> R) -> R {
        let hash = self.hasher.hash_one((scope, key));
        let shard = (hash >> (64 - SHARDS.trailing_zeros())) as usize % self.shards.len();
        let mut table = self.shards[shard].0.lock().unwrap_or_else(PoisonError::into_inner);
        op(&mut table, hash)
    }

    fn reserve(&self, scope: &ReservationScope, key: &Key, owner: &AggregateRef, hold: &HoldId, expiry: u64) -> bool {
        let hasher = &self.hasher;
        self.with(scope, key, |table, hash| {
            let eq = |r: &Row| r.scope == *scope && r.key == *key;
            if table.find(hash, eq).is_some() {
                return false;
            }
            let row = Row {
                scope: scope.clone(),
                key: key.clone(),
                owner: owner.clone(),
                hold: Some(hold.clone()),
                number: expiry,
            };
            table.insert_unique(hash, row, |r| hasher.hash_one((&r.scope, &r.key)));
            true
        })
    }

    fn confirm(&self, scope: &ReservationScope, key: &Key, version: u64) -> bool {
        self.with(scope, key, |table, hash| match table.find_mut(hash, |r| r.scope == *scope && r.key == *key) {
            Some(row) => {
                row.hold = None;
                row.number = version;
                true
            }
            None => false,
        })
    }

    fn release(&self, scope: &ReservationScope, key: &Key) -> bool {
        self.with(scope, key, |table, hash| match table.find_entry(hash, |r| r.scope == *scope && r.key == *key) {
            Ok(entry) => {
                drop(entry.remove());
                true
            }
            Err(_) => false,
        })
    }

    fn lookup(&self, scope: &ReservationScope, key: &Key) -> Option<(AggregateRef, u64)> {
        self.with(scope, key, |table, hash| {
            table.find(hash, |r| r.scope == *scope && r.key == *key).map(|r| (r.owner.clone(), r.number))
        })
    }
}

impl Cycle for Baseline {
    fn cycle(&self, f: &Fixture, thread: usize, key: &Key) {
        let (owner, hold) = (&f.owners[thread], &f.holds[thread]);
        black_box(self.reserve(&f.scope, key, owner, hold, 1_005_000));
        black_box(self.confirm(&f.scope, key, f.version.as_u64()));
        black_box(self.release(&f.scope, key));
    }
}

fn manual_store() -> MemoryStore<ManualClock> {
    MemoryStore::with_clock(ManualClock::new(Instant::from_millis(1_000_000)))
}

/// `iters` cycles on each of `threads` threads, thread `t` on the keys `keys(t)`; the time from
/// the moment all threads are ready to the moment the last one is done (thread start excluded).
fn run_threads(
    store: &impl Cycle,
    f: &Fixture,
    threads: usize,
    keys: impl Fn(usize) -> usize + Sync,
    iters: u64,
) -> Duration {
    let barrier = Barrier::new(threads);
    let spans: Vec<(WallInstant, WallInstant)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, keys) = (&barrier, &keys);
                s.spawn(move || {
                    let keys = &f.keys[keys(t)];
                    barrier.wait();
                    let start = WallInstant::now();
                    for i in 0..iters {
                        store.cycle(f, t, &keys[i as usize % keys.len()]);
                    }
                    (start, WallInstant::now())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    });
    let start = spans.iter().map(|s| s.0).min();
    let end = spans.iter().map(|s| s.1).max();
    match (start, end) {
        (Some(start), Some(end)) => end.duration_since(start),
        _ => Duration::ZERO,
    }
}

fn bench_cycle(c: &mut Criterion) {
    let f = fixture();
    let mut g = c.benchmark_group("cycle");

    g.throughput(Throughput::Elements(1));
    let store = manual_store();
    g.bench_function("memory/1-thread", |b| b.iter_custom(|n| run_threads(&store, &f, 1, |t| t, n)));
    let baseline = Baseline::new();
    g.bench_function("baseline/1-thread", |b| b.iter_custom(|n| run_threads(&baseline, &f, 1, |t| t, n)));
    let system = MemoryStore::with_clock(SystemClock);
    g.bench_function("memory-system-clock/1-thread", |b| b.iter_custom(|n| run_threads(&system, &f, 1, |t| t, n)));

    // Both threads' cycles count: 2 per iteration.
    g.throughput(Throughput::Elements(2));
    let store = manual_store();
    g.bench_function("memory/2-threads-disjoint-keys", |b| b.iter_custom(|n| run_threads(&store, &f, 2, |t| t, n)));
    let baseline = Baseline::new();
    g.bench_function("baseline/2-threads-disjoint-keys", |b| {
        b.iter_custom(|n| run_threads(&baseline, &f, 2, |t| t, n))
    });
    // One contended key: both owners cycle `keys[0][0]`, so each operation may meet the other's
    // reservation (Conflict, NotHeld) and both threads queue on one shard's lock.
    let one_key = Fixture { keys: [vec![f.keys[0][0].clone()], vec![f.keys[0][0].clone()]], ..fixture() };
    let store = manual_store();
    g.bench_function("memory/2-threads-one-key", |b| b.iter_custom(|n| run_threads(&store, &one_key, 2, |t| t, n)));
    let baseline = Baseline::new();
    g.bench_function("baseline/2-threads-one-key", |b| {
        b.iter_custom(|n| run_threads(&baseline, &one_key, 2, |t| t, n))
    });
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
