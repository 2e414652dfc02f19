//! Recording a history: running operations on a store from several threads and stamping each
//! with its call and return on one shared counter and the store's clock around it
//! ([`Recorder`]), and the one contended workload ([`Contender`]) that the linearizability check
//! and the fault check run.

use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};

use reservation_store::{
    Clock, Key, ManualClock, Operation, ReleaseVersion, ReservationScope, ReservationStore, Ttl, Version,
};

use crate::entry::{Entry, call};
use crate::erased::{DynHarness, Erased};
use crate::gate::{Ceilings, Gates};
use crate::harness::{Harness, START};
use crate::history::{Call, Event, HOLDS, KEYS, Names, OWNERS, Return, entry};
use crate::protocol::ProtocolError;
use crate::show::{panic_message, show_error};

/// Operations each thread runs in one round before the clock moves.
pub(crate) const ROUND: usize = 16;
/// The longest time to live of the check's reservations, in milliseconds.
pub(crate) const MAX_TTL: u64 = 30;

/// A tiny deterministic generator, one per thread.
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A call on the round's hot key three times in four, so that threads collide on one key.
pub(crate) fn random_call(r: &mut XorShift, hot: usize) -> (usize, Call) {
    let key = if r.below(4) == 0 { r.below(KEYS as u64) as usize } else { hot };
    let owner = r.below(OWNERS as u64) as u8;
    let hold = r.below(HOLDS as u64) as u8;
    let version = Version::from_u64(r.below(4));
    let call = match r.below(14) {
        0..=4 => Ttl::from_millis(1 + r.below(MAX_TTL))
            .map_or(Call::Lookup, |ttl| Call::Op(Operation::Reserve { owner, hold, ttl })),
        5..=7 => Call::Op(Operation::Confirm { owner, version }),
        8 | 9 => Call::Op(Operation::Release { owner, version: ReleaseVersion::Any }),
        10 => Call::Op(Operation::Release { owner, version: ReleaseVersion::At(version) }),
        11 | 12 => Call::Op(Operation::Abandon { owner, hold }),
        _ => Call::Lookup,
    };
    (key, call)
}

async fn invoke<S: ReservationStore>(store: &S, names: &Names, k: &Key, op: Call, entry: Entry) -> Return {
    let scope = &names.scope;
    match op {
        Call::Op(op) => {
            let operation = op.map(|o| names.owner(o), |h| names.hold(h));
            call(store, entry, scope, k, operation).await.map_or_else(error_return, Return::Outcome)
        }
        Call::Lookup => store.lookup(scope, k).await.map_or_else(error_return, Return::Lookup),
    }
}

/// What a store's error returns in a history.
fn error_return(e: reservation_store::StoreError) -> Return {
    match e {
        reservation_store::StoreError::Storage(s) => match ProtocolError::of(&s) {
            Some(p) => Return::Protocol(p.to_string()),
            None => {
                Return::Storage { message: reservation_store::error_chain(&s), indeterminate: s.is_indeterminate() }
            }
        },
        other => Return::Error(show_error(&other)),
    }
}

/// Runs a history's operations on a store and stamps each: its call and return on one shared
/// counter, and the clock just before and just after. Every operation passes its key's gate, and
/// every clock move the gates ([`crate::gate`]), so that the history keeps its ceilings.
pub(crate) struct Recorder<'a, H> {
    pub(crate) harness: &'a H,
    pub(crate) names: &'a Names,
    pub(crate) clock: &'a ManualClock,
    pub(crate) stamp: &'a AtomicU64,
    pub(crate) gates: &'a Gates,
}

/// Whether `ret` leaves its operation's outcome unknown.
fn unknown(ret: &Return) -> bool {
    matches!(ret, Return::Storage { indeterminate: true, .. })
}

