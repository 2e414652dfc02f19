//! The driver's pipes, bounded whatever the peer sends: lines read up to [`MAX_LINE`](super::MAX_LINE) bytes and
//! never further, the peer's text quoted by a bounded prefix, requests written without blocking
//! (so that a peer that stops reading holds no caller beyond its deadline), and the id of a
//! request line that does not parse, read by a tolerant second parse.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io::{self, BufRead, Read, Write};
use std::process::ChildStdin;
use std::sync::Mutex;
use std::time::Instant;

use rustix::event::{self, PollFd, PollFlags, Timespec};
use rustix::fs::{self, OFlags};
use serde_json::Value;

use super::lock;

/// The most bytes of a peer's text quoted in a message.
pub(crate) const QUOTED: usize = 200;

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

/// What `input` holds buffered, reading more when it holds nothing; a read interrupted by a
/// signal is tried again.
fn fill(input: &mut impl BufRead) -> io::Result<&[u8]> {
    loop {
        match input.fill_buf() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
            Ok(_) => break,
        }
    }
    // Buffered now, or at the end of the input (where a read finds the end again): this call
    // hands back what the first one found.
    input.fill_buf()
}

/// Reads one line into `line` (cleared first), without its `\n`, reading at most `limit` bytes
/// of it (and at most one buffer beyond).
pub(crate) fn read_line(input: &mut impl BufRead, line: &mut Vec<u8>, limit: usize) -> io::Result<Line> {
    line.clear();
    loop {
        let available = fill(input)?;
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
        let available = fill(input)?;
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

/// Why [`Outbox::push`] wrote nothing.
#[derive(Debug)]
pub(crate) enum Unsent {
    /// The adapter's input is full and the caller would not wait: nothing was written.
    Full,
    /// Nothing more is written to the adapter: why.
    Failed(String),
}

/// The adapter's standard input, or why nothing more is written to it.
struct Pipe {
    stdin: Option<ChildStdin>,
    failed: Option<String>,
}

/// The adapter's standard input, written without blocking: a write that does not fit waits for
/// room until the caller's deadline, then fails. No write waits longer, however the adapter
/// reads.
pub(crate) struct Outbox {
    pipe: Mutex<Pipe>,
}

impl Outbox {
    /// The outbox writing to `stdin`, made non-blocking.
    pub(crate) fn new(stdin: ChildStdin) -> Self {
        let nonblocking = fs::fcntl_getfl(&stdin).and_then(|flags| fs::fcntl_setfl(&stdin, flags | OFlags::NONBLOCK));
        let failed =
            nonblocking.err().map(|e| format!("the adapter's standard input cannot be made non-blocking: {e}"));
        Outbox { pipe: Mutex::new(Pipe { stdin: Some(stdin), failed }) }
    }

    /// An outbox to which nothing is written, for `why`.
    pub(crate) fn failed(why: String) -> Self {
        Outbox { pipe: Mutex::new(Pipe { stdin: None, failed: Some(why) }) }
    }

    /// Writes `lines` whole. While the adapter's input is full, waits for room until `deadline`;
    /// without a deadline, writes nothing then ([`Unsent::Full`]). A write cut short, or one
    /// that fails, leaves the outbox failed: nothing more is written and the adapter's input is
    /// closed.
    pub(crate) fn push(&self, lines: &[u8], deadline: Option<Instant>) -> Result<(), Unsent> {
        let mut pipe = lock(&self.pipe);
        if let Some(why) = &pipe.failed {
            return Err(Unsent::Failed(why.clone()));
        }
        let Some(stdin) = pipe.stdin.as_mut() else {
            return Err(Unsent::Failed("the adapter's standard input is closed".into()));
        };
        let mut rest = lines;
        let why = loop {
            if rest.is_empty() {
                return Ok(());
            }
            match stdin.write(rest) {
                Ok(0) => break "writing to the adapter failed: it took no byte".to_owned(),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = deadline.and_then(|d| d.checked_duration_since(Instant::now())).filter(|d| !d.is_zero());
                    let Some(left) = left else {
                        if deadline.is_none() && rest.len() == lines.len() {
                            return Err(Unsent::Full);
                        }
                        break format!(
                            "the adapter stopped reading its standard input: {} bytes of requests could not be written",
                            rest.len()
                        );
                    };
                    let timeout = Timespec::try_from(left).unwrap_or(Timespec { tv_sec: i64::MAX, tv_nsec: 0 });
                    match event::poll(&mut [PollFd::new(&*stdin, PollFlags::OUT)], Some(&timeout)) {
                        Ok(_) | Err(rustix::io::Errno::INTR) => {}
                        Err(e) => break format!("waiting to write to the adapter failed: {e}"),
                    }
                }
                Err(e) => break format!("writing to the adapter failed: {e}"),
            }
        };
        pipe.failed = Some(why.clone());
        pipe.stdin = None;
        Err(Unsent::Failed(why))
    }

    /// Nothing more is written: the adapter's input is closed, for `why`.
    pub(crate) fn fail(&self, why: String) {
        let mut pipe = lock(&self.pipe);
        pipe.failed.get_or_insert(why);
        pipe.stdin = None;
    }

    /// Closes the adapter's input.
    pub(crate) fn close(&self) {
        self.fail("the adapter's standard input is closed".into());
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
