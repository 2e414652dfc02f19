//! The state the rules decide on: the reservation of one (scope, key), pending or confirmed.

use crate::holds::HoldSet;
use crate::time::{Instant, Version};

/// A pending reservation: its owner, its holds (never empty) and when it expires.
///
/// With feature `serde`, written as `{"owner": …, "holds": […], "expires_at": 1005000}`; reading
/// one with no hold is the format's error, as [`Pending::new`] refuses it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Pending<O, HS> {
    pub(crate) owner: O,
    pub(crate) holds: HS,
    pub(crate) expires_at: Instant,
}

impl<O, HS: HoldSet> Pending<O, HS> {
    /// A pending reservation, or `None` if `holds` is empty: a pending reservation always has a
    /// hold (the last abandon frees the key instead, rule A2).
    pub fn new(owner: O, holds: HS, expires_at: Instant) -> Option<Self> {
        if holds.is_empty() { None } else { Some(Pending { owner, holds, expires_at }) }
    }

    /// The owner.
    pub fn owner(&self) -> &O {
        &self.owner
    }

    /// The attempts holding it.
    pub fn holds(&self) -> &HS {
        &self.holds
    }

    /// The first instant at which it is expired (rule D1).
    pub fn expires_at(&self) -> Instant {
        self.expires_at
    }

    /// Whether it is live at `now`: `now < expires_at` (rule D1).
    pub fn is_live(&self, now: Instant) -> bool {
        now < self.expires_at
    }

    /// The owner and holds, taken apart.
    pub fn into_parts(self) -> (O, HS, Instant) {
        (self.owner, self.holds, self.expires_at)
    }
}

/// A confirmed reservation: its owner and the version of the fact that last confirmed it.
///
/// With feature `serde`, written as `{"owner": …, "version": 3}`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Confirmed<O> {
    /// The owner.
    pub owner: O,
    /// The version of the owner's fact that last confirmed it.
    pub version: Version,
}

/// The reservation of one (scope, key); a free key has none.
///
/// With feature `serde`, written as the driver protocol answers a lookup (rule D11): its state
/// under `"state"` beside the state's fields, `{"state": "pending", "owner": …, "holds": […],
/// "expires_at": 1005000}` or `{"state": "confirmed", "owner": …, "version": 3}`. Reading one
/// takes a format that says what it holds (JSON, CBOR, MessagePack, YAML, TOML), not one that
/// must be told (bincode, postcard).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(
        tag = "state",
        rename_all = "lowercase",
        bound(deserialize = "O: serde::Deserialize<'de>, HS: HoldSet + serde::Deserialize<'de>")
    )
)]
pub enum Reservation<O, HS> {
    /// Reserved for a short time by one or more attempts of its owner.
    Pending(Pending<O, HS>),
    /// Held for good, until its owner releases it.
    Confirmed(Confirmed<O>),
}

impl<O, HS: HoldSet> Reservation<O, HS> {
    /// A pending reservation, or `None` if `holds` is empty.
    pub fn pending(owner: O, holds: HS, expires_at: Instant) -> Option<Self> {
        Pending::new(owner, holds, expires_at).map(Reservation::Pending)
    }

    /// A confirmed reservation.
    pub fn confirmed(owner: O, version: Version) -> Self {
        Reservation::Confirmed(Confirmed { owner, version })
    }

    /// The owner.
    pub fn owner(&self) -> &O {
        match self {
            Reservation::Pending(p) => &p.owner,
            Reservation::Confirmed(c) => &c.owner,
        }
    }

    /// Whether it holds the key at `now`: confirmed, or pending and live (rule D7).
    pub fn is_live(&self, now: Instant) -> bool {
        match self {
            Reservation::Pending(p) => p.is_live(now),
            Reservation::Confirmed(_) => true,
        }
    }

    /// The pending reservation, if it is one.
    pub fn as_pending(&self) -> Option<&Pending<O, HS>> {
        match self {
            Reservation::Pending(p) => Some(p),
            Reservation::Confirmed(_) => None,
        }
    }

    /// The confirmed reservation, if it is one.
    pub fn as_confirmed(&self) -> Option<&Confirmed<O>> {
        match self {
            Reservation::Pending(_) => None,
            Reservation::Confirmed(c) => Some(c),
        }
    }
}
