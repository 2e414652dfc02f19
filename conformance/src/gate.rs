//! How the recorders shape the histories they record so that the judge ([`crate::search`]) can
//! always decide them: the [`Ceilings`] of a history, and the [`Gates`] that hold them.
//!
//! Every operation a recorder runs on a key passes the key's gate first, and every clock move
//! the suite makes while operations run passes the gates too:
//!
//! - at most [`Ceilings::in_flight`] operations are in flight on one key at once;
//! - once [`Ceilings::segment`] operations have started on a key since it was last quiet (nothing
//!   in flight), or [`Ceilings::unknown`] of them have ended with an unknown outcome (an
//!   indeterminate storage error), the key's gate closes until the key is quiet again: a quiet
//!   point, where the judge cuts the history;
//! - a clock move that would widen the clock window of an operation in flight beyond
//!   [`Ceilings::window`] milliseconds waits until no key has an operation in flight, and no
//!   operation starts meanwhile.
//!
//! A multi-key lookup enters the gates of all its keys at once, so that nothing waits while it
//! holds a gate. Every wait is bounded: a store that does not answer for [`Gates::PATIENCE`] lets
//! the wait go on regardless (the history may then exceed its ceilings, and the judge's budget
//! is the safety net).

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant as WallInstant};

use reservation_store::{Clock, Instant, ManualClock};

/// The most a recorded history asks of the judge, per key: see the module [`crate::search`] for
/// the search's worst case as a function of them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Ceilings {
    /// Most operations in flight on one key at once (at least 1).
    pub in_flight: usize,
    /// Most operations started on one key between two quiet points (at least 1).
    pub segment: usize,
    /// Most operations with an unknown outcome on one key between two quiet points (at least 1).
    pub unknown: usize,
    /// The widest clock window of an operation, in milliseconds, that a clock move made while it
    /// is in flight may give it.
    pub window: u64,
}

impl Default for Ceilings {
    /// Four operations in flight on a key, 32 between quiet points, 8 of them with an unknown
    /// outcome, windows of 4 ms.
    fn default() -> Self {
        Ceilings { in_flight: 4, segment: 32, unknown: 8, window: 4 }
    }
}

impl Ceilings {
    /// Ceilings with no bound: what a history recorded without gates may hold.
    pub const NONE: Ceilings =
        Ceilings { in_flight: usize::MAX, segment: usize::MAX, unknown: usize::MAX, window: u64::MAX };

    /// These ceilings, each at least 1.
    fn sane(self) -> Self {
        Ceilings {
            in_flight: self.in_flight.max(1),
            segment: self.segment.max(1),
            unknown: self.unknown.max(1),
            window: self.window,
        }
    }

    /// These ceilings, each at most half of what `undecided`'s segment held (and at least 1): what
    /// the next run of a check records with after the judge could not decide that segment.
    pub fn narrower_than(self, undecided: &crate::search::Undecided) -> Self {
        let half = |v: usize| (v / 2).max(1);
        self.min(Ceilings {
            in_flight: half(undecided.in_flight),
            segment: half(undecided.ops),
            unknown: half(undecided.unknown),
            window: undecided.window / 2,
        })
        .sane()
    }

    /// The narrower of `self` and `other`, ceiling by ceiling.
    pub fn min(self, other: Ceilings) -> Self {
        Ceilings {
            in_flight: self.in_flight.min(other.in_flight),
            segment: self.segment.min(other.segment),
            unknown: self.unknown.min(other.unknown),
            window: self.window.min(other.window),
        }
    }
}

impl std::fmt::Display for Ceilings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let most = |n: u64| if n == u64::MAX { "any number of".to_owned() } else { n.to_string() };
        let size = |n: usize| most(u64::try_from(n).unwrap_or(u64::MAX));
        write!(
            f,
            "{} operations in flight on a key, {} between quiet points, {} unknown outcomes between quiet points, \
             clock windows of {} ms",
            size(self.in_flight),
            size(self.segment),
            size(self.unknown),
            most(self.window)
        )
    }
}

/// One key's gate.
#[derive(Default)]
struct Gate {
    /// The `clock_at_call` of each operation in flight.
    in_flight: Vec<Instant>,
    /// Operations started since the key was last quiet.
    started: usize,
    /// Operations ended with an unknown outcome since the key was last quiet.
    unknown: usize,
    /// Closed until the key is quiet.
    closed: bool,
}

impl Gate {
    fn admits(&self, ceilings: Ceilings) -> bool {
        !self.closed && self.in_flight.len() < ceilings.in_flight
    }
}

struct State {
    gates: HashMap<usize, Gate>,
    /// Clock moves waiting for every key to be quiet: while there is one, no operation starts.
    moving: usize,
}

impl State {
    fn in_flight(&self) -> usize {
        self.gates.values().map(|g| g.in_flight.len()).sum()
    }

    /// The earliest `clock_at_call` of an operation in flight.
    fn earliest(&self) -> Option<Instant> {
        self.gates.values().flat_map(|g| g.in_flight.iter().copied()).min()
    }
}

/// The gates of one recording: one per key, and the clock's moves.
pub(crate) struct Gates {
    ceilings: Ceilings,
    state: Mutex<State>,
    changed: Condvar,
}

/// A key's operation admitted by its gate: its `clock_at_call`.
pub(crate) struct Entered {
    pub(crate) clock_at_call: Instant,
}

impl Gates {
    /// How long a wait at a gate lasts before it goes on regardless.
    pub(crate) const PATIENCE: Duration = Duration::from_secs(30);

