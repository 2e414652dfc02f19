//! The fault check's strategy over the harm runner ([`crate::harm`]): contended workers
//! ([`Contender`]) and ledger workers record a history on the store while the nemesis fires
//! faults on a seeded schedule, and after a fault that may lose writes looks up every
//! acknowledged confirmation; a restart stops every worker and starts them again on the reopened
//! store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant as WallInstant};

use reservation_store::{Key, Operation, Ttl, Version};

use super::judge::acknowledged_confirmation;
use super::{CHECK, FaultSettings};
use crate::failure::Failure;
use crate::harm::Runner;
use crate::harness::{Fault, Harness};
use crate::history::{Call, Event, KEYS, key_named};
use crate::record::{Contender, XorShift, panicked};
use crate::show::panic_message;

/// Contended workers.
const CONTENDED: usize = 4;
/// Ledger workers.
const LEDGERS: usize = 2;
/// The time to live of a ledger key's reservation, in milliseconds: long enough that owner B's
/// reserve right after the confirmation meets it live, whether or not the confirmation happened.
const LEDGER_TTL: u64 = 200;
/// How far a [`Fault::ClockJump`] moves the clock, in milliseconds: past every time to live of
/// the run.
const JUMP: u64 = 1_000;
/// Owner A of the ledger keys, and owner B, by their index in [`crate::history::Names::owners`].
const OWNER_A: u8 = 0;
const OWNER_B: u8 = 2;
/// Where the nemesis fires its faults, as a harm's point says.
const POINT: &str = "on the schedule";

/// What the threads of a run share.
pub(super) struct World<'a, H: Harness> {
    runner: Runner<'a, H>,
    settings: &'a FaultSettings,
    seed: u64,
    /// Set at the end of the run.
    stop: AtomicBool,
    /// Set while the workers stop for a restart.
    restart: AtomicBool,
    /// Ledger keys whose confirmation was acknowledged, by index.
    acknowledged: Mutex<Vec<usize>>,
}

/// A worker, between two stretches of work: a restart stops every worker, and starts them again
/// on the reopened store where they were.
struct Worker {
    thread: usize,
    /// A contended worker's operations; `None` for a ledger worker.
    contender: Option<Contender>,
    /// A ledger worker's keys done.
    done: usize,
    out: Vec<Event>,
}

/// The nemesis: the schedule's generator, the next fault's time, and what it did.
pub(super) struct Nemesis {
    thread: usize,
    r: XorShift,
    next: WallInstant,
    /// The faults fired so far.
    fired: usize,
    /// The lookups of acknowledged keys after faults.
    events: Vec<Event>,
    /// Lookups of acknowledged confirmations.
    pub(super) checked: usize,
    /// A fault that could not be caused, or after which the store did not answer.
    pub(super) trouble: Option<Failure>,
}

impl<'a, H: Harness> World<'a, H> {
    /// The world of a run with `settings` from seed `seed` over `runner`.
    pub(super) fn new(runner: Runner<'a, H>, settings: &'a FaultSettings, seed: u64) -> Self {
        World {
            runner,
            settings,
            seed,
            stop: AtomicBool::new(false),
            restart: AtomicBool::new(false),
            acknowledged: Mutex::new(Vec::new()),
        }
    }

