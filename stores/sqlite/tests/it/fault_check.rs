//! The suite's fault check on `SqliteStore`: a restart is a crash of the process (every handle
//! closed, the file opened again), and cut connections and pauses are simulated in front of the
//! store's calls, which is all a store in a file can meet between a caller and its disk.

use std::time::{Duration, Instant};

use reservation_conformance::faults::{self, Fault, FaultSettings, Simulated};
use reservation_sqlite::SqliteHarness;

#[test]
fn restarts_cuts_pauses_and_clock_jumps_lose_nothing() {
    let harness = Simulated::new(SqliteHarness::new().expect("a scratch database"));
    let settings = FaultSettings::default().with_duration(Duration::from_secs(3)).with_gap(Duration::from_millis(150));
    let started = Instant::now();
    let run = faults::run(&harness, &settings.into());
    eprintln!("SQLite: {} in {:.2?}", run.report, started.elapsed());
    if let Err(failure) = run.verdict {
        panic!("{failure}");
    }
    for fault in [Fault::Restart, Fault::CutConnections, Fault::Pause, Fault::ClockJump] {
        assert!(run.report.fired.iter().any(|f| f.fault == fault), "{fault} never fired: {}", run.report);
    }
    assert!(run.report.confirmations_checked > 0 && run.report.indeterminate > 0, "{}", run.report);
    assert_eq!((run.report.lost, run.report.two_owners), (0, 0), "{}", run.report);
}

/// The crash check through restarts: every handle closed and the file opened again at the points
/// the check chooses, every key compared whole after each (the figures of RELIABILITY.md). A
/// `SqliteStore` has no server to crash: its restart is a new process's open of the file.
#[test]
fn p1_the_crash_check_passes_through_restarts_of_the_file() {
    use reservation_conformance::crashes::{CrashKind, CrashSettings, run};
    let started = Instant::now();
    let run = run(&SqliteHarness::new().expect("a scratch database"), &CrashSettings::default().into());
    eprintln!("SQLite, crash check, restarts of the file: {} in {:.2?}", run.report, started.elapsed());
    if let Err(failure) = run.verdict {
        panic!("{failure}");
    }
    assert_eq!(run.report.count(CrashKind::Reopen), 8, "{}", run.report);
}
