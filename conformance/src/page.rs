//! A failed check as a page: one self-contained HTML file (its script and styles inline, nothing
//! fetched, nothing to build) that draws the history behind the failure, and that history as JSON
//! beside it.
//!
//! The page leads with the failure's headline and its replay lines (the seed, the command), then
//! draws the history ([`crate::Drawing`]) when the check recorded one: each thread (or driver
//! connection) a lane; each operation a bar from its call to its return, labelled with the
//! operation and what it returned, coloured by what it returned (took or kept the key; refused;
//! freed it; a lookup; an unknown outcome; an error); every fault, crash and power cut a band
//! across every lane, labelled with what fired; the operation where the failure is outlined, and,
//! for a history no order explains, the key's operations the search could still place before it
//! marked, the states the key can be in after each shown on hover. A filter shows one key's
//! operations alone (or every key's); the page opens on the failing key, around the failing
//! operation, where there is one (the address's `#key=k2` or `#key=all` picks the key, and
//! `#view=whole` opens on the whole history). Below, the failure's whole text, the line that differs marked.
//! A failure without a history (a differential script, a rule's own check) is a page of that text.
//!
//! `reservation conform … --report DIR` writes one for every failed check; so does the suite's
//! own runner ([`crate::run_all`]) and each test of [`crate::tests!`] when the settings name a
//! directory ([`crate::Settings::report_dir`], or the environment's
//! `RESERVATION_CONFORMANCE_REPORTS`, [`crate::REPORTS`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::drawing::Drawing;
use crate::failure::Failure;
use crate::history::{Event, Return};

/// The page's template: its styles and script, the failure's data put in where it says.
const TEMPLATE: &str = include_str!("page.html");

/// Where the template takes the failure's data.
const DATA: &str = "/*DATA*/null";

/// How an operation's bar is coloured: by what it returned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shade {
    /// It took the key, joined it, confirmed it, or found it confirmed to its owner already.
    Took = 0,
    /// It was refused: another owner holds the key, or its owner did not.
    Refused = 1,
    /// It freed the key, dropped a hold, or found a later fact keeping it.
    Freed = 2,
    /// A lookup.
    Lookup = 3,
    /// A storage error that may have taken effect.
    Unknown = 4,
    /// A storage error that did not, an invalid argument or a panic, or no answer at all.
    Error = 5,
}

/// The shade of what `e` returned.
fn shade(e: &Event) -> Shade {
    use reservation_store::Outcome as O;
    match &e.ret {
        Return::Lookup(_) => Shade::Lookup,
        Return::Outcome(O::Taken | O::Joined | O::Confirmed | O::AlreadyConfirmed) => Shade::Took,
        Return::Outcome(O::Conflict | O::NotHeld) => Shade::Refused,
        Return::Outcome(O::Released | O::Kept | O::Abandoned | O::StillReserved) => Shade::Freed,
        Return::Storage { indeterminate: true, .. } => Shade::Unknown,
        Return::Storage { .. } | Return::Error(_) | Return::Protocol(_) => Shade::Error,
    }
}

/// The page's data: the failure's text, and its drawing in a compact form (each operation an
/// array, its label an index into one table of labels).
fn data(failure: &Failure) -> Value {
    let text = failure.to_string();
    let mut lines = text.lines();
    let headline = lines.next().unwrap_or_default().to_owned();
    let mut data = json!({
        "check": failure.check,
        "rule": failure.rule.map(|r| r.to_string()),
        "headline": headline,
        "problem": failure.problem,
        "text": text,
        "replay": failure.replay,
    });
    if let Some(drawing) = failure.drawing.as_ref().filter(|d| drawable(d)) {
        data["drawing"] = drawing_data(drawing);
    }
    data
}

/// Whether `d`'s names name what its operations' indices stand for: a history whose names list
/// no owners or no holds (which the judge refuses, [`crate::linearizability::check_history`]) is
/// not drawn, and its page is the failure's text.
fn drawable(d: &Drawing) -> bool {
    !d.history.names.owners.is_empty() && !d.history.names.holds.is_empty()
}

