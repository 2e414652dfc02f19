//! The executable specification: one pure transition function per operation.
//!
//! Each function takes the current reservation of one (scope, key), or `None` when the key is
//! free, the store's `now`, and the operation's arguments; it returns the next reservation, the
//! outcome, and the [`Rule`] that decided it. No I/O, no clock reads. The functions are generic
//! over the owner type and the hold set ([`HoldSet`]), so the model runs them on small integers
//! and bit sets while the stores run them on [`crate::AggregateRef`] and [`crate::HoldId`].
//!
//! These functions are the only place the semantics live: the stores, the model, the
//! conformance oracle and the fuzz oracle call them. The rules are stated in [`crate::rules`].
//!
//! The decisions come first; after them [`Step`], what each returns. The state they decide on
//! ([`Reservation`], [`Pending`], [`Confirmed`]) and the hold sets ([`HoldSet`], and [`BitHolds`]
//! for the model) are defined beside this module and named through it.

pub use crate::holds::{BitHolds, HoldBit, HoldSet};
use crate::operation::{AbandonOutcome, ConfirmOutcome, Operation, Outcome, ReleaseOutcome, ReserveOutcome};
pub use crate::reservation::{Confirmed, Pending, Reservation};
use crate::rules::Rule;
use crate::time::{Instant, ReleaseVersion, Ttl, Version};

/// Decides `operation` on the reservation `current` at `now`: the one dispatcher from an
/// [`Operation`] to [`reserve`], [`confirm`], [`release`] or [`abandon`].
///
/// Stores, the conformance suite, the model and the driver all decide operations through it.
pub fn apply<O, HS>(
    current: Option<Reservation<O, HS>>,
    now: Instant,
    operation: Operation<&O, &HS::Hold>,
) -> Step<O, HS, Outcome>
where
    O: Eq + Clone,
    HS: HoldSet,
{
    match operation {
        Operation::Reserve { owner, hold, ttl } => reserve(current, now, owner, hold, ttl).map_outcome(Outcome::from),
        Operation::Confirm { owner, version } => confirm(current, now, owner, version).map_outcome(Outcome::from),
        Operation::Release { owner, version } => release(current, now, owner, version).map_outcome(Outcome::from),
        Operation::Abandon { owner, hold } => abandon(current, now, owner, hold).map_outcome(Outcome::from),
    }
}

/// Reserve the key for `owner`'s attempt `hold`, pending for `ttl`, at `now`: rules R1–R7 of
/// SPEC.md's reserve table decide it ([`Rule::text`] reads each row from there).
pub fn reserve<O, HS>(
    current: Option<Reservation<O, HS>>,
    now: Instant,
    owner: &O,
    hold: &HS::Hold,
    ttl: Ttl,
) -> Step<O, HS, ReserveOutcome>
where
    O: Eq + Clone,
    HS: HoldSet,
{
    let expires_at = now.saturating_add(ttl);
    let taken = |rule| {
        let fresh = Pending { owner: owner.clone(), holds: HS::single(hold.clone()), expires_at };
        step(Some(Reservation::Pending(fresh)), ReserveOutcome::Taken, rule)
    };
    match current {
        None => taken(Rule::R1),
        Some(Reservation::Pending(p)) if !p.is_live(now) => taken(Rule::R2),
        Some(Reservation::Pending(mut p)) if p.owner == *owner => {
            let rule = if p.holds.contains(hold) {
                Rule::R4
            } else {
                p.holds.insert(hold.clone());
                Rule::R3
            };
            p.expires_at = p.expires_at.max(expires_at);
            step(Some(Reservation::Pending(p)), ReserveOutcome::Joined, rule)
        }
        Some(r @ Reservation::Pending(_)) => step(Some(r), ReserveOutcome::Conflict, Rule::R5),
        Some(Reservation::Confirmed(c)) if c.owner == *owner => {
            step(Some(Reservation::Confirmed(c)), ReserveOutcome::AlreadyConfirmed, Rule::R6)
        }
        Some(r @ Reservation::Confirmed(_)) => step(Some(r), ReserveOutcome::Conflict, Rule::R7),
    }
}

/// Confirm `owner`'s reservation for its fact committed at `version`, at `now`: rules C1–C8 of
/// SPEC.md's confirm table ([`Rule::text`]).
pub fn confirm<O, HS>(
    current: Option<Reservation<O, HS>>,
    now: Instant,
    owner: &O,
    version: Version,
) -> Step<O, HS, ConfirmOutcome>
where
    O: Eq + Clone,
    HS: HoldSet,
{
    // The next owner is `owner`; where the reservation is already the owner's, its own owner
    // value (equal, D5) is moved over rather than `owner` cloned.
    let confirmed =
        |owner: O, rule| step(Some(Reservation::confirmed(owner, version)), ConfirmOutcome::Confirmed, rule);
    match current {
        None => confirmed(owner.clone(), Rule::C1),
        Some(Reservation::Pending(p)) if p.owner == *owner => {
            let rule = if p.is_live(now) { Rule::C2 } else { Rule::C3 };
            confirmed(p.owner, rule)
        }
        Some(Reservation::Pending(p)) if !p.is_live(now) => confirmed(owner.clone(), Rule::C4),
        Some(r @ Reservation::Pending(_)) => step(Some(r), ConfirmOutcome::Conflict, Rule::C5),
        Some(Reservation::Confirmed(c)) if c.owner == *owner && version > c.version => confirmed(c.owner, Rule::C6),
        Some(Reservation::Confirmed(c)) if c.owner == *owner => {
            step(Some(Reservation::Confirmed(c)), ConfirmOutcome::AlreadyConfirmed, Rule::C7)
        }
        Some(r @ Reservation::Confirmed(_)) => step(Some(r), ConfirmOutcome::Conflict, Rule::C8),
    }
}

