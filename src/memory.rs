//! [`MemoryStore`]: a store in memory, which decides through the functions of [`crate::spec`].

use std::collections::BTreeSet;
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use hashbrown::HashTable;

use crate::error::StoreResult;
use crate::operation::{Outcome, Request};
use crate::spec::{self, Step};
use crate::store::{ReservationStore, StoredReservation};
use crate::time::{Clock, Instant, SystemClock};
use crate::types::{AggregateRef, HoldId, Key, ReservationScope};

/// How many shards a [`MemoryStore`] has: operations on keys of different shards run in parallel.
/// [`MemoryStore`]'s documentation states it (1024), as part of its bound on rows.
///
/// Many more than cores, so that threads working on different keys seldom touch the same
/// shard's lock and table, and so seldom pull each other's cache lines: two threads on disjoint
/// keys scaled 1.0–1.7× one thread with 64 shards, 1.6–1.9× with 1024 (`BENCHMARKS.md`).
/// Shards are allocated in groups of 8 (512 bytes) when a key of the group is first used, so
/// an empty store takes about 2 KiB and is cheap to create.
const SHARDS: usize = 1024;

/// Shards per lazily allocated group.
const GROUP: usize = 8;

type Group = Box<[Padded; GROUP]>;

/// A shard is swept of expired pending reservations when an insertion takes it past
/// `max(SWEEP_FLOOR, 2 × the rows left by its last sweep)` rows. [`MemoryStore`]'s documentation
/// states it (8), as part of its bound on rows.
const SWEEP_FLOOR: usize = 8;

// The bound on rows that `MemoryStore` documents names these two numbers.
const _: () = assert!(SHARDS == 1024 && SWEEP_FLOOR == 8, "MemoryStore's documented bound on rows is out of date");

type Step_<Out> = Step<AggregateRef, BTreeSet<HoldId>, Out>;

struct Row {
    scope: ReservationScope,
    key: Key,
    /// `None` only while a transition runs on it; never seen outside the lock.
    reservation: Option<StoredReservation>,
}

struct Shard {
    rows: HashTable<Row>,
    sweep_above: usize,
}

/// One shard on its own cache line, so that two cores locking neighbouring shards do not
/// contend for one line.
#[repr(align(64))]
struct Padded(Mutex<Shard>);

fn new_group() -> Group {
    Box::new(std::array::from_fn(|_| Padded(Mutex::new(Shard { rows: HashTable::new(), sweep_above: SWEEP_FLOOR }))))
}

// A shard's lock and table header fit in the one line.
const _: () = assert!(size_of::<Padded>() == 64);

/// A store in memory: thread-safe, linearizable per (scope, key), and built on the
/// spec functions, which it calls under the lock of the key's shard after reading its clock.
///
/// Keys are spread over 1024 shards by hash, each behind its own mutex, so operations on keys of
/// different shards proceed in parallel. Expired pending reservations are dropped when an
/// operation touches them, and each shard is swept whenever an insertion takes it past
/// `max(8, 2 × L)` rows, where `L` is the number of rows its last sweep kept (all of them live).
/// So a shard never holds more than `max(8, 2 × P)` rows, where `P` is the most live reservations
/// it ever held at once, and the store never more than `1024 × (8 + 2 × P)` for `P` the store's
/// peak of live reservations, however long a workload reserves keys and lets them expire. With
/// keys spread evenly by the hash, the store stays near `1024 × 8 + 2 × P` (8,192 rows and twice
/// the peak).
pub struct MemoryStore<C = SystemClock> {
    clock: C,
    hasher: foldhash::fast::RandomState,
    groups: [OnceLock<Group>; SHARDS / GROUP],
}

impl MemoryStore<SystemClock> {
    /// An empty store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(SystemClock)
    }
}

impl Default for MemoryStore<SystemClock> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Clock> MemoryStore<C> {
    /// An empty store on `clock` (a [`crate::ManualClock`] in tests).
    pub fn with_clock(clock: C) -> Self {
        let groups = std::array::from_fn(|_| OnceLock::new());
        Self { clock, hasher: foldhash::fast::RandomState::default(), groups }
    }

