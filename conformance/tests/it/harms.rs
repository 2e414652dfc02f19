//! The harm runner's blame, through the fault check and the crash check: a harm is blamed (P1)
//! only for what changed across it; a store whose bug loses nothing across a restart is
//! headlined by the rule it breaks; a released key that a restart brings back is P1; a store
//! that cannot open its own storage after a crash fails P1 with its error; every key is labelled
//! with what the run made of it; and every entry point obeys the one seed's variable, so that a
//! failure's replay line replays it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use reservation_conformance::crashes::{CrashSettings, run as crash_run};
use reservation_conformance::faults::{Fault, FaultSettings, run as fault_run};
use reservation_conformance::{Capabilities, Harness, Settings};
use reservation_store::rules::Rule;
use reservation_store::spec::{self, Reservation};
use reservation_store::{
    Clock, Instant, Key, ManualClock, Operation, Outcome, Request, ReservationScope, ReservationStore, StoreResult,
    StoredReservation,
};

/// A flaw planted in [`Flawed`]'s store.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Flaw {
    /// None: the store keeps every rule.
    None,
    /// A restart brings back every confirmation a release freed: its recovery replays the
    /// confirmations and forgets the releases.
    ReleasesComeBack,
    /// Abandoning one hold of several frees the key (A3), answering `StillReserved`: a wrong write that
    /// a restart keeps faithfully.
    AbandonFrees,
    /// Opening the store after its first restart fails: its storage is refused.
    RefusesToReopen,
}

type Slot = (ReservationScope, Key);

/// What survives a restart: the rows, the confirmations ever made, the latest instant decided
/// at, the restarts.
#[derive(Default)]
struct Disk {
    rows: HashMap<Slot, StoredReservation>,
    confirmed: Vec<(Slot, StoredReservation)>,
    latest: Instant,
    restarts: usize,
}

/// A durable store on a [`Disk`] that survives a reopen, deciding by the spec functions under one
/// lock, with its clock read inside it and never going back, and with a flaw.
struct Flawed {
    disk: Arc<Mutex<Disk>>,
    flaw: Flaw,
}

impl Flawed {
    fn new(flaw: Flaw) -> Self {
        Flawed { disk: Arc::default(), flaw }
    }
}

struct FlawedStore {
    disk: Arc<Mutex<Disk>>,
    clock: ManualClock,
    flaw: Flaw,
}

fn lock(disk: &Mutex<Disk>) -> MutexGuard<'_, Disk> {
    disk.lock().unwrap_or_else(PoisonError::into_inner)
}

impl FlawedStore {
    /// The instant to decide at: the clock, or the latest decided at if the clock went back.
    fn now(&self, disk: &mut Disk) -> Instant {
        disk.latest = disk.latest.max(self.clock.now());
        disk.latest
    }
}

impl ReservationStore for FlawedStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        request.admitted()?;
        let mut disk = lock(&self.disk);
        let now = self.now(&mut disk);
        let slot = (request.scope.clone(), request.key.clone());
        let before = disk.rows.get(&slot).cloned();
        let mut step = spec::apply(before, now, request.operation);
        if let (Flaw::AbandonFrees, Outcome::StillReserved, Operation::Abandon { .. }) =
            (self.flaw, step.outcome, request.operation)
        {
            step.next = None;
        }
        if let Some(row @ Reservation::Confirmed(_)) = &step.next {
            disk.confirmed.push((slot.clone(), row.clone()));
        }
        match step.next {
            Some(row) => disk.rows.insert(slot, row),
            None => disk.rows.remove(&slot),
        };
        Ok(step.outcome)
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        let mut disk = lock(&self.disk);
        let now = self.now(&mut disk);
        Ok(spec::lookup(disk.rows.get(&(scope.clone(), key.clone())), now).cloned())
    }
}

impl Harness for Flawed {
    type Store = FlawedStore;

    fn store(&self, clock: ManualClock) -> FlawedStore {
        FlawedStore { disk: Arc::clone(&self.disk), clock, flaw: self.flaw }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(true)
    }

    /// A crash of the store's process: the disk keeps everything, the store carries on.
    fn faults(&self) -> Vec<Fault> {
        vec![Fault::Crash]
    }

    fn inject(&self, fault: Fault) -> Result<(), reservation_store::StorageError> {
        match fault {
            Fault::Crash => Ok(()),
            other => Err(reservation_conformance::faults::not_offered(other)),
        }
    }

