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

use std::collections::BTreeSet;
use std::fmt;

use crate::operation::{Operation, Outcome};
use crate::time::{Instant, ReleaseVersion, Ttl, Version};

/// A rule id of the specification: R1–R7 reserve, C1–C8 confirm, L1–L6 release, A1–A6 abandon,
/// D1–D11 values, S1 scopes, P1 durability. [`Rule::text`] states each in one line.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[expect(
    missing_docs,
    reason = "a rule is documented by its one-line statement, Rule::text, the one place it is written"
)]
pub enum Rule {
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    C1,
    C2,
    C3,
    C4,
    C5,
    C6,
    C7,
    C8,
    L1,
    L2,
    L3,
    L4,
    L5,
    L6,
    A1,
    A2,
    A3,
    A4,
    A5,
    A6,
    D1,
    D2,
    D3,
    D4,
    D5,
    D6,
    D7,
    D8,
    D9,
    D10,
    D11,
    S1,
    P1,
}

impl Rule {
    /// Every rule, in table order.
    pub const ALL: [Rule; 40] = {
        use Rule::*;
        [
            R1, R2, R3, R4, R5, R6, R7, C1, C2, C3, C4, C5, C6, C7, C8, L1, L2, L3, L4, L5, L6, A1, A2, A3, A4, A5, A6,
            D1, D2, D3, D4, D5, D6, D7, D8, D9, D10, D11, S1, P1,
        ]
    };

    /// The rules that a transition reports: one per row of the operation tables.
    pub const TRANSITIONS: [Rule; 27] = {
        let mut out = [Rule::R1; 27];
        let mut i = 0;
        while i < 27 {
            out[i] = Rule::ALL[i];
            i += 1;
        }
        out
    };

    /// The rule's id, such as `"R3"`.
    pub const fn id(self) -> &'static str {
        use Rule::*;
        match self {
            R1 => "R1",
            R2 => "R2",
            R3 => "R3",
            R4 => "R4",
            R5 => "R5",
            R6 => "R6",
            R7 => "R7",
            C1 => "C1",
            C2 => "C2",
            C3 => "C3",
            C4 => "C4",
            C5 => "C5",
            C6 => "C6",
            C7 => "C7",
            C8 => "C8",
            L1 => "L1",
            L2 => "L2",
            L3 => "L3",
            L4 => "L4",
            L5 => "L5",
            L6 => "L6",
            A1 => "A1",
            A2 => "A2",
            A3 => "A3",
            A4 => "A4",
            A5 => "A5",
            A6 => "A6",
            D1 => "D1",
            D2 => "D2",
            D3 => "D3",
            D4 => "D4",
            D5 => "D5",
            D6 => "D6",
            D7 => "D7",
            D8 => "D8",
            D9 => "D9",
            D10 => "D10",
            D11 => "D11",
            S1 => "S1",
            P1 => "P1",
        }
    }

    /// The rule in one line, for failure messages: its row of SPEC.md, the one place the rules
    /// are written (a transition row reads `operation on state: next state, outcome`).
    pub fn text(self) -> &'static str {
        RULE_TEXTS.get(self as usize).map_or("", String::as_str)
    }

    /// This rule's bit in a [`RuleSet`].
    const fn bit(self) -> u64 {
        1 << (self as u8)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// The specification's text (SPEC.md), compiled in: [`Rule::text`] reads each rule's row from it,
/// and the conformance suite runs its worked examples as written.
pub const SPEC_MD: &str = include_str!("../SPEC.md");

/// Each rule's row of SPEC.md, by rule index; empty for a rule the document lacks (a test
/// asserts there is none).
static RULE_TEXTS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
    let mut texts = vec![String::new(); Rule::ALL.len()];
    let mut operation = "";
    for line in SPEC_MD.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            operation = heading.split('(').next().unwrap_or("").trim();
            continue;
        }
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        let Some(rule) = cells.first().and_then(|id| Rule::ALL.into_iter().find(|r| r.id() == *id)) else {
            continue;
        };
        let text = match cells.as_slice() {
            [_, statement] => (*statement).to_owned(),
            [_, state, next, outcome] => format!("{operation} on {state}: {next}, {outcome}"),
            _ => continue,
        };
        if let Some(slot) = texts.get_mut(rule as usize) {
            *slot = text;
        }
    }
    texts
});

/// A set of rules, for measuring which rows of the tables a run reached.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct RuleSet(u64);

impl RuleSet {
    /// No rule.
    pub const EMPTY: RuleSet = RuleSet(0);