    /// The store's clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// How many rows the store holds, expired pending ones not yet swept included.
    pub fn len(&self) -> usize {
        self.shards().map(|s| lock(s).rows.len()).sum()
    }

    /// Whether the store holds no rows at all.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every expired pending reservation now; returns how many rows are left.
    pub fn sweep(&self) -> usize {
        self.shards()
            .map(|s| {
                let mut shard = lock(s);
                let now = self.clock.now();
                shard.sweep(now, &self.hasher);
                shard.rows.len()
            })
            .sum()
    }

    /// The shards allocated so far; the others hold no rows.
    fn shards(&self) -> impl Iterator<Item = &Padded> {
        self.groups.iter().filter_map(OnceLock::get).flat_map(|group| group.iter())
    }

    fn hash(&self, scope: &ReservationScope, key: &Key) -> u64 {
        self.hasher.hash_one((scope, key))
    }

    fn shard(&self, hash: u64) -> MutexGuard<'_, Shard> {
        // The top bits pick the shard; hashbrown uses the low and top-7 bits within it, which
        // only costs a little clustering in the control bytes.
        let i = (hash >> (64 - SHARDS.trailing_zeros())) as usize;
        lock(&self.groups[i / GROUP].get_or_init(new_group)[i % GROUP])
    }

    /// One read-modify-write of (scope, key) through a spec function, under the shard's lock.
    fn apply<Out>(
        &self,
        scope: &ReservationScope,
        key: &Key,
        transition: impl FnOnce(Option<StoredReservation>, Instant) -> Step_<Out>,
    ) -> Out {
        let hash = self.hash(scope, key);
        let mut shard = self.shard(hash);
        // The clock is read under the lock, so the per-key order of operations and the order of
        // the instants they saw agree.
        let now = self.clock.now();
        let is_row = |row: &Row| row.scope == *scope && row.key == *key;
        match shard.rows.find_entry(hash, is_row) {
            Ok(mut entry) => {
                let step = transition(entry.get_mut().reservation.take(), now);
                match step.next {
                    Some(next) => entry.get_mut().reservation = Some(next),
                    None => drop(entry.remove()),
                }
                step.outcome
            }
            Err(_) => {
                let step = transition(None, now);
                if let Some(next) = step.next {
                    shard.insert(
                        hash,
                        Row { scope: scope.clone(), key: key.clone(), reservation: Some(next) },
                        now,
                        &self.hasher,
                    );
                }
                step.outcome
            }
        }
    }

    fn read(&self, scope: &ReservationScope, key: &Key) -> Option<StoredReservation> {
        let hash = self.hash(scope, key);
        let shard = self.shard(hash);
        let now = self.clock.now();
        let row = shard.rows.find(hash, |row| row.scope == *scope && row.key == *key);
        spec::lookup(row.and_then(|r| r.reservation.as_ref()), now).cloned()
    }
}

impl Shard {
    fn insert(&mut self, hash: u64, row: Row, now: Instant, hasher: &foldhash::fast::RandomState) {
        if self.rows.len() >= self.sweep_above {
            self.sweep(now, hasher);
        }
        self.rows.insert_unique(hash, row, |r| hasher.hash_one((&r.scope, &r.key)));
    }

    fn sweep(&mut self, now: Instant, hasher: &foldhash::fast::RandomState) {
        self.rows.retain(|row| row.reservation.as_ref().is_some_and(|r| r.is_live(now)));
        self.sweep_above = SWEEP_FLOOR.max(2 * self.rows.len());
        // Give memory back after a burst, so the table's capacity follows the bound on rows. It
        // reallocates only when the table is larger than `sweep_above` rows need, and then costs
        // about what the sweep did.
        self.rows.shrink_to(self.sweep_above, |r| hasher.hash_one((&r.scope, &r.key)));
    }
}

fn lock(shard: &Padded) -> MutexGuard<'_, Shard> {
    // A panic while a shard was locked cannot leave a half-written row: rows are replaced whole.
    shard.0.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<C: Clock> ReservationStore for MemoryStore<C> {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        request.admitted()?;
        Ok(self.apply(request.scope, request.key, |current, now| spec::apply(current, now, request.operation)))
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        Ok(self.read(scope, key))
    }
}
