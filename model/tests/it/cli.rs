//! The default strategy and the commands' flags: shortest counterexamples without asking, flags
//! that give a configuration, and traces in the JSON output. The commands run as a
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

/// The flags that give a configuration parse the same, dropped assumptions by repeated flags or
/// by commas. (That a swarm's printed replay gives the same configuration back is tested through
/// the `reservation` program, in `reservation-cli`'s tests.)
#[test]
fn configuration_flags_parse_by_repeated_flags_or_commas() {
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
    let default = ModelConfig::default();
    for c in [a, b] {
        assert_eq!((c.owners, c.keys), (4, 3));
        assert_eq!(
            (c.attempts, c.horizon, c.ttl, c.skew),
            (default.attempts, default.horizon, default.ttl, default.skew)
        );
        assert_eq!(c.drop_assumption, [Assumption::H5, Assumption::H2]);
    }
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

/// `execute` runs a parsed command and exits by its verdict: 1 for a counterexample, 2 for a run
/// its timeout stopped (`figures` too), 0 when every property holds on a complete run.
#[test]
fn execute_exits_by_the_verdict() {
    let run = |args: &[&str]| {
        let command = Program::try_parse_from(args).expect("valid flags").command;
        format!("{:?}", cli::execute(command))
    };
    let code = |c: u8| format!("{:?}", std::process::ExitCode::from(c));
    let check = [cli::PROGRAM, "check", "--owners", "2", "--quiet", "--json"];
    assert_eq!(run(&[&check[..], &["--drop-assumption", "H8"]].concat()), code(1));
    assert_eq!(run(&[&check[..], &["--attempts", "1"]].concat()), code(0));
    assert_eq!(run(&[cli::PROGRAM, "figures", "--configurations", "default", "--timeout", "0.05", "--json"]), code(2));
}

/// `execute_with` hands a finished `check` or `swarm` to the program's writer and writes what it
/// returns to `--junit`'s file, exiting as the run does; a file it cannot write exits 1, saying
/// so; `execute`, which has no writer, refuses `--junit` as a bad argument before anything runs.
#[test]
fn junit_is_written_by_the_program_s_writer_and_refused_without_one() {
    let dir = std::env::temp_dir().join(format!("reservation-model-junit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let file = dir.join("report.xml");
    let path = file.to_str().expect("a path");
    let command = |args: &[&str]| Program::try_parse_from(args).expect("valid flags").command;
    let code = |c: u8| format!("{:?}", std::process::ExitCode::from(c));
    let writer = |finished: cli::Finished<'_>| match finished {
        cli::Finished::Check { args, config, report } => {
            format!("check {} {config} failures {} {}", args.replay(), report.failures().len(), report.complete)
        }
        cli::Finished::Swarm { config, report, .. } => format!("swarm {config} walks {}", report.walks),
    };
    let run = |args: &[&str]| format!("{:?}", cli::execute_with(command(args), Some(&writer)));
    let written = || std::fs::read_to_string(&file).unwrap_or_default();

    let check = [cli::PROGRAM, "check", "--owners", "2", "--quiet", "--junit", path];
    assert_eq!(run(&check), code(0));
    assert!(written().starts_with("check reservation check --owners 2 ") && written().contains(" failures 0 true"));
    assert_eq!(run(&[&check[..], &["--drop-assumption", "H8"]].concat()), code(1));
    assert!(written().contains(" --drop-assumption H8 ") && !written().contains(" failures 0 "), "{}", written());
    assert_eq!(run(&[cli::PROGRAM, "swarm", "--seeds", "0..3", "--quiet", "--junit", path]), code(0));
    assert!(written().starts_with("swarm owners=3 ") && written().ends_with(" walks 3"), "{}", written());

    let nowhere = dir.join("no-such-directory").join("report.xml");
    let unwritable = [cli::PROGRAM, "check", "--owners", "2", "--quiet", "--junit", nowhere.to_str().expect("a path")];
    assert_eq!(run(&unwritable), code(1));

    let _ = std::fs::remove_file(&file);
    assert_eq!(format!("{:?}", cli::execute(command(&check))), code(64));
    assert!(!file.exists(), "a report without a writer");
    let _ = std::fs::remove_dir_all(&dir);
}
