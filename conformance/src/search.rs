//! The Wing–Gong–Lowe search over one key's history, cut into segments at quiet points and
//! bounded by a step budget: whether some order of the key's operations that respects real time,
//! each acting at one instant of its clock window and never before the one placed before it, gives
//! every recorded result; every state such an order can leave the key in; and, where the budget
//! runs out first, *undecided*, never a pass.
//!
//! # Segments
//!
//! A *quiet point* of a key's history is a place in its call order where every operation called
//! before it has returned before the next one is called: nothing is in flight. Every order that
//! respects real time places the operations before a quiet point before those after it, so the
//! history is judged one segment (the operations between two quiet points) at a time. A segment
//! is searched exhaustively from every *configuration* the one before it can end in (the key's
//! state, and the instant of the last operation placed when that instant still constrains what
//! follows), and hands on the set of configurations it can end in. The history is linearizable
//! when the last segment can be placed whole from some configuration; a segment that no
//! configuration can place whole is where it fails.
//!
//! # The bound
//!
//! A node of a segment's search is (the set `D` of its operations placed, the state `σ`, the last
//! instant `λ`), memoised, so that no node is searched twice. For a segment of `n` operations of
//! which at most `F` are ever in flight at once, whose clock windows are at most `W` ms wide:
//!
//! - `D` is closed under real time (an operation placed, every one that returned before it was
//!   called is placed). Let `m` be the least return among the operations not placed: every
//!   operation placed was called before `m`, and every one that returned before `m` is placed; the
//!   others called before `m` were in flight at `m`, at most `F`, the one returning at `m` among
//!   them and not placed. So `|D| ≤ n · 2^(F−1) + 1`.
//! - `λ` is kept only while it is later than the call-side clock of an operation not yet placed
//!   (otherwise it constrains nothing and is forgotten): with a clock that does not go back, it is
//!   then an instant of the window of an operation in flight, `|λ| ≤ F · (W + 1) + 1`.
//! - `σ` is free, or one owner's confirmation at one of the versions the history names, or one
//!   owner's pending reservation with a set of its holds and an expiry that a reserve of the key
//!   made: `|σ| ≤ 1 + O · V + O · (2^H − 1) · E`, with `O` owners, `H` holds and `V` versions the
//!   history names, and `E ≤ R · (W + 1) + c` expiries, `R` the segment's reserves and `c` the
//!   expiries carried in from the segment before.
//!
//! So a segment's search visits at most `|D| · |λ| · |σ|` nodes, each trying at most `F`
//! operations at `W + 1` instants: polynomial in the segment's length and in `W`, exponential only
//! in `F`. Operations with an unknown outcome add no factor of their own (each is one more way to
//! reach the same states), but they let more of the states be reached. The recorders keep every
//! segment within [`crate::Ceilings`] (by default `F = 4`, `n ≤ 32`, at most 8 unknown outcomes
//! before the key's gate closes, `W ≤ 4`), and the histories of the suite name three owners, two
//! or three holds and four versions: `|D| ≤ 257`, `|λ| ≤ 21`, and `|σ|` at most a few thousand.
//! That product is a loose ceiling; `cargo bench -p reservation-conformance --bench judge`
//! measures the worst segments it can find at the ceilings (built by hand to make the most states,
//! drawn at random, and climbed to from the slowest of those) at about 65,000 steps, 40 ms.
//!
//! # The budget
//!
//! The search of one segment has a budget of [`BUDGET`] steps (a node visited, or one instant of
//! an operation's window tried), fifteen times the worst measured at the ceilings, about a second
//! of one core. A history the recorders shaped is not expected to exhaust it; one built otherwise
//! (a history by hand, eight threads on one key, ceilings lifted) may. Then the search says
//! [`Undecided`], with the segment it could not finish, and the check that asked fails with a
//! headline of its own: the suite could not decide, which is its limitation and not a rule the
//! store broke. The check writes the history where its replay line says and notes narrower
//! ceilings, which its next run records with ([`crate::histories`]).

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use reservation_store::rules::Rule;
use reservation_store::{Instant, StoredReservation, spec};

