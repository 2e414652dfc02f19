//! The differential check across restarts: the differential's scripts, over every spelling of
//! key, scope, tenant and hold that its slots hold ([`crate::oracle::ops`]), run on one durable
//! store that is closed and reopened at steps the seed draws, every key the script touched
//! compared with the specification after each reopen.
//!
//! A store's recovery reads back what it wrote: its log, and the snapshot or checkpoint it
//! compacts the log into every so many changes. The checks that restart a store use plain names;
//! the differential, which draws every spelling, never restarts. A snapshot that writes a scope
//! as text and reads `SYSTEM_TENANT` back as the system tenant, or trims a key's trailing space,
//! passes both and loses keys at its first restart after a compaction. The scripts here are long
//! (up to [`LONGEST`] steps, a few hundred changes on average) so that they cross the
//! compactions of stores whose periods span tens to hundreds of changes, and one step in
//! [`RESTART_ONE_IN`] is followed by a restart, so that restarts fall before, between and after
//! them. A failing script shrinks as the differential's do, restarts included.
//!
//! For a store that promises to survive power cuts, every other script runs with each of its
//! restarts a cut under the declared model, its storage on a disk that can lose power
//! (`differential::cuts`).

use std::time::{Duration, Instant as WallInstant};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};

use reservation_store::rules::RuleSet;

use crate::erased::DynHarness;
use crate::failure::Failure;
use crate::ops::Op;
use crate::oracle;

use super::cuts::Cutting;

/// The check's function name; failures give its test name.
const CHECK: &str = "differential_restarts";

/// The most steps of one script.
pub const LONGEST: usize = 1_024;

/// One step in this many, on average, is followed by a restart.
pub const RESTART_ONE_IN: u32 = 32;

/// The fewest steps of one script: enough to cross a compaction every 64 changes.
pub const SHORTEST: usize = 256;

/// Scripts per run, whatever [`crate::Settings::cases`] says: the differential's scripts are
/// many and short, these few and long, and each restart costs what a store's recovery costs.
pub const SCRIPTS: u32 = 6;

/// What a run did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Stats {
    /// The seed; set `RESERVATION_CONFORMANCE_SEED` to it to run the same scripts again.
    pub seed: u64,
    /// Scripts run.
    pub scripts: u32,
    /// Steps run, over all scripts.
    pub ops: u64,
    /// Restarts made, over all scripts.
    pub restarts: u64,
    /// Of those, the restarts that were power cuts.
    pub cuts: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// One step: an operation, and whether the store is closed and reopened after it (one in
/// [`RESTART_ONE_IN`]; shrinks to no restart).
pub fn step() -> impl Strategy<Value = (Op, bool)> {
    (super::op(), proptest::bool::weighted(1.0 / f64::from(RESTART_ONE_IN)))
}

/// A script of [`SHORTEST`] to [`LONGEST`] steps.
pub fn script() -> impl Strategy<Value = Vec<(Op, bool)>> {
    proptest::collection::vec(step(), SHORTEST..=LONGEST)
}

/// How a script's restarts are made: reopens through the harness, or power cuts.
#[derive(Clone, Copy)]
enum Via<'a, 'h> {
    Reopen(&'h dyn DynHarness),
    Cut(&'a Cutting<'h>),
}

impl Via<'_, '_> {
    /// Runs `script` quietly: whether it passes.
    fn quietly(self, script: &[(Op, bool)]) -> Result<RuleSet, Failure> {
        match self {
            Via::Reopen(harness) => oracle::quietly_across_restarts(harness, script),
            Via::Cut(cutting) => oracle::quietly_on(cutting, script),
        }
    }

