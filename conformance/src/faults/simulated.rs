//! Simulated faults: cut connections and pauses in front of any harness's store, for stores with
//! no server to cut or pause.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant as WallInstant};

use reservation_store::{
    AbandonOutcome, AggregateRef, ConfirmOutcome, HoldId, Key, ManualClock, Outcome, ReleaseOutcome, ReleaseVersion,
    Request, ReservationScope, ReservationStore, ReserveOutcome, StorageError, StoreResult, StoredReservation, Ttl,
    Version,
};

use crate::harness::{Capabilities, Fault, Harness};
use crate::record::XorShift;

/// Any harness, with [`Fault::CutConnections`] and [`Fault::Pause`] simulated in front of its
/// store, for stores with no server to cut or pause. Its other faults are the harness's own.
///
/// While a cut lasts, each operation fails, one of three ways drawn from the seed: before it
/// reaches the store, with a determinate error; after the store applied it, with an indeterminate
/// error (the answer was lost); or without reaching the store, with an indeterminate error (the
/// request was lost). While a pause lasts, each operation stalls until it ends, on the thread
/// that runs it. Each lasts for the window (30 ms by default), and [`Harness::inject`] returns
/// when it has ended.
#[derive(Debug)]
pub struct Simulated<H> {
    inner: H,
    window: Duration,
    faults: Arc<SimulatedFaults>,
}

/// The faults a [`Simulated`] harness has in force, shared with its stores.
#[derive(Debug, Default)]
struct SimulatedFaults {
    seed: u64,
    draws: AtomicU64,
    cut_until: Mutex<Option<WallInstant>>,
    paused_until: Mutex<Option<WallInstant>>,
}

/// How an operation fails during a simulated cut.
#[derive(Clone, Copy)]
enum Cut {
    /// Before it reaches the store: determinate.
    Before,
    /// After the store applied it: indeterminate.
    After,
    /// Lost on its way: indeterminate, not applied.
    Lost,
}

impl Cut {
    /// The error an operation that met this cut fails with.
    fn error(self) -> reservation_store::StoreError {
        match self {
            Cut::Before => StorageError::new("simulated cut connection: the request was not sent").into(),
            Cut::After => StorageError::indeterminate("simulated cut connection: the answer was lost").into(),
            Cut::Lost => {
                StorageError::indeterminate("simulated cut connection: the request was lost on its way").into()
            }
        }
    }
}

impl SimulatedFaults {
    /// When the fault of `slot` ends, if it has not.
    fn until(slot: &Mutex<Option<WallInstant>>) -> Option<WallInstant> {
        let until = *slot.lock().unwrap_or_else(PoisonError::into_inner);
        until.filter(|u| *u > WallInstant::now())
    }

    /// Stalls while a pause lasts; then how the operation fails, if a cut lasts.
    fn meet(&self) -> Option<Cut> {
        if let Some(until) = Self::until(&self.paused_until) {
            std::thread::sleep(until.saturating_duration_since(WallInstant::now()));
        }
        Self::until(&self.cut_until)?;
        let n = self.draws.fetch_add(1, Ordering::SeqCst);
        let mut r = XorShift((self.seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1);
        r.next();
        Some(match r.below(3) {
            0 => Cut::Before,
            1 => Cut::After,
            _ => Cut::Lost,
        })
    }

    /// Sets the fault of `slot` for `window` from now, waits for it to end, and clears it.
    fn hold(slot: &Mutex<Option<WallInstant>>, window: Duration) {
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(WallInstant::now() + window);
        std::thread::sleep(window);
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }
}

impl<H> Simulated<H> {
    /// `inner`, with cut connections and pauses simulated for 30 ms each, seeded with 1.
    pub fn new(inner: H) -> Self {
        Simulated { inner, window: Duration::from_millis(30), faults: Arc::new(SimulatedFaults::default()) }
            .with_seed(1)
    }

    /// This harness with cuts and pauses that last `window`.
    pub fn with_window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// This harness with the ways operations fail during a cut drawn from `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.faults = Arc::new(SimulatedFaults { seed, ..SimulatedFaults::default() });
        self
    }

