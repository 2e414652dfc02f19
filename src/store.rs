//! The [`ReservationStore`] trait, and [`block_on`] for stores that complete at once.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use crate::error::{StorageError, StoreResult};
use crate::operation::{
    AbandonOutcome, ConfirmOutcome, Operation, Outcome, ReleaseOutcome, Request, ReserveOutcome, UnexpectedOutcome,
};
use crate::spec::Reservation;
use crate::time::{ReleaseVersion, Ttl, Version};
use crate::types::{AggregateRef, HoldId, Key, ReservationScope};

/// A reservation as a store holds it: owned by an [`AggregateRef`], held by [`HoldId`]s.
pub type StoredReservation = Reservation<AggregateRef, BTreeSet<HoldId>>;

/// A store of reservations: reserved keys unique within a [`ReservationScope`].
///
/// A store implements two methods. [`ReservationStore::execute`] runs one [`Request`] as one
/// linearizable read-modify-write of its (scope, key), with the outcome and the next state that
/// SPEC.md's rule tables give: an invalid argument is [`crate::StoreError::Invalid`] and changes
/// nothing (rule D6), and the clock is read inside the critical section (D10). How a store
/// decides is its own: in code of its own, in SQL, in a server-side script, or by calling
/// [`crate::spec::apply`], as the in-memory store does. [`ReservationStore::lookup`] reads one
/// row. Nothing is atomic across keys.
///
/// The typed methods (`reserve`, `confirm`, `release`, `abandon`) are provided: each builds the
/// request and narrows the [`Outcome`] to its typed outcome. A store may override one (a fast
/// path, a statement of its own), but its semantics stay those of `execute` for the same
/// request.
///
/// A store with logic of its own is what the conformance suite (`reservation-conformance`) is
/// for: it compares every answer of `execute`, of each typed method and of `lookup` with the
/// specification's.
///
/// The methods return futures, so that a store on an async database implements them with
/// `async fn`, while a synchronous store (in memory, SQLite) returns futures that are ready at
/// once: its callers drive them with [`block_on`], or with any executor they already have. The
/// trait forces no runtime on either kind.
pub trait ReservationStore {
    /// Runs `request` as one linearizable step on its (scope, key): validates it (D6), reads the
    /// row with the clock inside the critical section (D10), and answers and writes what SPEC.md's
    /// rule tables give for that state, operation and instant. The decision may be the store's
    /// own code or [`crate::spec::apply`]; the suite checks the answers, not the means.
    fn execute(&self, request: Request<'_>) -> impl Future<Output = StoreResult<Outcome>> + Send;

    /// The reservation of `key` in `scope` as of now: `None` if the key is free or its pending
    /// reservation expired (rule D7).
    fn lookup(
        &self,
        scope: &ReservationScope,
        key: &Key,
    ) -> impl Future<Output = StoreResult<Option<StoredReservation>>> + Send;

    /// Reserves `key` in `scope` for `owner`'s attempt `hold`, pending for `ttl` (rules R1–R7).
    fn reserve<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
        ttl: Ttl,
    ) -> impl Future<Output = StoreResult<ReserveOutcome>> + Send + 'a {
        narrow(self.execute(Request::new(scope, key, Operation::Reserve { owner, hold, ttl })))
    }

    /// Confirms `owner`'s reservation of `key` for its fact committed at `version` (rules C1–C8).
    fn confirm<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: Version,
    ) -> impl Future<Output = StoreResult<ConfirmOutcome>> + Send + 'a {
        narrow(self.execute(Request::new(scope, key, Operation::Confirm { owner, version })))
    }

    /// Releases `owner`'s reservation of `key` for its fact at `version` that gave the key up
    /// (rules L1–L6).
    fn release<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        version: ReleaseVersion,
    ) -> impl Future<Output = StoreResult<ReleaseOutcome>> + Send + 'a {
        narrow(self.execute(Request::new(scope, key, Operation::Release { owner, version })))
    }

    /// Abandons `owner`'s attempt `hold` on `key`, whose events are surely not appended
    /// (rules A1–A6).
    fn abandon<'a>(
        &'a self,
        scope: &'a ReservationScope,
        key: &'a Key,
        owner: &'a AggregateRef,
        hold: &'a HoldId,
    ) -> impl Future<Output = StoreResult<AbandonOutcome>> + Send + 'a {
        narrow(self.execute(Request::new(scope, key, Operation::Abandon { owner, hold })))
    }
}

/// `outcome` as the typed outcome `T`; an outcome its operation cannot report is a
/// [`StorageError`] (the store is broken), never a guess.
async fn narrow<T: TryFrom<Outcome, Error = UnexpectedOutcome>>(
    outcome: impl Future<Output = StoreResult<Outcome>>,
) -> StoreResult<T> {
    let outcome = outcome.await?;
    T::try_from(outcome).map_err(|e| StorageError::new(format!("the store answered wrongly: {e}")).into())
}

/// Runs `future` to completion on the calling thread, without a runtime.
///
/// Meant for the futures of synchronous stores, which are ready on the first poll. A future that
/// is not ready is polled again after yielding the thread, so one that makes progress without a
/// waker still completes; a future that needs a runtime's reactor (tokio I/O, timers) must be run
/// on that runtime instead.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        std::thread::yield_now();
    }
}
