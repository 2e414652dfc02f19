//! The model as a check searches it, with the reductions of docs/model.md.

use std::sync::Arc;

use reservation_store::{Operation, ReleaseVersion};
use stateright::{Model, Property, Representative};

use crate::action::Action;
use crate::model::properties::{CHECKER_NAMES, checked_all};
use crate::model::{LeaveOut, ReservationModel, fact_op};
use crate::recent::Recent;
use crate::state::*;
use crate::symmetry::{attempts_mirror, keys_mirror, owners_mirror};

/// The protocol's model as a check searches it: the same states, actions and properties, less
/// what the reductions of docs/model.md leave out, each turned on by the check that uses it. The
/// checker knows its always-properties by their [`CHECKER_NAMES`] rather than by their sentences
/// ([`ALWAYS`](crate::ALWAYS)): the checks translate the names back. The Explorer, which shows
/// the sentences, serves the model itself.
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
