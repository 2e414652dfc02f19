//! The [`ReservationStore`] trait, and [`block_on`] for stores that complete at once.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use crate::error::StoreResult;
use crate::spec::{AbandonOutcome, ConfirmOutcome, ReleaseOutcome, Reservation, ReserveOutcome};
use crate::time::{ReleaseVersion, Ttl, Version};
use crate::types::{AggregateRef, HoldId, Key, ReservationScope};

/// A reservation as a store holds it: owned by an [`AggregateRef`], held by [`HoldId`]s.
pub type StoredReservation = Reservation<AggregateRef, BTreeSet<HoldId>>;

/// A store of reservations: reserved keys unique within a [`ReservationScope`].
///
/// Each operation is one linearizable read-modify-write of one (scope, key) whose semantics are
/// the matching function of [`crate::spec`]; nothing is atomic across keys. Arguments are
/// validated before the reservation is read (rule D6): an invalid one is
/// [`crate::StoreError::Invalid`] and changes nothing.
///
/// The methods return futures, so that a store on an async database implements them with
/// `async fn`, while a synchronous store (in memory, SQLite) returns futures that are ready at
/// once: its callers drive them with [`block_on`], or with any executor they already have. The
/// trait forces no runtime on either kind.
pub trait ReservationStore {
    /// Reserves `key` in `scope` for `owner`'s attempt `hold`, pending for `ttl` (rules R1–R7).
    fn reserve(
        &self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        hold: &HoldId,
        ttl: Ttl,
    ) -> impl Future<Output = StoreResult<ReserveOutcome>> + Send;

    /// Confirms `owner`'s reservation of `key` for its fact committed at `version` (rules C1–C8).
    fn confirm(
        &self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        version: Version,
    ) -> impl Future<Output = StoreResult<ConfirmOutcome>> + Send;

    /// Releases `owner`'s reservation of `key` for its fact at `version` that gave the key up
    /// (rules L1–L6).
    fn release(
        &self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        version: ReleaseVersion,
    ) -> impl Future<Output = StoreResult<ReleaseOutcome>> + Send;

    /// Abandons `owner`'s attempt `hold` on `key`, whose events are surely not appended
    /// (rules A1–A6).
    fn abandon(
        &self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        hold: &HoldId,
    ) -> impl Future<Output = StoreResult<AbandonOutcome>> + Send;

    /// The reservation of `key` in `scope` as of now: `None` if the key is free or its pending
    /// reservation expired (rule D7).
    fn lookup(
        &self,
        scope: &ReservationScope,
        key: &Key,
    ) -> impl Future<Output = StoreResult<Option<StoredReservation>>> + Send;
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
