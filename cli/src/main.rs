//! `reservation`: the project's one command line. `reservation` alone, or `reservation --help`,
//! lists every command (clap renders the list from the parser's own) and `reservation COMMAND
//! --help` each one's settings. Among them:
//!
//! - `reservation check`, `reservation explore` and `reservation swarm [flags]`: the protocol's model
//!   (`reservation_model::cli`, a library: this is the one program that runs it).
//! - `reservation conform [memory|sqlite|postgres|redis|all]`: the whole conformance suite against
//!   the built-in stores; `reservation conform --command ADAPTER`: against a store in any language.
//! - `reservation all`: the main job, the model check and then the suite against every built-in
//!   store; exits 0 only if everything holds.
#![deny(missing_docs)]

mod model_junit;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use reservation_conformance::driver::CommandHarness;
use reservation_conformance::faults::Fault;
use reservation_conformance::judge_times::{Load, measure};
use reservation_conformance::junit::JunitSuite;
use reservation_conformance::{CheckResult, DynHarness, Harness, MemoryHarness, Report, Settings, run_matching_with};
use reservation_model::cli::{BAD_ARGUMENTS, parse_with};
use reservation_postgres::{PostgresHarness, PostgresOptions, Replication};
use reservation_redis::{RedisHarness, RedisOptions};
use reservation_sqlite::{SqliteHarness, SqliteOptions};
use reservation_store::error_chain;

/// The exit codes, under the program's help.
const EXIT_CODES: &str = "Exit codes: 0 when everything holds, 1 when a property or a check fails, 2 when a model run \
                          did not complete, 64 on bad arguments.";