/// Release `owner`'s reservation for its fact at `version` that gave the key up, at `now`:
/// rules L1–L6 of SPEC.md's release table ([`Rule::text`]).
pub fn release<O, HS>(
    current: Option<Reservation<O, HS>>,
    now: Instant,
    owner: &O,
    version: ReleaseVersion,
) -> Step<O, HS, ReleaseOutcome>
where
    O: Eq,
    HS: HoldSet,
{
    match current {
        None => step(None, ReleaseOutcome::NotHeld, Rule::L1),
        Some(Reservation::Pending(p)) if !p.is_live(now) => step(None, ReleaseOutcome::NotHeld, Rule::L1),
        Some(Reservation::Pending(p)) if p.owner == *owner => step(None, ReleaseOutcome::Released, Rule::L2),
        Some(r @ Reservation::Pending(_)) => step(Some(r), ReleaseOutcome::NotHeld, Rule::L3),
        Some(Reservation::Confirmed(c)) if c.owner == *owner => match version {
            ReleaseVersion::At(v) if v < c.version => {
                step(Some(Reservation::Confirmed(c)), ReleaseOutcome::Kept, Rule::L5)
            }
            _ => step(None, ReleaseOutcome::Released, Rule::L4),
        },
        Some(r @ Reservation::Confirmed(_)) => step(Some(r), ReleaseOutcome::NotHeld, Rule::L6),
    }
}

/// Abandon `owner`'s attempt `hold`, whose events are surely not appended, at `now`: rules
/// A1–A6 of SPEC.md's abandon table ([`Rule::text`]).
pub fn abandon<O, HS>(
    current: Option<Reservation<O, HS>>,
    now: Instant,
    owner: &O,
    hold: &HS::Hold,
) -> Step<O, HS, AbandonOutcome>
where
    O: Eq,
    HS: HoldSet,
{
    match current {
        None => step(None, AbandonOutcome::NotHeld, Rule::A1),
        Some(Reservation::Pending(p)) if !p.is_live(now) => step(None, AbandonOutcome::NotHeld, Rule::A1),
        Some(Reservation::Pending(mut p)) if p.owner == *owner => {
            if !p.holds.contains(hold) {
                step(Some(Reservation::Pending(p)), AbandonOutcome::NotHeld, Rule::A4)
            } else if p.holds.len() == 1 {
                step(None, AbandonOutcome::Abandoned, Rule::A2)
            } else {
                p.holds.remove(hold);
                step(Some(Reservation::Pending(p)), AbandonOutcome::StillReserved, Rule::A3)
            }
        }
        Some(Reservation::Confirmed(c)) if c.owner == *owner => {
            step(Some(Reservation::Confirmed(c)), AbandonOutcome::AlreadyConfirmed, Rule::A6)
        }
        Some(r) => step(Some(r), AbandonOutcome::NotHeld, Rule::A5),
    }
}

/// What a lookup at `now` sees: nothing for a free key or an expired pending reservation (D7),
/// otherwise the reservation (a live pending one with its owner, holds and expiry, or a
/// confirmed one with its owner and version).
pub fn lookup<O, HS: HoldSet>(current: Option<&Reservation<O, HS>>, now: Instant) -> Option<&Reservation<O, HS>> {
    current.filter(|r| r.is_live(now))
}

/// One transition: the next reservation (`None`: the key is free), the outcome, and the rule.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Step<O, HS, Out> {
    /// The reservation after the operation; `None` when the key is free.
    pub next: Option<Reservation<O, HS>>,
    /// What the operation reports.
    pub outcome: Out,
    /// The row of the rule table that decided it.
    pub rule: Rule,
}

impl<O, HS, Out> Step<O, HS, Out> {
    /// The same step with its outcome converted: a typed outcome into [`Outcome`], say.
    pub fn map_outcome<Out2>(self, f: impl FnOnce(Out) -> Out2) -> Step<O, HS, Out2> {
        Step { next: self.next, outcome: f(self.outcome), rule: self.rule }
    }
}

fn step<O, HS, Out>(next: Option<Reservation<O, HS>>, outcome: Out, rule: Rule) -> Step<O, HS, Out> {
    Step { next, outcome, rule }
}
