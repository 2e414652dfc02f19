//! The differential check: random operation scripts, biased to where bugs live, run on the store
//! and on the specification through [`crate::oracle::ops`]; failures shrink to a minimal script.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant as WallInstant};

use proptest::prelude::*;
use proptest::strategy::Strategy;
use proptest::test_runner::{
    Config, FailurePersistence, FileFailurePersistence, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner,
};
use reservation_store::rules::RuleSet;

use crate::erased::DynHarness;
use crate::failure::Failure;
use crate::ops::{ClockMove, Op, ReleasePick, VersionPick};
use crate::oracle;

mod cuts;
pub mod restarts;

/// The check's function name; failures give its test name ([`Failure::without_rule`]).
const CHECK: &str = "differential";

/// Reads weighted choices from the bytes of one random word, top byte first.
struct Bytes(u64);

impl Bytes {
    /// The next byte.
    fn byte(&mut self) -> u64 {
        let b = self.0 >> 56;
        self.0 <<= 8;
        b
    }

    /// An index into `weights`, chosen with those weights by the next byte.
    fn pick(&mut self, weights: &[u64]) -> usize {
        let total: u64 = weights.iter().sum();
        let mut x = self.byte() * total.max(1) / 256;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        0
    }

    /// A number in `lo..hi`, from the next byte.
    fn range(&mut self, lo: u8, hi: u8) -> u8 {
        let span = u64::from(hi.saturating_sub(lo)).max(1);
        lo + (self.byte() % span) as u8
    }
}

/// A key slot ([`crate::oracle::ops`] names them): mostly the first two, which differ only in
/// case, within one scope; often the third (a trailing space) and the same key in a tenant's
/// scope; sometimes the same key in a scope that differs only in its tenant's spelling, its
/// namespace or its aggregate type.
fn key(b: &mut Bytes) -> u8 {
    b.pick(&[4, 4, 2, 2, 1, 1, 1, 1]) as u8
}

/// An owner of the slot's scope: mostly the first two, sometimes one that differs from the first
/// only in its tenant (another, `SYSTEM_TENANT` or the one spelled so) or its aggregate type.
fn owner(b: &mut Bytes) -> u8 {
    b.pick(&[4, 4, 2, 1, 1, 1]) as u8
}

/// A hold: 1–3 per owner, mostly two.
fn hold(b: &mut Bytes) -> u8 {
    b.pick(&[4, 4, 1]) as u8
}

/// A version relative to the key's: at, just below and just above it, UNVERSIONED, or small.
fn version(b: &mut Bytes) -> VersionPick {
    match b.pick(&[4, 3, 3, 2, 2]) {
        0 => VersionPick::At,
        1 => VersionPick::Below,
        2 => VersionPick::Above,
        3 => VersionPick::Unversioned,
        _ => VersionPick::Fixed(b.range(0, 4)),
    }
}

/// Decodes one operation from a random word, biased to where bugs live: 2–6 owners, 2–8 key
/// slots over 6 scopes (the key `k` in most of them), 1–3 holds, short ttls (sometimes zero), versions at, just below and just above the stored one,
/// and clock moves to exactly `expires_at - 1`, `expires_at` and `expires_at + 1`. Smaller words
/// decode to simpler operations (word 0 is a reserve by owner 0 of key 0), so shrinking a word
/// simplifies its operation.
pub(crate) fn decode(word: u64) -> Op {
    let mut b = Bytes(word);
    match b.pick(&[6, 4, 3, 3, 4, 1]) {
        0 => {
            let (owner, key, hold) = (owner(&mut b), key(&mut b), hold(&mut b));
            let ttl = match b.pick(&[6, 3, 1]) {
                0 => b.range(4, 40),
                1 => b.range(1, 4),
                _ => 0,
            };
            Op::Reserve { owner, key, hold, ttl }
        }
        1 => Op::Confirm { owner: owner(&mut b), key: key(&mut b), version: version(&mut b) },
        2 => {
            let (owner, key) = (owner(&mut b), key(&mut b));
            let version = if b.pick(&[4, 1]) == 0 { ReleasePick::At(version(&mut b)) } else { ReleasePick::Any };
            Op::Release { owner, key, version }
        }
        3 => Op::Abandon { owner: owner(&mut b), key: key(&mut b), hold: hold(&mut b) },
        4 => Op::Clock(match b.pick(&[1, 1, 1, 1]) {
            0 => ClockMove::AtExpiry { key: key(&mut b) },
            1 => ClockMove::JustBeforeExpiry { key: key(&mut b) },
            2 => ClockMove::JustAfterExpiry { key: key(&mut b) },
            _ => ClockMove::By(b.range(0, 30)),
        }),
        _ => Op::Lookup { key: key(&mut b) },
    }
}