/// `reservation`.
#[derive(Parser)]
#[command(
    name = reservation_model::cli::PROGRAM,
    version,
    about = "Reserved keys for event-sourced aggregates: check the protocol's model, and run the conformance suite \
             against the built-in stores or a store in any language.",
    after_help = EXIT_CODES,
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    #[command(flatten)]
    Model(reservation_model::cli::Command),
    /// Run the whole conformance suite against the built-in stores, or against a store in any
    /// language behind an adapter (--command)
    ///
    /// (The parts of the suite are listed here from its list of checks when the program runs:
    /// `conform_about`.)
    #[command(after_help = CONFORM_AFTER_HELP)]
    Conform(ConformArgs),
    /// Serve MemoryStore behind the driver's JSON-lines protocol (PROTOCOL.md), on standard input
    /// and output: an adapter whose store decides through the spec functions
    Serve,
    /// Write the test vectors into a directory, or check that one holds exactly them
    ///
    /// The vectors are the deterministic checks' requests with the answers the specification
    /// expects, one JSON file per rule family: a store in another language replays them in its
    /// own tests.
    Vectors(VectorsArgs),
    /// The main job: check the model with its default configuration, then run `conform all`
    ///
    /// Exits 0 only if every property of the model holds and every built-in store conforms.
    #[command(after_help = CONFORM_AFTER_HELP)]
    All(SuiteArgs),
    /// Print the completion script of a shell for reservation's commands and flags
    ///
    /// For example `reservation completions bash > ~/.local/share/bash-completion/completions/reservation`.
    Completions {
        /// The shell
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// The long help of `conform`: what the suite is, each of its parts with its count of checks,
/// from the suite's list of checks ([`reservation_conformance::CHECKS`]), and what the report
/// says.
fn conform_about() -> String {
    use reservation_conformance::{CHECKS, Part};
    let mut about = String::from(
        "Run the whole conformance suite against the built-in stores, or against a store in any language behind an \
         adapter (--command)\n\nThe suite's parts, in the order they run:\n",
    );
    for part in Part::ALL {
        let checks = CHECKS.iter().filter(|c| c.part == part).count();
        let s = if checks == 1 { "" } else { "s" };
        about.push_str(&format!("  - {} ({checks} check{s}): {}\n", part.name(), part.summary()));
    }
    about.push_str(
        "\nA check that needs what a store does not declare (durable, surviving power cuts) is skipped, saying \
         why. The report lists every check, and each failure with the rule it breaks and the operations it ran, \
         expected against actual; a line per check goes to standard error as the check ends. On a failure it \
         prints the command that replays the run.",
    );
    about
}

/// The program's command line, with the help made from data ([`conform_about`]).
fn command_line() -> clap::Command {
    Cli::command().mut_subcommand("conform", |conform| conform.long_about(conform_about()))
}

/// Under the help of `conform` and `all`.
const CONFORM_AFTER_HELP: &str = "Environment: RESERVATION_REQUIRE_SERVICES=1 makes a store whose server does not \
                                  answer a failure rather than a skip. Exit codes: 0 when every store conforms, 1 \
                                  when a check fails (or the adapter does not start), 64 on bad arguments.";

/// `conform`'s settings.
#[derive(Args)]
struct ConformArgs {
    /// The built-in store to run the suite against
    #[arg(value_enum, default_value_t = Stores::All, conflicts_with = "command")]
    store: Stores,
    /// Run the suite against the store behind ADAPTER instead: a command, run by `sh -c`, that
    /// speaks the JSON-lines protocol of PROTOCOL.md on its standard input and output (its
    /// standard error is quoted in failures)
    #[arg(long, value_name = "ADAPTER")]
    command: Option<String>,
    /// With --command: one JSON object per check on standard output, then a summary with the
    /// seed (and the replay command on a failure), instead of text
    #[arg(long, requires = "command")]
    json: bool,
    /// With --command: how long the driver waits for any one answer before the check fails,
    /// quoting the adapter's last lines of standard error; 10 by default
    #[arg(long, value_name = "SECONDS", requires = "command", value_parser = seconds)]
    timeout: Option<Duration>,
    /// With --command: the adapter's world can suffer FAULT, caused by running COMMAND (by `sh
    /// -c`), which exits 0 once the fault has ended; the fault check fires it on its schedule
    /// (repeat for several). FAULT is one of cut-connections, crash, pause, failover, partition,
    /// long-pause
    #[arg(long, value_name = "FAULT=COMMAND", requires = "command", value_parser = fault_command)]
    fault: Vec<(Fault, String)>,
    /// Also write the run as JUnit XML to FILE, for CI systems' test reports: a test suite per
    /// store, a test case per check (a failure's headline as its message, its report as its
    /// text), the seed and the replay command as properties
    #[arg(long, value_name = "FILE", conflicts_with = "judge_times")]
    junit: Option<String>,
    /// Also write, for every failed check, a page in DIR/STORE (the store as the progress lines
    /// name it; `adapter` with --command): CHECK.html, one self-contained HTML file that draws
    /// the history behind the failure (a lane per thread, a bar per operation, the faults,
    /// crashes and power cuts as bands, the failing operation marked, a filter by key), and
    /// CHECK.json, that history
    #[arg(long, value_name = "DIR", conflicts_with = "judge_times")]
    report: Option<std::path::PathBuf>,
    /// Run only the checks whose names contain PATTERN (repeat for several), such as `r3_`,
    /// `d1_`, `s1_`, `differential` or `linearizability`
    #[arg(long, value_name = "PATTERN")]
    only: Vec<String>,
    /// Instead of the suite, measure the judge: run the linearizability, fault and crash checks
    /// RUNS times each (seeds from --seed on) and print, for each, the distribution over the runs
    /// of the longest time one history took to judge (p50, p99, max), and the runs that failed
    #[arg(long, value_name = "RUNS")]
    judge_times: Option<usize>,
    /// With --judge-times: runs at a time (8 by default, as the tests run)
    #[arg(long, value_name = "N", requires = "judge_times", default_value_t = 8)]
    at_once: usize,
    /// With --judge-times: threads that spin meanwhile, to oversubscribe the machine (0 by default)
    #[arg(long, value_name = "N", requires = "judge_times", default_value_t = 0)]
    busy: usize,
    #[command(flatten)]
    suite: SuiteArgs,
}

/// The settings of the suite's randomized checks and of the stores on servers: `conform`'s and
/// `all`'s.
#[derive(Args)]
struct SuiteArgs {
    /// The seed of the randomized checks: it drives both the differential test's scripts and the
    /// linearizability check's histories. Drawn at random when not given; the report's header
    /// prints it, and a failure prints the command that replays the run with it
    #[arg(long, value_name = "N", env = "RESERVATION_CONFORMANCE_SEED")]
    seed: Option<u64>,
    /// Scripts the differential test runs; by default each store's own number (1,000 through
    /// --command), which the report's header prints
    #[arg(long, value_name = "N", env = "RESERVATION_CONFORMANCE_CASES")]
    cases: Option<u32>,
    /// Scripts of the differential test run at once, each on its own store (0 counts as 1); by
    /// default 8 through --command, 1 for MemoryStore and SqliteStore. The linearizability check
    /// runs threads of its own whatever this says
    #[arg(long, value_name = "N", env = "RESERVATION_CONFORMANCE_THREADS")]
    threads: Option<usize>,
    /// Append the seed of every failing differential script to FILE, and run FILE's scripts
    /// first on every later run. Without it no file is read or written
    #[arg(long, value_name = "FILE")]
    regressions: Option<String>,
    /// The PostgreSQL server of PostgresStore, which runs in a schema of its own (dropped
    /// afterwards); postgres://postgres@127.0.0.1:5432/test by default
    #[arg(long, value_name = "URL", env = "RESERVATION_PG_URL")]
    pg_url: Option<String>,
    /// The Redis server of RedisStore, which runs under a key prefix of its own (removed
    /// afterwards); redis://127.0.0.1:6379/ by default
    #[arg(long, value_name = "URL", env = "RESERVATION_REDIS_URL")]
    redis_url: Option<String>,
}

/// `vectors`' settings: one of the two.
#[derive(Args)]
#[group(required = true, multiple = false)]
struct VectorsArgs {
    /// Write every vector file into DIR (created if absent)
    #[arg(long, value_name = "DIR")]
    write: Option<std::path::PathBuf>,
    /// Check that DIR holds exactly the vector files the suite makes now; names each file that
    /// differs and its first differing line
    #[arg(long, value_name = "DIR")]
    check: Option<std::path::PathBuf>,
}

/// Which built-in stores `conform` runs the suite against.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Stores {
    /// MemoryStore, in memory
    Memory,
    /// SqliteStore, on a scratch database file with synchronous NORMAL, and its durability
    /// checks again with FULL (power cuts under every model)
    Sqlite,
    /// PostgresStore, on the server at --pg-url, and its crash and power-cut checks on a cluster
    /// of its own (Debian's pg_createcluster, as root; skipped, saying so, elsewhere)
    Postgres,
    /// RedisStore, on the server at --redis-url, and its durable check on a redis-server of its
    /// own with an append-only file
    Redis,
    /// Every one of them; a store whose server does not answer is skipped, saying so (a store
    /// named alone fails instead)
    All,
}

