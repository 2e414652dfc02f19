//! `check --junit` and `swarm --junit` through the built `reservation`: a test case per property
//! of the model, read back as a CI system reads it, exiting as the run does without the flag; and
//! every report the program writes (`conform`'s too) valid by the project's JUnit schema
//! (`conformance/tests/junit.xsd`, after Jenkins' `junit-10.xsd`) where xmllint is installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use reservation_model::ALWAYS;

use crate::{reservation, text};

/// The schema of the JUnit XML the program writes.
const SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../conformance/tests/junit.xsd");

/// Fails unless the JUnit report at `path` validates against [`SCHEMA`] by `xmllint --noout
/// --schema`. Without xmllint (Debian's `libxml2-utils`) the validation is skipped, after one line
/// that says so, unless `RESERVATION_REQUIRE_SERVICES=1`, which fails the test instead.
pub(crate) fn validates(path: &Path) {
    let installed = Command::new("xmllint").arg("--version").output().map(|_| ());
    if reservation_conformance::services::service("xmllint (the JUnit schema's validator)", installed).is_none() {
        return;
    }
    let o = Command::new("xmllint").args(["--noout", "--schema", SCHEMA]).arg(path).output().expect("xmllint runs");
    let report = std::fs::read_to_string(path).unwrap_or_default();
    assert!(o.status.success(), "{} breaks the JUnit schema:\n{}\n{report}", path.display(), text(&o));
}

/// A directory of its own for one test's reports, removed when it ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("reservation-junit-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        Scratch(dir)
    }

    /// The file `name` in it, as an argument.
    fn file(&self, name: &str) -> String {
        self.0.join(name).to_str().expect("a path").to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One test case of a report: its name and class name, and its failure's message and text or its
/// skip's message.
#[derive(Debug)]
struct Case {
    name: String,
    classname: String,
    failure: Option<(String, String)>,
    skipped: Option<String>,
}

/// A report of the model's, read back: the document's name, its one suite's name, properties,
/// cases and standard output.
#[derive(Debug)]
struct Report {
    name: String,
    suite: String,
    properties: Vec<(String, String)>,
    cases: Vec<Case>,
    system_out: String,
}

impl Report {
    /// The property `key`'s value.
    fn property(&self, key: &str) -> &str {
        let found = self.properties.iter().find(|(k, _)| k == key);
        found.map(|(_, v)| v.as_str()).unwrap_or_else(|| panic!("no property {key}: {self:?}"))
    }

    /// The names of the cases, in order.
    fn names(&self) -> Vec<&str> {
        self.cases.iter().map(|c| c.name.as_str()).collect()
    }
}

/// The attribute `name` of `node`.
fn attribute<'a>(node: roxmltree::Node<'a, '_>, name: &str) -> &'a str {
    node.attribute(name).unwrap_or_else(|| panic!("<{}> has no {name}", node.tag_name().name()))
}

/// The first child `tag` of `node`.
fn child<'a, 'input>(node: roxmltree::Node<'a, 'input>, tag: &str) -> Option<roxmltree::Node<'a, 'input>> {
    node.children().find(|c| c.has_tag_name(tag))
}

/// The report at `path`, which holds one suite.
fn read(path: &str) -> Report {
    let xml = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("not XML: {e}\n{xml}"));
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites", "{xml}");
    let suites: Vec<_> = root.children().filter(|n| n.has_tag_name("testsuite")).collect();
    assert_eq!(suites.len(), 1, "{xml}");
    let suite = suites[0];
    let cases: Vec<Case> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .map(|case| Case {
            name: attribute(case, "name").to_owned(),
            classname: attribute(case, "classname").to_owned(),
            failure: child(case, "failure")
                .map(|f| (attribute(f, "message").to_owned(), f.text().unwrap_or_default().to_owned())),
            skipped: child(case, "skipped").map(|s| attribute(s, "message").to_owned()),
        })
        .collect();
    let count = |name: &str| attribute(suite, name).parse::<usize>().expect("a count");
    let failed = cases.iter().filter(|c| c.failure.is_some()).count();
    let skipped = cases.iter().filter(|c| c.skipped.is_some()).count();
    assert_eq!((count("tests"), count("failures"), count("skipped")), (cases.len(), failed, skipped), "{xml}");
    Report {
        name: attribute(root, "name").to_owned(),
        suite: attribute(suite, "name").to_owned(),
        properties: suite
            .descendants()
            .filter(|n| n.has_tag_name("property"))
            .map(|p| (attribute(p, "name").to_owned(), attribute(p, "value").to_owned()))
            .collect(),
        cases,
        system_out: child(suite, "system-out").and_then(|n| n.text()).unwrap_or_default().to_owned(),
    }
}

