//! docs/implementing.md quotes the three snippets and the dev-dependency lines exactly, and the
//! README shows both forms of the dependency: a change to either side without the other fails
//! here.

/// The text of `path`, relative to the repository's root.
fn document(path: &str) -> String {
    let file = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The lines of `file` between its `// docs/implementing.md snippet: NAME` and
/// `// end of snippet` markers.
fn snippet(file: &str) -> String {
    let lines: Vec<&str> = file.lines().collect();
    let start =
        lines.iter().position(|l| l.starts_with("// docs/implementing.md snippet:")).expect("a start marker") + 1;
    let end = lines.iter().position(|l| *l == "// end of snippet").expect("an end marker");
    lines[start..end].join("\n")
}

#[test]
fn the_guide_quotes_every_snippet_exactly() {
    let guide = document("docs/implementing.md");
    let files = [
        ("sync", include_str!("sync_store.rs")),
        ("async", include_str!("async_store.rs")),
        ("settings", include_str!("settings.rs")),
    ];
    for (name, file) in files {
        let code = snippet(file);
        assert!(
            guide.contains(&format!("```rust\n{code}\n```")),
            "docs/implementing.md does not quote the {name} snippet:\n{code}"
        );
    }
}

#[test]
fn the_guide_shows_the_dev_dependency_lines() {
    let guide = document("docs/implementing.md");
    for line in ["reservation-conformance = \"0.1\"", "reservation-store = \"0.1\"", "features = [\"rt-multi-thread\"]"]
    {
        assert!(guide.contains(line), "docs/implementing.md lacks {line}");
    }
}

#[test]
fn the_readme_shows_both_forms_of_the_dependency() {
    let readme = document("README.md");
    for line in [
        "reservation-conformance = \"0.1\"",
        "reservation-store = \"0.1\"",
        "reservation-conformance = { path = \"../reservation/conformance\" }",
        "reservation-store = { path = \"../reservation\" }",
    ] {
        assert!(readme.contains(line), "README.md lacks {line}");
    }
}