    /// The gates of a recording that keeps `ceilings`.
    pub(crate) fn new(ceilings: Ceilings) -> Self {
        Gates {
            ceilings: ceilings.sane(),
            state: Mutex::new(State { gates: HashMap::new(), moving: 0 }),
            changed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits on `state` until `ready` holds, for at most [`Gates::PATIENCE`]; the state then.
    fn wait<'a>(&self, mut state: MutexGuard<'a, State>, ready: impl Fn(&State) -> bool) -> MutexGuard<'a, State> {
        let began = WallInstant::now();
        while !ready(&state) {
            let Some(left) = Self::PATIENCE.checked_sub(began.elapsed()) else { break };
            state = self.changed.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        state
    }

    /// Enters the gates of every key of `keys` at once, reading `clock` for the operation's
    /// `clock_at_call` once they admit it.
    pub(crate) fn enter(&self, keys: &[usize], clock: &ManualClock) -> Entered {
        let ceilings = self.ceilings;
        let state = self.lock();
        let mut state = self
            .wait(state, |s| s.moving == 0 && keys.iter().all(|k| s.gates.get(k).is_none_or(|g| g.admits(ceilings))));
        let clock_at_call = clock.now();
        for key in keys {
            let gate = state.gates.entry(*key).or_default();
            gate.in_flight.push(clock_at_call);
            gate.started += 1;
            if gate.started >= ceilings.segment {
                gate.closed = true;
            }
        }
        Entered { clock_at_call }
    }

    /// Leaves the gates of `keys`, entered by an operation called at `clock_at_call`; `unknown`
    /// holds, key by key, whether its outcome there is unknown.
    pub(crate) fn leave(&self, keys: &[usize], clock_at_call: Instant, unknown: &[bool]) {
        let ceilings = self.ceilings;
        let mut state = self.lock();
        for (i, key) in keys.iter().enumerate() {
            let Some(gate) = state.gates.get_mut(key) else { continue };
            if let Some(at) = gate.in_flight.iter().position(|c| *c == clock_at_call) {
                gate.in_flight.swap_remove(at);
            }
            if unknown.get(i).copied().unwrap_or(false) {
                gate.unknown += 1;
                if gate.unknown >= ceilings.unknown {
                    gate.closed = true;
                }
            }
            if gate.in_flight.is_empty() {
                *gate = Gate::default();
            }
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Moves `clock` on by `millis`: at once when no operation in flight would see its clock
    /// window grow beyond [`Ceilings::window`]; otherwise once nothing is in flight, no
    /// operation starting meanwhile.
    pub(crate) fn advance(&self, clock: &ManualClock, millis: u64) {
        self.move_clock(clock, |now| now.saturating_add_millis(millis));
    }

    /// Sets `clock` to `at`, as [`Gates::advance`] moves it.
    pub(crate) fn set(&self, clock: &ManualClock, at: Instant) {
        self.move_clock(clock, |_| at);
    }

    fn move_clock(&self, clock: &ManualClock, to: impl Fn(Instant) -> Instant) {
        let window = self.ceilings.window;
        let mut state = self.lock();
        let fits = |s: &State| {
            let now = clock.now();
            s.earliest().is_none_or(|earliest| {
                let to = to(now);
                to >= earliest && to.as_millis() - earliest.as_millis() <= window
            })
        };
        if fits(&state) {
            clock.set(to(clock.now()));
            return;
        }
        state.moving += 1;
        state = self.wait(state, |s| s.in_flight() == 0);
        clock.set(to(clock.now()));
        state.moving -= 1;
        drop(state);
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use reservation_store::{Clock, Instant, ManualClock};

    use super::{Ceilings, Gates};

    /// How many clock moves wait for quiet now.
    fn waiting(gates: &Gates) -> usize {
        gates.lock().moving
    }

    /// A clock move that must wait for quiet keeps every operation out until it has moved, even
    /// when a smaller move that fits is made meanwhile: otherwise operations go on starting, the
    /// keys are never quiet, and the wait (a fault check's clock jump) lasts until they happen to
    /// be, hundreds of milliseconds late, which thins the fault check's schedule.
    #[test]
    fn a_clock_move_that_waits_is_not_let_go_by_a_move_that_fits() {
        let gates = Gates::new(Ceilings::default());
        let clock = ManualClock::new(Instant::from_millis(1_000));
        let op = gates.enter(&[0], &clock);
        std::thread::scope(|scope| {
            let jump = scope.spawn(|| gates.advance(&clock, 1_000));
            for _ in 0..10_000 {
                if waiting(&gates) == 1 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(waiting(&gates), 1, "the jump waits for the operation in flight");
            // An operation on another key, whose gate is open, waits for the jump all the same.
            let other = scope.spawn(|| {
                let op = gates.enter(&[1], &clock);
                gates.leave(&[1], op.clock_at_call, &[false]);
                op.clock_at_call
            });
            // Time for it to reach the gate (were it let in now, it would be called before the jump).
            std::thread::sleep(Duration::from_millis(50));
            gates.advance(&clock, 1);
            assert_eq!(clock.now(), Instant::from_millis(1_001), "a move within the window is made at once");
            assert_eq!(waiting(&gates), 1, "the jump still waits, and keeps operations out");
            gates.leave(&[0], op.clock_at_call, &[false]);
            jump.join().expect("the jump ends once the key is quiet");
            let called = other.join().expect("the other operation ends");
            assert_eq!(called, Instant::from_millis(2_001), "the other operation started after the jump");
        });
        assert_eq!(clock.now(), Instant::from_millis(2_001));
        assert_eq!(waiting(&gates), 0, "no move waits once the jump is made");
        let next = gates.enter(&[0], &clock);
        assert_eq!(next.clock_at_call, Instant::from_millis(2_001), "operations start again");
    }
}
