//! Identifiers: scopes, owners, keys and hold ids, each validated when it is built (rule D6).

use std::fmt;

use crate::error::InvalidArgument;

/// Longest key, in bytes (rule D6). A user name or an e-mail address fits with room to spare.
pub const MAX_KEY_LEN: usize = 512;
/// Longest hold id, in bytes (rule D6). Enough for a UUID or a trace id with a prefix.
pub const MAX_HOLD_ID_LEN: usize = 128;
/// Longest aggregate type, tenant id, namespace or aggregate id, in bytes (rule D6).
pub const MAX_NAME_LEN: usize = 256;

fn check(
    value: &str,
    max: usize,
    empty: InvalidArgument,
    long: fn(usize) -> InvalidArgument,
) -> Result<(), InvalidArgument> {
    if value.is_empty() {
        Err(empty)
    } else if value.len() > max {
        Err(long(value.len()))
    } else {
        Ok(())
    }
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $max:expr, $empty:ident, $long:ident) => {
        $(#[$doc])*
        ///
        /// With feature `serde`, written as a string; reading one validates it as [`Self::new`]
        /// does, and an invalid one is the format's error.
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(Box<str>);

        impl $name {
            /// Builds the value, or says why it is invalid: empty, or longer than its documented
            /// maximum in bytes (rule D6). Compared as exact bytes, never normalised (rule D5).
            pub fn new(value: impl AsRef<str>) -> Result<Self, InvalidArgument> {
                let value = value.as_ref();
                check(value, $max, InvalidArgument::$empty, |len| InvalidArgument::$long { len, max: $max })?;
                Ok(Self(value.into()))
            }

            /// The value as it was given.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&*self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl TryFrom<&str> for $name {
            type Error = InvalidArgument;
            fn try_from(value: &str) -> Result<Self, InvalidArgument> {
                Self::new(value)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

name_type!(
    /// A reserved key, such as a user name. At most [`MAX_KEY_LEN`] bytes; canonicalising it
    /// (case, Unicode normal form) is the caller's business (rule D5).
    Key, MAX_KEY_LEN, EmptyKey, KeyTooLong
);
name_type!(
    /// The id of one attempt's hold on a pending reservation. At most [`MAX_HOLD_ID_LEN`] bytes;
    /// unique per attempt (assumption H6).
    HoldId, MAX_HOLD_ID_LEN, EmptyHoldId, HoldIdTooLong
);
name_type!(
    /// The name of an aggregate type, the unit of placement. At most [`MAX_NAME_LEN`] bytes.
    AggregateType, MAX_NAME_LEN, EmptyAggregateType, AggregateTypeTooLong
);
name_type!(
    /// A tenant's id. At most [`MAX_NAME_LEN`] bytes.
    TenantId, MAX_NAME_LEN, EmptyTenantId, TenantIdTooLong
);
name_type!(
    /// A namespace of keys within an aggregate type and tenant. At most [`MAX_NAME_LEN`] bytes.
    Namespace, MAX_NAME_LEN, EmptyNamespace, NamespaceTooLong
);
name_type!(
    /// The id of one aggregate instance. At most [`MAX_NAME_LEN`] bytes.
    AggregateId, MAX_NAME_LEN, EmptyAggregateId, AggregateIdTooLong
);

/// A tenant: one tenant's id, or [`SYSTEM_TENANT`] for keys unique across all of a type's tenants.
///
/// With feature `serde`, written as an option of its id: in JSON the id's string, or `null` for
/// [`SYSTEM_TENANT`]. The tenant of a [`ReservationScope`] or an [`AggregateRef`] must be written;
/// a `Tenant` field of a type of yours that is missing reads, as a missing option does, as
/// [`SYSTEM_TENANT`] (`#[serde(deserialize_with = "Tenant::deserialize")]` makes it required).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum Tenant {
    /// The system tenant: a scope with it spans every tenant of the aggregate type.
    System,
    /// One tenant.
    Id(TenantId),
}

/// The system tenant, for keys unique across all tenants of an aggregate type.
pub const SYSTEM_TENANT: Tenant = Tenant::System;

impl Tenant {
    /// A tenant by id, validated (rule D6).
    pub fn id(value: impl AsRef<str>) -> Result<Self, InvalidArgument> {
        TenantId::new(value).map(Tenant::Id)
    }

    /// The tenant as one column of bytes, as the SQL stores keep it: the id's UTF-8 bytes, or no
    /// bytes for [`SYSTEM_TENANT`] (which no id can be: ids are not empty).
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Tenant::System => b"",
            Tenant::Id(id) => id.as_str().as_bytes(),
        }
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tenant::System => f.write_str("SYSTEM_TENANT"),
            Tenant::Id(id) => fmt::Display::fmt(id, f),
        }
    }
}

