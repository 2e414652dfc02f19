//! A `ReservationStore` written as a team outside this repository would: a synchronous store in
//! memory, and an asynchronous one on a shared "database" that survives reopening. Both are "read
//! the row, `spec::apply`, write the row" under one lock, at an instant that never goes back: the
//! database keeps, with each change, the instant it was decided at, per scope, and a store
//! decides no earlier than that (rule D10 across a restart). The snippets of docs/implementing.md
//! run the conformance suite against them (`tests/it`).
//!
//! The database stands in for a server: it can be killed and restarted (it refuses requests for a
//! moment and keeps every row) and can cut its connections (an operation in flight then fails,
//! and may or may not have taken effect), so that the suite's fault check has something to do to
//! it, as it would to a real server.
#![deny(missing_docs)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant as WallInstant};

use reservation_store::{
    Clock, Instant, Key, ManualClock, Monotonic, Outcome, Request, ReservationScope, ReservationStore, StorageError,
    StoreResult, StoredReservation, spec,
};

/// What a store keeps: a row per (scope, key), and per scope the latest instant at which a
/// reservation of it changed, written with the change (rule D10 across a restart).
#[derive(Default)]
struct Rows {
    rows: HashMap<(ReservationScope, Key), StoredReservation>,
    latest: HashMap<ReservationScope, Instant>,
    /// Whether the latest instants are kept: always, but in the planted bug of the
    /// `broken-variants` feature.
    forget_clocks: bool,
}

impl Rows {
    /// The instant to decide at in `scope`: the clock's reading, never earlier than the latest
    /// change of the scope.
    fn now(&self, scope: &ReservationScope, clock: &impl Clock) -> Instant {
        let latest = if self.forget_clocks { None } else { self.latest.get(scope).copied() };
        clock.now().max(latest.unwrap_or(Instant::ZERO))
    }
}

/// Validates `request`, takes the lock, reads the clock and the row, decides with `spec::apply`
/// and writes the row, with the instant of the change. The clock is read under the lock: read
/// before it, an operation could act at an instant earlier than one that took effect before it.
fn decide(rows: &Mutex<Rows>, request: Request<'_>, clock: &impl Clock) -> StoreResult<Outcome> {
    request.admitted()?;
    let mut rows = rows.lock().unwrap_or_else(PoisonError::into_inner);
    let now = rows.now(request.scope, clock);
    let slot = (request.scope.clone(), request.key.clone());
    let current = rows.rows.get(&slot).cloned();
    let step = spec::apply(current.clone(), now, request.operation);
    if step.next != current {
        match step.next {
            Some(next) => rows.rows.insert(slot, next),
            None => rows.rows.remove(&slot),
        };
        rows.latest.insert(request.scope.clone(), now);
    }
    Ok(step.outcome)
}

fn read(rows: &Mutex<Rows>, scope: &ReservationScope, key: &Key, clock: &impl Clock) -> Option<StoredReservation> {
    let rows = rows.lock().unwrap_or_else(PoisonError::into_inner);
    let now = rows.now(scope, clock);
    spec::lookup(rows.rows.get(&(scope.clone(), key.clone())), now).cloned()
}

/// A synchronous store in memory, on a clock the caller gives.
pub struct MyStore {
    clock: ManualClock,
    rows: Mutex<Rows>,
}

impl MyStore {
    /// An empty store on `clock`.
    pub fn new(clock: ManualClock) -> Self {
        MyStore { clock, rows: Mutex::default() }
    }
}

impl ReservationStore for MyStore {
    fn execute(&self, request: Request<'_>) -> impl Future<Output = StoreResult<Outcome>> + Send {
        std::future::ready(decide(&self.rows, request, &self.clock))
    }

    fn lookup(
        &self,
        scope: &ReservationScope,
        key: &Key,
    ) -> impl Future<Output = StoreResult<Option<StoredReservation>>> + Send {
        std::future::ready(Ok(read(&self.rows, scope, key, &self.clock)))
    }
}

/// The "database" of [`MyAsyncStore`]: shared by every store connected to it, so that a store
/// closed and connected again finds its reservations.
#[derive(Clone, Default)]
pub struct Storage(Arc<Database>);

