//! The run of a fault check: contended workers ([`Contender`]) and ledger workers record a
//! history on the store while the nemesis fires faults on a seeded schedule, probes the store
//! until it answers again, and looks up every acknowledged confirmation after a fault that may
//! lose writes; a restart stops every worker and starts them again on the reopened store.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant as WallInstant};

use reservation_store::{Key, Operation, ReservationStore, Ttl, Version};

use super::judge::acknowledged_confirmation;
use super::{CHECK, FaultSettings, Fired, RECOVERY, Shot};
use crate::failure::Failure;
use crate::harness::{Capabilities, Fault, Harness};
use crate::history::{Call, Event, KEYS, key_named};
use crate::record::{Contender, Recorder, XorShift, panicked};
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
/// Owner A of the ledger keys, and owner B, by their index in [`Names::owners`].
const OWNER_A: u8 = 0;
const OWNER_B: u8 = 2;

/// What the threads of a run share.
pub(super) struct World<'a, H: Harness> {
    harness: &'a H,
    settings: &'a FaultSettings,
    seed: u64,
    capabilities: Capabilities,
    recorder: Recorder<'a, H>,
    started: WallInstant,
    /// Set at the end of the run.
    stop: AtomicBool,
    /// Set while the workers stop for a restart.
    restart: AtomicBool,
    /// The next ledger key's number.
    next_ledger: AtomicUsize,
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

/// The restart the nemesis asked for: when.
struct Restart {
    at: Duration,
    began: WallInstant,
}

/// The nemesis: the schedule's generator, the next fault's time, and what it did.
pub(super) struct Nemesis {
    thread: usize,
    r: XorShift,
    next: WallInstant,
    pub(super) shots: Vec<Shot>,
    /// The lookups of acknowledged keys after faults.
    events: Vec<Event>,
    /// Lookups of acknowledged confirmations.
    pub(super) checked: usize,
    /// A fault that could not be caused, or after which the store did not answer.
    pub(super) trouble: Option<Failure>,
}

impl<'a, H: Harness> World<'a, H> {
    /// The world of a run of `harness` with `settings` from seed `seed`, recording with
    /// `recorder`, starting now.
    pub(super) fn new(
        harness: &'a H,
        settings: &'a FaultSettings,
        seed: u64,
        capabilities: Capabilities,
        recorder: Recorder<'a, H>,
    ) -> Self {
        World {
            harness,
            settings,
            seed,
            capabilities,
            recorder,
            started: WallInstant::now(),
            stop: AtomicBool::new(false),
            restart: AtomicBool::new(false),
            next_ledger: AtomicUsize::new(0),
            acknowledged: Mutex::new(Vec::new()),
        }
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
            next: self.started,
            shots: Vec::new(),
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
                    Some(_) => self.restart.store(true, Ordering::SeqCst),
                    None => {
                        self.wait_until(self.started + self.settings.duration);
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
            let Some(restart) = restart else { break };
            let old = store.take();
            let reopened = old.map(|old| {
                let clock = self.recorder.clock.clone();
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.harness.reopen(old, clock)))
            });
            let caused = match reopened {
                Some(Ok(Some(new))) => {
                    store = Some(new);
                    Ok(())
                }
                Some(Ok(None)) | None => {
                    Err("the harness declares the durable capability, but its reopen gave no store".to_owned())
                }
                Some(Err(p)) => Err(format!("the harness's reopen panicked: {}", panic_message(&*p))),
            };
            nemesis.ended(self, store.as_ref(), Fault::Restart, (restart.at, restart.began), caused);
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
        self.stop.load(Ordering::SeqCst) || self.started.elapsed() >= self.settings.duration
    }

    /// Whether a worker stops now: the run is over, or the store restarts.
    fn halted(&self) -> bool {
        self.over() || self.restart.load(Ordering::SeqCst)
    }

    /// The ledger keys taken so far.
    pub(super) fn ledger_count(&self) -> usize {
        self.next_ledger.load(Ordering::SeqCst).min(self.settings.ledger_keys)
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
        // Thread 0 moves the clock between rounds; the others go on meanwhile.
        let leads = w.thread == 0;
        while w.out.len() < quota && !self.halted() {
            self.wait_until(self.started + pace * u32::try_from(w.out.len()).unwrap_or(u32::MAX));
            w.out.push(contender.step(&self.recorder, store, |step, round| {
                if leads && round > 0 {
                    self.recorder.advance(step);
                }
            }));
        }
    }

    /// A ledger worker: fresh key after fresh key, owner A reserves and confirms it, then owner
    /// B tries to reserve it.
    fn ledger(&self, store: &H::Store, w: &mut Worker) {
        let ttl = Ttl::from_millis(LEDGER_TTL).expect("a non-zero ttl");
        let pace = self.pace(self.settings.ledger_keys.div_ceil(LEDGERS));
        while !self.halted() {
            self.wait_until(self.started + pace * u32::try_from(w.done).unwrap_or(u32::MAX));
            let n = self.next_ledger.fetch_add(1, Ordering::SeqCst);
            if n >= self.settings.ledger_keys || self.halted() {
                return;
            }
            let index = KEYS + n;
            let key = key_named(index);
            let calls = [
                Call::Op(Operation::Reserve { owner: OWNER_A, hold: 0, ttl }),
                Call::Op(Operation::Confirm { owner: OWNER_A, version: Version::from_u64(1) }),
                Call::Op(Operation::Reserve { owner: OWNER_B, hold: 1, ttl }),
            ];
            for call in calls {
                let e = self.recorder.run(store, (w.thread, n), (index, &key), call);
                if acknowledged_confirmation(self.recorder.names, &e) {
                    self.acknowledged.lock().unwrap_or_else(PoisonError::into_inner).push(index);
                }
                w.out.push(e);
            }
            w.done += 1;
        }
    }

    /// The faults offered now: the harness's and the suite's own, that the settings let fire.
    fn offered(&self) -> Vec<Fault> {
        let mut offered: BTreeSet<Fault> = self.harness.faults().into_iter().filter(|f| !f.is_the_suites()).collect();
        offered.insert(Fault::ClockJump);
        if self.capabilities.durable {
            offered.insert(Fault::Restart);
        }
        offered.into_iter().filter(|f| self.settings.lets(*f)).collect()
    }

    /// Causes `fault`, one the harness causes or a clock jump.
    fn fire(&self, fault: Fault) -> Result<(), String> {
        if fault == Fault::ClockJump {
            self.recorder.advance(JUMP);
            return Ok(());
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.harness.inject(fault))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("the harness could not cause it: {}", reservation_store::error_chain(&e))),
            Err(p) => Err(format!("the harness's inject panicked: {}", panic_message(&*p))),
        }
    }

    /// Looks up a key of no history until the store answers, for at most [`RECOVERY`]: how long
    /// that took.
    fn probe(&self, store: &H::Store) -> Option<Duration> {
        let began = WallInstant::now();
        let key = Key::new("probe").expect("a valid key");
        let scope = &self.recorder.names.scope;
        while began.elapsed() < RECOVERY {
            // An adapter that died or broke the protocol will not answer: no use waiting.
            if self.harness.broken().is_some() {
                return None;
            }
            let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.harness.block_on(store.lookup(scope, &key))
            }));
            if answered.is_ok_and(|r| r.is_ok()) {
                return Some(began.elapsed());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    /// The acknowledged ledger keys so far, each with its name.
    fn acknowledged_keys(&self) -> Vec<(usize, Key)> {
        let keys = self.acknowledged.lock().unwrap_or_else(PoisonError::into_inner).clone();
        keys.into_iter().map(|i| (i, key_named(i))).collect()
    }

    /// The end, as thread `thread`: the clock jumps past every expiry, every ledger key is looked
    /// up, and owner B tries to reserve each acknowledged one again.
    fn last_looks(&self, store: &H::Store, thread: usize, checked: &mut usize) -> Vec<Event> {
        self.recorder.advance(JUMP);
        let keys: Vec<(usize, Key)> = (KEYS..KEYS + self.ledger_count()).map(|i| (i, key_named(i))).collect();
        let mut events = self.recorder.lookups(store, thread, &keys);
        let acknowledged = self.acknowledged_keys();
        *checked += acknowledged.len();
        let ttl = Ttl::from_millis(LEDGER_TTL).expect("a non-zero ttl");
        for (index, key) in &acknowledged {
            let call = Call::Op(Operation::Reserve { owner: OWNER_B, hold: 1, ttl });
            events.push(self.recorder.run(store, (thread, 0), (*index, key), call));
        }
        events
    }
}