/// Where a key is unique: one aggregate type, one tenant (or [`SYSTEM_TENANT`]) and one namespace.
///
/// With feature `serde`, written as `{"aggregate_type": "user", "tenant": "acme", "namespace":
/// "user-name"}` (`"tenant": null` for [`SYSTEM_TENANT`]; every field required).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ReservationScope {
    /// The aggregate type whose instances hold the keys; two types never conflict.
    pub aggregate_type: AggregateType,
    /// The tenant, or [`SYSTEM_TENANT`] for keys unique across the type's tenants.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "crate::serial::required_tenant"))]
    pub tenant: Tenant,
    /// The namespace within the type and tenant, such as `user-name`.
    pub namespace: Namespace,
}

impl ReservationScope {
    /// A scope from its parts.
    pub fn new(aggregate_type: AggregateType, tenant: Tenant, namespace: Namespace) -> Self {
        Self { aggregate_type, tenant, namespace }
    }

    /// A scope from strings, each validated (rule D6).
    pub fn parse(aggregate_type: &str, tenant: Option<&str>, namespace: &str) -> Result<Self, InvalidArgument> {
        Ok(Self {
            aggregate_type: AggregateType::new(aggregate_type)?,
            tenant: match tenant {
                None => Tenant::System,
                Some(t) => Tenant::id(t)?,
            },
            namespace: Namespace::new(namespace)?,
        })
    }

    /// Checks that `owner` may hold keys in this scope (rule D6): its aggregate type is the
    /// scope's, and the scope's tenant is the owner's or [`SYSTEM_TENANT`].
    pub fn admits(&self, owner: &AggregateRef) -> Result<(), InvalidArgument> {
        if owner.aggregate_type != self.aggregate_type {
            return Err(InvalidArgument::OwnerTypeMismatch);
        }
        match &self.tenant {
            Tenant::System => Ok(()),
            t if *t == owner.tenant => Ok(()),
            _ => Err(InvalidArgument::TenantMismatch),
        }
    }
}

impl fmt::Display for ReservationScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.aggregate_type, self.tenant, self.namespace)
    }
}

/// An owner: one aggregate instance, compared on every field exactly (rule D5).
///
/// With feature `serde`, written as `{"aggregate_type": "user", "tenant": "acme", "id":
/// "alice-id"}` (`"tenant": null` for [`SYSTEM_TENANT`]; every field required).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct AggregateRef {
    /// The aggregate's type; it must be the scope's.
    pub aggregate_type: AggregateType,
    /// The aggregate's tenant.
    #[cfg_attr(feature = "serde", serde(deserialize_with = "crate::serial::required_tenant"))]
    pub tenant: Tenant,
    /// The aggregate's id within its type and tenant.
    pub id: AggregateId,
}

impl AggregateRef {
    /// An owner from its parts.
    pub fn new(aggregate_type: AggregateType, tenant: Tenant, id: AggregateId) -> Self {
        Self { aggregate_type, tenant, id }
    }

    /// An owner of `aggregate_type` read back from a stored row: its tenant as
    /// [`Tenant::as_bytes`] wrote it and its id's bytes. `Err` names the column that is not
    /// UTF-8 or not a valid value.
    pub fn from_stored(aggregate_type: AggregateType, tenant: &[u8], id: &[u8]) -> Result<Self, String> {
        let text = |bytes, column: &str| std::str::from_utf8(bytes).map_err(|_| format!("{column} is not UTF-8"));
        let tenant = match text(tenant, "owner_tenant")? {
            "" => Tenant::System,
            t => Tenant::id(t).map_err(|e| format!("owner_tenant: {e}"))?,
        };
        let id = AggregateId::new(text(id, "owner_id")?).map_err(|e| format!("owner_id: {e}"))?;
        Ok(Self { aggregate_type, tenant, id })
    }

    /// An owner from strings, each validated (rule D6); `tenant` `None` is [`SYSTEM_TENANT`].
    pub fn parse(aggregate_type: &str, tenant: Option<&str>, id: &str) -> Result<Self, InvalidArgument> {
        Ok(Self {
            aggregate_type: AggregateType::new(aggregate_type)?,
            tenant: match tenant {
                None => Tenant::System,
                Some(t) => Tenant::id(t)?,
            },
            id: AggregateId::new(id)?,
        })
    }
}

impl fmt::Display for AggregateRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.aggregate_type, self.tenant, self.id)
    }
}