    /// The runner, once the run is over.
    pub(super) fn into_runner(self) -> Runner<'a, H> {
        self.runner
    }

    /// Runs the workers and the nemesis on `store` (and on the stores that restarts open) until
    /// the run ends; then the last looks. The events, and the nemesis with what it did.
    pub(super) fn record(&self, store: H::Store) -> (Vec<Event>, Nemesis) {
        let mut store = Some(store);
        let mut workers: Vec<Worker> = (0..CONTENDED + LEDGERS)
            .map(|t| Worker {
                thread: t,
                contender: (t < CONTENDED).then(|| Contender::new(self.seed, t)),
                done: 0,
                out: Vec::new(),
            })
            .collect();
        let mut nemesis = Nemesis {
            thread: CONTENDED + LEDGERS,
            r: XorShift(self.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xfa17 | 1),
            next: self.runner.started,
            fired: 0,
            events: Vec::new(),
            checked: 0,
            trouble: None,
        };
        let mut events = Vec::new();
        while let Some(current) = store.as_ref() {
            let restart = std::thread::scope(|scope| {
                self.restart.store(false, Ordering::SeqCst);
                let handles: Vec<_> = workers
                    .drain(..)
                    .map(|mut w| {
                        let thread = w.thread;
                        (
                            thread,
                            scope.spawn(move || {
                                self.work(current, &mut w);
                                w
                            }),
                        )
                    })
                    .collect();
                let restart = nemesis.faults(self, current);
                match restart {
                    true => self.restart.store(true, Ordering::SeqCst),
                    false => {
                        self.wait_until(self.runner.started + self.settings.duration);
                        self.stop.store(true, Ordering::SeqCst);
                    }
                }
                for (thread, handle) in handles {
                    match handle.join() {
                        Ok(w) => workers.push(w),
                        Err(p) => events.push(panicked(thread, &*p)),
                    }
                }
                restart
            });
            if !restart {
                break;
            }
            let Some(old) = store.take() else { break };
            nemesis.look(self, &old);
            match self.runner.restart(CHECK, old, POINT) {
                Ok(new) => {
                    nemesis.ended(self, &new, Fault::Restart);
                    store = Some(new);
                }
                Err(f) => nemesis.trouble = Some(f),
            }
        }
        for w in workers {
            events.extend(w.out);
        }
        if let Some(store) = store.as_ref() {
            events.extend(self.last_looks(store, nemesis.thread, &mut nemesis.checked));
        }
        events.append(&mut nemesis.events);
        (events, nemesis)
    }

    /// Sleeps until `at`, or until the run stops.
    fn wait_until(&self, at: WallInstant) {
        while !self.stop.load(Ordering::SeqCst) {
            let now = WallInstant::now();
            if now >= at {
                return;
            }
            std::thread::sleep((at - now).min(Duration::from_millis(20)));
        }
    }

    /// Whether the run is over: stopped, or past its duration.
    fn over(&self) -> bool {
        self.stop.load(Ordering::SeqCst) || self.runner.started.elapsed() >= self.settings.duration
    }

    /// Whether a worker stops now: the run is over, or the store restarts.
    fn halted(&self) -> bool {
        self.over() || self.restart.load(Ordering::SeqCst)
    }

    /// The time between two operations of a worker that runs `count` of them over the run.
    fn pace(&self, count: usize) -> Duration {
        self.settings.duration / u32::try_from(count.max(1)).unwrap_or(u32::MAX)
    }

    /// Runs worker `w` on `store` until it halts.
    fn work(&self, store: &H::Store, w: &mut Worker) {
        let Some(contender) = w.contender.as_mut() else { return self.ledger(store, w) };
        let quota = self.settings.ops.div_ceil(CONTENDED);
        let pace = self.pace(quota);
        let recorder = &self.runner.recorder;
        // Thread 0 moves the clock between rounds; the others go on meanwhile.
        let leads = w.thread == 0;
        while w.out.len() < quota && !self.halted() {
            self.wait_until(self.runner.started + pace * u32::try_from(w.out.len()).unwrap_or(u32::MAX));
            w.out.push(contender.step(recorder, store, |step, round| {
                if leads && round > 0 {
                    recorder.advance(step);
                }
            }));
        }
    }

    /// A ledger worker: fresh key after fresh key, owner A reserves and confirms it, then owner
    /// B tries to reserve it.
    fn ledger(&self, store: &H::Store, w: &mut Worker) {
        let ttl = Ttl::from_millis(LEDGER_TTL).expect("a non-zero ttl");
        let pace = self.pace(self.settings.ledger_keys.div_ceil(LEDGERS));
        let recorder = &self.runner.recorder;
        while !self.halted() {
            self.wait_until(self.runner.started + pace * u32::try_from(w.done).unwrap_or(u32::MAX));
            let Some(index) = self.runner.take_key_within(self.settings.ledger_keys, "a ledger key") else { return };
            if self.halted() {
                return;
            }
            let key = key_named(index);
            let calls = [
                Call::Op(Operation::Reserve { owner: OWNER_A, hold: 0, ttl }),
                Call::Op(Operation::Confirm { owner: OWNER_A, version: Version::from_u64(1) }),
                Call::Op(Operation::Reserve { owner: OWNER_B, hold: 1, ttl }),
            ];
            for call in calls {
                let e = recorder.run(store, (w.thread, index - KEYS), (index, &key), call);
                if acknowledged_confirmation(recorder.names, &e) {
                    self.acknowledged.lock().unwrap_or_else(PoisonError::into_inner).push(index);
                }
                w.out.push(e);
            }
            w.done += 1;
        }
    }

    /// The faults offered now: the harness's and the suite's own, that the settings let fire.
    fn offered(&self) -> Vec<Fault> {
        let harness = self.runner.harness;
        let mut offered: std::collections::BTreeSet<Fault> =
            harness.faults().into_iter().filter(|f| !f.is_the_suites()).collect();
        offered.insert(Fault::ClockJump);
        if self.runner.capabilities.durable {
            offered.insert(Fault::Restart);
        }
        offered.into_iter().filter(|f| self.settings.lets(*f)).collect()
    }

    /// The acknowledged ledger keys so far, each with its name.
    fn acknowledged_keys(&self) -> Vec<(usize, Key)> {
        let keys = self.acknowledged.lock().unwrap_or_else(PoisonError::into_inner).clone();
        keys.into_iter().map(|i| (i, key_named(i))).collect()
    }

    /// The end, as thread `thread`: the clock jumps past every expiry, every ledger key is looked
    /// up, and owner B tries to reserve each acknowledged one again.
    fn last_looks(&self, store: &H::Store, thread: usize, checked: &mut usize) -> Vec<Event> {
        let recorder = &self.runner.recorder;
        recorder.advance(JUMP);
        let keys: Vec<(usize, Key)> = (KEYS..KEYS + self.runner.keys_taken()).map(|i| (i, key_named(i))).collect();
        let mut events = recorder.lookups(store, thread, &keys);
        let acknowledged = self.acknowledged_keys();
        *checked += acknowledged.len();
        let ttl = Ttl::from_millis(LEDGER_TTL).expect("a non-zero ttl");
        for (index, key) in &acknowledged {
            let call = Call::Op(Operation::Reserve { owner: OWNER_B, hold: 1, ttl });
            events.push(recorder.run(store, (thread, 0), (*index, key), call));
        }
        events
    }
}

