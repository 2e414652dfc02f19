//! The adapter client: [`CommandHarness`] starts an adapter program and is a [`Harness`] whose
//! stores live in it, each operation one request through the protocol's wire format; it marks the
//! errors of an adapter that breaks the protocol ([`ProtocolError`]) or answers a reservation of
//! no shape ([`ShapeError`]).

use std::collections::{HashMap, VecDeque};
use std::io::{BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use reservation_store::{
    Clock, Instant, Key, ManualClock, Outcome, Request, ReservationScope, ReservationStore, StorageError, StoreError,
    StoreResult, StoredReservation, error_chain,
};
use rustix::process::Signal;
use serde_json::Value;

use super::lock;
use super::pipe::{self, Line, quote};
use crate::harness::{Capabilities, Fault, Harness, RawAnswer, RawRequest};
use crate::protocol::{
    ASK, Hello, MAX_LINE, PROTOCOL, ProtocolError, REFUSED, STORAGE_ERROR, ShapeError, VERSIONS_SECTION, clock_json,
    close_json, hello_json, invalid_by_name, lookup_json, open_json, operation_json, parse_hello, parse_outcome,
    parse_reservation, reopen_json, split_answer,
};
use crate::settings::Settings;

/// Lines of the adapter's standard error kept for failure messages.
const STDERR_TAIL: usize = 20;

/// How the error of every request to a store the adapter did not open begins.
const NOT_OPENED: &str = "the adapter did not open the store: ";

/// `error`, which kept a store from opening, as the error of a request to that store: still
/// marked when it was a protocol failure.
fn not_opened(error: &StorageError) -> StorageError {
    match ProtocolError::of(error) {
        Some(p) => ProtocolError::error(format!("{NOT_OPENED}{p}")),
        None => StorageError::new(format!("{NOT_OPENED}{}", error_chain(error))),
    }
}

/// Why the store that answered `error` was never opened, when that is why: the adapter answered
/// its `open` with an error (its storage refused, for one), which no wait mends.
pub(crate) fn unopened(error: &StoreError) -> Option<String> {
    let StoreError::Storage(e) = error else { return None };
    let text = match ProtocolError::of(e) {
        Some(p) => p.details().to_owned(),
        None => e.to_string(),
    };
    text.starts_with(NOT_OPENED).then_some(text)
}

// ---------------------------------------------------------------------------------------------
// The adapter process.

/// The requests in flight, by id: where each one's answer (or why none will come) goes.
type Waiting = Arc<Mutex<HashMap<u64, mpsc::Sender<Result<Reply, String>>>>>;

/// A line of the adapter for the waiter of one request.
enum Reply {
    /// The request's answer.
    Answer(Value),
    /// The adapter asks for the clock of the request (`{"clock": id}`): the waiter reads it and
    /// answers, then goes on waiting.
    Clock,
}

/// A request sent and not yet answered.
struct Sent {
    id: u64,
    request: Value,
    answer: mpsc::Receiver<Result<Reply, String>>,
}

/// The running adapter: requests in flight by id, and the tail of its standard error.
struct Adapter {
    command: String,
    /// Its standard input, written without blocking.
    outbox: Arc<pipe::Outbox>,
    waiting: Waiting,
    /// Why it is broken: once set, no request is sent and every one in flight fails.
    broken: Arc<Mutex<Option<String>>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    next: AtomicU64,
    child: Arc<Mutex<Child>>,
    timeout: Duration,
    /// Whether the power was cut under it ([`Adapter::power_cut`]): it was killed, and every
    /// request to it fails as one in flight at a power cut does.
    cut: AtomicBool,
}

/// Marks the adapter broken for `why` (unless it already is, for an earlier reason), and fails
/// every request in flight with the reason it is broken.
fn break_adapter(broken: &Mutex<Option<String>>, waiting: &Waiting, outbox: &pipe::Outbox, why: String) {
    let why = lock(broken).get_or_insert(why).clone();
    outbox.fail(why.clone());
    for (_, sender) in lock(waiting).drain() {
        let _ = sender.send(Err(why.clone()));
    }
}

/// Hands each answer the adapter writes on `stdout` to the request it answers, until the output
/// ends or a line is not an answer; why it stopped. A line is read up to [`MAX_LINE`] bytes and
/// never further.
fn read_answers(stdout: impl Read, waiting: &Waiting) -> String {
    let mut input = BufReader::with_capacity(1 << 16, stdout);
    let mut line = Vec::new();
    loop {
        match pipe::read_line(&mut input, &mut line, MAX_LINE) {
            Ok(Line::Whole) => {}
            Ok(Line::End) => return CLOSED.to_owned(),
            Ok(Line::TooLong) => {
                return format!(
                    "the adapter wrote a line longer than {MAX_LINE} bytes, the protocol's limit (the driver read no further): {}",
                    quote(&String::from_utf8_lossy(&line))
                );
            }
            Err(e) => return format!("reading the adapter's standard output failed: {e}"),
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            return format!("the adapter wrote a line that is not UTF-8: {}", quote(&String::from_utf8_lossy(&line)));
        };
        let answer: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return format!("the adapter wrote a line that is not JSON ({e}): {:?}", quote(text)),
        };
        if answer.get("clock").is_some() && answer.get("id").is_none() {
            match route_clock_question(waiting, &answer) {
                Ok(()) => continue,
                Err(e) => return format!("{e}: {}", quote(text)),
            }
        }
        let Some(id) = answer.get("id").and_then(Value::as_u64) else {
            return format!("the adapter wrote an answer without an integer `id`: {}", quote(text));
        };
        let Some(sender) = lock(waiting).remove(&id) else {
            return format!("the adapter answered id {id}, which no request in flight has: {}", quote(text));
        };
        let _ = sender.send(Ok(Reply::Answer(answer)));
    }
}

