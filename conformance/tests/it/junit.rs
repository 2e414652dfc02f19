//! JUnit XML (`reservation_conformance::junit`): a run's document parses, and holds what CI
//! systems read, in the shape Jenkins' JUnit schema (`junit-10.xsd`) gives it; `xmllint`, where it
//! is installed, validates it against the project's schema of that shape (`tests/junit.xsd`).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use reservation_conformance::junit::{CaseOutcome, JunitSuite, TestCase, TestSuite, document, junit_xml};
use reservation_conformance::{CheckResult, MemoryHarness, Report, Settings, run_matching};

/// The schema of the JUnit XML the project writes, after Jenkins' `junit-10.xsd`.
const SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/junit.xsd");

/// What `xmllint --noout --schema tests/junit.xsd` says of the document `xml`: `Ok` when it
/// validates, `Err` with xmllint's words when it does not. `None` when xmllint is not installed
/// (Debian's `libxml2-utils`): the caller then skips the validation, after one line that says so,
/// unless `RESERVATION_REQUIRE_SERVICES=1`, which fails the test instead.
fn xmllint(xml: &str) -> Option<Result<String, String>> {
    let installed = Command::new("xmllint").arg("--version").output().map(|_| ());
    reservation_conformance::services::service("xmllint (the JUnit schema's validator)", installed)?;
    let mut file = tempfile::Builder::new().suffix(".xml").tempfile().expect("a temporary file");
    std::io::Write::write_all(&mut file, xml.as_bytes()).expect("the document written");
    let o =
        Command::new("xmllint").args(["--noout", "--schema", SCHEMA]).arg(file.path()).output().expect("xmllint runs");
    let said = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    Some(if o.status.success() { Ok(said) } else { Err(said) })
}

/// Fails unless `xml` validates against the schema (when xmllint is installed).
fn validates(xml: &str) {
    if let Some(Err(said)) = xmllint(xml) {
        panic!("the JUnit document breaks {SCHEMA}:\n{said}\n{xml}");
    }
}

/// The elements among `node`'s children.
fn elements<'a, 'input>(node: roxmltree::Node<'a, 'input>) -> Vec<roxmltree::Node<'a, 'input>> {
    node.children().filter(roxmltree::Node::is_element).collect()
}

/// What a JUnit document says of one test case: its suite, its name, and its failure's message
/// and type and text, or its skip's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Case {
    Passed,
    Skipped(String),
    Failed { message: String, kind: String, text: String },
}

/// Test cases by suite and name.
pub(crate) type Cases = BTreeMap<(String, String), Case>;

/// Each suite's properties, by suite.
pub(crate) type Properties = BTreeMap<String, Vec<(String, String)>>;

