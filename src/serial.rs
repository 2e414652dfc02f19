//! Feature `serde`: the value types written and read by serde, in the forms the driver protocol
//! gives them (PROTOCOL.md, "Values"). Reading a value validates it as its constructor does, and
//! an invalid one is the format's error, naming the rule it breaks.
//!
//! The types whose form is plain are derived beside them ([`crate::Instant`] and
//! [`crate::Version`] as numbers, the outcomes and operation kinds by name, the scope, the owner
//! and [`crate::Operation`] as objects); the ones a reading must validate, or whose form is not
//! serde's default, are written here.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::error::InvalidArgument;
use crate::holds::HoldSet;
use crate::reservation::Pending;
use crate::time::{Instant, ReleaseVersion, Ttl, Version};
use crate::types::{
    AggregateId, AggregateType, HoldId, Key, MAX_HOLD_ID_LEN, MAX_KEY_LEN, MAX_NAME_LEN, Namespace, Tenant, TenantId,
};

/// What a release's version reads as besides a number: [`ReleaseVersion::Any`].
const ANY: &str = "ANY";

/// Reads a string into `T` through its validating constructor: what `T` is, and its longest.
struct Name<T>(PhantomData<T>, &'static str, usize);

impl<T: for<'a> TryFrom<&'a str, Error = InvalidArgument>> Visitor<'_> for Name<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: a string of 1 to {} bytes", self.1, self.2)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<T, E> {
        T::try_from(value).map_err(E::custom)
    }
}

macro_rules! serde_name {
    ($($name:ident: $what:literal, $max:expr),* $(,)?) => {$(
        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                deserializer.deserialize_str(Name(PhantomData, $what, $max))
            }
        }
    )*};
}

serde_name!(
    Key: "a key", MAX_KEY_LEN,
    HoldId: "a hold id", MAX_HOLD_ID_LEN,
    AggregateType: "an aggregate type", MAX_NAME_LEN,
    TenantId: "a tenant id", MAX_NAME_LEN,
    Namespace: "a namespace", MAX_NAME_LEN,
    AggregateId: "an aggregate id", MAX_NAME_LEN,
);

impl Serialize for Tenant {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Tenant::System => serializer.serialize_none(),
            Tenant::Id(id) => serializer.serialize_some(id),
        }
    }
}

impl<'de> Deserialize<'de> for Tenant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Option::<TenantId>::deserialize(deserializer)?.map_or(Tenant::System, Tenant::Id))
    }
}

/// The tenant of a scope or an owner, which must be written: serde reads a missing field as an
/// absent option (here the system tenant) unless the field is read through a function of its own,
/// as this one. A record that lost its tenant must not widen to every tenant of the type.
pub(crate) fn required_tenant<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Tenant, D::Error> {
    Tenant::deserialize(deserializer)
}

impl Serialize for Ttl {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.as_millis())
    }
}

impl<'de> Deserialize<'de> for Ttl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ttl::from_millis(u64::deserialize(deserializer)?).map_err(de::Error::custom)
    }
}

impl Serialize for ReleaseVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ReleaseVersion::At(version) => serializer.serialize_u64(version.as_u64()),
            ReleaseVersion::Any => serializer.serialize_str(ANY),
        }
    }
}

/// Reads a release's version: a number, or `"ANY"`.
struct ReleaseVersionVisitor;

impl Visitor<'_> for ReleaseVersionVisitor {
    type Value = ReleaseVersion;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a version (an integer from 0 to 2^64-1) or \"ANY\"")
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<ReleaseVersion, E> {
        Ok(ReleaseVersion::At(Version::from_u64(value)))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<ReleaseVersion, E> {
        match u64::try_from(value) {
            Ok(value) => self.visit_u64(value),
            Err(_) => Err(E::invalid_value(Unexpected::Signed(value), &self)),
        }
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<ReleaseVersion, E> {
        if value == ANY { Ok(ReleaseVersion::Any) } else { Err(E::invalid_value(Unexpected::Str(value), &self)) }
    }
}

impl<'de> Deserialize<'de> for ReleaseVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ReleaseVersionVisitor)
    }
}

/// A pending reservation's fields as written, before [`Pending::new`] checks that it has a hold.
#[derive(Deserialize)]
struct PendingFields<O, HS> {
    owner: O,
    holds: HS,
    expires_at: Instant,
}

impl<'de, O: Deserialize<'de>, HS: HoldSet + Deserialize<'de>> Deserialize<'de> for Pending<O, HS> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let PendingFields { owner, holds, expires_at } = PendingFields::deserialize(deserializer)?;
        Pending::new(owner, holds, expires_at)
            .ok_or_else(|| de::Error::custom("a pending reservation has at least one hold (rule A2)"))
    }
}