impl Adapter {
    fn start(command: &str, timeout: Duration) -> Result<Adapter, StorageError> {
        // A process group of its own, so that a power cut kills whatever it started too.
        let mut child = shell(command)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| StorageError::with_source(format!("starting the adapter `{command}`"), e))?;
        let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (waiting, broken): (Waiting, Arc<Mutex<Option<String>>>) = (Arc::default(), Arc::default());
        let outbox = Arc::new(match stdin {
            Some(stdin) => pipe::Outbox::new(stdin),
            None => pipe::Outbox::failed("the adapter has no standard input".into()),
        });
        let adapter = Adapter {
            command: command.to_owned(),
            outbox,
            waiting,
            broken,
            stderr: Arc::default(),
            next: AtomicU64::new(0),
            child: Arc::new(Mutex::new(child)),
            timeout,
            cut: AtomicBool::new(false),
        };
        if let Some(stderr) = stderr {
            let tail = adapter.stderr.clone();
            std::thread::spawn(move || pipe::tail_lines(stderr, &tail, STDERR_TAIL));
        }
        if let Some(stdout) = stdout {
            let (waiting, broken, outbox) = (adapter.waiting.clone(), adapter.broken.clone(), adapter.outbox.clone());
            let child = adapter.child.clone();
            std::thread::spawn(move || {
                let why = read_answers(stdout, &waiting);
                let why = if why == CLOSED { with_exit_status(why, &child) } else { why };
                break_adapter(&broken, &waiting, &outbox, why);
            });
        }
        Ok(adapter)
    }

    /// The last lines of its standard error, each quoted by a bounded prefix.
    fn stderr_tail(&self) -> String {
        let tail = lock(&self.stderr);
        if tail.is_empty() {
            "(its standard error is empty)".into()
        } else {
            format!("its standard error ends:\n  {}", tail.iter().cloned().collect::<Vec<_>>().join("\n  "))
        }
    }

    /// The protocol failure of `request`, for `why`: the adapter is broken from now on, if it was
    /// not already, so that every request in flight fails and no other is sent (`PROTOCOL.md`:
    /// the first failure of the protocol ends the run).
    fn fail(&self, request: &Value, why: &str) -> StorageError {
        break_adapter(&self.broken, &self.waiting, &self.outbox, format!("request {request}: {why}"));
        self.refused(request, why)
    }

    /// Sends `request` (an id is added) and waits for its answer: the `ok` value, or the error
    /// object.
    fn call(&self, request: Value) -> Result<Result<Value, Value>, StorageError> {
        let sent = self.send(request)?;
        self.wait(&sent, None)
    }

    /// Sends `request` with an id added, without waiting for its answer.
    fn send(&self, request: Value) -> Result<Sent, StorageError> {
        self.send_all(vec![request]).pop().unwrap_or_else(|| Err(StorageError::new("no request was sent")))
    }

    /// Sends `requests`, each with an id added, in one write, without waiting for their answers.
    /// The write does not block: while the adapter's input is full it waits for room for at most
    /// the timeout, after which the adapter is broken.
    fn send_all(&self, requests: Vec<Value>) -> Vec<Result<Sent, StorageError>> {
        self.send_lines(requests.into_iter().map(|mut request| {
            move |id: u64| {
                if let Some(fields) = request.as_object_mut() {
                    fields.insert("id".into(), id.into());
                }
                let line = request.to_string();
                (request, line)
            }
        }))
    }

    /// Sends [`RawRequest`]s on store `store`, each with an id added, in one write, without
    /// waiting for their answers. A failure message shows the line as a JSON string.
    fn send_raw(&self, store: u64, requests: &[RawRequest]) -> Vec<Result<Sent, StorageError>> {
        self.send_lines(requests.iter().map(|request| {
            move |id: u64| {
                let line = request.line(id, store);
                (Value::from(line.as_str()), line)
            }
        }))
    }

    /// Sends one line per item, made by the item from the id it is given (with the request as
    /// failure messages show it), in one write, without waiting for their answers. The write
    /// does not block: while the adapter's input is full it waits for room for at most the
    /// timeout, after which the adapter is broken.
    fn send_lines<F: FnOnce(u64) -> (Value, String)>(
        &self,
        items: impl ExactSizeIterator<Item = F>,
    ) -> Vec<Result<Sent, StorageError>> {
        let deadline = std::time::Instant::now() + self.timeout;
        let mut lines = String::new();
        let mut numbered = Vec::with_capacity(items.len());
        for item in items {
            let id = self.next.fetch_add(1, Ordering::SeqCst);
            let (request, line) = item(id);
            // Whole lines in one write: the pipe is unbuffered, and `writeln!` would write each
            // JSON token on its own, waking the adapter for each.
            lines.push_str(&line);
            lines.push('\n');
            numbered.push((id, request));
        }
        if let Some(why) = lock(&self.broken).clone() {
            return numbered.iter().map(|(_, request)| Err(self.refused(request, &why))).collect();
        }
        let mut sent = Vec::with_capacity(numbered.len());
        {
            let mut waiting = lock(&self.waiting);
            for (id, request) in numbered {
                let (tx, rx) = mpsc::channel();
                waiting.insert(id, tx);
                sent.push(Sent { id, request, answer: rx });
            }
        }
        // Broken meanwhile: these were registered after the requests in flight were failed.
        let written = match lock(&self.broken).clone() {
            Some(why) => Err(pipe::Unsent::Failed(why)),
            None => self.outbox.push(lines.as_bytes(), Some(deadline)),
        };
        let why = match written {
            Ok(()) => return sent.into_iter().map(Ok).collect(),
            Err(pipe::Unsent::Failed(why)) => why,
            Err(pipe::Unsent::Full) => "the adapter's standard input is full".to_owned(),
        };
        break_adapter(&self.broken, &self.waiting, &self.outbox, why);
        let why = lock(&self.broken).clone().unwrap_or_default();
        let mut waiting = lock(&self.waiting);
        sent.into_iter()
            .map(|s| {
                waiting.remove(&s.id);
                Err(self.refused(&s.request, &why))
            })
            .collect()
    }

    /// Asks the adapter to close store `store`, without waiting for the answer; nothing when it
    /// is broken or its standard input is full.
    fn close(&self, store: u64) {
        if lock(&self.broken).is_some() {
            return;
        }
        let id = self.next.fetch_add(1, Ordering::SeqCst);
        let mut line = close_json(id, store).to_string();
        line.push('\n');
        // The answer is read and dropped: its id must be one in flight.
        lock(&self.waiting).insert(id, mpsc::channel().0);
        match self.outbox.push(line.as_bytes(), None) {
            Ok(()) => {}
            Err(pipe::Unsent::Full) => drop(lock(&self.waiting).remove(&id)),
            Err(pipe::Unsent::Failed(why)) => break_adapter(&self.broken, &self.waiting, &self.outbox, why),
        }
    }

    /// Waits for the answer to a request sent: the `ok` value, or the error object. A clock
    /// question of the adapter meanwhile is answered with a reading of `clock`, taken here (see
    /// [`Adapter::answer_clock`]); the time that reading takes is not counted in the wait.
    fn wait(&self, sent: &Sent, clock: Option<&ManualClock>) -> Result<Result<Value, Value>, StorageError> {
        let mut deadline = std::time::Instant::now().checked_add(self.timeout);
        let answer = loop {
            let left = deadline.map_or(self.timeout, |d| d.saturating_duration_since(std::time::Instant::now()));
            match sent.answer.recv_timeout(left) {
                Ok(Ok(Reply::Answer(answer))) => break answer,
                Ok(Ok(Reply::Clock)) => {
                    let reading = std::time::Instant::now();
                    self.answer_clock(sent, clock)?;
                    deadline = deadline.and_then(|d| d.checked_add(reading.elapsed()));
                }
                Ok(Err(why)) => return Err(self.fail(&sent.request, &why)),
                Err(_) => {
                    lock(&self.waiting).remove(&sent.id);
                    self.stopped_answering(sent);
                    return Err(self.fail(&sent.request, &format!("no answer within {:?}", self.timeout)));
                }
            }
        };
        split_answer(answer).map_err(|why| self.fail(&sent.request, &why))
    }

    /// Answers the adapter's clock question for `sent`: reads `clock` on this thread, the one
    /// waiting for the request (a reading held by [`ManualClock::hold_next_reading`] waits here,
    /// inside the store's critical section if the store asked from there), and writes
    /// `{"clock": id, "now": T}`, as any request is written, without blocking past the timeout.
    /// A question for a request that did not say `"ask"` is the adapter's failure.
    fn answer_clock(&self, sent: &Sent, clock: Option<&ManualClock>) -> Result<(), StorageError> {
        let clock = match clock {
            Some(clock) if sent.request.get("now").and_then(Value::as_str) == Some(ASK) => clock,
            _ => {
                return Err(
                    self.fail(&sent.request, "the adapter asked for the clock of a request whose `now` is not \"ask\"")
                );
            }
        };
        let mut line = clock_json(sent.id, clock.now()).to_string();
        line.push('\n');
        let deadline = std::time::Instant::now() + self.timeout;
        let why = match self.outbox.push(line.as_bytes(), Some(deadline)) {
            Ok(()) => return Ok(()),
            Err(pipe::Unsent::Failed(why)) => why,
            Err(pipe::Unsent::Full) => "the adapter's standard input is full".to_owned(),
        };
        break_adapter(&self.broken, &self.waiting, &self.outbox, why.clone());
        Err(self.fail(&sent.request, &format!("writing the clock to the adapter failed: {why}")))
    }

    /// The `ok` of a request that must succeed.
    fn expect_ok(&self, request: Value) -> Result<Value, StorageError> {
        let shown = request.clone();
        match self.call(request)? {
            Ok(v) => Ok(v),
            Err(e) => Err(self.refused(&shown, &format!("the adapter answered an error: {}", quote(&e.to_string())))),
        }
    }

    /// As [`Adapter::fail`], without breaking the adapter: for a request that must succeed and
    /// was answered with an error (an `open` while the store's database is down), and for the
    /// requests that fail because the adapter is already broken.
    fn refused(&self, request: &Value, why: &str) -> StorageError {
        if self.cut.load(Ordering::SeqCst) {
            return StorageError::indeterminate(format!("driver: request {request}: {POWER_CUT}"));
        }
        ProtocolError::error(format!(
            "driver: adapter `{}`: request {request}: {why}; {}",
            self.command,
            self.stderr_tail()
        ))
    }

    /// Why the adapter is broken, if it is.
    fn broken(&self) -> Option<String> {
        lock(&self.broken).clone()
    }

    /// The power is cut under the adapter: every process of its process group is killed at once
    /// (`SIGKILL`), as a machine that loses power stops, and every request in flight or to come
    /// fails with an indeterminate error that says so, not as a breach of the protocol.
    fn power_cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        // Broken first, so that the end of its output, which the kill brings, is not the reason.
        break_adapter(&self.broken, &self.waiting, &self.outbox, POWER_CUT.to_owned());
        let child = lock(&self.child);
        let _ = rustix::process::kill_process_group(rustix::process::Pid::from_child(&child), Signal::KILL);
    }

    /// `sent` had no answer within the timeout: the adapter is broken, every request in flight
    /// fails now and every later one at once, so that a run ends about one timeout after the
    /// adapter stops answering.
    fn stopped_answering(&self, sent: &Sent) {
        let why = format!(
            "the adapter stopped answering (request {} had no answer within {:?}), so the driver sends it nothing more",
            sent.id, self.timeout
        );
        break_adapter(&self.broken, &self.waiting, &self.outbox, why);
    }
}

