//! `check --junit` and `swarm --junit`: a finished run of the model as one JUnit test suite, a
//! test case per always-property, written by the suite's writer
//! (`reservation_conformance::junit`), as `conform --junit`'s runs are.

use std::time::Duration;

use reservation_conformance::junit::{CaseOutcome, TestCase, TestSuite, document};
use reservation_model::check::{CheckReport, Strategy};
use reservation_model::cli::{CheckArgs, Finished, SwarmArgs};
use reservation_model::swarm::{SwarmFailure, SwarmReport};
use reservation_model::{ALWAYS, ModelConfig};

/// The document's name and each case's class name, for a `check`.
const CHECK: &str = "reservation check";

/// The document's name and each case's class name, for a `swarm`.
const SWARM: &str = "reservation swarm";

/// A failure's `type`: the property has a counterexample.
const COUNTEREXAMPLE: &str = "counterexample";

/// The JUnit XML document of `finished`: what `check --junit` and `swarm --junit` write.
pub(crate) fn model_xml(finished: Finished<'_>) -> String {
    match finished {
        Finished::Check { args, config, report } => document(CHECK, &[check_suite(args, config, report)]),
        Finished::Swarm { args, config, report } => document(SWARM, &[swarm_suite(args, config, report)]),
    }
}

/// A `check` as a test suite named after its configuration: a case per property, its sentence
/// as its name; a failing property's failure the counterexample's headline (the property and its
/// steps) with the counterexample as `check` prints it; a property the run did not decide (it
/// did not complete, or it stopped at another property's counterexample), skipped. The check
/// decides every property in one search, so the search's time is the suite's and each case's is
/// 0; the report `check` prints is the suite's standard output.
fn check_suite(args: &CheckArgs, config: ModelConfig, report: &CheckReport) -> TestSuite {
    let o = &report.options;
    let stopped = !report.failures().is_empty() && (o.stop_at_failure || o.target.is_some());
    let cases = report
        .verdicts
        .iter()
        .map(|v| {
            let outcome = match v.counterexample() {
                Some(text) => CaseOutcome::Failed { message: headline(&text), kind: COUNTEREXAMPLE.to_owned(), text },
                None if !report.complete => CaseOutcome::Skipped {
                    reason: "not decided: the run did not complete (its timeout stopped it, or it was a simulation, \
                             which is never exhaustive)"
                        .to_owned(),
                },
                None if stopped => CaseOutcome::Skipped {
                    reason: "not decided: the search stopped at the first counterexample".to_owned(),
                },
                None => CaseOutcome::Passed,
            };
            TestCase { name: v.name.to_owned(), classname: CHECK.to_owned(), time: Duration::ZERO, outcome }
        })
        .collect();
    let mut properties = config_properties(config);
    let search = |key: &str, value: String| (key.to_owned(), value);
    properties.push(search("strategy", format!("{:?}", o.strategy).to_lowercase()));
    properties.push(search("threads", o.threads.to_string()));
    properties.push(search("symmetry", if o.symmetry { "on" } else { "off" }.to_owned()));
    if o.strategy == Strategy::Simulate {
        properties.push(search("seed", o.seed.to_string()));
    }
    if let Some(timeout) = args.timeout {
        properties.push(search("timeout", timeout.as_secs_f64().to_string()));
    }
    properties.push(search("complete", if report.complete { "yes" } else { "no" }.to_owned()));
    properties.push(search("unique_states", report.unique_states.to_string()));
    properties.push(search("total_states", report.total_states.to_string()));
    properties.push(search("depth", report.max_depth.to_string()));
    properties.push(search("replay", args.replay()));
    TestSuite {
        name: config.to_string(),
        properties,
        cases,
        time: Some(seconds(report.seconds)),
        system_out: report.text(),
    }
}

/// A `swarm` as a test suite named after its configuration: a case per property, its sentence
/// as its name; a property a walk broke fails, the first such walk's seed its failure's message,
/// the command that replays that walk and its trace, as `swarm` prints them, its text; with
/// `--stop-at-failure`, a property no walk broke before the swarm stopped is skipped. The walks
/// check every property at once, so the swarm's time is the suite's and each case's is 0; the
/// report `swarm` prints is the suite's standard output.
fn swarm_suite(args: &SwarmArgs, config: ModelConfig, report: &SwarmReport) -> TestSuite {
    let replay_seed = |seed: u64| args.replay(seed..seed.saturating_add(1));
    let mut names: Vec<&str> = ALWAYS.to_vec();
    for f in &report.failures {
        if !names.contains(&f.violation.property) {
            names.push(f.violation.property);
        }
    }
    let stopped = args.stop_at_failure && !report.failures.is_empty();
    let cases = names
        .into_iter()
        .map(|name| {
            let broken: Vec<&SwarmFailure> = report.failures.iter().filter(|f| f.violation.property == name).collect();
            let outcome = match broken.split_first() {
                Some((first, others)) => {
                    let message = format!("seed {} breaks \"{name}\"", first.seed);
                    let mut text =
                        format!("{message}; replay it with\n  {}\n{}", replay_seed(first.seed), first.violation.trace);
                    if !others.is_empty() {
                        let seeds: Vec<String> = others.iter().map(|f| f.seed.to_string()).collect();
                        text.push_str(&format!("\nthe walks of seeds {} break it too\n", seeds.join(", ")));
                    }
                    CaseOutcome::Failed { message, kind: COUNTEREXAMPLE.to_owned(), text }
                }
                None if stopped => CaseOutcome::Skipped {
                    reason: "not decided: the swarm stopped at its first failing walk".to_owned(),
                },
                None => CaseOutcome::Passed,
            };
            TestCase { name: name.to_owned(), classname: SWARM.to_owned(), time: Duration::ZERO, outcome }
        })
        .collect();
    let mut replay = args.replay(args.seeds.clone());
    if args.stop_at_failure {
        replay.push_str(" --stop-at-failure");
    }
    let mut properties = config_properties(config);
    properties.extend([
        ("seeds".to_owned(), format!("{}..{}", args.seeds.start, args.seeds.end)),
        ("depth".to_owned(), args.depth.to_string()),
        ("threads".to_owned(), args.threads.to_string()),
        ("walks".to_owned(), report.walks.to_string()),
        ("steps".to_owned(), report.steps.to_string()),
        ("replay".to_owned(), replay),
    ]);
    TestSuite {
        name: config.to_string(),
        properties,
        cases,
        time: Some(seconds(report.seconds)),
        system_out: report.text(replay_seed),
    }
}

/// The configuration, a property per setting.
fn config_properties(config: ModelConfig) -> Vec<(String, String)> {
    let dropped: Vec<&str> = config.assumptions.dropped().iter().map(|a| a.id()).collect();
    [
        ("owners", config.owners.to_string()),
        ("attempts", config.attempts.to_string()),
        ("keys", config.keys.to_string()),
        ("horizon", config.horizon.to_string()),
        ("ttl", config.ttl.to_string()),
        ("skew", config.skew.to_string()),
        ("dropped_assumptions", if dropped.is_empty() { "none".to_owned() } else { dropped.join(",") }),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_owned(), value))
    .collect()
}

/// The first line of a counterexample as `check` prints it, without its closing colon.
fn headline(counterexample: &str) -> String {
    let line = counterexample.lines().next().unwrap_or_default();
    line.strip_suffix(':').unwrap_or(line).to_owned()
}

/// A time the model measured, in seconds, as a duration (none for one that is not a time).
fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or_default()
}
