//! The default strategy and the commands' flags: shortest counterexamples without asking, flags
//! that give a configuration and replay it, and traces in the JSON output. The commands run as a
//! user runs them, through the `reservation` program, in `reservation-cli`'s tests.

use clap::Parser;
use reservation_model::check::{CheckOptions, Strategy, check};
use reservation_model::{Assumption, ModelConfig, cli};

/// The model's commands as the program parses them: flattened under its name.
#[derive(Parser)]
#[command(name = cli::PROGRAM)]
struct Program {
    #[command(subcommand)]
    command: cli::Command,
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

/// The flags that give a configuration give it exactly, dropped assumptions by repeated flags or
/// by commas, and a swarm's replay flags give the same configuration back.
#[test]
fn configuration_flags_parse_and_replay() {
    let parsed = |args: &[&str]| match Program::try_parse_from(args).expect("valid flags").command {
        cli::Command::Swarm(s) => s.config,
        _ => unreachable!(),
    };
    let a = parsed(&[cli::PROGRAM, "swarm", "--owners", "4", "--keys", "3", "--drop-assumption", "H5,h2"]);
    let b = parsed(&[
        cli::PROGRAM,
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
    let replay: Vec<String> =
        [cli::PROGRAM, "swarm"].into_iter().map(str::to_owned).chain(a.flags().split(' ').map(str::to_owned)).collect();
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
