//! The protocol as a stateright model: the actions it enables, its transitions, and (in
//! [`properties`]) what it checks.
//!
//! Every change to the store is one call of a function of `reservation_store::spec`; the model
//! decides only which operations are enabled (the protocol and its timing assumptions) and
//! observes what they did (the step properties). It reduces nothing: a check searches it through
//! [`crate::reduced::Reduced`].

pub(crate) mod properties;

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use reservation_store::rules::Rule;
use reservation_store::spec::{self, BitHolds, HoldBit, HoldSet, Reservation, Step};
use reservation_store::{Instant, Operation, Outcome, ReleaseVersion, Ttl};
use stateright::{Model, Property};

use crate::action::{Action, Op, OpReport, Reports};
use crate::config::{Assumption, MAX_ATTEMPTS, MAX_KEYS, MAX_OWNERS, ModelConfig};
use crate::coverage::{Coverage, Scenario};
use crate::state::*;
use properties::{ALWAYS, checked_all};

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
/// method's default), a search reduced as docs/model.md argues
/// ([`Reduced`](crate::reduced::Reduced)) decides each.
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
    /// [`spec::apply`], or the substitute of [`ReservationModel::with_transition`]. Inlined: a
    /// check calls it for each store operation (2.2 million at the default configuration), and as
    /// a call of its own it cost the check about 1 % of its instructions.
    #[inline]
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