impl<H: Harness> Recorder<'_, H> {
    /// Moves the clock on by `millis`, through the gates.
    pub(crate) fn advance(&self, millis: u64) {
        self.gates.advance(self.clock, millis);
    }

    /// Sets the clock to `at`, through the gates.
    pub(crate) fn set_clock(&self, at: reservation_store::Instant) {
        self.gates.set(self.clock, at);
    }

    /// Runs `call` on `store` from `(thread, round)`, on the key of index `key.0`, named `key.1`;
    /// a panic of the store is its result.
    pub(crate) fn run(
        &self,
        store: &H::Store,
        (thread, round): (usize, usize),
        key: (usize, &Key),
        call: Call,
    ) -> Event {
        let clock_at_call = self.gates.enter(&[key.0], self.clock).clock_at_call;
        let called = self.stamp.fetch_add(1, Ordering::SeqCst);
        let ret = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.harness.block_on(invoke(store, self.names, key.1, call, entry(called)))
        }))
        .unwrap_or_else(|p| Return::Error(format!("the store panicked: {}", panic_message(&*p))));
        let returned = self.stamp.fetch_add(1, Ordering::SeqCst);
        let clock_at_return = self.clock.now();
        self.gates.leave(&[key.0], clock_at_call, &[unknown(&ret)]);
        Event { thread, round, clock_at_call, clock_at_return, key: key.0, call, ret, called, returned }
    }

    /// Looks up `keys` (each an index and its name) on `store` from `thread` at once
    /// ([`Harness::lookups`]): they share one call and one return stamp.
    pub(crate) fn lookups(&self, store: &H::Store, thread: usize, keys: &[(usize, Key)]) -> Vec<Event> {
        let scope = &self.names.scope;
        let asked: Vec<(&ReservationScope, &Key)> = keys.iter().map(|(_, k)| (scope, k)).collect();
        let indices: Vec<usize> = keys.iter().map(|(i, _)| *i).collect();
        let clock_at_call = self.gates.enter(&indices, self.clock).clock_at_call;
        let called = self.stamp.fetch_add(1, Ordering::SeqCst);
        let answers = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.harness.lookups(store, &asked)))
            .map_err(|p| format!("the store panicked: {}", panic_message(&*p)));
        let returned = self.stamp.fetch_add(1, Ordering::SeqCst);
        let clock_at_return = self.clock.now();
        let count = keys.len();
        let answers: Vec<Return> = match answers {
            Ok(answers) if answers.len() == count => {
                answers.into_iter().map(|a| a.map_or_else(error_return, Return::Lookup)).collect()
            }
            Ok(answers) => {
                let message = format!("the harness gave {} answers to {count} lookups", answers.len());
                vec![Return::Error(message); count]
            }
            Err(message) => vec![Return::Error(message); count],
        };
        let unknowns: Vec<bool> = answers.iter().map(unknown).collect();
        self.gates.leave(&indices, clock_at_call, &unknowns);
        keys.iter()
            .zip(answers)
            .map(|((key, _), ret)| Event {
                thread,
                round: 0,
                clock_at_call,
                clock_at_return,
                key: *key,
                call: Call::Lookup,
                ret,
                called,
                returned,
            })
            .collect()
    }
}
/// The generators of thread `t` of a history of seed `seed`: its own, for its calls, and the one
/// every thread shares, for the rounds' clock moves and hot keys ([`next_round`]).
fn generators(seed: u64, t: usize) -> (XorShift, XorShift) {
    (XorShift(seed ^ (0x2545_f491_4f6c_dd1d_u64.wrapping_mul(t as u64 + 1)) | 1), XorShift(seed | 1))
}

/// The next round's clock move (often zero) and hot key, drawn from the shared generator.
fn next_round(mover: &mut XorShift) -> (u64, usize) {
    let step = if mover.below(2) == 0 { 0 } else { mover.below(25) };
    (step, mover.below(KEYS as u64) as usize)
}

/// The event that stands for thread `t`, which panicked outside a store call with `payload`.
pub(crate) fn panicked(t: usize, payload: &(dyn std::any::Any + Send)) -> Event {
    Event {
        thread: t,
        round: 0,
        clock_at_call: START,
        clock_at_return: START,
        key: 0,
        call: Call::Lookup,
        ret: Return::Error(format!("thread {t} panicked: {}", panic_message(payload))),
        called: 0,
        returned: 0,
    }
}

