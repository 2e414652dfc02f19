//! The two tiers (`reservation_conformance::tiers`): the long tier's command finds every
//! long-tier test, and the fast tier says which tests it left to it.

use std::path::{Path, PathBuf};
use std::process::Command;

use reservation_conformance::tiers::{LONG_TIER, LONG_TIER_COMMAND};

/// The workspace's integration-test files: `tests/it/*.rs` of every crate.
fn test_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut crates = vec![root.clone()];
    for group in ["stores", "examples"] {
        let dirs = std::fs::read_dir(root.join(group)).expect("a crate folder");
        crates.extend(dirs.flatten().map(|e| e.path()));
    }
    for name in ["cli", "conformance", "model"] {
        crates.push(root.join(name));
    }
    let mut files = Vec::new();
    for krate in crates {
        let Ok(entries) = std::fs::read_dir(krate.join("tests").join("it")) else { continue };
        files.extend(entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "rs")));
    }
    files.sort();
    files
}

/// Each test of `source` with the name its gate gives (`None` for a test with no gate) and
/// whether it sits in a module named `long`: the modules are followed by their braces.
fn tests(source: &str) -> Vec<(String, Option<String>, bool)> {
    let mut found = Vec::new();
    // The modules open around each line, and the depth of braces at which each opened.
    let mut modules: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut test_next = false;
    let mut current: Option<usize> = None;
    let mut gate_at: Option<&str> = None;
    // Inside a `long_fault_checks!` (the Redis tests' table of long-tier fault checks): the
    // module its first line names, then one test per `name:` line, gated by the macro as
    // `{module}::long::{name}`.
    let mut table: Option<Option<String>> = None;
    for line in source.lines() {
        let trimmed = line.trim_start();
        if trimmed.ends_with("long_fault_checks! {") {
            table = Some(None);
        } else if let Some(module) = &mut table {
            match (module.as_ref(), trimmed.strip_suffix(':').or_else(|| trimmed.split_once(": ").map(|(n, _)| n))) {
                _ if trimmed == "}" => table = None,
                (None, _) => *module = trimmed.strip_prefix('"').and_then(|m| m.strip_suffix("\";")).map(str::to_owned),
                (Some(module), Some(name)) if name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') => {
                    let long = modules.iter().any(|(m, _)| m == "long");
                    found.push((name.to_owned(), Some(format!("{module}::long::{name}")), long));
                }
                _ => {}
            }
        }
        if let Some(name) = trimmed.strip_prefix("mod ").and_then(|rest| rest.strip_suffix(" {")) {
            modules.push((name.to_owned(), depth));
        }
        if trimmed == "#[test]" {
            test_next = true;
        } else if test_next && let Some(rest) = trimmed.strip_prefix("fn ") {
            let name = rest.split('(').next().unwrap_or_default().to_owned();
            let long = modules.iter().any(|(m, _)| m == "long");
            found.push((name, None, long));
            current = Some(found.len() - 1);
            test_next = false;
        }
        // The gate's argument, on its line or the next (as rustfmt breaks a long one).
        if current.is_some()
            && let Some(at) = trimmed.find("long_tier(")
        {
            gate_at = Some(&trimmed[at + "long_tier(".len()..]);
        } else if gate_at.is_some() {
            gate_at = Some(trimmed);
        }
        if let (Some(i), Some(rest)) = (current, gate_at)
            && let Some(named) = rest.strip_prefix('"').and_then(|r| r.split('"').next())
        {
            if let Some(test) = found.get_mut(i) {
                test.1 = Some(named.to_owned());
            }
            current = None;
            gate_at = None;
        }
        for c in line.chars() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    while modules.last().is_some_and(|(_, d)| *d >= depth) {
                        modules.pop();
                    }
                }
                _ => {}
            }
        }
    }
    found
}

#[test]
fn every_long_tier_test_sits_in_a_long_module_and_its_gate_names_it() {
    let mut long = 0;
    // This file's own examples are strings, not tests.
    for file in test_files().into_iter().filter(|f| !f.ends_with("conformance/tests/it/tiers.rs")) {
        let source = std::fs::read_to_string(&file).expect("a test file");
        for (name, gate, in_long) in tests(&source) {
            let shown = file.display();
            match (gate, in_long) {
                (Some(gate), true) => {
                    let path = gate.starts_with(&format!("{}::", file_stem(&file)))
                        && gate.contains("::long::")
                        && gate.ends_with(&format!("::{name}"));
                    assert!(path, "{shown}: the gate of {name} says {gate:?}, not the test's path");
                    long += 1;
                }
                (None, true) => panic!("{shown}: {name} is in a long module without a gate: the fast tier runs it"),
                (Some(_), false) => {
                    panic!("{shown}: {name} has a gate outside a long module: `{LONG_TIER_COMMAND}` misses it")
                }
                (None, false) => {}
            }
        }
    }
    assert!(long >= 20, "only {long} long-tier tests found");
}

fn file_stem(file: &Path) -> String {
    file.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned()
}

#[test]
fn the_scan_sees_a_gate_outside_a_long_module_and_a_long_test_without_one() {
    let outside = "#[test]\nfn a() {\n    if !long_tier(\"x::long::a\") {\n        return;\n    }\n}\n";
    assert_eq!(tests(outside), [("a".to_owned(), Some("x::long::a".to_owned()), false)]);
    let inside =
        "mod long {\n    use super::*;\n\n    #[test]\n    fn b() {\n        work();\n    }\n}\n#[test]\nfn c() {}\n";
    assert_eq!(tests(inside), [("b".to_owned(), None, true), ("c".to_owned(), None, false)]);
    // A table of fault checks: each name a test, gated by the macro under the module it names.
    let table = "mod long {\n    crate::orchestrated::long_fault_checks! {\n        \"x\";\n        d:\n            h() => c(Fault::A, \"l\");\n        e: h() => c(Fault::B, \"m: n\");\n    }\n\n    #[test]\n    fn f() {}\n}\n";
    let gated = |n: &str, long| (n.to_owned(), Some(format!("x::long::{n}")), long);
    assert_eq!(tests(table), [gated("d", true), gated("e", true), ("f".to_owned(), None, true)]);
    assert_eq!(
        tests(&table.replace("mod long", "mod short")),
        [gated("d", false), gated("e", false), ("f".to_owned(), None, false)]
    );
}

#[test]
fn the_fast_tier_names_each_test_it_leaves_to_the_long_one() {
    let test = "broken_stores::long::catch_rate_at_the_defaults";
    let out = Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env_remove(LONG_TIER)
        .output()
        .expect("the test binary runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains(&format!("left to the long tier: {test} (run it with `{LONG_TIER_COMMAND}`)")), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("caught in"), "the measurement ran in the fast tier");
}
