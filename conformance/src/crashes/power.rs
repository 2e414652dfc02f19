//! Power cuts, the crash check's third way to crash a store ([`super::power_cuts`]): the disk
//! mounted under a store that declares a promise, the cuts of a burst made inside the disk, and the
//! store opened again on what each cut left.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant as WallInstant};

use reservation_disk::{CutReport, Disk, Persistence, TrapOn};

use super::{Run, WATCH, lock};
use crate::failure::Failure;
use crate::harm::{Began, Runner};
use crate::harness::{Fault, Harness};
use crate::history::{Call, Event, Return};
use crate::record::XorShift;

/// The disk under a power-cut run's store, and the cuts made.
pub(super) struct Power {
    /// The mount, in a directory of its own.
    pub(super) disk: Mutex<Disk>,
    pub(super) dir: tempfile::TempDir,
    /// The models cut under: the declared one and every milder one.
    pub(super) models: Vec<Persistence>,
    /// What each cut did, by the number of its harm.
    pub(super) cuts: Mutex<BTreeMap<usize, CutReport>>,
}

impl Power {
    /// The model of cut `n` (from 0), a burst's whose trap is `trap` or a quiet one's:
    /// [`cut_model`] over the models this power cuts under.
    pub(super) fn model(&self, n: usize, trap: Option<TrapOn>, r: &mut XorShift) -> Persistence {
        cut_model(&self.models, n, trap, r)
    }

    /// Whether the store promises to survive torn writes: the bursts then set traps on them.
    pub(super) fn tears(&self) -> bool {
        self.models.contains(&Persistence::Torn)
    }
}

/// The model of cut `n` (from 0) among `models` (the declared one last): the declared model every
/// other cut, a milder one drawn from `r` between them; but `torn` for a burst whose trap holds a
/// tear, so that the write it holds is torn, and the declared model for a burst whose trap holds a
/// change of names: the run's one cut inside a compaction takes back all that the store did not
/// make durable there. (Under `process` it would keep the compaction's half-made snapshot, which
/// the next compaction writes over: a snapshot never synced then comes back from those bytes when
/// a later cut takes the new ones back.) Drawn from `r` all the same.
fn cut_model(models: &[Persistence], n: usize, trap: Option<TrapOn>, r: &mut XorShift) -> Persistence {
    let declared = models[models.len() - 1];
    let drawn = if n.is_multiple_of(2) { declared } else { models[r.below(models.len() as u64) as usize] };
    match trap {
        Some(TrapOn::Tear) => Persistence::Torn,
        Some(TrapOn::Names) => declared,
        _ => drawn,
    }
}

/// How many writes or syncs of a burst a trap may count before the one it holds.
pub(super) const TRAP_NTH: u64 = 24;

/// How many changes of names a trap on names (or tears, one on tears) may count before the one it
/// holds: a compaction makes a few (its snapshot's name, the rename into place); a log's records
/// cross a sector every few hundred bytes.
pub(super) const TRAP_NAMES_NTH: u64 = 2;

/// The kinds of trap a power-cut run's bursts set, in turn: a write, a sync, either (a tear, for
/// a store that survives torn writes: [`trap_kind`]), and a change of names.
pub(super) const TRAPS: [TrapOn; 4] = [TrapOn::Write, TrapOn::Sync, TrapOn::Any, TrapOn::Names];

/// The first trap kind of a power-cut run of `rounds` rounds, by its index in [`TRAPS`], drawn
/// from `r` among those that leave the trap on names out of the last round: the burst that cuts
/// inside a compaction is followed by another round, whose changes let the store finish the
/// compaction its recovery left to do, and by a cut after that. A bug that only a compaction
/// finished shows (a snapshot never synced, its rename never made durable, a snapshot that leaves
/// rows out) then meets a cut on every seed, whatever the store's period, when the run's churns
/// alone make too few changes to cross it.
pub(super) fn first_trap(rounds: usize, r: &mut XorShift) -> usize {
    let kinds = TRAPS.len();
    let names = TRAPS.iter().position(|t| *t == TrapOn::Names).unwrap_or(0);
    // The first kind that would leave the trap on names to the last round's burst (give or take
    // a turn of the kinds).
    let names_last = names + kinds - (rounds.max(1) - 1) % kinds;
    (names_last + 1 + r.below(kinds as u64 - 1) as usize) % kinds
}