    fn reopen(&self, store: FlawedStore, clock: ManualClock) -> Option<FlawedStore> {
        let mut disk = lock(&store.disk);
        disk.restarts += 1;
        match self.flaw {
            Flaw::RefusesToReopen => panic!("the log's header does not parse: storage refused"),
            Flaw::ReleasesComeBack => {
                let confirmed = disk.confirmed.clone();
                for (slot, row) in confirmed {
                    disk.rows.entry(slot).or_insert(row);
                }
            }
            Flaw::None | Flaw::AbandonFrees => {}
        }
        drop(disk);
        Some(FlawedStore { disk: store.disk, clock, flaw: self.flaw })
    }
}

/// The crash check on `flaw`'s store, seed `seed`.
fn crashes(flaw: Flaw, seed: u64) -> reservation_conformance::crashes::CrashRun {
    crash_run(&Flawed::new(flaw), &Settings::from(CrashSettings::default()).with_seed(seed))
}

/// The fault check on `flaw`'s store, restarts and clock jumps only, seed `seed`.
fn faults(flaw: Flaw, seed: u64) -> reservation_conformance::faults::FaultRun {
    let settings = FaultSettings::default()
        .with_faults(&[Fault::Restart, Fault::ClockJump])
        .with_duration(Duration::from_millis(800))
        .with_gap(Duration::from_millis(90))
        .with_ops(800);
    fault_run(&Flawed::new(flaw), &Settings::from(settings).with_seed(seed))
}

#[test]
fn the_flawless_store_passes_both_checks() {
    for seed in 1..=3 {
        let run = crashes(Flaw::None, seed);
        assert!(run.verdict.is_ok(), "{:?}", run.verdict.err().map(|f| f.to_string()));
        let run = faults(Flaw::None, seed);
        assert!(run.verdict.is_ok(), "{:?}", run.verdict.err().map(|f| f.to_string()));
    }
}

#[test]
fn p1_a_released_key_that_a_restart_brings_back_is_p1() {
    for seed in 1..=3 {
        let run = crashes(Flaw::ReleasesComeBack, seed);
        let failure = run.verdict.expect_err("the released keys came back unseen");
        let text = failure.to_string();
        assert_eq!(failure.rule, Some(Rule::P1), "{text}");
        assert!(!text.contains("atomicity"), "{text}");
        assert!(text.contains("after crash") && text.contains("released"), "{text}");
    }
    let failure = (1..=4).find_map(|seed| faults(Flaw::ReleasesComeBack, seed).verdict.err());
    let failure = failure.expect("a restart brought a released key back unseen by the fault check on four seeds");
    assert_eq!(failure.rule, Some(Rule::P1), "{failure}");
}

/// The seed a crash check's failure prints, run again, gives the same failure: the same problem,
/// the same crash named first.
#[test]
fn p1_the_replay_line_of_a_crash_check_failure_fails_again_the_same_way() {
    let failure = crashes(Flaw::ReleasesComeBack, 2).verdict.expect_err("the released keys came back unseen");
    let replay = failure.replay.clone().expect("a replay line");
    let seed = crate::replay_seed(&replay);
    assert_eq!(seed, 2, "{replay}");
    let again = crashes(Flaw::ReleasesComeBack, seed).verdict.expect_err("the replay passed");
    assert_eq!((&again.problem, again.rule), (&failure.problem, failure.rule));
    assert_eq!(again.context.first(), failure.context.first(), "the crash named first");
}

#[test]
fn p1_a_store_that_cannot_open_its_storage_after_a_restart_fails_p1_with_its_error() {
    let harness = Flawed { disk: Arc::default(), flaw: Flaw::RefusesToReopen };
    // The crash check's quiet points alternate, so its first crash of a harness with only a
    // reopen is one.
    let run = crash_run(&harness, &Settings::default().with_seed(1));
    let failure = run.verdict.expect_err("a refused reopen passed");
    let text = failure.to_string();
    assert_eq!(failure.rule, Some(Rule::P1), "{text}");
    assert!(text.contains("storage refused") && text.contains("could not be opened again"), "{text}");
    assert!(!text.contains("the harness's reopen panicked:\n"), "{text}");
}

#[test]
fn a_bug_that_loses_nothing_across_a_restart_is_headlined_by_its_rule() {
    for seed in 1..=3 {
        let run = crashes(Flaw::AbandonFrees, seed);
        let failure = run.verdict.expect_err("the abandon that frees went unseen");
        let text = failure.to_string();
        assert_ne!(failure.rule, Some(Rule::P1), "a wrong write blamed on the crash that kept it:\n{text}");
        assert_eq!(failure.step_rule.or(failure.rule), Some(Rule::A3), "{text}");
    }
    for seed in 1..=3 {
        if let Err(failure) = faults(Flaw::AbandonFrees, seed).verdict {
            assert_ne!(failure.rule, Some(Rule::P1), "a wrong write blamed on a restart:\n{failure}");
        }
    }
}