use crate::expected::lookup_rule;
use crate::history::{Call, Event, Names, Return};

/// Steps (nodes visited, and instants tried) the search of one segment may take: fifteen times the
/// worst segment measured at the default ceilings.
pub const BUDGET: u64 = 1_000_000;

/// A segment the search could not finish within its budget: the history's limits, not the
/// store's fault.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Undecided {
    /// The key's index in the history.
    pub key: usize,
    /// The index, in the key's operations by call, of the segment's first operation.
    pub first: usize,
    /// The segment's operations.
    pub ops: usize,
    /// The most of them in flight at once.
    pub in_flight: usize,
    /// Those whose outcome is unknown (an indeterminate storage error).
    pub unknown: usize,
    /// The widest clock window of its operations, in milliseconds.
    pub window: u64,
    /// The steps the search took before it stopped.
    pub steps: u64,
}

/// What a decision cost.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct Cost {
    /// Search nodes visited.
    pub nodes: u64,
    /// Steps: nodes, and applications of the specification.
    pub steps: u64,
    /// Segments of the key's history.
    pub segments: usize,
    /// Operations of the longest segment.
    pub longest: usize,
    /// The most steps one segment's search took.
    pub most: u64,
}

/// Whether the operation may never have happened: it failed with an indeterminate storage error.
fn unknown(e: &Event) -> bool {
    matches!(e.ret, Return::Storage { indeterminate: true, .. })
}

/// The specification's answer to `e` on `state` at `now`: the next state, if it gives the
/// recorded result (any result, for an indeterminate operation), and the rule that decided it
/// (`None` for a lookup, which writes nothing).
fn apply(
    names: &Names,
    state: &Option<StoredReservation>,
    e: &Event,
    now: Instant,
) -> Option<(Option<StoredReservation>, Option<Rule>)> {
    let any = unknown(e);
    match e.call {
        Call::Op(op) => {
            let s = spec::apply(state.clone(), now, op.map(|o| names.owner(o), |h| names.hold(h)));
            (any || e.ret == Return::Outcome(s.outcome)).then_some((s.next, Some(s.rule)))
        }
        Call::Lookup => {
            let seen = spec::lookup(state.as_ref(), now).cloned();
            (any || e.ret == Return::Lookup(seen)).then(|| (state.clone(), None))
        }
    }
}

/// The key's states met so far, each numbered once, so that a node is a few plain numbers.
#[derive(Default)]
struct States {
    all: Vec<Option<StoredReservation>>,
    ids: HashMap<Option<StoredReservation>, u32>,
}

impl States {
    fn id(&mut self, state: Option<StoredReservation>) -> u32 {
        if let Some(id) = self.ids.get(&state) {
            return *id;
        }
        let id = u32::try_from(self.all.len()).unwrap_or(u32::MAX);
        self.all.push(state.clone());
        self.ids.insert(state, id);
        id
    }

    fn get(&self, id: u32) -> &Option<StoredReservation> {
        &self.all[id as usize]
    }
}

/// A configuration between two segments: a state's number, and the last instant placed when it
/// still constrains the operations to come ([`Instant::ZERO`] when it does not).
type Config = (u32, Instant);

/// The configurations a segment can end in, each with the rule of the operation that last wrote
/// its state (for a report).
type Frontier = HashMap<Config, Option<Rule>>;

/// The budget of one segment's search, and what the key's searches took in all.
struct Budget {
    left: u64,
    spent: u64,
    nodes: u64,
}

impl Budget {
    /// Takes a step; `false` when the segment's budget is spent.
    fn take(&mut self) -> bool {
        self.spent += 1;
        match self.left.checked_sub(1) {
            Some(left) => {
                self.left = left;
                true
            }
            None => false,
        }
    }
}

/// The budget ran out.
struct Exhausted;

/// A node of a segment's search, memoised: the operations placed (`base`: the first one not
/// placed; `window`: which of the 128 after it are), the state's number, the last instant.
type Node = (u32, u128, u32, Instant);