fn seconds(s: &str) -> Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .filter(|t| !t.is_zero())
        .ok_or_else(|| "not a number of seconds above 0".into())
}

/// The order of the built-in stores in a report: a store's runs (its parts on servers of its own
/// after its own) in the order they were made.
const STORE_ORDER: [&str; 4] = ["MemoryStore", "PostgresStore", "RedisStore", "SqliteStore"];

/// The checks of what a store keeps across a restart, a crash and a power cut: those that `conform
/// redis` runs on an append-only `redis-server` of its own, the shared server keeping nothing.
const DURABILITY_CHECKS: [&str; 5] = [
    "p1_durable_reopen_keeps_every_reservation",
    "p1_restarts_keep_every_spelling_of_the_differentials_scripts",
    "d10_the_clock_never_goes_back_across_a_restart",
    "p1_crashes_at_chosen_points_keep_every_state",
    "p1_power_cuts_take_back_nothing_the_store_promised",
];

/// What `conform sqlite` says before the suite's run with `NORMAL`.
const SQLITE_NORMAL: &str = "SqliteStore runs the suite with synchronous NORMAL, which survives a process crash and not a \
                             power cut (its power-cut check cuts it under `process` only); the durability checks run \
                             again below with FULL, SQLite's default, which promises to survive a power cut under \
                             every model.";

/// The checks that `conform postgres` runs again on a cluster of its own, which it can crash and
/// start on a disk that can lose power: the shared server can be neither.
const OWN_SERVER_CHECKS: [&str; 2] =
    ["p1_crashes_at_chosen_points_keep_every_state", "p1_power_cuts_take_back_nothing_the_store_promised"];

/// `FAULT=COMMAND`: a fault the harness causes, by its name, and the command that causes it.
fn fault_command(s: &str) -> Result<(Fault, String), String> {
    let (name, command) = s.split_once('=').ok_or("not FAULT=COMMAND")?;
    let fault = Fault::from_name(name.trim()).filter(|f| !f.is_the_suites()).ok_or_else(|| {
        let faults: Vec<&str> = Fault::ALL.iter().filter(|f| !f.is_the_suites()).map(|f| f.name()).collect();
        format!("`{name}` is not a fault a command causes ({})", faults.join(", "))
    })?;
    if command.trim().is_empty() {
        return Err(format!("no command for the fault `{name}`"));
    }
    Ok((fault, command.to_owned()))
}