    /// Adds `rule`.
    pub fn insert(&mut self, rule: Rule) {
        self.0 |= rule.bit();
    }

    /// Whether `rule` is in the set.
    pub const fn contains(self, rule: Rule) -> bool {
        self.0 & rule.bit() != 0
    }

    /// The rules in either set.
    pub const fn union(self, other: RuleSet) -> RuleSet {
        RuleSet(self.0 | other.0)
    }

    /// How many rules the set holds.
    pub const fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The rules of [`Rule::TRANSITIONS`] that are not in the set.
    pub fn missing_transitions(self) -> Vec<Rule> {
        Rule::TRANSITIONS.into_iter().filter(|r| !self.contains(*r)).collect()
    }

    /// The rules in the set, in table order.
    pub fn iter(self) -> impl Iterator<Item = Rule> {
        Rule::ALL.into_iter().filter(move |r| self.contains(*r))
    }
}

impl FromIterator<Rule> for RuleSet {
    fn from_iter<I: IntoIterator<Item = Rule>>(iter: I) -> Self {
        let mut set = RuleSet::EMPTY;
        for r in iter {
            set.insert(r);
        }
        set
    }
}

/// The holds of a pending reservation: a set of hold ids, never empty while the reservation is
/// pending. Implemented for `BTreeSet` (the stores) and [`BitHolds`] (the model).
pub trait HoldSet: Clone + Eq {
    /// The hold id.
    type Hold: Clone + Eq;
    /// The set holding only `hold`.
    fn single(hold: Self::Hold) -> Self;
    /// Whether `hold` is in the set.
    fn contains(&self, hold: &Self::Hold) -> bool;
    /// Adds `hold`.
    fn insert(&mut self, hold: Self::Hold);
    /// Removes `hold`; whether it was there.
    fn remove(&mut self, hold: &Self::Hold) -> bool;
    /// How many holds the set has.
    fn len(&self) -> usize;
    /// Whether the set is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<H: Ord + Clone> HoldSet for BTreeSet<H> {
    type Hold = H;
    fn single(hold: H) -> Self {
        BTreeSet::from([hold])
    }
    fn contains(&self, hold: &H) -> bool {
        BTreeSet::contains(self, hold)
    }
    fn insert(&mut self, hold: H) {
        BTreeSet::insert(self, hold);
    }
    fn remove(&mut self, hold: &H) -> bool {
        BTreeSet::remove(self, hold)
    }
    fn len(&self) -> usize {
        BTreeSet::len(self)
    }
}

/// A hold id for [`BitHolds`]: a number below 64.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct HoldBit(u8);

impl HoldBit {
    /// Hold number `n`, if it is below 64.
    pub const fn new(n: u8) -> Option<Self> {
        if n < 64 { Some(HoldBit(n)) } else { None }
    }

    /// The hold's number.
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// A hold set of up to 64 small hold ids in one word: cheap to copy and hash, for the model.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct BitHolds(u64);

impl BitHolds {
    /// The set whose bit mask is `bits`: hold `n` for bit `n`.
    pub const fn from_bits(bits: u64) -> Self {
        BitHolds(bits)
    }

    /// The set as a bit mask: bit `n` for hold `n`.
    pub const fn bits(self) -> u64 {
        self.0
    }
}

impl HoldSet for BitHolds {
    type Hold = HoldBit;
    fn single(hold: HoldBit) -> Self {
        BitHolds(1 << hold.0)
    }
    fn contains(&self, hold: &HoldBit) -> bool {
        self.0 & (1 << hold.0) != 0
    }
    fn insert(&mut self, hold: HoldBit) {
        self.0 |= 1 << hold.0;
    }
    fn remove(&mut self, hold: &HoldBit) -> bool {
        let had = self.contains(hold);
        self.0 &= !(1 << hold.0);
        had
    }
    fn len(&self) -> usize {
        self.0.count_ones() as usize
    }
}

/// A pending reservation: its owner, its holds (never empty) and when it expires.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Pending<O, HS> {
    owner: O,
    holds: HS,
    expires_at: Instant,
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
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Confirmed<O> {
    /// The owner.
    pub owner: O,
    /// The version of the owner's fact that last confirmed it.
    pub version: Version,
}

/// The reservation of one (scope, key); a free key has none.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
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

/// What a reserve did.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
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

fn step<O, HS, Out>(next: Option<Reservation<O, HS>>, outcome: Out, rule: Rule) -> Step<O, HS, Out> {
    Step { next, outcome, rule }
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
