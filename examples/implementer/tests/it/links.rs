//! Every relative link of the repository's documents (the Markdown files at its root, in `docs/`
//! and in `vectors/`) names a file that exists and, after a `#`, a heading that file has: a
//! guide or a heading renamed or moved without its links fails here.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Markdown files checked: those at the root and in `docs/` and `vectors/`.
fn documents() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in [root(), root().join("docs"), root().join("vectors")] {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The lines of `text` outside fenced code blocks, with inline code spans removed.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push(line.split('`').step_by(2).collect());
        }
    }
    out
}

/// The anchors of `text`'s headings, as GitHub spells them: lower case, everything but letters,
/// digits, spaces, `-` and `_` dropped, spaces made `-`, and `-1`, `-2`, … after a repeated one.
fn anchors(text: &str) -> HashSet<String> {
    let mut fenced = false;
    let mut out = HashSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        let Some(heading) = line.strip_prefix('#').filter(|_| !fenced) else { continue };
        let slug: String = heading
            .trim_start_matches('#')
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut unique = slug.clone();
        let mut n = 0;
        while !out.insert(unique.clone()) {
            n += 1;
            unique = format!("{slug}-{n}");
        }
    }
    out
}

/// The targets of the inline links `[text](target)` in `line`.
fn targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .collect()
}

#[test]
fn every_relative_link_of_the_documents_resolves() {
    let documents = documents();
    assert!(documents.iter().any(|d| d.ends_with("README.md")), "no README.md among {documents:?}");
    assert!(documents.iter().any(|d| d.parent().is_some_and(|p| p.ends_with("docs"))), "no guide in docs/");
    let mut broken = Vec::new();
    let mut checked = 0;
    for document in &documents {
        let text = std::fs::read_to_string(document).unwrap_or_else(|e| panic!("{}: {e}", document.display()));
        for line in prose(&text) {
            for target in targets(&line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (file, anchor) = target.split_once('#').unwrap_or((target, ""));
                let path =
                    if file.is_empty() { document.clone() } else { document.parent().expect("a directory").join(file) };
                let name = document.strip_prefix(root()).unwrap_or(document).display().to_string();
                if !path.exists() {
                    broken.push(format!("{name}: {target}: no such file"));
                } else if !anchor.is_empty() {
                    let linked = std::fs::read_to_string(&path).unwrap_or_default();
                    if !anchors(&linked).contains(anchor) {
                        broken.push(format!("{name}: {target}: no such heading"));
                    }
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} relative links found: the link syntax is not recognised");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn anchors_are_spelled_as_github_spells_them() {
    let headings = "# Two words\n## `PostgresStore` (`stores/postgres/benches/cycles.rs`)\n## Two words\n```\n# not a heading\n```\n";
    let found = anchors(headings);
    for anchor in ["two-words", "postgresstore-storespostgresbenchescyclesrs", "two-words-1"] {
        assert!(found.contains(anchor), "{anchor} not in {found:?}");
    }
    assert!(!found.contains("not-a-heading"), "a line of a code block taken for a heading: {found:?}");
}
