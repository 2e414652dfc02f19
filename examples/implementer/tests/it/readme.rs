//! The README quotes the two snippets and the dev-dependency lines exactly: a change to either
//! side without the other fails here.

fn readme() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README.md")
}

/// The lines of `file` between its `// README snippet: NAME` and `// end of snippet` markers.
fn snippet(file: &str) -> String {
    let lines: Vec<&str> = file.lines().collect();
    let start = lines.iter().position(|l| l.starts_with("// README snippet:")).expect("a start marker") + 1;
    let end = lines.iter().position(|l| *l == "// end of snippet").expect("an end marker");
    lines[start..end].join("\n")
}

#[test]
fn the_readme_quotes_both_snippets_exactly() {
    let readme = readme();
    for (name, file) in [("sync", include_str!("sync_store.rs")), ("async", include_str!("async_store.rs"))] {
        let code = snippet(file);
        assert!(
            readme.contains(&format!("```rust\n{code}\n```")),
            "README.md does not quote the {name} snippet:\n{code}"
        );
    }
}

#[test]
fn the_readme_shows_the_dev_dependency_lines() {
    let readme = readme();
    for line in ["reservation-conformance = \"0.1\"", "reservation-store = \"0.1\"", "features = [\"rt-multi-thread\"]"]
    {
        assert!(readme.contains(line), "README.md lacks {line}");
    }
}
