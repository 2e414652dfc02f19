//! JUnit XML: a run of the suite as CI systems read a test run (GitHub Actions' and GitLab's
//! test reports, Jenkins' JUnit plugin, Buildkite's test analytics).
//!
//! One `<testsuites>` document; one `<testsuite>` for each store the run checked, named after it,
//! with the run's settings as `<property>` elements (the seed, the replay command); one
//! `<testcase>` for each check, its time in seconds. A failed check holds a `<failure>` whose
//! `message` is its headline (the report's first line) and whose `type` is the rule it names (or
//! `failure`), with the whole report as its text; a skipped one holds a `<skipped>` saying why.
//! The notes of a store's report are its `<system-out>`. The elements and attributes are those
//! of the schema Jenkins' JUnit plugin publishes (`junit-10.xsd`), which the other readers
//! accept: `testsuite` with `name`, `tests`, `failures`, `errors`, `skipped` and `time`;
//! `testcase` with `name`, `classname` and `time`; `failure` with `message` and `type`.
//!
//! Every text is escaped for XML 1.0; a character XML 1.0 cannot hold at all (a control
//! character a store put in an answer, say) is written as `\u{…}` instead, so that the document
//! always parses.

use std::fmt::Write as _;
use std::time::Duration;

use crate::report::{CheckResult, Report};

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

/// The JUnit XML document of `suites`, the runs of one invocation, named `name`.
pub fn junit_xml(name: &str, suites: &[JunitSuite]) -> String {
    let count = |pick: fn(&CheckResult) -> bool| -> usize {
        suites.iter().map(|s| s.report.checks.iter().filter(|(_, r, _)| pick(r)).count()).sum()
    };
    let tests: usize = suites.iter().map(|s| s.report.checks.len()).sum();
    let failures = count(|r| matches!(r, CheckResult::Failed(_)));
    let skipped = count(|r| matches!(r, CheckResult::Skipped(_)));
    let time: Duration = suites.iter().flat_map(|s| s.report.checks.iter().map(|(_, _, t)| *t)).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{}\">",
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
fn write_suite(out: &mut String, suite: &JunitSuite) {
    let checks = &suite.report.checks;
    let failures = checks.iter().filter(|(_, r, _)| matches!(r, CheckResult::Failed(_))).count();
    let skipped = checks.iter().filter(|(_, r, _)| matches!(r, CheckResult::Skipped(_))).count();
    let time: Duration = checks.iter().map(|(_, _, t)| *t).sum();
    let name = attribute(&suite.name);
    let _ = writeln!(
        out,
        "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"{skipped}\" time=\"{}\">",
        checks.len(),
        seconds(time)
    );
    if !suite.properties.is_empty() {
        out.push_str("    <properties>\n");
        for (key, value) in &suite.properties {
            let _ = writeln!(out, "      <property name=\"{}\" value=\"{}\"/>", attribute(key), attribute(value));
        }
        out.push_str("    </properties>\n");
    }
    for (check, result, took) in checks {
        let head =
            format!("    <testcase name=\"{}\" classname=\"{name}\" time=\"{}\"", attribute(check), seconds(*took));
        match result {
            CheckResult::Passed => {
                let _ = writeln!(out, "{head}/>");
            }
            CheckResult::Skipped(why) => {
                let _ = writeln!(out, "{head}>\n      <skipped message=\"{}\"/>\n    </testcase>", attribute(why));
            }
            CheckResult::Failed(failure) => {
                let said = failure.to_string();
                let headline = said.lines().next().unwrap_or_default();
                let kind = failure.rule.map_or_else(|| "failure".to_owned(), |rule| rule.to_string());
                let _ = writeln!(
                    out,
                    "{head}>\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>",
                    attribute(headline),
                    attribute(&kind),
                    text(&said)
                );
            }
        }
    }
    if !suite.report.notes.is_empty() {
        let notes: String = suite.report.notes.iter().map(|n| format!("note: {n}\n")).collect();
        let _ = writeln!(out, "    <system-out>{}</system-out>", text(&notes));
    }
    out.push_str("  </testsuite>\n");
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