/// The kind of trap the burst that ends in crash `crash` (from 0: every other crash, the odd
/// ones, is a burst's) sets, in a run whose first burst sets `TRAPS[from]`: the kinds in turn, so
/// that a run of four rounds sets each once. For a store that promises to survive torn writes
/// (`tears`), a trap on the sync of a write that a cut can tear takes the turn of the trap on
/// either, and its cut is made under `torn` ([`cut_model`]): a torn write is met on purpose.
pub(super) fn trap_kind(from: usize, crash: usize, tears: bool) -> TrapOn {
    match TRAPS[(from + crash / 2) % TRAPS.len()] {
        TrapOn::Any if tears => TrapOn::Tear,
        kind => kind,
    }
}

/// The disk of a power-cut run, when `harness` declares a promise and FUSE mounts: `Ok(None)`
/// when the check does not run.
pub(super) fn mount_power<H: Harness>(harness: &H) -> Result<Option<Power>, Failure> {
    let Some(declared) = harness.capabilities().power_cuts else { return Ok(None) };
    let dir = tempfile::Builder::new()
        .prefix("reservation-power-cuts")
        .tempdir()
        .map_err(|e| Failure::without_rule(POWER_CHECK, format!("no directory to mount a disk in: {e}")))?;
    let Some(disk) =
        crate::services::service("FUSE (a mount of /dev/fuse), for the power-cut check", Disk::mount(dir.path()))
    else {
        return Ok(None);
    };
    let models = Persistence::ALL.into_iter().filter(|m| *m <= declared).collect();
    Ok(Some(Power { disk: Mutex::new(disk), dir, models, cuts: Mutex::new(BTreeMap::new()) }))
}

/// The power-cut check's name, as its failures say.
pub(super) const POWER_CHECK: &str = "power_cuts";

impl<H: Harness> Run<'_, H> {
    /// Opens the store again after `cut`, made in a burst: the store to go on with, or `None`
    /// (the trouble noted).
    pub(super) fn reopen_after_cut(&mut self, store: H::Store, cut: &CutOnce<'_>) -> Option<H::Store> {
        let done = lock(&cut.done).take();
        let Some((began, point, report)) = done else {
            self.trouble = Some(Failure::without_rule(POWER_CHECK, "the burst ended without a cut"));
            return None;
        };
        let power = cut.power;
        let report = match report {
            Ok(report) => report,
            Err(why) => {
                self.trouble = Some(Failure::without_rule(POWER_CHECK, why));
                return None;
            }
        };
        self.reopen_on(store, began, point, power, report)
    }

    /// Drops `store`, whose disk was cut at `began` (`report`) and is off, brings the power back
    /// and opens the store again on what the cut left, and notes the harm and the cut: the store to go on with, or `None` (the trouble
    /// noted).
    pub(super) fn reopen_on(
        &mut self,
        store: H::Store,
        began: Began,
        point: &'static str,
        power: &Power,
        report: CutReport,
    ) -> Option<H::Store> {
        let harness = self.runner.harness;
        let clock = self.runner.recorder.clock.clone();
        let reopened = self.runner.reopen_after(POWER_CHECK, began, (Fault::PowerCut, point), || {
            drop(store);
            lock(&power.disk).power_on().map_err(|e| format!("the disk did not come back after the cut: {e}"))?;
            harness.store_in(power.dir.path(), clock).ok_or_else(|| {
                "the harness declares a promise to survive power cuts, but its store_in gave no store after a cut"
                    .to_owned()
            })
        });
        lock(&power.cuts).insert(self.runner.harms().len(), report);
        reopened.map_err(|f| self.trouble = Some(f)).ok()
    }
}

/// What a power cut that began at stamp `began` leaves of a burst's events `out`: nobody heard an
/// answer given after the power went off. A lookup that had not returned by then is dropped (an
/// in-process store may still answer one from its memory, which a machine without power could
/// not); an operation that had not returned may or may not have taken effect, whatever the store
/// said, and so has an indeterminate error. `began` is the counter's next stamp when the power
/// went off ([`crate::harm::Runner::begin`]): an answer stamped `began` or later came after.
pub(super) fn unheard(out: &mut Vec<Event>, began: u64) {
    out.retain_mut(|e| {
        if e.returned < began {
            return true;
        }
        match e.call {
            Call::Lookup => false,
            Call::Op(_) => {
                let message = "the power was cut before its answer was heard".to_owned();
                e.ret = Return::Storage { message, indeterminate: true };
                true
            }
        }
    });
}

