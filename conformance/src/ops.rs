//! Operation scripts as plain data: the input of the conformance suite's differential test and
//! of the fuzzer.
//!
//! An [`Op`] names owners, keys and holds by small indices, and versions and clock moves
//! relative to what the specification holds for the key, so that generated scripts spend their
//! time where bugs live: few keys, versions at and around the stored one, the clock at and around
//! each expiry. A runner resolves indices with [`index`] and relative values with
//! [`VersionPick::resolve`] and [`ClockMove::resolve`]. With this crate's `arbitrary` feature
//! every type here derives `arbitrary::Arbitrary`.

use std::fmt;

use reservation_store::{Instant, ReleaseVersion, Version};

/// Maps an arbitrary index onto `0..len` (`len` 0 gives 0): any byte is a valid index.
pub fn index(raw: u8, len: usize) -> usize {
    if len == 0 { 0 } else { usize::from(raw) % len }
}

/// A version, relative to the version confirmed for the key (1 when none is).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum VersionPick {
    /// [`Version::UNVERSIONED`].
    Unversioned,
    /// One below the stored version (UNVERSIONED below 1).
    Below,
    /// The stored version.
    At,
    /// One above the stored version.
    Above,
    /// A fixed stream version, 1 + the value mod 8.
    Fixed(u8),
}

impl VersionPick {
    /// The version this picks when `stored` is the key's confirmed version, if any.
    pub fn resolve(self, stored: Option<Version>) -> Version {
        let at = stored.map_or(1, Version::as_u64);
        Version::from_u64(match self {
            VersionPick::Unversioned => 0,
            VersionPick::Below => at.saturating_sub(1),
            VersionPick::At => at,
            VersionPick::Above => at.saturating_add(1),
            VersionPick::Fixed(n) => 1 + u64::from(n % 8),
        })
    }
}

/// A release's version: [`ReleaseVersion::Any`] or a [`VersionPick`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum ReleasePick {
    /// ANY_VERSION.
    Any,
    /// A version relative to the stored one.
    At(VersionPick),
}

impl ReleasePick {
    /// The release version this picks when `stored` is the key's confirmed version, if any.
    pub fn resolve(self, stored: Option<Version>) -> ReleaseVersion {
        match self {
            ReleasePick::Any => ReleaseVersion::Any,
            ReleasePick::At(v) => ReleaseVersion::At(v.resolve(stored)),
        }
    }
}

/// A move of the store's clock, never backwards.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum ClockMove {
    /// To one millisecond before the expiry of the pending reservation of key `key`.
    JustBeforeExpiry {
        /// The key's index.
        key: u8,
    },
    /// To the exact expiry of key `key`'s pending reservation: the first instant it is expired.
    AtExpiry {
        /// The key's index.
        key: u8,
    },
    /// To one millisecond after the expiry of key `key`'s pending reservation.
    JustAfterExpiry {
        /// The key's index.
        key: u8,
    },
    /// Forward by this many milliseconds.
    By(u8),
}

impl ClockMove {
    /// The instant to move to from `now`, given the expiry of the named key's pending
    /// reservation if it has one; never before `now`.
    pub fn resolve(self, now: Instant, expires_at: Option<Instant>) -> Instant {
        let target = match (self, expires_at) {
            (ClockMove::By(ms), _) => now.saturating_add_millis(u64::from(ms)),
            (_, None) => now,
            (ClockMove::JustBeforeExpiry { .. }, Some(e)) => e.saturating_sub_millis(1),
            (ClockMove::AtExpiry { .. }, Some(e)) => e,
            (ClockMove::JustAfterExpiry { .. }, Some(e)) => e.saturating_add_millis(1),
        };
        target.max(now)
    }

    /// The key index this move looks at, if any.
    pub fn key(self) -> Option<u8> {
        match self {
            ClockMove::JustBeforeExpiry { key } | ClockMove::AtExpiry { key } | ClockMove::JustAfterExpiry { key } => {
                Some(key)
            }
            ClockMove::By(_) => None,
        }
    }
}

/// One step of a script. Owners, keys and holds are indices into the runner's small domains.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Op {
    /// Reserve `key` for `owner`'s attempt `hold`, pending for `ttl` milliseconds (0 is an
    /// invalid argument, rule D2).
    Reserve {
        /// Owner index.
        owner: u8,
        /// Key index.
        key: u8,
        /// Hold index.
        hold: u8,
        /// Time to live in milliseconds.
        ttl: u8,
    },
    /// Confirm `owner`'s reservation of `key`.
    Confirm {
        /// Owner index.
        owner: u8,
        /// Key index.
        key: u8,
        /// The fact's version.
        version: VersionPick,
    },
    /// Release `owner`'s reservation of `key`.
    Release {
        /// Owner index.
        owner: u8,
        /// Key index.
        key: u8,
        /// The version of the fact that gave the key up.
        version: ReleasePick,
    },
    /// Abandon `owner`'s attempt `hold` on `key`.
    Abandon {
        /// Owner index.
        owner: u8,
        /// Key index.
        key: u8,
        /// Hold index.
        hold: u8,
    },
    /// Look `key` up.
    Lookup {
        /// Key index.
        key: u8,
    },
    /// Move the store's clock.
    Clock(ClockMove),
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Op::Reserve { owner, key, hold, ttl } => {
                write!(f, "reserve(key {key}, owner {owner}, hold {hold}, ttl {ttl}ms)")
            }
            Op::Confirm { owner, key, version } => write!(f, "confirm(key {key}, owner {owner}, {version:?})"),
            Op::Release { owner, key, version } => write!(f, "release(key {key}, owner {owner}, {version:?})"),
            Op::Abandon { owner, key, hold } => write!(f, "abandon(key {key}, owner {owner}, hold {hold})"),
            Op::Lookup { key } => write!(f, "lookup(key {key})"),
            Op::Clock(m) => write!(f, "clock {m:?}"),
        }
    }
}
