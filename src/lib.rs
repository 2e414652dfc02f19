//! Reserved keys for event-sourced aggregates: uniqueness across aggregate instances, such as a
//! user name unique within a tenant.
//!
//! The rules are written in [`rules`] (SPEC.md) and decided by the functions of [`spec`], the one
//! place the semantics live. Every other item here speaks, stores or checks what they decide.
//!
//! # What is public, and for whom
//!
//! Everything a store's user needs is at the crate root:
//!
//! - the values of a request, each validated when built (rule D6): [`ReservationScope`] with its
//!   [`AggregateType`], [`Tenant`] (or [`SYSTEM_TENANT`]) and [`Namespace`]; the owner
//!   [`AggregateRef`] with its [`TenantId`] and [`AggregateId`]; [`Key`] and [`HoldId`]; their
//!   limits [`MAX_KEY_LEN`], [`MAX_HOLD_ID_LEN`] and [`MAX_NAME_LEN`];
//! - time and versions: [`Instant`], [`Ttl`], [`Version`], [`ReleaseVersion`], and the clocks
//!   [`Clock`], [`SystemClock`], [`Monotonic`], and [`ManualClock`] (with its [`ClockHold`]) for
//!   tests;
//! - the trait [`ReservationStore`], its typed outcomes [`ReserveOutcome`], [`ConfirmOutcome`],
//!   [`ReleaseOutcome`] and [`AbandonOutcome`], what [`ReservationStore::lookup`] returns
//!   ([`StoredReservation`]), and [`block_on`] to drive a synchronous store's ready futures;
//! - the errors: [`StoreError`] and [`StoreResult`], made of an [`InvalidArgument`] or a
//!   [`StorageError`], and [`error_chain`] to show an error with its causes;
//! - [`MemoryStore`], a thread-safe store in memory, which decides through [`spec`].
//!
//! A store's implementer needs, besides, what [`ReservationStore::execute`] takes and returns:
//! [`Request`], [`Operation`] and [`OperationKind`], [`Outcome`] (which the typed outcomes convert
//! to and from, an impossible one being an [`UnexpectedOutcome`]); and, to decide by the
//! specification rather than by code of its own, [`spec::apply`] and the reservation states
//! [`spec::Reservation`], [`spec::Pending`] and [`spec::Confirmed`].
//!
//! With the optional feature `serde`, the values a store writes down are `Serialize` and
//! `Deserialize` in the driver protocol's forms (PROTOCOL.md): names, keys and hold ids as
//! strings, [`Tenant`] as its id or none ([`SYSTEM_TENANT`]), the scope and the owner as objects
//! of those, [`Instant`], [`Ttl`] and [`Version`] as numbers (milliseconds; 0 is
//! [`Version::UNVERSIONED`]), [`ReleaseVersion`] as a number or `"ANY"`, outcomes and operation
//! kinds by name, an [`Operation`] with its name under `"op"`, and a reservation
//! ([`StoredReservation`]) with its state under `"state"`. Reading a value validates it as its
//! constructor does (an empty key, a time to live of 0 and a pending reservation without a hold
//! are the format's errors), so no value read is one the constructors would refuse.
//!
//! Checking a store, or the protocol, needs the modules:
//!
//! - [`spec`]: the decisions, one pure function per operation, generic over the owner and the
//!   hold set ([`spec::HoldSet`]; [`spec::BitHolds`] is the model's), each returning a
//!   [`spec::Step`];
//! - [`rules`]: SPEC.md itself, the rule ids ([`rules::Rule`]) that steps and failure reports
//!   cite, sets of them ([`rules::RuleSet`]) for coverage, and the text ([`rules::SPEC_MD`]) whose
//!   worked examples the conformance suite runs;
//!
//! ```
//! use reservation_store::*;
//!
//! let clock = ManualClock::new(Instant::from_millis(1_000));
//! let store = MemoryStore::with_clock(clock.clone());
//! let scope = ReservationScope::parse("user", Some("acme"), "user-name")?;
//! let alice = AggregateRef::parse("user", Some("acme"), "alice-id")?;
//! let key = Key::new("alice")?;
//! let hold = HoldId::new("attempt-1")?;
//!
//! // A decision reserves the key pending, appends its fact at version 1, then confirms.
//! let ttl = Ttl::from_millis(5_000)?;
//! assert_eq!(block_on(store.reserve(&scope, &key, &alice, &hold, ttl))?, ReserveOutcome::Taken);
//! assert_eq!(block_on(store.confirm(&scope, &key, &alice, Version::stream(1)?))?, ConfirmOutcome::Confirmed);
//! clock.advance(60_000); // a confirmed reservation never expires
//! assert!(block_on(store.lookup(&scope, &key))?.is_some());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod error;
mod holds;
mod memory;
mod operation;
mod reservation;
#[doc = include_str!("../SPEC.md")]
pub mod rules;
#[cfg(feature = "serde")]
mod serial;
pub mod spec;
mod store;
mod time;
mod types;

pub use error::{InvalidArgument, StorageError, StoreError, StoreResult, error_chain};
pub use memory::MemoryStore;
pub use operation::{
    AbandonOutcome, ConfirmOutcome, Operation, OperationKind, Outcome, ReleaseOutcome, Request, ReserveOutcome,
    UnexpectedOutcome,
};
pub use store::{ReservationStore, StoredReservation, block_on};
pub use time::{Clock, ClockHold, Instant, ManualClock, Monotonic, ReleaseVersion, SystemClock, Ttl, Version};
pub use types::{
    AggregateId, AggregateRef, AggregateType, HoldId, Key, MAX_HOLD_ID_LEN, MAX_KEY_LEN, MAX_NAME_LEN, Namespace,
    ReservationScope, SYSTEM_TENANT, Tenant, TenantId,
};
