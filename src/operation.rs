//! The one operation vocabulary: an [`Operation`] on one (scope, key), its [`Outcome`], and a
//! store [`Request`] that names the (scope, key) it applies to.
//!
//! Every layer speaks it: [`crate::spec::apply`] decides an operation, a store's
//! [`crate::ReservationStore::execute`] runs one, the conformance suite, the model and the driver
//! protocol carry them as data. The typed methods of the trait (`reserve`, `confirm`, …) and the
//! typed outcomes ([`ReserveOutcome`], …) are views of the same values.

use std::fmt;

use crate::error::InvalidArgument;
use crate::time::{ReleaseVersion, Ttl, Version};
use crate::types::{AggregateRef, HoldId, Key, ReservationScope};

/// An operation that may change the reservation of one (scope, key), with every argument but the
/// (scope, key) itself.
///
/// Generic over the owner `O` and the hold id `H`, so that the stores use
/// [`AggregateRef`] and [`HoldId`], the model small integers, and scripts indices.
///
/// With feature `serde`, written as the driver protocol writes a request's operation: an object
/// with the operation's name under `"op"` and its arguments by name, as `{"op": "reserve",
/// "owner": {…}, "hold": "attempt-1", "ttl": 5000}` or `{"op": "release", "owner": {…},
/// "version": "ANY"}`. Reading one takes a format that says what it holds (as for
/// [`ReleaseVersion`]).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(tag = "op", rename_all = "lowercase")
)]
pub enum Operation<O, H> {
    /// Reserve the key for `owner`'s attempt `hold`, pending for `ttl` (rules R1–R7).
    Reserve {
        /// The owner.
        owner: O,
        /// The attempt's hold id.
        hold: H,
        /// How long the pending reservation lives.
        ttl: Ttl,
    },
    /// Confirm `owner`'s reservation for its fact committed at `version` (rules C1–C8).
    Confirm {
        /// The owner.
        owner: O,
        /// The version of the fact that takes the key.
        version: Version,
    },
    /// Release `owner`'s reservation for its fact at `version` that gave the key up (L1–L6).
    Release {
        /// The owner.
        owner: O,
        /// The version of the fact that gives the key up, or `ANY_VERSION`.
        version: ReleaseVersion,
    },
    /// Abandon `owner`'s attempt `hold`, whose events are surely not appended (A1–A6).
    Abandon {
        /// The owner.
        owner: O,
        /// The attempt's hold id.
        hold: H,
    },
}

/// Which of the four operations an [`Operation`] is.
///
/// With feature `serde`, written as its [`OperationKind::name`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "lowercase"))]
pub enum OperationKind {
    /// [`Operation::Reserve`].
    Reserve,
    /// [`Operation::Confirm`].
    Confirm,
    /// [`Operation::Release`].
    Release,
    /// [`Operation::Abandon`].
    Abandon,
}

impl OperationKind {
    /// Every kind.
    pub const ALL: [OperationKind; 4] =
        [OperationKind::Reserve, OperationKind::Confirm, OperationKind::Release, OperationKind::Abandon];

    /// The operation's name in lower case, as the driver protocol and the vectors spell it.
    pub const fn name(self) -> &'static str {
        match self {
            OperationKind::Reserve => "reserve",
            OperationKind::Confirm => "confirm",
            OperationKind::Release => "release",
            OperationKind::Abandon => "abandon",
        }
    }

    /// The kind named `name` (exactly as [`OperationKind::name`] spells it).
    pub fn from_name(name: &str) -> Option<OperationKind> {
        OperationKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The outcomes this kind of operation can report.
    pub const fn outcomes(self) -> &'static [Outcome] {
        use Outcome::*;
        match self {
            OperationKind::Reserve => &[Taken, Joined, AlreadyConfirmed, Conflict],
            OperationKind::Confirm => &[Confirmed, AlreadyConfirmed, Conflict],
            OperationKind::Release => &[Released, Kept, NotHeld],
            OperationKind::Abandon => &[Abandoned, StillReserved, NotHeld, AlreadyConfirmed],
        }
    }
}

impl fmt::Display for OperationKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl<O, H> Operation<O, H> {
    /// The owner the operation acts for.
    pub const fn owner(&self) -> &O {
        match self {
            Operation::Reserve { owner, .. }
            | Operation::Confirm { owner, .. }
            | Operation::Release { owner, .. }
            | Operation::Abandon { owner, .. } => owner,
        }
    }

    /// The attempt's hold id, for reserve and abandon.
    pub const fn hold(&self) -> Option<&H> {
        match self {
            Operation::Reserve { hold, .. } | Operation::Abandon { hold, .. } => Some(hold),
            Operation::Confirm { .. } | Operation::Release { .. } => None,
        }
    }

    /// Which operation this is.
    pub const fn kind(&self) -> OperationKind {
        match self {
            Operation::Reserve { .. } => OperationKind::Reserve,
            Operation::Confirm { .. } => OperationKind::Confirm,
            Operation::Release { .. } => OperationKind::Release,
            Operation::Abandon { .. } => OperationKind::Abandon,
        }
    }

