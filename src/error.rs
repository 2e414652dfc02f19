//! Errors: invalid arguments (rule D6), each its own variant, apart from storage failures.

use std::error::Error as StdError;
use std::fmt;

/// An invalid argument (rule D6). It is reported before the reservation is read, and the
/// operation changes nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidArgument {
    /// The key is empty.
    #[error("D6: the key is empty")]
    EmptyKey,
    /// The key is longer than [`crate::MAX_KEY_LEN`] bytes.
    #[error("D6: the key is {len} bytes long, over the maximum of {max}")]
    KeyTooLong {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The hold id is empty.
    #[error("D6: the hold id is empty")]
    EmptyHoldId,
    /// The hold id is longer than [`crate::MAX_HOLD_ID_LEN`] bytes.
    #[error("D6: the hold id is {len} bytes long, over the maximum of {max}")]
    HoldIdTooLong {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The namespace is empty.
    #[error("D6: the namespace is empty")]
    EmptyNamespace,
    /// The namespace is longer than [`crate::MAX_NAME_LEN`] bytes.
    #[error("D6: the namespace is {len} bytes long, over the maximum of {max}")]
    NamespaceTooLong {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The aggregate type is empty.
    #[error("D6: the aggregate type is empty")]
    EmptyAggregateType,
    /// The aggregate type is longer than [`crate::MAX_NAME_LEN`] bytes.
    #[error("D6: the aggregate type is {len} bytes long, over the maximum of {max}")]
    AggregateTypeTooLong {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The tenant id is empty.
    #[error("D6: the tenant id is empty")]
    EmptyTenantId,
    /// The tenant id is longer than [`crate::MAX_NAME_LEN`] bytes.
    #[error("D6: the tenant id is {len} bytes long, over the maximum of {max}")]
    TenantIdTooLong {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The aggregate id is empty.
    #[error("D6: the aggregate id is empty")]
    EmptyAggregateId,
    /// The aggregate id is longer than [`crate::MAX_NAME_LEN`] bytes.
    #[error("D6: the aggregate id is {len} bytes long, over the maximum of {max}")]
    AggregateIdTooLong {
        /// Its length in bytes.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The time to live is zero (rule D2).
    #[error("D2: the time to live is zero")]
    TtlZero,
    /// A stream version of zero: stream versions start at 1, and `UNVERSIONED` is said by name
    /// (rule D3).
    #[error("D3: stream versions start at 1; use Version::UNVERSIONED for none")]
    ZeroStreamVersion,
    /// The owner's aggregate type is not the scope's.
    #[error("D6: the owner's aggregate type differs from the scope's")]
    OwnerTypeMismatch,
    /// The scope's tenant is neither the owner's tenant nor `SYSTEM_TENANT`.
    #[error("D6: the scope's tenant is neither the owner's tenant nor SYSTEM_TENANT")]
    TenantMismatch,
}

/// A failure of the storage underneath a store: I/O, a lost connection, a lock timeout. It
/// never stands for a wrong outcome.
///
/// A storage error is *determinate* by default: the store knows the operation did not take
/// effect (it failed before its write was sent, or its transaction rolled back). An
/// [`indeterminate`](StorageError::is_indeterminate) one says the store cannot know: the
/// connection dropped after the commit was sent, so the operation may or may not have happened,
/// as Jepsen's `:info` operations. The conformance suite's linearizability check treats such an
/// operation as one that may have taken effect at any point after its call, or never.
#[derive(Debug)]
pub struct StorageError {
    message: String,
    indeterminate: bool,
    source: Option<Box<dyn StdError + Send + Sync + 'static>>,
}

impl InvalidArgument {
    /// The error's name, as SPEC.md's table of errors, failure messages and the driver protocol
    /// spell it: `EmptyKey`, `TenantMismatch`, ….
    pub const fn name(self) -> &'static str {
        use InvalidArgument::*;
        match self {
            EmptyKey => "EmptyKey",
            KeyTooLong { .. } => "KeyTooLong",
            EmptyHoldId => "EmptyHoldId",
            HoldIdTooLong { .. } => "HoldIdTooLong",
            EmptyNamespace => "EmptyNamespace",
            NamespaceTooLong { .. } => "NamespaceTooLong",
            EmptyAggregateType => "EmptyAggregateType",
            AggregateTypeTooLong { .. } => "AggregateTypeTooLong",
            EmptyTenantId => "EmptyTenantId",
            TenantIdTooLong { .. } => "TenantIdTooLong",
            EmptyAggregateId => "EmptyAggregateId",
            AggregateIdTooLong { .. } => "AggregateIdTooLong",
            TtlZero => "TtlZero",
            ZeroStreamVersion => "ZeroStreamVersion",
            OwnerTypeMismatch => "OwnerTypeMismatch",
            TenantMismatch => "TenantMismatch",
        }
    }
}

impl StorageError {
    /// A storage failure described by `message`; the operation did not take effect.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into(), indeterminate: false, source: None }
    }

    /// A storage failure described by `message`, caused by `source`; the operation did not take
    /// effect.
    pub fn with_source(message: impl Into<String>, source: impl StdError + Send + Sync + 'static) -> Self {
        Self { message: message.into(), indeterminate: false, source: Some(Box::new(source)) }
    }

    /// A storage failure after which the operation may or may not have taken effect.
    pub fn indeterminate(message: impl Into<String>) -> Self {
        Self { message: message.into(), indeterminate: true, source: None }
    }

    /// This error, marked indeterminate (`true`) or determinate (`false`).
    #[must_use]
    pub fn with_indeterminate(mut self, indeterminate: bool) -> Self {
        self.indeterminate = indeterminate;
        self
    }

    /// Whether the operation may have taken effect despite the error.
    pub fn is_indeterminate(&self) -> bool {
        self.indeterminate
    }

    /// What failed.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Only this error's own level: `indeterminate` when it is, and its message. Its cause, if any,
/// is [`StdError::source`]'s, so that a chain printed cause by cause ([`error_chain`]) shows each
/// once.
impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.indeterminate {
            f.write_str("indeterminate (the operation may have taken effect): ")?;
        }
        f.write_str(&self.message)
    }
}

impl StdError for StorageError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn StdError + 'static))
    }
}

