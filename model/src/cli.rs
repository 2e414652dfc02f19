//! The model's command line, `check` and `explore`, as a library function that the
//! `reservation-model` binary and the project's `reservation` program both call.
//!
//! The arguments are few and flat, so they are parsed by hand: no parser dependency to build.

use std::process::ExitCode;
use std::time::Duration;

use crate::check::{CheckOptions, Strategy, check};
use crate::swarm::{SwarmOptions, swarm};
use crate::{Assumption, ModelConfig, ReservationModel};
use stateright::Model;

/// The usage text of `check` and `explore`.
pub const USAGE: &str = "usage:
  reservation-model check [--owners N] [--attempts A] [--keys K] [--horizon T] [--ttl L] [--skew S]
                          [--drop-assumption H2|H3|H5|H7|H8 ...] [--strategy auto|dfs|bfs|simulate] [--seed X]
                          [--threads N] [--no-symmetry] [--symmetry-factor] [--timeout SECONDS] [--json] [--quiet]
  reservation-model explore [--port P] [the configuration flags of check]
  reservation-model swarm [the configuration flags of check] [--seeds START..END] [--depth STEPS]
                          [--threads N] [--stop-at-failure]

swarm runs one seeded random walk per seed (0..1000 by default) over a configuration too large to
check exhaustively, checking every property after every step; it prints the rule coverage across
the walks and, for a failure, its seed and the command that replays it. Split the seeds over
processes (a CI matrix) with --seeds; it exits 0 when no walk failed, 1 when one did.

check exits 0 when every property holds on a complete run, 1 when a property fails, 2 when the
run did not complete (a timeout, or a simulation, which is never exhaustive), 64 on bad arguments.
--symmetry-factor checks a second time without symmetry reduction and prints the reduction factor.";

/// The longest `--timeout`: a year.
const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

struct Args {
    command: String,
    config: ModelConfig,
    options: CheckOptions,
    json: bool,
    quiet: bool,
    port: u16,
    symmetry_factor: bool,
    swarm: SwarmOptions,
    /// The arguments that give the configuration, for the replay command.
    config_args: Vec<String>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut it = args.iter();
    let command = it.next().cloned().ok_or("missing command: check or explore")?;
    if command == "-h" || command == "--help" || command == "help" {
        return Err(String::new());
    }
    if command != "check" && command != "explore" && command != "swarm" {
        return Err(format!("unknown command {command:?}"));
    }
    let mut out = Args {
        command,
        config: ModelConfig::default(),
        options: CheckOptions { progress: Some(Duration::from_secs(3)), ..CheckOptions::default() },
        json: false,
        quiet: false,
        port: 3000,
        symmetry_factor: false,
        swarm: SwarmOptions::default(),
        config_args: Vec::new(),
    };
    let mut strategy_set = false;
    let mut threads_set = false;
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        fn num<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String> {
            v.parse().map_err(|_| format!("{flag}: not a valid number: {v:?}"))
        }
        match flag.as_str() {
            "--owners" => out.config.owners = num(flag, value()?)?,
            "--attempts" => out.config.attempts = num(flag, value()?)?,
            "--keys" => out.config.keys = num(flag, value()?)?,
            "--seeds" => {
                let v = value()?;
                let (a, b) = v.split_once("..").ok_or_else(|| format!("--seeds: expected START..END, got {v:?}"))?;
                let (a, b): (u64, u64) = (num(flag, a.to_owned())?, num(flag, b.to_owned())?);
                if a >= b {
                    return Err(format!("--seeds: an empty range {v:?}"));
                }
                out.swarm.seeds = a..b;
            }
            "--depth" => out.swarm.depth = num(flag, value()?)?,
            "--stop-at-failure" => out.swarm.stop_at_failure = true,
            "--horizon" => out.config.horizon = num(flag, value()?)?,
            "--ttl" => out.config.ttl = num(flag, value()?)?,
            "--skew" => out.config.skew = num(flag, value()?)?,
            "--drop-assumption" => {
                for id in value()?.split(',') {
                    let a: Assumption = id.trim().parse().map_err(|e| format!("{e}"))?;
                    out.config = out.config.dropping(a);
                }
            }
            "--strategy" => {
                out.options.strategy = value()?.parse()?;
                strategy_set = true;
            }
            "--seed" => out.options.seed = num(flag, value()?)?,
            "--threads" => {
                out.options.threads = num(flag, value()?)?;
                out.swarm.threads = out.options.threads;
                threads_set = true;
            }
            "--no-symmetry" => out.options.symmetry = false,
            "--symmetry-factor" => out.symmetry_factor = true,
            "--timeout" => {
                let v = value()?;
                let seconds: f64 = num(flag, v.clone())?;
                let t = Duration::try_from_secs_f64(seconds)
                    .ok()
                    .filter(|t| !t.is_zero() && *t <= MAX_TIMEOUT)
                    .ok_or_else(|| format!("--timeout: not a number of seconds above 0 and at most a year: {v:?}"))?;
                out.options.timeout = Some(t);
            }
            "--json" => out.json = true,
            "--quiet" => out.quiet = true,
            "--port" => out.port = num(flag, value()?)?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown flag {other:?}")),
        }
    }
    out.config.validate().map_err(|e| e.to_string())?;
    let config_flags = ["--owners", "--attempts", "--keys", "--horizon", "--ttl", "--skew", "--drop-assumption"];
    for pair in args.get(1..).unwrap_or_default().windows(2) {
        if let [flag, value] = pair
            && config_flags.contains(&flag.as_str())
        {
            out.config_args.extend([flag.clone(), value.clone()]);
        }
    }
    if out.options.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    // Breadth first finds the shortest counterexample only on one thread, and stops at it.
    if out.options.strategy == Strategy::Bfs {
        out.options.stop_at_failure = true;
        if !threads_set {
            out.options.threads = 1;
        }
    }
    let _ = strategy_set;
    if out.quiet {
        out.options.progress = None;
    }
    Ok(out)
}

