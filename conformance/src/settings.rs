//! How much the randomized checks do, and from which seed: the run's [`Settings`].

use std::time::Duration;

use crate::gate::Ceilings;
use crate::harness::Fault;

/// How much the randomized checks do, and from which seed: given to the run ([`crate::run_all`],
/// the [`tests!`](crate::tests) macro, each function of [`crate::checks`]), never asked of the
/// harness. [`Settings::from_env`] reads the environment's overrides, for a longer run or a
/// replay: `RESERVATION_CONFORMANCE_CASES`, `RESERVATION_CONFORMANCE_SEED`,
/// `RESERVATION_CONFORMANCE_THREADS` (the differential check's); the `tests!` macro applies them
/// on top of the settings it is given.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Settings {
    /// Scripts the differential check runs.
    pub cases: u32,
    /// Most operations in one script.
    pub max_ops: usize,
    /// The one seed of every randomized check: the differential check's scripts, the
    /// linearizability check's histories, the fault check's schedule and workload, and the crash
    /// check's crash points. `None` draws one for the differential check (printed on failure) and
    /// gives the others fixed ones. `RESERVATION_CONFORMANCE_SEED`, when set, wins over it at
    /// every entry point ([`Settings::seed_or`]) unless [`Settings::seed_from_env`] is off, so
    /// that a failure's replay line replays the run whatever function ran it.
    pub seed: Option<u64>,
    /// Whether `RESERVATION_CONFORMANCE_SEED` wins over [`Settings::seed`]: on by default; a
    /// program that reads the variable itself with flags of its own (the `reservation` command
    /// line) turns it off.
    pub seed_from_env: bool,
    /// The differential check's regression file: the seed of every failing script is appended
    /// to it, and the scripts of its seeds run first on every later run (on top of `cases`). A
    /// relative path is taken from the working directory, which `cargo test` sets to the root of
    /// the crate under test. [`Settings::REGRESSIONS`] by default; `None` neither reads nor
    /// writes one.
    pub regressions: Option<&'static str>,
    /// Scripts of the differential check run at once, each on its own store: 1 by default. A
    /// store behind a process boundary (the driver's [`crate::driver::CommandHarness`]) goes
    /// faster with several in flight, since each request waits a round trip. Each thread runs
    /// its share of `cases` from a seed of its own, and a failure's replay line names it.
    pub differential_threads: usize,
    /// Threads of the linearizability check: 6 by default, enough that a tight read-then-write
    /// race shows even when the check shares one core with other work.
    pub threads: usize,
    /// Operations of one history of the linearizability check, over all threads and rounds.
    pub concurrent_ops: usize,
    /// Most histories the linearizability check records (a race shows in some only); 10,000 by
    /// default, so that the time budget is what ends the check.
    pub histories: usize,
    /// Wall time after which the linearizability check records no further history.
    pub concurrency_budget: std::time::Duration,
    /// What the linearizability check's histories may ask of the judge, per key ([`Ceilings`]);
    /// [`Settings::with_ceilings`] sets the fault and crash checks' too.
    pub ceilings: Ceilings,
    /// The fault check's run (`p1_faults_…`); its seed, when it sets none, is [`Settings::seed`].
    pub faults: FaultSettings,
    /// The crash check's run (`p1_crashes_…`); its seed, when it sets none, is [`Settings::seed`].
    pub crashes: CrashSettings,
    /// Where a history the judge could not decide is written, and where the narrower ceilings
    /// that the next run of its check records with are noted ([`crate::histories`]). `None`, the
    /// default: `RESERVATION_CONFORMANCE_HISTORIES`, or `reservation-conformance` in the system's
    /// temporary directory.
    pub history_dir: Option<std::path::PathBuf>,
    /// Where the page of each failed check is written ([`crate::page`]): an HTML file that
    /// draws the history behind the failure, and that history as JSON. `None`, the default:
    /// no page, unless `RESERVATION_CONFORMANCE_REPORTS` names a directory ([`Settings::with_env`]).
    pub report_dir: Option<std::path::PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cases: 4_000,
            max_ops: 48,
            seed: None,
            seed_from_env: true,
            regressions: Some(Settings::REGRESSIONS),
            differential_threads: 1,
            threads: 6,
            concurrent_ops: 3_000,
            histories: 10_000,
            concurrency_budget: std::time::Duration::from_secs(1),
            ceilings: Ceilings::default(),
            faults: FaultSettings::default(),
            crashes: CrashSettings::default(),
            history_dir: None,
            report_dir: None,
        }
    }
}

impl From<FaultSettings> for Settings {
    /// The default settings with the fault check's run `faults`.
    fn from(faults: FaultSettings) -> Self {
        Settings::default().with_faults(faults)
    }
}