/// The test cases of the JUnit document `xml`, by suite and name, and each suite's properties;
/// an error saying what breaks the schema: the elements, their nesting and their required
/// attributes, every count and time a number, the counts equal to the cases they count.
pub(crate) fn read(xml: &str) -> Result<(Cases, Properties), String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("not XML: {e}"))?;
    let root = doc.root_element();
    if root.tag_name().name() != "testsuites" {
        return Err(format!("the root is <{}>, not <testsuites>", root.tag_name().name()));
    }
    let number = |node: roxmltree::Node, name: &str| -> Result<f64, String> {
        let value = node.attribute(name).ok_or_else(|| format!("<{}> has no {name}", node.tag_name().name()))?;
        value.parse::<f64>().map_err(|_| format!("<{}> {name}=\"{value}\" is not a number", node.tag_name().name()))
    };
    let (mut cases, mut properties) = (BTreeMap::new(), BTreeMap::new());
    let mut totals = [0.0; 3];
    for suite in elements(root) {
        if suite.tag_name().name() != "testsuite" {
            return Err(format!("<testsuites> holds <{}>", suite.tag_name().name()));
        }
        let name = suite.attribute("name").ok_or("a <testsuite> has no name")?.to_owned();
        let (tests, failures, errors, skipped) =
            (number(suite, "tests")?, number(suite, "failures")?, number(suite, "errors")?, number(suite, "skipped")?);
        number(suite, "time")?;
        let mut counted = [0.0; 3];
        for child in elements(suite) {
            match child.tag_name().name() {
                "properties" => {
                    let mut props = Vec::new();
                    for p in elements(child) {
                        let (Some(key), Some(value)) = (p.attribute("name"), p.attribute("value")) else {
                            return Err("a <property> without a name and a value".to_owned());
                        };
                        props.push((key.to_owned(), value.to_owned()));
                    }
                    properties.insert(name.clone(), props);
                }
                "testcase" => {
                    let case_name = child.attribute("name").ok_or("a <testcase> has no name")?.to_owned();
                    child.attribute("classname").ok_or("a <testcase> has no classname")?;
                    number(child, "time")?;
                    counted[0] += 1.0;
                    let inner = elements(child);
                    let case = match inner.as_slice() {
                        [] => Case::Passed,
                        [s] if s.tag_name().name() == "skipped" => {
                            counted[2] += 1.0;
                            Case::Skipped(s.attribute("message").unwrap_or_default().to_owned())
                        }
                        [f] if f.tag_name().name() == "failure" => {
                            counted[1] += 1.0;
                            Case::Failed {
                                message: f.attribute("message").ok_or("a <failure> has no message")?.to_owned(),
                                kind: f.attribute("type").ok_or("a <failure> has no type")?.to_owned(),
                                text: f.text().unwrap_or_default().to_owned(),
                            }
                        }
                        other => return Err(format!("<testcase {case_name}> holds {} elements", other.len())),
                    };
                    cases.insert((name.clone(), case_name), case);
                }
                "system-out" | "system-err" => {}
                other => return Err(format!("<testsuite> holds <{other}>")),
            }
        }
        if [tests, failures, skipped] != counted || errors != 0.0 {
            return Err(format!("{name}: counts {tests}/{failures}/{skipped}/{errors}, cases {counted:?}"));
        }
        for (total, n) in totals.iter_mut().zip(counted) {
            *total += n;
        }
    }
    if [number(root, "tests")?, number(root, "failures")?] != totals[..2] || number(root, "errors")? != 0.0 {
        return Err(format!("<testsuites> counts do not add up to its suites' {totals:?}"));
    }
    // junit-10.xsd gives the root no count of skipped cases: a reader that validates refuses one.
    if root.has_attribute("skipped") {
        return Err("<testsuites> has a skipped count".to_owned());
    }
    Ok((cases, properties))
}

/// `report`, a run against `store`, as a JUnit document read back: every check a case, each
/// failure's message its headline and its text the whole report, each skip its reason.
pub(crate) fn round_trip(store: &str, report: &Report) {
    let suite = JunitSuite {
        name: store.to_owned(),
        report: report.clone(),
        properties: vec![
            ("seed".to_owned(), "7".to_owned()),
            ("replay".to_owned(), "reservation conform x <&>\"".to_owned()),
        ],
    };
    let xml = junit_xml("reservation conform", &[suite]);
    let (cases, properties) = read(&xml).unwrap_or_else(|why| panic!("{why}\n{xml}"));
    validates(&xml);
    assert_eq!(cases.len(), report.checks.len(), "{xml}");
    for (check, result, _) in &report.checks {
        let case = &cases[&(store.to_owned(), (*check).to_owned())];
        let expected = match result {
            CheckResult::Passed => Case::Passed,
            CheckResult::Skipped(why) => Case::Skipped((*why).to_owned()),
            CheckResult::Failed(f) => {
                let said = f.to_string();
                let kind = f.rule.map_or_else(|| "failure".to_owned(), |r| r.to_string());
                Case::Failed { message: said.lines().next().unwrap_or_default().to_owned(), kind, text: said }
            }
        };
        assert_eq!(*case, expected, "{check}");
    }
    let replay = ("replay".to_owned(), "reservation conform x <&>\"".to_owned());
    assert!(properties[store].contains(&replay), "{properties:?}");
}

