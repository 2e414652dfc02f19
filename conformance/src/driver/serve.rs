//! [`serve`]: `MemoryStore` behind the protocol, the other side of the driver
//! (`reservation serve`), so that the driver is tested against a store that decides through
//! `spec`. Each request runs as the vectors replay theirs (`protocol::run_request`).

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::sync::{Arc, Mutex};

use reservation_store::{Instant, ManualClock, MemoryStore, StorageError, StoreError};
use serde_json::{Value, json};

use super::lock;
use super::pipe::{self, Line};
use crate::protocol::{
    ASK, MAX_LINE, Verb, clock_question_json, error_json, hello_answer_json, number, run_request, text, unrepresentable,
};

/// One store of [`serve`]: a `MemoryStore` on a clock that the requests move, never back.
struct Served {
    store: MemoryStore<ManualClock>,
    clock: ManualClock,
    /// Serializes "move the clock, run the operation", so that the clock is read under it (D10).
    turn: Mutex<()>,
}

/// Answers the protocol's requests, one line each, from `input` on `output`, with a
/// `MemoryStore` per store id (from its `open` to its `close`): the store behind the driver's own tests
/// (`reservation serve`). Returns when `input` ends. A request it cannot read is answered with an
/// error naming the problem (`Unrepresentable` for a value the typed API cannot hold: a line that
/// is not UTF-8 or not JSON, a number beyond what JSON numbers are read as, a line longer than
/// [`MAX_LINE`] bytes, which is not read into memory), with the request's id when that can be
/// read, and the next line is read: never a crash.
///
/// Answers are buffered while more requests are already waiting in `input`, and written out
/// whenever it has none: one write for a burst of requests rather than one each.
///
/// A request whose `now` is `"ask"` asks the driver for its clock when it runs
/// (`{"clock": id}`, `PROTOCOL.md`); requests that arrive before the answer wait their turn.
pub fn serve(input: impl Read, output: impl Write) -> std::io::Result<()> {
    let mut input = BufReader::with_capacity(1 << 16, input);
    let mut output = std::io::BufWriter::with_capacity(1 << 16, output);
    let mut stores: HashMap<u64, Arc<Served>> = HashMap::new();
    // Lines read while a request waited for its clock; `None` for one over the bound, skipped.
    let mut queued: VecDeque<Option<Vec<u8>>> = VecDeque::new();
    let mut line = Vec::new();
    loop {
        let read = match queued.pop_front() {
            Some(Some(next)) => {
                line = next;
                Line::Whole
            }
            Some(None) => Line::TooLong,
            None => match pipe::read_line(&mut input, &mut line, MAX_LINE)? {
                Line::TooLong => {
                    pipe::skip_line(&mut input)?;
                    Line::TooLong
                }
                read => read,
            },
        };
        let answer = match read {
            Line::End => break,
            Line::Whole => match asks_for_clock(&line) {
                Some(id) => match ask_clock(&mut input, &mut output, &mut queued, id, &line)? {
                    Some(timed) => answer_bytes(&mut stores, timed.as_bytes()),
                    None => break,
                },
                None => answer_bytes(&mut stores, &line),
            },
            Line::TooLong => {
                let why = format!("a line longer than {MAX_LINE} bytes, the protocol's limit");
                Some(format!("{}\n", json!({"id": null, "error": unrepresentable(why)})))
            }
        };
        if let Some(answer) = answer {
            output.write_all(answer.as_bytes())?;
        }
        if queued.is_empty() && input.buffer().is_empty() {
            output.flush()?;
        }
    }
    output.flush()
}

/// The id of `line` if it is a request whose `now` is `"ask"`.
fn asks_for_clock(line: &[u8]) -> Option<u64> {
    let line = std::str::from_utf8(line).ok()?;
    if !line.contains(&format!("\"{ASK}\"")) {
        return None;
    }
    let request = serde_json::from_str::<Value>(line).ok()?;
    if request.get("now")?.as_str()? != ASK {
        return None;
    }
    request.get("id")?.as_u64()
}