/// What the specification says of operation `op` (its index in the key's operations) on state
/// `state` at `now`: the next state's number and the rule that decided it, when it gives the
/// recorded result.
type Transitions = HashMap<(u32, u32, Instant), Option<(u32, Option<Rule>)>>;

/// One segment's search: its operations (by call), the least call-side clock of the operations
/// after it, the memo, and what it found.
struct Segment<'a, 'b> {
    names: &'a Names,
    ops: &'a [&'a Event],
    /// The index of the segment's first operation among the key's.
    first: usize,
    /// The least `clock_at_call` of the operations after the segment: a last instant not above
    /// it constrains nothing after the segment.
    after: Instant,
    states: &'b mut States,
    transitions: &'b mut Transitions,
    budget: &'b mut Budget,
    memo: HashSet<Node>,
    /// Nodes whose placed operations reach more than 128 past the first not placed.
    wide: HashSet<(Vec<u64>, u32, Instant)>,
    /// `Some` to collect every configuration a whole order ends in; `None` to stop at the first.
    ends: Option<Frontier>,
    /// The rule of the deepest operation that could not be placed, for the report.
    stuck: Option<(usize, Rule)>,
}

impl Segment<'_, '_> {
    fn is_done(done: &[u64], i: usize) -> bool {
        done[i / 64] & (1 << (i % 64)) != 0
    }

    /// `last`, or [`Instant::ZERO`] when it is no later than the call-side clock of every
    /// operation still to place (in this segment and after it): it then constrains nothing.
    fn forget(&self, done: &[u64], last: Instant) -> Instant {
        let undone = (0..self.ops.len()).filter(|&i| !Self::is_done(done, i)).map(|i| self.ops[i].clock_at_call);
        let least = undone.fold(self.after, Instant::min);
        if last <= least { Instant::ZERO } else { last }
    }

    /// Notes the node (`done`, `state`, `last`): `false` when it was met before.
    fn remember(&mut self, done: &[u64], state: u32, last: Instant) -> bool {
        let len = self.ops.len();
        let base = (0..len).find(|&i| !Self::is_done(done, i)).unwrap_or(len);
        let mut window = 0u128;
        let mut fits = true;
        for i in base..len {
            if Self::is_done(done, i) {
                match i - base {
                    d if d < 128 => window |= 1 << d,
                    _ => fits = false,
                }
            }
        }
        match fits {
            true => self.memo.insert((u32::try_from(base).unwrap_or(u32::MAX), window, state, last)),
            false => self.wide.insert((done.to_vec(), state, last)),
        }
    }

    /// The specification's answer to operation `i` of the segment on state `state` at `now`,
    /// through the key's cache of transitions.
    fn transition(&mut self, state: u32, i: usize, now: Instant) -> Option<(u32, Option<Rule>)> {
        let op = u32::try_from(self.first + i).unwrap_or(u32::MAX);
        if let Some(known) = self.transitions.get(&(state, op, now)) {
            return *known;
        }
        let current = self.states.get(state).clone();
        let answer = apply(self.names, &current, self.ops[i], now).map(|(next, rule)| (self.states.id(next), rule));
        self.transitions.insert((state, op, now), answer);
        answer
    }