/// A cut made: where it began, where the burst was, and what it did (or why it could not be made).
pub(super) type Cut = (Began, &'static str, Result<CutReport, String>);

/// A burst's power cut, made once: by the thread that waits for the trap, or at the watch point.
pub(super) struct CutOnce<'p> {
    pub(super) power: &'p Power,
    pub(super) model: Persistence,
    pub(super) seed: u64,
    /// Where it began, where the burst was, and what it did (or why it could not be made).
    pub(super) done: Mutex<Option<Cut>>,
    /// Set once the cut is made: the waiting thread stops.
    pub(super) over: AtomicBool,
}

impl CutOnce<'_> {
    /// Cuts the disk at `point`, unless it was cut already.
    pub(super) fn now<H: Harness>(&self, runner: &Runner<'_, H>, point: &'static str) {
        let mut done = lock(&self.done);
        if done.is_some() {
            return;
        }
        let began = runner.begin();
        // The power stays off until the store is opened again: its threads, finishing what they
        // were doing, fail on the dead disk. The disk that comes back has no trap.
        let report = lock(&self.power.disk).power_off(self.model, self.seed);
        *done = Some((began, point, report.map_err(|e| format!("the disk could not be cut: {e}"))));
        self.over.store(true, Ordering::SeqCst);
    }

    /// Waits for the trap to hold an operation and cuts then, until the cut is made elsewhere; cuts
    /// anyway when the wait ends with no cut made (the disk's server not answering, or past
    /// [`WATCH`] and its margin), so that a held operation never waits without end.
    pub(super) fn when_held<H: Harness>(&self, runner: &Runner<'_, H>) {
        // Short waits, so that the disk is not kept from a cut at the watch point for long.
        const POLL: Duration = Duration::from_millis(10);
        let started = WallInstant::now();
        while !self.over.load(Ordering::SeqCst) && started.elapsed() < WATCH + RECOVERY_MARGIN {
            let held = lock(&self.power.disk).held(POLL);
            match held {
                Ok(Some(_)) => return self.now(runner, "burst: inside the disk, an operation held by the trap"),
                Ok(None) => {}
                Err(_) => break,
            }
        }
        // The cut is made by now, or is made here: an operation the trap holds waits for a cut,
        // and a thread of the burst waiting on the store behind it must not wait for ever.
        self.now(runner, "burst: when the wait for the trap ended");
    }
}