    /// The harness inside.
    pub fn inner(&self) -> &H {
        &self.inner
    }
}

/// A store of a [`Simulated`] harness: the inner store, behind the simulated faults.
#[derive(Debug)]
pub struct SimulatedStore<S> {
    inner: S,
    faults: Arc<SimulatedFaults>,
}

impl<S> SimulatedStore<S> {
    /// The store inside.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Runs `op` unless a simulated fault stops it.
    async fn faulted<T>(&self, op: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
        match self.faults.meet() {
            None => op.await,
            Some(Cut::After) => {
                let _ = op.await;
                Err(Cut::After.error())
            }
            Some(cut) => Err(cut.error()),
        }
    }
}

impl<S: ReservationStore + Sync> ReservationStore for SimulatedStore<S> {
    fn execute(&self, request: Request<'_>) -> impl Future<Output = StoreResult<Outcome>> + Send {
        self.faulted(self.inner.execute(request))
    }

    fn lookup(
        &self,
        scope: &ReservationScope,
        key: &Key,
    ) -> impl Future<Output = StoreResult<Option<StoredReservation>>> + Send {
        self.faulted(self.inner.lookup(scope, key))
    }

    fn reserve<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
        ttl: Ttl,
    ) -> impl Future<Output = StoreResult<ReserveOutcome>> + Send + 'a {
        self.faulted(self.inner.reserve(scope, key, owner, hold, ttl))
    }

    fn confirm<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: Version,
    ) -> impl Future<Output = StoreResult<ConfirmOutcome>> + Send + 'a {
        self.faulted(self.inner.confirm(scope, key, owner, version))
    }

    fn release<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: ReleaseVersion,
    ) -> impl Future<Output = StoreResult<ReleaseOutcome>> + Send + 'a {
        self.faulted(self.inner.release(scope, key, owner, version))
    }

    fn abandon<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
    ) -> impl Future<Output = StoreResult<AbandonOutcome>> + Send + 'a {
        self.faulted(self.inner.abandon(scope, key, owner, hold))
    }
}

impl<H: Harness> Harness for Simulated<H> {
    type Store = SimulatedStore<H::Store>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        SimulatedStore { inner: self.inner.store(clock), faults: self.faults.clone() }
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.inner.block_on(future)
    }

    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        let faults = store.faults;
        self.inner.reopen(store.inner, clock).map(|inner| SimulatedStore { inner, faults })
    }

    fn store_in(&self, dir: &std::path::Path, clock: ManualClock) -> Option<Self::Store> {
        self.inner.store_in(dir, clock).map(|inner| SimulatedStore { inner, faults: self.faults.clone() })
    }

    fn lookups(
        &self,
        store: &Self::Store,
        keys: &[(&ReservationScope, &Key)],
    ) -> Vec<StoreResult<Option<StoredReservation>>> {
        // The batch meets the simulated faults once, as the requests of one round trip would; it
        // changes nothing, so a cut after it is as one before.
        match store.faults.meet() {
            None => self.inner.lookups(&store.inner, keys),
            Some(cut) => keys.iter().map(|_| Err(cut.error())).collect(),
        }
    }

    fn send_raw(&self, store: &Self::Store, requests: &[crate::RawRequest]) -> Option<Vec<crate::RawAnswer>> {
        self.inner.send_raw(&store.inner, requests)
    }

    fn broken(&self) -> Option<String> {
        self.inner.broken()
    }

    /// The inner harness's faults, with [`Fault::CutConnections`] and [`Fault::Pause`].
    fn faults(&self) -> Vec<Fault> {
        let mut faults: BTreeSet<Fault> = self.inner.faults().into_iter().collect();
        faults.extend([Fault::CutConnections, Fault::Pause]);
        faults.into_iter().collect()
    }

    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        match fault {
            Fault::CutConnections => SimulatedFaults::hold(&self.faults.cut_until, self.window),
            Fault::Pause => SimulatedFaults::hold(&self.faults.paused_until, self.window),
            fault => return self.inner.inject(fault),
        }
        Ok(())
    }
}
