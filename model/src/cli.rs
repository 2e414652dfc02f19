//! The model's commands, `check`, `explore` and `swarm`, parsed by clap: the project's one
//! program, [`PROGRAM`] (crate `reservation-cli`), flattens [`Command`] among its own commands and
//! runs it with [`execute_with`], handing it the JUnit XML writer that `check --junit` and `swarm
//! --junit` write with. Every command line this module prints (a swarm's replay) is one of that
//! program's.
//!
//! Exit codes: 0 when every property holds on a complete run, 1 when a property fails, 2 when
//! the run did not complete (a timeout, or a simulation, which is never exhaustive), 64 on bad
//! arguments.

use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::check::{CheckOptions, CheckReport, Strategy, check};
use crate::swarm::{SwarmOptions, SwarmReport, swarm};
use crate::{
    Assumption, ConfigError, MAX_ATTEMPTS, MAX_HORIZON, MAX_KEYS, MAX_OWNERS, MAX_TTL, ModelConfig, ReservationModel,
};
use stateright::Model;

/// The exit code of bad arguments (sysexits' `EX_USAGE`): 2 already means an incomplete run.
pub const BAD_ARGUMENTS: u8 = 64;

/// The longest `--timeout`: a year.
const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

/// The exit codes, under every command's help.
const EXIT_CODES: &str = "Exit codes: 0 when every property holds on a complete run, 1 when a property fails, 2 when \
                          the run did not complete (a timeout, or a simulation, which is never exhaustive), 64 on bad \
                          arguments.";

/// The program that runs these commands, as a user types it: the name of `reservation-cli`'s
/// binary, and the first word of every command line the model prints.
pub const PROGRAM: &str = "reservation";

/// The model's commands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check every state of the protocol's model reachable in a configuration, and every property
    /// in each
    ///
    /// Prints the configuration, unique and total states, depth, seconds, states per second, each
    /// property's verdict, the rule ids never reached and the counterexample traces. The default
    /// configuration (3 owners with 2 attempts each, 2 keys, a TTL of 1 tick, a skew of 1 and a
    /// horizon of 2) is checked exhaustively in seconds; drop an assumption to see its
    /// counterexample.
    #[command(after_help = EXIT_CODES)]
    Check(CheckArgs),
    /// Serve stateright's Explorer on the model, on 127.0.0.1
    ///
    /// The Explorer shows each state as the traces print it and, for the step that led to it,
    /// each store operation with its outcome and rule id. It explores breadth first on demand and
    /// ignores symmetry reduction.
    Explore(ExploreArgs),
    /// Run one seeded random walk per seed over a configuration too large to check exhaustively
    ///
    /// Every property is checked after every step. Prints the rule coverage across the walks and,
    /// for a failure, its seed and the command that replays it. Split the seeds over processes (a
    /// CI matrix) with --seeds. Exits 0 when no walk failed, 1 when one did, 64 on bad arguments.
    Swarm(SwarmArgs),
    /// Measure the exhaustive check on the configurations BENCHMARKS.md records: the default, four
    /// owners, and four owners with three keys
    ///
    /// Checks each configuration exhaustively (every assumption on, depth first, two threads),
    /// then runs a trivial model of about as many states the same way (the checker's ceiling), and
    /// prints a line per configuration: unique and generated states, wall and processor seconds,
    /// the check's own peak memory, its generated states per processor second as a ratio to the
    /// ceiling's, and whether the run was complete with every property holding and every rule
    /// reached. Run it on two builds for a before-and-after table. Build in release.
    #[command(after_help = EXIT_CODES)]
    Figures(FiguresArgs),
}

/// A configuration that `figures` measures.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum Measured {
    /// The default configuration: 3 owners, 2 attempts each, 2 keys.
    Default,
    /// Four owners, 2 attempts each, 2 keys.
    FourOwners,
    /// Four owners, 2 attempts each, 3 keys.
    FourOwnersThreeKeys,
}

