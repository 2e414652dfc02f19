//! SPEC.md's worked examples: read from the document, run as written, and a wrong example or a
//! malformed line reported as such.

use reservation_conformance::MemoryHarness;
use reservation_conformance::worked_examples::{Action, Answer, from_spec, parse, run};

#[test]
fn the_four_worked_examples_are_read_from_spec_md() {
    let examples = from_spec().unwrap();
    let titles: Vec<&str> = examples.iter().map(|e| e.title.as_str()).collect();
    assert_eq!(titles, ["A sign-up", "A crash, then a takeover", "A handover", "A rename, replayed"]);
    assert!(examples.iter().all(|e| e.lines.len() >= 5), "{examples:#?}");
    let lookups = examples.iter().flat_map(|e| &e.lines).filter(|l| matches!(l.action, Action::Lookup(_))).count();
    assert!(lookups >= 6, "{lookups}");
    let handover = &examples[2].lines[2];
    assert!(matches!(&handover.action, Action::Lookup(Answer::Pending { holds, .. }) if holds.len() == 2));
    for example in &examples {
        run(&MemoryHarness, example).unwrap_or_else(|f| panic!("{f}"));
    }
}

const WRONG: &str = "**A wrong one.** Bob is said to take a key Alice holds.\n\n```text\n\
at 0   reserve k  by alice  hold h1  ttl 100  -> Taken   R1\n\
at 10  reserve k  by bob    hold h1  ttl 100  -> Taken   R1\n\
```\n";

/// An example whose text the spec functions contradict fails, quoting the line, whatever the
/// store does.
#[test]
fn an_example_the_spec_contradicts_fails_quoting_its_line() {
    let examples = parse(WRONG).unwrap();
    assert_eq!(examples.len(), 1);
    let failure = run(&MemoryHarness, &examples[0]).unwrap_err().to_string();
    assert!(failure.contains("SPEC.md's worked example \"A wrong one\""), "{failure}");
    assert!(failure.contains("the spec functions say Conflict by R5"), "{failure}");
    let lookup = WRONG.replace("-> Taken   R1\n```", "-> Conflict R5\nat 20 lookup k -> free\n```");
    let failure = run(&MemoryHarness, &parse(&lookup).unwrap()[0]).unwrap_err().to_string();
    assert!(failure.contains("the spec functions' lookup gives"), "{failure}");
}

/// The outcome and the rule are each checked: an example right about one and wrong about the
/// other fails too.
#[test]
fn an_example_wrong_only_in_its_outcome_or_only_in_its_rule_fails() {
    for (said, wrong) in [("-> Conflict R1", "the rule"), ("-> Taken R5", "the outcome")] {
        let text = WRONG.replace("ttl 100  -> Taken   R1\n```", &format!("ttl 100  {said}\n```"));
        assert_ne!(text, WRONG);
        let failure = run(&MemoryHarness, &parse(&text).unwrap()[0]).unwrap_err().to_string();
        assert!(failure.contains("the spec functions say Conflict by R5"), "{wrong}: {failure}");
    }
}

#[test]
fn a_malformed_line_is_reported_with_its_number() {
    for (line, says) in [
        ("at x reserve k by a hold h ttl 5 -> Taken R1", "the instant"),
        ("at 0 reserve k by a hold h ttl 0 -> Taken R1", "D2"),
        ("at 0 confirm k by a version ANY -> Confirmed C1", "D4"),
        ("at 0 fly k by a -> Taken R1", "unknown operation"),
        ("at 0 reserve k by a hold h ttl 5", "no `->`"),
        ("at 0 lookup k -> maybe", "a lookup expects"),
        ("at 0 reserve k by a hold h ttl 5 colour red -> Taken R1", "unknown word `colour`"),
        ("at 0 reserve k by a hold h ttl -> Taken R1", "`ttl` has no value"),
        ("at 0 reserve k hold h ttl 5 -> Taken R1", "no owner"),
        ("at 0 reserve k by a ttl 5 -> Taken R1", "no hold"),
        ("at 0 reserve k by a hold h -> Taken R1", "no ttl"),
        ("at 0 confirm k by a -> Confirmed C1", "no version"),
        ("at 0 release k by a version 0 -> Released L4", "stream versions start at 1"),
        ("at 0 abandon k by a hold h -> NotHeld", "`<Outcome> <rule>`"),
        ("at 0 lookup k -> pending by a holds h until soon", "the expiry"),
    ] {
        let document = format!("**T.**\n```text\n{line}\n```\n");
        let error = parse(&document).unwrap_err();
        assert!(error.starts_with("line 3:") && error.contains(says), "{line}: {error}");
    }
}

/// A block without script lines is no example, and text outside `text` blocks is never read.
#[test]
fn only_text_blocks_with_script_lines_are_examples() {
    let document = "**Prose.**\n```text\njust words\n```\n\n**Code.**\n```rust\nat 0 nonsense\n```\n";
    assert_eq!(parse(document), Ok(vec![]));
}