    /// Runs `script` with its transcript, when it fails; the cuts it made said beside.
    fn explained(self, script: &[(Op, bool)]) -> Result<RuleSet, Failure> {
        match self {
            Via::Reopen(harness) => oracle::ops_across_restarts(harness, script),
            Via::Cut(cutting) => oracle::across_restarts_on(cutting, script).map_err(|mut f| {
                f.context.extend(cutting.said());
                let replay = f.replay.take().unwrap_or_default();
                f.replay = Some(format!(
                    "{replay}\n  (this script's restarts were power cuts: `ops_across_restarts` reopens instead; the seed \
                     below runs the cuts again)"
                ));
                f
            }),
        }
    }
}

/// Runs the differential check across restarts on `harness` with `settings`: [`SCRIPTS`]
/// scripts, each on one store of `harness`, closed and reopened
/// through [`crate::Harness::reopen`] at seeded steps; for a store that promises to survive power
/// cuts (and where FUSE mounts), every other script on a disk that can lose power, each restart a
/// cut under the declared model. Fails on the first script whose outcomes or lookups differ from
/// the specification's (`shrink`ed), P1 where a reopen or a cut lost or made up a state. The seed
/// is the differential's ([`crate::Settings::seed`], drawn when unset and printed on failure).
pub fn run(harness: &dyn DynHarness, settings: &crate::Settings) -> Result<Stats, Failure> {
    let seed = settings.seed_or_else(super::draw_seed);
    let started = WallInstant::now();
    let mut runner = TestRunner::new_with_rng(Config::default(), super::rng(seed ^ SALT));
    let mut stats = Stats { seed, scripts: 0, ops: 0, restarts: 0, cuts: 0, elapsed: Duration::ZERO };
    let replay_env = format!("to run the same scripts again: RESERVATION_CONFORMANCE_SEED={seed}");
    let cutting = Cutting::of(harness, CHECK)?;
    for n in 0..SCRIPTS {
        let script = script()
            .new_tree(&mut runner)
            .map_err(|reason| Failure::without_rule(CHECK, format!("no script drawn: {reason}; {replay_env}")))?
            .current();
        let via = match &cutting {
            Some(cutting) if n % 2 == 1 => Via::Cut(cutting),
            _ => Via::Reopen(harness),
        };
        let restarts = script.iter().filter(|(_, reopen)| *reopen).count() as u64;
        stats.scripts += 1;
        stats.ops += script.len() as u64;
        stats.restarts += restarts;
        stats.cuts += if matches!(via, Via::Cut(_)) { restarts } else { 0 };
        match via.quietly(&script) {
            Ok(_) => {}
            // A script on an adapter that broke the protocol says nothing of the store: reported
            // alone, not shrunk.
            Err(f) if f.is_protocol() => return Err(f),
            Err(first) => {
                let drawn = script.len();
                return Err(explained(via, (drawn, shrink(via, script)), first, &replay_env));
            }
        }
    }
    stats.elapsed = started.elapsed();
    let cuts = match &cutting {
        Some(cutting) => format!(", {} of them power cuts under `{}`", stats.cuts, cutting.model),
        None => String::new(),
    };
    crate::said::say(format!(
        "{} scripts of {} steps over every spelling the differential draws, the store closed and reopened {} times{cuts} \
         at steps the seed ({seed}) drew",
        stats.scripts, stats.ops, stats.restarts
    ));
    Ok(stats)
}

/// The failure of the failing script `minimal` (shrunk from one of `drawn` steps), run again with its transcript, the script and the
/// replay lines beside it; `first`, the drawn script's failure, where `minimal` then passed (a
/// store that is not deterministic).
fn explained(
    via: Via<'_, '_>,
    (drawn, minimal): (usize, Vec<(Op, bool)>),
    first: Failure,
    replay_env: &str,
) -> Failure {
    let mut failure = via.explained(&minimal).err().unwrap_or_else(|| {
        let mut f = first;
        f.problem.push_str(
            " (on the script drawn; shrunk, the script below then passed, as a second run of it: the store is not \
             deterministic)",
        );
        f.replay = Some(oracle::replay_across_restarts(&minimal));
        f
    });
    let reopens = minimal.iter().filter(|(_, reopen)| *reopen).count();
    failure.problem = format!(
        "{} (a script of {drawn} steps, shrunk to {} steps and {reopens} restarts)",
        failure.problem,
        minimal.len()
    );
    let script: Vec<String> = minimal
        .iter()
        .map(|(op, reopen)| if *reopen { format!("  {op}, then a restart") } else { format!("  {op}") })
        .collect();
    failure.context.push(format!("the minimal script:\n{}", script.join("\n")));
    let replay = failure.replay.take().unwrap_or_default();
    failure.replay = Some(format!("{replay}\n{replay_env}"));
    failure
}

/// How long [`shrink`] goes on removing steps.
const SHRINK_FOR: Duration = Duration::from_secs(10);

/// A shorter script that still fails, from the failing `script`: its shortest failing prefix
/// (a deterministic store fails a longer prefix at the same step or before), then chunks of
/// steps removed, halving their size, while the script still fails, then each restart that the
/// failure does not need, for at most [`SHRINK_FOR`]. A script of a few hundred steps fails only
/// where a compaction precedes a restart, so the removal is by chunks, not by the one step at a
/// time that proptest's shrinking of a list starts with.
fn shrink(via: Via<'_, '_>, script: Vec<(Op, bool)>) -> Vec<(Op, bool)> {
    let fails = |s: &[(Op, bool)]| via.quietly(s).is_err_and(|f| !f.is_protocol());
    shrunk(script, fails, SHRINK_FOR)
}

/// [`shrink`], by `fails`: the prefix searched whole, the removals for at most `budget` after.
fn shrunk(mut script: Vec<(Op, bool)>, fails: impl Fn(&[(Op, bool)]) -> bool, budget: Duration) -> Vec<(Op, bool)> {
    let (mut passes, mut failing) = (0, script.len());
    while failing - passes > 1 {
        let mid = passes + (failing - passes) / 2;
        if fails(&script[..mid]) {
            failing = mid;
        } else {
            passes = mid;
        }
    }
    script.truncate(failing);
    let deadline = WallInstant::now() + budget;
    let mut chunk = script.len() / 2;
    while chunk > 0 && WallInstant::now() < deadline {
        let mut at = 0;
        while at + chunk < script.len() && WallInstant::now() < deadline {
            let candidate: Vec<_> = script[..at].iter().chain(&script[at + chunk..]).copied().collect();
            if fails(&candidate) {
                script = candidate;
            } else {
                at += chunk;
            }
        }
        chunk /= 2;
    }
    for at in 0..script.len() {
        if script[at].1 && WallInstant::now() < deadline {
            script[at].1 = false;
            script[at].1 = !fails(&script);
        }
    }
    script
}

/// Mixed into the seed, so that these scripts are not the differential's first ones.
const SALT: u64 = 0x5e57_a127_0000_0001;

#[cfg(test)]
mod tests {
    use super::*;

    /// A script that fails when a lookup of key 2 follows a reserve of key 2 with a restart after
    /// it shrinks to those two steps: the prefix after the lookup cut, every other step removed,
    /// the lookup's own restart dropped and the reserve's kept.
    #[test]
    fn a_failing_script_shrinks_to_the_steps_its_failure_needs() {
        let reserve = Op::Reserve { owner: 0, key: 2, hold: 0, ttl: 9 };
        let lookup = Op::Lookup { key: 2 };
        let mut script: Vec<(Op, bool)> =
            (0..300u32).map(|i| (Op::Lookup { key: (i % 2) as u8 }, i % 7 == 0)).collect();
        script[40] = (reserve, true);
        script[200] = (lookup, true);
        let fails = |s: &[(Op, bool)]| {
            let restarted = s.iter().position(|step| *step == (reserve, true));
            restarted.is_some_and(|r| s[r + 1..].iter().any(|(op, _)| *op == lookup))
        };
        assert_eq!(shrunk(script, fails, Duration::from_secs(60)), vec![(reserve, true), (lookup, false)]);
    }
}
