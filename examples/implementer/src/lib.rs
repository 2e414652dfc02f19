//! A `ReservationStore` written as a team outside this repository would: a synchronous store in
//! memory, and an asynchronous one on a shared "database" that survives reopening. Both are "read
//! the row, `spec::apply`, write the row" under one lock. The README's snippets run the
//! conformance suite against them (`tests/it`).
#![deny(missing_docs)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use reservation_store::{
    Clock, Key, ManualClock, Outcome, Request, ReservationScope, ReservationStore, StoreResult, StoredReservation, spec,
};

type Rows = HashMap<(ReservationScope, Key), StoredReservation>;

/// Validates `request`, reads its row, decides with `spec::apply` at `now` and writes the row.
fn decide(rows: &Mutex<Rows>, request: Request<'_>, now: reservation_store::Instant) -> StoreResult<Outcome> {
    request.admitted()?;
    let mut rows = rows.lock().unwrap_or_else(PoisonError::into_inner);
    let slot = (request.scope.clone(), request.key.clone());
    let step = spec::apply(rows.get(&slot).cloned(), now, request.operation);
    match step.next {
        Some(next) => rows.insert(slot, next),
        None => rows.remove(&slot),
    };
    Ok(step.outcome)
}

fn read(
    rows: &Mutex<Rows>,
    scope: &ReservationScope,
    key: &Key,
    now: reservation_store::Instant,
) -> Option<StoredReservation> {
    let rows = rows.lock().unwrap_or_else(PoisonError::into_inner);
    spec::lookup(rows.get(&(scope.clone(), key.clone())), now).cloned()
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
        // The clock is read inside the critical section's caller, before the lock: with one lock
        // per store and a clock only the suite moves, that is the same instant.
        std::future::ready(decide(&self.rows, request, self.clock.now()))
    }

    fn lookup(
        &self,
        scope: &ReservationScope,
        key: &Key,
    ) -> impl Future<Output = StoreResult<Option<StoredReservation>>> + Send {
        std::future::ready(Ok(read(&self.rows, scope, key, self.clock.now())))
    }
}

/// The "database" of [`MyAsyncStore`]: shared by every store connected to it, so that a store
/// closed and connected again finds its reservations.
#[derive(Clone, Default)]
pub struct Storage(Arc<Mutex<Rows>>);

/// An asynchronous store on a [`Storage`], driven by tokio.
pub struct MyAsyncStore {
    clock: ManualClock,
    storage: Storage,
}

impl MyAsyncStore {
    /// Connects to `storage` on `clock`.
    pub async fn connect(storage: &Storage, clock: ManualClock) -> Self {
        tokio::task::yield_now().await;
        MyAsyncStore { clock, storage: storage.clone() }
    }
}

impl ReservationStore for MyAsyncStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        tokio::task::yield_now().await;
        decide(&self.storage.0, request, self.clock.now())
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        tokio::task::yield_now().await;
        Ok(read(&self.storage.0, scope, key, self.clock.now()))
    }
}