    /// The same operation on borrowed owner and hold.
    pub const fn as_ref(&self) -> Operation<&O, &H> {
        match self {
            Operation::Reserve { owner, hold, ttl } => Operation::Reserve { owner, hold, ttl: *ttl },
            Operation::Confirm { owner, version } => Operation::Confirm { owner, version: *version },
            Operation::Release { owner, version } => Operation::Release { owner, version: *version },
            Operation::Abandon { owner, hold } => Operation::Abandon { owner, hold },
        }
    }

    /// The same operation with its owner and hold mapped: from indices to values, say.
    pub fn map<O2, H2>(self, owner: impl FnOnce(O) -> O2, hold: impl FnOnce(H) -> H2) -> Operation<O2, H2> {
        match self {
            Operation::Reserve { owner: o, hold: h, ttl } => Operation::Reserve { owner: owner(o), hold: hold(h), ttl },
            Operation::Confirm { owner: o, version } => Operation::Confirm { owner: owner(o), version },
            Operation::Release { owner: o, version } => Operation::Release { owner: owner(o), version },
            Operation::Abandon { owner: o, hold: h } => Operation::Abandon { owner: owner(o), hold: hold(h) },
        }
    }
}

impl<O: fmt::Display, H: fmt::Display> fmt::Display for Operation<O, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operation::Reserve { owner, hold, ttl } => {
                write!(f, "reserve({owner}, hold {hold}, ttl {}ms)", ttl.as_millis())
            }
            Operation::Confirm { owner, version } => write!(f, "confirm({owner}, {version})"),
            Operation::Release { owner, version } => write!(f, "release({owner}, {version})"),
            Operation::Abandon { owner, hold } => write!(f, "abandon({owner}, hold {hold})"),
        }
    }
}

/// What an operation reported: the union of [`ReserveOutcome`], [`ConfirmOutcome`],
/// [`ReleaseOutcome`] and [`AbandonOutcome`], named as in the rule tables.
///
/// The typed outcomes convert into it with `From`, and back with `TryFrom` (an outcome of
/// another operation is an [`UnexpectedOutcome`]).
///
/// With feature `serde`, written as its [`Outcome::name`], as are the typed outcomes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Outcome {
    /// reserve: the key was free (or expired) and is now pending for this attempt (R1, R2).
    Taken,
    /// reserve: the owner's live pending reservation now has this hold too (R3, R4).
    Joined,
    /// reserve, confirm, abandon: the owner holds the key confirmed; nothing changed (R6, C7, A6).
    AlreadyConfirmed,
    /// reserve, confirm: another owner holds the key; nothing changed (R5, R7, C5, C8).
    Conflict,
    /// confirm: the key is now confirmed to the owner at the version (C1–C4, C6).
    Confirmed,
    /// release: the owner's reservation is gone; the key is free (L2, L4).
    Released,
    /// release: a later fact of the owner confirmed the key; it stays (L5).
    Kept,
    /// release, abandon: the owner did not hold the key (or not with that hold) (L1, L3, L6,
    /// A1, A4, A5).
    NotHeld,
    /// abandon: that was the last hold; the key is free (A2).
    Abandoned,
    /// abandon: the hold is gone, other holds keep the key reserved (A3).
    StillReserved,
}

impl Outcome {
    /// Every outcome.
    pub const ALL: [Outcome; 10] = {
        use Outcome::*;
        [Taken, Joined, AlreadyConfirmed, Conflict, Confirmed, Released, Kept, NotHeld, Abandoned, StillReserved]
    };

    /// The outcome's name, as the rule tables, the driver protocol and the vectors spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Outcome::Taken => "Taken",
            Outcome::Joined => "Joined",
            Outcome::AlreadyConfirmed => "AlreadyConfirmed",
            Outcome::Conflict => "Conflict",
            Outcome::Confirmed => "Confirmed",
            Outcome::Released => "Released",
            Outcome::Kept => "Kept",
            Outcome::NotHeld => "NotHeld",
            Outcome::Abandoned => "Abandoned",
            Outcome::StillReserved => "StillReserved",
        }
    }

    /// The outcome named `name` (exactly as [`Outcome::name`] spells it).
    pub fn from_name(name: &str) -> Option<Outcome> {
        Outcome::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Whether an operation of `kind` can report this outcome.
    pub fn fits(self, kind: OperationKind) -> bool {
        kind.outcomes().contains(&self)
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a reserve did.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ReserveOutcome {
    /// The key was free (or expired) and is now pending for this attempt (R1, R2).
    Taken,
    /// The owner's live pending reservation now has this hold too (R3, R4).
    Joined,
    /// The owner already holds the key confirmed; nothing changed (R6).
    AlreadyConfirmed,
    /// Another owner holds the key; nothing changed (R5, R7).
    Conflict,
}

/// What a confirm did.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ConfirmOutcome {
    /// The key is now confirmed to the owner at the version (C1–C4, C6).
    Confirmed,
    /// The owner's confirmed version is already this one or later; nothing changed (C7).
    AlreadyConfirmed,
    /// Another owner holds the key; nothing changed (C5, C8).
    Conflict,
}

/// What a release did.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum ReleaseOutcome {
    /// The owner's reservation is gone; the key is free (L2, L4).
    Released,
    /// A later fact of the owner confirmed the key; it stays (L5).
    Kept,
    /// The owner did not hold the key; nothing changed (L1, L3, L6).
    NotHeld,
}

