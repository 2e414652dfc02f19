//! The protocol as a stateright model: actions, transitions and properties.
//!
//! Every change to the store is one call of a function of `reservation_store::spec`; the model
//! decides only which operations are enabled (the protocol and its timing assumptions) and
//! observes what they did (the step properties).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use reservation_store::rules::{Rule, RuleSet};
use reservation_store::spec::{self, BitHolds, HoldBit, HoldSet, Reservation, Step};
use reservation_store::{Instant, Operation, Outcome, ReleaseVersion, Ttl, Version};
use stateright::{Model, Property, Representative};

use crate::config::{Assumption, MAX_ATTEMPTS, MAX_KEYS, MAX_OWNERS, ModelConfig};
use crate::recent::Recent;
use crate::state::*;
use crate::symmetry::keys_mirror;

/// A step of the model.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Action {
    /// The store's clock ticks.
    Tick,
    /// An attempt starts a decision that takes `key` and reserves it under its hold.
    Reserve {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
        /// The key.
        key: u8,
    },
    /// A reserved attempt reserves again under the same hold (a retry that timed out).
    Retry {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
    },
    /// A reserved attempt appends its fact, having judged its reservation live by its own clock.
    Append {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
    },
    /// An attempt confirms its key with its fact's version.
    Confirm {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
    },
    /// A reserved attempt, whose events are surely not appended, abandons its hold.
    Abandon {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
    },
    /// An attempt crashes.
    Crash {
        /// The owner.
        owner: u8,
        /// The attempt.
        attempt: u8,
    },
    /// The owner appends a fact that gives its key up; the subscription releases it. A deletion
    /// (`delete`) is final and releases with `ANY_VERSION`.
    GiveUp {
        /// The owner.
        owner: u8,
        /// Whether it is a deletion.
        delete: bool,
    },
    /// The subscription applies the owner's next confirm or release.
    Apply {
        /// The owner.
        owner: u8,
    },
    /// The subscription restarts from an earlier fact of the owner.
    Restart {
        /// The owner.
        owner: u8,
        /// The fact's index (its version less one).
        fact: u8,
    },
    /// The subscription delivers an already applied operation again, out of order (H8 dropped).
    Replay {
        /// The owner.
        owner: u8,
        /// The fact's index (its version less one).
        fact: u8,
        /// The operation's index within the fact.
        op: u8,
    },
}

/// A store operation of the protocol: the core crate's [`Operation`], owners and holds by
/// number.
pub type Op = Operation<u8, HoldBit>;

/// What a step's store operations did: the subscription applies a fact's confirm and release in
/// one step; every other step does at most one operation.
pub type Reports = [Option<OpReport>; 2];

/// What one store operation did, for traces.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OpReport {
    /// The key.
    pub key: u8,
    /// The operation.
    pub op: Op,
    /// The outcome.
    pub outcome: Outcome,
    /// The rule that decided it.
    pub rule: Rule,
}

/// The subscription's operation `op` of fact index `fact` of owner `who`: the confirm of the
/// key the fact holds, then the release of the key it gave up (at the fact's version, or
/// `ANY_VERSION`).
pub(crate) fn fact_op(who: u8, owner: &Owner, fact: u8, op: u8, any_for_give_ups: bool) -> Option<(u8, Op)> {
    if fact >= owner.log_len {
        return None;
    }
    let v = fact + 1;
    let cur = owner.held_after(v);
    let prev = owner.held_after(fact);
    let takes = usize::from(cur) < MAX_KEYS;
    let gives_up = usize::from(prev) < MAX_KEYS && prev != cur;
    let any = cur == DELETED || (!takes && any_for_give_ups);
    let release = Operation::Release {
        owner: who,
        version: if any { ReleaseVersion::ANY_VERSION } else { ReleaseVersion::At(version(v)) },
    };
    match (op, takes, gives_up) {
        (0, true, _) => Some((cur, Operation::Confirm { owner: who, version: version(v) })),
        (0, false, true) => Some((prev, release)),
        (1, true, true) => Some((prev, release)),
        _ => None,
    }
}

/// A protocol scenario that the coverage counts, beside the rules.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Scenario {
    /// Another owner takes over a key whose pending reservation's attempts all crashed.
    TakeoverAfterCrash,
    /// A pending reservation has the holds of two attempts of its owner at once.
    HandoverWithTwoHolds,
    /// The release of the key a rename gave up frees it.
    Rename,
    /// An old fact is applied after a later fact of its owner confirmed the key.
    ReplayedOldFact,
}

impl Scenario {
    /// Every scenario.
    pub const ALL: [Scenario; 4] =
        [Scenario::TakeoverAfterCrash, Scenario::HandoverWithTwoHolds, Scenario::Rename, Scenario::ReplayedOldFact];

    /// The scenario in a few words.
    pub const fn text(self) -> &'static str {
        match self {
            Scenario::TakeoverAfterCrash => "a takeover after a crash",
            Scenario::HandoverWithTwoHolds => "a handover with two holds",
            Scenario::Rename => "a rename",
            Scenario::ReplayedOldFact => "a replayed old fact",
        }
    }

    const fn bit(self) -> u64 {
        1 << (32 + self as u32)
    }
}

/// What a run reached: the rules the store operations reported, and the scenarios.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Coverage(u64);

impl Coverage {
    /// The rules reached.
    pub fn rules(self) -> RuleSet {
        Rule::TRANSITIONS.into_iter().filter(|r| self.0 & (1 << (*r as u8)) != 0).collect()
    }

    /// Whether `scenario` was reached.
    pub const fn reached(self, scenario: Scenario) -> bool {
        self.0 & scenario.bit() != 0
    }

    /// The rules of the tables never reached.
    pub fn unreached_rules(self) -> Vec<Rule> {
        self.rules().missing_transitions()
    }

    /// The scenarios never reached.
    pub fn unreached_scenarios(self) -> Vec<Scenario> {
        Scenario::ALL.into_iter().filter(|s| !self.reached(*s)).collect()
    }

    /// Both coverages together.
    pub const fn union(self, other: Coverage) -> Coverage {
        Coverage(self.0 | other.0)
    }

    fn rule(rule: Rule) -> u64 {
        1 << (rule as u8)
    }
}

/// The store transition the model calls: from a key's reservation (`None` when it is free), at
/// the store's clock, an operation's step. The specification's ([`spec::apply`]) by default;
/// tests substitute broken ones ([`ReservationModel::with_transition`]) to show the properties
/// can fail.
pub type Transition =
    fn(Option<Reservation<u8, BitHolds>>, Instant, Operation<u8, HoldBit>) -> Step<u8, BitHolds, Outcome>;

/// Which store transition a model calls: told apart by this tag, never by comparing function
/// pointers.
#[derive(Clone, Copy, Debug)]
enum StoreTransition {
    /// The specification's, [`spec::apply`].
    Specification,
    /// One substituted for it.
    Substitute(Transition),
}

/// Where a search may leave out actions that the protocol enables, decided before they are
/// computed ([`ReservationModel::actions_leaving_out`]): the model itself leaves out none (every
/// method's default), a search reduced as docs/model.md argues ([`Reduced`]) decides each.
pub(crate) trait LeaveOut {
    /// Whether it leaves out the tick in `s`.
    fn tick(&self, _s: &State) -> bool {
        false
    }

    /// The keys (a bit each) whose reserves it leaves out in `s`.
    fn reserves(&self, _s: &State) -> u8 {
        0
    }

    /// Whether it leaves out the actions of owner `o` in `s`.
    fn owner(&self, _s: &State, _o: u8) -> bool {
        false
    }

    /// Whether it leaves out the actions of attempt `a` of owner `o` in `s`.
    fn attempt(&self, _s: &State, _o: u8, _a: u8) -> bool {
        false
    }

    /// Whether it leaves out the crash of reserved attempt `a` of owner `o` in `s`.
    fn crash_reserved(&self, _s: &State, _o: u8, _a: u8) -> bool {
        false
    }

    /// Whether it leaves out the crash of appended attempt `a` of owner `o` in `s`, whose
    /// confirm is enabled when `confirm`.
    fn crash_appended(&self, _s: &State, _o: u8, _a: u8, _confirm: bool) -> bool {
        false
    }

    /// Whether it leaves out every deletion.
    fn deletions(&self) -> bool {
        false
    }
}

/// The reservation protocol's model of one configuration, with the store transition it calls:
/// built by [`ReservationModel::new`] (and [`ReservationModel::with_transition`]), checked by
/// [`crate::check::check_model`]. Its states and actions are its own, and not public.
///
/// Coverage is recorded on every transition the model computes, into a set shared by the
/// model's clones: exact, and far cheaper than a `sometimes` property per rule (each property is
/// looked up by name at every state, and a field naming the last rule would split states).
#[derive(Clone, Debug)]
pub struct ReservationModel {
    /// The configuration.
    pub(crate) config: ModelConfig,
    transition: StoreTransition,
    reached: Arc<AtomicU64>,
    failed: Arc<AtomicU8>,
}