/// Runs `check` or `explore` with `argv` (the command first, without the program name); returns
/// the exit code.
pub fn run(argv: &[String]) -> ExitCode {
    let args = match parse(argv) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("error: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(if e.is_empty() { 0 } else { 64 });
        }
    };
    if args.command == "swarm" {
        if !args.quiet {
            println!("swarm over {}: seeds {:?}, {} threads", args.config, args.swarm.seeds, args.swarm.threads);
        }
        let report = swarm(args.config, &args.swarm);
        let flags = args.config_args.join(" ");
        let depth = args.swarm.depth;
        print!(
            "{}",
            report.text(|seed| format!("reservation-model swarm {flags} --depth {depth} --seeds {seed}..{}", seed + 1))
        );
        return if report.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) };
    }
    if args.command == "explore" {
        let address = format!("127.0.0.1:{}", args.port);
        eprintln!("serving stateright's Explorer on http://{address}/ for {}", args.config);
        eprintln!("(the Explorer explores breadth first on demand and ignores symmetry reduction)");
        let _ = ReservationModel::new(args.config).checker().serve(address);
        return ExitCode::SUCCESS;
    }
    if !args.quiet && !args.json {
        println!("checking {}", args.config);
    }
    let report = check(args.config, args.options);
    if args.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    if args.symmetry_factor && report.options.symmetry {
        let full = check(args.config, CheckOptions { symmetry: false, ..args.options });
        let factor = full.unique_states as f64 / report.unique_states.max(1) as f64;
        println!(
            "without symmetry: {} unique states, {} total, {:.2} s, {:.0} states/s, complete: {}",
            full.unique_states,
            full.total_states,
            full.seconds,
            full.states_per_second(),
            if full.complete { "yes" } else { "no" }
        );
        println!("symmetry reduction factor: {factor:.2}");
    }
    if !report.failures().is_empty() {
        ExitCode::from(1)
    } else if !report.complete {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}