/// What an abandon did.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum AbandonOutcome {
    /// That was the last hold; the key is free (A2).
    Abandoned,
    /// The hold is gone, other holds keep the key reserved (A3).
    StillReserved,
    /// The owner's live pending reservation has no such hold, or it has none at all (A1, A4, A5).
    NotHeld,
    /// The owner holds the key confirmed; a confirmed key is never abandoned (A6).
    AlreadyConfirmed,
}

/// An [`Outcome`] that the operation it was asked of cannot report (a `Released` answer to a
/// reserve, say): a store bug, reported rather than guessed at.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, thiserror::Error)]
#[error("a {kind} cannot report {outcome}")]
pub struct UnexpectedOutcome {
    /// The operation asked.
    pub kind: OperationKind,
    /// What came back.
    pub outcome: Outcome,
}

macro_rules! typed_outcome {
    ($typed:ident, $kind:ident, $($variant:ident),*) => {
        impl From<$typed> for Outcome {
            fn from(o: $typed) -> Outcome {
                match o {
                    $($typed::$variant => Outcome::$variant,)*
                }
            }
        }

        impl TryFrom<Outcome> for $typed {
            type Error = UnexpectedOutcome;
            fn try_from(o: Outcome) -> Result<$typed, UnexpectedOutcome> {
                match o {
                    $(Outcome::$variant => Ok($typed::$variant),)*
                    other => Err(UnexpectedOutcome { kind: OperationKind::$kind, outcome: other }),
                }
            }
        }
    };
}

typed_outcome!(ReserveOutcome, Reserve, Taken, Joined, AlreadyConfirmed, Conflict);
typed_outcome!(ConfirmOutcome, Confirm, Confirmed, AlreadyConfirmed, Conflict);
typed_outcome!(ReleaseOutcome, Release, Released, Kept, NotHeld);
typed_outcome!(AbandonOutcome, Abandon, Abandoned, StillReserved, NotHeld, AlreadyConfirmed);

/// One operation on one (scope, key), as a store executes it: what
/// [`crate::ReservationStore::execute`] takes.
///
/// Its arguments are borrowed and not yet validated: a store calls [`Request::admitted`] once,
/// before it reads the row (rule D6).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Request<'a> {
    /// The scope.
    pub scope: &'a ReservationScope,
    /// The key within the scope.
    pub key: &'a Key,
    /// The operation, on the owner and hold the caller gave.
    pub operation: Operation<&'a AggregateRef, &'a HoldId>,
}

impl<'a> Request<'a> {
    /// `operation` on `key` in `scope`.
    pub const fn new(
        scope: &'a ReservationScope,
        key: &'a Key,
        operation: Operation<&'a AggregateRef, &'a HoldId>,
    ) -> Self {
        Request { scope, key, operation }
    }

    /// Whether the scope admits the operation's owner (rule D6): its aggregate type is the
    /// scope's, and the scope's tenant is the owner's or `SYSTEM_TENANT`. Every other argument is
    /// valid by its type.
    pub fn admitted(&self) -> Result<(), InvalidArgument> {
        self.scope.admits(self.operation.owner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcome_names_round_trip_and_are_distinct() {
        for o in Outcome::ALL {
            assert_eq!(Outcome::from_name(o.name()), Some(o));
            assert_eq!(o.to_string(), o.name());
        }
        assert_eq!(Outcome::from_name("taken"), None);
    }

    #[test]
    fn every_outcome_fits_some_operation_and_typed_views_agree() {
        for o in Outcome::ALL {
            let kinds: Vec<_> = OperationKind::ALL.into_iter().filter(|k| o.fits(*k)).collect();
            assert!(!kinds.is_empty(), "{o}");
            for k in OperationKind::ALL {
                let typed = match k {
                    OperationKind::Reserve => ReserveOutcome::try_from(o).map(Outcome::from),
                    OperationKind::Confirm => ConfirmOutcome::try_from(o).map(Outcome::from),
                    OperationKind::Release => ReleaseOutcome::try_from(o).map(Outcome::from),
                    OperationKind::Abandon => AbandonOutcome::try_from(o).map(Outcome::from),
                };
                match typed {
                    Ok(back) => {
                        assert!(o.fits(k), "{o} {k}");
                        assert_eq!(back, o);
                    }
                    Err(e) => {
                        assert!(!o.fits(k), "{o} {k}");
                        assert_eq!(e, UnexpectedOutcome { kind: k, outcome: o });
                    }
                }
            }
        }
    }
}