/// One operation: a random word, [`decode`]d. Cheap to generate (one draw per operation), and
/// shrinks toward simpler operations.
pub(crate) fn op() -> impl Strategy<Value = Op> {
    any::<u64>().prop_map(decode)
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
    /// Batches of scripts drawn past `cases` to reach every rule of R1–A6 (at most eight).
    pub extra_batches: u32,
    /// Scripts run when every rule of R1–A6 had first been reached, counting those of the
    /// regression file and of the extra batches; on several threads, whose scripts interleave,
    /// all of the first part's scripts count.
    pub covered_after: Option<u64>,
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

/// What a run that cannot reach every rule of R1–A6 breaks: no rule, the check's coverage.
pub const COVERAGE: &str = "coverage: the differential check must reach every rule of R1–A6";

/// Batches of scripts drawn, past `cases`, while some rule is still unreached.
const EXTRA_BATCHES: u32 = 8;
/// The fewest scripts in one such batch.
const MIN_BATCH: u32 = 200;

/// Runs the differential check on `harness` with `settings` and returns what it did; fails
/// on the first script whose outcomes or lookups differ from the specification (shrunk to a
/// minimal one), or when the run reached fewer than all of R1–A6 even after drawing up to eight
/// more batches of scripts to reach them ([`COVERAGE`]).
///
/// The scripts of the seeds in the regression file ([`crate::Settings::regressions`]) run first,
/// before `cases` new ones; a new failing script's seed is appended to that file. With
/// [`crate::Settings::differential_threads`] above 1, each thread runs its share of the scripts
/// from a seed of its own (the first thread's is the run's seed), and a failure's replay line
/// gives that thread's seed and share, to replay on one thread.
pub fn run(harness: &dyn DynHarness, settings: &crate::Settings) -> Result<Stats, Failure> {
    let seed = settings.seed_or_else(draw_seed);
    let threads = settings.differential_threads.max(1);
    let stop = AtomicBool::new(false);
    let started = WallInstant::now();
    let results: Vec<Result<Share, Failure>> = if threads == 1 {
        vec![run_share(harness, settings, seed, settings.cases, &stop, RuleSet::EMPTY)]
    } else {
        std::thread::scope(|scope| {
            let shares: Vec<_> = (0..threads as u64)
                .map(|i| {
                    let cases = share(settings.cases, threads as u32, i as u32);
                    let seed = if i == 0 { seed } else { seed ^ 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i) };
                    let stop = &stop;
                    scope.spawn(move || run_share(harness, settings, seed, cases, stop, RuleSet::EMPTY))
                })
                .collect();
            shares
                .into_iter()
                .map(|t| t.join().unwrap_or_else(|panic| Err(Failure::panicked(CHECK, &*panic))))
                .collect()
        })
    };
    let (mut ops, mut reached, mut scripts, mut covered_after) = (0, RuleSet::EMPTY, 0, None);
    for result in results {
        let share = result?;
        ops += share.ops;
        scripts += share.scripts;
        reached = reached.union(share.reached);
        covered_after = share.covered_after;
    }
    // Several threads' scripts interleave: the whole first part counts.
    if threads > 1 {
        covered_after = reached.missing_transitions().is_empty().then_some(scripts);
    }
    // Scripts drawn until every rule is reached: a run whose seed happens to miss one draws more,
    // each batch from a seed of its own derived from the run's, up to a cap. A run of no new
    // scripts (`cases` 0: the regression file's alone) draws none.
    let batch = settings.cases.max(MIN_BATCH);
    let extra_batches = if settings.cases == 0 { 0 } else { EXTRA_BATCHES };
    let mut extra = 0;
    while !reached.missing_transitions().is_empty() && extra < extra_batches {
        extra += 1;
        let seed = seed ^ 0xc0fe_0000_0000_0000u64.wrapping_add(u64::from(extra)).wrapping_mul(0x2545_f491_4f6c_dd1d);
        let share = run_share(harness, &settings.clone().with_regressions(None), seed, batch, &stop, reached)?;
        ops += share.ops;
        reached = reached.union(share.reached);
        covered_after = covered_after.or(share.covered_after.map(|n| scripts + n));
        scripts += share.scripts;
    }
    let elapsed = started.elapsed();
    let replay_env = format!(
        "to run the same scripts again: RESERVATION_CONFORMANCE_SEED={seed} RESERVATION_CONFORMANCE_CASES={} RESERVATION_CONFORMANCE_THREADS={threads}",
        settings.cases
    );
    let missing = reached.missing_transitions();
    if !missing.is_empty() {
        let ids: Vec<&str> = missing.iter().map(|r| r.id()).collect();
        let mut f = Failure::without_rule(
            CHECK,
            format!(
                "the run never reached {}, after {} scripts and {extra_batches} more batches of {batch} drawn to reach \
                 them: raise RESERVATION_CONFORMANCE_CASES or the scripts' length",
                ids.join(", "),
                settings.cases
            ),
        );
        f.property = Some(COVERAGE);
        f.replay = Some(replay_env);
        return Err(f);
    }
    Ok(Stats { seed, cases: settings.cases, ops, reached, extra_batches: extra, covered_after, elapsed })
}