impl Measured {
    /// Its configuration.
    pub fn config(self) -> ModelConfig {
        let c = ModelConfig::default();
        match self {
            Measured::Default => c,
            Measured::FourOwners => ModelConfig { owners: 4, ..c },
            Measured::FourOwnersThreeKeys => ModelConfig { owners: 4, keys: 3, ..c },
        }
    }

    /// Its name on the command line and in the figures.
    pub fn name(self) -> &'static str {
        match self {
            Measured::Default => "default",
            Measured::FourOwners => "four-owners",
            Measured::FourOwnersThreeKeys => "four-owners-three-keys",
        }
    }
}

/// `figures`' flags.
#[derive(Args, Clone, Debug)]
pub struct FiguresArgs {
    /// The configurations to measure, in this order (separate them by commas)
    #[arg(long, value_enum, value_delimiter = ',', value_name = "NAME",
          default_values_t = [Measured::Default, Measured::FourOwners, Measured::FourOwnersThreeKeys])]
    pub configurations: Vec<Measured>,
    /// Stop each check after this many seconds (above 0, at most a year); a check stopped so is
    /// reported incomplete, and the command exits 2
    #[arg(long, value_name = "SECONDS", value_parser = timeout, default_value = "900")]
    pub timeout: Duration,
    /// Print one JSON object per configuration: its name and `check --json`'s figures
    #[arg(long)]
    pub json: bool,
}

/// The model's configuration: what it contains.
#[derive(Args, Clone, Debug)]
pub struct ConfigArgs {
    /// Owners (aggregates of one type).
    #[arg(long, value_name = "N", default_value_t = ModelConfig::default().owners,
          help = format!("Owners (aggregates of one type), 1 to {MAX_OWNERS}"))]
    pub owners: u8,
    /// Attempts (decisions) per owner.
    #[arg(long, value_name = "A", default_value_t = ModelConfig::default().attempts,
          help = format!("Attempts (decisions) per owner, each appending at most one fact, 1 to {MAX_ATTEMPTS}"))]
    pub attempts: u8,
    /// Keys in the scope.
    #[arg(long, value_name = "K", default_value_t = ModelConfig::default().keys,
          help = format!("Keys in the scope, 1 to {MAX_KEYS}"))]
    pub keys: u8,
    /// The store clock ticks from 0 up to this instant.
    #[arg(long, value_name = "T", default_value_t = ModelConfig::default().horizon,
          help = format!("The store clock ticks from 0 up to this instant, at most {MAX_HORIZON}"))]
    pub horizon: u8,
    /// Time to live of a pending reservation, in ticks.
    #[arg(long, value_name = "L", default_value_t = ModelConfig::default().ttl,
          help = format!("Time to live of a pending reservation, in ticks, 1 to {MAX_TTL}"))]
    pub ttl: u8,
    /// How far a node's clock may lag or lead the store's, in ticks.
    #[arg(long, value_name = "S", default_value_t = ModelConfig::default().skew,
          help = format!("How far a node's clock may lag or lead the store's, in ticks, at most {MAX_TTL}"))]
    pub skew: u8,
    /// Drop an assumption of the protocol, to see the counterexample that it rules out (repeat
    /// the flag, or separate the ids by commas)
    #[arg(long = "drop-assumption", value_name = "H2|H3|H5|H7|H8", value_delimiter = ',', value_parser = assumption)]
    pub drop_assumption: Vec<Assumption>,
}

impl Default for ConfigArgs {
    fn default() -> Self {
        let c = ModelConfig::default();
        ConfigArgs {
            owners: c.owners,
            attempts: c.attempts,
            keys: c.keys,
            horizon: c.horizon,
            ttl: c.ttl,
            skew: c.skew,
            drop_assumption: Vec::new(),
        }
    }
}