    /// Searches on from `done` (`count` operations placed) in state `state`, the last placed at
    /// `last`; `written` is the rule of the operation that last wrote `state`. `Ok(true)` when an
    /// order was found and the search stops at the first.
    fn run(
        &mut self,
        done: &mut Vec<u64>,
        count: usize,
        state: u32,
        last: Instant,
        written: Option<Rule>,
    ) -> Result<bool, Exhausted> {
        let last = self.forget(done, last);
        if count == self.ops.len() {
            let Some(ends) = self.ends.as_mut() else { return Ok(true) };
            ends.entry((state, last)).or_insert(written);
            return Ok(false);
        }
        if !self.remember(done, state, last) {
            return Ok(false);
        }
        self.budget.nodes += 1;
        if !self.budget.take() {
            return Err(Exhausted);
        }
        let min_ret = (0..self.ops.len()).filter(|&i| !Self::is_done(done, i)).map(|i| self.ops[i].returned).min();
        let Some(min_ret) = min_ret else { return Ok(true) };
        for i in 0..self.ops.len() {
            let e = self.ops[i];
            if e.called > min_ret {
                break;
            }
            if Self::is_done(done, i) {
                continue;
            }
            done[i / 64] |= 1 << (i % 64);
            // An indeterminate operation may never have happened.
            if unknown(e) && self.run(done, count + 1, state, last, written)? {
                return Ok(true);
            }
            // Each instant of its window not before `last`; of the instants that give one next
            // state, the earliest leaves the most room to the operations after it.
            let mut tried: Vec<u32> = Vec::new();
            let mut placed = false;
            let from = e.clock_at_call.max(last);
            let mut now = from;
            while now <= e.clock_at_return {
                if !self.budget.take() {
                    return Err(Exhausted);
                }
                if let Some((next, rule)) = self.transition(state, i, now) {
                    placed = true;
                    if !tried.contains(&next) {
                        if self.run(done, count + 1, next, now, rule.or(written))? {
                            return Ok(true);
                        }
                        tried.push(next);
                    }
                    // A lookup changes nothing: its earliest instant is the only one to try.
                    if e.call == Call::Lookup {
                        break;
                    }
                }
                if now == Instant::MAX {
                    break;
                }
                now = now.saturating_add_millis(1);
            }
            done[i / 64] &= !(1 << (i % 64));
            if !placed && self.stuck.is_none_or(|(depth, _)| count >= depth) {
                let current = self.states.get(state).clone();
                self.stuck = Some((count, expected_rule(self.names, &current, e, from, written)));
            }
        }
        Ok(false)
    }
}

/// The rule by which the specification decides `e` on `state` at `now`; for a lookup, the rule
/// that decides what it must show ([`lookup_rule`]), given `written`, the rule of the operation
/// that last wrote `state`.
pub(crate) fn expected_rule(
    names: &Names,
    state: &Option<StoredReservation>,
    e: &Event,
    now: Instant,
    written: Option<Rule>,
) -> Rule {
    match e.call {
        Call::Op(op) => spec::apply(state.clone(), now, op.map(|o| names.owner(o), |h| names.hold(h))).rule,
        Call::Lookup => {
            let shown = match &e.ret {
                Return::Lookup(r) => r.as_ref(),
                _ => None,
            };
            lookup_rule(state.as_ref(), shown, now, written).unwrap_or(Rule::D7)
        }
    }
}

/// The segments of `ops` (one key's operations, ordered by call): ranges of indices, cut at every
/// quiet point.
pub fn segments(ops: &[&Event]) -> Vec<Range<usize>> {
    let mut cuts = Vec::new();
    let mut start = 0;
    let mut returned = 0;
    for (i, e) in ops.iter().enumerate() {
        if i > start && returned < e.called {
            cuts.push(start..i);
            start = i;
        }
        returned = returned.max(e.returned);
    }
    if start < ops.len() {
        cuts.push(start..ops.len());
    }
    cuts
}

/// The shape of the operations `ops` (ordered by call) as an [`Undecided`] reports it, with
/// `first` and `steps` left for the caller.
fn shape(ops: &[&Event]) -> Undecided {
    let in_flight = ops
        .iter()
        .enumerate()
        .map(|(i, e)| 1 + ops[..i].iter().filter(|o| o.returned > e.called).count())
        .max()
        .unwrap_or(0);
    let window = ops.iter().map(|e| e.clock_at_return.as_millis().saturating_sub(e.clock_at_call.as_millis())).max();
    Undecided {
        key: 0,
        first: 0,
        ops: ops.len(),
        in_flight,
        unknown: ops.iter().filter(|e| unknown(e)).count(),
        window: window.unwrap_or(0),
        steps: 0,
    }
}