/// Thread `i`'s share of `cases` scripts over `threads` threads.
fn share(cases: u32, threads: u32, i: u32) -> u32 {
    cases / threads + u32::from(i < cases % threads)
}

/// What one thread's share of a run did.
struct Share {
    /// Scripts run, those of the regression file included.
    scripts: u64,
    /// Operations applied.
    ops: u64,
    /// The rules the specification reported.
    reached: RuleSet,
    /// Scripts run when every rule of R1–A6 had been reached, counting the rules reached before.
    covered_after: Option<u64>,
}

/// Runs `cases` scripts from `seed` on this thread, after a part of the run that reached
/// `before`: what they did, or the shrunk failure. Stops early, passing, once `stop` is set by
/// another thread's failure.
fn run_share(
    harness: &dyn DynHarness,
    settings: &crate::Settings,
    seed: u64,
    cases: u32,
    stop: &AtomicBool,
    before: RuleSet,
) -> Result<Share, Failure> {
    let persistence =
        settings.regressions.map(|path| Box::new(FileFailurePersistence::Direct(path)) as Box<dyn FailurePersistence>);
    let config = Config {
        cases,
        failure_persistence: persistence,
        max_shrink_iters: 4_096,
        max_global_rejects: 0,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, rng(seed));
    let reached = Cell::new(RuleSet::EMPTY);
    let ops = Cell::new(0u64);
    let scripts = Cell::new(0u64);
    let covered_after = Cell::new(None);
    // A script on an adapter that broke the protocol says nothing of the store: it stops the run
    // as passing, so that proptest neither shrinks it nor saves its seed, and is reported alone.
    let broken: Cell<Option<Failure>> = Cell::new(None);
    let result = runner.run(&script(settings.max_ops), |script| {
        if stop.load(Ordering::Relaxed) {
            return Ok(());
        }
        ops.set(ops.get() + script.len() as u64);
        scripts.set(scripts.get() + 1);
        match oracle::ops(harness, &script) {
            Ok(rules) => {
                reached.set(reached.get().union(rules));
                if covered_after.get().is_none() && before.union(reached.get()).missing_transitions().is_empty() {
                    covered_after.set(Some(scripts.get()));
                }
                Ok(())
            }
            Err(f) if f.is_protocol() => {
                stop.store(true, Ordering::Relaxed);
                broken.set(Some(f));
                Ok(())
            }
            Err(f) => Err(TestCaseError::fail(f.to_string())),
        }
    });
    if let Some(failure) = broken.take() {
        return Err(failure);
    }
    let replay_env = format!(
        "to run the same scripts again: RESERVATION_CONFORMANCE_SEED={seed} RESERVATION_CONFORMANCE_CASES={cases} RESERVATION_CONFORMANCE_THREADS=1"
    );
    match result {
        Ok(()) => Ok(Share {
            scripts: scripts.get(),
            ops: ops.get(),
            reached: reached.get(),
            covered_after: covered_after.get(),
        }),
        Err(TestError::Fail(reason, minimal)) => {
            stop.store(true, Ordering::Relaxed);
            let mut failure = match oracle::ops(harness, &minimal) {
                Err(f) => f,
                Ok(_) => {
                    let mut f = Failure::without_rule(CHECK, format!("a script failed, then passed: {reason}"));
                    f.replay = Some(oracle::replay(&minimal));
                    f
                }
            };
            failure.problem = format!("{} (script shrunk to {} operations)", failure.problem, minimal.len());
            let script: Vec<String> = minimal.iter().map(|op| format!("  {op}")).collect();
            failure.context.push(format!("the minimal script:\n{}", script.join("\n")));
            let replay = failure.replay.take().unwrap_or_default();
            let saved = settings.regressions.map_or_else(String::new, |path| {
                format!("\nthe failing script's seed is in {path}, whose scripts run first on every run: commit it")
            });
            failure.replay = Some(format!("{replay}\n{replay_env}{saved}"));
            Err(failure)
        }
        Err(TestError::Abort(reason)) => {
            stop.store(true, Ordering::Relaxed);
            Err(Failure::without_rule(CHECK, format!("the run stopped: {reason}; {replay_env}")))
        }
    }
}
