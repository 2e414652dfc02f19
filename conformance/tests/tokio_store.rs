//! The whole suite against an asynchronous store on tokio, through the macro: each operation
//! yields to the runtime before it runs, so the suite drives futures that are not ready at once.

use reservation_conformance::Harness;
use reservation_store::{
    AbandonOutcome, AggregateRef, ConfirmOutcome, HoldId, Key, ManualClock, MemoryStore, ReleaseOutcome,
    ReleaseVersion, ReservationScope, ReservationStore, ReserveOutcome, StoreResult, StoredReservation, Ttl, Version,
};

/// An asynchronous store: the in-memory store behind an await point.
struct YieldingStore(MemoryStore<ManualClock>);

impl ReservationStore for YieldingStore {
    async fn reserve(
        &self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        hold: &HoldId,
        ttl: Ttl,
    ) -> StoreResult<ReserveOutcome> {
        tokio::task::yield_now().await;
        self.0.reserve(scope, key, owner, hold, ttl).await
    }

    async fn confirm(
        &self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        version: Version,
    ) -> StoreResult<ConfirmOutcome> {
        tokio::task::yield_now().await;
        self.0.confirm(scope, key, owner, version).await
    }

    async fn release(
        &self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        version: ReleaseVersion,
    ) -> StoreResult<ReleaseOutcome> {
        tokio::task::yield_now().await;
        self.0.release(scope, key, owner, version).await
    }

    async fn abandon(
        &self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        hold: &HoldId,
    ) -> StoreResult<AbandonOutcome> {
        tokio::task::yield_now().await;
        self.0.abandon(scope, key, owner, hold).await
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        tokio::task::yield_now().await;
        self.0.lookup(scope, key).await
    }
}

/// The harness an implementer on tokio writes: a runtime, and its `block_on`.
struct TokioHarness {
    runtime: tokio::runtime::Runtime,
}

impl TokioHarness {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("a tokio runtime");
        TokioHarness { runtime }
    }
}

impl Harness for TokioHarness {
    type Store = YieldingStore;

    fn store(&self, clock: ManualClock) -> YieldingStore {
        YieldingStore(MemoryStore::with_clock(clock))
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

reservation_conformance::tests!(tokio_store, TokioHarness::new());