impl ConfigArgs {
    /// The configuration these flags give, or why it is invalid.
    pub(crate) fn config(&self) -> Result<ModelConfig, ConfigError> {
        let mut config = ModelConfig {
            owners: self.owners,
            attempts: self.attempts,
            keys: self.keys,
            horizon: self.horizon,
            ttl: self.ttl,
            skew: self.skew,
            ..ModelConfig::default()
        };
        for a in &self.drop_assumption {
            config = config.dropping(*a);
        }
        config.validate()?;
        Ok(config)
    }

    /// The flags that give this configuration, for a replay command.
    pub(crate) fn flags(&self) -> String {
        let mut flags = format!(
            "--owners {} --attempts {} --keys {} --horizon {} --ttl {} --skew {}",
            self.owners, self.attempts, self.keys, self.horizon, self.ttl, self.skew
        );
        for a in &self.drop_assumption {
            flags.push_str(&format!(" --drop-assumption {a}"));
        }
        flags
    }
}

/// `check`'s flags.
#[derive(Args, Clone, Debug)]
pub struct CheckArgs {
    /// The configuration.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// How the state space is searched
    #[arg(long, value_enum, default_value_t = Strategy::Auto)]
    pub strategy: Strategy,
    /// The simulation's seed (--strategy simulate)
    #[arg(long, value_name = "X", default_value_t = CheckOptions::default().seed)]
    pub seed: u64,
    /// Checker threads: 2 by default, 1 with --strategy bfs (breadth first finds the shortest
    /// counterexample only on one thread)
    #[arg(long, value_name = "N", value_parser = at_least_one)]
    pub threads: Option<usize>,
    /// Check without reduction: no symmetry over owners, attempts and keys, no eager steps
    #[arg(long)]
    pub no_symmetry: bool,
    /// Check a second time without reduction, and print the reduction factor
    #[arg(long)]
    pub symmetry_factor: bool,
    /// Stop after this many seconds (above 0, at most a year); a run stopped so is reported
    /// incomplete and exits 2
    #[arg(long, value_name = "SECONDS", value_parser = timeout)]
    pub timeout: Option<Duration>,
    /// After the check, run a trivial model of about as many states the same way and print the
    /// check's generated states per second as a ratio to that ceiling
    #[arg(long)]
    pub ceiling: bool,
    /// Print one JSON object with the figures and each counterexample's steps
    #[arg(long)]
    pub json: bool,
    /// Print no header and no progress lines
    #[arg(long)]
    pub quiet: bool,
    /// Also write the run as JUnit XML to FILE, for CI systems' test reports: a test case per
    /// property (a counterexample's headline as its failure's message, the counterexample as its
    /// text; a property an unfinished run did not decide, skipped), the configuration, the
    /// search's settings and the command that reruns the check as properties. A file that cannot
    /// be written fails the run (exit 1)
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write each counterexample as a sequence chart in DIR, one SVG file per property that
    /// fails (named by its first words): each owner, each subscription and the store a lifeline,
    /// every step an arrow or a note with its operation, outcome and rule, the store and the
    /// latest facts where they change, the property broken at the end. A file that cannot be
    /// written fails the run (exit 1)
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
}

impl Default for CheckArgs {
    /// The default configuration, checked as `check` with no flags checks it.
    fn default() -> Self {
        CheckArgs {
            config: ConfigArgs::default(),
            strategy: Strategy::Auto,
            seed: CheckOptions::default().seed,
            threads: None,
            no_symmetry: false,
            symmetry_factor: false,
            timeout: None,
            ceiling: false,
            json: false,
            quiet: false,
            junit: None,
            report: None,
        }
    }
}

impl CheckArgs {
    /// How to run the check these flags ask for.
    pub(crate) fn options(&self) -> CheckOptions {
        let mut options = CheckOptions {
            strategy: self.strategy,
            seed: self.seed,
            symmetry: !self.no_symmetry,
            timeout: self.timeout,
            progress: (!self.quiet).then_some(Duration::from_secs(3)),
            ceiling: self.ceiling,
            ..CheckOptions::default()
        };
        if let Some(threads) = self.threads {
            options.threads = threads;
        }
        // Breadth first finds the shortest counterexample only on one thread, and stops at it.
        if self.strategy == Strategy::Bfs {
            options.stop_at_failure = true;
            options.threads = self.threads.unwrap_or(1);
        }
        options
    }

