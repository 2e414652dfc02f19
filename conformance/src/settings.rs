//! How much the randomized checks do, and from which seed: the run's [`Settings`].

use crate::crashes::CrashSettings;
use crate::faults::FaultSettings;
use crate::gate::Ceilings;

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
    /// gives the others fixed ones.
    pub seed: Option<u64>,
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
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            cases: 4_000,
            max_ops: 48,
            seed: None,
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
        }
    }
}

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
    /// `RESERVATION_CONFORMANCE_CASES`, `RESERVATION_CONFORMANCE_SEED` and
    /// `RESERVATION_CONFORMANCE_THREADS`. A program with flags of its own (the `reservation`
    /// command line) reads them itself and does not call this.
    pub fn with_env(mut self) -> Self {
        let var = |name: &str| std::env::var(name).ok();
        if let Some(cases) = var("RESERVATION_CONFORMANCE_CASES").and_then(|v| v.parse().ok()) {
            self.cases = cases;
        }
        if let Some(seed) = var("RESERVATION_CONFORMANCE_SEED").and_then(|v| v.parse().ok()) {
            self.seed = Some(seed);
        }
        if let Some(threads) = var("RESERVATION_CONFORMANCE_THREADS").and_then(|v| v.parse().ok()) {
            self = self.with_differential_threads(threads);
        }
        self
    }
}
