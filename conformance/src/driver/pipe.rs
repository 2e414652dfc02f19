//! The driver's pipes, bounded whatever the peer sends: lines read up to [`MAX_LINE`] bytes and
//! never further, the peer's text quoted by a bounded prefix, requests written by a thread of
//! their own from a bounded queue (so that a peer that stops reading blocks no caller), and the
//! id of a request line that does not parse, read by a tolerant second parse.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::{self, BufRead, Read, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use serde_json::Value;

use super::lock;

/// The longest line, in bytes without its `\n`, that the driver reads from an adapter and that
/// `serve` reads from the driver: 1 MiB. The largest legal answer is a lookup of a pending
/// reservation, a few hundred bytes plus 131 for each of its holds (thousands of holds fit).
pub const MAX_LINE: usize = 1 << 20;

/// The most bytes of a peer's text quoted in a message.
pub(crate) const QUOTED: usize = 200;

/// The most bytes of requests queued for the writer beyond the ones it is writing: a caller
/// whose requests do not fit waits (for at most its timeout) until the adapter has read more.
const QUEUED: usize = 1 << 20;

/// `text` as a message quotes it: at most [`QUOTED`] bytes, cut on a character boundary,
/// followed by `… (N bytes)` when something was cut.
pub(crate) fn quote(text: &str) -> Cow<'_, str> {
    quote_prefix(text, text.len())
}

/// `prefix`, the beginning of a text of `len` bytes, as [`quote`] quotes the whole text.
fn quote_prefix(prefix: &str, len: usize) -> Cow<'_, str> {
    if len <= QUOTED && prefix.len() == len {
        return Cow::Borrowed(prefix);
    }
    let mut cut = prefix.len().min(QUOTED);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    Cow::Owned(format!("{}… ({len} bytes)", &prefix[..cut]))
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// The input ended before any byte of a line.
    End,
    /// A whole line (or the input's last bytes, without a `\n`).
    Whole,
    /// A line longer than the limit: its first bytes were read, the rest was not.
    TooLong,
}

/// Reads one line into `line` (cleared first), without its `\n`, reading at most `limit` bytes
/// of it (and at most one buffer beyond).
pub(crate) fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>, limit: usize) -> io::Result<Line> {
    line.clear();
    loop {
        let available = match input.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(if line.is_empty() { Line::End } else { Line::Whole });
        }
        let newline = available.iter().position(|b| *b == b'\n');
        let take = newline.unwrap_or(available.len());
        if line.len() + take > limit {
            let fits = limit - line.len();
            line.extend_from_slice(&available[..fits]);
            input.consume(fits);
            return Ok(Line::TooLong);
        }
        line.extend_from_slice(&available[..take]);
        match newline {
            Some(at) => {
                input.consume(at + 1);
                return Ok(Line::Whole);
            }
            None => input.consume(take),
        }
    }
}

/// Reads and drops the rest of a line, up to and including its `\n`, without keeping it.
pub(crate) fn skip_line(input: &mut impl BufRead) -> io::Result<()> {
    loop {
        let available = match input.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(());
        }
        match available.iter().position(|b| *b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let n = available.len();
                input.consume(n);
            }
        }
    }
}

/// Keeps the last `keep` lines of `stderr` in `tail` until it ends, each quoted (its first
/// [`QUOTED`] bytes and its length): a line of any length costs a bounded amount of memory.
pub(crate) fn tail_lines(stderr: impl Read, tail: &Mutex<VecDeque<String>>, keep: usize) {
    let mut input = io::BufReader::new(stderr);
    // The line's first bytes (a little more than quoted, to cut on a character boundary) and
    // its length.
    let mut prefix = Vec::with_capacity(QUOTED + 4);
    let mut len = 0usize;
    let push = |prefix: &mut Vec<u8>, len: &mut usize| {
        let line = quote_prefix(&String::from_utf8_lossy(prefix), *len).into_owned();
        let mut tail = lock(tail);
        if tail.len() >= keep {
            tail.pop_front();
        }
        tail.push_back(line);
        prefix.clear();
        *len = 0;
    };
    loop {
        let available = match input.fill_buf() {
            Ok(a) if !a.is_empty() => a,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            _ => break,
        };
        let newline = available.iter().position(|b| *b == b'\n');
        let chunk = &available[..newline.unwrap_or(available.len())];
        let room = (QUOTED + 4).saturating_sub(prefix.len());
        prefix.extend_from_slice(&chunk[..chunk.len().min(room)]);
        len = len.saturating_add(chunk.len());
        let consumed = newline.map_or(chunk.len(), |at| at + 1);
        input.consume(consumed);
        if newline.is_some() {
            push(&mut prefix, &mut len);
        }
    }
    if len > 0 {
        push(&mut prefix, &mut len);
    }
}