impl Drop for Adapter {
    fn drop(&mut self) {
        // Closing standard input asks the adapter to exit, for half a second; then it is killed.
        // Either way every process left in its process group is killed (a server it started and
        // did not stop): the group lives on, under the adapter's id, while one of them does.
        self.outbox.close();
        let mut child = lock(&self.child);
        let pid = rustix::process::Pid::from_child(&child);
        for _ in 0..50 {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = rustix::process::kill_process_group(pid, Signal::KILL);
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Why every request fails once the power was cut under the adapter.
const POWER_CUT: &str = "the power was cut: the adapter's processes were killed";

/// Why the adapter is broken when its standard output ends.
const CLOSED: &str = "the adapter closed its standard output";

/// `why` the adapter's output ended, with its exit status when it has exited (it is asked
/// [`EXIT_POLLS`] times, [`EXIT_POLL`] apart: a process whose output ended is usually exiting).
fn with_exit_status(why: String, child: &Mutex<Child>) -> String {
    for _ in 0..EXIT_POLLS {
        if let Ok(Some(status)) = lock(child).try_wait() {
            return format!("{why}: it exited ({status})");
        }
        std::thread::sleep(EXIT_POLL);
    }
    format!("{why}, and has not exited")
}

/// How many times, and how far apart, the driver asks for the exit status of an adapter whose
/// output ended: for 100 ms at most.
const EXIT_POLLS: u32 = 20;
const EXIT_POLL: Duration = Duration::from_millis(5);

/// Passes the adapter's clock question `question` (`{"clock": id}`) to the waiter of request
/// `id`; why it cannot, if the question is malformed or no request `id` is in flight.
fn route_clock_question(waiting: &Waiting, question: &Value) -> Result<(), String> {
    let id = match question.as_object().map(|fields| (fields.len(), fields.get("clock").and_then(Value::as_u64))) {
        Some((1, Some(id))) => id,
        _ => return Err("the adapter wrote a clock question that is not `{\"clock\": ID}`".into()),
    };
    match lock(waiting).get(&id) {
        Some(waiter) => {
            let _ = waiter.send(Ok(Reply::Clock));
            Ok(())
        }
        None => Err(format!("the adapter asked for the clock of id {id}, which no request in flight has")),
    }
}

fn shell(command: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c").arg(command);
    c
}

/// The suite's harness for a store behind an adapter command (see the [module](super)).
pub struct CommandHarness {
    /// The adapter running now: another one after each power cut.
    adapter: Mutex<Arc<Adapter>>,
    hello: Hello,
    stores: AtomicU64,
    /// The faults the harness can cause, each by its command.
    faults: Vec<(Fault, String)>,
    /// The requests sent to the adapters that power cuts killed.
    sent_before: AtomicU64,
    /// Why the adapter could not be started again after a power cut, once that happened.
    restart: Mutex<Option<String>>,
}

impl CommandHarness {
    /// How long the driver waits for any one answer, unless [`CommandHarness::start_with`] says;
    /// once an answer does not come within it, every later request fails at once.
    pub const TIMEOUT: Duration = Duration::from_secs(10);

    /// Starts `command` (run by `sh -c`) and exchanges `hello`; a `hello` that fails is a
    /// determinate error saying the adapter did not start.
    pub fn start(command: &str) -> Result<CommandHarness, StorageError> {
        CommandHarness::start_with(command, CommandHarness::TIMEOUT)
    }

    /// As [`CommandHarness::start`], waiting at most `timeout` for each answer.
    pub fn start_with(command: &str, timeout: Duration) -> Result<CommandHarness, StorageError> {
        let adapter = Arc::new(Adapter::start(command, timeout)?);
        // A `hello` that fails is a failure to start, which has no effect to be unsure of.
        let not_started = |e: StorageError| {
            let why = ProtocolError::of(&e).map_or_else(|| e.message().to_owned(), ToString::to_string);
            StorageError::new(format!("the adapter did not start: {why}"))
        };
        let ok = match adapter.call(hello_json()).map_err(not_started)? {
            Ok(ok) => ok,
            Err(e) => {
                let why = format!(
                    "the adapter answered an error: {} (this driver runs protocol {PROTOCOL}: {VERSIONS_SECTION})",
                    quote(&e.to_string())
                );
                return Err(not_started(adapter.fail(&hello_json(), &why)));
            }
        };
        // A refusal of its version says what to send; any other fault quotes what it sent.
        let hello = parse_hello(&ok).map_err(|e| {
            let why = if e.starts_with(REFUSED) { e } else { format!("{e}: {}", quote(&ok.to_string())) };
            not_started(adapter.fail(&hello_json(), &why))
        })?;
        Ok(CommandHarness {
            adapter: Mutex::new(adapter),
            hello,
            stores: AtomicU64::new(0),
            faults: Vec::new(),
            sent_before: AtomicU64::new(0),
            restart: Mutex::new(None),
        })
    }

    /// The adapter running now: after a power cut ([`Harness::store_in`]), the command started
    /// again and its `hello` exchanged, which must declare what the first one did.
    fn adapter(&self) -> Result<Arc<Adapter>, StorageError> {
        let mut current = lock(&self.adapter);
        if !current.cut.load(Ordering::SeqCst) {
            return Ok(current.clone());
        }
        if let Some(why) = lock(&self.restart).clone() {
            return Err(StorageError::new(why));
        }
        let started = CommandHarness::start_with(&current.command, current.timeout).and_then(|again| {
            if again.hello == self.hello {
                Ok(again)
            } else {
                Err(StorageError::new(format!(
                    "it declared {:?} at its first `hello` and {:?} after the power cut",
                    self.hello, again.hello
                )))
            }
        });
        match started {
            Ok(again) => {
                self.sent_before.fetch_add(current.next.load(Ordering::SeqCst), Ordering::SeqCst);
                *current = again.adapter.into_inner().unwrap_or_else(PoisonError::into_inner);
                Ok(current.clone())
            }
            Err(e) => {
                let why = format!(
                    "driver: adapter `{}`: started again after a power cut, it failed: {}",
                    current.command,
                    error_chain(&e)
                );
                *lock(&self.restart) = Some(why.clone());
                Err(StorageError::new(why))
            }
        }
    }

    /// How many requests the driver has sent the adapter so far, `hello` and `open` included
    /// (and those sent to it before each power cut).
    pub fn requests(&self) -> u64 {
        self.sent_before.load(Ordering::SeqCst) + lock(&self.adapter).next.load(Ordering::SeqCst)
    }

    /// What the adapter declared.
    pub fn hello(&self) -> Hello {
        self.hello
    }

    /// The settings that suit a store behind the driver, for the run to start from: 1,000
    /// differential scripts, 8 of them at once, since each request waits a round trip.
    pub fn settings() -> Settings {
        Settings::default().with_cases(1_000).with_differential_threads(8)
    }

    /// Longest wait for a fault's command ([`CommandHarness::with_fault`]); past it the command is
    /// killed and the fault counts as not caused.
    pub const FAULT_TIMEOUT: Duration = Duration::from_secs(120);

    /// This harness, able to cause `fault` by running `command` (by `sh -c`), for the fault check
    /// ([`crate::faults`]): the command causes the fault in the adapter's world (kills and
    /// restarts its database, promotes its replica, …) and exits 0 once it has ended. A command
    /// that exits otherwise, or runs longer than [`CommandHarness::FAULT_TIMEOUT`], fails the
    /// check, quoting the end of its standard error. The suite's own faults
    /// ([`Fault::Restart`], [`Fault::ClockJump`]) need no command; one given for them is never
    /// run.
    pub fn with_fault(mut self, fault: Fault, command: impl Into<String>) -> Self {
        self.faults.retain(|(f, _)| *f != fault);
        self.faults.push((fault, command.into()));
        self
    }

    /// Opens store `reopen` again, or a new store, in `dir` when given (a power-cut run's).
    fn open(&self, clock: ManualClock, reopen: Option<u64>, dir: Option<&str>) -> CommandStore {
        let id = self.stores.fetch_add(1, Ordering::SeqCst);
        // A peek: opening is not the store deciding, so it takes no reading a check holds.
        let now = clock.peek();
        let request = match reopen {
            None => open_json(id, now, dir),
            Some(old) => reopen_json(old, id, now),
        };
        let adapter = match self.adapter() {
            Ok(adapter) => adapter,
            Err(e) => {
                let adapter = lock(&self.adapter).clone();
                return CommandStore { adapter, id, clock, opened: Some(e), in_dir: false };
            }
        };
        let opened = match adapter.expect_ok(request.clone()) {
            Ok(Value::Null) => None,
            Ok(ok) => Some(adapter.fail(&request, &format!("the answer's `ok` is {ok}, not null"))),
            Err(e) => Some(e),
        };
        CommandStore { adapter, id, clock, opened, in_dir: dir.is_some() }
    }
}

impl Harness for CommandHarness {
    type Store = CommandStore;

    fn store(&self, clock: ManualClock) -> CommandStore {
        self.open(clock, None, None)
    }

    /// What the adapter's `hello` declared: `durable`, and the promise to survive power cuts.
    fn capabilities(&self) -> Capabilities {
        let durable = Capabilities::default().with_durable(self.hello.durable);
        self.hello.power_cuts.map_or(durable, |model| durable.with_power_cuts(model))
    }

    fn reopen(&self, store: CommandStore, clock: ManualClock) -> Option<CommandStore> {
        self.hello.durable.then(|| self.open(clock, Some(store.id), None))
    }

    /// For an adapter that declared a promise to survive power cuts: `open` with `dir`. The
    /// store is the machine's only one: when it is dropped (at a cut, its disk dead, or at the end
    /// of the check), the adapter's process group is killed, and the next store is opened in
    /// the adapter started again, which finds in `dir` what the cut left.
    fn store_in(&self, dir: &Path, clock: ManualClock) -> Option<CommandStore> {
        self.hello.power_cuts?;
        let Some(dir) = dir.to_str() else {
            let adapter = lock(&self.adapter).clone();
            let e = StorageError::new(format!("the power-cut check's directory {dir:?} is not UTF-8"));
            return Some(CommandStore { adapter, id: u64::MAX, clock, opened: Some(e), in_dir: false });
        };
        Some(self.open(clock, None, Some(dir)))
    }

    /// The faults given by [`CommandHarness::with_fault`].
    fn faults(&self) -> Vec<Fault> {
        self.faults.iter().map(|(f, _)| *f).collect()
    }

    /// Runs the command of `fault` and waits for it to exit, for at most
    /// [`CommandHarness::FAULT_TIMEOUT`].
    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        let Some((_, command)) = self.faults.iter().find(|(f, _)| *f == fault) else {
            return Err(crate::harness::not_offered(fault));
        };
        run_fault_command(command, CommandHarness::FAULT_TIMEOUT)
    }

    /// Sends every request as it is written, with the store's id, then waits for their answers:
    /// one round trip for all. An answer's `error` is handed back as the adapter wrote it, its
    /// name unchecked, since a request the typed API cannot make may have any error of the
    /// protocol.
    fn send_raw(&self, store: &CommandStore, requests: &[RawRequest]) -> Option<Vec<RawAnswer>> {
        if let Some(e) = &store.opened {
            return Some(requests.iter().map(|_| Err(not_opened(e))).collect());
        }
        let sent = store.adapter.send_raw(store.id, requests);
        Some(sent.into_iter().map(|s| s.and_then(|s| store.adapter.wait(&s, Some(&store.clock)))).collect())
    }

    /// Why the adapter is broken, once it is: no request is sent to it any more.
    fn broken(&self) -> Option<String> {
        if let Some(why) = lock(&self.restart).clone() {
            return Some(why);
        }
        let adapter = lock(&self.adapter);
        // One that a power cut killed is started again for the next store.
        if adapter.cut.load(Ordering::SeqCst) { None } else { adapter.broken() }
    }

    /// Sends every lookup, then waits for their answers: one round trip for all.
    fn lookups(
        &self,
        store: &CommandStore,
        keys: &[(&ReservationScope, &Key)],
    ) -> Vec<StoreResult<Option<StoredReservation>>> {
        if let Some(e) = &store.opened {
            return keys.iter().map(|_| Err(not_opened(e).into())).collect();
        }
        let requests = keys.iter().map(|(scope, key)| store.lookup_request(scope, key)).collect();
        let sent = store.adapter.send_all(requests);
        sent.into_iter().map(|s| s.map_err(StoreError::from).and_then(|s| store.found(&s))).collect()
    }
}

/// A store in the adapter: its id there, and the suite's clock, sent with every request.
pub struct CommandStore {
    adapter: Arc<Adapter>,
    id: u64,
    clock: ManualClock,
    /// Why opening it failed, reported by every operation.
    opened: Option<StorageError>,
    /// Whether it was opened in a directory of the power-cut check ([`Harness::store_in`]).
    in_dir: bool,
}

impl CommandStore {
    /// Sends `request` without waiting for its answer.
    fn begin(&self, request: Value) -> StoreResult<Sent> {
        if let Some(e) = &self.opened {
            return Err(not_opened(e).into());
        }
        Ok(self.adapter.send(request)?)
    }

    /// Waits for the answer to a request [`CommandStore::begin`] sent.
    fn end(&self, sent: &Sent) -> StoreResult<Value> {
        match self.adapter.wait(sent, Some(&self.clock))? {
            Ok(v) => Ok(v),
            Err(error) => Err(self.error(&sent.request, &error)),
        }
    }

    fn lookup_request(&self, scope: &ReservationScope, key: &Key) -> Value {
        self.timed(|now| lookup_json(Some(self.id), now, scope, key))
    }

    /// The request `build` makes with its `now`: the clock's reading, or, while a hold waits for
    /// the clock's next reading ([`ManualClock::hold_pending`]), `"ask"`, so that the reading
    /// held is the one the store takes when it asks, not the driver's (which then only peeks).
    fn timed(&self, build: impl FnOnce(Instant) -> Value) -> Value {
        if !self.clock.hold_pending() {
            return build(self.clock.now());
        }
        let mut request = build(self.clock.peek());
        if let Some(fields) = request.as_object_mut() {
            fields.insert("now".into(), ASK.into());
        }
        request
    }

    /// The reservation a lookup's answer `ok` describes, or a failure naming what is wrong.
    fn found(&self, sent: &Sent) -> StoreResult<Option<StoredReservation>> {
        let ok = self.end(sent)?;
        parse_reservation(&ok).map_err(|why| {
            ShapeError::error(format!("its lookup answer {}: {}", quote(&ok.to_string()), quote(&why))).into()
        })
    }

    /// The store error an error object describes; [`split_answer`] has checked its shape.
    fn error(&self, request: &Value, error: &Value) -> StoreError {
        let field = |name: &str| error.get(name).and_then(Value::as_str).unwrap_or("");
        if field("kind") == STORAGE_ERROR {
            let indeterminate = error.get("indeterminate").and_then(Value::as_bool).unwrap_or(true);
            return StorageError::new(format!("adapter: {}", quote(field("message"))))
                .with_indeterminate(indeterminate)
                .into();
        }
        let name = field("name");
        match invalid_by_name(name) {
            Some(e) => e.into(),
            None => self.adapter.fail(request, &format!("it answered the invalid argument {:?}, which SPEC.md does not name or this request cannot have: {}", quote(name), quote(&error.to_string()))).into(),
        }
    }
}

impl Drop for CommandStore {
    /// Asks the adapter to close the store (`close`), without waiting for its answer; for a store
    /// opened in a power-cut check's directory, kills the adapter instead (`Adapter::power_cut`).
    fn drop(&mut self) {
        if self.in_dir {
            self.adapter.power_cut();
        } else if self.opened.is_none() {
            self.adapter.close(self.id);
        }
    }
}

impl ReservationStore for CommandStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        let sent = self.begin(self.timed(|now| operation_json(Some(self.id), now, &request)))?;
        let ok = self.end(&sent)?;
        match parse_outcome(&ok) {
            Some(o) if o.fits(request.operation.kind()) => Ok(o),
            _ => Err(self
                .adapter
                .fail(
                    &sent.request,
                    &format!(
                        "the outcome {} is not one {} can answer",
                        quote(&ok.to_string()),
                        request.operation.kind()
                    ),
                )
                .into()),
        }
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        let sent = self.begin(self.lookup_request(scope, key))?;
        self.found(&sent)
    }
}

