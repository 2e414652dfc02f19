//! The differential check: random operation scripts, biased to where bugs live, run on the store
//! and on the specification through [`crate::oracle::ops`]; failures shrink to a minimal script.

use std::cell::Cell;
use std::time::{Duration, Instant as WallInstant};

use proptest::prelude::*;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use reservation_store::ops::{ClockMove, Op, ReleasePick, VersionPick};
use reservation_store::{Rule, RuleSet};

use crate::failure::Failure;
use crate::harness::Harness;
use crate::oracle;

/// A version relative to the key's: at, just below and just above it, UNVERSIONED, or small.
fn version() -> impl Strategy<Value = VersionPick> {
    prop_oneof![
        2 => Just(VersionPick::Unversioned),
        3 => Just(VersionPick::Below),
        4 => Just(VersionPick::At),
        3 => Just(VersionPick::Above),
        2 => (0u8..4).prop_map(VersionPick::Fixed),
    ]
}

/// A key slot: mostly the first two (which differ only in case), sometimes the others.
fn key() -> impl Strategy<Value = u8> {
    prop_oneof![6 => 0u8..2, 3 => 2u8..4]
}

/// An owner: mostly the first two, sometimes the one that differs from the first only in tenant.
fn owner() -> impl Strategy<Value = u8> {
    prop_oneof![8 => 0u8..2, 2 => Just(2u8)]
}

/// A hold: 1–3 per owner, mostly two.
fn hold() -> impl Strategy<Value = u8> {
    prop_oneof![8 => 0u8..2, 1 => Just(2u8)]
}

/// One operation, biased: short ttls (and sometimes zero), clock moves to exactly
/// `expires_at - 1`, `expires_at` and `expires_at + 1`.
pub fn op() -> impl Strategy<Value = Op> {
    let ttl = prop_oneof![1 => Just(0u8), 3 => 1u8..4, 6 => 4u8..40];
    prop_oneof![
        6 => (owner(), key(), hold(), ttl).prop_map(|(owner, key, hold, ttl)| Op::Reserve { owner, key, hold, ttl }),
        4 => (owner(), key(), version()).prop_map(|(owner, key, version)| Op::Confirm { owner, key, version }),
        3 => (owner(), key(), prop_oneof![1 => Just(ReleasePick::Any), 4 => version().prop_map(ReleasePick::At)])
            .prop_map(|(owner, key, version)| Op::Release { owner, key, version }),
        3 => (owner(), key(), hold()).prop_map(|(owner, key, hold)| Op::Abandon { owner, key, hold }),
        1 => key().prop_map(|key| Op::Lookup { key }),
        4 => prop_oneof![
            key().prop_map(|key| ClockMove::JustBeforeExpiry { key }),
            key().prop_map(|key| ClockMove::AtExpiry { key }),
            key().prop_map(|key| ClockMove::JustAfterExpiry { key }),
            (0u8..30).prop_map(ClockMove::By),
        ]
        .prop_map(Op::Clock),
    ]
}

/// A script of 1 to `max_ops` operations.
pub fn script(max_ops: usize) -> impl Strategy<Value = Vec<Op>> {
    proptest::collection::vec(op(), 1..=max_ops.max(1))
}

/// What a differential run did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Stats {
    /// The seed; set `RESERVATION_CONFORMANCE_SEED` to it to run the same scripts again.
    pub seed: u64,
    /// Scripts run.
    pub cases: u32,
    /// Operations applied, over all scripts.
    pub ops: u64,
    /// The rules the specification reported.
    pub reached: RuleSet,
    /// Wall time.
    pub elapsed: Duration,
}

impl Stats {
    /// Operations per second.
    pub fn ops_per_second(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn draw_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}

fn rng(seed: u64) -> TestRng {
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let word = seed.rotate_left(i as u32 * 17) ^ (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1));
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// Runs the differential check with `harness`'s [`crate::Settings`] and returns what it did; fails
/// on the first script whose outcomes or lookups differ from the specification (shrunk to a
/// minimal one), or when the run reached fewer than all of R1–A6.
pub fn run<H: Harness>(harness: &H) -> Result<Stats, Failure> {
    let settings = harness.settings().with_env();
    let seed = settings.seed.unwrap_or_else(draw_seed);
    let config = Config {
        cases: settings.cases,
        failure_persistence: None,
        max_shrink_iters: 4_096,
        max_global_rejects: 0,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, rng(seed));
    let reached = Cell::new(RuleSet::EMPTY);
    let ops = Cell::new(0u64);
    let started = WallInstant::now();
    let result = runner.run(&script(settings.max_ops), |script| {
        ops.set(ops.get() + script.len() as u64);
        match oracle::ops(harness, &script) {
            Ok(rules) => {
                reached.set(reached.get().union(rules));
                Ok(())
            }
            Err(f) => Err(TestCaseError::fail(f.to_string())),
        }
    });
    let elapsed = started.elapsed();
    let replay_env = format!(
        "to run the same scripts again: RESERVATION_CONFORMANCE_SEED={seed} RESERVATION_CONFORMANCE_CASES={}",
        settings.cases
    );
    match result {
        Ok(()) => {}
        Err(TestError::Fail(reason, minimal)) => {
            let mut failure = match oracle::ops(harness, &minimal) {
                Err(f) => f,
                Ok(_) => {
                    let mut f =
                        Failure::new("differential", Rule::D7, format!("a script failed, then passed: {reason}"));
                    f.replay = Some(oracle::replay(&minimal));
                    f
                }
            };
            failure.check = "differential".into();
            failure.problem = format!("{} (script shrunk to {} operations)", failure.problem, minimal.len());
            let script: Vec<String> = minimal.iter().map(|op| format!("  {op}")).collect();
            failure.context.push(format!("the minimal script:\n{}", script.join("\n")));
            let replay = failure.replay.take().unwrap_or_default();
            failure.replay = Some(format!("{replay}\n{replay_env}"));
            return Err(failure);
        }
        Err(TestError::Abort(reason)) => {
            return Err(Failure::new("differential", Rule::D7, format!("the run stopped: {reason}; {replay_env}")));
        }
    }
    let reached = reached.get();
    let missing = reached.missing_transitions();
    if let Some(first) = missing.first() {
        let ids: Vec<&str> = missing.iter().map(|r| r.id()).collect();
        let mut f = Failure::new(
            "differential",
            *first,
            format!(
                "the run never reached {}: raise RESERVATION_CONFORMANCE_CASES or the generator's bias",
                ids.join(", ")
            ),
        );
        f.replay = Some(replay_env);
        return Err(f);
    }
    Ok(Stats { seed, cases: settings.cases, ops: ops.get(), reached, elapsed })
}
