//! The whole suite against an asynchronous store on tokio, through the macro: each operation
//! yields to the runtime before it runs, so the suite drives futures that are not ready at once.

use reservation_conformance::Harness;
use reservation_store::{
    Key, ManualClock, MemoryStore, Outcome, Request, ReservationScope, ReservationStore, StoreResult, StoredReservation,
};

/// An asynchronous store: the in-memory store behind an await point.
struct YieldingStore(MemoryStore<ManualClock>);

impl ReservationStore for YieldingStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        tokio::task::yield_now().await;
        self.0.execute(request).await
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