impl ReservationModel {
    /// The model of `config`, whose store transition is the specification's.
    pub fn new(config: ModelConfig) -> Self {
        ReservationModel {
            config,
            transition: StoreTransition::Specification,
            reached: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicU8::new(0)),
        }
    }

    /// This model with `transition` called for every store operation in place of the
    /// specification's: a test substitutes a broken one to show that the properties can fail.
    /// The reductions whose argument uses the specification's rules (eager steps) are then off,
    /// and [`crate::check::check_model`]'s default strategy searches breadth first.
    pub fn with_transition(mut self, transition: Transition) -> Self {
        self.transition = StoreTransition::Substitute(transition);
        self
    }

    /// Whether the model's store transition is the specification's.
    pub(crate) fn transition_is_spec(&self) -> bool {
        matches!(self.transition, StoreTransition::Specification)
    }

    /// The same model (configuration and store transition), with nothing reached and no property
    /// failed yet: each search starts from one, since clones share what was reached.
    pub(crate) fn renewed(&self) -> Self {
        ReservationModel { transition: self.transition, ..ReservationModel::new(self.config) }
    }

    /// The rules and scenarios that the transitions computed so far reached.
    pub(crate) fn coverage(&self) -> Coverage {
        Coverage(self.reached.load(Ordering::Relaxed))
    }

    fn record(&self, bits: u64) {
        if self.reached.load(Ordering::Relaxed) & bits != bits {
            self.reached.fetch_or(bits, Ordering::Relaxed);
        }
    }

    /// The configuration's owners, within the model's limit.
    pub(crate) fn owners(&self) -> u8 {
        self.config.owners.min(MAX_OWNERS as u8)
    }

    /// The configuration's attempts per owner, within the model's limit.
    pub(crate) fn attempts(&self) -> u8 {
        self.config.attempts.min(MAX_ATTEMPTS as u8)
    }

    /// The configuration's keys, within the model's limit.
    pub(crate) fn keys(&self) -> u8 {
        self.config.keys.min(MAX_KEYS as u8)
    }

    fn holds(&self, a: Assumption) -> bool {
        self.config.holds(a)
    }

    /// Whether a give-up that is not a deletion releases with `ANY_VERSION` (H7 dropped).
    pub(crate) fn any_for_give_ups(&self) -> bool {
        !self.holds(Assumption::H7)
    }

    /// The state where nothing has happened.
    pub(crate) fn initial_state(&self) -> State {
        State { keys: self.keys(), owner_count: self.owners(), ..State::default() }
    }

    /// Calls the model's store transition (the specification's, or a test's substitute) for
    /// `op` on `key`, updates the store, records the rule, and flags the step properties it
    /// breaks. `fact` is the version of the fact a subscription operation applies.
    pub(crate) fn store_op(&self, s: &mut State, key: u8, op: Op, fact: Option<u8>) -> Option<OpReport> {
        let before = *s.store.get(usize::from(key))?;
        let (after, outcome, rule) = self.transition(before, s.now, op)?;
        *s.store.get_mut(usize::from(key))? = after;
        s.flags |= self.step_flags(s, op, fact, before, after);
        let mut bits = Coverage::rule(rule);
        if rule == Rule::R2 && before.owner != *op.owner() && self.all_crashed_before(s, before) {
            bits |= Scenario::TakeoverAfterCrash.bit();
        }
        if after.tag == PENDING && after.hold_set().len() >= 2 {
            bits |= Scenario::HandoverWithTwoHolds.bit();
        }
        self.record(bits);
        Some(OpReport { key, op, outcome, rule })
    }

    /// The operation that reserves for attempt `a` of `owner`.
    fn reserve_op(&self, owner: u8, a: u8) -> Option<Op> {
        let ttl = Ttl::from_millis(u64::from(self.config.ttl)).ok()?;
        Some(Operation::Reserve { owner, hold: HoldBit::new(hold_bit(owner, a))?, ttl })
    }

    /// The store transition of `op` at store time `now` from `before`: the specification's
    /// [`spec::apply`], or the substitute of [`ReservationModel::with_transition`].
    pub(crate) fn transition(&self, before: Slot, now: u8, op: Op) -> Option<(Slot, Outcome, Rule)> {
        let current = before.to_reservation();
        let now = instant(now);
        let Step { next, outcome, rule } = match self.transition {
            StoreTransition::Specification => spec::apply(current, now, op.as_ref()),
            StoreTransition::Substitute(transition) => transition(current, now, op),
        };
        Some((Slot::from_reservation(next.as_ref()), outcome, rule))
    }

    /// The step properties, observed on one operation's before and after.
    fn step_flags(&self, s: &State, op: Op, fact: Option<u8>, before: Slot, after: Slot) -> u8 {
        let owner = *op.owner();
        let mut flags = 0;
        if before.tag == CONFIRMED {
            let kept = after.tag == CONFIRMED && after.owner == before.owner;
            let own_release = matches!(op, Operation::Release { .. }) && owner == before.owner;
            if !kept && !own_release {
                flags |= STEP_CONFIRMED_MOVED;
            }
        }
        if after != before {
            let other_live = before.tag != FREE && before.owner != owner && before.is_live(s.now);
            let other_made = after.tag != FREE && after.owner != owner;
            if other_live || other_made || after.has_foreign_hold() {
                flags |= STEP_TOUCHED_OTHER;
            }
        }
        if matches!(op, Operation::Abandon { .. }) && before.tag == CONFIRMED && after != before {
            flags |= STEP_ABANDONED_CONFIRMED;
        }
        if let (Operation::Release { .. }, Some(fact)) = (op, fact)
            && confirmed_after(before, owner, fact)
            && after != before
        {
            flags |= STEP_OLD_RELEASE_FREED;
        }
        flags
    }

    /// Whether every hold of the pending reservation `slot` is an attempt that crashed before
    /// appending.
    pub(crate) fn all_crashed_before(&self, s: &State, slot: Slot) -> bool {
        slot.tag == PENDING
            && !slot.hold_set().is_empty()
            && (0..HOLD_BITS).filter(|&b| slot.has_hold(b)).all(|b| {
                let (o, a) = (hold_owner(b), b % MAX_ATTEMPTS as u8);
                attempt(s, o, a).is_some_and(|at| at.phase == Phase::CrashedBefore)
            })
    }

    /// H5: whether a release of `owner`'s fact `fact` on `key` must wait, because a newer attempt
    /// of the owner is between reserve and confirm on that key.
    pub(crate) fn release_blocked(&self, s: &State, owner: u8, key: u8, fact: u8) -> bool {
        if !self.holds(Assumption::H5) {
            return false;
        }
        let Some(o) = s.owners.get(usize::from(owner)) else { return false };
        o.attempts.iter().any(|a| {
            a.key == key
                && match a.phase {
                    Phase::Reserved => true,
                    // Positions in the owner's own event log (its stream versions), not a
                    // reservation's version: the protocol's order of the owner's facts.
                    Phase::Appended | Phase::CrashedAfter => a.version > fact,
                    _ => false,
                }
        })
    }

    /// H5: whether an attempt of `owner` must wait before reserving `key`, because the
    /// subscription has not yet applied an earlier fact's release of it.
    fn reserve_blocked(&self, who: u8, o: &Owner, key: u8) -> bool {
        if !self.holds(Assumption::H5) {
            return false;
        }
        let any = self.any_for_give_ups();
        (o.cursor..o.log_len).any(|f| {
            (0..2).any(|op| matches!(fact_op(who, o, f, op, any), Some((k, Operation::Release { .. })) if k == key))
        })
    }

    /// H5: whether the subscription must not restart, because an attempt of `owner` is between
    /// reserve and confirm (a replayed older release would reach the store meanwhile).
    fn restart_blocked(&self, o: &Owner) -> bool {
        self.holds(Assumption::H5)
            && o.attempts.iter().any(|a| matches!(a.phase, Phase::Reserved | Phase::Appended | Phase::CrashedAfter))
    }

    /// Whether the store's clock may tick in `s`: it has not reached the horizon, and H2 does
    /// not hold it back.
    fn tick_enabled(&self, s: &State) -> bool {
        s.now < self.config.horizon && !self.tick_blocked(s)
    }

    /// H2: whether the store's clock must not tick, because a fact appended under a pending
    /// reservation that expires at the next tick is still unconfirmed.
    fn tick_blocked(&self, s: &State) -> bool {
        if !self.holds(Assumption::H2) {
            return false;
        }
        s.owners.iter().enumerate().take(usize::from(self.owners())).any(|(i, o)| {
            o.attempts.iter().any(|a| {
                matches!(a.phase, Phase::Appended | Phase::CrashedAfter)
                    && s.store.get(usize::from(a.key)).is_some_and(|slot| {
                        // Live now, expired at the next tick, as the specification judges it.
                        slot.tag == PENDING
                            && usize::from(slot.owner) == i
                            && slot.is_live(s.now)
                            && !slot.is_live(s.now.saturating_add(1))
                    })
            })
        })
    }

    /// Whether an attempt may append at store time `now`, judging by a node clock that may lag by
    /// the skew, less its margin (the skew under H3, none without).
    fn clock_allows_append(&self, now: u8, deadline: u8) -> bool {
        let skew = i32::from(self.config.skew);
        let margin = if self.holds(Assumption::H3) { skew } else { 0 };
        i32::from(now) - skew + margin < i32::from(deadline)
    }

    /// The node clock reading that the append of the trace uses: the store's less the skew.
    fn node_clock(&self, now: u8) -> i32 {
        i32::from(now) - i32::from(self.config.skew)
    }

    /// The step from `s` by `action`: the next state, and the step's lines in a trace
    /// ([`crate::trace::step_text`]).
    pub(crate) fn step_text(&self, s: &State, action: Action) -> Option<(State, String)> {
        let (n, reports) = self.step(s, action)?;
        let lines = crate::trace::step_text(s, action, &n, reports, self.node_clock(s.now))?;
        Some((n, lines))
    }

    /// The numbered trace of `actions` from `start` ([`crate::trace::trace_text`]).
    pub(crate) fn trace_text(&self, start: &State, actions: &[Action]) -> String {
        crate::trace::trace_text(start, actions, |s, action| self.step_text(s, action))
    }

    /// The actions the protocol enables in `s`, less those `leave` leaves out.
    pub(crate) fn actions_leaving_out(&self, s: &State, leave: &impl LeaveOut, out: &mut Vec<Action>) {
        if self.tick_enabled(s) && !leave.tick(s) {
            out.push(Action::Tick);
        }
        let reserves_left_out = leave.reserves(s);
        for o in 0..self.owners() {
            if leave.owner(s, o) {
                continue;
            }
            for a in 0..self.attempts() {
                if !leave.attempt(s, o, a) {
                    self.attempt_actions(s, (o, a), reserves_left_out, leave, out);
                }
            }
            self.give_up_actions(s, o, leave, out);
            self.subscription_actions(s, o, out);
        }
    }

    /// The actions of attempt `a` of owner `o` that the protocol enables in `s`, less those
    /// `leave` leaves out: its reserves of the keys `reserves_left_out` (a bit each), and its
    /// crash.
    fn attempt_actions(
        &self,
        s: &State,
        (o, a): (u8, u8),
        reserves_left_out: u8,
        leave: &impl LeaveOut,
        out: &mut Vec<Action>,
    ) {
        let Some(owner) = s.owners.get(usize::from(o)) else { return };
        let Some(at) = owner.attempts.get(usize::from(a)) else { return };
        match at.phase {
            Phase::Idle => {
                if self.holds(Assumption::H7) && owner.deleted() {
                    return;
                }
                for key in 0..self.keys() {
                    if reserves_left_out & (1 << key) == 0 && !self.reserve_blocked(o, owner, key) {
                        out.push(Action::Reserve { owner: o, attempt: a, key });
                    }
                }
            }
            Phase::Reserved => {
                if at.deadline != 0 && owner.log_len <= self.attempts() && self.clock_allows_append(s.now, at.deadline)
                {
                    out.push(Action::Append { owner: o, attempt: a });
                }
                out.push(Action::Retry { owner: o, attempt: a });
                out.push(Action::Abandon { owner: o, attempt: a });
                if !leave.crash_reserved(s, o, a) {
                    out.push(Action::Crash { owner: o, attempt: a });
                }
            }
            Phase::Appended => {
                let in_time = self.confirm_in_time(s, o, a, at.key);
                if in_time {
                    out.push(Action::Confirm { owner: o, attempt: a });
                }
                if !leave.crash_appended(s, o, a, in_time) {
                    out.push(Action::Crash { owner: o, attempt: a });
                }
            }
            _ => {}
        }
    }

    /// H2: whether appended attempt `a` of owner `o` may confirm `key`: the store holds it
    /// confirmed for the owner, or pending for it under the attempt's live hold (always, without
    /// H2).
    fn confirm_in_time(&self, s: &State, o: u8, a: u8, key: u8) -> bool {
        !self.holds(Assumption::H2)
            || s.store.get(usize::from(key)).is_some_and(|slot| {
                let mine = slot.has_hold(hold_bit(o, a));
                slot.owner == o && (slot.tag == CONFIRMED || (mine && slot.is_live(s.now)))
            })
    }

    /// The give-ups of owner `o` that the protocol enables in `s`: a fact that gives its key up,
    /// and a deletion, unless `leave` leaves deletions out.
    fn give_up_actions(&self, s: &State, o: u8, leave: &impl LeaveOut, out: &mut Vec<Action>) {
        if let Some(owner) = s.owners.get(usize::from(o))
            && owner.latest_key().is_some()
            && owner.log_len < self.attempts()
        {
            // A give-up is one fact more than the attempts: the log holds attempts + 1 facts, so
            // that an owner can take a key, give it up and take it again.
            out.push(Action::GiveUp { owner: o, delete: false });
            if !leave.deletions() {
                out.push(Action::GiveUp { owner: o, delete: true });
            }
        }
    }

    /// The actions of owner `o`'s subscription that the protocol enables in `s`.
    fn subscription_actions(&self, s: &State, o: u8, out: &mut Vec<Action>) {
        let Some(owner) = s.owners.get(usize::from(o)) else { return };
        let any = self.any_for_give_ups();
        let enabled = |fact: u8, op: u8| match fact_op(o, owner, fact, op, any) {
            Some((key, Operation::Release { .. })) => !self.release_blocked(s, o, key, fact + 1),
            Some(_) => true,
            None => false,
        };
        let c = owner.cursor;
        if !owner.caught_up() && enabled(c, 0) && (fact_op(o, owner, c, 1, any).is_none() || enabled(c, 1)) {
            out.push(Action::Apply { owner: o });
        }
        let applied = owner.cursor.min(owner.log_len);
        if !self.restart_blocked(owner) {
            for fact in 0..applied {
                out.push(Action::Restart { owner: o, fact });
            }
        }
        if !self.holds(Assumption::H8) {
            for fact in 0..applied {
                for op in 0..2 {
                    if enabled(fact, op) {
                        out.push(Action::Replay { owner: o, fact, op });
                    }
                }
            }
        }
    }

    /// Applies `action` to `s`: the next state and what its store operations did.
    pub(crate) fn step(&self, s: &State, action: Action) -> Option<(State, Reports)> {
        let mut n = *s;
        n.flags = 0;
        let ttl = self.config.ttl;
        let mut reports: Reports = [None, None];
        match action {
            Action::Tick => self.tick(&mut n)?,
            Action::Reserve { owner, attempt: a, key } => {
                let r = self.store_op(&mut n, key, self.reserve_op(owner, a)?, None)?;
                *attempt_mut(&mut n, owner, a)? = if r.outcome == Outcome::Conflict {
                    Attempt { phase: Phase::Done, ..Attempt::default() }
                } else {
                    Attempt { phase: Phase::Reserved, key, deadline: s.now.saturating_add(ttl), version: 0 }
                };
                reports[0] = Some(r);
            }
            Action::Retry { owner, attempt: a } => {
                let key = attempt(s, owner, a)?.key;
                let r = self.store_op(&mut n, key, self.reserve_op(owner, a)?, None)?;
                if r.outcome == Outcome::Conflict {
                    *attempt_mut(&mut n, owner, a)? = Attempt { phase: Phase::Done, ..Attempt::default() };
                }
                reports[0] = Some(r);
            }
            Action::Append { owner, attempt: a } => {
                let key = attempt(s, owner, a)?.key;
                let v = append(&mut n, owner, key)?;
                *attempt_mut(&mut n, owner, a)? = Attempt { phase: Phase::Appended, key, deadline: 0, version: v };
            }
            Action::Confirm { owner, attempt: a } => {
                let at = *attempt(s, owner, a)?;
                let confirm = Operation::Confirm { owner, version: version(at.version) };
                reports[0] = Some(self.store_op(&mut n, at.key, confirm, None)?);
                *attempt_mut(&mut n, owner, a)? = Attempt { phase: Phase::Done, ..Attempt::default() };
            }
            Action::Abandon { owner, attempt: a } => {
                let key = attempt(s, owner, a)?.key;
                let abandon = Operation::Abandon { owner, hold: HoldBit::new(hold_bit(owner, a))? };
                reports[0] = Some(self.store_op(&mut n, key, abandon, None)?);
                *attempt_mut(&mut n, owner, a)? = Attempt { phase: Phase::Done, ..Attempt::default() };
            }
            Action::Crash { owner, attempt: a } => {
                let at = attempt_mut(&mut n, owner, a)?;
                *at = match at.phase {
                    Phase::Reserved => Attempt { phase: Phase::CrashedBefore, ..Attempt::default() },
                    Phase::Appended => Attempt { phase: Phase::CrashedAfter, ..*at },
                    _ => Attempt { phase: Phase::Done, ..Attempt::default() },
                };
            }
            Action::GiveUp { owner, delete } => {
                append(&mut n, owner, if delete { DELETED } else { NO_KEY })?;
            }
            Action::Apply { owner } => {
                let fact = n.owners.get(usize::from(owner))?.cursor;
                reports[0] = Some(self.subscription_op(&mut n, owner, fact, 0)?);
                reports[1] = self.subscription_op(&mut n, owner, fact, 1);
                n.owners.get_mut(usize::from(owner))?.cursor = fact + 1;
            }
            Action::Restart { owner, fact } => {
                n.owners.get_mut(usize::from(owner))?.cursor = fact;
            }
            Action::Replay { owner, fact, op } => reports[0] = Some(self.subscription_op(&mut n, owner, fact, op)?),
        }
        retire_crashed(&mut n);
        Some((n, reports))
    }

    /// The store's clock ticks in `n`, which forgets what can no longer matter, so that
    /// equivalent states are one state: the deadline of an attempt too late to append, the expiry
    /// of an expired reservation. `None` past the clock's last instant.
    fn tick(&self, n: &mut State) -> Option<()> {
        n.now = n.now.checked_add(1)?;
        for o in n.owners.iter_mut() {
            for at in o.attempts.iter_mut() {
                if at.phase == Phase::Reserved && !self.clock_allows_append(n.now, at.deadline) {
                    at.deadline = 0;
                }
            }
        }
        for slot in n.store.iter_mut() {
            if slot.tag == PENDING && !slot.is_live(n.now) {
                slot.at = 0;
            }
        }
        Some(())
    }

    fn subscription_op(&self, n: &mut State, owner: u8, fact: u8, op: u8) -> Option<OpReport> {
        let o = *n.owners.get(usize::from(owner))?;
        let (key, store_op) = fact_op(owner, &o, fact, op, self.any_for_give_ups())?;
        let before = *n.store.get(usize::from(key))?;
        let r = self.store_op(n, key, store_op, Some(fact + 1))?;
        if confirmed_after(before, owner, fact + 1) {
            self.record(Scenario::ReplayedOldFact.bit());
        }
        if op == 1 && matches!(r.rule, Rule::L2 | Rule::L4) {
            self.record(Scenario::Rename.bit());
        }
        Some(r)
    }
}