/// The suite's settings as the command line gives them.
struct Suite {
    /// The seed every randomized check runs with.
    seed: u64,
    cases: Option<u32>,
    threads: Option<usize>,
    regressions: Option<&'static str>,
    only: Vec<String>,
    pg_url: String,
    redis_url: String,
    /// `--judge-times`: measure the judge instead of running the suite.
    judge: Option<Load>,
    /// `--junit`: each store's run, kept for the JUnit report, in the order the runs end.
    junit: Option<std::sync::Mutex<Vec<JunitSuite>>>,
    /// `--report`: where the pages of failed checks go, a directory for each store.
    pages: Option<std::path::PathBuf>,
}

impl Suite {
    fn new(args: SuiteArgs, only: Vec<String>) -> Suite {
        use std::hash::BuildHasher;
        // A process's RandomState is keyed from the system's randomness.
        let drawn = || std::collections::hash_map::RandomState::new().hash_one(std::time::SystemTime::now());
        Suite {
            seed: args.seed.unwrap_or_else(drawn),
            cases: args.cases,
            threads: args.threads,
            // Settings name the file for the whole run: leaked once, as the program ends with it.
            regressions: args.regressions.map(|path| &*Box::leak(path.into_boxed_str())),
            only,
            pg_url: args.pg_url.unwrap_or_else(reservation_postgres::pg_url),
            redis_url: args.redis_url.unwrap_or_else(reservation_redis::redis_url),
            judge: None,
            junit: None,
            pages: None,
        }
    }

    /// Keeps the run of the store `name`, its report and its settings, for the JUnit report, if
    /// one was asked for.
    fn keep(&self, name: &str, report: &Report, settings: &Settings, replay: String) {
        let Some(kept) = &self.junit else { return };
        let properties = vec![
            ("seed".to_owned(), settings.seed.unwrap_or_default().to_string()),
            ("cases".to_owned(), settings.cases.to_string()),
            ("threads".to_owned(), settings.differential_threads.to_string()),
            ("replay".to_owned(), replay),
        ];
        let suite = JunitSuite { name: name.to_owned(), report: report.clone(), properties };
        kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(suite);
    }

    /// Writes the JUnit report to `path`, the stores in the order of `order` (a store not named
    /// there last); whether it was written (else why not, on standard error).
    fn write_junit(&self, path: &str, order: &[&str]) -> bool {
        let Some(kept) = &self.junit else { return true };
        let mut suites = kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        suites.sort_by_key(|s| order.iter().position(|name| s.name.starts_with(name)).unwrap_or(order.len()));
        let document = reservation_conformance::junit::junit_xml("reservation conform", &suites);
        match std::fs::write(path, document) {
            Ok(()) => true,
            Err(e) => {
                eprintln!("error: cannot write the JUnit report to {path}: {e}");
                false
            }
        }
    }

    /// `base`, the settings that suit the store, with the command line's (which read the
    /// environment already).
    fn settings(&self, base: Settings) -> Settings {
        // The seed is --seed's, which fell back on RESERVATION_CONFORMANCE_SEED already: a flag given
        // beside the variable wins.
        let mut s = base.with_seed(self.seed).without_env_seed().with_regressions(self.regressions);
        if let Some(cases) = self.cases {
            s = s.with_cases(cases);
        }
        if let Some(threads) = self.threads {
            s = s.with_differential_threads(threads);
        }
        s
    }

