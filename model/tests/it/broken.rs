//! The model's store transition with a bug planted in it on purpose, one bug a function: each is
//! the specification's `apply` called on a deliberately wrong operation or clock, and each is
//! handed to `ReservationModel::with_transition` to show that the property it breaks has a
//! counterexample (`model.rs`). Every other operation goes to the specification unchanged.

use reservation_store::spec::{self, BitHolds, HoldBit, Reservation, Step};
use reservation_store::{Instant, Operation, Outcome, ReleaseVersion, Version};

/// A key's reservation before the operation; `None` when it is free.
type Current = Option<Reservation<u8, BitHolds>>;
/// A store operation of the model: owners and holds by number.
type Op = Operation<u8, HoldBit>;
/// What the operation did.
type Next = Step<u8, BitHolds, Outcome>;

/// Reserve joins whoever's live pending reservation it finds, as if the owner were the same.
pub fn reserve_ignores_owner(current: Current, now: Instant, op: Op) -> Next {
    let op = match (op, &current) {
        (Operation::Reserve { hold, ttl, .. }, Some(r)) if r.is_live(now) => {
            Operation::Reserve { owner: *r.owner(), hold, ttl }
        }
        _ => op,
    };
    spec::apply(current, now, op.as_ref())
}

/// Reserve treats an expired pending reservation as live.
pub fn reserve_ignores_expiry(current: Current, now: Instant, op: Op) -> Next {
    let at = match (op, &current) {
        (Operation::Reserve { .. }, Some(Reservation::Pending(p))) if !p.is_live(now) => {
            p.expires_at().saturating_sub_millis(1)
        }
        _ => now,
    };
    spec::apply(current, at, op.as_ref())
}

/// Confirm treats another owner's live pending reservation as expired.
pub fn confirm_ignores_owner(current: Current, now: Instant, op: Op) -> Next {
    let at = match op {
        Operation::Confirm { .. } => Instant::MAX,
        _ => now,
    };
    spec::apply(current, at, op.as_ref())
}

/// Release frees a confirmed key whatever the version it names.
pub fn release_ignores_version(current: Current, now: Instant, op: Op) -> Next {
    let op = match op {
        Operation::Release { owner, .. } => Operation::Release { owner, version: ReleaseVersion::ANY_VERSION },
        _ => op,
    };
    spec::apply(current, now, op.as_ref())
}

/// Release keeps every confirmed key, as if an older fact's release.
pub fn release_keeps_confirmed(current: Current, now: Instant, op: Op) -> Next {
    let op = match op {
        Operation::Release { owner, .. } => {
            Operation::Release { owner, version: ReleaseVersion::At(Version::UNVERSIONED) }
        }
        _ => op,
    };
    spec::apply(current, now, op.as_ref())
}

/// Abandon of the owner's confirmed key frees it, as a release would.
pub fn abandon_frees_confirmed(current: Current, now: Instant, op: Op) -> Next {
    match (op, &current) {
        (Operation::Abandon { owner, .. }, Some(Reservation::Confirmed(c))) if c.owner == owner => {
            let release = Operation::Release { owner, version: ReleaseVersion::ANY_VERSION };
            Step { outcome: Outcome::Abandoned, ..spec::apply(current, now, release.as_ref()) }
        }
        _ => spec::apply(current, now, op.as_ref()),
    }
}

/// No bug: the specification's transition, substituted all the same. The model cannot tell a
/// substitute is faithful, so it leans on the specification's rules only when it calls them
/// itself.
pub fn faithful(current: Current, now: Instant, op: Op) -> Next {
    spec::apply(current, now, op.as_ref())
}