/// Makes done, in `n`, each crashed attempt that no longer matters: a crashed attempt matters only
/// until the subscription confirms its fact (crashed after appending) or while its hold is in the
/// store (crashed before).
fn retire_crashed(n: &mut State) {
    let store = n.store;
    for (i, o) in n.owners.iter_mut().enumerate() {
        let cursor = o.cursor;
        for (a, at) in o.attempts.iter_mut().enumerate() {
            let done = match at.phase {
                Phase::CrashedAfter => cursor >= at.version,
                Phase::CrashedBefore => !store.iter().any(|slot| slot.has_hold(hold_bit(i as u8, a as u8))),
                _ => false,
            };
            if done {
                *at = Attempt { phase: Phase::Done, ..Attempt::default() };
            }
        }
    }
}

/// Appends a fact holding `held` to `owner`'s log; every attempt of the owner still reserved has
/// now read a stale stream version and can no longer append (its deadline becomes 0). Returns the
/// fact's version.
fn append(s: &mut State, owner: u8, held: u8) -> Option<u8> {
    let o = s.owners.get_mut(usize::from(owner))?;
    *o.log.get_mut(usize::from(o.log_len))? = held;
    o.log_len += 1;
    for at in o.attempts.iter_mut() {
        if at.phase == Phase::Reserved {
            at.deadline = 0;
        }
    }
    Some(o.log_len)
}