    /// Whether `--only` lets the check `name` run.
    fn runs(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|p| name.contains(p.as_str()))
    }

    /// What `settings` run, for a report's header.
    fn describe(settings: &Settings) -> String {
        let threads = settings.differential_threads;
        format!(
            "seed {}, {} differential scripts on {threads} thread{}",
            settings.seed.unwrap_or_default(),
            settings.cases,
            if threads == 1 { "" } else { "s" }
        )
    }

    /// The command that runs the same checks with the same randomized scripts and histories:
    /// `reservation conform ARGS` with every setting that was in force, each as its flag (a flag
    /// wins over its environment variable).
    fn replay(&self, settings: &Settings, args: &str) -> String {
        let mut line = format!(
            "reservation conform {args} --seed {} --cases {} --threads {}",
            settings.seed.unwrap_or_default(),
            settings.cases,
            settings.differential_threads
        );
        for pattern in &self.only {
            line.push_str(&format!(" --only {}", quoted(pattern)));
        }
        if let Some(path) = self.regressions {
            line.push_str(&format!(" --regressions {}", quoted(path)));
        }
        line
    }

    /// Runs the checks of `harness` that `--only` and `filter` let run, with `settings`; prints a
    /// line to standard error as each check ends, prefixed with `store`.
    /// With `--report`, the page of each failed check is written, and the report's notes say
    /// where.
    fn run<H: Harness>(&self, store: &str, harness: &H, settings: &Settings, filter: impl Fn(&str) -> bool) -> Report {
        let mut settings = settings.clone();
        if let Some(dir) = &self.pages {
            let name = store.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-' && c != '_', "_");
            settings = settings.with_report_dir(dir.join(name));
        }
        run_matching_with(
            harness,
            &settings,
            |name| self.runs(name) && filter(name),
            |name, result, took| eprintln!("{}", progress(store, name, result, took)),
        )
    }
}

/// One check's line of progress: the store, the verdict, the check and its time, and for a
/// failure the first line of its report.
fn progress(store: &str, name: &str, result: &CheckResult, took: Duration) -> String {
    match result {
        CheckResult::Passed => format!("[{store}] ok      {name} ({took:.2?})"),
        CheckResult::Skipped(why) => format!("[{store}] skipped {name}: {why}"),
        CheckResult::Failed(f) => {
            let failure = f.to_string();
            let headline = failure.lines().next().unwrap_or_default();
            format!("[{store}] FAILED  {name} ({took:.2?}): {headline}")
        }
    }
}

/// `text` as one word for `sh`: as it is when that is safe, quoted otherwise.
fn quoted(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:=,@+%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        return text.to_owned();
    }
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Runs the suite against `harness` as the store `name` (`store` in the replay command): whether
/// it conforms, and its report as printed.
fn section<H: Harness>(
    suite: &Suite,
    (name, store): (&str, &str),
    harness: &H,
    base: Settings,
    filter: impl Fn(&str) -> bool,
) -> (bool, String) {
    let settings = suite.settings(base);
    let mut text = format!("conformance suite against {name} ({}):\n", Suite::describe(&settings));
    let started = Instant::now();
    let report = suite.run(name, harness, &settings, filter);
    let verdict = if report.is_ok() { "conforms" } else { "DOES NOT CONFORM" };
    text.push_str(&format!("{report}{name}: {verdict} in {:.2?}\n", started.elapsed()));
    let replay = suite.replay(&settings, store);
    if !report.is_ok() {
        text.push_str(&format!("to replay this run: {replay}\n"));
    }
    suite.keep(name, &report, &settings, replay);
    text.push('\n');
    (report.is_ok(), text)
}

/// `--judge-times`: the judge's figures on `harnesses` (one for every run at a time, or one for
/// all), the store `name`, as printed.
fn judge_times(suite: &Suite, name: &str, harnesses: &[&dyn DynHarness], settings: &Settings, load: Load) -> String {
    let started = Instant::now();
    let figures = measure(harnesses, settings, load, |check| suite.runs(check));
    let mut text = format!(
        "the judge on {name}: {} runs of each check from seed {}, {} at a time, {} busy threads:\n",
        load.runs,
        settings.seed.unwrap_or_default(),
        load.at_once,
        load.busy
    );
    for f in figures {
        text.push_str(&format!("  {f}\n"));
    }
    text.push_str(&format!("  in {:.1?}\n\n", started.elapsed()));
    text
}