    /// The command that runs the same check again: `reservation check` with the configuration's
    /// flags and the search's (the strategy, the threads, the simulation's seed, the reductions
    /// and the timeout), and none of the output's.
    pub fn replay(&self) -> String {
        let strategy = match self.strategy {
            Strategy::Auto => "auto",
            Strategy::Dfs => "dfs",
            Strategy::Bfs => "bfs",
            Strategy::Simulate => "simulate",
        };
        let options = self.options();
        let mut line =
            format!("{PROGRAM} check {} --strategy {strategy} --threads {}", self.config.flags(), options.threads);
        if self.strategy == Strategy::Simulate {
            line.push_str(&format!(" --seed {}", self.seed));
        }
        if self.no_symmetry {
            line.push_str(" --no-symmetry");
        }
        if let Some(timeout) = self.timeout {
            line.push_str(&format!(" --timeout {}", timeout.as_secs_f64()));
        }
        line
    }
}

/// `explore`'s flags.
#[derive(Args, Clone, Debug)]
pub struct ExploreArgs {
    /// The configuration.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The port on 127.0.0.1 to serve the Explorer on
    #[arg(long, value_name = "P", default_value_t = 3000)]
    pub port: u16,
}

/// `swarm`'s flags.
#[derive(Args, Clone, Debug)]
pub struct SwarmArgs {
    /// The configuration.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The walks' seeds, one walk per seed: START..END, END excluded
    #[arg(long, value_name = "START..END", value_parser = seeds, default_value = "0..1000")]
    pub seeds: std::ops::Range<u64>,
    /// The most steps one walk takes (it also ends when no action is enabled)
    #[arg(long, value_name = "STEPS", default_value_t = SwarmOptions::default().depth)]
    pub depth: usize,
    /// Threads sharing the seeds
    #[arg(long, value_name = "N", value_parser = at_least_one, default_value_t = SwarmOptions::default().threads)]
    pub threads: usize,
    /// Stop once a walk fails (the seeds after it may not run)
    #[arg(long)]
    pub stop_at_failure: bool,
    /// Print no header line
    #[arg(long)]
    pub quiet: bool,
    /// Also write the run as JUnit XML to FILE, for CI systems' test reports: a test case per
    /// property (the first failing walk's seed as its failure's message, the command that replays
    /// it and its trace as its text), the configuration, the seeds and the command that reruns
    /// the swarm as properties. A file that cannot be written fails the run (exit 1)
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write, for each property a walk broke, the first such walk as a sequence chart in
    /// DIR (an SVG file named by the property's first words and the walk's seed), as `check
    /// --report` writes a counterexample. A file that cannot be written fails the run (exit 1)
    #[arg(long, value_name = "DIR")]
    pub report: Option<PathBuf>,
}

impl SwarmArgs {
    /// The command that runs the walks of `seeds` again, each as this swarm walked it: `reservation
    /// swarm` with the configuration's flags and the depth.
    pub fn replay(&self, seeds: Range<u64>) -> String {
        format!("{PROGRAM} swarm {} --depth {} --seeds {}..{}", self.config.flags(), self.depth, seeds.start, seeds.end)
    }
}

/// A `check` or a `swarm` that ran to its end, as [`execute_with`] hands it to the program's
/// writer of `--junit`'s report.
#[derive(Clone, Copy, Debug)]
pub enum Finished<'a> {
    /// A `check`: its flags, the configuration they give, and what it found.
    Check {
        /// Its flags.
        args: &'a CheckArgs,
        /// The configuration checked.
        config: ModelConfig,
        /// What the check found.
        report: &'a CheckReport,
    },
    /// A `swarm`: its flags, the configuration they give, and what the walks found.
    Swarm {
        /// Its flags.
        args: &'a SwarmArgs,
        /// The configuration walked.
        config: ModelConfig,
        /// What the walks found.
        report: &'a SwarmReport,
    },
}