/// One key's history, searched segment by segment, each segment with a budget of its own.
struct Key<'a> {
    names: &'a Names,
    ops: &'a [&'a Event],
    segments: Vec<Range<usize>>,
    /// `least[i]`: the least `clock_at_call` of `ops[i..]`.
    least: Vec<Instant>,
    states: States,
    transitions: Transitions,
    /// What every search of the key took.
    spent: Budget,
    longest: usize,
    /// The most steps one search took.
    most: u64,
}

/// What a segment's search found: the configurations it ends in (empty when none places it
/// whole), or, stopping at the first, whether there is one; and the rule of its deepest operation
/// that could not be placed.
struct Searched {
    ends: Frontier,
    found: bool,
    stuck: Option<Rule>,
}

impl<'a> Key<'a> {
    fn new(names: &'a Names, ops: &'a [&'a Event]) -> Self {
        let mut least = vec![Instant::MAX; ops.len() + 1];
        for i in (0..ops.len()).rev() {
            least[i] = least[i + 1].min(ops[i].clock_at_call);
        }
        let segments = segments(ops);
        let longest = segments.iter().map(|s| s.len()).max().unwrap_or(0);
        Key {
            names,
            ops,
            segments,
            least,
            states: States::default(),
            transitions: Transitions::new(),
            spent: Budget { left: 0, spent: 0, nodes: 0 },
            longest,
            most: 0,
        }
    }

    /// The configurations before the first operation: the key in one of `states`.
    fn start(&mut self, states: &[Option<StoredReservation>]) -> Frontier {
        states.iter().map(|s| ((self.states.id(s.clone()), Instant::ZERO), None)).collect()
    }

    /// Searches `ops[range]` from every configuration of `from`: every configuration it ends in
    /// when `all`, otherwise whether one order places it whole (ignoring what follows it).
    fn search(&mut self, range: Range<usize>, from: &Frontier, all: bool) -> Result<Searched, Undecided> {
        let ops = &self.ops[range.clone()];
        let after = if all { self.least[range.end] } else { Instant::MAX };
        let mut budget = Budget { left: BUDGET, spent: 0, nodes: 0 };
        let mut segment = Segment {
            names: self.names,
            ops,
            first: range.start,
            after,
            states: &mut self.states,
            transitions: &mut self.transitions,
            budget: &mut budget,
            memo: HashSet::new(),
            wide: HashSet::new(),
            ends: all.then(Frontier::new),
            stuck: None,
        };
        let mut found = false;
        // In a fixed order, so that the report's rule does not depend on a hash.
        let mut starts: Vec<(&Config, &Option<Rule>)> = from.iter().collect();
        starts.sort_by_key(|(config, _)| **config);
        for (&(state, last), written) in starts {
            let mut done = vec![0u64; ops.len().div_ceil(64)];
            match segment.run(&mut done, 0, state, last, *written) {
                Ok(true) => {
                    found = true;
                    break;
                }
                Ok(false) => {}
                Err(Exhausted) => {
                    let steps = segment.budget.spent;
                    return Err(Undecided { first: range.start, steps, ..shape(ops) });
                }
            }
        }
        let ends = segment.ends.take().unwrap_or_default();
        let stuck = segment.stuck.map(|(_, r)| r);
        found |= !ends.is_empty();
        self.spent.spent += budget.spent;
        self.spent.nodes += budget.nodes;
        self.most = self.most.max(budget.spent);
        Ok(Searched { ends, found, stuck })
    }

    fn cost(&self) -> Cost {
        Cost {
            nodes: self.spent.nodes,
            steps: self.spent.spent,
            segments: self.segments.len(),
            longest: self.longest,
            most: self.most,
        }
    }

    /// Every configuration the first `upto` segments can end in (`Ok`), or, where one of them no
    /// configuration places whole, that segment's index, the configurations before it and the
    /// rule of its deepest operation that could not be placed (`Err`).
    fn frontier(&mut self, upto: usize) -> Result<Result<Frontier, Failed>, Undecided> {
        let free = self.start(&[None]);
        self.frontier_from(free, upto)
    }

    /// [`Key::frontier`] from the configurations `frontier`.
    fn frontier_from(&mut self, mut frontier: Frontier, upto: usize) -> Result<Result<Frontier, Failed>, Undecided> {
        for s in 0..upto {
            let searched = self.search(self.segments[s].clone(), &frontier, true)?;
            if searched.ends.is_empty() {
                return Ok(Err(Failed { segment: s, before: frontier, stuck: searched.stuck }));
            }
            frontier = searched.ends;
        }
        Ok(Ok(frontier))
    }
}

/// Where a history failed: the segment no configuration places whole, the configurations before
/// it, and the rule of its deepest operation that could not be placed.
struct Failed {
    segment: usize,
    before: Frontier,
    stuck: Option<Rule>,
}

/// A decision on one key's history: its verdict, and what it cost.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Decided {
    /// `Ok` when the operations are linearizable; otherwise the rule of the deepest operation no
    /// order could place, if any was tried.
    pub verdict: Result<(), Option<Rule>>,
    /// What the search took.
    pub cost: Cost,
}