/// What waits to be written, and why nothing more will be.
struct Queue {
    bytes: Vec<u8>,
    /// No more requests: the writer writes what is queued, then closes the adapter's input.
    closed: bool,
    /// Nothing more is written, nor queued: why.
    failed: Option<String>,
}

/// The requests on their way to the adapter's standard input: a queue of at most [`QUEUED`]
/// bytes (beyond one batch that is larger alone), written by a thread of its own.
pub(crate) struct Outbox {
    queue: Mutex<Queue>,
    /// The writer waits here for requests.
    ready: Condvar,
    /// Callers wait here for room in the queue.
    room: Condvar,
}

impl Outbox {
    /// An outbox whose thread writes to `pipe`; when a write fails, `failed` is called with why.
    pub(crate) fn start(pipe: impl Write + Send + 'static, failed: impl FnOnce(String) + Send + 'static) -> Arc<Self> {
        let outbox = Arc::new(Outbox {
            queue: Mutex::new(Queue { bytes: Vec::new(), closed: false, failed: None }),
            ready: Condvar::new(),
            room: Condvar::new(),
        });
        let writer = outbox.clone();
        std::thread::spawn(move || writer.write_all(pipe, failed));
        outbox
    }

    fn write_all(&self, mut pipe: impl Write, failed: impl FnOnce(String)) {
        let mut batch = Vec::new();
        loop {
            {
                let mut queue = lock(&self.queue);
                while queue.bytes.is_empty() && !queue.closed && queue.failed.is_none() {
                    queue = self.ready.wait(queue).unwrap_or_else(std::sync::PoisonError::into_inner);
                }
                if queue.failed.is_some() || queue.bytes.is_empty() {
                    // Dropping the pipe closes the adapter's standard input.
                    return;
                }
                batch.clear();
                std::mem::swap(&mut batch, &mut queue.bytes);
            }
            self.room.notify_all();
            if let Err(e) = pipe.write_all(&batch).and_then(|()| pipe.flush()) {
                let why = format!("writing to the adapter failed: {e}");
                self.fail(why.clone());
                failed(why);
                return;
            }
        }
    }

    /// Queues `lines` for the writer. When the queue is full, waits for room until `deadline`
    /// (`None`: does not wait); `Err` says why the lines will not be written.
    pub(crate) fn push(&self, lines: &[u8], deadline: Option<Instant>) -> Result<(), String> {
        let mut queue = lock(&self.queue);
        loop {
            if let Some(why) = &queue.failed {
                return Err(why.clone());
            }
            if queue.closed {
                return Err("the adapter's standard input is closed".into());
            }
            if queue.bytes.is_empty() || queue.bytes.len() + lines.len() <= QUEUED {
                queue.bytes.extend_from_slice(lines);
                self.ready.notify_one();
                return Ok(());
            }
            let now = Instant::now();
            let Some(left) = deadline.and_then(|d| d.checked_duration_since(now)).filter(|d| !d.is_zero()) else {
                return Err(format!(
                    "the adapter has not read its standard input for a while: {} bytes of requests wait to be written",
                    queue.bytes.len()
                ));
            };
            queue = self.room.wait_timeout(queue, left).unwrap_or_else(std::sync::PoisonError::into_inner).0;
        }
    }

    /// Nothing more is written: queued requests are dropped and callers waiting for room told
    /// `why`.
    pub(crate) fn fail(&self, why: String) {
        let mut queue = lock(&self.queue);
        if queue.failed.is_none() {
            queue.failed = Some(why);
        }
        queue.bytes = Vec::new();
        drop(queue);
        self.ready.notify_all();
        self.room.notify_all();
    }

    /// No more requests: what is queued is written, then the adapter's input is closed.
    pub(crate) fn close(&self) {
        lock(&self.queue).closed = true;
        self.ready.notify_all();
        self.room.notify_all();
    }
}

/// The `id` of a request line that does not parse as a whole (a number beyond what a JSON
/// number can be read as, `1e400`, or a string with a lone surrogate escape): the line parsed
/// again, every member but `id` only checked for syntax. `None` when even that fails, or the
/// line is not an object with an `id`.
pub(crate) fn tolerant_id(line: &str) -> Option<Value> {
    use serde::Deserializer as _;
    use serde::de::{IgnoredAny, MapAccess, Visitor};

    struct IdOnly;
    impl<'de> Visitor<'de> for IdOnly {
        type Value = Option<Value>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a request object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<Value>, A::Error> {
            let mut id = None;
            while let Some(name) = map.next_key::<Cow<'de, str>>()? {
                if name == "id" && id.is_none() {
                    id = Some(map.next_value::<Value>()?);
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(id)
        }
    }
    serde_json::Deserializer::from_str(line).deserialize_map(IdOnly).ok().flatten()
}
