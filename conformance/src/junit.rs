//! JUnit XML: a test run as CI systems read it (GitHub Actions' and GitLab's test reports,
//! Jenkins' JUnit plugin, Buildkite's test analytics).
//!
//! One writer, [`document`], from a neutral list: [`TestSuite`]s, each with its settings as
//! properties, its [`TestCase`]s (each passed, failed or skipped: a [`CaseOutcome`]) and what the
//! run printed beside them. The suite's runs convert onto it ([`JunitSuite`], [`junit_xml`]: the
//! program's `conform --junit`), and so do the model's (`check --junit` and `swarm --junit`: a
//! case per property).
//!
//! One `<testsuites>` document; one `<testsuite>` for each suite, with its properties as
//! `<property>` elements (such as the seed and the replay command); one `<testcase>` for each
//! case, its time in seconds. A failed case holds a `<failure>` with its `message` (a headline)
//! and its `type`, its text the whole report; a skipped one holds a `<skipped>` saying why. What
//! the run printed beside its cases (a store's notes, a check's figures) is the suite's
//! `<system-out>`. The elements and attributes are those of the schema Jenkins' xUnit plugin
//! publishes (`junit-10.xsd`), which the other readers accept: `testsuites` with `name`, `tests`,
//! `failures`, `errors` and `time`; `testsuite` with `name`, `tests`, `failures`, `errors`,
//! `skipped` and `time`; `testcase` with `name`, `classname` and `time`; `failure` with `message`
//! and `type`; `skipped` with `message`. The suite's tests validate what it writes against a schema
//! of that shape (`conformance/tests/junit.xsd`).
//!
//! Every text is escaped for XML 1.0; a character XML 1.0 cannot hold at all (a control
//! character a store put in an answer, say) is written as `\u{…}` instead, so that the document
//! always parses.

use std::fmt::Write as _;
use std::time::Duration;

use crate::report::{CheckResult, Report};

/// What one [`TestCase`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CaseOutcome {
    /// It passed: the `<testcase>` holds nothing.
    Passed,
    /// It failed: a `<failure>`.
    Failed {
        /// The failure's headline, its `message`.
        message: String,
        /// What failed, its `type`: the rule a check's failure names, say.
        kind: String,
        /// The whole report of the failure, its text.
        text: String,
    },
    /// It did not run, or ran without a verdict: a `<skipped>`.
    Skipped {
        /// Why, its `message`.
        reason: String,
    },
}

/// One `<testcase>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TestCase {
    /// Its name: a check's, or a property's sentence.
    pub name: String,
    /// Its class name, by which CI systems group cases: the store a check ran against, or the
    /// command that checked a property.
    pub classname: String,
    /// How long it took.
    pub time: Duration,
    /// What it found.
    pub outcome: CaseOutcome,
}

/// One `<testsuite>`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestSuite {
    /// Its name: the store the suite ran against, or the model's configuration.
    pub name: String,
    /// The run's settings, as `<property>` elements: such as `seed` and `replay`.
    pub properties: Vec<(String, String)>,
    /// Its cases, in the order the run reported them.
    pub cases: Vec<TestCase>,
    /// Its time when its cases' times do not add up to it (one search that decided every case at
    /// once); `None`: the sum of its cases' times.
    pub time: Option<Duration>,
    /// What the run printed beside its cases, as its `<system-out>`; none when empty.
    pub system_out: String,
}

impl TestSuite {
    /// Its time: [`TestSuite::time`], or the sum of its cases'.
    fn duration(&self) -> Duration {
        self.time.unwrap_or_else(|| self.cases.iter().map(|c| c.time).sum())
    }

    /// Its cases whose outcome `pick` picks.
    fn count(&self, pick: fn(&CaseOutcome) -> bool) -> usize {
        self.cases.iter().filter(|c| pick(&c.outcome)).count()
    }
}

/// Whether `outcome` is a failure.
fn failed(outcome: &CaseOutcome) -> bool {
    matches!(outcome, CaseOutcome::Failed { .. })
}

/// Whether `outcome` is a skip.
fn skipped(outcome: &CaseOutcome) -> bool {
    matches!(outcome, CaseOutcome::Skipped { .. })
}

/// The JUnit XML document of `suites`, the runs of one invocation, named `name`.
pub fn document(name: &str, suites: &[TestSuite]) -> String {
    let tests: usize = suites.iter().map(|s| s.cases.len()).sum();
    let failures: usize = suites.iter().map(|s| s.count(failed)).sum();
    let time: Duration = suites.iter().map(TestSuite::duration).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    // No `skipped` here: junit-10.xsd gives `<testsuites>` none (each `<testsuite>` has its own).
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" time=\"{}\">",
        attribute(name),
        seconds(time)
    );
    for suite in suites {
        write_suite(&mut out, suite);
    }
    out.push_str("</testsuites>\n");
    out
}

