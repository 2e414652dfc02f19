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
    assert!(cli::USAGE.contains("reservation-model check") && cli::USAGE.contains("reservation-model explore"));
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