/// What a [`Storage`] holds: its rows, and its state as a server.
#[derive(Default)]
struct Database {
    rows: Mutex<Rows>,
    /// Counts the times every connection was cut: an operation that sees it move did not get
    /// its answer.
    cuts: AtomicU64,
    /// Until when the server is down.
    down_until: Mutex<Option<WallInstant>>,
    /// Until when the connections are cut: answers due meanwhile are lost.
    cut_until: Mutex<Option<WallInstant>>,
}

/// How long a killed server takes to start again.
const RESTART: Duration = Duration::from_millis(20);
/// How long cut connections take to come back.
const RECONNECT: Duration = Duration::from_millis(5);

/// Whether `slot` holds an instant still to come.
fn until(slot: &Mutex<Option<WallInstant>>) -> bool {
    slot.lock().unwrap_or_else(PoisonError::into_inner).is_some_and(|until| until > WallInstant::now())
}

impl Storage {
    /// Kills the server and starts it again: every connection is cut, and for a moment every
    /// request is refused. Rows, and the instants of their changes, are kept (the server writes
    /// each before it answers). Returns once the server answers again.
    pub fn kill_and_restart(&self) -> Result<(), StorageError> {
        *self.0.down_until.lock().unwrap_or_else(PoisonError::into_inner) = Some(WallInstant::now() + RESTART);
        self.0.cuts.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(RESTART);
        Ok(())
    }

    /// Cuts every connection: operations in flight, and those that answer before the
    /// connections come back, lose their answer. Returns once they are back.
    pub fn cut_connections(&self) -> Result<(), StorageError> {
        *self.0.cut_until.lock().unwrap_or_else(PoisonError::into_inner) = Some(WallInstant::now() + RECONNECT);
        self.0.cuts.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(RECONNECT);
        Ok(())
    }

    /// Runs `op` as a request to the server: refused while the server is down (nothing done), and
    /// indeterminate when the connections were cut while it ran (it may have been done).
    async fn request<T>(&self, op: impl FnOnce(&Mutex<Rows>) -> StoreResult<T>) -> StoreResult<T> {
        if until(&self.0.down_until) {
            return Err(StorageError::new("my database: the server is not answering").into());
        }
        let cuts = self.0.cuts.load(Ordering::SeqCst);
        tokio::task::yield_now().await;
        let answer = op(&self.0.rows);
        tokio::task::yield_now().await;
        if self.0.cuts.load(Ordering::SeqCst) != cuts || until(&self.0.cut_until) {
            return Err(StorageError::indeterminate("my database: the connection was cut before the answer").into());
        }
        answer
    }
}

/// A planted bug, for the crate's own tests only (feature `broken-variants`, which nothing but the
/// crate's dev-dependency on itself enables).
#[cfg(feature = "broken-variants")]
impl Storage {
    /// BROKEN ON PURPOSE: the database keeps no instant of its changes, so a store connected again
    /// on a clock set back decides at that earlier instant, and a pending reservation that had
    /// expired before is live again (D10 across a restart, P1).
    pub fn broken_forgets_clocks(self) -> Self {
        self.0.rows.lock().unwrap_or_else(PoisonError::into_inner).forget_clocks = true;
        self
    }
}

/// An asynchronous store on a [`Storage`], driven by tokio. Its clock never goes back: not in
/// this process ([`Monotonic`]), and not behind the latest change of a scope that the storage
/// keeps.
pub struct MyAsyncStore {
    clock: Monotonic<ManualClock>,
    storage: Storage,
}

impl MyAsyncStore {
    /// Connects to `storage` on `clock`.
    pub async fn connect(storage: &Storage, clock: ManualClock) -> Self {
        tokio::task::yield_now().await;
        MyAsyncStore { clock: Monotonic::new(clock), storage: storage.clone() }
    }
}

impl ReservationStore for MyAsyncStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        // Bad input is refused before anything is sent, whatever the server's state.
        request.admitted()?;
        self.storage.request(|rows| decide(rows, request, &self.clock)).await
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        self.storage.request(|rows| Ok(read(rows, scope, key, &self.clock))).await
    }
}
