//! JUnit XML (`reservation_conformance::junit`): a run's document parses, and holds what CI
//! systems read, in the shape Jenkins' JUnit schema (`junit-10.xsd`) gives it.

use std::collections::BTreeMap;

use reservation_conformance::junit::{JunitSuite, junit_xml};
use reservation_conformance::{CheckResult, Report};

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
    if [number(root, "tests")?, number(root, "failures")?, number(root, "skipped")?] != totals {
        return Err(format!("<testsuites> counts do not add up to its suites' {totals:?}"));
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
    assert!(cases.is_empty());
    assert_eq!(properties["odd \\u{1b} <name>"], [("k\n".to_owned(), "v\t\\u{0}".to_owned())]);
    assert!(xml.contains("note: a store said \\u{0}\\u{7}&lt;b&gt;&amp;\""), "{xml}");
}