#[test]
fn a_document_that_breaks_the_schema_is_refused() {
    let refused = [
        ("<testsuite/>", "the root is <testsuite>"),
        (
            "<testsuites tests=\"1\" failures=\"0\" skipped=\"0\"><testsuite name=\"a\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\" time=\"0\"/></testsuites>",
            "counts 1/0/0/0",
        ),
        ("<testsuites><testsuite tests=\"0\"/></testsuites>", "has no name"),
        ("<testsuites tests=\"0\" failures=\"0\" errors=\"0\" skipped=\"0\"></testsuites>", "has a skipped count"),
        (
            "<testsuites><testsuite name=\"a\" tests=\"x\" failures=\"0\" errors=\"0\" skipped=\"0\" time=\"0\"/></testsuites>",
            "is not a number",
        ),
        (
            "<testsuites><testsuite name=\"a\" tests=\"1\" failures=\"1\" errors=\"0\" skipped=\"0\" time=\"0\"><testcase name=\"c\" classname=\"a\" time=\"0\"><failure type=\"x\"/></testcase></testsuite></testsuites>",
            "no message",
        ),
        ("<testsuites><case/></testsuites>", "holds <case>"),
        ("<testsuites", "not XML"),
    ];
    for (xml, why) in refused {
        let said = read(xml).expect_err(xml);
        assert!(said.contains(why), "{xml}: {said}");
    }
}

#[test]
fn characters_xml_cannot_hold_still_give_a_document_that_parses() {
    let report = Report { checks: Vec::new(), notes: vec!["a store said \u{0}\u{7}<b>&\"".to_owned()] };
    let suite = JunitSuite {
        name: "odd \u{1b} <name>".to_owned(),
        report,
        properties: vec![("k\n".to_owned(), "v\t\u{0}".to_owned())],
    };
    let xml = junit_xml("reservation conform", &[suite]);
    let (cases, properties) = read(&xml).unwrap_or_else(|why| panic!("{why}\n{xml}"));
    validates(&xml);
    assert!(cases.is_empty());
    assert_eq!(properties["odd \\u{1b} <name>"], [("k\n".to_owned(), "v\t\\u{0}".to_owned())]);
    assert!(xml.contains("note: a store said \\u{0}\\u{7}&lt;b&gt;&amp;\""), "{xml}");
}

/// A passing run (MemoryStore's first three reserve checks) as JUnit XML: every check a passing
/// case, read back whole, and valid by the schema.
#[test]
fn a_passing_run_as_junit_xml_holds_every_check_and_validates() {
    let wanted = |name: &str| ["r1_", "r2_", "r3_"].iter().any(|p| name.starts_with(p));
    let report = run_matching(&MemoryHarness, &Settings::default(), wanted);
    assert!(report.is_ok() && report.checks.len() == 3, "{report}");
    round_trip("MemoryStore", &report);
}

