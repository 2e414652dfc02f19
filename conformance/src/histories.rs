//! Histories the judge could not decide, written where a failure's replay line says, and the
//! narrower ceilings the next run of that check records with.
//!
//! The directory is the run's [`crate::Settings::history_dir`]; by default
//! `RESERVATION_CONFORMANCE_HISTORIES` when set, otherwise `reservation-conformance` in the system's
//! temporary directory ([`default_dir`]). A history is one JSON
//! document: the names its indices stand for, and every operation with its thread, stamps, clock
//! window, request (in the driver protocol's form, `PROTOCOL.md`) and answer. The ceilings a check
//! narrowed to are lines of `narrowed.txt` there, `CHECK in_flight segment unknown window`; a check
//! that finds its name there records with the narrower of those and its settings' ceilings.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use reservation_store::{Operation, Request};
use serde_json::{Value, json};

use crate::gate::Ceilings;
use crate::history::{Call, Event, History, Names, Return};
use crate::protocol::{lookup_json, operation_json, owner_json, reservation_json, scope_json};

/// The environment variable that names the directory.
pub const HISTORIES: &str = "RESERVATION_CONFORMANCE_HISTORIES";

/// The directory histories and narrowed ceilings are written to when the run's settings name
/// none: `RESERVATION_CONFORMANCE_HISTORIES`, or `reservation-conformance` in the system's
/// temporary directory.
pub fn default_dir() -> PathBuf {
    match std::env::var_os(HISTORIES) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => std::env::temp_dir().join("reservation-conformance"),
    }
}

/// A history as JSON: its names, and each operation.
pub fn history_json(History { names, events }: &History) -> Value {
    let events: Vec<Value> = events.iter().map(|e| event_json(names, e)).collect();
    json!({
        "names": {
            "scope": scope_json(&names.scope),
            "keys": names.keys.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
            "owners": names.owners.iter().map(owner_json).collect::<Vec<_>>(),
            "holds": names.holds.iter().map(|h| h.as_str()).collect::<Vec<_>>(),
        },
        "events": events,
    })
}

/// One operation of a history as JSON.
fn event_json(names: &Names, e: &Event) -> Value {
    let fallback = reservation_store::Key::new("?").expect("a valid key");
    let key = names.keys.get(e.key).unwrap_or(&fallback);
    let request = match e.call {
        Call::Op(op) => {
            let operation: Operation<_, _> = op.map(|o| names.owner(o), |h| names.hold(h));
            operation_json(None, e.clock_at_call, &Request::new(&names.scope, key, operation))
        }
        Call::Lookup => lookup_json(None, e.clock_at_call, &names.scope, key),
    };
    let answer = match &e.ret {
        Return::Outcome(o) => json!({"ok": o.name()}),
        Return::Lookup(r) => json!({"ok": r.as_ref().map(reservation_json)}),
        Return::Storage { message, indeterminate } => {
            json!({"storage": {"message": message, "indeterminate": indeterminate}})
        }
        Return::Error(message) => json!({"error": message}),
        Return::Protocol(message) => json!({"protocol": message}),
    };
    json!({
        "thread": e.thread,
        "round": e.round,
        "key": e.key,
        "called": e.called,
        "returned": e.returned,
        "clock_at_call": e.clock_at_call.as_millis(),
        "clock_at_return": e.clock_at_return.as_millis(),
        "typed": e.typed(),
        "request": request,
        "answer": answer,
    })
}

/// Writes `events` (with `names`) as `CHECK-seed-SEED.json` in `dir`: the file's path.
pub(crate) fn write(dir: &Path, check: &str, seed: u64, history: &History) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join(format!("{check}-seed-{seed}.json"));
    let text = serde_json::to_string(&history_json(history)).map_err(std::io::Error::other)?;
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The file of narrowed ceilings in `dir`.
fn narrowed_file(dir: &Path) -> PathBuf {
    dir.join("narrowed.txt")
}

/// The lines of the narrowed ceilings in `dir`: `(check, ceilings)`.
fn read_narrowed(dir: &Path) -> Vec<(String, Ceilings)> {
    let text = std::fs::read_to_string(narrowed_file(dir)).unwrap_or_default();
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<(String, Ceilings)> {
    let mut words = line.split_whitespace();
    let check = words.next()?.to_owned();
    let mut n = || words.next().and_then(|w| w.parse::<u64>().ok());
    let (in_flight, segment, unknown, window) = (n()?, n()?, n()?, n()?);
    let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    Some((check, Ceilings { in_flight: size(in_flight), segment: size(segment), unknown: size(unknown), window }))
}

/// `ceilings` narrowed by what the last undecided run of `check` left in `dir`.
pub(crate) fn effective(dir: &Path, check: &str, ceilings: Ceilings) -> Ceilings {
    let narrowed = read_narrowed(dir).into_iter().rev().find(|(c, _)| c == check).map(|(_, ceilings)| ceilings);
    narrowed.map_or(ceilings, |n| ceilings.min(n))
}

/// Notes in `dir` that the next run of `check` records with `ceilings`: the file's path.
pub(crate) fn narrow(dir: &Path, check: &str, ceilings: Ceilings) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let mut lines: Vec<(String, Ceilings)> = read_narrowed(dir).into_iter().filter(|(c, _)| c != check).collect();
    lines.push((check.to_owned(), ceilings));
    let mut text = String::new();
    for (c, n) in lines {
        let _ = writeln!(text, "{c} {} {} {} {}", n.in_flight, n.segment, n.unknown, n.window);
    }
    let path = narrowed_file(dir);
    std::fs::write(&path, text)?;
    Ok(path)
}
