//! The test vectors: in sync with the checks, covering every transition rule and every error
//! name, replayed against `MemoryStore`, and catching planted bugs both here and in the Python
//! store's own test framework.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use reservation_conformance::MemoryHarness;
use reservation_conformance::services::service;
use reservation_conformance::vectors::{self, FILES};
use reservation_store::rules::Rule;
use serde_json::Value;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../vectors")
}

/// The committed vector files, parsed.
fn committed() -> Vec<(&'static str, Value)> {
    FILES
        .iter()
        .map(|(name, _)| {
            let path = dir().join(format!("{name}.json"));
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            (*name, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        })
        .collect()
}

fn steps(file: &Value) -> impl Iterator<Item = &Value> {
    file["cases"].as_array().into_iter().flatten().flat_map(|c| c["steps"].as_array().into_iter().flatten())
}

#[test]
fn vectors_are_in_sync_with_the_checks() {
    vectors::check(&dir()).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn vectors_check_reports_a_stale_or_missing_file() {
    let temp = std::env::temp_dir().join(format!("reservation-vectors-{}", std::process::id()));
    vectors::write(&temp).unwrap();
    vectors::check(&temp).unwrap();
    let path = temp.join("release.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let line = text.lines().position(|l| l.contains("\"Kept\"")).expect("a Kept step") + 1;
    std::fs::write(&path, text.replacen("\"Kept\"", "\"Released\"", 1)).unwrap();
    let stale = vectors::check(&temp).unwrap_err();
    assert!(stale.contains(&format!("release.json differs from line {line})")), "{stale}");
    std::fs::remove_file(temp.join("scopes.json")).unwrap();
    let missing = vectors::check(&temp).unwrap_err();
    assert!(missing.contains("scopes.json") && missing.contains("vectors --write"), "{missing}");
    std::fs::remove_dir_all(&temp).unwrap();
}

#[test]
fn committed_vectors_replay_against_memory_store() {
    for (name, file) in committed() {
        let n = vectors::replay(&MemoryHarness, &file).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(n >= 30, "{name}: only {n} steps");
    }
}

#[test]
fn vectors_cover_every_transition_rule() {
    let files = committed();
    let reached: BTreeSet<&str> = files.iter().flat_map(|(_, f)| steps(f)).filter_map(|s| s["rule"].as_str()).collect();
    for rule in Rule::TRANSITIONS {
        assert!(reached.contains(rule.id()), "no vector step is decided by {rule}");
    }
    // Each rule table's file reaches each of its own rows.
    for (name, file) in &files {
        let prefix = match *name {
            "reserve" => "R",
            "confirm" => "C",
            "release" => "L",
            "abandon" => "A",
            _ => continue,
        };
        let own: BTreeSet<&str> = steps(file).filter_map(|s| s["rule"].as_str()).collect();
        for rule in Rule::TRANSITIONS.iter().filter(|r| r.id().starts_with(prefix)) {
            assert!(own.contains(rule.id()), "{name}.json never reaches {rule}");
        }
    }
}

/// The error names of SPEC.md's table.
fn spec_error_names() -> Vec<String> {
    let spec = include_str!("../../../SPEC.md");
    let table = spec.split("### Errors").nth(1).expect("SPEC.md has a table of errors");
    let table = table.split("\n## ").next().unwrap_or(table);
    table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| l.split('|').nth(1).unwrap_or("").split(',').map(|n| n.trim().trim_matches('`').to_owned()))
        .collect()
}

#[test]
fn d6_d9_vectors_raise_every_error_name_of_the_specification() {
    let names: BTreeSet<String> = committed()
        .iter()
        .flat_map(|(_, f)| {
            steps(f).filter_map(|s| s["expect"]["error"]["name"].as_str().map(str::to_owned)).collect::<Vec<_>>()
        })
        .collect();
    let spec = spec_error_names();
    assert!(spec.len() >= 17, "{spec:?}");
    for name in spec {
        // Version 0 is UNVERSIONED on the wire (PROTOCOL.md): a driver cannot say a zero stream
        // version, which only the typed API's constructor refuses.
        if name == "ZeroStreamVersion" {
            continue;
        }
        assert!(names.contains(&name), "no vector expects the error {name}");
    }
}

/// Runs the Python store's own unittest replay of the vectors with `bug` planted; `None`
/// without python3, else whether it passed and its output.
fn python_replay(bug: &str) -> Option<(bool, String)> {
    let present = std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    service(
        "python3 (for the Python store's replay of the vectors)",
        if present { Ok(()) } else { Err("not installed") },
    )?;
    let out = std::process::Command::new("python3")
        .args(["-m", "unittest", "test_vectors.py"])
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters/python"))
        .env("RESERVATION_PY_BUG", bug)
        .env("RESERVATION_VECTORS", dir())
        .output()
        .expect("python3 runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Some((out.status.success(), text))
}

#[test]
fn python_store_replays_the_vectors_in_its_own_test_framework() {
    let Some((ok, text)) = python_replay("") else { return };
    assert!(ok, "{text}");
    assert!(text.contains("Ran 2 tests"), "{text}");
}

#[test]
fn python_replay_of_the_vectors_catches_each_sequential_bug() {
    for (bug, rule) in [
        ("expiry-boundary", "rule A1"),
        ("join-expiry", "R3"),
        ("version-order", "rule C"),
        ("release-version", "rule L5"),
        ("hold-set", "rule A3"),
        ("owner-compare", "rule R5"),
        ("scope-isolation", "rule R1"),
        ("extra-fields", "check='d11_lookup_shapes"),
        ("utf16-hold-order", "check='d11_lookup_shapes"),
    ] {
        let Some((ok, text)) = python_replay(bug) else { return };
        assert!(!ok, "{bug}: the Python replay passed");
        assert!(text.contains(rule), "{bug}: the replay's failure does not name {rule}:\n{text}");
    }
}

/// The bugs in the Python store's checks of arguments, each caught by its own replay of the
/// vectors: `arguments.json` holds every request of the sweep of invalid arguments in every
/// state, so a check made on one path only, or after the write, shows too. (Lone surrogates are
/// left out of the vectors, which are JSON read by serde_json: `surrogates-replaced` is caught
/// through the driver only.)
#[test]
fn python_replay_of_the_vectors_catches_each_argument_bug() {
    for (bug, says) in [
        ("ttl-zero-only-on-pending", "TtlZero"),
        ("check-after-write", "\"op\": \"lookup\""),
        ("skip-tenant-empty", "EmptyTenantId"),
        ("skip-type-empty", "EmptyAggregateType"),
        ("skip-aggregate-id-empty", "EmptyAggregateId"),
        ("skip-name-length", "AggregateTypeTooLong"),
        ("chars-not-bytes", "KeyTooLong"),
        ("lenient-numbers", "Unrepresentable"),
        ("confirm-any", "Unrepresentable"),
    ] {
        let Some((ok, text)) = python_replay(bug) else { return };
        assert!(!ok, "{bug}: the Python replay passed");
        assert!(text.contains(says), "{bug}: the replay's failure does not say {says}:\n{text}");
    }
}