/// `conform --judge-times`: the judge's figures on the chosen built-in stores, one store after
/// another. A store on a server gets a harness of its own (its own schema or key prefix) for each
/// run at a time, since its sweep by one store's clock would delete another's rows; Redis's crash
/// check runs on append-only servers of its own.
fn judge_stores(stores: Stores, suite: &Suite, load: Load) -> bool {
    let print = |name: &str, harnesses: Vec<&dyn DynHarness>, base: Settings| {
        print!("{}", judge_times(suite, name, &harnesses, &suite.settings(base), load));
    };
    // `load.at_once` harnesses from `open`, measured as `name`; whether they opened.
    let measured = |name: &str, base: Settings, open: &dyn Fn() -> Result<Box<dyn DynHarness>, String>| {
        let opened: Result<Vec<_>, String> = (0..load.at_once.max(1)).map(|_| open()).collect();
        match opened {
            Ok(harnesses) => {
                print(name, harnesses.iter().map(|h| &**h).collect(), base);
                true
            }
            Err(why) => {
                println!("{name}: {why}");
                false
            }
        }
    };
    let mut ok = true;
    if matches!(stores, Stores::Memory | Stores::All) {
        print("MemoryStore", vec![&MemoryHarness], Settings::default());
    }
    if matches!(stores, Stores::Sqlite | Stores::All) {
        match SqliteHarness::new() {
            Ok(harness) => print("SqliteStore", vec![&harness], Settings::default()),
            Err(e) => {
                ok = false;
                println!("SqliteStore: cannot open a scratch database: {}", error_chain(&e));
            }
        }
    }
    let failed =
        |url: String| move |e: reservation_store::StorageError| format!("no server at {url}: {}", error_chain(&e));
    if matches!(stores, Stores::Postgres | Stores::All) {
        ok &= measured("PostgresStore", PostgresHarness::settings(), &|| {
            let harness = PostgresHarness::connect(&suite.pg_url, PostgresOptions::default());
            harness.map(|h| Box::new(h) as Box<dyn DynHarness>).map_err(failed(suite.pg_url.clone()))
        });
    }
    if matches!(stores, Stores::Redis | Stores::All) {
        ok &= measured("RedisStore", RedisHarness::settings(), &|| {
            let harness = RedisHarness::connect(&suite.redis_url, RedisOptions::default());
            harness.map(|h| Box::new(h) as Box<dyn DynHarness>).map_err(failed(suite.redis_url.clone()))
        });
        ok &= measured("RedisStore on append-only redis-servers", RedisHarness::settings(), &|| {
            let harness = RedisHarness::durable();
            harness
                .map(|h| Box::new(h) as Box<dyn DynHarness>)
                .map_err(|e| format!("no redis-server of its own: {}", error_chain(&e)))
        });
    }
    ok
}

/// One store's part of `conform`: whether it conforms, and what it prints.
type Part<'a> = Box<dyn FnOnce() -> (bool, String) + Send + 'a>;

