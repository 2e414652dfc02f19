//! What the `memory` and `ratios` benches share: the fixture, the baseline map and the timed
//! runs of reserve → confirm → release cycles on one or more threads.
//!
//! The baseline is the least a store of reservations can do: a table of rows keyed by
//! (scope, key), holding a copy of the owner, the hold and one number, behind sharded mutexes,
//! with one hash, one lock and one table operation per call: insert on reserve, update on
//! confirm, remove on release, find and copy on lookup. `MemoryStore` does the same table
//! operations and adds the rules (the spec functions), the clock read and the hold set.

// Each bench uses its own part of this module.
#![allow(dead_code, reason = "each bench uses a different part of these helpers")]

use std::hash::BuildHasher;
use std::hint::black_box;
use std::sync::{Barrier, Mutex, PoisonError};
use std::time::{Duration, Instant as WallInstant};

use hashbrown::HashTable;
use reservation_store::{
    AggregateRef, Clock, HoldId, Instant, Key, ManualClock, MemoryStore, ReleaseVersion, ReservationScope,
    ReservationStore, Ttl, Version, block_on,
};

/// The baseline's shards: as many as `MemoryStore` has (its documentation says 1024).
const SHARDS: usize = 1024;

/// Keys each thread cycles through, so that a thread's keys spread over the shards.
pub const KEYS_PER_THREAD: usize = 256;

pub struct Fixture {
    pub scope: ReservationScope,
    pub owners: [AggregateRef; 2],
    pub holds: [HoldId; 2],
    /// `KEYS_PER_THREAD` keys for each of two threads, disjoint.
    pub keys: [Vec<Key>; 2],
    pub ttl: Ttl,
    pub version: Version,
}

pub fn fixture() -> Fixture {
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
pub trait Cycle: Sync {
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

/// One baseline shard on its own cache line, as the store's are: without it, two threads on
/// neighbouring shards contend for one line and the baseline stops scaling.
#[repr(align(64))]
struct Padded(Mutex<HashTable<Row>>);

/// The baseline: sharded `Mutex<HashTable>` of rows, with the store's hasher and shard count.
pub struct Baseline {
    hasher: foldhash::fast::RandomState,
    shards: Box<[Padded]>,
}

impl Baseline {
    pub fn new() -> Self {
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

    pub fn reserve(
        &self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        hold: &HoldId,
        expiry: u64,
    ) -> bool {
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

    pub fn confirm(&self, scope: &ReservationScope, key: &Key, version: u64) -> bool {
        self.with(scope, key, |table, hash| match table.find_mut(hash, |r| r.scope == *scope && r.key == *key) {
            Some(row) => {
                row.hold = None;
                row.number = version;
                true
            }
            None => false,
        })
    }

    pub fn release(&self, scope: &ReservationScope, key: &Key) -> bool {
        self.with(scope, key, |table, hash| match table.find_entry(hash, |r| r.scope == *scope && r.key == *key) {
            Ok(entry) => {
                drop(entry.remove());
                true
            }
            Err(_) => false,
        })
    }

    pub fn lookup(&self, scope: &ReservationScope, key: &Key) -> Option<(AggregateRef, u64)> {
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

pub fn manual_store() -> MemoryStore<ManualClock> {
    MemoryStore::with_clock(ManualClock::new(Instant::from_millis(1_000_000)))
}

/// Runs `body(t, keys of thread t)` on `threads` threads at once, released together by a
/// barrier once all are started; returns each thread's result.
fn on_threads<R: Send>(f: &Fixture, threads: usize, body: impl Fn(usize, &[Key]) -> R + Sync) -> Vec<R> {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (barrier, body) = (&barrier, &body);
                s.spawn(move || {
                    barrier.wait();
                    body(t, &f.keys[t])
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
    })
}

/// `iters` cycles on each of `threads` threads, thread `t` on the keys `f.keys[t]`; the time
/// from the moment all threads are ready to the moment the last one is done (thread start
/// excluded).
pub fn run_threads(store: &impl Cycle, f: &Fixture, threads: usize, iters: u64) -> Duration {
    let spans = on_threads(f, threads, |t, keys| {
        let start = WallInstant::now();
        for i in 0..iters {
            store.cycle(f, t, &keys[i as usize % keys.len()]);
        }
        (start, WallInstant::now())
    });
    let start = spans.iter().map(|s| s.0).min();
    let end = spans.iter().map(|s| s.1).max();
    match (start, end) {
        (Some(start), Some(end)) => end.duration_since(start),
        _ => Duration::ZERO,
    }
}

/// Runs cycles on `threads` threads for `span`, thread `t` on the keys `f.keys[t]`; returns
/// the cycles per second of all threads together.
pub fn throughput(store: &impl Cycle, f: &Fixture, threads: usize, span: Duration) -> f64 {
    let cycles: u64 = on_threads(f, threads, |t, keys| {
        let start = WallInstant::now();
        let mut done = 0;
        // The wall clock is read once per pass over the thread's keys.
        while start.elapsed() < span {
            for key in keys {
                store.cycle(f, t, key);
            }
            done += keys.len() as u64;
        }
        done
    })
    .into_iter()
    .sum();
    cycles as f64 / span.as_secs_f64()
}
