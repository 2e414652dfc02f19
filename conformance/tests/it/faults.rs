//! The fault check's teeth: `MemoryStore` under simulated faults passes; a durable store whose
//! restart loses its last acknowledged confirmations is caught by P1, and a store that reports a
//! determinate error after it applied the operation by linearizability; the same seed fires the
//! same faults; the report counts a tiny run exactly; the lost confirmation is named by its key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant as WallInstant};

use reservation_conformance::faults::{Fault, FaultRun, FaultSettings, Simulated, lost_confirmations, run};
use reservation_conformance::linearizability::{ATOMICITY, Call, Event, Names, Return};
use reservation_conformance::{Capabilities, Harness, MemoryHarness, START, Settings};
use reservation_store::rules::Rule;
use reservation_store::spec::{self, Reservation};
use reservation_store::{
    Clock, Key, ManualClock, MemoryStore, Operation, Outcome, Request, ReservationScope, ReservationStore,
    StorageError, StoreResult, StoredReservation, Ttl, Version,
};

/// Runs the fault check and prints its figures and time.
fn timed<H: Harness>(label: &str, harness: &H, settings: &FaultSettings) -> FaultRun {
    let started = WallInstant::now();
    let run = run(harness, &settings.clone().into());
    eprintln!("{label}: {} in {:.2?}", run.report, started.elapsed());
    run
}

#[test]
fn memory_under_simulated_faults_passes() {
    let run = timed("MemoryStore under simulated faults", &Simulated::new(MemoryHarness), &FaultSettings::default());
    if let Err(f) = &run.verdict {
        panic!("{f}");
    }
    let r = &run.report;
    for fault in [Fault::CutConnections, Fault::Pause, Fault::ClockJump] {
        assert!(r.fired.iter().any(|f| f.fault == fault), "{fault} never fired: {r}");
    }
    assert!(r.determinate > 0 && r.indeterminate > 0, "{r}");
    assert!(r.confirmations_checked > 0 && r.lost == 0 && r.two_owners == 0, "{r}");
    assert!(r.fired.iter().all(|f| f.recovered_after.is_some()), "{r}");
}

type Rows = HashMap<(ReservationScope, Key), StoredReservation>;

/// The rows of a durable store, and each confirmation it acknowledged with the row before it.
#[derive(Default)]
struct Disk {
    rows: Rows,
    confirmations: Vec<((ReservationScope, Key), Option<StoredReservation>)>,
}

/// A durable store that decides by the spec functions, on rows that survive a reopen; its
/// restart loses the last `lose` confirmations it acknowledged (the rows go back to what they
/// were before them), as a replica promoted before it had them would.
struct Durable {
    disk: Arc<Mutex<Disk>>,
    lose: usize,
}

impl Durable {
    fn new(lose: usize) -> Self {
        Durable { disk: Arc::default(), lose }
    }
}

struct DurableStore {
    disk: Arc<Mutex<Disk>>,
    clock: ManualClock,
}

impl DurableStore {
    fn disk(&self) -> std::sync::MutexGuard<'_, Disk> {
        self.disk.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ReservationStore for DurableStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        request.admitted()?;
        let mut disk = self.disk();
        let slot = (request.scope.clone(), request.key.clone());
        let before = disk.rows.get(&slot).cloned();
        let step = spec::apply(before.clone(), self.clock.now(), request.operation);
        if step.outcome == Outcome::Confirmed {
            disk.confirmations.push((slot.clone(), before));
        }
        match step.next {
            Some(row) => disk.rows.insert(slot, row),
            None => disk.rows.remove(&slot),
        };
        Ok(step.outcome)
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        let disk = self.disk();
        Ok(spec::lookup(disk.rows.get(&(scope.clone(), key.clone())), self.clock.now()).cloned())
    }
}

impl Harness for Durable {
    type Store = DurableStore;

    fn store(&self, clock: ManualClock) -> DurableStore {
        DurableStore { disk: self.disk.clone(), clock }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(true)
    }

    fn reopen(&self, store: DurableStore, clock: ManualClock) -> Option<DurableStore> {
        let mut disk = store.disk();
        let kept = disk.confirmations.len().saturating_sub(self.lose);
        let lost = disk.confirmations.split_off(kept);
        for (slot, before) in lost.into_iter().rev() {
            match before {
                Some(row) => disk.rows.insert(slot, row),
                None => disk.rows.remove(&slot),
            };
        }
        disk.confirmations.clear();
        drop(disk);
        Some(DurableStore { disk: store.disk, clock })
    }
}

fn restarts() -> FaultSettings {
    FaultSettings::default()
        .with_faults(&[Fault::Restart, Fault::ClockJump])
        .with_duration(Duration::from_secs(1))
        .with_gap(Duration::from_millis(120))
}

#[test]
fn a_durable_store_that_loses_nothing_on_restarts_passes() {
    let run = timed("a durable store, restarted", &Durable::new(0), &restarts());
    if let Err(f) = &run.verdict {
        panic!("{f}");
    }
    let r = &run.report;
    let restarts = r.fired.iter().filter(|f| f.fault == Fault::Restart).count();
    assert!(restarts > 0, "{r}");
    assert!(r.lost == 0 && r.two_owners == 0 && r.determinate + r.indeterminate == 0, "{r}");
}