/// The JUnit XML document of a finished run: what the program hands [`execute_with`] to write
/// `--junit FILE` with (the model has no XML writer of its own).
pub type JunitXml<'a> = &'a dyn Fn(Finished<'_>) -> String;

impl ValueEnum for Strategy {
    fn value_variants<'a>() -> &'a [Self] {
        &[Strategy::Auto, Strategy::Dfs, Strategy::Bfs, Strategy::Simulate]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Strategy::Auto => PossibleValue::new("auto").help(
                "breadth first when an assumption is dropped (the shortest counterexample, in under a second), depth \
                 first otherwise",
            ),
            Strategy::Dfs => PossibleValue::new("dfs").help("depth first, on several threads: the exhaustive check"),
            Strategy::Bfs => PossibleValue::new("bfs").help("breadth first: the shortest counterexample"),
            Strategy::Simulate => {
                PossibleValue::new("simulate").help("random walks until the timeout: never exhaustive, never holds")
            }
        })
    }
}

fn assumption(s: &str) -> Result<Assumption, ConfigError> {
    s.trim().parse()
}

fn at_least_one(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn timeout(s: &str) -> Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .filter(|t| !t.is_zero() && *t <= MAX_TIMEOUT)
        .ok_or_else(|| "not a number of seconds above 0 and at most a year".into())
}

fn seeds(s: &str) -> Result<std::ops::Range<u64>, String> {
    let (a, b) = s.split_once("..").ok_or("expected START..END")?;
    let (a, b): (u64, u64) = (a.parse().map_err(|e| format!("{e}"))?, b.parse().map_err(|e| format!("{e}"))?);
    if a >= b {
        return Err("an empty range".into());
    }
    Ok(a..b)
}

/// Parses `args` (the program name first) as the command line of `program`: the parsed value,
/// or the exit code after printing the help (0) or the error with the usage (64).
pub fn parse<P: Parser>(args: impl IntoIterator<Item = impl Into<OsString> + Clone>) -> Result<P, ExitCode> {
    parse_with(P::command(), args)
}

/// [`parse`], with `command` as the program's command line: `P`'s, with texts only known when it
/// runs (a help made from data).
pub fn parse_with<P: clap::FromArgMatches>(
    command: clap::Command,
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
) -> Result<P, ExitCode> {
    command.try_get_matches_from(args).and_then(|matches| P::from_arg_matches(&matches)).map_err(|e| {
        let _ = e.print();
        if e.use_stderr() { ExitCode::from(BAD_ARGUMENTS) } else { ExitCode::SUCCESS }
    })
}

/// Runs a parsed command; returns the exit code. `check --junit` and `swarm --junit` are refused
/// as bad arguments: the program writes them through [`execute_with`].
pub fn execute(command: Command) -> ExitCode {
    execute_with(command, None)
}