/// How long past [`WATCH`] the thread that waits for a trap goes on waiting: the watch point cuts
/// by then.
const RECOVERY_MARGIN: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use reservation_store::{Instant, Operation, Outcome};

    use reservation_disk::{Persistence, TrapOn};

    use super::{TRAPS, cut_model, first_trap, trap_kind, unheard};
    use crate::history::{Call, Event, Return};
    use crate::record::XorShift;

    fn event(call: Call, ret: Return, called: u64, returned: u64) -> Event {
        let (clock_at_call, clock_at_return) = (Instant::ZERO, Instant::ZERO);
        Event { thread: 0, round: 0, clock_at_call, clock_at_return, key: 0, call, ret, called, returned }
    }

    /// A cut that began at stamp 10 (the counter's next stamp when the power went off): an answer
    /// stamped 9 was heard; one stamped 10 or later came after the cut, a lookup's dropped, an
    /// operation's outcome unknown.
    #[test]
    fn an_answer_stamped_at_the_cut_or_later_was_not_heard() {
        let confirm = Call::Op(Operation::Confirm { owner: 0, version: reservation_store::Version::UNVERSIONED });
        let taken = Return::Outcome(Outcome::Confirmed);
        let mut out = vec![
            event(Call::Lookup, Return::Lookup(None), 7, 9),
            event(Call::Lookup, Return::Lookup(None), 8, 10),
            event(confirm, taken.clone(), 5, 9),
            event(confirm, taken.clone(), 6, 10),
            event(confirm, taken.clone(), 6, 11),
        ];
        unheard(&mut out, 10);
        let kept: Vec<(u64, bool)> = out.iter().map(|e| (e.returned, e.ret == taken)).collect();
        assert_eq!(kept, [(9, false), (9, true), (10, false), (11, false)], "{out:?}");
        assert!(matches!(out[0].ret, Return::Lookup(None)));
        for e in &out[2..] {
            assert!(matches!(&e.ret, Return::Storage { indeterminate: true, .. }), "{e:?}");
        }
    }

    /// Whatever kind a run starts from, its four bursts (crashes 1, 3, 5 and 7) set each kind once;
    /// for a store that survives torn writes, a trap on a tear instead of the trap on either.
    #[test]
    fn four_bursts_set_each_kind_of_trap_once() {
        for tears in [false, true] {
            for (from, first) in TRAPS.iter().enumerate() {
                let kinds: BTreeSet<TrapOn> = [1, 3, 5, 7].iter().map(|c| trap_kind(from, *c, tears)).collect();
                assert_eq!(kinds.len(), TRAPS.len(), "from {from}: {kinds:?}");
                assert_eq!(kinds.contains(&TrapOn::Tear), tears, "from {from}: {kinds:?}");
                assert_eq!(kinds.contains(&TrapOn::Any), !tears, "from {from}: {kinds:?}");
                if *first != TrapOn::Any {
                    assert_eq!(trap_kind(from, 1, tears), *first, "the first burst sets the kind the run starts from");
                }
            }
        }
    }

    /// However many rounds a run has, the first trap kind drawn never leaves the trap on names to
    /// the last round's burst, and every other first kind is drawn.
    #[test]
    fn the_trap_on_names_is_never_the_last_rounds() {
        let mut r = XorShift(0x5eed | 1);
        for rounds in 1..=9 {
            let firsts: BTreeSet<usize> = (0..200).map(|_| first_trap(rounds, &mut r)).collect();
            assert_eq!(firsts.len(), TRAPS.len() - 1, "{rounds} rounds: {firsts:?}");
            for from in firsts {
                assert!(from < TRAPS.len(), "{rounds} rounds: {from} is no index of a kind");
                let last = trap_kind(from, 2 * rounds - 1, false);
                assert_ne!(last, TrapOn::Names, "{rounds} rounds, from {from}");
                if rounds >= TRAPS.len() {
                    let kinds: BTreeSet<TrapOn> = (0..rounds).map(|n| trap_kind(from, 2 * n + 1, false)).collect();
                    assert!(kinds.contains(&TrapOn::Names), "{rounds} rounds, from {from}: {kinds:?}");
                }
            }
        }
        // Rounds counted as one when none are asked for.
        assert_eq!(first_trap(0, &mut XorShift(3)), first_trap(1, &mut XorShift(3)));
    }

    /// A burst whose trap holds a tear is cut under `torn`, and one whose trap holds a change of
    /// names under the declared model, whatever the cut's number; the others under the declared
    /// model every other cut and a milder one between, from the same draws.
    #[test]
    fn a_trap_on_a_tear_is_cut_under_torn_and_one_on_names_under_the_promise() {
        let models = Persistence::ALL.to_vec();
        let (mut a, mut b, mut c) = (XorShift(7), XorShift(7), XorShift(7));
        let mut milder = BTreeSet::new();
        for n in 0..64 {
            assert_eq!(cut_model(&models, n, Some(TrapOn::Tear), &mut a), Persistence::Torn, "cut {n}");
            let names = &models[..models.len() - 1];
            assert_eq!(cut_model(names, n, Some(TrapOn::Names), &mut c), Persistence::Torn, "cut {n}");
            let drawn = cut_model(&models, n, if n % 3 == 0 { None } else { Some(TrapOn::Sync) }, &mut b);
            if n % 2 == 0 {
                assert_eq!(drawn, Persistence::Reorder, "cut {n}: the declared model");
            } else {
                milder.insert(drawn);
            }
            let after = [a.next(), b.next(), c.next()];
            assert!(after.iter().all(|x| *x == after[0]), "the same draws either way: {after:?}");
        }
        assert_eq!(milder.len(), models.len(), "every model is drawn between: {milder:?}");
    }
}