/// Runs the replay command `line` (a `reservation` command line, its words plain).
fn rerun(line: &str, more: &[&str]) -> std::process::Output {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words.first(), Some(&"reservation"), "{line}");
    reservation(&[&words[1..], more].concat())
}

/// A check where every property holds: a passing case per property, named by its sentence, in
/// the order `check` prints them; the configuration and the search as properties, with a replay
/// command that reruns the same check; the report `check` printed as the standard output; exit 0,
/// as without `--junit`.
#[test]
fn check_junit_writes_a_passing_case_per_property() {
    let dir = Scratch::new("check-holds");
    let args = ["check", "--owners", "2", "--quiet"];
    let without = reservation(&args);
    let o = reservation(&[&args[..], &["--junit", &dir.file("check.xml")]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(o.status.code(), without.status.code(), "{}", text(&without));
    let report = read(&dir.file("check.xml"));
    assert_eq!(report.name, "reservation check");
    assert!(report.suite.starts_with("owners=2 attempts=2 keys=2 "), "{report:?}");
    assert_eq!(report.names(), ALWAYS, "{report:?}");
    for case in &report.cases {
        assert_eq!(case.classname, "reservation check", "{case:?}");
        assert!(case.failure.is_none() && case.skipped.is_none(), "{case:?}");
    }
    assert_eq!((report.property("owners"), report.property("complete")), ("2", "yes"), "{report:?}");
    assert_eq!(report.property("dropped_assumptions"), "none", "{report:?}");
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(report.system_out.contains("complete: yes\nproperties:\n") && out.contains("complete: yes"), "{report:?}");
    let replay = report.property("replay");
    assert!(replay.starts_with("reservation check --owners 2 "), "{replay}");
    let again = rerun(replay, &["--quiet"]);
    assert_eq!(again.status.code(), Some(0), "{}", text(&again));
    let states = format!("unique states: {}\n", report.property("unique_states"));
    assert!(String::from_utf8_lossy(&again.stdout).contains(&states), "{states}{}", text(&again));
    validates(&dir.0.join("check.xml"));
}

/// A dropped assumption makes a property fail: its case holds a failure whose message names the
/// property (the counterexample's headline) and whose text is the counterexample as `check`
/// printed it; the search stopped at it, so every other property is skipped, not decided; exit 1,
/// as without `--junit`.
#[test]
fn check_junit_fails_the_property_a_dropped_assumption_breaks() {
    let dir = Scratch::new("check-fails");
    let args = ["check", "--owners", "2", "--drop-assumption", "H8", "--quiet"];
    let without = reservation(&args);
    let o = reservation(&[&args[..], &["--junit", &dir.file("check.xml")]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(o.status.code(), without.status.code(), "{}", text(&without));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let report = read(&dir.file("check.xml"));
    assert_eq!(report.names(), ALWAYS, "{report:?}");
    assert_eq!(report.property("dropped_assumptions"), "H8", "{report:?}");
    assert!(report.property("replay").contains(" --drop-assumption H8 "), "{report:?}");
    let failed: Vec<&Case> = report.cases.iter().filter(|c| c.failure.is_some()).collect();
    assert!(!failed.is_empty(), "no failure: {report:?}");
    for case in &report.cases {
        match &case.failure {
            Some((message, counterexample)) => {
                assert!(message.starts_with(&format!("counterexample to \"{}\" (", case.name)), "{case:?}");
                assert!(out.contains(&format!("always {}: FAILS", case.name)), "{out}");
                assert!(counterexample.starts_with(&format!("{message}:\n  1. ")), "{case:?}");
                assert!(out.contains(counterexample.as_str()), "not as printed: {counterexample}\n{out}");
            }
            None => {
                let skipped = case.skipped.as_deref().unwrap_or_default();
                assert_eq!(skipped, "not decided: the search stopped at the first counterexample", "{case:?}");
            }
        }
    }
    validates(&dir.0.join("check.xml"));
}

/// A check its timeout stops (a simulation, which is never exhaustive) decides no property: every
/// case skipped, saying so; the simulation's seed and timeout among the properties and in the
/// replay command; exit 2, as without `--junit`. A report that cannot be written fails the run,
/// saying so.
#[test]
fn check_junit_skips_what_an_unfinished_check_did_not_decide() {
    let dir = Scratch::new("check-unfinished");
    let args = ["check", "--strategy", "simulate", "--seed", "3", "--timeout", "0.2", "--quiet"];
    let o = reservation(&[&args[..], &["--junit", &dir.file("check.xml")]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let report = read(&dir.file("check.xml"));
    assert_eq!(report.names(), ALWAYS, "{report:?}");
    for case in &report.cases {
        let skipped = case.skipped.as_deref().unwrap_or_default();
        assert!(case.failure.is_none() && skipped.starts_with("not decided: the run did not complete"), "{case:?}");
    }
    assert_eq!((report.property("seed"), report.property("complete")), ("3", "no"), "{report:?}");
    let replay = report.property("replay");
    assert!(replay.contains(" --strategy simulate ") && replay.ends_with(" --seed 3 --timeout 0.2"), "{replay}");
    validates(&dir.0.join("check.xml"));
    let nowhere = dir.0.join("no-such-directory").join("check.xml");
    let o = reservation(&["check", "--owners", "2", "--quiet", "--junit", nowhere.to_str().expect("a path")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("error: cannot write the JUnit report to "), "{}", text(&o));
}

/// `swarm --junit`: a walk that breaks a property fails its case, the walk's seed and the
/// property in the failure's message, the command that replays that walk (and does) in its text;
/// with `--stop-at-failure` the other properties are skipped; exit 1, as without `--junit`. A
/// swarm where no walk fails passes every case, exit 0. A report that cannot be written fails the
/// run.
#[test]
fn swarm_junit_fails_the_property_a_walk_breaks() {
    let dir = Scratch::new("swarm");
    let args = ["swarm", "--drop-assumption", "H5", "--seeds", "0..20000", "--stop-at-failure", "--quiet"];
    let o = reservation(&[&args[..], &["--junit", &dir.file("failing.xml")]].concat());
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let report = read(&dir.file("failing.xml"));
    assert_eq!(report.name, "reservation swarm");
    assert_eq!(report.names(), ALWAYS, "{report:?}");
    let (case, message, walk) = report
        .cases
        .iter()
        .find_map(|c| c.failure.as_ref().map(|(m, t)| (c, m, t)))
        .unwrap_or_else(|| panic!("no failure: {report:?}"));
    assert!(message.starts_with("seed ") && message.ends_with(&format!(" breaks \"{}\"", case.name)), "{case:?}");
    assert!(report.cases.iter().all(|c| c.failure.is_some() || c.skipped.is_some()), "{report:?}");
    let replay = walk.lines().nth(1).unwrap_or_default().trim();
    let seed = message.split_whitespace().nth(1).unwrap_or_default();
    assert!(replay.ends_with(&format!(" --seeds {seed}..{}", seed.parse::<u64>().expect("a seed") + 1)), "{walk}");
    let again = rerun(replay, &["--quiet"]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(text(&again).contains(&format!("seed {seed}: {}", case.name)), "{}", text(&again));
    assert!(report.property("replay").ends_with(" --seeds 0..20000 --stop-at-failure"), "{report:?}");
    validates(&dir.0.join("failing.xml"));

    let o = reservation(&["swarm", "--seeds", "0..20", "--quiet", "--junit", &dir.file("passing.xml")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let report = read(&dir.file("passing.xml"));
    assert_eq!(report.names(), ALWAYS, "{report:?}");
    assert!(report.cases.iter().all(|c| c.failure.is_none() && c.skipped.is_none()), "{report:?}");
    assert_eq!((report.property("seeds"), report.property("walks")), ("0..20", "20"), "{report:?}");
    validates(&dir.0.join("passing.xml"));

    let nowhere = dir.0.join("no-such-directory").join("swarm.xml");
    let o = reservation(&["swarm", "--seeds", "0..2", "--quiet", "--junit", nowhere.to_str().expect("a path")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("error: cannot write the JUnit report to "), "{}", text(&o));
}
