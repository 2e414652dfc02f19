//! The model's unit tests: the protocol's steps, and the reductions of a search checked state by
//! state against the unreduced model.

use std::collections::HashSet;

use stateright::Model;

use reservation_store::spec::{self, BitHolds, Reservation, Step};
use reservation_store::{Instant, Outcome};

use crate::ModelConfig;
use crate::action::{Action, Op};
use crate::config::{MAX_KEYS, MAX_OWNERS};
use crate::model::ReservationModel;
use crate::reduced::Reduced;
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
        let inline = threads.spawn(|| reachable(&Reduced::new(&ReservationModel::new(config)).taking_eager_steps()));
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
    let from_now =
        |states: &HashSet<State>| states.iter().map(|s| store_and_logs_from_now(&undeleted(s))).collect::<HashSet<_>>();
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
    crate::model::properties::PROPERTIES.iter().all(|p| (p.holds)(model, a) == (p.holds)(model, b))
}

/// What a step's store operations decided: key, outcome and rule (the operation itself may
/// differ between twins: a deletion releases with `ANY_VERSION`).
fn decided(reports: &crate::action::Reports) -> [Option<(u8, Outcome, reservation_store::rules::Rule)>; 2] {
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
    assert!(crate::reduced::only_spent(&held, &spent, conflict));
    assert!(!crate::reduced::only_spent(&s, &held, taken));
    assert_eq!(spent.store, held.store);
    assert!(reduced.next_state(&held, conflict).is_none());
    assert!(reduced.protocol().coverage().rules().contains(reservation_store::rules::Rule::R5));
    // Only an idle attempt is spent so: `held`'s attempt holds its key, and a successor with
    // it done and nothing else changed is not one to leave out.
    let mut done = held;
    *crate::state::attempt_mut(&mut done, 0, 0).expect("the attempt") =
        crate::state::Attempt { phase: crate::state::Phase::Done, ..Default::default() };
    assert!(!crate::reduced::only_spent(&held, &done, taken));
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