/// Whether `slot` is `owner`'s confirmed reservation of a later fact than version `v`: the
/// specification keeps it against the release of `v` (rule L5).
fn confirmed_after(slot: Slot, owner: u8, v: u8) -> bool {
    slot.tag == CONFIRMED
        && slot.owner == owner
        && spec::release(slot.to_reservation(), instant(0), &owner, ReleaseVersion::At(version(v))).rule == Rule::L5
}

fn version(v: u8) -> Version {
    Version::from_u64(u64::from(v))
}

pub(crate) fn attempt(s: &State, owner: u8, a: u8) -> Option<&Attempt> {
    s.owners.get(usize::from(owner))?.attempts.get(usize::from(a))
}

fn attempt_mut(s: &mut State, owner: u8, a: u8) -> Option<&mut Attempt> {
    s.owners.get_mut(usize::from(owner))?.attempts.get_mut(usize::from(a))
}

// ---------------------------------------------------------------------------------------------
// Properties.

/// One safety property of the model: the sentence that names it and the predicate that decides
/// it on a state.
#[derive(Clone, Copy)]
pub struct SafetyProperty {
    /// The property, as a sentence; the checker reports it by this name.
    pub name: &'static str,
    /// Whether a state satisfies it.
    pub holds: fn(&ReservationModel, &State) -> bool,
}

/// The always-properties, in the order `check` reports them: the one table of them.
pub const PROPERTIES: [SafetyProperty; 8] = [
    SafetyProperty { name: P_UNIQUE, holds: unique },
    SafetyProperty { name: P_ONE_OWNER, holds: one_owner },
    SafetyProperty { name: P_CONFIRMED_MOVES, holds: |_, s| s.flags & STEP_CONFIRMED_MOVED == 0 },
    SafetyProperty { name: P_OTHERS, holds: |_, s| s.flags & STEP_TOUCHED_OTHER == 0 },
    SafetyProperty { name: P_NEVER_ABANDONED, holds: |_, s| s.flags & STEP_ABANDONED_CONFIRMED == 0 },
    SafetyProperty { name: P_OLD_RELEASE, holds: |_, s| s.flags & STEP_OLD_RELEASE_FREED == 0 },
    SafetyProperty { name: P_CRASHED_FREE, holds: crashed_free },
    SafetyProperty { name: P_NO_LEAK, holds: no_leak },
];

/// The names of the always-properties, in the order the checker reports them: the names that
/// [`crate::check::CheckOptions::target`], [`crate::check::Verdict::name`] and
/// [`crate::Violation::property`] hold.
pub const ALWAYS: [&str; PROPERTIES.len()] = {
    let mut names = [""; PROPERTIES.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = PROPERTIES[i].name;
        i += 1;
    }
    names
};

/// The names a check hands the checker for the always-properties, in table order: short, because
/// the checker looks each property up by its name (a SipHash of the name) at every state it visits,
/// and with the sentences of [`ALWAYS`] those lookups were a sixth of a check's instructions. The
/// reports name each property by its sentence ([`checker_name`] translates).
pub(crate) const CHECKER_NAMES: [&str; PROPERTIES.len()] = ["P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7"];