#[test]
fn a_restart_that_loses_acknowledged_confirmations_is_caught_by_p1() {
    let run = timed("a restart that loses the last 8 confirmations", &Durable::new(8), &restarts());
    let failure = run.verdict.expect_err("the lost confirmations went unseen");
    let text = failure.to_string();
    let r = &run.report;
    assert_eq!(failure.rule, Some(Rule::P1), "{text}");
    assert!(r.lost > 0 && r.two_owners > 0, "{r}\n{text}");
    assert!(text.contains(&format!("{} acknowledged confirmations lost", r.lost)), "{text}");
    assert!(text.contains("was lost after harm") && text.contains("restart"), "{text}");
    assert!(text.contains(&format!("RESERVATION_CONFORMANCE_SEED={} cargo test", r.seed)), "{text}");
    for (i, fired) in r.fired.iter().enumerate() {
        assert!(text.contains(&format!("harm {} {} at", i + 1, fired.fault)), "{text}");
    }
    eprintln!("{text}");
}

/// The replay line a fault check's failure prints runs the same schedule again and fails the same
/// way: the seed it names fires the same faults in the same order, and the store is caught by the
/// same rule, its lost confirmations named. (The operations between the faults are the machine's
/// timing, so which confirmations are lost may differ.)
#[test]
fn p1_the_replay_line_of_a_fault_check_failure_fails_again_the_same_way() {
    let caught = |seed| {
        // Four faults, each 120 ms apart, all fired within the run's second.
        let settings = Settings::from(restarts().with_max_faults(4)).with_seed(seed);
        let run = run(&Durable::new(8), &settings);
        let fired: Vec<Fault> = run.report.fired.iter().map(|f| f.fault).collect();
        (run.verdict.expect_err("the lost confirmations went unseen"), fired)
    };
    let (failure, fired) = caught(3);
    let replay = failure.replay.clone().expect("a replay line");
    let seed = crate::replay_seed(&replay);
    assert_eq!(seed, 3, "{replay}");
    let (again, fired_again) = caught(seed);
    assert_eq!((again.rule, failure.rule), (Some(Rule::P1), Some(Rule::P1)), "{again}\n{failure}");
    assert_eq!(fired_again, fired, "the replay fired other faults");
    for text in [failure.to_string(), again.to_string()] {
        assert!(text.contains(" acknowledged confirmations lost") && text.contains("was lost after harm"), "{text}");
    }
}

/// `MemoryStore` behind a cut that lies: while it lasts, each operation is applied, and then
/// reported as a determinate error (one that did not happen).
struct Lying {
    cut_until: Arc<Mutex<Option<WallInstant>>>,
}

struct LyingStore {
    inner: MemoryStore<ManualClock>,
    cut_until: Arc<Mutex<Option<WallInstant>>>,
}

impl ReservationStore for LyingStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        let outcome = self.inner.execute(request).await;
        let cut = self.cut_until.lock().unwrap_or_else(PoisonError::into_inner).is_some_and(|u| u > WallInstant::now());
        match cut {
            true => Err(StorageError::new("connection cut (the operation was applied)").into()),
            false => outcome,
        }
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        self.inner.lookup(scope, key).await
    }
}

impl Harness for Lying {
    type Store = LyingStore;

    fn store(&self, clock: ManualClock) -> LyingStore {
        LyingStore { inner: MemoryStore::with_clock(clock), cut_until: self.cut_until.clone() }
    }

    fn faults(&self) -> Vec<Fault> {
        vec![Fault::CutConnections]
    }

    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        if fault != Fault::CutConnections {
            return Err(reservation_conformance::faults::not_offered(fault));
        }
        let window = Duration::from_millis(30);
        *self.cut_until.lock().unwrap_or_else(PoisonError::into_inner) = Some(WallInstant::now() + window);
        std::thread::sleep(window);
        Ok(())
    }
}

#[test]
fn a_cut_that_reports_applied_operations_as_not_applied_is_caught_by_linearizability() {
    let harness = Lying { cut_until: Arc::default() };
    let settings = FaultSettings::default().with_duration(Duration::from_secs(1)).with_gap(Duration::from_millis(100));
    let run = timed("a lying cut", &harness, &settings);
    let failure = run.verdict.expect_err("the lies went unseen");
    let text = failure.to_string();
    assert_eq!(failure.property, Some(ATOMICITY), "{text}");
    assert!(text.contains("is not linearizable") && text.contains("RESERVATION_CONFORMANCE_SEED="), "{text}");
    assert!(run.report.determinate > 0 && run.report.lost == 0, "{}", run.report);
}

