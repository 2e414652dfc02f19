//! The fault check's teeth.

use std::time::Duration;

use reservation_conformance::MemoryHarness;
use reservation_conformance::faults::{Fault, FaultSettings, Simulated, run};

#[test]
fn memory_under_simulated_faults_passes() {
    let harness = Simulated::new(MemoryHarness);
    let started = std::time::Instant::now();
    let run = run(&harness, &FaultSettings::default());
    eprintln!("memory under simulated faults: {} in {:.2?}", run.report, started.elapsed());
    if let Err(f) = &run.verdict {
        panic!("{f}");
    }
    assert!(run.report.fired.iter().any(|f| f.fault == Fault::CutConnections), "{}", run.report);
    let _ = Duration::ZERO;
}