/// A drawing's data: each operation `[thread, key, called, returned, shade, label, clock at
/// call, clock at return]`.
fn drawing_data(d: &Drawing) -> Value {
    let names = &d.history.names;
    let mut labels: Vec<String> = Vec::new();
    let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let ops: Vec<Value> = d
        .history
        .events
        .iter()
        .map(|e| {
            let (call, ret) = names.call_and_return(e);
            let label = format!("{call} \u{2192} {ret}");
            let next = labels.len();
            let at = *index.entry(label.clone()).or_insert(next);
            if at == next {
                labels.push(label);
            }
            json!([
                e.thread,
                e.key,
                e.called,
                e.returned,
                shade(e) as u8,
                at,
                e.clock_at_call.as_millis(),
                e.clock_at_return.as_millis()
            ])
        })
        .collect();
    let keys: Vec<String> = (0..names.keys.len().max(d.history.events.iter().map(|e| e.key + 1).max().unwrap_or(0)))
        .map(|k| match names.keys.get(k).map(|key| key.as_str()) {
            Some(key) if key != format!("k{k}") => format!("k{k} ({key})"),
            _ => format!("k{k}"),
        })
        .collect();
    json!({
        "keys": keys,
        "labels": labels,
        "ops": ops,
        "key": d.key,
        "failing": d.failing,
        "placed": d.placed,
        "states": d.states,
        "bands": d.bands.iter().map(|b| json!([b.label, b.began, b.ended])).collect::<Vec<_>>(),
        "differs": d.differs,
    })
}

/// `value` as JSON that a `<script>` element holds whole: every `<` escaped, so that no text a
/// store returned can close the element or open a comment.
fn script_json(value: &Value) -> String {
    value.to_string().replace('<', "\\u003c")
}

/// The page of `failure`: one self-contained HTML document.
pub fn page(failure: &Failure) -> String {
    TEMPLATE.replacen(DATA, &script_json(&data(failure)), 1)
}

/// The history behind `failure` as JSON, in the form of the histories the judge could not
/// decide ([`crate::histories::history_json`]), with where the failure is in it; `None` for a
/// failure without a history.
pub fn history(failure: &Failure) -> Option<Value> {
    let d = failure.drawing.as_ref().filter(|d| drawable(d))?;
    let mut value = crate::histories::history_json(&d.history);
    value["failure"] = json!({
        "check": failure.check,
        "rule": failure.rule.map(|r| r.to_string()),
        "key": d.key,
        "failing": d.failing,
        "placed": d.placed,
        "states": d.states,
        "bands": d.bands.iter().map(|b| json!({"label": b.label, "began": b.began, "ended": b.ended})).collect::<Vec<_>>(),
        "differs": d.differs,
    });
    Some(value)
}

/// Writes the page of `failure` in `dir` as `CHECK.html`, and its history, when it has one, as
/// `CHECK.json`: the page's path.
pub fn write_page(dir: &Path, failure: &Failure) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let name: String = failure
        .check
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    let path = dir.join(format!("{name}.html"));
    std::fs::write(&path, page(failure))?;
    if let Some(history) = history(failure) {
        std::fs::write(dir.join(format!("{name}.json")), history.to_string())?;
    }
    Ok(path)
}

/// Writes the page of each of `failures` (a report's, [`crate::Report::failures`]) in `dir`
/// ([`write_page`]): their paths.
pub fn write_pages<'a>(dir: &Path, failures: impl IntoIterator<Item = &'a Failure>) -> std::io::Result<Vec<PathBuf>> {
    failures.into_iter().map(|failure| write_page(dir, failure)).collect()
}