/// Runs a parsed command, as [`execute`] does; `check --junit FILE` and `swarm --junit FILE` then
/// write to FILE the document that `junit` makes of the finished run, whatever it found, and exit
/// as the run does. A FILE that cannot be written is an error on standard error and exit 1; a
/// `--junit` without `junit` is refused as a bad argument, before anything runs.
pub fn execute_with(command: Command, junit: Option<JunitXml<'_>>) -> ExitCode {
    let asked = match &command {
        Command::Check(a) => a.junit.is_some(),
        Command::Swarm(a) => a.junit.is_some(),
        Command::Explore(_) | Command::Figures(_) => false,
    };
    if asked && junit.is_none() {
        eprintln!("error: --junit: this program writes no JUnit XML");
        return ExitCode::from(BAD_ARGUMENTS);
    }
    let config_args = match &command {
        Command::Check(a) => &a.config,
        Command::Explore(a) => &a.config,
        Command::Swarm(a) => &a.config,
        // Its configurations are its own, fixed ones.
        Command::Figures(_) => &ConfigArgs::default(),
    };
    let config = match config_args.config() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(BAD_ARGUMENTS);
        }
    };
    match command {
        Command::Check(args) => run_check(config, &args, junit),
        Command::Explore(args) => {
            let address = format!("127.0.0.1:{}", args.port);
            eprintln!("serving stateright's Explorer on http://{address}/ for {config}");
            eprintln!("(the Explorer explores breadth first on demand and ignores symmetry reduction)");
            let _ = ReservationModel::new(config).checker().serve(address);
            ExitCode::SUCCESS
        }
        Command::Swarm(args) => {
            let options = SwarmOptions {
                seeds: args.seeds.clone(),
                threads: args.threads,
                depth: args.depth,
                stop_at_failure: args.stop_at_failure,
            };
            if !args.quiet {
                println!("swarm over {config}: seeds {:?}, {} threads", options.seeds, options.threads);
            }
            let report = swarm(config, &options);
            print!("{}", report.text(|seed| args.replay(seed..seed + 1)));
            let code = if report.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) };
            let walks = report.failures.iter().map(|f| (f.violation.property, &f.violation.steps[..], Some(f.seed)));
            if let Some(dir) = &args.report
                && let Err(e) = write_charts(dir, &config, walks)
            {
                eprintln!("error: cannot write the counterexamples' charts to {}: {e}", dir.display());
                return ExitCode::from(1);
            }
            let finished = Finished::Swarm { args: &args, config, report: &report };
            write_junit(args.junit.as_deref(), junit, finished).unwrap_or(code)
        }
        Command::Figures(args) => run_figures(&args, &mut std::io::stdout().lock()),
    }
}

/// `figures`: each configuration checked with its ceiling, a line of figures each, written to
/// `out` as each check ends.
fn run_figures(args: &FiguresArgs, out: &mut dyn std::io::Write) -> ExitCode {
    let mut reports = Vec::with_capacity(args.configurations.len());
    for &measured in &args.configurations {
        let options = CheckOptions { timeout: Some(args.timeout), ceiling: true, ..CheckOptions::default() };
        crate::ceiling::reset_peak_memory();
        let report = check(measured.config(), options);
        let line = if args.json { figures_json(measured, &report) } else { figures_line(measured, &report) };
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
        reports.push(report);
    }
    figures_exit_code(&reports)
}