/// Asks the driver for the clock of request `id`, whose line is `request`: writes
/// `{"clock": id}`, then reads lines (each bounded by [`MAX_LINE`]) until the driver's answer
/// `{"clock": id, "now": T}`, queueing the requests that come first; `request` with `T` as its
/// `now` (`None` if `input` ended first). [`serve`] runs one request at a time, so this reading is
/// inside the store's critical section.
fn ask_clock(
    input: &mut impl BufRead,
    output: &mut impl Write,
    queued: &mut VecDeque<Option<Vec<u8>>>,
    id: u64,
    request: &[u8],
) -> std::io::Result<Option<String>> {
    let mut question = clock_question_json(id).to_string();
    question.push('\n');
    output.write_all(question.as_bytes())?;
    output.flush()?;
    loop {
        let mut line = Vec::new();
        match pipe::read_line(input, &mut line, MAX_LINE)? {
            Line::End => return Ok(None),
            Line::Whole => {}
            Line::TooLong => {
                // Answered as the main loop answers it, in its turn.
                pipe::skip_line(input)?;
                queued.push_back(None);
                continue;
            }
        }
        let answer = serde_json::from_slice::<Value>(&line).ok().filter(|v| v.get("op").is_none());
        match answer.as_ref().and_then(|v| v.get("clock")) {
            Some(clock) if clock.as_u64() == Some(id) => {
                let now = answer.as_ref().and_then(|v| v.get("now")).cloned().unwrap_or(Value::Null);
                let mut timed = serde_json::from_slice::<Value>(request).unwrap_or(Value::Null);
                if let Some(fields) = timed.as_object_mut() {
                    fields.insert("now".into(), now);
                }
                return Ok(Some(timed.to_string()));
            }
            // The answer to another question: none is waiting for it.
            Some(_) => {}
            None => queued.push_back(Some(line)),
        }
    }
}

/// The answer to one request line of bytes, with its newline; `None` for a blank line.
fn answer_bytes(stores: &mut HashMap<u64, Arc<Served>>, line: &[u8]) -> Option<String> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(match std::str::from_utf8(line) {
        Ok(line) => answer_line(stores, line),
        Err(e) => {
            // Invalid bytes read as U+FFFD: the request's id can still be read.
            let id = pipe::tolerant_id(&String::from_utf8_lossy(line)).unwrap_or(Value::Null);
            let error = unrepresentable(format!("text that is not UTF-8 (D9): {e}"));
            format!("{}\n", json!({"id": id, "error": error}))
        }
    })
}

/// The answer to one request line, with its newline.
fn answer_line(stores: &mut HashMap<u64, Arc<Served>>, line: &str) -> String {
    let answer = match serde_json::from_str::<Value>(line) {
        Ok(request) => {
            let id = request.get("id").cloned().unwrap_or(Value::Null);
            match answer(stores, &request) {
                Ok(ok) => json!({"id": id, "ok": ok}),
                Err(error) => json!({"id": id, "error": error}),
            }
        }
        Err(e) => {
            // A string with a lone surrogate (`"\ud800"`) is JSON that serde_json refuses, and
            // so is a number beyond f64's range (`1e400`): the request's id is read by a second,
            // tolerant parse, with those escapes defused.
            let defused = defuse_surrogates(line);
            let id = pipe::tolerant_id(&defused).unwrap_or(Value::Null);
            let why = if id.is_null() {
                format!("not JSON: {e}")
            } else if serde_json::from_str::<Value>(&defused).is_ok() {
                format!("text that is not valid Unicode (D9): {e}")
            } else {
                format!("a value the typed API cannot hold: {e}")
            };
            json!({"id": id, "error": unrepresentable(why)})
        }
    };
    let mut text = answer.to_string();
    text.push('\n');
    text
}

/// `line` with every `\uD800`–`\uDFFF` escape made a harmless two-byte one, so that a line
/// serde_json refused for a lone surrogate parses.
fn defuse_surrogates(line: &str) -> String {
    line.replace("\\ud", "\\u00d").replace("\\uD", "\\u00D")
}

/// The error for a request on a store that is not open.
fn unknown_store(store: u64) -> Value {
    unrepresentable(format!("no store {store} is open"))
}

fn answer(stores: &mut HashMap<u64, Arc<Served>>, r: &Value) -> Result<Value, Value> {
    let op = Verb::from_name(text(r, "op").map_err(unrepresentable)?);
    if op == Some(Verb::Hello) {
        return Ok(hello_answer_json(false));
    }
    let store = number(r, "store").map_err(unrepresentable)?;
    if op == Some(Verb::Open) {
        // The clock is the latest `now` of the store's operations; none has run yet.
        let clock = ManualClock::new(Instant::ZERO);
        stores.insert(
            store,
            Arc::new(Served { store: MemoryStore::with_clock(clock.clone()), clock, turn: Mutex::new(()) }),
        );
        return Ok(Value::Null);
    }
    if op == Some(Verb::Close) {
        // Later requests on the store answer that no such store is open.
        return stores.remove(&store).map(|_| Value::Null).ok_or_else(|| unknown_store(store));
    }
    if op == Some(Verb::Reopen) {
        return Err(error_json(&StoreError::Storage(StorageError::new("MemoryStore keeps nothing across a reopen"))));
    }
    let served = stores.get(&store).ok_or_else(|| unknown_store(store))?.clone();
    let _turn = lock(&served.turn);
    run_request(&crate::MemoryHarness, &served.store, &served.clock, r)
}