/// Runs the suite against the chosen stores; whether every one conforms. The stores share
/// nothing (each has its own memory, file, schema, key prefix or server), so they run at once,
/// each on a thread of its own: most of a store's time is spent waiting for its server, and
/// `conform all` takes about as long as its slowest store. The reports print in a fixed order,
/// each as soon as it and those before it are done; the progress lines on standard error, each
/// prefixed with its store, come as the checks end.
fn conform(stores: Stores, suite: &Suite) -> bool {
    let mut parts: Vec<Part<'_>> = Vec::new();
    if matches!(stores, Stores::Memory | Stores::All) {
        parts.push(Box::new(|| {
            section(suite, ("MemoryStore", "memory"), &MemoryHarness, Settings::default(), |_| true)
        }));
    }
    if matches!(stores, Stores::Postgres | Stores::All) {
        parts.push(Box::new(move || {
            let harness = PostgresHarness::connect(&suite.pg_url, PostgresOptions::default());
            let named = stores == Stores::Postgres;
            let base = PostgresHarness::settings();
            let (mut ok, mut text) =
                conform_service(suite, ("PostgresStore", "postgres"), &suite.pg_url, harness, base, named);
            // Crashes and power cuts need servers of its own (Debian's pg_createcluster, as
            // root): the crash check kills its server, the power-cut check starts one on a disk
            // that can lose power. Without them the part is skipped, saying why.
            let checks = OWN_SERVER_CHECKS.into_iter().filter(|name| suite.runs(name)).collect::<Vec<_>>();
            if !checks.is_empty() {
                let name = "PostgresStore on a cluster of its own";
                let (own_ok, own_text) =
                    match PostgresHarness::on_cluster(Replication::None, PostgresOptions::default()) {
                        Ok(cluster) => section(suite, (name, "postgres"), &cluster, PostgresHarness::settings(), |n| {
                            checks.contains(&n)
                        }),
                        Err(e) => {
                            let required = reservation_conformance::services::services_required();
                            let verdict = if required { "DOES NOT CONFORM" } else { "skipped" };
                            (!required, format!("{name}: {verdict}: no cluster of its own: {}\n\n", error_chain(&e)))
                        }
                    };
                ok &= own_ok;
                text.push_str(&own_text);
            }
            (ok, text)
        }));
    }
    if matches!(stores, Stores::Redis | Stores::All) {
        parts.push(Box::new(move || {
            let harness = RedisHarness::connect(&suite.redis_url, RedisOptions::default());
            let named = stores == Stores::Redis;
            let base = RedisHarness::settings();
            let (mut ok, mut text) =
                conform_service(suite, ("RedisStore", "redis"), &suite.redis_url, harness, base, named);
            // Durability needs a server that keeps its writes: one of its own for each check (the
            // crash check and the clock's check restart theirs, which would cut another check's
            // connections), restarted at every reopen and crash, and started in the power-cut
            // check's directory on a disk that can lose power.
            for check in DURABILITY_CHECKS.into_iter().filter(|name| suite.runs(name)) {
                let Ok(durable) = RedisHarness::durable() else { break };
                let name = "RedisStore on an append-only redis-server";
                let (durable_ok, durable_text) =
                    section(suite, (name, "redis"), &durable, RedisHarness::settings(), |n| n == check);
                ok &= durable_ok;
                text.push_str(&durable_text);
            }
            (ok, text)
        }));
    }
    if matches!(stores, Stores::Sqlite | Stores::All) {
        parts.push(Box::new(|| {
            let (mut ok, mut text) = match SqliteHarness::new() {
                Ok(harness) => {
                    let (ok, text) = section(
                        suite,
                        ("SqliteStore", "sqlite"),
                        &harness,
                        Settings::default().with_cases(1_000),
                        |_| true,
                    );
                    (ok, format!("{SQLITE_NORMAL}\n{text}"))
                }
                Err(e) => (false, format!("SqliteStore: cannot open a scratch database: {}\n", error_chain(&e))),
            };
            // The durability checks again with `FULL`, SQLite's default, which promises to survive
            // a power cut under every model.
            let checks = DURABILITY_CHECKS.into_iter().filter(|name| suite.runs(name)).collect::<Vec<_>>();
            if !checks.is_empty() {
                let name = "SqliteStore, synchronous FULL";
                let (full_ok, full_text) = match SqliteHarness::scratch(SqliteOptions::default()) {
                    Ok(full) => section(suite, (name, "sqlite"), &full, Settings::default(), |n| checks.contains(&n)),
                    Err(e) => (false, format!("{name}: cannot open a scratch database: {}\n", error_chain(&e))),
                };
                ok &= full_ok;
                text.push_str(&full_text);
            }
            (ok, text)
        }));
    }
    std::thread::scope(|scope| {
        let running: Vec<_> = parts.into_iter().map(|part| scope.spawn(part)).collect();
        let mut ok = true;
        for run in running {
            let (conforms, text) = run.join().unwrap_or_else(|panic| {
                let why = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned());
                let why = why.unwrap_or_else(|| "a panic without a message".to_owned());
                (false, format!("a store's run panicked: {why}\n\n"))
            });
            print!("{text}");
            ok &= conforms;
        }
        ok
    })
}

/// The suite against a store on a server at `url` (in a schema or key prefix of its own, removed
/// afterwards). Without a server it says so and passes, unless the store was asked for by name or
/// `RESERVATION_REQUIRE_SERVICES=1`.
fn conform_service<H: Harness>(
    suite: &Suite,
    (name, store): (&str, &str),
    url: &str,
    harness: Result<H, reservation_store::StorageError>,
    base: Settings,
    named: bool,
) -> (bool, String) {
    match harness {
        Ok(harness) => section(suite, (name, store), &harness, base, |_| true),
        Err(e) => {
            let required = named || reservation_conformance::services::services_required();
            let verdict = if required { "DOES NOT CONFORM" } else { "skipped" };
            (!required, format!("{name}: {verdict}: no server at {url}: {}\n\n", error_chain(&e)))
        }
    }
}

