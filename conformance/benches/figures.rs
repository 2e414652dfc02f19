//! Prints the suite's speed figures against the in-memory store:
//! `cargo bench -p reservation-conformance --bench figures`.

use std::time::Instant;

use reservation_conformance::{MemoryHarness, Settings, differential, linearizability, run_all};

fn main() {
    let started = Instant::now();
    let report = run_all(&MemoryHarness, &Settings::default());
    let whole = started.elapsed();
    assert!(report.is_ok(), "{report}");
    println!("whole suite ({} checks) against MemoryStore: {whole:.2?}", report.checks.len());
    for (name, _, took) in report.checks.iter().filter(|(_, _, t)| t.as_millis() >= 20) {
        println!("  {name}: {took:.2?}");
    }

    // A fixed seed, so that runs compare.
    let stats = differential::run(&MemoryHarness, &Settings::default().with_seed(1)).unwrap_or_else(|f| panic!("{f}"));
    println!(
        "differential: {} scripts, {} operations in {:.2?}: {:.0} operations/s, {} of 27 transition rules reached",
        stats.cases,
        stats.ops,
        stats.elapsed,
        stats.ops_per_second(),
        stats.reached.iter().filter(|r| reservation_store::rules::Rule::TRANSITIONS.contains(r)).count(),
    );

    // The oracle alone, on scripts generated beforehand.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = differential::script(Settings::default().max_ops);
    let started = Instant::now();
    let scripts: Vec<_> = (0..2_000)
        .filter_map(|_| proptest::strategy::Strategy::new_tree(&strategy, &mut runner).ok())
        .map(|tree| proptest::strategy::ValueTree::current(&tree))
        .collect();
    let ops: usize = scripts.iter().map(Vec::len).sum();
    println!("generating {ops} operations: {:.2?}", started.elapsed());
    let started = Instant::now();
    for script in &scripts {
        reservation_conformance::oracle::ops(&MemoryHarness, script).unwrap_or_else(|f| panic!("{f}"));
    }
    let took = started.elapsed();
    println!(
        "oracle alone: {ops} operations of {} scripts in {took:.2?}: {:.0} operations/s",
        scripts.len(),
        ops as f64 / took.as_secs_f64()
    );

    for (threads, ops) in [(3, 1_000), (3, 3_000), (4, 10_000)] {
        let (names, events) = linearizability::record(&MemoryHarness, threads, ops, 42);
        let started = Instant::now();
        let nodes = linearizability::check_history(&names, &events).unwrap_or_else(|f| panic!("{f}"));
        println!(
            "linearizability: {} operations from {threads} threads on {} keys decided in {:.2?} ({nodes} search nodes)",
            events.len(),
            linearizability::KEYS,
            started.elapsed()
        );
    }
}
