//! README.md's "Faults" snippet: the asynchronous store's harness, with the faults its server can
//! suffer, run through the suite's fault check; and a test that the README quotes the snippet.

use std::time::Duration;

use my_crate::{MyAsyncStore, Storage};
use reservation_conformance::faults::{self, Fault, FaultSettings};
use reservation_conformance::{Capabilities, Harness};
use reservation_store::{ManualClock, StorageError};

/// The asynchronous store's harness, its database standing in for a server of the tests' own.
struct MyServerHarness {
    runtime: tokio::runtime::Runtime,
    server: Storage,
}

impl MyServerHarness {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
        MyServerHarness { runtime, server: Storage::default() }
    }
}

impl Harness for MyServerHarness {
    type Store = MyAsyncStore;
    fn store(&self, clock: ManualClock) -> MyAsyncStore {
        self.runtime.block_on(MyAsyncStore::connect(&self.server, clock))
    }
    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(true)
    }
    // README.md snippet: faults
    // The faults this harness can cause; each returns once the server answers again.
    fn faults(&self) -> Vec<Fault> {
        vec![Fault::Crash, Fault::CutConnections]
    }
    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        match fault {
            Fault::Crash => self.server.kill_and_restart(),
            Fault::CutConnections => self.server.cut_connections(),
            other => Err(faults::not_offered(other)),
        }
    }
    // end of snippet
}

// Every check, the fault check with this harness's faults among them.
reservation_conformance::tests!(my_server_store, MyServerHarness::new(), durable);

#[test]
fn crashes_and_cut_connections_fire_and_lose_nothing() {
    let settings = FaultSettings::default().with_duration(Duration::from_secs(2)).with_gap(Duration::from_millis(50));
    let run = faults::run(&MyServerHarness::new(), &settings.into());
    println!("{}", run.report);
    if let Err(failure) = run.verdict {
        panic!("{failure}");
    }
    for fault in [Fault::Crash, Fault::CutConnections, Fault::Restart, Fault::ClockJump] {
        assert!(run.report.fired.iter().any(|f| f.fault == fault), "{fault} never fired: {}", run.report);
    }
    assert!(run.report.determinate > 0, "no request was refused by a restarting server: {}", run.report);
    assert!(run.report.indeterminate > 0, "no answer was lost to a cut: {}", run.report);
    assert!(run.report.confirmations_checked > 0, "{}", run.report);
    assert_eq!((run.report.lost, run.report.two_owners), (0, 0), "{}", run.report);
}

#[test]
fn the_readme_quotes_the_faults_snippet_exactly() {
    let this = include_str!("faults.rs");
    let lines: Vec<&str> = this.lines().collect();
    let start = lines.iter().position(|l| l.trim() == "// README.md snippet: faults").expect("a start marker") + 1;
    let end = lines.iter().position(|l| l.trim() == "// end of snippet").expect("an end marker");
    assert!(end - start < 20, "the snippet has {} lines: the README promises fewer than 20", end - start);
    let readme = std::fs::read_to_string(format!("{}/../../README.md", env!("CARGO_MANIFEST_DIR"))).expect("README.md");
    let quoted = lines[start..end].join("\n");
    assert!(readme.contains(&format!("{quoted}\n}}\n```")), "README.md does not quote the snippet:\n{quoted}");
}

/// The crash check: the server killed and started again at the points the check chooses, and
/// the store restarted through `reopen`, every key compared whole after each.
#[test]
fn p1_the_crash_check_passes_on_a_crashing_server() {
    use reservation_conformance::crashes::{CrashKind, CrashSettings, run};
    let started = std::time::Instant::now();
    let run = run(&MyServerHarness::new(), &CrashSettings::default().into());
    eprintln!("implementer example, crash check: {} in {:.2?}", run.report, started.elapsed());
    if let Err(failure) = run.verdict {
        panic!("{failure}");
    }
    assert!(run.report.count(CrashKind::Crash) >= 4, "{}", run.report);
}