/// `figures`' exit code: 1 when a property failed, or a complete check did not reach a rule, in
/// any report; else 2 when a check did not complete; else 0.
fn figures_exit_code(reports: &[crate::check::CheckReport]) -> ExitCode {
    if reports.iter().any(|r| !r.failures().is_empty() || (r.complete && !r.unreached_rules().is_empty())) {
        ExitCode::from(1)
    } else if reports.iter().any(|r| !r.complete) {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// One configuration's figures in JSON: its name, then `check --json`'s object.
fn figures_json(measured: Measured, r: &crate::check::CheckReport) -> String {
    let json = r.json();
    format!("{{\"name\":\"{}\",{}", measured.name(), json.strip_prefix('{').unwrap_or(&json))
}

/// One configuration's figures, as `figures` prints them.
fn figures_line(measured: Measured, r: &crate::check::CheckReport) -> String {
    let or_unknown = |v: Option<String>| v.unwrap_or_else(|| "unknown".into());
    let verdict = if !r.failures().is_empty() {
        "a property FAILS"
    } else if !r.complete {
        "INCOMPLETE"
    } else if !r.unreached_rules().is_empty() {
        "complete, every property holds, a rule NOT reached"
    } else {
        "complete, every property holds, every rule reached"
    };
    format!(
        "{} ({}): {} unique states, {} generated, {:.2} s, {} processor s, peak {} MB, ratio to the ceiling {}: {}",
        measured.name(),
        r.config,
        r.unique_states,
        r.total_states,
        r.seconds,
        or_unknown(r.cpu_seconds.map(|c| format!("{c:.2}"))),
        or_unknown(r.peak_memory.map(|b| (b / (1024 * 1024)).to_string())),
        or_unknown(r.ratio_to_ceiling().map(|x| format!("{x:.2}"))),
        verdict
    )
}

/// Writes to `path`, when `--junit` gave one, the document `junit` makes of `finished`: `None`
/// when it was written or not asked for, the exit code 1 when it cannot be written (after saying
/// why on standard error).
fn write_junit(path: Option<&Path>, junit: Option<JunitXml<'_>>, finished: Finished<'_>) -> Option<ExitCode> {
    let (path, junit) = (path?, junit?);
    match std::fs::write(path, junit(finished)) {
        Ok(()) => None,
        Err(e) => {
            eprintln!("error: cannot write the JUnit report to {}: {e}", path.display());
            Some(ExitCode::from(1))
        }
    }
}

fn run_check(config: ModelConfig, args: &CheckArgs, junit: Option<JunitXml<'_>>) -> ExitCode {
    let options = args.options();
    if !args.quiet && !args.json {
        println!("checking {config}");
    }
    let report = check(config, options);
    if args.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    if args.symmetry_factor && report.options.symmetry {
        let full = check(config, CheckOptions { symmetry: false, ceiling: false, ..options });
        let factor = full.unique_states as f64 / report.unique_states.max(1) as f64;
        println!(
            "without reduction: {} unique states, {} total, {:.2} s, {:.0} states/s, complete: {}",
            full.unique_states,
            full.total_states,
            full.seconds,
            full.states_per_second(),
            if full.complete { "yes" } else { "no" }
        );
        println!("reduction factor: {factor:.2}");
    }
    let code = if !report.failures().is_empty() {
        ExitCode::from(1)
    } else if !report.complete {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    };
    let counterexamples = report.failures().into_iter().map(|v| (v.name, &v.path[..], None));
    if let Some(dir) = &args.report
        && let Err(e) = write_charts(dir, &config, counterexamples)
    {
        eprintln!("error: cannot write the counterexamples' charts to {}: {e}", dir.display());
        return ExitCode::from(1);
    }
    write_junit(args.junit.as_deref(), junit, Finished::Check { args, config, report: &report }).unwrap_or(code)
}

/// Writes the sequence chart of each of `counterexamples` (a property, its steps, and the seed of
/// the walk that found them, for a swarm) in `dir` ([`crate::chart::chart`]), the first of each
/// property only, saying where on standard output.
fn write_charts<'a>(
    dir: &Path,
    config: &ModelConfig,
    counterexamples: impl Iterator<Item = (&'static str, &'a [crate::check::StepRecord], Option<u64>)>,
) -> std::io::Result<()> {
    let mut drawn: Vec<&str> = Vec::new();
    for (property, steps, seed) in counterexamples {
        if drawn.contains(&property) {
            continue;
        }
        drawn.push(property);
        std::fs::create_dir_all(dir)?;
        let name = crate::chart::file_name(property);
        let name = match seed {
            Some(seed) => name.replace(".svg", &format!("-seed-{seed}.svg")),
            None => name,
        };
        let path = dir.join(name);
        std::fs::write(&path, crate::chart::chart(config, property, steps))?;
        println!("the counterexample to \"{property}\" as a sequence chart: {}", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::ValueEnum;

    use super::{FiguresArgs, Measured, figures_exit_code, figures_json, figures_line, run_figures};
    use crate::check::{CheckOptions, CheckReport, Strategy, check};
    use crate::{Assumption, ModelConfig};

    /// Each configuration `figures` measures, by its name on the command line.
    #[test]
    fn figures_measures_three_configurations_by_name() {
        let named: Vec<(&str, u8, u8)> =
            Measured::value_variants().iter().map(|m| (m.name(), m.config().owners, m.config().keys)).collect();
        assert_eq!(named, [("default", 3, 2), ("four-owners", 4, 2), ("four-owners-three-keys", 4, 3)]);
        for m in Measured::value_variants() {
            assert_eq!(Measured::from_str(m.name(), false), Ok(*m));
            let ModelConfig { attempts, horizon, ttl, skew, assumptions, .. } = m.config();
            let d = ModelConfig::default();
            assert_eq!(
                (attempts, horizon, ttl, skew, assumptions),
                (d.attempts, d.horizon, d.ttl, d.skew, d.assumptions)
            );
        }
    }

    fn small(options: CheckOptions) -> CheckReport {
        check(ModelConfig::small(), options)
    }

    /// A line says what the check found, and the exit code follows the worst of the reports: a
    /// failure or an unreached rule (1), then an incomplete run (2).
    #[test]
    fn figures_lines_and_exit_codes_say_what_each_check_found() {
        let code = |reports: &[&CheckReport]| {
            format!("{:?}", figures_exit_code(&reports.iter().map(|r| (*r).clone()).collect::<Vec<_>>()))
        };
        let (ok, one, two) = (
            format!("{:?}", std::process::ExitCode::SUCCESS),
            format!("{:?}", std::process::ExitCode::from(1)),
            format!("{:?}", std::process::ExitCode::from(2)),
        );
        let holds = small(CheckOptions::default());
        let line = figures_line(Measured::Default, &holds);
        assert!(line.starts_with("default (owners=2 attempts=2 keys=2 "), "{line}");
        assert!(
            line.contains(&format!(": {} unique states, {} generated, ", holds.unique_states, holds.total_states)),
            "{line}"
        );
        assert!(line.ends_with(": complete, every property holds, every rule reached"), "{line}");
        assert_eq!(code(&[&holds]), ok);
        let json = figures_json(Measured::FourOwners, &holds);
        assert!(json.starts_with("{\"name\":\"four-owners\",\"owners\":2,") && json.ends_with('}'), "{json}");

        let stopped = check(
            ModelConfig::fuzz(),
            CheckOptions { timeout: Some(Duration::from_millis(50)), ..CheckOptions::default() },
        );
        assert!(figures_line(Measured::Default, &stopped).ends_with(": INCOMPLETE"));
        assert_eq!(code(&[&holds, &stopped]), two);

        let fails = check(
            ModelConfig::small().dropping(Assumption::H8),
            CheckOptions { strategy: Strategy::Bfs, threads: 1, stop_at_failure: true, ..CheckOptions::default() },
        );
        assert!(figures_line(Measured::Default, &fails).ends_with(": a property FAILS"));
        assert_eq!(code(&[&stopped, &fails]), one);

        let unreached = check(ModelConfig { attempts: 1, ..ModelConfig::small() }, CheckOptions::default());
        assert!(!unreached.unreached_rules().is_empty() && unreached.holds());
        let line = figures_line(Measured::Default, &unreached);
        assert!(line.ends_with(": complete, every property holds, a rule NOT reached"), "{line}");
        assert_eq!(code(&[&stopped, &unreached]), one);
    }

    /// `figures` checks each configuration it is given with its ceiling and the timeout it is
    /// given, and writes a line each.
    #[test]
    fn figures_runs_each_check_with_its_ceiling_and_timeout() {
        let args = FiguresArgs {
            configurations: vec![Measured::Default, Measured::FourOwners],
            timeout: Duration::from_millis(50),
            json: true,
        };
        let mut out = Vec::new();
        let code = run_figures(&args, &mut out);
        assert_eq!(format!("{code:?}"), format!("{:?}", std::process::ExitCode::from(2)));
        let out = String::from_utf8(out).expect("UTF-8");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        for (line, name) in lines.iter().zip(["default", "four-owners"]) {
            assert!(line.starts_with(&format!("{{\"name\":\"{name}\",")), "{out}");
            assert!(line.contains("\"complete\":false,"), "{out}");
            let ceiling = line.split("\"ceiling_unique_states\":").nth(1).unwrap_or_default();
            assert!(ceiling.starts_with(|c: char| c.is_ascii_digit()), "no ceiling measured: {out}");
        }
    }
}