/// One contended worker's operations: random calls, on the round's hot key three times in four
/// ([`random_call`]), [`ROUND`] of them a round; each round starts with a clock move drawn from
/// the generator every thread shares ([`next_round`]), and during a round thread 0 moves the clock
/// by a millisecond after one operation in four, so that other threads' operations see it move.
pub(crate) struct Contender {
    thread: usize,
    /// The thread's own generator, and the shared one ([`generators`]).
    r: XorShift,
    mover: XorShift,
    round: usize,
    in_round: usize,
    hot: usize,
}

impl Contender {
    /// Thread `thread`'s worker of a history of seed `seed`.
    pub(crate) fn new(seed: u64, thread: usize) -> Self {
        let (r, mover) = generators(seed, thread);
        Contender { thread, r, mover, round: 0, in_round: 0, hot: 0 }
    }

    /// Runs the worker's next operation on `store`. When it starts a round, `start` is given the
    /// round's clock move and the round first: it moves the clock, or leaves it to another thread.
    pub(crate) fn step<H: Harness>(
        &mut self,
        recorder: &Recorder<'_, H>,
        store: &H::Store,
        start: impl FnOnce(u64, usize),
    ) -> Event {
        if self.in_round == 0 {
            let (step, hot) = next_round(&mut self.mover);
            self.hot = hot;
            start(step, self.round);
        }
        let (key, call) = random_call(&mut self.r, self.hot);
        let e = recorder.run(store, (self.thread, self.round), (key, &recorder.names.keys[key]), call);
        if self.thread == 0 && self.r.below(4) == 0 {
            recorder.advance(1);
        }
        self.in_round += 1;
        if self.in_round == ROUND {
            self.in_round = 0;
            self.round += 1;
        }
        e
    }
}

/// Runs `ops` operations (about; whole rounds) from `threads` threads on a fresh store of
/// `harness` and returns the history, ordered by call: each thread a `Contender`. Between
/// rounds the clock moves by a random step (often zero); during a round thread 0 moves it by a
/// millisecond after one operation in four, so that other threads' operations see it move. The
/// history keeps the default [`Ceilings`] ([`record_with`]).
pub fn record(harness: &dyn DynHarness, threads: usize, ops: usize, seed: u64) -> (Names, Vec<Event>) {
    record_with(harness, threads, ops, seed, Ceilings::default())
}

/// [`record`], keeping `ceilings` (the gates): at most `ceilings.in_flight` operations in
/// flight on one key, a quiet point on every key at least every `ceilings.segment` operations and
/// `ceilings.unknown` unknown outcomes, and clock moves that widen no window beyond
/// `ceilings.window`.
pub fn record_with(
    harness: &dyn DynHarness,
    threads: usize,
    ops: usize,
    seed: u64,
    ceilings: Ceilings,
) -> (Names, Vec<Event>) {
    let harness = &Erased::new(harness);
    let threads = threads.max(1);
    let names = Names::new();
    let clock = ManualClock::new(START);
    let store = harness.store(clock.clone());
    let rounds = ops.div_ceil(threads * ROUND).max(1);
    let stamp = AtomicU64::new(0);
    let gates = Gates::new(ceilings);
    let recorder = Recorder { harness, names: &names, clock: &clock, stamp: &stamp, gates: &gates };
    let barrier = Barrier::new(threads);
    let mut events: Vec<Event> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (store, barrier, recorder) = (&store, &barrier, &recorder);
                scope.spawn(move || {
                    let mut worker = Contender::new(seed, t);
                    // Every thread draws the same move and hot key; the leader applies the move
                    // while the others wait, so every round starts together.
                    let start = |step: u64, round: usize| {
                        if barrier.wait().is_leader() && round > 0 {
                            recorder.advance(step);
                        }
                        barrier.wait();
                    };
                    (0..rounds * ROUND).map(|_| worker.step(recorder, store, start)).collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().enumerate().flat_map(|(t, h)| h.join().unwrap_or_else(|p| vec![panicked(t, &*p)])).collect()
    });
    events.sort_by_key(|e| e.called);
    (names, events)
}
