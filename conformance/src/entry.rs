//! The entry points of a store: an operation goes to it through `execute` or through its typed
//! method (`reserve`, `confirm`, `release`, `abandon`), and the suite calls both in turn.

use reservation_store::{
    AggregateRef, HoldId, Key, Operation, OperationKind, Outcome, Request, ReservationScope, ReservationStore,
    StoreResult,
};

/// The entry point through which a session sends an operation to the store.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Entry {
    /// [`ReservationStore::execute`].
    Execute,
    /// The operation's typed method: [`ReservationStore::reserve`], `confirm`, `release` or
    /// `abandon`.
    Typed,
}

impl Entry {
    /// The entry point of a session's `n`th operation (from 0): `execute` and the typed methods
    /// in turn, so that a script reaches both, the same way on every run.
    pub(crate) fn nth(n: usize) -> Entry {
        if n.is_multiple_of(2) { Entry::Execute } else { Entry::Typed }
    }

    /// The method called for an operation of `kind`, as failures name it.
    pub(crate) fn method(self, kind: OperationKind) -> &'static str {
        match (self, kind) {
            (Entry::Execute, _) => "ReservationStore::execute",
            (Entry::Typed, OperationKind::Reserve) => "ReservationStore::reserve",
            (Entry::Typed, OperationKind::Confirm) => "ReservationStore::confirm",
            (Entry::Typed, OperationKind::Release) => "ReservationStore::release",
            (Entry::Typed, OperationKind::Abandon) => "ReservationStore::abandon",
        }
    }
}

/// Sends `operation` on (scope, key) to `store` through `entry`, with the typed method's outcome
/// widened to an [`Outcome`].
pub(crate) async fn call<S: ReservationStore>(
    store: &S,
    entry: Entry,
    scope: &ReservationScope,
    key: &Key,
    operation: Operation<&AggregateRef, &HoldId>,
) -> StoreResult<Outcome> {
    match (entry, operation) {
        (Entry::Execute, _) => store.execute(Request { scope, key, operation }).await,
        (Entry::Typed, Operation::Reserve { owner, hold, ttl }) => {
            store.reserve(scope, key, owner, hold, ttl).await.map(Outcome::from)
        }
        (Entry::Typed, Operation::Confirm { owner, version }) => {
            store.confirm(scope, key, owner, version).await.map(Outcome::from)
        }
        (Entry::Typed, Operation::Release { owner, version }) => {
            store.release(scope, key, owner, version).await.map(Outcome::from)
        }
        (Entry::Typed, Operation::Abandon { owner, hold }) => {
            store.abandon(scope, key, owner, hold).await.map(Outcome::from)
        }
    }
}