/// Whether the operations `ops` of one key (ordered by call) are linearizable, or
/// [`Undecided`] when a segment's budget ran out first.
pub fn linearizable(names: &Names, ops: &[&Event]) -> Result<Decided, Undecided> {
    linearizable_from(names, ops, &[None])
}

/// Whether the operations `ops` of one key (ordered by call) are linearizable from one of the
/// states `starts` (the key free: `None`), or [`Undecided`].
pub fn linearizable_from(
    names: &Names,
    ops: &[&Event],
    starts: &[Option<StoredReservation>],
) -> Result<Decided, Undecided> {
    let mut key = Key::new(names, ops);
    let last = key.segments.len().saturating_sub(1);
    let first = key.start(starts);
    let verdict = match key.frontier_from(first, last)? {
        Err(failed) => Err(failed.stuck),
        // The last segment needs one order only.
        Ok(frontier) => match key.segments.get(last).cloned() {
            Some(range) => {
                let searched = key.search(range, &frontier, false)?;
                if searched.found { Ok(()) } else { Err(searched.stuck) }
            }
            None => Ok(()),
        },
    };
    Ok(Decided { verdict, cost: key.cost() })
}

/// The shortest prefix (by call) of `ops`, one key's operations, that no order explains, within
/// the first segment that no order places whole: its length and the rule of the deepest operation
/// no order of it could place; `None` when the whole is linearizable. (A prefix that ends inside
/// a segment may fail only because it leaves out an operation called later that took effect
/// earlier; at a quiet point it cannot.) Where the budget runs out after the failing segment is
/// found, that whole segment is the prefix.
pub fn shortest_failing_prefix(names: &Names, ops: &[&Event]) -> Result<Option<(usize, Option<Rule>)>, Undecided> {
    let mut key = Key::new(names, ops);
    let all = key.segments.len();
    let Err(failed) = key.frontier(all)? else { return Ok(None) };
    let range = key.segments[failed.segment].clone();
    let before = failed.before;
    for end in range.start + 1..range.end {
        // The failure is decided: a budget spent on its shortest prefix leaves the whole segment.
        let Ok(searched) = key.search(range.start..end, &before, false) else { break };
        if !searched.found {
            return Ok(Some((end, searched.stuck)));
        }
    }
    Ok(Some((range.end, failed.stuck)))
}

/// Every state in which some order of all of `ops` (one key's operations, ordered by call) that
/// respects real time and gives every recorded result leaves the key: what a history allows the
/// key to hold after it. Empty when no order does.
pub fn final_states(names: &Names, ops: &[&Event]) -> Result<Vec<Option<StoredReservation>>, Undecided> {
    let mut key = Key::new(names, ops);
    let all = key.segments.len();
    let frontier = key.frontier(all)?.unwrap_or_default();
    let mut ids: Vec<u32> = frontier.keys().map(|(state, _)| *state).collect();
    ids.sort_unstable();
    ids.dedup();
    Ok(ids.into_iter().map(|id| key.states.get(id).clone()).collect())
}
