//! The reductions (symmetry over owners, attempts and keys; the skipped actions whose successors
//! are sure to be equivalent to a sibling's; eager steps and the tick left out where nothing is
//! live) change neither a verdict nor the coverage: on every configuration small enough to check
//! both ways, the reduced and the unreduced check agree on every always-property, every rule and
//! scenario reached, and each dropped assumption's counterexample.

use reservation_model::check::{CheckOptions, CheckReport, Strategy, check};
use reservation_model::{ALWAYS, Assumption, ModelConfig};

/// Configurations the unreduced check covers in seconds: each reduction acts in them (two or
/// three owners, one or two attempts each, two or three keys).
fn small_configurations() -> [ModelConfig; 3] {
    [
        ModelConfig::small(),
        ModelConfig { owners: 3, attempts: 1, ..ModelConfig::default() },
        ModelConfig { owners: 2, attempts: 1, keys: 3, ..ModelConfig::default() },
    ]
}

fn full(symmetry: bool) -> CheckOptions {
    CheckOptions { strategy: Strategy::Dfs, symmetry, ..CheckOptions::default() }
}

/// What the two checks must agree on: each property's verdict, and the coverage. `None` when they
/// agree, otherwise the first difference.
fn difference(reduced: &CheckReport, unreduced: &CheckReport) -> Option<String> {
    if !(reduced.complete && unreduced.complete) {
        return Some("a run did not complete".into());
    }
    for name in ALWAYS {
        let fails = |report: &CheckReport| report.verdict(name).map(|v| v.fails);
        let (r, u) = (fails(reduced), fails(unreduced));
        if r != u {
            return Some(format!("{name:?}: fails {r:?} reduced, {u:?} unreduced"));
        }
    }
    if reduced.coverage != unreduced.coverage {
        return Some(format!("coverage: {:?} reduced, {:?} unreduced", reduced.coverage, unreduced.coverage));
    }
    None
}

fn compare(config: ModelConfig) -> (CheckReport, CheckReport) {
    let (reduced, unreduced) = (check(config, full(true)), check(config, full(false)));
    assert!(reduced.unique_states < unreduced.unique_states, "{config}: nothing reduced");
    if let Some(d) = difference(&reduced, &unreduced) {
        panic!("{config}: {d}\n{}\n{}", reduced.text(), unreduced.text());
    }
    (reduced, unreduced)
}

#[test]
fn reduced_and_unreduced_checks_agree_with_every_assumption() {
    for config in small_configurations() {
        let (reduced, _) = compare(config);
        assert!(reduced.holds(), "{}", reduced.text());
    }
}

#[test]
fn each_dropped_assumption_gives_a_counterexample_in_the_reduced_check() {
    for a in Assumption::ALL {
        let report = check(ModelConfig::small().dropping(a), full(true));
        assert!(!report.failures().is_empty(), "{a}: {}", report.text());
    }
}

/// The comparison can fail: a check with an assumption dropped differs from one with all of them.
#[test]
fn the_comparison_catches_a_reduction_that_changes_a_verdict() {
    let config = ModelConfig::small();
    let wrong = check(config.dropping(Assumption::H8), full(true));
    let right = check(config, full(false));
    assert!(difference(&wrong, &right).is_some());
    assert!(difference(&right, &right).is_none());
}

/// The long tier (`reservation_conformance::tiers`): run by its own command, and by CI.
mod long {
    use super::*;

    #[test]
    fn reduced_and_unreduced_checks_agree_with_each_assumption_dropped() {
        if !crate::long_tier("reduction::long::reduced_and_unreduced_checks_agree_with_each_assumption_dropped") {
            return;
        }
        for config in small_configurations() {
            for a in Assumption::ALL {
                let (reduced, unreduced) = compare(config.dropping(a));
                // Eager steps are argued with every assumption: without one, symmetry alone reduces.
                assert!(reduced.text().contains("symmetry on\n"), "{a}: {}", reduced.text());
                // Where the full check finds a counterexample to something, so does the reduced one.
                assert_eq!(reduced.failures().len(), unreduced.failures().len(), "{a}");
            }
        }
    }
}
