//! A full, exhaustive model check of a small configuration (two owners with one attempt each,
//! two keys, horizon 2, TTL 2, skew 1), with the default options: depth first on two threads
//! with symmetry reduction. The bench prints the number of unique states a run visits; each run
//! must visit the whole state space, or the bench stops. The verdict is the tests' business.

use criterion::{Criterion, criterion_group, criterion_main};
use reservation_model::ModelConfig;
use reservation_model::check::{CheckOptions, check};

fn bench_model_check(c: &mut Criterion) {
    let config = ModelConfig { owners: 2, attempts: 1, keys: 2, horizon: 2, ttl: 2, skew: 1, ..ModelConfig::small() };
    let run = || {
        let report = check(config, CheckOptions::default());
        assert!(report.complete, "the check stopped before visiting every state:\n{}", report.text());
        report.unique_states
    };
    eprintln!("model check: {} unique states per run", run());
    let mut g = c.benchmark_group("model");
    g.sample_size(10);
    g.bench_function("check/2-owners-1-attempt-2-keys-horizon-2", |b| b.iter(run));
    g.finish();
}

criterion_group!(benches, bench_model_check);
criterion_main!(benches);