/// The name the checker knows the always-property `name` (one of [`ALWAYS`]) by, in a check: its
/// [`CHECKER_NAMES`] entry; `name` itself when it names no always-property.
pub(crate) fn checker_name(name: &'static str) -> &'static str {
    ALWAYS.iter().position(|p| *p == name).and_then(|i| CHECKER_NAMES.get(i).copied()).unwrap_or(name)
}

/// G, uniqueness of committed facts: within the scope, no two different owners each have a
/// latest committed fact that holds the same key.
pub const P_UNIQUE: &str = "no two owners' latest committed facts hold the same key";
/// The store never has two owners for one key: every hold of a pending reservation is an attempt
/// of its owner.
pub const P_ONE_OWNER: &str = "the store never has two owners for one key";
/// A confirmed reservation changes owner or becomes free only through a release by its owner.
pub const P_CONFIRMED_MOVES: &str = "a confirmed key changes owner or is freed only by its owner's release";
/// An operation by one owner never creates, extends, confirms, releases or abandons another
/// owner's live reservation.
pub const P_OTHERS: &str = "an owner's operation never changes another owner's live reservation";
/// A confirmed key is never abandoned.
pub const P_NEVER_ABANDONED: &str = "a confirmed key is never abandoned";
/// A release of an older fact never frees a key that a later fact of the owner confirmed.
pub const P_OLD_RELEASE: &str = "an older fact's release never frees a key a later fact confirmed";
/// A pending reservation all of whose attempts crashed before appending is free once its TTL
/// passes: lookup sees nothing and another owner's reserve takes it.
pub const P_CRASHED_FREE: &str = "a pending key whose attempts all crashed before appending is free after its TTL";
/// No key leaks: once the subscription has applied every committed fact, every confirmed key is
/// held by its owner's latest fact, and every key held by a latest fact is confirmed to its owner.
pub const P_NO_LEAK: &str = "no key leaks once the subscription has applied every fact";

fn unique(m: &ReservationModel, s: &State) -> bool {
    let mut seen = 0u8;
    for o in s.owners.iter().take(usize::from(m.owners())) {
        if let Some(k) = o.latest_key() {
            if seen & (1 << k) != 0 {
                return false;
            }
            seen |= 1 << k;
        }
    }
    true
}

fn one_owner(m: &ReservationModel, s: &State) -> bool {
    s.store.iter().take(usize::from(m.keys())).all(|slot| !slot.has_foreign_hold())
}

fn crashed_free(m: &ReservationModel, s: &State) -> bool {
    let now = Instant::from_millis(u64::from(s.now));
    s.store.iter().take(usize::from(m.keys())).all(|slot| {
        if slot.tag != PENDING || slot.is_live(s.now) || !m.all_crashed_before(s, *slot) {
            return true;
        }
        // Free means: lookup sees nothing, and another owner's reserve takes it.
        let other = (slot.owner + 1) % m.owners().max(1);
        let taken = m.owners() == 1
            || m.reserve_op(other, 0)
                .and_then(|op| m.transition(*slot, s.now, op))
                .is_some_and(|(_, o, _)| o == Outcome::Taken);
        spec::lookup(slot.to_reservation().as_ref(), now).is_none() && taken
    })
}

fn no_leak(m: &ReservationModel, s: &State) -> bool {
    let owners = usize::from(m.owners());
    if !s.owners.iter().take(owners).all(Owner::caught_up) {
        return true;
    }
    let confirmed_held = s.store.iter().take(usize::from(m.keys())).enumerate().all(|(k, slot)| {
        slot.tag != CONFIRMED || s.owners.get(usize::from(slot.owner)).and_then(Owner::latest_key) == Some(k as u8)
    });
    let held_confirmed = s.owners.iter().take(owners).enumerate().all(|(i, o)| match o.latest_key() {
        Some(k) => {
            s.store.get(usize::from(k)).is_some_and(|slot| slot.tag == CONFIRMED && usize::from(slot.owner) == i)
        }
        None => true,
    });
    confirmed_held && held_confirmed
}

// The checker calls these at every state. Each reports only the first state that breaks its
// property: stateright keeps one path per property and a later failure would overwrite it, so
// breadth first would not report the shortest counterexample (it looks for the end of the search
// only every so many states). Later failures are still failures of the same property.
fn first_failure(m: &ReservationModel, holds: bool, property: u8) -> bool {
    holds || m.failed.fetch_or(1 << property, Ordering::Relaxed) & (1 << property) != 0
}
/// Property `I` of [`PROPERTIES`], as the checker calls it on `M`, the model or a search of it
/// (stateright takes function pointers, so the index is a const parameter).
fn checked<M: AsRef<ReservationModel>, const I: usize>(m: &M, s: &State) -> bool {
    let m = m.as_ref();
    PROPERTIES.get(I).is_none_or(|p| first_failure(m, (p.holds)(m, s), I as u8))
}

/// [`checked`] for every property, in table order: a table of another length does not compile.
fn checked_all<M: AsRef<ReservationModel>>() -> [fn(&M, &State) -> bool; PROPERTIES.len()] {
    [
        checked::<M, 0>,
        checked::<M, 1>,
        checked::<M, 2>,
        checked::<M, 3>,
        checked::<M, 4>,
        checked::<M, 5>,
        checked::<M, 6>,
        checked::<M, 7>,
    ]
}

/// The model itself leaves out no action.
impl LeaveOut for ReservationModel {}

impl AsRef<ReservationModel> for ReservationModel {
    fn as_ref(&self) -> &ReservationModel {
        self
    }
}

impl Model for ReservationModel {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![self.initial_state()]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        self.actions_leaving_out(s, self, out);
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        // A step that changes nothing (a retry that only rejoins, a release that finds nothing)
        // leads back to this state: skip it, so the checker does not hash and look it up again.
        // Its rule is recorded all the same.
        let (n, _) = self.step(s, action)?;
        (n != *s).then_some(n)
    }

    fn format_action(&self, action: &Action) -> String {
        crate::trace::action_text(action)
    }

    /// What the step did, as traces print it: each store operation with its outcome and rule id.
    fn format_step(&self, last_state: &State, action: Action) -> Option<String> {
        self.step_text(last_state, action).map(|(_, lines)| lines)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        ALWAYS.into_iter().zip(checked_all()).map(|(name, f)| Property::always(name, f)).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// The search's reductions.

/// The protocol's model as a check searches it: the same states, actions and properties, less
/// what the reductions of docs/model.md leave out, each turned on by the check that uses it. The
/// checker knows its always-properties by their [`CHECKER_NAMES`] rather than by their sentences
/// ([`ALWAYS`]): the checks translate the names back. The Explorer, which shows the sentences,
/// serves the model itself.
#[derive(Clone, Debug)]
pub(crate) struct Reduced {
    /// The protocol's model.
    model: ReservationModel,
    /// Whether steps lead to representatives ([`Reduced::quotient`]).
    quotient: bool,
    /// The successors handed to the checker a moment ago ([`Reduced::skipping_recent_repeats`]).
    recent: Option<Arc<Recent>>,
    /// Whether mirrored actions are left out ([`Reduced::skipping_symmetric_actions`]).
    skip_symmetric: bool,
    /// Whether eager steps are taken ([`Reduced::taking_eager_steps`]).
    eager: bool,
    /// Whether they are taken inside the step that enables them.
    eager_inline: bool,
}

impl AsRef<ReservationModel> for Reduced {
    fn as_ref(&self) -> &ReservationModel {
        &self.model
    }
}

impl Reduced {
    /// The search of `model` (its configuration and store transition), from a model with
    /// nothing reached and no property failed yet ([`ReservationModel::renewed`]), unreduced.
    pub(crate) fn new(model: &ReservationModel) -> Self {
        Reduced {
            model: model.renewed(),
            quotient: false,
            recent: None,
            skip_symmetric: false,
            eager: false,
            eager_inline: false,
        }
    }

    /// The protocol's model it searches.
    pub(crate) fn protocol(&self) -> &ReservationModel {
        &self.model
    }

    /// This search, reduced by symmetry: without the actions of an owner (or attempt) that
    /// another owner (attempt of the same owner) with a lower index mirrors exactly: same fields
    /// and same part in the store; nor the reserves of a key that a lower key mirrors (same
    /// reservation, named by no log or attempt unless the lower is alike). Swapping the two maps
    /// the state onto itself, so each skipped action leads to a state equivalent to the one its
    /// mirror's action leads to: the representatives reached, the coverage and every verdict are
    /// unchanged, and the checker looks up fewer duplicates. A search without symmetry must keep
    /// every action. It also skips the crash of a reserved attempt whose hold is in no
    /// reservation, which leads to the very state its abandon leads to, and the crash of an
    /// appended attempt that leads to the very state its confirm leads to.
    pub(crate) fn skipping_symmetric_actions(mut self) -> Self {
        self.skip_symmetric = true;
        self
    }

    /// This search, depth first, reduced by eager steps: in a state where an attempt or a
    /// subscription has a step that changes nothing in the store, that every other step commutes
    /// with, and that no property can see go one way or the other (an appended attempt whose
    /// confirm the subscription already made, a subscription catching up on a confirm the attempt
    /// already made), that step is the only one explored ([`Reduced::eager_step`]; the argument
    /// is in docs/model.md). It also leaves out the crash of an appended attempt and the deletion
    /// of an owner, whose states a twin the search reaches anyway simulates (the attempt left
    /// appended, the owner that gave its key up without deleting itself). Only when every
    /// assumption holds and the store transition is the specification's: the arguments use H2,
    /// H5, H7 and H8, and the specification's rules.
    pub(crate) fn taking_eager_steps(mut self) -> Self {
        self.eager =
            self.model.config.assumptions == crate::config::Assumptions::ALL && self.model.transition_is_spec();
        self.eager_inline = self.eager;
        self
    }

    /// This search, reduced by eager steps as [`Reduced::taking_eager_steps`] reduces it, but
    /// with each eager step a step of its own rather than taken inside the step that enabled it:
    /// the tests compare the two.
    #[cfg(test)]
    pub(crate) fn taking_eager_steps_one_by_one(mut self) -> Self {
        self = self.taking_eager_steps();
        self.eager_inline = false;
        self
    }

    /// Whether this search takes eager steps.
    #[cfg(test)]
    pub(crate) fn takes_eager_steps(&self) -> bool {
        self.eager
    }

    /// `n`, a successor, after the eager steps enabled in it, in turn, until none is: a search
    /// reduced by eager steps would explore only the one eager step in each of these states, so
    /// it takes them inside the step that led to the first (docs/model.md argues that no
    /// property fails in such a state unless it fails in the state its eager steps lead to).
    /// The step properties the first step broke are kept: the eager steps break none.
    pub(crate) fn after_eager_steps(&self, mut n: State) -> State {
        while let Some(eager) = self.eager_step(&n) {
            let Some((next, _)) = self.model.step(&n, eager) else { break };
            n = State { flags: n.flags | next.flags, ..next };
        }
        n
    }

    /// This search, depth first: `next_state` gives no successor for a state this thread handed
    /// the checker before in the search ([`Recent`]; the checker would find it in its visited
    /// set), and counts it. [`Reduced::end_search`] switches this off.
    pub(crate) fn skipping_recent_repeats(mut self) -> Self {
        self.recent = Some(Recent::new());
        self
    }

    /// Ends the search of [`Reduced::skipping_recent_repeats`], once its threads have ended:
    /// `next_state` is the model's again (path reconstruction replays it). Returns the successors
    /// left out as repeats, which the checker did not count as generated.
    pub(crate) fn end_search(&self) -> u64 {
        self.recent.as_ref().map_or(0, |r| r.finish())
    }

    /// The repeats of [`Reduced::skipping_recent_repeats`] counted so far in the search (the
    /// threads add theirs in batches): for progress lines.
    pub(crate) fn repeats_so_far(&self) -> usize {
        self.recent.as_ref().map_or(0, |r| usize::try_from(r.so_far()).unwrap_or(usize::MAX))
    }

    /// This search, whose steps lead to representatives (symmetry reduction inside the model):
    /// breadth-first search, which ignores the checker's symmetry reduction, then explores the
    /// reduced state space and finds shortest counterexamples fast. Its paths name permuted
    /// owners, attempts and keys: [`Reduced::concrete_path`] maps them back.
    pub(crate) fn quotient(mut self) -> Self {
        self.quotient = true;
        self
    }

    /// The actions, from the initial state, of a path of this search that leads through states
    /// equivalent to the ones `actions` leads through: `actions` itself for a search without
    /// [`Reduced::quotient`], its concrete counterpart (same length) for one with it.
    pub(crate) fn concrete_path(&self, actions: &[Action]) -> Option<Vec<Action>> {
        if !self.quotient {
            return Some(actions.to_vec());
        }
        let mut reduced = self.model.initial_state();
        let mut concrete = self.model.initial_state();
        let mut out = Vec::with_capacity(actions.len());
        let mut enabled = Vec::new();
        for &a in actions {
            let target = self.next_state(&reduced, a)?;
            enabled.clear();
            self.actions(&concrete, &mut enabled);
            let (b, next) = enabled.iter().find_map(|&b| {
                self.model.step(&concrete, b).filter(|(n, _)| n.representative() == target).map(|(n, _)| (b, n))
            })?;
            out.push(b);
            concrete = next;
            reduced = target;
        }
        Some(out)
    }

    /// Whether nothing in `s` depends on the store clock: no pending reservation is live and no
    /// reserved attempt can still append. Every guard and every rule compares instants with
    /// each other, so the state one tick later (no field but the clock changes) behaves as this
    /// one does with every instant a tick later and one tick less to the horizon: a search
    /// reduced by eager steps does not tick here, as everything after the tick happens, a tick
    /// earlier, without it.
    pub(crate) fn timeless(&self, s: &State) -> bool {
        s.store.iter().take(usize::from(self.model.keys())).all(|slot| slot.tag != PENDING || !slot.is_live(s.now))
            && s.owners
                .iter()
                .take(usize::from(self.model.owners()))
                .all(|o| o.attempts.iter().all(|a| a.phase != Phase::Reserved || a.deadline == 0))
    }

    /// A step to take alone in `s`, for a search reduced by eager steps: the first, by owner and
    /// attempt, of
    ///
    /// - the confirm of an appended attempt whose key the store holds confirmed for its owner at
    ///   its fact's version or a later one: the confirm changes nothing in the store (rule C7),
    ///   and the attempt's crash leads to the same state (it is at once done, once the
    ///   subscription has applied its fact) or to one that can do less (until then);
    /// - the subscription's apply of a fact each of whose operations changes nothing, and will
    ///   change nothing for as long as the fact waits: the confirm of a key the store holds
    ///   confirmed for the owner at the fact's version or a later one (C7), the release, at the
    ///   fact's version, of a key held confirmed for the owner at a later one (L5).
    ///
    /// Either step only moves the attempt or the subscription on; the store, the clock and the
    /// logs are unchanged.
    pub(crate) fn eager_step(&self, s: &State) -> Option<Action> {
        for o in 0..self.model.owners() {
            let owner = s.owners.get(usize::from(o))?;
            let kept = |key: u8, at_least: u8| {
                s.store
                    .get(usize::from(key))
                    .is_some_and(|slot| slot.tag == CONFIRMED && slot.owner == o && slot.at >= at_least)
            };
            for a in 0..self.model.attempts() {
                let at = owner.attempts.get(usize::from(a))?;
                if at.phase == Phase::Appended && kept(at.key, at.version) {
                    return Some(Action::Confirm { owner: o, attempt: a });
                }
            }
            if owner.caught_up() {
                continue;
            }
            let fact = owner.cursor;
            let no_op = |op: u8| match fact_op(o, owner, fact, op, self.model.any_for_give_ups()) {
                None => op == 1,
                Some((key, Operation::Confirm { .. })) => kept(key, fact + 1),
                Some((key, Operation::Release { version: ReleaseVersion::At(_), .. })) => {
                    kept(key, fact + 2) && !self.model.release_blocked(s, o, key, fact + 1)
                }
                Some(_) => false,
            };
            if no_op(0) && no_op(1) {
                return Some(Action::Apply { owner: o });
            }
        }
        None
    }
}

/// What a reduced search leaves out: the reductions of docs/model.md that drop an action.
impl LeaveOut for Reduced {
    /// Reduced by eager steps, the tick where nothing depends on the clock ([`Reduced::timeless`]).
    fn tick(&self, s: &State) -> bool {
        self.eager && self.timeless(s)
    }

    /// Reduced by symmetry, the reserves of the keys that a lower key mirrors: swapping the two
    /// maps `s` onto itself, so a reserve of the higher leads to a state equivalent to the one a
    /// reserve of the lower leads to.
    fn reserves(&self, s: &State) -> u8 {
        if !self.skip_symmetric {
            return 0;
        }
        (1..self.model.keys()).filter(|&k| (0..k).any(|j| keys_mirror(s, j, k))).fold(0, |m, k| m | 1 << k)
    }

    /// Reduced by symmetry, the actions of an owner that a lower owner mirrors.
    fn owner(&self, s: &State, o: u8) -> bool {
        self.skip_symmetric && (0..o).any(|p| owners_mirror(s, p, o))
    }

    /// Reduced by symmetry, the actions of an attempt that a lower attempt of its owner mirrors.
    fn attempt(&self, s: &State, o: u8, a: u8) -> bool {
        self.skip_symmetric && (0..a).any(|b| attempts_mirror(s, o, b, a))
    }

    /// Reduced by symmetry, the crash of an attempt whose hold is in no reservation (it expired
    /// and was taken, or the key was already confirmed): it ends the same way whether it abandons
    /// or crashes, as the abandon changes nothing in the store and the crashed attempt is at once
    /// done. The checker need not generate the same state twice.
    fn crash_reserved(&self, s: &State, o: u8, a: u8) -> bool {
        self.skip_symmetric && !s.store.iter().any(|slot| slot.has_hold(hold_bit(o, a)))
    }

    /// Reduced by eager steps, every crash of an appended attempt: the attempt left appended,
    /// never confirming, does everything the crashed one does (docs/model.md). Reduced by
    /// symmetry alone, the crash once the subscription has applied the attempt's fact, when its
    /// confirm would change nothing in the store: the crashed attempt is then at once done, and
    /// both reach the same state.
    fn crash_appended(&self, s: &State, o: u8, a: u8, confirm: bool) -> bool {
        if self.eager {
            return true;
        }
        let (Some(owner), Some(at)) = (s.owners.get(usize::from(o)), attempt(s, o, a)) else { return false };
        self.skip_symmetric
            && confirm
            && owner.cursor >= at.version
            && s.store.get(usize::from(at.key)).is_some_and(|&slot| {
                let confirm = Operation::Confirm { owner: o, version: version(at.version) };
                self.model.transition(slot, s.now, confirm).is_some_and(|(after, ..)| after == slot)
            })
    }

    /// Reduced by eager steps, every deletion: the owner that gave its key up without deleting
    /// itself does everything the deleted one does (docs/model.md).
    fn deletions(&self) -> bool {
        self.eager
    }
}

impl Model for Reduced {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        self.model.init_states()
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        if self.eager
            && let Some(step) = self.eager_step(s)
        {
            out.push(step);
            return;
        }
        self.model.actions_leaving_out(s, self, out);
    }

    fn next_state(&self, s: &State, action: Action) -> Option<State> {
        // A step that changes nothing leads back to this state, as in the model's own
        // `next_state`; a reserve that only spends an attempt, nearly so.
        let (n, _) = self.model.step(s, action)?;
        if self.skip_symmetric && only_spent(s, &n, action) {
            return None;
        }
        let n = if self.eager_inline { self.after_eager_steps(n) } else { n };
        let n = if self.quotient { n.representative() } else { n };
        if n == *s || self.recent.as_ref().is_some_and(|r| r.generated_again(&n)) {
            return None;
        }
        Some(n)
    }

    fn format_action(&self, action: &Action) -> String {
        self.model.format_action(action)
    }

    fn format_step(&self, last_state: &State, action: Action) -> Option<String> {
        self.model.format_step(last_state, action)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        CHECKER_NAMES.into_iter().zip(checked_all()).map(|(name, f)| Property::always(name, f)).collect()
    }
}

/// Whether `n`, the successor of `s` by `action`, is `s` with an idle attempt done and nothing
/// else changed: a reserve that met a conflict and left the store as it was. An idle attempt can
/// do whatever a done one can (nothing) and more, and no guard, property or other step reads
/// whether an attempt whose hold is in no reservation is idle or done, so every path from `n` is,
/// with the attempt idle throughout, a path from `s` through states that break the same
/// properties, by steps that decide by the same rules: a search reduced by symmetry does not
/// generate `n` (docs/model.md). The reserve's rule is recorded all the same.
pub(crate) fn only_spent(s: &State, n: &State, action: Action) -> bool {
    let Action::Reserve { owner, attempt: a, .. } = action else { return false };
    let mut spent = *s;
    match attempt_mut(&mut spent, owner, a) {
        Some(at) if at.phase == Phase::Idle => *at = Attempt { phase: Phase::Done, ..Attempt::default() },
        _ => return false,
    }
    spent.flags = 0;
    *n == spent
}

/// Whether swapping owners `p` and `o` maps `s` onto itself: equal fields, neither owns a
/// reservation, and each pending reservation has the same holds of both.
fn owners_mirror(s: &State, p: u8, o: u8) -> bool {
    let (Some(a), Some(b)) = (s.owners.get(usize::from(p)), s.owners.get(usize::from(o))) else { return false };
    a == b
        && s.store.iter().all(|slot| {
            let owned = slot.tag != FREE && (slot.owner == p || slot.owner == o);
            !owned && (0..MAX_ATTEMPTS as u8).all(|x| slot.has_hold(hold_bit(p, x)) == slot.has_hold(hold_bit(o, x)))
        })
}

/// Whether swapping attempts `b` and `a` of `owner` maps `s` onto itself: equal fields, and each
/// reservation holds both or neither.
fn attempts_mirror(s: &State, owner: u8, b: u8, a: u8) -> bool {
    let (Some(x), Some(y)) = (attempt(s, owner, b), attempt(s, owner, a)) else { return false };
    let (bit_b, bit_a) = (hold_bit(owner, b), hold_bit(owner, a));
    x == y && s.store.iter().all(|slot| slot.has_hold(bit_b) == slot.has_hold(bit_a))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use stateright::Model;

    use reservation_store::spec::{self, BitHolds, Reservation, Step};
    use reservation_store::{Instant, Outcome};

    use super::{Action, Op, Reduced, ReservationModel};
    use crate::ModelConfig;
    use crate::config::{MAX_KEYS, MAX_OWNERS};
    use crate::state::{DELETED, MAX_FACTS, NO_KEY, PENDING, Phase, Slot, State};

    /// Every state of `model` reachable from its initial state (no symmetry: states as they are).
    fn reachable(model: &impl Model<State = State, Action = Action>) -> HashSet<State> {
        let mut seen: HashSet<State> = model.init_states().into_iter().collect();
        let mut todo: Vec<State> = seen.iter().copied().collect();
        let mut actions = Vec::new();
        while let Some(s) = todo.pop() {
            actions.clear();
            model.actions(&s, &mut actions);
            for &a in &actions {
                if let Some(n) = model.next_state(&s, a)
                    && seen.insert(n)
                {
                    todo.push(n);
                }
            }
        }
        seen
    }

    /// Every state of the full model of the small configuration: computed once, for the tests
    /// that compare reductions with it.
    fn full_small_states() -> &'static HashSet<State> {
        static STATES: std::sync::OnceLock<HashSet<State>> = std::sync::OnceLock::new();
        STATES.get_or_init(|| reachable(&ReservationModel::new(ModelConfig::small())))
    }

    type Logs = [(u8, [u8; MAX_FACTS]); MAX_OWNERS];

    /// The clock, the store and the logs: what uniqueness, the store's properties and the leak
    /// check read (beside the subscriptions' positions and the crashed attempts).
    fn seen_by_properties(s: &State) -> (u8, [Slot; MAX_KEYS], Logs) {
        (s.now, s.store, std::array::from_fn(|o| (s.owners[o].log_len, s.owners[o].log)))
    }

    /// The store and the logs, each expiry counted from the clock: the same for a state and the
    /// state a tick later when nothing in it is live.
    fn store_and_logs_from_now(s: &State) -> ([Slot; MAX_KEYS], Logs) {
        let (now, mut store, logs) = seen_by_properties(s);
        for slot in store.iter_mut().filter(|slot| slot.tag == PENDING) {
            slot.at = slot.at.saturating_sub(now);
        }
        (store, logs)
    }

    /// The eager steps, checked on every state the reduced search reaches in the small
    /// configuration: each is a step the unreduced model enables, taken alone, that changes no
    /// store, clock or log; a tick left out changes nothing but the clock. And the reduced model
    /// reaches the same stores and logs as the unreduced one wherever no tick was left out: the
    /// eager steps hide no store or log from the properties. Taken inside the step that enables
    /// them, they leave out exactly the states in which one is enabled.
    #[test]
    fn eager_steps_change_no_store_clock_or_log_and_hide_none() {
        let config = ModelConfig::small();
        let full = ReservationModel::new(config);
        let reduced = Reduced::new(&full).taking_eager_steps_one_by_one();
        // The unreduced search, on a second thread while this one checks the reduced states.
        std::thread::scope(|threads| {
            let all = threads.spawn(full_small_states);
            let inline =
                threads.spawn(|| reachable(&Reduced::new(&ReservationModel::new(config)).taking_eager_steps()));
            eager_steps_hide_nothing(&full, &reduced, all, inline);
        });
    }

    /// The body of [`eager_steps_change_no_store_clock_or_log_and_hide_none`], given the
    /// unreduced search and the one taking eager steps inside a step under way.
    fn eager_steps_hide_nothing(
        full: &ReservationModel,
        reduced: &Reduced,
        all: std::thread::ScopedJoinHandle<'_, &'static HashSet<State>>,
        inline: std::thread::ScopedJoinHandle<'_, HashSet<State>>,
    ) {
        let reached = reachable(reduced);
        let (mut eager, mut timeless) = (0, 0);
        let mut enabled = Vec::new();
        for s in &reached {
            enabled.clear();
            full.actions(s, &mut enabled);
            if let Some(step) = reduced.eager_step(s) {
                eager += 1;
                assert!(enabled.contains(&step), "{step:?} in {s:?}");
                let (n, _) = full.step(s, step).expect("an enabled step");
                assert_eq!(seen_by_properties(&n), seen_by_properties(s), "{step:?} in {s:?}");
                let mut taken = Vec::new();
                reduced.actions(s, &mut taken);
                assert_eq!(taken, vec![step]);
            } else if reduced.timeless(s) && enabled.contains(&Action::Tick) {
                timeless += 1;
                let (n, _) = full.step(s, Action::Tick).expect("an enabled tick");
                assert_eq!(n, State { now: s.now + 1, ..*s });
            }
        }
        assert!(eager > 1000 && timeless > 10, "{eager} {timeless}");
        // Taken inside the step that enables them (as the check takes them), eager steps leave out
        // exactly the states in which one is enabled: the states reached are the ones this search,
        // taking them one by one, reaches, less those.
        let inline = inline.join().expect("the search taking eager steps inside a step ended");
        let kept: HashSet<State> = reached.iter().filter(|s| reduced.eager_step(s).is_none()).copied().collect();
        assert!(kept.len() * 10 < reached.len() * 9, "{} of {}", kept.len(), reached.len());
        assert_eq!(inline, kept);
        let all = all.join().expect("the unreduced search ended");
        assert!(reached.len() < all.len() && reached.is_subset(all));
        // Deletions are left out of the reduced search (each deleted owner's twin gave its key up
        // without deleting itself), so logs are compared with each deletion read as a give-up.
        let from_now = |states: &HashSet<State>| {
            states.iter().map(|s| store_and_logs_from_now(&undeleted(s))).collect::<HashSet<_>>()
        };
        assert_eq!(from_now(&reached), from_now(all));
    }

    /// `s` with every attempt that crashed after appending still appended.
    fn uncrashed(s: &State) -> State {
        let mut t = *s;
        for at in t.owners.iter_mut().flat_map(|o| o.attempts.iter_mut()) {
            if at.phase == Phase::CrashedAfter {
                at.phase = Phase::Appended;
            }
        }
        t
    }

    /// `s` with every deletion a give-up that keeps the owner.
    fn undeleted(s: &State) -> State {
        let mut t = *s;
        for o in t.owners.iter_mut() {
            for e in o.log.iter_mut().filter(|e| **e == DELETED) {
                *e = NO_KEY;
            }
        }
        t
    }

    /// Whether every property gives the same verdict on `a` and `b`.
    fn same_verdicts(model: &ReservationModel, a: &State, b: &State) -> bool {
        super::PROPERTIES.iter().all(|p| (p.holds)(model, a) == (p.holds)(model, b))
    }

    /// What a step's store operations decided: key, outcome and rule (the operation itself may
    /// differ between twins: a deletion releases with `ANY_VERSION`).
    fn decided(reports: &super::Reports) -> [Option<(u8, Outcome, reservation_store::rules::Rule)>; 2] {
        reports.map(|r| r.map(|r| (r.key, r.outcome, r.rule)))
    }

    /// Checks, on every state `x` of `all` (the full model's states) that `twin` changes, that the
    /// twin `y` does everything `x` does: `y` is reached too, with the same verdicts, and takes
    /// every step `x` takes, deciding the same store operations by the same rules, to a state with
    /// the twin of `x`'s successor and the same verdicts, or to one from which a confirm that
    /// changes no store leads there. Returns how many states were checked and how many steps
    /// needed that confirm.
    fn twins_do_all(full: &ReservationModel, all: &HashSet<State>, twin: fn(&State) -> State) -> (usize, usize) {
        let (mut twins, mut confirmed_after) = (0, 0);
        let (mut here, mut there) = (Vec::new(), Vec::new());
        for x in all.iter().filter(|x| twin(x) != **x) {
            twins += 1;
            let y = twin(x);
            assert!(all.contains(&y), "{x:?}");
            assert!(same_verdicts(full, &State { flags: 0, ..*x }, &State { flags: 0, ..y }), "{x:?}");
            here.clear();
            there.clear();
            full.actions(x, &mut here);
            full.actions(&y, &mut there);
            for &a in &here {
                assert!(there.contains(&a), "{a:?} in {x:?}");
                let ((nx, rx), (ny, ry)) = (full.step(x, a).expect("enabled"), full.step(&y, a).expect("enabled"));
                assert_eq!(decided(&rx), decided(&ry), "{a:?} in {x:?}");
                if twin(&nx) == twin(&ny) {
                    assert!(same_verdicts(full, &nx, &ny), "{a:?} in {x:?}");
                    continue;
                }
                let mut next = Vec::new();
                full.actions(&ny, &mut next);
                let confirms = next.into_iter().filter(|c| matches!(c, Action::Confirm { .. }));
                let to = confirms.filter_map(|c| full.step(&ny, c)).find(|(n, _)| twin(n) == twin(&nx));
                let (n, _) = to.unwrap_or_else(|| panic!("{a:?} from {x:?}: {nx:?} against {ny:?}"));
                assert_eq!((n.store, n.flags), (ny.store, 0), "the confirm is a store no-op");
                assert!(same_verdicts(full, &nx, &ny), "{a:?} in {x:?}");
                confirmed_after += 1;
            }
        }
        (twins, confirmed_after)
    }

    /// A search reduced by eager steps never crashes an appended attempt, because the attempt
    /// left appended does everything the crashed one does, and never deletes an owner, because
    /// the owner that gave its key up without deleting itself does everything the deleted one
    /// does (docs/model.md): checked on the full model of the small configuration, where the
    /// twin with the attempt appended takes each step to its successor's twin or, once the
    /// subscription has applied the attempt's fact, through its no-op confirm; and the reduced
    /// search reaches neither.
    #[test]
    fn appended_attempts_and_owners_that_give_up_do_all_that_crashed_and_deleted_ones_do() {
        let config = ModelConfig::small();
        let full = ReservationModel::new(config);
        let all = full_small_states();
        let (crashed, confirmed_after) = twins_do_all(&full, all, uncrashed);
        assert!(crashed > 500 && confirmed_after > 10, "{crashed} {confirmed_after}");
        let (deleted, confirmed) = twins_do_all(&full, all, undeleted);
        assert!(deleted > 500 && confirmed == 0, "{deleted} {confirmed}");
        let reduced = reachable(&Reduced::new(&full).taking_eager_steps());
        assert!(reduced.iter().all(|s| uncrashed(s) == *s && undeleted(s) == *s));
    }

    /// Leaving out the successors a thread handed the checker a moment ago changes neither the
    /// unique states nor, counting them, the generated ones; and once the search has ended
    /// `next_state` gives every successor again (path reconstruction replays it).
    #[test]
    fn recent_repeats_are_counted_and_change_no_count() {
        use stateright::Checker;
        let counts = |model: Reduced| {
            let model = model.skipping_symmetric_actions().taking_eager_steps();
            let checker = model.checker().threads(1).symmetry().spawn_dfs().join();
            let repeats = checker.model().end_search();
            (checker.unique_state_count(), checker.state_count() as u64 + repeats, repeats)
        };
        let small = ReservationModel::new(ModelConfig::small());
        let plain = counts(Reduced::new(&small));
        let skipping = counts(Reduced::new(&small).skipping_recent_repeats());
        assert_eq!((plain.0, plain.1), (skipping.0, skipping.1));
        assert_eq!(plain.2, 0);
        assert!(skipping.2 > skipping.1 / 4, "{skipping:?}");
        let model = Reduced::new(&small).skipping_recent_repeats();
        let s = small.initial_state();
        let a = Action::Reserve { owner: 0, attempt: 0, key: 0 };
        assert!(model.next_state(&s, a).is_some());
        assert!(model.next_state(&s, a).is_none(), "a repeat during the search");
        model.end_search();
        assert!(model.next_state(&s, a).is_some(), "every successor once the search has ended");
    }

    /// A store transition substituted for the specification's: the specification's own rules,
    /// but the model cannot tell, so it must not lean on them.
    fn substitute(current: Option<Reservation<u8, BitHolds>>, now: Instant, op: Op) -> Step<u8, BitHolds, Outcome> {
        spec::apply(current, now, op.as_ref())
    }

    /// Eager steps only where their argument holds: every assumption, and the specification's
    /// store transition.
    #[test]
    fn eager_steps_are_off_when_an_assumption_is_dropped_or_the_transition_substituted() {
        let small = ModelConfig::small();
        let search = |model: &ReservationModel| Reduced::new(model);
        assert!(search(&ReservationModel::new(small)).taking_eager_steps().takes_eager_steps());
        assert!(!search(&ReservationModel::new(small)).takes_eager_steps());
        for a in crate::Assumption::ALL {
            assert!(!search(&ReservationModel::new(small.dropping(a))).taking_eager_steps().takes_eager_steps(), "{a}");
        }
        let substituted = ReservationModel::new(small).with_transition(substitute);
        assert!(!substituted.transition_is_spec());
        assert!(!search(&substituted.clone()).taking_eager_steps().takes_eager_steps());
        assert!(!substituted.renewed().transition_is_spec(), "a renewed model keeps its transition");
        assert!(!search(&substituted.renewed()).taking_eager_steps().takes_eager_steps());
    }

    /// A reserve that meets a conflict and changes nothing in the store leads, with symmetry on, to
    /// no successor, and its rule is recorded all the same; without symmetry, and for a reserve
    /// that takes its key, the successor is there.
    #[test]
    fn a_reserve_that_only_spends_its_attempt_is_left_out_with_its_rule_recorded() {
        let config = ModelConfig::small();
        let plain = ReservationModel::new(config);
        let reduced = Reduced::new(&plain).skipping_symmetric_actions();
        let s = plain.initial_state();
        let taken = Action::Reserve { owner: 0, attempt: 0, key: 0 };
        let held = reduced.next_state(&s, taken).expect("a reserve that takes its key");
        let conflict = Action::Reserve { owner: 1, attempt: 0, key: 0 };
        let spent = plain.next_state(&held, conflict).expect("the unreduced model keeps it");
        assert!(super::only_spent(&held, &spent, conflict));
        assert!(!super::only_spent(&s, &held, taken));
        assert_eq!(spent.store, held.store);
        assert!(reduced.next_state(&held, conflict).is_none());
        assert!(reduced.protocol().coverage().rules().contains(reservation_store::rules::Rule::R5));
        // Only an idle attempt is spent so: `held`'s attempt holds its key, and a successor with
        // it done and nothing else changed is not one to leave out.
        let mut done = held;
        *super::attempt_mut(&mut done, 0, 0).expect("the attempt") =
            crate::state::Attempt { phase: crate::state::Phase::Done, ..Default::default() };
        assert!(!super::only_spent(&held, &done, taken));
    }

    /// The step properties a step broke stay broken through the eager steps taken inside it:
    /// the eager steps break none, and the flags of the state they start from are kept.
    #[test]
    fn the_flags_a_step_set_survive_the_eager_steps_taken_inside_it() {
        let model = Reduced::new(&ReservationModel::new(ModelConfig::small())).taking_eager_steps_one_by_one();
        let mut todo = model.init_states();
        let mut actions = Vec::new();
        let s = loop {
            let s = todo.pop().expect("a state with an eager step enabled");
            if model.eager_step(&s).is_some() {
                break s;
            }
            actions.clear();
            model.actions(&s, &mut actions);
            todo.extend(actions.iter().filter_map(|&a| model.next_state(&s, a)));
        };
        let flag = crate::state::STEP_TOUCHED_OTHER;
        let after = model.after_eager_steps(State { flags: flag, ..s });
        assert_ne!(State { flags: 0, ..after }, s, "no eager step was taken");
        assert_eq!(after.flags, flag);
    }

    /// States that differ only in one key's tag, or only in its owner, are different states.
    #[test]
    fn states_that_differ_in_a_keys_tag_or_owner_are_not_equal() {
        let s = ReservationModel::new(ModelConfig::small()).initial_state();
        let mut tagged = s;
        tagged.store[0].tag = PENDING;
        let mut owned = tagged;
        owned.store[0].owner = 1;
        assert_ne!(s, tagged);
        assert_ne!(tagged, owned);
        let same = owned;
        assert_eq!(owned, same);
    }

    /// Actions naming owners, attempts or keys beyond the configuration are not enabled: `step`
    /// returns `None` for them, never panics.
    #[test]
    fn step_with_out_of_range_indices_is_none() {
        let model = ReservationModel::new(ModelConfig::default());
        let s = model.initial_state();
        for action in [
            Action::Reserve { owner: 200, attempt: 0, key: 0 },
            Action::Reserve { owner: 0, attempt: 200, key: 0 },
            Action::Reserve { owner: 0, attempt: 0, key: 200 },
            Action::Confirm { owner: u8::MAX, attempt: u8::MAX },
            Action::Apply { owner: u8::MAX },
        ] {
            assert!(model.step(&s, action).is_none(), "{action:?}");
        }
    }
}
