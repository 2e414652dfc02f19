//! The suite's checks as data: [`CHECKS`], one [`Check`] for each, in the suite's order, each
//! with its test name, the function that runs it, the part of the suite it belongs to, the rule
//! its name starts with, what it needs of a store, and a one-line summary. The list itself is
//! written once, in `__for_each_check!`; [`crate::tests!`] expands it for the test names, and
//! everything else reads this: the runner ([`crate::run_all`]) is a loop over it, a failure
//! takes its check's test name from it, and the summaries of what the suite checks (the
//! `reservation conform --help`, the crate's README, the project's README) are guarded against
//! it by a test.

use reservation_store::rules::Rule;

use crate::erased::DynHarness;
use crate::failure::Failure;
use crate::harness::Requirement;
use crate::settings::Settings;

/// A part of the suite: what a group of its checks does.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum Part {
    /// A check for each rule of the specification, through the operations' scenarios.
    Rules,
    /// The specification's worked examples, run as written.
    Examples,
    /// Every invalid argument, in every state a key can be in.
    Arguments,
    /// Thousands of keys, and the sweep of expired ones across long clock jumps.
    Volume,
    /// Random operation scripts, the store beside the spec functions.
    Differential,
    /// Threads on a few keys, every history judged linearizable.
    Linearizability,
    /// Concurrent operations while faults fire on a seeded schedule.
    Faults,
    /// A durable store closed and reopened: every state kept, the clock never going back.
    Durability,
    /// A durable store crashed at chosen points, every key compared whole after each crash.
    Crashes,
    /// A store that promises to survive power cuts, on a disk that loses power.
    PowerCuts,
}

impl Part {
    /// Every part, in the suite's order.
    pub const ALL: [Part; 10] = [
        Part::Rules,
        Part::Examples,
        Part::Arguments,
        Part::Volume,
        Part::Differential,
        Part::Linearizability,
        Part::Faults,
        Part::Durability,
        Part::Crashes,
        Part::PowerCuts,
    ];

    /// The part's name, as the summaries of the suite name it: such as `"the fault check"`.
    pub const fn name(self) -> &'static str {
        match self {
            Part::Rules => "a check per rule",
            Part::Examples => "the worked examples",
            Part::Arguments => "the invalid-argument sweep",
            Part::Volume => "the volume and sweep checks",
            Part::Differential => "the differential check",
            Part::Linearizability => "the linearizability check",
            Part::Faults => "the fault check",
            Part::Durability => "the durability checks",
            Part::Crashes => "the crash check",
            Part::PowerCuts => "the power-cut check",
        }
    }

    /// What the part does, in a line.
    pub const fn summary(self) -> &'static str {
        match self {
            Part::Rules => "each rule of the specification through its own scenario, every outcome and lookup compared",
            Part::Examples => "the specification's worked examples, run as written",
            Part::Arguments => "every invalid argument in every state a key can be in: a typed error, nothing changed",
            Part::Volume => "thousands of keys, and expired keys swept across long clock jumps",
            Part::Differential => "random operation scripts over every spelling, the store beside the spec functions",
            Part::Linearizability => "threads on a few keys, every history judged linearizable against the spec",
            Part::Faults => "concurrent operations while faults fire on a seeded schedule: nothing acknowledged lost",
            Part::Durability => "a durable store closed and reopened: every state kept, the clock never going back",
            Part::Crashes => "a durable store crashed at chosen points, every key compared whole after each crash",
            Part::PowerCuts => "a store on a disk that loses power: nothing it promised taken back",
        }
    }
}

/// How a check runs: against a store's harness, with the run's settings.
pub type Run = fn(&dyn DynHarness, &Settings) -> Result<(), Failure>;

/// One check of the suite.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct Check {
    /// Its test name, as reports and [`crate::tests!`] name it: `r3_reserve_joins_with_a_new_hold`.
    pub name: &'static str,
    /// The function of [`crate::checks`] that runs it: `r3`.
    pub function: &'static str,
    /// The part of the suite it belongs to.
    pub part: Part,
    /// What it needs of a store; a store that does not declare it skips the check.
    pub needs: Requirement,
    /// Runs it.
    pub run: Run,
}

impl Check {
    /// The rule its test name starts with (`r3_…`: R3; `s1_…`: S1), when it names one.
    pub fn rule(&self) -> Option<Rule> {
        let id = self.name.split('_').next()?;
        Rule::ALL.iter().copied().find(|r| r.id().eq_ignore_ascii_case(id))
    }

    /// What it checks, in a line: its test name in words, less the rule it starts with.
    pub fn summary(&self) -> String {
        let words = match self.rule() {
            Some(_) => self.name.split_once('_').map_or(self.name, |(_, rest)| rest),
            None => self.name,
        };
        words.replace('_', " ")
    }
}

/// Every check of the suite, in its order.
pub const CHECKS: &[Check] = crate::__for_each_check!(__catalogue {});

/// Builds [`CHECKS`] from the list of checks.
#[doc(hidden)]
#[macro_export]
macro_rules! __catalogue {
    ( ; $($name:ident => $check:ident in $part:ident $([$needs:ident])?),* $(,)?) => {
        &[$($crate::Check {
            name: stringify!($name),
            function: stringify!($check),
            part: $crate::Part::$part,
            needs: $crate::__requirement!($($needs)?),
            run: $crate::checks::$check,
        }),*]
    };
}

/// The check whose function is `function` (`scope_tenant`), or whose test name it is.
pub(crate) fn find(function: &str) -> Option<&'static Check> {
    CHECKS.iter().find(|c| c.function == function || c.name == function)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_check_is_listed_once_with_its_rule_and_part() {
        let mut names: Vec<&str> = CHECKS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CHECKS.len(), "a test name listed twice");
        for part in Part::ALL {
            assert!(CHECKS.iter().any(|c| c.part == part), "{part:?} has no check");
        }
        let r3 = find("r3").expect("r3");
        assert_eq!((r3.name, r3.rule(), r3.part), ("r3_reserve_joins_with_a_new_hold", Some(Rule::R3), Part::Rules));
        assert_eq!(r3.summary(), "reserve joins with a new hold");
        assert_eq!(find("r3_reserve_joins_with_a_new_hold").map(|c| c.function), Some("r3"));
        let faults = find("faults").expect("faults");
        assert_eq!((faults.rule(), faults.part), (Some(Rule::P1), Part::Faults));
        let examples = find("examples").expect("examples");
        assert_eq!(
            (examples.rule(), examples.summary().as_str()),
            (None, "examples of the specification run as written")
        );
        assert!(find("no_such_check").is_none());
        // What each needs: the durable checks, the power cuts.
        let needs = |name: &str| find(name).map(|c| c.needs);
        assert_eq!(needs("durable"), Some(Requirement::Durable));
        assert_eq!(needs("power_cuts"), Some(Requirement::PowerCuts));
        assert_eq!(needs("r1"), Some(Requirement::Nothing));
        // Every part is named and summarised differently.
        for (i, a) in Part::ALL.iter().enumerate() {
            for b in &Part::ALL[i + 1..] {
                assert!(a.name() != b.name() && a.summary() != b.summary(), "{a:?} {b:?}");
            }
        }
    }
}