impl Nemesis {
    /// Fires faults on `store` on the schedule until the run ends, the most faults have fired, a
    /// fault goes wrong, or a restart is due: that restart, which the caller causes.
    fn faults<H: Harness>(&mut self, world: &World<'_, H>, store: &H::Store) -> Option<Restart> {
        let gap_ms = u64::try_from(world.settings.gap.as_millis()).unwrap_or(u64::MAX).max(2);
        while self.shots.len() < world.settings.max_faults && self.trouble.is_none() {
            self.next += Duration::from_millis(gap_ms / 2 + self.r.below(gap_ms));
            world.wait_until(self.next);
            if world.over() {
                return None;
            }
            let offered = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| world.offered())) {
                Ok(offered) => offered,
                Err(p) => {
                    self.trouble = Some(Failure::panicked(CHECK, &*p));
                    return None;
                }
            };
            if offered.is_empty() {
                return None;
            }
            let fault = offered[self.r.below(offered.len() as u64) as usize];
            let at = world.started.elapsed();
            let began = WallInstant::now();
            if fault == Fault::Restart {
                return Some(Restart { at, began });
            }
            let caused = world.fire(fault);
            self.ended(world, Some(store), fault, (at, began), caused);
        }
        None
    }

    /// Records `fault`, fired at `at` and begun at `began`, which `caused` says whether it could
    /// be caused, with the history's stamp now that it has ended: a write acknowledged while the
    /// fault was under way (a primary that takes writes its replica never gets, until it is
    /// killed) is one it may lose too. Probes the store until it answers, and after a crash,
    /// failover or restart looks up every acknowledged ledger key.
    fn ended<H: Harness>(
        &mut self,
        world: &World<'_, H>,
        store: Option<&H::Store>,
        fault: Fault,
        (at, began): (Duration, WallInstant),
        caused: Result<(), String>,
    ) {
        let stamp = world.recorder.stamp.load(Ordering::SeqCst);
        let took = began.elapsed();
        let recovered_after = match (&caused, store) {
            (Ok(()), Some(store)) => world.probe(store),
            _ => None,
        };
        // The next gap starts once the store answers again.
        self.next = WallInstant::now();
        self.shots.push(Shot { fired: Fired { fault, at, took, recovered_after }, stamp });
        let problem = match (caused, recovered_after) {
            (Err(why), _) => format!("the fault {fault} could not be caused: {why}"),
            (Ok(()), None) => format!("the store did not answer within {RECOVERY:.0?} after the fault {fault}"),
            (Ok(()), Some(_)) => {
                if let (true, Some(store)) = (fault.may_lose_writes(), store) {
                    let keys = world.acknowledged_keys();
                    self.events.extend(world.recorder.lookups(store, self.thread, &keys));
                    self.checked += keys.len();
                }
                return;
            }
        };
        self.trouble = Some(Failure::without_rule(CHECK, problem));
    }
}
