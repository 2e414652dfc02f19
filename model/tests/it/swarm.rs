//! Swarm runs: seeded walks that find what exhaustive checks cannot reach, replay from a seed,
//! split over seed ranges, and report coverage.

use reservation_model::swarm::{SwarmOptions, choices, swarm};
use reservation_model::{Assumption, ModelConfig, walk};
use reservation_store::rules::Rule;

fn seeds(range: std::ops::Range<u64>, stop: bool) -> SwarmOptions {
    SwarmOptions { seeds: range, stop_at_failure: stop, ..SwarmOptions::default() }
}

#[test]
fn a_swarm_finds_the_h5_counterexample_and_its_seed_replays_it() {
    let config = ModelConfig { owners: 4, keys: 3, ..ModelConfig::default() }.dropping(Assumption::H5);
    let report = swarm(config, &seeds(0..200_000, true));
    let first = report.failures.first().unwrap_or_else(|| panic!("no failure in {} walks", report.walks));
    // The seed alone replays it: same property, same trace.
    let again = walk(&config, &choices(first.seed, SwarmOptions::default().depth)).unwrap_err();
    assert_eq!(again, first.violation);
    let alone = swarm(config, &seeds(first.seed..first.seed + 1, false));
    assert_eq!(alone.failures, vec![first.clone()]);
    let text = report.text(|s| format!("replay --seeds {s}..{}", s + 1));
    assert!(text.contains(&format!("replay --seeds {}..{}", first.seed, first.seed + 1)), "{text}");
}

#[test]
fn with_every_assumption_a_swarm_finds_nothing_and_reports_its_coverage() {
    let config = ModelConfig { owners: 4, keys: 3, ..ModelConfig::default() };
    let report = swarm(config, &seeds(0..3_000, false));
    assert!(report.failures.is_empty(), "{}", report.text(|s| s.to_string()));
    assert_eq!(report.walks, 3_000);
    assert!(report.steps > 3_000);
    assert!(report.rules.contains(Rule::R1) && report.rules.contains(Rule::C2));
    assert!(report.text(|s| s.to_string()).contains("rules reached"));
}

/// Two processes with halves of a seed range find exactly the failures of one process with all
/// of it: a CI matrix can split the work.
#[test]
fn seed_ranges_split_the_work_exactly() {
    let config = ModelConfig::default().dropping(Assumption::H5);
    let whole = swarm(config, &seeds(0..20_000, false));
    let (a, b) = (swarm(config, &seeds(0..7_000, false)), swarm(config, &seeds(7_000..20_000, false)));
    assert!(!whole.failures.is_empty());
    assert_eq!([a.failures, b.failures].concat(), whole.failures);
    assert_eq!(a.walks + b.walks, whole.walks);
    assert_eq!(choices(42, 16), choices(42, 16));
    assert_ne!(choices(42, 16), choices(43, 16));
}
