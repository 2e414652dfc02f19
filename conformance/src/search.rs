//! The Wing–Gong–Lowe search over one key's history, with a memo of (linearized set, state, last
//! instant): whether some order of its operations that respects real time, each acting at one
//! instant of its clock window and never before the one placed before it, gives every recorded
//! result; and every state such an order can leave the key in.

use std::collections::HashSet;

use reservation_store::rules::Rule;
use reservation_store::{Instant, StoredReservation, spec};

use crate::expected::lookup_rule;
use crate::history::{Call, Event, Names, Return};

/// The specification's answer to `e` on `state` at `now`: the next state, if it gives the
/// recorded result (any result, for an indeterminate operation), and the rule that decided it
/// (`None` for a lookup, which writes nothing).
fn apply(
    names: &Names,
    state: &Option<StoredReservation>,
    e: &Event,
    now: Instant,
) -> Option<(Option<StoredReservation>, Option<Rule>)> {
    let any = matches!(e.ret, Return::Storage { indeterminate: true, .. });
    let (next, ok, rule) = match e.call {
        Call::Op(op) => {
            let s = spec::apply(state.clone(), now, op.map(|o| names.owner(o), |h| names.hold(h)));
            (s.next, any || e.ret == Return::Outcome(s.outcome), Some(s.rule))
        }
        Call::Lookup => {
            let seen = spec::lookup(state.as_ref(), now).cloned();
            (state.clone(), any || e.ret == Return::Lookup(seen), None)
        }
    };
    ok.then_some((next, rule))
}

/// A search node: the linearized operations (a bit set), the key's state, and the instant of the
/// last operation placed.
type Node = (Vec<u64>, Option<StoredReservation>, Instant);

/// The WGL search over one key's operations (ordered by call): whether some order that respects
/// real time, with instants that never go back, gives every recorded result.
struct Search<'a> {
    names: &'a Names,
    ops: &'a [&'a Event],
    memo: HashSet<Node>,
    nodes: u64,
    /// The rule of the deepest operation that could not be placed, for the report.
    stuck: Option<(usize, Rule)>,
    /// `Some` to collect every state a whole order ends in ([`final_states`]) rather than stop at
    /// the first order found.
    found: Option<Vec<Option<StoredReservation>>>,
}

/// Most states [`final_states`] collects, and most search nodes it visits.
const MOST_FOUND: usize = 64;
const MOST_NODES: usize = 200_000;

impl Search<'_> {
    /// `written` is the rule of the operation that last wrote `state`, for the report.
    fn run(
        &mut self,
        done: &mut Vec<u64>,
        count: usize,
        state: &Option<StoredReservation>,
        last: Instant,
        written: Option<Rule>,
    ) -> bool {
        if count == self.ops.len() {
            let Some(found) = self.found.as_mut() else { return true };
            if !found.contains(state) {
                found.push(state.clone());
            }
            return false;
        }
        if self.found.as_ref().is_some_and(|f| f.len() >= MOST_FOUND || self.memo.len() >= MOST_NODES) {
            return false;
        }
        if !self.memo.insert((done.clone(), state.clone(), last)) {
            return false;
        }
        self.nodes += 1;
        let is_done = |done: &Vec<u64>, i: usize| done[i / 64] & (1 << (i % 64)) != 0;
        let min_ret = (0..self.ops.len()).filter(|&i| !is_done(done, i)).map(|i| self.ops[i].returned).min();
        let Some(min_ret) = min_ret else { return true };
        for i in 0..self.ops.len() {
            let e = self.ops[i];
            if e.called > min_ret {
                break;
            }
            if is_done(done, i) {
                continue;
            }
            done[i / 64] |= 1 << (i % 64);
            // An indeterminate operation may never have happened.
            if matches!(e.ret, Return::Storage { indeterminate: true, .. })
                && self.run(done, count + 1, state, last, written)
            {
                return true;
            }
            // Each instant of its window not before `last`; of the instants that give one next
            // state, the earliest leaves the most room to the operations after it.
            let mut tried: Vec<Option<StoredReservation>> = Vec::new();
            let mut placed = false;
            let from = e.clock_at_call.max(last);
            let mut now = from;
            while now <= e.clock_at_return {
                if let Some((next, rule)) = apply(self.names, state, e, now) {
                    placed = true;
                    if !tried.contains(&next) {
                        if self.run(done, count + 1, &next, now, rule.or(written)) {
                            return true;
                        }
                        tried.push(next);
                    }
                }
                if now == Instant::MAX {
                    break;
                }
                now = now.saturating_add_millis(1);
            }
            done[i / 64] &= !(1 << (i % 64));
            if !placed && self.stuck.is_none_or(|(depth, _)| count >= depth) {
                self.stuck = Some((count, expected_rule(self.names, state, e, from, written)));
            }
        }
        false
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

/// Whether the operations `ops` of one key (ordered by call) are linearizable; if not, the rule
/// of the deepest operation no order could place, if any operation was tried.
pub(crate) fn linearizable(names: &Names, ops: &[&Event]) -> Result<u64, Option<Rule>> {
    let mut search = Search { names, ops, memo: HashSet::new(), nodes: 0, stuck: None, found: None };
    let mut done = vec![0u64; ops.len().div_ceil(64)];
    if search.run(&mut done, 0, &None, Instant::ZERO, None) {
        Ok(search.nodes)
    } else {
        Err(search.stuck.map(|(_, r)| r))
    }
}

/// Every state in which some order of all of `ops` (one key's operations, ordered by call) that
/// respects real time and gives every recorded result leaves the key: what a history allows the
/// key to hold after it. The search of [`linearizable`], going on past the first order found; at
/// most 64 states, and it stops after 200,000 nodes (with what it found by then).
pub(crate) fn final_states(names: &Names, ops: &[&Event]) -> Vec<Option<StoredReservation>> {
    let mut search = Search { names, ops, memo: HashSet::new(), nodes: 0, stuck: None, found: Some(Vec::new()) };
    let mut done = vec![0u64; ops.len().div_ceil(64)];
    search.run(&mut done, 0, &None, Instant::ZERO, None);
    search.found.unwrap_or_default()
}
