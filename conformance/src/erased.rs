//! Every harness behind one type, so that the suite is compiled once.
//!
//! The checks are many and long, and a generic function is compiled again for every type it is
//! called with, in the crate that calls it: each test binary that ran the suite against a harness
//! of its own compiled the whole suite again for it, and once more for every wrapper around it (a
//! store broken on purpose, a simulated fault). The public entry points take a
//! `&dyn` [`DynHarness`] instead, which every [`Harness`] is, and the suite runs on [`Erased`], a
//! harness whose store is a boxed one: the suite's code is compiled here, once, and what each
//! harness adds is the few lines below. A store's futures are boxed and polled through its own
//! harness's [`Harness::block_on`]; every method a harness or store may override is still the one
//! that runs (a typed method of the store, the harness's lookups, reopen and raw requests).

use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use reservation_store::{
    AbandonOutcome, AggregateRef, ConfirmOutcome, HoldId, Key, ManualClock, Outcome, ReleaseOutcome, ReleaseVersion,
    Request, ReservationScope, ReservationStore, ReserveOutcome, StorageError, StoreResult, StoredReservation, Ttl,
    Version,
};

use crate::harness::{Capabilities, Fault, Harness, RawAnswer, RawRequest};

/// Any [`Harness`], as a trait object: what the suite's entry points ([`crate::run_all`], the
/// functions of [`crate::checks`], [`crate::faults::run`], …) take, so that they are compiled once
/// in this crate rather than once for every harness in every test binary. Every harness is one: a
/// call passes `&harness` as before (`run_all(&harness, &settings)`). It cannot be implemented
/// otherwise.
pub trait DynHarness: object::Object {}

impl<H: Harness> DynHarness for H {}

/// The methods behind [`DynHarness`], in a module of their own so that no one outside can name,
/// call or implement them.
mod object {
    use super::{Capabilities, ErasedStore, Fault, Future, ManualClock, Path, Pin, StorageError};

    /// A [`crate::Harness`]'s methods, with its types erased.
    pub trait Object: Sync {
        /// [`crate::Harness::store`].
        fn erased_store(&self, clock: ManualClock) -> ErasedStore<'_>;
        /// [`crate::Harness::store_in`].
        fn erased_store_in(&self, dir: &Path, clock: ManualClock) -> Option<ErasedStore<'_>>;
        /// [`crate::Harness::block_on`], for a future that keeps its output itself.
        fn erased_block_on<'f>(&self, future: Pin<Box<dyn Future<Output = ()> + 'f>>);
        /// [`crate::Harness::capabilities`].
        fn erased_capabilities(&self) -> Capabilities;
        /// [`crate::Harness::faults`].
        fn erased_faults(&self) -> Vec<Fault>;
        /// [`crate::Harness::inject`].
        fn erased_inject(&self, fault: Fault) -> Result<(), StorageError>;
        /// [`crate::Harness::broken`].
        fn erased_broken(&self) -> Option<String>;
    }
}

impl<H: Harness> object::Object for H {
    fn erased_store(&self, clock: ManualClock) -> ErasedStore<'_> {
        ErasedStore(Box::new(Bound { harness: self, store: self.store(clock) }))
    }

    fn erased_store_in(&self, dir: &Path, clock: ManualClock) -> Option<ErasedStore<'_>> {
        let store = self.store_in(dir, clock)?;
        Some(ErasedStore(Box::new(Bound { harness: self, store })))
    }

    fn erased_block_on<'f>(&self, future: Pin<Box<dyn Future<Output = ()> + 'f>>) {
        self.block_on(future);
    }

    fn erased_capabilities(&self) -> Capabilities {
        self.capabilities()
    }

    fn erased_faults(&self) -> Vec<Fault> {
        self.faults()
    }

    fn erased_inject(&self, fault: Fault) -> Result<(), StorageError> {
        self.inject(fault)
    }

    fn erased_broken(&self) -> Option<String> {
        self.broken()
    }
}

/// The harness the suite runs on: any harness, behind a [`DynHarness`].
#[derive(Clone, Copy)]
pub(crate) struct Erased<'h>(&'h dyn DynHarness);

impl<'h> Erased<'h> {
    /// `harness`, for the suite.
    pub(crate) fn new(harness: &'h dyn DynHarness) -> Self {
        Erased(harness)
    }

    /// The harness it stands for, to hand to another entry point without a second layer.
    pub(crate) fn inner(self) -> &'h dyn DynHarness {
        self.0
    }
}

impl<'h> Harness for Erased<'h> {
    type Store = ErasedStore<'h>;