impl From<CrashSettings> for Settings {
    /// The default settings with the crash check's run `crashes`.
    fn from(crashes: CrashSettings) -> Self {
        Settings::default().with_crashes(crashes)
    }
}

/// The environment variable that names the directory the pages of failed checks are written to
/// ([`Settings::report_dir`]).
pub const REPORTS: &str = "RESERVATION_CONFORMANCE_REPORTS";

/// The environment variable of the one seed.
pub const SEED: &str = "RESERVATION_CONFORMANCE_SEED";

impl Settings {
    /// The default regression file, relative to the crate root: commit it, so that every run
    /// replays the scripts that once failed.
    pub const REGRESSIONS: &'static str = "proptest-regressions/reservation-conformance.txt";

    /// The default settings with the environment's overrides ([`Settings::with_env`]).
    pub fn from_env() -> Self {
        Settings::default().with_env()
    }

    /// These settings with the regression file `path`, or none.
    pub fn with_regressions(mut self, path: Option<&'static str>) -> Self {
        self.regressions = path;
        self
    }

    /// These settings with `cases` differential scripts.
    pub fn with_cases(mut self, cases: u32) -> Self {
        self.cases = cases;
        self
    }

    /// These settings with `threads` differential scripts at once (at least 1).
    pub fn with_differential_threads(mut self, threads: usize) -> Self {
        self.differential_threads = threads.max(1);
        self
    }

    /// These settings with the seed `seed` for every randomized check.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = Some(seed);
        self
    }

    /// These settings with `RESERVATION_CONFORMANCE_SEED` ignored ([`Settings::seed_from_env`]).
    pub fn without_env_seed(mut self) -> Self {
        self.seed_from_env = false;
        self
    }

    /// The seed a randomized check runs with: `RESERVATION_CONFORMANCE_SEED` when set (and
    /// [`Settings::seed_from_env`]), else [`Settings::seed`], else `default`.
    pub fn seed_or(&self, default: u64) -> u64 {
        self.seed_or_else(|| default)
    }

    /// [`Settings::seed_or`], with a default drawn by `draw` only when needed.
    pub fn seed_or_else(&self, draw: impl FnOnce() -> u64) -> u64 {
        self.env_seed().or(self.seed).unwrap_or_else(draw)
    }

    /// The seed `RESERVATION_CONFORMANCE_SEED` gives, when it is set, parses and these settings
    /// obey it: the one place the suite reads it.
    fn env_seed(&self) -> Option<u64> {
        let var = std::env::var(SEED).ok()?;
        self.seed_from_env.then(|| var.trim().parse().ok()).flatten()
    }

    /// These settings with linearizability histories of `ops` operations on `threads` threads,
    /// up to `histories` of them.
    pub fn with_concurrency(mut self, threads: usize, ops: usize, histories: usize) -> Self {
        self.threads = threads;
        self.concurrent_ops = ops;
        self.histories = histories;
        self
    }

    /// These settings with every recorded history (the linearizability, fault and crash checks')
    /// within `ceilings`.
    pub fn with_ceilings(mut self, ceilings: Ceilings) -> Self {
        self.ceilings = ceilings;
        self.faults = self.faults.with_ceilings(ceilings);
        self.crashes = self.crashes.with_ceilings(ceilings);
        self
    }

    /// These settings with undecided histories written to `dir`, where the narrower ceilings of
    /// the next runs are noted too.
    pub fn with_history_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.history_dir = Some(dir.into());
        self
    }

    /// These settings with the page of each failed check written to `dir` ([`crate::page`]).
    pub fn with_report_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.report_dir = Some(dir.into());
        self
    }

    /// The directory of [`Settings::history_dir`], or its default.
    pub fn history_dir_or_default(&self) -> std::path::PathBuf {
        self.history_dir.clone().unwrap_or_else(crate::histories::default_dir)
    }

    /// These settings with the fault check's run `faults`.
    pub fn with_faults(mut self, faults: FaultSettings) -> Self {
        self.faults = faults;
        self
    }

    /// These settings with the crash check's run `crashes`.
    pub fn with_crashes(mut self, crashes: CrashSettings) -> Self {
        self.crashes = crashes;
        self
    }

    /// These settings overridden by the environment's variables, where they are set and parse:
    /// `RESERVATION_CONFORMANCE_CASES`, `RESERVATION_CONFORMANCE_SEED`,
    /// `RESERVATION_CONFORMANCE_THREADS` and `RESERVATION_CONFORMANCE_REPORTS` (where failed
    /// checks' pages go, [`Settings::report_dir`]). A program with flags of its own (the `reservation`
    /// command line) reads them itself and does not call this.
    pub fn with_env(mut self) -> Self {
        let var = |name: &str| std::env::var(name).ok();
        if let Some(cases) = var("RESERVATION_CONFORMANCE_CASES").and_then(|v| v.parse().ok()) {
            self.cases = cases;
        }
        if let Some(seed) = self.env_seed() {
            self.seed = Some(seed);
        }
        if let Some(threads) = var("RESERVATION_CONFORMANCE_THREADS").and_then(|v| v.parse().ok()) {
            self = self.with_differential_threads(threads);
        }
        if let Some(dir) = var(REPORTS).filter(|d| !d.is_empty()) {
            self.report_dir = Some(dir.into());
        }
        self
    }
}

