//! The default strategy and the command line: shortest counterexamples without asking, usage and
//! exit codes, and traces in the JSON output.

use std::process::ExitCode;

use reservation_model::check::{CheckOptions, Strategy, check};
use reservation_model::{Assumption, ModelConfig, cli};

fn run(args: &[&str]) -> ExitCode {
    cli::run(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>())
}

/// With an assumption dropped, the default strategy reports a counterexample as short as breadth
/// first's, the shortest there is.
#[test]
fn the_default_strategy_finds_each_dropped_assumption_s_shortest_counterexample() {
    for a in [Assumption::H2, Assumption::H3, Assumption::H5, Assumption::H7, Assumption::H8] {
        let config = ModelConfig::default().dropping(a);
        let auto = check(config, CheckOptions::default());
        let bfs = check(
            config,
            CheckOptions { strategy: Strategy::Bfs, threads: 1, stop_at_failure: true, ..CheckOptions::default() },
        );
        let shortest = |r: &reservation_model::check::CheckReport| r.failures().iter().filter_map(|v| v.steps).min();
        assert!(shortest(&auto).is_some(), "{a:?}: no counterexample\n{}", auto.text());
        assert_eq!(shortest(&auto), shortest(&bfs), "{a:?}\n{}", auto.text());
    }
}

#[test]
fn help_exits_0_and_bad_values_exit_64() {
    for help in [&["--help"][..], &["-h"], &["check", "--help"], &["explore", "-h"]] {
        assert_eq!(run(help), ExitCode::SUCCESS, "{help:?}");
    }
    for timeout in ["-1", "NaN", "inf", "1e30", "0", "ten"] {
        assert_eq!(run(&["check", "--timeout", timeout]), ExitCode::from(64), "--timeout {timeout}");
    }
    assert_eq!(run(&["frobnicate"]), ExitCode::from(64));
    assert_eq!(run(&[]), ExitCode::from(64), "no command");
    assert_eq!(run(&["check", "--owners", "9"]), ExitCode::from(64), "a configuration out of bounds");
    assert_eq!(run(&["check", "--threads", "0"]), ExitCode::from(64));
    assert_eq!(run(&["swarm", "--seeds", "5..5"]), ExitCode::from(64), "an empty seed range");
}

/// Each command's help names each of its flags, and the program's names each command.
#[test]
fn every_command_s_help_lists_its_flags() {
    use clap::CommandFactory;
    let mut program = cli::Cli::command();
    let top = program.render_long_help().to_string();
    for command in ["check", "explore", "swarm"] {
        assert!(top.contains(&format!("  {command} ")), "{command} missing:\n{top}");
    }
    let config = ["--owners", "--attempts", "--keys", "--horizon", "--ttl", "--skew", "--drop-assumption"];
    let own: [(&str, &[&str]); 3] = [
        (
            "check",
            &[
                "--strategy",
                "--seed",
                "--threads",
                "--no-symmetry",
                "--symmetry-factor",
                "--timeout",
                "--json",
                "--quiet",
            ],
        ),
        ("explore", &["--port"]),
        ("swarm", &["--seeds", "--depth", "--threads", "--stop-at-failure", "--quiet"]),
    ];
    for (command, flags) in own {
        let help = program.find_subcommand_mut(command).expect("a command").render_long_help().to_string();
        for flag in config.iter().chain(flags) {
            assert!(help.contains(flag), "{command} --help names no {flag}:\n{help}");
        }
    }
}

/// The flags that give a configuration give it exactly, dropped assumptions by repeated flags or
/// by commas, and a swarm's replay flags give the same configuration back.
#[test]
fn configuration_flags_parse_and_replay() {
    use clap::Parser;
    let parsed = |args: &[&str]| match cli::Cli::try_parse_from(args).expect("valid flags").command {
        cli::Command::Swarm(s) => s.config,
        _ => unreachable!(),
    };
    let a = parsed(&["reservation-model", "swarm", "--owners", "4", "--keys", "3", "--drop-assumption", "H5,h2"]);
    let b = parsed(&[
        "reservation-model",
        "swarm",
        "--owners",
        "4",
        "--keys",
        "3",
        "--drop-assumption",
        "H5",
        "--drop-assumption",
        "H2",
    ]);
    let expected =
        ModelConfig { owners: 4, keys: 3, ..ModelConfig::default() }.dropping(Assumption::H5).dropping(Assumption::H2);
    assert_eq!(a.config(), Ok(expected));
    assert_eq!(b.config(), Ok(expected));
    let replay: Vec<String> = ["reservation-model", "swarm"]
        .into_iter()
        .map(str::to_owned)
        .chain(a.flags().split(' ').map(str::to_owned))
        .collect();
    assert_eq!(parsed(&replay.iter().map(String::as_str).collect::<Vec<_>>()).config(), Ok(expected), "{}", a.flags());
}

/// A failing run's JSON carries each counterexample's steps: the action, the rule ids, and the
/// store and facts after it.
#[test]
fn json_of_a_failing_run_carries_the_counterexample_steps() {
    let report = check(ModelConfig::default().dropping(Assumption::H8), CheckOptions::default());
    let json = report.json();
    assert!(json.contains("\"counterexamples\":[{\"property\":"), "{json}");
    let verdict = report.failures()[0];
    assert_eq!(verdict.path.len(), verdict.steps.unwrap());
    assert!(verdict.path.iter().any(|s| !s.rules.is_empty()), "{:?}", verdict.path);
    for step in &verdict.path {
        assert!(json.contains(&format!("\"action\":\"{}\"", step.action)), "{} missing from {json}", step.action);
    }
    assert!(json.contains("\"store\":\"A=") && json.contains("\"facts\":\"o0: "), "{json}");
}