/// The neutral writer, as the model's commands use it: a suite's time given apart from its
/// cases' (one search decided them all), a failure, a skip and a pass, and the run's printed
/// report as the suite's standard output; the counts add up, and the document validates.
#[test]
fn suites_of_neutral_cases_are_written_whole_and_validate() {
    let case = |name: &str, outcome: CaseOutcome| TestCase {
        name: name.to_owned(),
        classname: "reservation check".to_owned(),
        time: Duration::ZERO,
        outcome,
    };
    let failed = CaseOutcome::Failed {
        message: "counterexample to \"p\" (2 steps)".to_owned(),
        kind: "counterexample".to_owned(),
        text: "counterexample to \"p\" (2 steps):\n  1. a <b> & c\n".to_owned(),
    };
    let skipped = CaseOutcome::Skipped { reason: "not decided".to_owned() };
    let suite = TestSuite {
        name: "owners=2".to_owned(),
        properties: vec![("replay".to_owned(), "reservation check --owners 2".to_owned())],
        cases: vec![case("p", failed.clone()), case("q", skipped), case("r", CaseOutcome::Passed)],
        time: Some(Duration::from_millis(1_500)),
        system_out: "properties:\n  always p: FAILS\n".to_owned(),
    };
    let xml = document("reservation check", &[suite, TestSuite { name: "empty".to_owned(), ..TestSuite::default() }]);
    let (cases, properties) = read(&xml).unwrap_or_else(|why| panic!("{why}\n{xml}"));
    validates(&xml);
    let key = |name: &str| ("owners=2".to_owned(), name.to_owned());
    let CaseOutcome::Failed { message, kind, text } = failed else { unreachable!() };
    assert_eq!(cases[&key("p")], Case::Failed { message, kind, text });
    assert_eq!(cases[&key("q")], Case::Skipped("not decided".to_owned()));
    assert_eq!(cases[&key("r")], Case::Passed);
    assert_eq!(properties["owners=2"], [("replay".to_owned(), "reservation check --owners 2".to_owned())]);
    let doc = roxmltree::Document::parse(&xml).expect("XML");
    let suites: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testsuite")).collect();
    assert_eq!(suites[0].attribute("time"), Some("1.500"), "{xml}");
    assert_eq!(doc.root_element().attribute("time"), Some("1.500"), "{xml}");
    let out = suites[0].children().find(|n| n.has_tag_name("system-out")).and_then(|n| n.text());
    assert_eq!(out, Some("properties:\n  always p: FAILS\n"), "{xml}");
    // A suite with no cases, properties or output: its counts and time are 0, and it has neither
    // `<properties>` nor `<system-out>`.
    assert_eq!(elements(suites[1]).len(), 0, "{xml}");
    assert_eq!(suites[1].attribute("time"), Some("0.000"), "{xml}");
}

/// The schema refuses what CI systems' readers refuse: a case without a name, a failure without
/// a message, a count that is not a number, a suite without its counts, a skipped count on the
/// root, a verdict outside a case. The same document with the name it lacked validates, so the
/// refusals are the schema's, not xmllint's failing to run.
#[test]
fn the_schema_refuses_a_document_ci_systems_would_not_read() {
    let suite = |cases: &str| {
        format!(
            "<?xml version=\"1.0\"?>\n<testsuites name=\"x\" tests=\"1\" failures=\"0\" errors=\"0\" time=\"0.001\">\
             <testsuite name=\"s\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\" time=\"0.001\">{cases}</testsuite></testsuites>\n"
        )
    };
    let good = suite("<testcase name=\"c\" classname=\"s\" time=\"0.001\"/>");
    let Some(accepted) = xmllint(&good) else { return };
    assert!(accepted.is_ok(), "{accepted:?}\n{good}");
    let refused = [
        (suite("<testcase classname=\"s\" time=\"0.001\"/>"), "The attribute 'name' is required but missing"),
        (suite("<testcase name=\"\" classname=\"s\" time=\"0.001\"/>"), "'name'"),
        (
            suite("<testcase name=\"c\" classname=\"s\" time=\"0.001\"><failure type=\"t\">x</failure></testcase>"),
            "The attribute 'message' is required but missing",
        ),
        (suite("<testcase name=\"c\" classname=\"s\" time=\"soon\"/>"), "'time'"),
        (
            "<testsuites><testsuite name=\"s\" tests=\"1\" time=\"0\"/></testsuites>".to_owned(),
            "The attribute 'failures' is required but missing",
        ),
        (
            good.replacen("time=\"0.001\">", "skipped=\"0\" time=\"0.001\">", 1),
            "attribute 'skipped': The attribute 'skipped' is not allowed",
        ),
        (suite("<failure message=\"m\" type=\"t\"/>"), "Element 'failure': This element is not expected"),
    ];
    for (xml, why) in refused {
        match xmllint(&xml) {
            Some(Err(said)) => assert!(said.contains(why), "expected {why:?}:\n{said}\n{xml}"),
            other => panic!("the schema accepted:\n{xml}\n{other:?}"),
        }
    }
}
