//! The fuzzer's entry point, `walk`: deterministic, checks properties, reports violations.

use reservation_model::{Assumption, ModelConfig, P_UNIQUE, walk};

fn lcg_choices(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}

#[test]
fn walks_of_the_default_and_fuzz_configurations_break_no_property() {
    for config in [ModelConfig::default(), ModelConfig::fuzz()] {
        let mut rules = reservation_store::rules::RuleSet::EMPTY;
        for seed in 0..300 {
            let report = walk(&config, &lcg_choices(seed, 200)).unwrap_or_else(|v| panic!("{v}"));
            assert!(report.steps > 0);
            rules = rules.union(report.rules);
        }
        assert!(rules.len() >= 15, "random walks reached only {:?}", rules.iter().collect::<Vec<_>>());
    }
}

#[test]
fn a_walk_is_deterministic() {
    let choices = lcg_choices(7, 100);
    assert_eq!(walk(&ModelConfig::fuzz(), &choices), walk(&ModelConfig::fuzz(), &choices));
}

#[test]
fn walks_find_a_violation_when_h2_is_dropped() {
    let config = ModelConfig::default().dropping(Assumption::H2);
    let mut found = (0..20_000).filter_map(|seed| walk(&config, &lcg_choices(seed, 60)).err());
    let v = found.next().expect("some walk breaks a property without H2");
    assert!(reservation_model::ALWAYS.contains(&v.property), "{v}");
    assert!(v.trace.contains("  1. [store t=0]"), "{}", v.trace);
    let g = found.find(|v| v.property == P_UNIQUE).expect("some walk breaks uniqueness without H2");
    assert!(g.trace.lines().count() >= 4, "{g}");
}

#[test]
fn an_invalid_configuration_is_a_violation_not_a_panic() {
    let config = ModelConfig { owners: 9, ..ModelConfig::default() };
    assert_eq!(walk(&config, &[1, 2, 3]).map(|r| r.steps).map_err(|v| v.property), Err("the configuration is valid"));
}