/// The suite against the store behind the adapter `command`, through the driver: one line per
/// check, or with `json` one JSON object per check and a summary.
fn conform_command(
    command: &str,
    json: bool,
    (timeout, faults): (Option<Duration>, &[(Fault, String)]),
    suite: &Suite,
) -> ExitCode {
    let harness = match CommandHarness::start_with(command, timeout.unwrap_or(CommandHarness::TIMEOUT)) {
        Ok(h) => faults.iter().fold(h, |h, (fault, command)| h.with_fault(*fault, command)),
        Err(e) => {
            // The driver's error says that the adapter did not start, and why.
            eprintln!("{}", error_chain(&e));
            return ExitCode::from(1);
        }
    };
    let mut args = format!("--command {}", quoted(command));
    // The timeout in force, given or the default: a replay waits as long.
    args.push_str(&format!(" --timeout {}", timeout.unwrap_or(CommandHarness::TIMEOUT).as_secs_f64()));
    for (fault, command) in faults {
        args.push_str(&format!(" --fault {}", quoted(&format!("{fault}={command}"))));
    }
    let settings = suite.settings(CommandHarness::settings());
    if let Some(load) = suite.judge {
        print!("{}", judge_times(suite, command, &[&harness], &settings, load));
        return ExitCode::SUCCESS;
    }
    if !json {
        println!(
            "conformance suite against {command} ({}; protocol {}):",
            Suite::describe(&settings),
            harness.hello().protocol
        );
    }
    let started = Instant::now();
    let report = suite.run("adapter", &harness, &settings, |_| true);
    let replay = suite.replay(&settings, &args);
    suite.keep(command, &report, &settings, replay.clone());
    if json {
        for (name, result, took) in &report.checks {
            let (verdict, detail) = match result {
                CheckResult::Passed => ("passed", String::new()),
                CheckResult::Skipped(why) => ("skipped", (*why).to_owned()),
                CheckResult::Failed(f) => ("failed", f.to_string()),
            };
            let line = serde_json::json!({"check": name, "result": verdict, "detail": detail, "millis": took.as_millis() as u64});
            println!("{line}");
        }
        let mut summary = serde_json::json!({
            "command": command,
            "conforms": report.is_ok(),
            "millis": started.elapsed().as_millis() as u64,
            "seed": settings.seed,
            "protocol": harness.hello().protocol,
            "power_cuts": harness.hello().power_cuts.map(|model| model.name()),
        });
        if !report.is_ok() {
            summary["replay"] = replay.into();
        }
        println!("{summary}");
    } else {
        print!("{report}");
        println!(
            "{command}: {} in {:.2?}",
            if report.is_ok() { "conforms" } else { "DOES NOT CONFORM" },
            started.elapsed()
        );
        if !report.is_ok() {
            println!("to replay this run: {replay}");
        }
    }
    if report.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

fn vectors(args: VectorsArgs) -> ExitCode {
    let (done, dir, what) = match (&args.write, &args.check) {
        (Some(dir), _) => (reservation_conformance::vectors::write(dir), dir, "written to"),
        (None, Some(dir)) => (reservation_conformance::vectors::check(dir), dir, "in sync in"),
        (None, None) => {
            eprintln!("error: vectors takes --write DIR or --check DIR");
            return ExitCode::from(BAD_ARGUMENTS);
        }
    };
    match done {
        Ok(()) => {
            println!("vectors: {what} {}", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("vectors: {e}");
            ExitCode::from(1)
        }
    }
}

fn main() -> ExitCode {
    let cli = match parse_with::<Cli>(command_line(), std::env::args_os()) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match cli.command {
        Command::Model(command) => reservation_model::cli::execute_with(command, Some(&model_junit::model_xml)),
        Command::Conform(args) => {
            let mut suite = Suite::new(args.suite, args.only);
            suite.judge = args.judge_times.map(|runs| Load { runs, at_once: args.at_once, busy: args.busy });
            suite.junit = args.junit.as_ref().map(|_| std::sync::Mutex::new(Vec::new()));
            suite.pages = args.report;
            let code = match (&args.command, suite.judge) {
                (Some(command), _) => conform_command(command, args.json, (args.timeout, &args.fault), &suite),
                (None, Some(load)) if judge_stores(args.store, &suite, load) => ExitCode::SUCCESS,
                (None, None) if conform(args.store, &suite) => ExitCode::SUCCESS,
                (None, _) => ExitCode::from(1),
            };
            match &args.junit {
                Some(path) if !suite.write_junit(path, &STORE_ORDER) => ExitCode::from(1),
                _ => code,
            }
        }
        Command::Serve => {
            match reservation_conformance::driver::serve(std::io::stdin().lock(), std::io::stdout().lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("serve: {}", error_chain(&e));
                    ExitCode::from(1)
                }
            }
        }
        Command::Vectors(args) => vectors(args),
        Command::All(args) => {
            let model = reservation_model::cli::execute(reservation_model::cli::Command::Check(Default::default()));
            let stores = conform(Stores::All, &Suite::new(args, Vec::new()));
            if model != ExitCode::SUCCESS {
                model
            } else if stores {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                reservation_model::cli::PROGRAM,
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
    }
}
