//! The crash check's burst rounds: every phase on several threads, a watch point looking for a
//! write shown before it is acknowledged, and the crash (or the power cut) in their middle.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant as WallInstant;

use reservation_disk::{Trap, TrapOn};

use super::power::{CutOnce, POWER_CHECK, TRAP_NAMES_NTH, TRAP_NTH, trap_kind, unheard};
use super::recipes::{B, RECIPES, Step};
use super::{CHECK, LONG, PHASE, Run, WATCH, WATCHED, WATCHES, WORKERS, churn, lock};
use crate::failure::Failure;
use crate::harness::{Fault, Harness};
use crate::history::{Call, Event, Return, key_named};
use crate::record::{XorShift, panicked};

impl<H: Harness> Run<'_, H> {
    /// A burst round: every phase on several threads, and in the third a watch point: writes of
    /// fresh keys on one thread, one after another, while this one looks up the key being
    /// written, crashing at once when a lookup shows the write before it is acknowledged. A write
    /// that returns unseen is followed by the next, up to [`WATCHES`] of them while the workers
    /// still run: a store that lets its lock go before its record is durable shows the write only
    /// for as long as the record takes to become durable, and a looking thread that the machine
    /// did not run in that moment misses it; the next write gives it another chance. When none
    /// shows, the crash comes when the last write returns, in the middle of the burst.
    ///
    /// A power cut's burst sets a trap first: the k-th write, sync, either, or change of names of
    /// the burst (the kind in turn, `k` drawn from `r`) is held, and a thread that waits for it
    /// cuts the disk at once; a watch point that sees an unacknowledged write first cuts instead,
    /// but for a trap on names, which waits for the store's compaction, and one on a tear, which
    /// waits for a write across a sector of a file that holds synced bytes.
    /// Its churn makes changes until the cut (bounded), and the cut waits for it otherwise. The
    /// store is opened again once every thread has returned.
    pub(super) fn burst(
        &mut self,
        owned: H::Store,
        r: &mut XorShift,
        keys: &[usize],
        round: usize,
        events: &mut Vec<Event>,
    ) -> Option<H::Store> {
        let store = &owned;
        for phase in 0..2 {
            self.phase(store, r, keys, phase, round, true, events);
        }
        self.runner.recorder.advance(PHASE);
        // A burst whose trap counts changes of names is there to cut inside a compaction: its watch
        // point looks, but does not cut.
        let mut on_names = false;
        let cut = match self.power {
            // A power-cut run's every crash is a cut.
            Some(power) => {
                let on = trap_kind(self.traps_from, round, power.tears());
                // A trap on a tear waits for its tear as one on names waits for a compaction.
                on_names = matches!(on, TrapOn::Names | TrapOn::Tear);
                let most = if on_names { TRAP_NAMES_NTH } else { TRAP_NTH };
                let trap = Trap { on, path: None, nth: 1 + r.below(most) };
                let model = power.model(self.runner.harms().len(), Some(on), r);
                let seed = r.next();
                if let Err(e) = lock(&power.disk).set_trap(Some(trap)) {
                    self.trouble =
                        Some(Failure::without_rule(POWER_CHECK, format!("the disk's trap could not be set: {e}")));
                    return Some(owned);
                }
                Some(CutOnce { power, model, seed, done: Mutex::new(None), over: AtomicBool::new(false) })
            }
            _ => None,
        };
        let cut = cut.as_ref();
        let this = &*self;
        let running = AtomicUsize::new(WORKERS);
        let running = &running;
        let (mut out, crashed) = std::thread::scope(|s| {
            // The workers run the third and fourth phases' steps at once, all at this instant.
            let workers: Vec<_> = (0..WORKERS)
                .map(|w| {
                    s.spawn(move || {
                        let mut out = Vec::new();
                        for (i, &key) in keys.iter().enumerate().skip(w).step_by(WORKERS) {
                            for (_, step) in RECIPES[i].1.iter().filter(|(p, _)| *p >= 2) {
                                out.push(this.op(store, w + 1, round, key, step.call()));
                            }
                        }
                        running.fetch_sub(1, Ordering::SeqCst);
                        out
                    })
                })
                .collect();
            // A power cut's cutter: it waits for the trap to hold an operation, and cuts then.
            let cutter = cut.map(|cut| s.spawn(move || cut.when_held(&this.runner)));
            let started = WallInstant::now();
            // A power cut's churn: changes until the trap holds one of its operations or another
            // thread's (a trap on names meets the store's next compaction), bounded.
            let churning = cut.map(|cut| {
                s.spawn(move || {
                    let stop = || cut.over.load(Ordering::SeqCst) || started.elapsed() >= WATCH;
                    this.churn(store, (WORKERS + 2, round), churn::BURST_MOST, &stop)
                })
            });
            let mut out: Vec<Event> = Vec::new();
            let mut point = "burst: midway, when the watched writes returned";
            let mut writing = None;
            // Every write's key is taken now, used or not, so that a seed takes the same keys
            // however many writes the timing lets run.
            for watched in this.runner.take_keys(WATCHES, "a write watched in a burst") {
                let done = Arc::new(AtomicBool::new(false));
                let returned = Arc::clone(&done);
                let writer = s.spawn(move || {
                    let e = this.op(store, WORKERS + 1, round, watched, Step::Reserve(B, 2, LONG).call());
                    returned.store(true, Ordering::SeqCst);
                    e
                });
                let seen = this.watch(store, round, watched, &done, started, &mut out);
                writing = Some(writer);
                if seen && !on_names {
                    point = WATCHED;
                    break;
                }
                // The write returned unseen: its event, then the next write while the workers run.
                if let Some(writer) = writing.take() {
                    match writer.join() {
                        Ok(e) => out.push(e),
                        Err(p) => out.push(panicked(WORKERS + 1, &*p)),
                    }
                }
                if running.load(Ordering::SeqCst) == 0 || started.elapsed() >= WATCH {
                    break;
                }
            }
            // A cut at the watch point comes at once; otherwise it waits for the churn, which ends at
            // the cut the trap made, or on its own.
            let watched = point == WATCHED;
            let churning = churning.and_then(|churning| {
                if watched {
                    return Some(churning);
                }
                match churning.join() {
                    Ok(more) => out.extend(more),
                    Err(p) => out.push(panicked(WORKERS + 2, &*p)),
                }
                if !cut.is_some_and(|cut| cut.over.load(Ordering::SeqCst)) {
                    point = "burst: when its churn ended, no operation held by the trap";
                }
                None
            });
            let crashed = match cut {
                Some(cut) => {
                    cut.now(&this.runner, point);
                    Ok(())
                }
                None => {
                    this.runner.cause(CHECK, Some(store), (Fault::Crash, point), || this.runner.inject(Fault::Crash))
                }
            };
            if let Some(cutter) = cutter {
                // It ends once the cut is made, by it or here.
                let _ = cutter.join();
            }
            if let Some(churning) = churning {
                match churning.join() {
                    Ok(more) => out.extend(more),
                    Err(p) => out.push(panicked(WORKERS + 2, &*p)),
                }
            }
            if let Some(writer) = writing {
                match writer.join() {
                    Ok(e) => out.push(e),
                    Err(p) => out.push(panicked(WORKERS + 1, &*p)),
                }
            }
            for (w, h) in workers.into_iter().enumerate() {
                match h.join() {
                    Ok(more) => out.extend(more),
                    Err(p) => out.push(panicked(w + 1, &*p)),
                }
            }
            (out, crashed)
        });
        if let Some(began) = cut.and_then(|c| lock(&c.done).as_ref().map(|(began, ..)| began.stamp)) {
            unheard(&mut out, began);
        }
        events.extend(out);
        if let Err(f) = crashed {
            self.trouble = Some(f);
        }
        match cut {
            Some(cut) => self.reopen_after_cut(owned, cut),
            None => self.trouble.is_none().then_some(owned),
        }
    }

    /// Looks key `watched` up until its write returns (`done`), or [`WATCH`] after `started`:
    /// whether a lookup showed the write before it returned. The lookups go to `out`, but for
    /// those that saw nothing before the last (they tell nothing of the write, which had not
    /// happened yet), so that the history stays short.
    fn watch(
        &self,
        store: &H::Store,
        round: usize,
        watched: usize,
        done: &AtomicBool,
        started: WallInstant,
        out: &mut Vec<Event>,
    ) -> bool {
        let mut last_empty = false;
        while !done.load(Ordering::SeqCst) && started.elapsed() < WATCH {
            let e = self.runner.recorder.run(store, (0, round), (watched, &key_named(watched)), Call::Lookup);
            let seen = matches!(e.ret, Return::Lookup(Some(_)));
            if last_empty {
                out.pop();
            }
            last_empty = matches!(e.ret, Return::Lookup(None));
            out.push(e);
            if seen && !done.load(Ordering::SeqCst) {
                return true;
            }
        }
        false
    }
}