fn schedule(seed: u64) -> Vec<Fault> {
    let settings = FaultSettings::default()
        .with_max_faults(6)
        .with_gap(Duration::from_millis(40))
        .with_duration(Duration::from_secs(1))
        .with_ops(400)
        .with_ledger_keys(40);
    let run = run(&Simulated::new(MemoryHarness), &Settings::from(settings).with_seed(seed));
    if let Err(f) = &run.verdict {
        panic!("{f}");
    }
    assert_eq!(run.report.seed, seed);
    run.report.fired.iter().map(|f| f.fault).collect()
}

#[test]
fn the_same_seed_fires_the_same_faults() {
    let first = schedule(42);
    assert_eq!(first.len(), 6, "{first:?}");
    assert_eq!(schedule(42), first);
    assert_ne!(schedule(43), first, "another seed, the same schedule");
}

#[test]
fn a_tiny_run_is_counted_exactly() {
    // Four ledger keys, no contended operations, two clock jumps: 4 × 3 operations, then a
    // lookup and a reserve of each acknowledged key at the end.
    let settings = FaultSettings::default()
        .with_faults(&[Fault::ClockJump])
        .with_max_faults(2)
        .with_gap(Duration::from_millis(100))
        .with_duration(Duration::from_millis(600))
        .with_ops(0)
        .with_ledger_keys(4);
    let run = timed("a tiny run", &Durable::new(0), &settings);
    if let Err(f) = &run.verdict {
        panic!("{f}");
    }
    let r = &run.report;
    assert_eq!(r.fired.iter().map(|f| f.fault).collect::<Vec<_>>(), [Fault::ClockJump; 2], "{r}");
    assert_eq!((r.ops, r.confirmations_checked), (20, 4), "{r}");
    assert_eq!((r.determinate, r.indeterminate, r.lost, r.two_owners), (0, 0, 0, 0), "{r}");
    assert!(r.recovery().is_some_and(|d| d < Duration::from_secs(1)), "{r}");
    assert!(r.to_string().contains("20 operations, 2 faults (2 clock-jump)"), "{r}");
}

fn event(thread: usize, key: usize, (called, returned): (u64, u64), call: Call, ret: Return) -> Event {
    Event { thread, round: 0, clock_at_call: START, clock_at_return: START, key, call, ret, called, returned }
}

#[test]
fn the_lost_confirmation_is_named_by_its_key() {
    const ALICE: u8 = 0;
    const BOB: u8 = 2;
    let names = Names::new();
    let reserve = |owner| Call::Op(Operation::Reserve { owner, hold: 0, ttl: Ttl::from_millis(10).unwrap() });
    let confirm = |v| Call::Op(Operation::Confirm { owner: ALICE, version: Version::from_u64(v) });
    let confirmed = |owner: u8, v| {
        Return::Lookup(Some(Reservation::confirmed(names.owners[usize::from(owner)].clone(), Version::from_u64(v))))
    };
    let taken = Return::Outcome(Outcome::Taken);
    let mut history = Vec::new();
    for key in [3, 4, 6] {
        let base = key as u64 * 100;
        history.push(event(0, key, (base, base + 1), reserve(ALICE), taken.clone()));
        history.push(event(0, key, (base + 2, base + 3), confirm(1), Return::Outcome(Outcome::Confirmed)));
        history.push(event(1, key, (base + 4, base + 5), reserve(BOB), Return::Outcome(Outcome::Conflict)));
    }
    // After a restart at stamp 1000: k3 is free again and Bob takes it; k4 kept its
    // confirmation; k6 shows a version nobody confirmed; k5 shows an owner who never asked.
    history.push(event(2, 3, (1001, 1002), Call::Lookup, Return::Lookup(None)));
    history.push(event(1, 3, (1003, 1004), reserve(BOB), taken.clone()));
    history.push(event(2, 4, (1001, 1002), Call::Lookup, confirmed(ALICE, 1)));
    history.push(event(2, 6, (1001, 1002), Call::Lookup, confirmed(ALICE, 2)));
    history.push(event(2, 5, (1001, 1002), Call::Lookup, confirmed(BOB, 1)));
    history.sort_by_key(|e| e.called);
    assert_eq!(lost_confirmations(&names, &history, &[1000]), Ok(vec![3]));
    // Without the restart, Bob's conflict saw the confirmation (or Alice's live reservation)
    // that the lookup no longer shows: nothing explains k3, and no loss is named.
    assert_eq!(lost_confirmations(&names, &history, &[]), Ok(Vec::new()));
}

/// One seed replays a whole run: the fault schedule is drawn from the suite's one seed
/// (`Settings::seed`), so the same seed fires the same faults and another seed others.
#[test]
fn the_suite_s_seed_drives_the_fault_schedule() {
    let settings =
        FaultSettings::default().with_duration(Duration::from_millis(600)).with_gap(Duration::from_millis(60));
    let schedule = |seed| {
        let run = run(&Simulated::new(MemoryHarness), &Settings::from(settings.clone()).with_seed(seed));
        assert_eq!(run.report.seed, seed, "{}", run.report);
        run.report.fired.iter().map(|f| f.fault).collect::<Vec<_>>()
    };
    assert_eq!(schedule(41), schedule(41));
    assert!((42..52).any(|seed| schedule(seed) != schedule(41)), "ten other seeds fired the same faults");
}