/// One `<testsuite>`.
fn write_suite(out: &mut String, suite: &TestSuite) {
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{}\">",
        attribute(&suite.name),
        suite.cases.len(),
        suite.count(failed),
        suite.count(skipped),
        seconds(suite.duration())
    );
    if !suite.properties.is_empty() {
        out.push_str("    <properties>\n");
        for (key, value) in &suite.properties {
            let _ = writeln!(out, "      <property name=\"{}\" value=\"{}\"/>", attribute(key), attribute(value));
        }
        out.push_str("    </properties>\n");
    }
    for case in &suite.cases {
        let head = format!(
            "    <testcase name=\"{}\" classname=\"{}\" time=\"{}\"",
            attribute(&case.name),
            attribute(&case.classname),
            seconds(case.time)
        );
        match &case.outcome {
            CaseOutcome::Passed => {
                let _ = writeln!(out, "{head}/>");
            }
            CaseOutcome::Skipped { reason } => {
                let _ = writeln!(out, "{head}>\n      <skipped message=\"{}\"/>\n    </testcase>", attribute(reason));
            }
            CaseOutcome::Failed { message, kind, text: said } => {
                let _ = writeln!(
                    out,
                    "{head}>\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>",
                    attribute(message),
                    attribute(kind),
                    text(said)
                );
            }
        }
    }
    if !suite.system_out.is_empty() {
        let _ = writeln!(out, "    <system-out>{}</system-out>", text(&suite.system_out));
    }
    out.push_str("  </testsuite>\n");
}

/// One store's run of the suite, for [`junit_xml`].
#[derive(Clone, Debug)]
pub struct JunitSuite {
    /// The store's name: the `<testsuite>`'s name and each `<testcase>`'s class name.
    pub name: String,
    /// What the run found.
    pub report: Report,
    /// The run's settings, as `<property>` elements: such as `seed` and `replay`.
    pub properties: Vec<(String, String)>,
}

impl JunitSuite {
    /// The run as a [`TestSuite`]: a case per check, named after it, with its time; a failed
    /// check's `message` its headline (the report's first line), its `type` the rule it names (or
    /// `failure`) and its text the whole report; a skipped check's reason; the report's notes, as
    /// `note: …` lines, its standard output.
    pub fn test_suite(&self) -> TestSuite {
        let cases = self
            .report
            .checks
            .iter()
            .map(|(check, result, took)| {
                let outcome = match result {
                    CheckResult::Passed => CaseOutcome::Passed,
                    CheckResult::Skipped(why) => CaseOutcome::Skipped { reason: (*why).to_owned() },
                    CheckResult::Failed(failure) => {
                        let said = failure.to_string();
                        CaseOutcome::Failed {
                            message: said.lines().next().unwrap_or_default().to_owned(),
                            kind: failure.rule.map_or_else(|| "failure".to_owned(), |rule| rule.to_string()),
                            text: said,
                        }
                    }
                };
                TestCase { name: (*check).to_owned(), classname: self.name.clone(), time: *took, outcome }
            })
            .collect();
        TestSuite {
            name: self.name.clone(),
            properties: self.properties.clone(),
            cases,
            time: None,
            system_out: self.report.notes.iter().map(|n| format!("note: {n}\n")).collect(),
        }
    }
}

/// The JUnit XML document of `suites`, the suite's runs of one invocation, named `name`: the
/// [`document`] of their [`JunitSuite::test_suite`]s.
pub fn junit_xml(name: &str, suites: &[JunitSuite]) -> String {
    document(name, &suites.iter().map(JunitSuite::test_suite).collect::<Vec<_>>())
}

/// A duration in seconds, to the millisecond.
fn seconds(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64())
}

/// Whether XML 1.0 can hold `c` at all.
fn allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// `raw` as XML text: the markup characters as entities, a character XML cannot hold as `\u{…}`.
fn text(raw: &str) -> String {
    escape(raw, false)
}

/// `raw` as an attribute's value between double quotes: as [`text`], the quotes and the
/// whitespace an attribute would fold (line ends and tabs) as character references too.
fn attribute(raw: &str) -> String {
    escape(raw, true)
}

fn escape(raw: &str, in_attribute: bool) -> String {
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if in_attribute => out.push_str("&quot;"),
            '\n' | '\r' | '\t' if in_attribute => {
                let _ = write!(out, "&#{};", u32::from(c));
            }
            c if allowed(c) => out.push(c),
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_characters_xml_cannot_hold_are_escaped() {
        assert_eq!(text("a<b>&c\"'"), "a&lt;b&gt;&amp;c\"'");
        assert_eq!(attribute("a\"b\nc\td\re"), "a&quot;b&#10;c&#9;d&#13;e");
        assert_eq!(text("nul\u{0} bell\u{7} esc\u{1b} fffe\u{fffe}"), "nul\\u{0} bell\\u{7} esc\\u{1b} fffe\\u{fffe}");
        assert_eq!(text("tab\tline\nend\r"), "tab\tline\nend\r");
        assert_eq!(text("é ✓ \u{10348} \u{d7ff} \u{e000} \u{fffd}"), "é ✓ \u{10348} \u{d7ff} \u{e000} \u{fffd}");
        assert_eq!(seconds(Duration::from_micros(1_234_567)), "1.235");
    }
}
