//! Adding a rule cannot be left half done (CONTRIBUTING.md lists the edits): every rule of SPEC.md
//! is a [`Rule`], has a named check in the conformance suite (its name starts with the rule id,
//! `r3_…`), is covered by the test vectors (`vectors/*.json`), and, when it is a row of an
//! operation's table, is reached by the model, whose coverage line counts it. The guard runs the
//! same function over SPEC.md with made-up rules added, to show that it reports what is missing.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::sync::LazyLock;

use reservation_conformance::{MemoryHarness, run_matching};
use reservation_model::ModelConfig;
use reservation_model::check::{CheckOptions, check};
use reservation_store::rules::Rule;

/// The specification, as the core compiles it in.
const SPEC_MD: &str = include_str!("../../../SPEC.md");

/// The rules that have no vector, each with the reason: a vector is one request and the answer
/// the specification expects, which neither can say.
const NO_VECTOR: [(&str, &str); 2] = [
    ("D10", "it holds an operation between its clock reading and its write, across threads"),
    ("P1", "it needs a durable store restarted between two requests"),
];

/// A rule row of SPEC.md.
#[derive(Debug)]
struct SpecRule {
    id: String,
    /// A row of an operation's table (id, state, next state, outcome): a transition that the
    /// specification's functions report and the model reaches. Otherwise a statement (id, rule).
    transition: bool,
}

/// The rule rows of `spec`: table rows whose first cell is an id, a capital letter and digits.
fn spec_rules(spec: &str) -> Vec<SpecRule> {
    spec.lines()
        .filter_map(|line| {
            let line = line.trim();
            let cells: Vec<&str> = line.strip_prefix('|')?.trim_end_matches('|').split('|').map(str::trim).collect();
            let id = *cells.first()?;
            let (letter, digits) = id.split_at_checked(1)?;
            let is_id = letter.chars().all(|c| c.is_ascii_uppercase())
                && !digits.is_empty()
                && digits.chars().all(|c| c.is_ascii_digit());
            is_id.then(|| SpecRule { id: id.to_owned(), transition: cells.len() == 4 })
        })
        .collect()
}

/// What the project has for its rules.
#[derive(Clone, Debug)]
struct Project {
    /// The ids of [`Rule::ALL`].
    rules: BTreeSet<String>,
    /// The ids of [`Rule::TRANSITIONS`].
    transitions: BTreeSet<String>,
    /// The names of the conformance suite's checks.
    checks: Vec<String>,
    /// The rule ids the vector files cover: by a case of a check named for the rule, or by a
    /// step the rule decided.
    vectors: BTreeSet<String>,
    /// The rule ids the model's check of its small configuration reached: its coverage line.
    model: BTreeSet<String>,
}

/// The project as it is, gathered once for every test of this module.
static PROJECT: LazyLock<Project> = LazyLock::new(|| Project {
    rules: Rule::ALL.iter().map(|r| r.id().to_owned()).collect(),
    transitions: Rule::TRANSITIONS.iter().map(|r| r.id().to_owned()).collect(),
    checks: check_names(),
    vectors: vector_rules(),
    model: check(ModelConfig::small(), CheckOptions { progress: None, ..CheckOptions::default() })
        .coverage
        .rules()
        .iter()
        .map(|r| r.id().to_owned())
        .collect(),
});

/// Every check of the suite, by name: the filter of a run sees each name, and lets none run.
fn check_names() -> Vec<String> {
    let names = RefCell::new(Vec::new());
    let report = run_matching(&MemoryHarness, &reservation_conformance::Settings::default(), |name| {
        names.borrow_mut().push(name.to_owned());
        false
    });
    assert!(report.checks.is_empty(), "a check ran while the names were gathered");
    names.into_inner()
}

/// The rule ids that `vectors/*.json` cover.
fn vector_rules() -> BTreeSet<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../vectors");
    let mut covered = BTreeSet::new();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
    for path in entries.map(|e| e.expect("a directory entry").path()) {
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let file: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
        for case in file["cases"].as_array().into_iter().flatten() {
            if let Some((prefix, _)) = case["check"].as_str().and_then(|c| c.split_once('_')) {
                covered.insert(prefix.to_ascii_uppercase());
            }
            for step in case["steps"].as_array().into_iter().flatten() {
                if let Some(rule) = step["rule"].as_str() {
                    covered.insert(rule.to_owned());
                }
            }
        }
    }
    covered
}

