//! How long the judge takes on a store's histories: the checks that judge a recorded history (the
//! linearizability check, the fault check, the crash check) run many times, several at once, and
//! for each run the longest time one judgement of a history took. `reservation conform …
//! --judge-times RUNS` prints these figures; BENCHMARKS.md records them.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use crate::erased::{DynHarness, Erased};
use crate::harness::Harness;
use crate::settings::Settings;

/// One check's figures over the runs.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct JudgeTimes {
    /// The check, by its function's name: `linearizability`, `faults` or `crashes`.
    pub check: &'static str,
    /// Each run's longest judgement, in the order the runs ended.
    pub times: Vec<Duration>,
    /// The runs that failed (undecided included), each with its seed and its failure's first line.
    pub failed: Vec<(u64, String)>,
}

impl JudgeTimes {
    /// The `q`-quantile (0 to 1) of the runs' longest judgements, by the nearest rank.
    pub fn quantile(&self, q: f64) -> Duration {
        let mut sorted = self.times.clone();
        sorted.sort_unstable();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }
}

impl fmt::Display for JudgeTimes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} runs, the longest judgement of each: p50 {:.2?}, p99 {:.2?}, max {:.2?}; {} failed",
            self.check,
            self.times.len(),
            self.quantile(0.5),
            self.quantile(0.99),
            self.quantile(1.0),
            self.failed.len()
        )?;
        for (seed, headline) in self.failed.iter().take(3) {
            write!(f, "\n  seed {seed}: {headline}")?;
        }
        Ok(())
    }
}

/// The checks measured, by their function's names.
const CHECKS: [&str; 3] = ["linearizability", "faults", "crashes"];

/// How [`measure`] runs the checks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Load {
    /// Runs of each check.
    pub runs: usize,
    /// Runs at a time.
    pub at_once: usize,
    /// Threads that spin meanwhile, to load the machine.
    pub busy: usize,
}

/// Runs each of the linearizability, fault and crash checks (the crash check on a durable harness
/// only) whose test name `wanted` accepts, `load.runs` times with `settings`, `load.at_once` runs
/// at a time (the checks one after another), while `load.busy` threads spin; run `i` takes the
/// seed of `settings` (or 1) plus `i`. The `k`th of the runs at a time runs on the harness
/// `harnesses[k % harnesses.len()]`: one harness for all, or one each for a store whose stores
/// may not share a harness while they run (one whose sweep by one store's clock deletes another's
/// rows). Each check's figures, in that order; none without a harness.
pub fn measure(
    harnesses: &[&dyn DynHarness],
    settings: &Settings,
    load: Load,
    wanted: impl Fn(&str) -> bool,
) -> Vec<JudgeTimes> {
    let Some(first) = harnesses.first() else { return Vec::new() };
    let durable = Erased::new(*first).capabilities().durable;
    let stop = AtomicBool::new(false);
    /// Stops the spinning threads when dropped: when the checks end, or while a panic of one
    /// unwinds (the scope would otherwise wait for them for ever).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        for _ in 0..load.busy {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        let _stop = Stop(&stop);
        CHECKS
            .iter()
            .filter(|check| durable || **check != "crashes")
            .filter(|check| wanted(crate::catalogue::find(check).map_or(check, |c| c.name)))
            .map(|check| one_check(harnesses, settings, check, load))
            .collect()
    })
}

/// `check`'s figures over `load.runs` runs, `load.at_once` at a time, the `k`th on the harness
/// `harnesses[k % harnesses.len()]`.
fn one_check(harnesses: &[&dyn DynHarness], settings: &Settings, check: &'static str, load: Load) -> JudgeTimes {
    let next = AtomicUsize::new(0);
    let figures = Mutex::new(JudgeTimes { check, times: Vec::new(), failed: Vec::new() });
    let base = settings.seed.unwrap_or(1);
    std::thread::scope(|s| {
        for k in 0..load.at_once.max(1) {
            let harness = Erased::new(harnesses[k % harnesses.len()]);
            let (next, figures) = (&next, &figures);
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= load.runs {
                        return;
                    }
                    let seed = base.wrapping_add(i as u64);
                    let settings = settings.clone().with_seed(seed);
                    let (took, verdict) = run(&harness, &settings, check);
                    let mut figures = figures.lock().unwrap_or_else(PoisonError::into_inner);
                    figures.times.push(took);
                    if let Err(f) = verdict {
                        let text = f.to_string();
                        figures.failed.push((seed, text.lines().next().unwrap_or_default().to_owned()));
                    }
                }
            });
        }
    });
    figures.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// One run of `check`: its longest judgement, and its verdict.
fn run<H: Harness>(harness: &H, settings: &Settings, check: &str) -> (Duration, Result<(), crate::Failure>) {
    match check {
        "linearizability" => match crate::linearizability::run(harness, settings) {
            Ok(stats) => (stats.longest_check, Ok(())),
            Err(f) => (Duration::ZERO, Err(f)),
        },
        "faults" => {
            let run = crate::faults::run(harness, settings);
            (run.report.judge, run.verdict)
        }
        _ => {
            let run = crate::crashes::run(harness, settings);
            (run.report.judge, run.verdict)
        }
    }
}