#[test]
fn every_key_is_labelled_with_what_the_run_made_of_it() {
    let run = crashes(Flaw::None, 2);
    let labels = &run.report.labels;
    assert_eq!(labels.len(), run.report.keys);
    let names = reservation_conformance::crashes::RECIPE_NAMES;
    let mut watched = 0;
    for e in &run.history.events {
        let label = labels[e.key];
        // The watched writes are owner bob's reserves of hold h2 by the writer thread.
        let writer = e.thread == 4 && !matches!(e.call, reservation_conformance::linearizability::Call::Lookup);
        if writer {
            watched += 1;
            assert_eq!(label, "a write watched in a burst", "k{}", e.key);
        } else if e.thread != 0 {
            assert!(names.contains(&label), "k{}: {label}", e.key);
        }
    }
    assert!(watched > 0, "no watched write");
}

/// Prints the seeds the entry points ran with, given seed 1 in their settings: run by
/// [`every_entry_point_obeys_the_seed_variable`] with the variable set.
#[test]
#[ignore = "run by every_entry_point_obeys_the_seed_variable, with RESERVATION_CONFORMANCE_SEED set"]
fn seeds_of_the_entry_points() {
    let settings = Settings::default().with_seed(1).with_crashes(CrashSettings::default().with_rounds(1));
    let short = FaultSettings::default().with_duration(Duration::from_millis(100)).with_ops(40);
    let faults = fault_run(&reservation_conformance::MemoryHarness, &settings.clone().with_faults(short.clone()));
    let crashes = crash_run(&Flawed::new(Flaw::None), &settings);
    let cuts = reservation_conformance::crashes::power_cuts(&Flawed::new(Flaw::None), &settings);
    let ignoring = settings.clone().with_faults(short).without_env_seed();
    let ignored = fault_run(&reservation_conformance::MemoryHarness, &ignoring);
    println!("SEEDS {} {} {} {}", faults.report.seed, crashes.report.seed, cuts.report.seed, ignored.report.seed);
}

#[test]
fn every_entry_point_obeys_the_seed_variable() {
    let seeds = |var: Option<&str>| {
        let mut command = std::process::Command::new(std::env::current_exe().expect("this test binary"));
        command.args(["--ignored", "--exact", "harms::seeds_of_the_entry_points", "--nocapture"]);
        command.env_remove("RESERVATION_CONFORMANCE_SEED");
        if let Some(var) = var {
            command.env("RESERVATION_CONFORMANCE_SEED", var);
        }
        let out = command.output().expect("the test binary runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().find_map(|l| l.strip_prefix("SEEDS ")).unwrap_or_else(|| panic!("{text}")).to_owned()
    };
    assert_eq!(seeds(None), "1 1 1 1");
    assert_eq!(seeds(Some("4242")), "4242 4242 4242 1");
}

/// The check's entry point, as `tests!` and `reservation conform` call it, fails the same store.
#[test]
fn p1_the_crash_check_through_its_entry_point_fails_a_store_that_cannot_open_its_storage() {
    let harness = Flawed { disk: Arc::default(), flaw: Flaw::RefusesToReopen };
    let failure = reservation_conformance::checks::crashes(&harness, &Settings::default().with_seed(1))
        .expect_err("a refused reopen passed the crash check");
    assert_eq!(failure.rule, Some(Rule::P1), "{failure}");
}

/// A harness that offers a crash and a reopen is crashed both ways, and the report counts each.
#[test]
fn p1_the_crash_check_counts_its_crashes_and_its_restarts_apart() {
    use reservation_conformance::crashes::CrashKind;
    let run = crash_run(&Flawed::new(Flaw::None), &Settings::default().with_seed(1));
    run.verdict.unwrap_or_else(|f| panic!("{f}"));
    let (crashes, restarts) = (run.report.count(CrashKind::Crash), run.report.count(CrashKind::Reopen));
    assert!(crashes > 0 && restarts > 0 && crashes + restarts == run.report.crashes.len(), "{}", run.report);
    let said = format!("{crashes} crashes through Fault::Crash and {restarts} restarts through reopen");
    assert!(run.report.to_string().contains(&said), "{}", run.report);
}
