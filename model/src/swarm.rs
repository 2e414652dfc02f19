//! Swarm runs: many seeded random walks over a configuration too large to enumerate, spread
//! over threads here and over processes by seed ranges (`--seeds START..END`), so that a CI matrix
//! can split the work. Every walk is [`crate::walk`] on choices drawn from its seed alone, so a
//! reported failure replays from its seed; the summary reports rule and scenario coverage across
//! the swarm.

use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use reservation_store::rules::{Rule, RuleSet};

use crate::config::ModelConfig;
use crate::coverage::{Coverage, Scenario};
use crate::{Violation, walk};

/// How a swarm runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwarmOptions {
    /// The walks' seeds: one walk per seed.
    pub seeds: Range<u64>,
    /// Threads sharing the seeds.
    pub threads: usize,
    /// The most steps one walk takes (it also ends when no action is enabled).
    pub depth: usize,
    /// Stop once a walk fails (the seeds after it may not run).
    pub stop_at_failure: bool,
}

impl Default for SwarmOptions {
    fn default() -> Self {
        SwarmOptions { seeds: 0..1_000, threads: 2, depth: 400, stop_at_failure: false }
    }
}

/// A walk that broke a property.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwarmFailure {
    /// The seed that replays it.
    pub seed: u64,
    /// The property and the trace.
    pub violation: Violation,
}

/// What a swarm found.
#[derive(Clone, Debug)]
pub struct SwarmReport {
    /// Walks run.
    pub walks: u64,
    /// Steps taken over all walks.
    pub steps: u64,
    /// Rules reached by the walks that completed.
    pub rules: RuleSet,
    /// Rules and scenarios reached by the walks that completed.
    pub coverage: Coverage,
    /// The failing walks, by seed.
    pub failures: Vec<SwarmFailure>,
    /// Wall time.
    pub seconds: f64,
}

impl SwarmReport {
    /// The report in a few lines; `replay` gives the command that reruns a seed.
    pub fn text(&self, replay: impl Fn(u64) -> String) -> String {
        let unreached: Vec<&str> =
            Rule::TRANSITIONS.into_iter().filter(|r| !self.rules.contains(*r)).map(Rule::id).collect();
        let mut out = format!(
            "swarm: {} walks, {} steps, {:.2} s\ncoverage: {} of {} rules reached; unreached rule ids: {}\n",
            self.walks,
            self.steps,
            self.seconds,
            Rule::TRANSITIONS.len() - unreached.len(),
            Rule::TRANSITIONS.len(),
            if unreached.is_empty() { "none".to_string() } else { unreached.join(" ") },
        );
        for s in Scenario::ALL {
            let reached = if self.coverage.reached(s) { "reached" } else { "NOT reached" };
            out.push_str(&format!("  sometimes {}: {reached}\n", s.text()));
        }
        match self.failures.first() {
            None => out.push_str("failures: none\n"),
            Some(first) => {
                out.push_str(&format!("failures: {}\n", self.failures.len()));
                for f in &self.failures {
                    out.push_str(&format!("  seed {}: {}\n", f.seed, f.violation.property));
                }
                let command = replay(first.seed);
                out.push_str(&format!(
                    "\nseed {} breaks \"{}\"; replay it with\n  {command}\n{}",
                    first.seed, first.violation.property, first.violation.trace
                ));
            }
        }
        out
    }
}

/// The walk choices of `seed`: `depth` bytes from a xorshift generator seeded by it alone.
pub fn choices(seed: u64, depth: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..depth)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32) as u8
        })
        .collect()
}

/// Runs one walk per seed of `options.seeds` over `config` on `options.threads` threads.
pub fn swarm(config: ModelConfig, options: &SwarmOptions) -> SwarmReport {
    let started = Instant::now();
    let next = AtomicU64::new(options.seeds.start);
    let stop = AtomicBool::new(false);
    let totals = Mutex::new((0u64, 0u64, RuleSet::EMPTY, Coverage::default(), Vec::new()));
    std::thread::scope(|scope| {
        for _ in 0..options.threads.max(1) {
            scope.spawn(|| {
                loop {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= options.seeds.end {
                        break;
                    }
                    let result = walk(&config, &choices(seed, options.depth));
                    let mut t = totals.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    t.0 += 1;
                    match result {
                        Ok(r) => {
                            t.1 += r.steps as u64;
                            t.2 = t.2.union(r.rules);
                            t.3 = t.3.union(r.coverage);
                        }
                        Err(violation) => {
                            t.4.push(SwarmFailure { seed, violation });
                            if options.stop_at_failure {
                                stop.store(true, Ordering::Relaxed);
                            }
                        }
                    }
                }
            });
        }
    });
    let (walks, steps, rules, coverage, mut failures) =
        totals.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    failures.sort_by_key(|f: &SwarmFailure| f.seed);
    SwarmReport { walks, steps, rules, coverage, failures, seconds: started.elapsed().as_secs_f64() }
}
