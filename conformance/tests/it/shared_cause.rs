//! The cause a report leads with, when most checks fail: reports put together by hand.

use std::time::Duration;

use reservation_conformance::{CheckResult, Failure, Finding, Report};
use reservation_store::rules::Rule;

/// A failure at a step of `finding`'s kind, headlined `rule`, explained by `cause` if given.
fn failed(rule: Rule, finding: Option<Finding>, cause: Option<&'static str>) -> CheckResult {
    let mut f = Failure::new("r1", rule, "a problem");
    f.finding = finding;
    f.cause = cause;
    CheckResult::Failed(f)
}

fn report(results: Vec<CheckResult>) -> Report {
    const NAMES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];
    Report {
        checks: NAMES.into_iter().zip(results).map(|(n, r)| (n, r, Duration::ZERO)).collect(),
        ..Report::default()
    }
}

const LOOKUP: Option<Finding> = Some(Finding::Lookup);
const OUTCOME: Option<Finding> = Some(Finding::Outcome);

#[test]
fn no_cause_is_shared_when_half_of_the_checks_that_ran_pass() {
    let r = report(vec![
        failed(Rule::R1, LOOKUP, None),
        failed(Rule::R1, LOOKUP, None),
        CheckResult::Passed,
        CheckResult::Passed,
    ]);
    assert_eq!(r.shared_cause(), None);
    assert!(!r.to_string().contains("share one cause"), "{r}");
}

#[test]
fn one_failure_shares_nothing() {
    let r = report(vec![failed(Rule::R1, LOOKUP, None)]);
    assert_eq!(r.shared_cause(), None, "{r}");
    let r = report(vec![failed(Rule::R1, LOOKUP, None), failed(Rule::R1, LOOKUP, None)]);
    assert!(r.shared_cause().is_some_and(|c| c.starts_with("2 of the 2 failures")), "{r}");
}

#[test]
fn the_rule_most_failures_break_at_a_lookup_is_the_shared_cause() {
    let r = report(vec![
        failed(Rule::R1, LOOKUP, None),
        failed(Rule::C1, OUTCOME, None),
        failed(Rule::R1, LOOKUP, None),
        CheckResult::Passed,
    ]);
    let cause = "2 of the 3 failures share one cause (3 of 4 checks that ran failed): rule R1 broken at a lookup";
    assert_eq!(r.shared_cause().as_deref(), Some(cause));
    // The report leads with it, under its counts.
    assert_eq!(r.to_string().lines().nth(1), Some(cause), "{r}");
}

#[test]
fn skipped_checks_did_not_run() {
    let r = report(vec![
        failed(Rule::C6, OUTCOME, None),
        failed(Rule::C6, OUTCOME, None),
        CheckResult::Skipped("not durable"),
        CheckResult::Skipped("not durable"),
        CheckResult::Passed,
    ]);
    let cause =
        "2 of the 2 failures share one cause (2 of 3 checks that ran failed): rule C6 broken by an operation's answer";
    assert_eq!(r.shared_cause().as_deref(), Some(cause));
}

#[test]
fn a_misreading_groups_failures_whatever_rule_they_headline() {
    let cause = Some("hold ids compared ignoring case");
    let r =
        report(vec![failed(Rule::D5, OUTCOME, cause), failed(Rule::A4, LOOKUP, cause), failed(Rule::R1, LOOKUP, None)]);
    let shared = r.shared_cause().unwrap_or_default();
    assert!(
        shared.starts_with("2 of the 3 failures") && shared.ends_with(": hold ids compared ignoring case"),
        "{shared}"
    );
}

#[test]
fn lookups_that_show_the_key_before_its_last_step_are_a_stale_read() {
    let before = Some(Finding::LookupBeforeLastStep);
    let r = report(vec![
        failed(Rule::R1, before, None),
        failed(Rule::C1, before, None),
        failed(Rule::L2, before, None),
        failed(Rule::A2, LOOKUP, None),
    ]);
    let shared = r.shared_cause().unwrap_or_default();
    assert!(shared.starts_with("3 of the 4 failures") && shared.contains("(a stale read)"), "{shared}");
}

#[test]
fn failing_one_rule_each_the_kind_of_step_is_shared() {
    let r =
        report(vec![failed(Rule::R1, LOOKUP, None), failed(Rule::C1, LOOKUP, None), failed(Rule::L2, OUTCOME, None)]);
    let cause = "2 of the 3 failures share one cause (3 of 3 checks that ran failed): lookups show states the \
                 specification does not give, after operations answered right";
    assert_eq!(r.shared_cause().as_deref(), Some(cause));
    let r =
        report(vec![failed(Rule::R1, OUTCOME, None), failed(Rule::C1, OUTCOME, None), failed(Rule::L2, LOOKUP, None)]);
    assert!(r.shared_cause().is_some_and(|c| c.ends_with(": operations answer otherwise than the specification")));
}

#[test]
fn failures_that_share_nothing_share_no_cause() {
    let r = report(vec![
        failed(Rule::R1, LOOKUP, None),
        failed(Rule::C1, OUTCOME, None),
        CheckResult::Failed(Failure::without_rule("r1", "the check panicked")),
        CheckResult::Failed(Failure::without_rule("r1", "the run stopped")),
    ]);
    assert_eq!(r.shared_cause(), None, "{r}");
}

#[test]
fn checks_that_all_panicked_share_that() {
    let payload: Box<dyn std::any::Any + Send> = Box::new("cannot connect");
    let panicked = || CheckResult::Failed(Failure::panicked("r1", &*payload));
    let r = report(vec![panicked(), panicked(), panicked()]);
    assert!(r.shared_cause().is_some_and(|c| c.ends_with(": a check must run to its end; this one panicked")), "{r}");
}