/// The replay lines of a failure of the check whose test is `test`, run from seed `seed`: the
/// suite's one seed, through `cargo test` (any test that runs the check obeys it) and through the
/// driver. The one place they are written.
pub(crate) fn replay(test: &str, seed: u64) -> String {
    format!(
        "{SEED}={seed} cargo test {test}   (or the test that ran this check)\n\
         reservation conform … --seed {seed}   (through the driver: the command that ran, with this seed)"
    )
}

/// How a fault run ([`crate::faults::run`]) goes: which faults, for how long, how often. Its seed is the run's
/// ([`crate::Settings::seed`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FaultSettings {
    /// `None`: every fault offered.
    pub(crate) faults: Option<Vec<Fault>>,
    pub(crate) duration: Duration,
    pub(crate) max_faults: usize,
    pub(crate) gap: Duration,
    pub(crate) ops: usize,
    pub(crate) ledger_keys: usize,
    pub(crate) ceilings: Ceilings,
}

impl Default for FaultSettings {
    /// Every fault offered, for 2 seconds, a fault every 200 ms or so and at most 8; 4,000
    /// contended operations and 400 ledger keys at most, spread over the run.
    fn default() -> Self {
        FaultSettings {
            faults: None,
            duration: Duration::from_secs(2),
            max_faults: 8,
            gap: Duration::from_millis(200),
            ops: 4_000,
            ledger_keys: 400,
            ceilings: Ceilings::default(),
        }
    }
}

impl FaultSettings {
    /// These settings with only `faults` fired, among those offered.
    pub fn with_faults(mut self, faults: &[Fault]) -> Self {
        self.faults = Some(faults.to_vec());
        self
    }

    /// These settings with a run of `duration` (wall time).
    pub fn with_duration(mut self, duration: Duration) -> Self {
        self.duration = duration;
        self
    }

    /// These settings with at most `n` faults fired in one run.
    pub fn with_max_faults(mut self, n: usize) -> Self {
        self.max_faults = n;
        self
    }

    /// These settings with faults `gap` apart on average (each gap drawn between half and one
    /// and a half of it).
    pub fn with_gap(mut self, gap: Duration) -> Self {
        self.gap = gap;
        self
    }

    /// These settings with at most `ops` operations of the contended workers, over all of them,
    /// spread over the run (0: no contended workers).
    pub fn with_ops(mut self, ops: usize) -> Self {
        self.ops = ops;
        self
    }

    /// These settings with at most `keys` ledger keys, spread over the run (0: no ledger).
    pub fn with_ledger_keys(mut self, keys: usize) -> Self {
        self.ledger_keys = keys;
        self
    }

    /// These settings with histories recorded within `ceilings` ([`Ceilings`]).
    pub fn with_ceilings(mut self, ceilings: Ceilings) -> Self {
        self.ceilings = ceilings;
        self
    }

    /// The ceilings the histories are recorded within.
    pub fn ceilings(&self) -> Ceilings {
        self.ceilings
    }

    /// Whether these settings let `fault` fire.
    pub(crate) fn lets(&self, fault: Fault) -> bool {
        self.faults.as_ref().is_none_or(|faults| faults.contains(&fault))
    }
}

/// How a crash run ([`crate::crashes::run`]) goes. Its seed is the run's ([`crate::Settings::seed`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CrashSettings {
    pub(crate) rounds: usize,
    pub(crate) ceilings: Ceilings,
}

impl Default for CrashSettings {
    /// Four rounds (eight crashes); the default [`Ceilings`].
    fn default() -> Self {
        CrashSettings { rounds: 4, ceilings: Ceilings::default() }
    }
}

impl CrashSettings {
    /// These settings with histories recorded within `ceilings` ([`Ceilings`]).
    pub fn with_ceilings(mut self, ceilings: Ceilings) -> Self {
        self.ceilings = ceilings;
        self
    }

    /// The ceilings the histories are recorded within.
    pub fn ceilings(&self) -> Ceilings {
        self.ceilings
    }

    /// These settings with `rounds` rounds, each a quiet crash and a burst crash (at least 1).
    pub fn with_rounds(mut self, rounds: usize) -> Self {
        self.rounds = rounds.max(1);
        self
    }
}