/// What a store operation can fail with.
///
/// It adds no level of its own to an error chain: it shows as the error it holds, and its
/// [`StdError::source`] is that error's.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// An invalid argument (rule D6): nothing was read or changed.
    #[error(transparent)]
    Invalid(#[from] InvalidArgument),
    /// The storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl StoreError {
    /// The invalid argument, if that is what this is.
    pub fn invalid(&self) -> Option<InvalidArgument> {
        match self {
            StoreError::Invalid(e) => Some(*e),
            StoreError::Storage(_) => None,
        }
    }

    /// Whether the operation may have taken effect despite this error: only an indeterminate
    /// [`StorageError`]; an invalid argument never changes anything.
    pub fn is_indeterminate(&self) -> bool {
        matches!(self, StoreError::Storage(e) if e.is_indeterminate())
    }
}

/// The result of a store operation.
pub type StoreResult<T> = Result<T, StoreError>;

/// `error` and each of its causes (its [`StdError::source`] chain), joined with `": "`: how to show
/// an error in full, each cause once.
///
/// ```
/// use reservation_store::{StorageError, StoreError, error_chain};
///
/// let cause = std::io::Error::other("connection reset");
/// let error = StoreError::from(StorageError::with_source("PostgreSQL: the reservation row", cause));
/// assert_eq!(error.to_string(), "PostgreSQL: the reservation row");
/// assert_eq!(error_chain(&error), "PostgreSQL: the reservation row: connection reset");
/// ```
pub fn error_chain(error: &(dyn StdError + '_)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}