/// A failed test of [`crate::tests!`]: writes the failure's page in `dir`, the settings'
/// ([`crate::Settings::report_dir`]), then panics with the failure and the page's path.
#[doc(hidden)]
#[track_caller]
pub fn __fail(failure: &Failure, dir: Option<&Path>) -> ! {
    let mut text = failure.to_string();
    if let Some(dir) = dir {
        let _ = match write_page(dir, failure) {
            Ok(path) => writeln!(text, "the failure's page: {}", path.display()),
            Err(e) => writeln!(text, "the failure's page could not be written to {}: {e}", dir.display()),
        };
    }
    panic!("{text}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Call, History, Names};
    use reservation_store::{Instant, Operation, Outcome};

    fn event(thread: usize, key: usize, called: u64, returned: u64, call: Call, ret: Return) -> Event {
        Event {
            thread,
            round: 0,
            clock_at_call: Instant::from_millis(1_000),
            clock_at_return: Instant::from_millis(1_000),
            key,
            call,
            ret,
            called,
            returned,
        }
    }

    #[test]
    fn a_page_holds_the_drawing_and_nothing_a_store_returned_can_close_its_script() {
        let names = Names::new();
        let reserve = Call::Op(Operation::Reserve {
            owner: 0,
            hold: 0,
            ttl: reservation_store::Ttl::from_millis(500).expect("a valid ttl"),
        });
        let events = vec![
            event(0, 0, 0, 3, reserve, Return::Outcome(Outcome::Taken)),
            event(1, 0, 1, 2, Call::Lookup, Return::Error("</script><!-- a store's answer".into())),
        ];
        let mut drawing = Drawing::new(History { names, events });
        drawing.key = Some(0);
        drawing.failing = Some(1);
        let failure = Failure::without_rule("linearizability", "a problem").with_drawing(drawing);
        let page = page(&failure);
        assert!(!page.contains(DATA), "the data was put in");
        assert_eq!(page.matches("</script>").count(), TEMPLATE.matches("</script>").count());
        assert!(!page.contains("<!-- a store"));
        let data = data(&failure);
        let ops = data["drawing"]["ops"].as_array().expect("ops");
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0][4], Shade::Took as u8);
        assert_eq!(ops[1][4], Shade::Error as u8);
        assert_eq!(data["drawing"]["failing"], 1);
    }

    #[test]
    fn a_failed_test_writes_its_page_and_says_where() {
        let dir = std::env::temp_dir().join(format!("reservation-page-fail-{}", std::process::id()));
        let failure = Failure::without_rule("r3_reserve_joins_with_a_new_hold", "a problem");
        let panicked = std::panic::catch_unwind(|| __fail(&failure, Some(&dir))).expect_err("it panics");
        let message = panicked.downcast_ref::<String>().expect("a message");
        let page = dir.join("r3_reserve_joins_with_a_new_hold.html");
        assert!(message.starts_with(&failure.to_string()), "{message}");
        assert!(message.contains(&format!("the failure's page: {}", page.display())), "{message}");
        assert!(std::fs::read_to_string(&page).expect("the page").contains("a problem"));
        // A name that is no test's is written as a file name all the same, within the directory.
        let odd = Failure::without_rule("../an-odd/name", "a problem");
        assert_eq!(write_page(&dir, &odd).expect("written"), dir.join("___an-odd_name.html"));
        let _ = std::fs::remove_dir_all(&dir);
        let panicked = std::panic::catch_unwind(|| __fail(&failure, None)).expect_err("it panics");
        assert_eq!(panicked.downcast_ref::<String>().expect("a message"), &failure.to_string());
    }

    /// A drawing whose names name no owner (built by hand) is not drawn, and nothing panics.
    #[test]
    fn a_history_whose_names_name_no_owner_is_not_drawn() {
        let mut names = Names::new();
        names.owners.clear();
        let reserve = Call::Op(Operation::Abandon { owner: 3, hold: 1 });
        let events = vec![event(0, 0, 0, 1, reserve, Return::Outcome(Outcome::NotHeld))];
        let failure =
            Failure::without_rule("a_check", "a problem").with_drawing(Drawing::new(History { names, events }));
        assert!(data(&failure).get("drawing").is_none());
        assert!(history(&failure).is_none());
        assert!(page(&failure).contains("a problem"));
    }

    /// A key the history's names do not list is still offered by the filter, by its index.
    #[test]
    fn every_key_of_the_history_is_offered_by_the_filter() {
        let mut names = Names::new();
        names.keys[0] = reservation_store::Key::new("alice").expect("a key");
        let listed = names.keys.len();
        let events = vec![event(0, listed + 2, 0, 1, Call::Lookup, Return::Lookup(None))];
        let failure =
            Failure::without_rule("a_check", "a problem").with_drawing(Drawing::new(History { names, events }));
        let data = data(&failure);
        let keys: Vec<&str> =
            data["drawing"]["keys"].as_array().expect("keys").iter().filter_map(|k| k.as_str()).collect();
        assert_eq!(keys.len(), listed + 3);
        // A key is named by its index, and by its name where that says more.
        assert_eq!((keys[0], keys[1]), ("k0 (alice)", "k1"));
        assert_eq!(keys[listed + 2], format!("k{}", listed + 2));
    }
}