/// What a rule of `spec` lacks in `project`, one line each; nothing when every rule is whole.
fn gaps(spec: &str, project: &Project) -> Vec<String> {
    let rules = spec_rules(spec);
    let mut gaps = Vec::new();
    for rule in &rules {
        let id = rule.id.as_str();
        if !project.rules.contains(id) {
            gaps.push(format!("{id}: no variant of reservation_store::Rule (in Rule::ALL, with its id)"));
        }
        if rule.transition != project.transitions.contains(id) {
            gaps.push(format!(
                "{id}: {} SPEC.md's operation tables but {} Rule::TRANSITIONS",
                if rule.transition { "a row of" } else { "not a row of" },
                if rule.transition { "not in" } else { "in" }
            ));
        }
        let prefix = format!("{}_", id.to_ascii_lowercase());
        if !project.checks.iter().any(|c| c.starts_with(&prefix)) {
            gaps.push(format!("{id}: no named check `{prefix}…` in the conformance suite (`__for_each_check!`)"));
        }
        let exempt = NO_VECTOR.iter().any(|(no, _)| *no == id);
        match (project.vectors.contains(id), exempt) {
            (false, false) => gaps.push(format!("{id}: no vector (`reservation vectors --write vectors`)")),
            (true, true) => gaps.push(format!("{id}: has a vector now: take it off this test's NO_VECTOR")),
            _ => {}
        }
        if rule.transition && !project.model.contains(id) {
            gaps.push(format!("{id}: the model does not reach it (its coverage line lists it as unreached)"));
        }
    }
    let ids: BTreeSet<&str> = rules.iter().map(|r| r.id.as_str()).collect();
    for id in project.rules.iter().filter(|id| !ids.contains(id.as_str())) {
        gaps.push(format!("{id}: in Rule::ALL but not a rule of SPEC.md"));
    }
    for (id, _) in NO_VECTOR.iter().filter(|(id, _)| !ids.contains(id)) {
        gaps.push(format!("{id}: in this test's NO_VECTOR but not a rule of SPEC.md"));
    }
    gaps
}

#[test]
fn every_rule_of_spec_md_has_its_variant_check_vector_and_model_coverage() {
    let rules = spec_rules(SPEC_MD);
    assert_eq!(rules.len(), Rule::ALL.len(), "{rules:?}");
    assert_eq!(rules.iter().filter(|r| r.transition).count(), Rule::TRANSITIONS.len(), "{rules:?}");
    let missing = gaps(SPEC_MD, &PROJECT);
    assert!(missing.is_empty(), "rules left half done (CONTRIBUTING.md lists the edits):\n{}", missing.join("\n"));
}

/// The guard fails: a made-up transition row and a made-up statement are each reported for
/// everything they lack, and a rule that loses its check, its vector or its coverage is too.
#[test]
fn the_guard_reports_what_a_made_up_rule_lacks() {
    let spec = format!("{SPEC_MD}\n| R8 | `F` | `F` | Taken |\n| D12 | A made-up statement. |\n");
    let mut made_up = gaps(&spec, &PROJECT);
    made_up.sort();
    assert_eq!(
        made_up,
        [
            "D12: no named check `d12_…` in the conformance suite (`__for_each_check!`)",
            "D12: no variant of reservation_store::Rule (in Rule::ALL, with its id)",
            "D12: no vector (`reservation vectors --write vectors`)",
            "R8: a row of SPEC.md's operation tables but not in Rule::TRANSITIONS",
            "R8: no named check `r8_…` in the conformance suite (`__for_each_check!`)",
            "R8: no variant of reservation_store::Rule (in Rule::ALL, with its id)",
            "R8: no vector (`reservation vectors --write vectors`)",
            "R8: the model does not reach it (its coverage line lists it as unreached)",
        ]
    );
    let mut project = PROJECT.clone();
    project.checks.retain(|c| !c.starts_with("r3_"));
    project.vectors.remove("C2");
    project.vectors.insert("P1".to_owned());
    project.model.remove("A4");
    project.rules.insert("Z1".to_owned());
    assert_eq!(
        gaps(SPEC_MD, &project),
        [
            "R3: no named check `r3_…` in the conformance suite (`__for_each_check!`)",
            "C2: no vector (`reservation vectors --write vectors`)",
            "A4: the model does not reach it (its coverage line lists it as unreached)",
            "P1: has a vector now: take it off this test's NO_VECTOR",
            "Z1: in Rule::ALL but not a rule of SPEC.md",
        ]
    );
}

/// A statement row is not a transition: the model's coverage is asked only of transitions.
#[test]
fn the_rows_of_spec_md_are_read_by_their_shape() {
    let rules = spec_rules(
        "| id | rule |\n|---|---|\n| D1 | a statement |\n| R1 | `F` | `P` | Taken |\n| TtlZero | x | D2 |\n",
    );
    let read: Vec<(&str, bool)> = rules.iter().map(|r| (r.id.as_str(), r.transition)).collect();
    assert_eq!(read, [("D1", false), ("R1", true)]);
}