impl Nemesis {
    /// Fires faults on `store` on the schedule until the run ends, the most faults have fired, a
    /// fault goes wrong, or a restart is due: whether one is, which the caller causes.
    fn faults<H: Harness>(&mut self, world: &World<'_, H>, store: &H::Store) -> bool {
        let gap_ms = u64::try_from(world.settings.gap.as_millis()).unwrap_or(u64::MAX).max(2);
        while self.fired < world.settings.max_faults && self.trouble.is_none() {
            self.next += Duration::from_millis(gap_ms / 2 + self.r.below(gap_ms));
            world.wait_until(self.next);
            if world.over() {
                return false;
            }
            let offered = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.offered())) {
                Ok(offered) => offered,
                Err(p) => {
                    self.trouble = Some(Failure::without_rule(
                        CHECK,
                        format!("the harness's faults panicked: {}", panic_message(&*p)),
                    ));
                    return false;
                }
            };
            if offered.is_empty() {
                return false;
            }
            let fault = offered[self.r.below(offered.len() as u64) as usize];
            self.fired += 1;
            if fault == Fault::Restart {
                return true;
            }
            if fault.may_lose_writes() {
                self.look(world, store);
            }
            let caused = world.runner.cause(CHECK, Some(store), (fault, POINT), || match fault {
                Fault::ClockJump => {
                    world.runner.recorder.advance(JUMP);
                    Ok(())
                }
                fault => world.runner.inject(fault),
            });
            match caused {
                Ok(()) => self.ended(world, store, fault),
                Err(f) => self.trouble = Some(f),
            }
        }
        false
    }

    /// After `fault` has ended and the store answers again: the next gap starts now, and after a
    /// fault that may lose writes the contended keys and every acknowledged ledger key are looked
    /// up (what the fault left them holding, which the judge compares with what it may have).
    fn ended<H: Harness>(&mut self, world: &World<'_, H>, store: &H::Store, fault: Fault) {
        self.next = WallInstant::now();
        if fault.may_lose_writes() {
            self.checked += self.look(world, store);
        }
    }

    /// Looks up the contended keys and every acknowledged ledger key: before a fault that may
    /// lose writes, what the store holds (a fault is blamed only for what changed across it), and
    /// after it, what it left. How many acknowledged confirmations it looked up.
    fn look<H: Harness>(&mut self, world: &World<'_, H>, store: &H::Store) -> usize {
        let acknowledged = world.acknowledged_keys();
        let count = acknowledged.len();
        let keys: Vec<(usize, Key)> = (0..KEYS).map(|k| (k, key_named(k))).chain(acknowledged).collect();
        self.events.extend(world.runner.recorder.lookups(store, self.thread, &keys));
        count
    }
}
