//! A `ReservationStore` written as a team outside this repository would: a synchronous store in
//! memory, and an asynchronous one on a shared "database" that survives reopening. Both are "read
//! the row, `spec::apply`, write the row" under one lock. The snippets of docs/implementing.md
//! run the conformance suite against them (`tests/it`).
#![deny(missing_docs)]

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use reservation_store::{
    Clock, Key, ManualClock, Outcome, Request, ReservationScope, ReservationStore, StoreResult, StoredReservation, spec,
};

type Rows = HashMap<(ReservationScope, Key), StoredReservation>;

/// Validates `request`, takes the lock, reads the clock and the row, decides with `spec::apply`
/// and writes the row. The clock is read under the lock: read before it, an operation could act
/// at an instant earlier than one that took effect before it.
fn decide(rows: &Mutex<Rows>, request: Request<'_>, clock: &impl Clock) -> StoreResult<Outcome> {
    request.admitted()?;
    let mut rows = rows.lock().unwrap_or_else(PoisonError::into_inner);
    let now = clock.now();
    let slot = (request.scope.clone(), request.key.clone());
    let step = spec::apply(rows.get(&slot).cloned(), now, request.operation);
    match step.next {
        Some(next) => rows.insert(slot, next),
        None => rows.remove(&slot),
    };
    Ok(step.outcome)
}

fn read(rows: &Mutex<Rows>, scope: &ReservationScope, key: &Key, clock: &impl Clock) -> Option<StoredReservation> {
    let rows = rows.lock().unwrap_or_else(PoisonError::into_inner);
    spec::lookup(rows.get(&(scope.clone(), key.clone())), clock.now()).cloned()
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
        decide(&self.storage.0, request, &self.clock)
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        tokio::task::yield_now().await;
        Ok(read(&self.storage.0, scope, key, &self.clock))
    }
}