    fn store(&self, clock: ManualClock) -> ErasedStore<'h> {
        self.0.erased_store(clock)
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        let mut output = None;
        self.0.erased_block_on(Box::pin(async { output = Some(future.await) }));
        // A harness's `block_on` returns the future's output, which only running it gives.
        output.expect("the harness's block_on ran the future to its end")
    }

    fn capabilities(&self) -> Capabilities {
        self.0.erased_capabilities()
    }

    fn reopen(&self, store: ErasedStore<'h>, clock: ManualClock) -> Option<ErasedStore<'h>> {
        store.0.reopen(clock)
    }

    fn store_in(&self, dir: &Path, clock: ManualClock) -> Option<ErasedStore<'h>> {
        self.0.erased_store_in(dir, clock)
    }

    fn lookups(
        &self,
        store: &ErasedStore<'h>,
        keys: &[(&ReservationScope, &Key)],
    ) -> Vec<StoreResult<Option<StoredReservation>>> {
        store.0.lookups(keys)
    }

    fn send_raw(&self, store: &ErasedStore<'h>, requests: &[RawRequest]) -> Option<Vec<RawAnswer>> {
        store.0.send_raw(requests)
    }

    fn faults(&self) -> Vec<Fault> {
        self.0.erased_faults()
    }

    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        self.0.erased_inject(fault)
    }

    fn broken(&self) -> Option<String> {
        self.0.erased_broken()
    }
}

/// A store's future, boxed.
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A store of any harness, with the harness that built it.
pub struct ErasedStore<'h>(Box<dyn StoreObject<'h> + 'h>);

/// A store's methods and those of its harness that take the store, with their types erased.
trait StoreObject<'h>: Sync {
    fn execute<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, StoreResult<Outcome>>;
    fn lookup<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
    ) -> BoxFuture<'a, StoreResult<Option<StoredReservation>>>;
    fn reserve<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
        ttl: Ttl,
    ) -> BoxFuture<'a, StoreResult<ReserveOutcome>>;
    fn confirm<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: Version,
    ) -> BoxFuture<'a, StoreResult<ConfirmOutcome>>;
    fn release<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: ReleaseVersion,
    ) -> BoxFuture<'a, StoreResult<ReleaseOutcome>>;
    fn abandon<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
    ) -> BoxFuture<'a, StoreResult<AbandonOutcome>>;
    fn lookups(&self, keys: &[(&ReservationScope, &Key)]) -> Vec<StoreResult<Option<StoredReservation>>>;
    fn send_raw(&self, requests: &[RawRequest]) -> Option<Vec<RawAnswer>>;
    fn reopen(self: Box<Self>, clock: ManualClock) -> Option<ErasedStore<'h>>;
}

/// A store of `H`, and `H`.
struct Bound<'h, H: Harness> {
    harness: &'h H,
    store: H::Store,
}

impl<'h, H: Harness> StoreObject<'h> for Bound<'h, H> {
    fn execute<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, StoreResult<Outcome>> {
        Box::pin(self.store.execute(request))
    }

    fn lookup<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
    ) -> BoxFuture<'a, StoreResult<Option<StoredReservation>>> {
        Box::pin(self.store.lookup(scope, key))
    }

    fn reserve<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
        ttl: Ttl,
    ) -> BoxFuture<'a, StoreResult<ReserveOutcome>> {
        Box::pin(self.store.reserve(scope, key, owner, hold, ttl))
    }

    fn confirm<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: Version,
    ) -> BoxFuture<'a, StoreResult<ConfirmOutcome>> {
        Box::pin(self.store.confirm(scope, key, owner, version))
    }

    fn release<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: ReleaseVersion,
    ) -> BoxFuture<'a, StoreResult<ReleaseOutcome>> {
        Box::pin(self.store.release(scope, key, owner, version))
    }

    fn abandon<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
    ) -> BoxFuture<'a, StoreResult<AbandonOutcome>> {
        Box::pin(self.store.abandon(scope, key, owner, hold))
    }

    fn lookups(&self, keys: &[(&ReservationScope, &Key)]) -> Vec<StoreResult<Option<StoredReservation>>> {
        self.harness.lookups(&self.store, keys)
    }

    fn send_raw(&self, requests: &[RawRequest]) -> Option<Vec<RawAnswer>> {
        self.harness.send_raw(&self.store, requests)
    }

    fn reopen(self: Box<Self>, clock: ManualClock) -> Option<ErasedStore<'h>> {
        let Bound { harness, store } = *self;
        harness.reopen(store, clock).map(|store| ErasedStore(Box::new(Bound { harness, store })))
    }
}

impl ReservationStore for ErasedStore<'_> {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        self.0.execute(request).await
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        self.0.lookup(scope, key).await
    }

    fn reserve<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
        ttl: Ttl,
    ) -> impl Future<Output = StoreResult<ReserveOutcome>> + Send + 'a {
        self.0.reserve(scope, key, owner, hold, ttl)
    }

    fn confirm<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: Version,
    ) -> impl Future<Output = StoreResult<ConfirmOutcome>> + Send + 'a {
        self.0.confirm(scope, key, owner, version)
    }

    fn release<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: ReleaseVersion,
    ) -> impl Future<Output = StoreResult<ReleaseOutcome>> + Send + 'a {
        self.0.release(scope, key, owner, version)
    }

    fn abandon<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
    ) -> impl Future<Output = StoreResult<AbandonOutcome>> + Send + 'a {
        self.0.abandon(scope, key, owner, hold)
    }
}
