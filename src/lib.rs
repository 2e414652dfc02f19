//! Reserved keys for event-sourced aggregates: uniqueness across aggregate instances, such as a
//! user name unique within a tenant.
//!
//! - [`spec`]: the executable specification, one pure transition function per operation; the
//!   rules it implements are written out in [`rules`].
//! - [`ReservationStore`]: the trait that stores implement, for synchronous and asynchronous
//!   stores alike, and [`block_on`] to drive a synchronous store's ready futures.
//! - [`MemoryStore`]: the thread-safe in-memory reference store.
//! - [`ops`]: operation scripts as plain data, shared by the conformance suite and the fuzzer.
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
pub mod ops;
mod reservation;
#[doc = include_str!("../SPEC.md")]
pub mod rules;
pub mod spec;
#[cfg(feature = "sqlite")]
mod sqlite;
mod store;
mod time;
mod types;

pub use error::{InvalidArgument, StorageError, StoreError, StoreResult};
pub use memory::{MemoryStore, SHARDS, SWEEP_FLOOR};
pub use operation::{
    AbandonOutcome, ConfirmOutcome, Operation, OperationKind, Outcome, ReleaseOutcome, Request, ReserveOutcome,
    UnexpectedOutcome,
};
pub use rules::{Rule, RuleSet};
pub use spec::{BitHolds, Confirmed, HoldBit, HoldSet, Pending, Reservation, Step};
#[cfg(feature = "sqlite")]
pub use sqlite::{MAX_BUSY_TIMEOUT, OpenCheck, SCHEMA_VERSION, SqliteOptions, SqliteStore, Synchronous};
pub use store::{ReservationStore, StoredReservation, block_on};
pub use time::{Clock, ClockHold, Instant, ManualClock, Monotonic, ReleaseVersion, SystemClock, Ttl, Version};
pub use types::{
    AggregateId, AggregateRef, AggregateType, HoldId, Key, MAX_HOLD_ID_LEN, MAX_KEY_LEN, MAX_NAME_LEN, Namespace,
    ReservationScope, SYSTEM_TENANT, Tenant, TenantId,
};