/// Most bytes of a fault command's standard error kept, its last ones, for the failure.
const FAULT_STDERR: usize = 2_048;

/// Runs `command` by `sh -c` and waits for it to exit 0, for at most `timeout` (then kills it).
/// Its standard output is discarded; the last [`FAULT_STDERR`] bytes of its standard error are
/// quoted when it fails.
fn run_fault_command(command: &str, timeout: Duration) -> Result<(), StorageError> {
    let mut child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| StorageError::with_source(format!("the fault command `{command}` did not start"), e))?;
    // Drained on a thread of its own, so that a command that writes much never blocks on a full
    // pipe; only the end is kept.
    let (said_tx, said_rx) = mpsc::channel();
    if let Some(mut stderr) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut kept: VecDeque<u8> = VecDeque::new();
            let mut buf = [0u8; 1024];
            while let Ok(n @ 1..) = stderr.read(&mut buf) {
                kept.extend(&buf[..n]);
                let over = kept.len().saturating_sub(FAULT_STDERR);
                kept.drain(..over);
            }
            let _ = said_tx.send(String::from_utf8_lossy(kept.make_contiguous()).trim().to_owned());
        });
    }
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    // A process the command left running may hold its standard error open: wait a moment only.
    let said = said_rx.recv_timeout(Duration::from_secs(1)).unwrap_or_default();
    let said = if said.is_empty() { String::new() } else { format!("; its standard error ends: {said}") };
    match status {
        Some(status) if status.success() => Ok(()),
        Some(status) => Err(StorageError::new(format!("the fault command `{command}` exited with {status}{said}"))),
        None => Err(StorageError::new(format!("the fault command `{command}` did not end within {timeout:?}{said}"))),
    }
}
