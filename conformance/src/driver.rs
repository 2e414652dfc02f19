//! The driver: the suite against a store in any language, through an adapter process that speaks
//! JSON lines on its standard input and output (`PROTOCOL.md` in the repository).
//!
//! [`CommandHarness`] starts the adapter and is a [`Harness`] like any other, so every named
//! check, the differential test and the linearizability check run unchanged: each store the
//! suite asks for is a store id in the adapter, each operation one request that carries the
//! suite's clock, and requests from several threads are in flight at once (the adapter may answer
//! them in any order). [`serve`] is the other side for the reference `MemoryStore`
//! (`reservation serve`), so that the driver is tested against the reference itself.
//!
//! An adapter that hangs, dies, writes a line that is not JSON or answers an id nobody asked is a
//! [`StorageError`] (indeterminate: the request may have run) naming the request and quoting the
//! adapter's last lines of standard error; every wait ends after [`CommandHarness::TIMEOUT`] (or
//! the timeout given to [`CommandHarness::start_with`]). Once a request has no answer within it,
//! the adapter is broken: every request in flight and every later one fails at once. A line is
//! read up to [`MAX_LINE`] bytes and no further, the adapter's text is quoted by its first 200
//! bytes, and requests are written without blocking, so that neither a hang nor the memory a
//! peer costs grows with what it does.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::{BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use reservation_store::spec::Reservation;
use reservation_store::{
    AggregateId, AggregateRef, AggregateType, Clock, HoldId, Instant, InvalidArgument, Key, ManualClock, MemoryStore,
    Namespace, Operation, Outcome, ReleaseVersion, Request, ReservationScope, ReservationStore, StorageError,
    StoreError, StoreResult, StoredReservation, Tenant, Ttl, Version,
};
use serde_json::{Value, json};

use crate::harness::{Capabilities, Harness, Settings};

mod pipe;

pub use pipe::MAX_LINE;
use pipe::{Line, quote};

/// The protocol's JSON Schema (draft 2020-12): one line is a request or an answer; its
/// `$defs.vector_file` describes a test vector file ([`crate::vectors`]).
pub const SCHEMA: &str = include_str!("../schema/protocol.schema.json");

/// The protocol's version, sent in `hello`.
pub const PROTOCOL: u64 = 1;

/// Lines of the adapter's standard error kept for failure messages.
const STDERR_TAIL: usize = 20;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------------
// Values as JSON.

pub(crate) fn scope_json(s: &ReservationScope) -> Value {
    json!({"aggregate_type": s.aggregate_type.as_str(), "tenant": tenant_json(&s.tenant), "namespace": s.namespace.as_str()})
}

fn tenant_json(t: &Tenant) -> Value {
    match t {
        Tenant::System => Value::Null,
        Tenant::Id(id) => Value::from(id.as_str()),
    }
}

fn owner_json(o: &AggregateRef) -> Value {
    json!({"aggregate_type": o.aggregate_type.as_str(), "tenant": tenant_json(&o.tenant), "id": o.id.as_str()})
}

/// A reservation as the protocol writes it (D11's shapes): holds in ascending order of their
/// UTF-8 bytes, the expiry as an absolute instant.
pub fn reservation_json(r: &StoredReservation) -> Value {
    match r {
        Reservation::Pending(p) => json!({
            "state": "pending",
            "owner": owner_json(p.owner()),
            "holds": p.holds().iter().map(|h| h.as_str()).collect::<Vec<_>>(),
            "expires_at": p.expires_at().as_millis(),
        }),
        Reservation::Confirmed(c) => {
            json!({"state": "confirmed", "owner": owner_json(&c.owner), "version": c.version.as_u64()})
        }
    }
}

/// The request for `operation` on `scope`/`key` of store `store` at `now`.
pub fn operation_json(store: u64, now: Instant, request: &Request<'_>) -> Value {
    let mut v = json!({"store": store, "now": now.as_millis(), "scope": scope_json(request.scope), "key": request.key.as_str()});
    let fields = v.as_object_mut().expect("an object");
    match request.operation {
        Operation::Reserve { owner, hold, ttl } => {
            fields.insert("op".into(), "reserve".into());
            fields.insert("owner".into(), owner_json(owner));
            fields.insert("hold".into(), hold.as_str().into());
            fields.insert("ttl".into(), ttl.as_millis().into());
        }
        Operation::Confirm { owner, version } => {
            fields.insert("op".into(), "confirm".into());
            fields.insert("owner".into(), owner_json(owner));
            fields.insert("version".into(), version.as_u64().into());
        }
        Operation::Release { owner, version } => {
            fields.insert("op".into(), "release".into());
            fields.insert("owner".into(), owner_json(owner));
            let version = match version {
                ReleaseVersion::Any => Value::from("ANY"),
                ReleaseVersion::At(v) => v.as_u64().into(),
            };
            fields.insert("version".into(), version);
        }
        Operation::Abandon { owner, hold } => {
            fields.insert("op".into(), "abandon".into());
            fields.insert("owner".into(), owner_json(owner));
            fields.insert("hold".into(), hold.as_str().into());
        }
    }
    v
}

/// Why a JSON value is not what the protocol says.
type Bad = String;

fn text<'a>(v: &'a Value, field: &str) -> Result<&'a str, Bad> {
    v.get(field).and_then(Value::as_str).ok_or_else(|| format!("`{field}` is not a string"))
}

fn number(v: &Value, field: &str) -> Result<u64, Bad> {
    let n = v.get(field);
    // JSON's `-0` is an integer, 0, which serde_json reads as the float -0.0.
    let minus_zero = || n.and_then(Value::as_f64).filter(|f| *f == 0.0 && f.is_sign_negative()).map(|_| 0);
    n.and_then(Value::as_u64).or_else(minus_zero).ok_or_else(|| format!("`{field}` is not an integer in 0..=2^64-1"))
}

/// A typed value from a field, or the invalid argument its text is, or `Unrepresentable`.
enum Field<T> {
    Ok(T),
    Invalid(InvalidArgument),
}

fn parse_tenant(v: &Value) -> Result<Field<Tenant>, Bad> {
    match v {
        Value::Null => Ok(Field::Ok(Tenant::System)),
        Value::String(s) => Ok(match Tenant::id(s) {
            Ok(t) => Field::Ok(t),
            Err(e) => Field::Invalid(e),
        }),
        _ => Err("`tenant` is neither a string nor null".into()),
    }
}

macro_rules! field {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Ok(Field::Invalid(e)),
        }
    };
}

macro_rules! typed {
    ($e:expr) => {
        match $e? {
            Field::Ok(v) => v,
            Field::Invalid(e) => return Ok(Field::Invalid(e)),
        }
    };
}

fn parse_scope(v: &Value) -> Result<Field<ReservationScope>, Bad> {
    let v = v.get("scope").ok_or("no `scope`")?;
    let aggregate_type = field!(AggregateType::new(text(v, "aggregate_type")?));
    let tenant = typed!(parse_tenant(v.get("tenant").unwrap_or(&Value::Bool(false))));
    let namespace = field!(Namespace::new(text(v, "namespace")?));
    Ok(Field::Ok(ReservationScope::new(aggregate_type, tenant, namespace)))
}

fn parse_owner(v: &Value) -> Result<Field<AggregateRef>, Bad> {
    let v = v.get("owner").ok_or("no `owner`")?;
    let aggregate_type = field!(AggregateType::new(text(v, "aggregate_type")?));
    let tenant = typed!(parse_tenant(v.get("tenant").unwrap_or(&Value::Bool(false))));
    let id = field!(AggregateId::new(text(v, "id")?));
    Ok(Field::Ok(AggregateRef::new(aggregate_type, tenant, id)))
}

fn parse_owner_json(v: &Value) -> Result<AggregateRef, Bad> {
    match parse_owner(&json!({"owner": v}))? {
        Field::Ok(o) => Ok(o),
        Field::Invalid(e) => Err(format!("an owner the store answered is invalid: {}", e.name())),
    }
}

/// A reservation the adapter answered, in D11's shapes; `Err` says what is wrong with it.
pub fn parse_reservation(v: &Value) -> Result<Option<StoredReservation>, Bad> {
    if v.is_null() {
        return Ok(None);
    }
    let owner = parse_owner_json(v.get("owner").ok_or("no `owner`")?)?;
    match text(v, "state")? {
        "pending" => {
            let holds = v.get("holds").and_then(Value::as_array).ok_or("`holds` is not an array")?;
            let mut set = BTreeSet::new();
            for h in holds {
                let h = h.as_str().ok_or("a hold is not a string")?;
                let h = HoldId::new(h).map_err(|e| format!("a hold is invalid: {}", e.name()))?;
                if set.last().is_some_and(|last| *last >= h) {
                    return Err("`holds` are not in ascending order of their UTF-8 bytes, or repeat".into());
                }
                set.insert(h);
            }
            let expires_at = Instant::from_millis(number(v, "expires_at")?);
            Reservation::pending(owner, set, expires_at)
                .map(Some)
                .ok_or_else(|| "a pending reservation with no hold".into())
        }
        "confirmed" => Ok(Some(Reservation::confirmed(owner, Version::from_u64(number(v, "version")?)))),
        other => Err(format!("`state` {other:?} is neither \"pending\" nor \"confirmed\"")),
    }
}

pub(crate) fn error_json(e: &StoreError) -> Value {
    match e {
        StoreError::Invalid(e) => json!({"kind": "InvalidArgument", "name": e.name(), "message": e.to_string()}),
        StoreError::Storage(e) => {
            json!({"kind": "StorageError", "indeterminate": e.is_indeterminate(), "message": e.message()})
        }
    }
}

/// The invalid argument named `name`; `None` for a name the typed API cannot be given (a length
/// or an emptiness its types rule out before any request).
fn invalid_by_name(name: &str) -> Option<InvalidArgument> {
    use InvalidArgument::*;
    [
        EmptyKey,
        EmptyHoldId,
        EmptyNamespace,
        EmptyAggregateType,
        EmptyTenantId,
        EmptyAggregateId,
        TtlZero,
        ZeroStreamVersion,
        OwnerTypeMismatch,
        TenantMismatch,
    ]
    .into_iter()
    .find(|e| e.name() == name)
}

// ---------------------------------------------------------------------------------------------
// The adapter process.

/// The requests in flight, by id: where each one's answer (or why none will come) goes.
type Waiting = Arc<Mutex<HashMap<u64, mpsc::Sender<Result<Value, String>>>>>;

/// A request sent and not yet answered.
struct Sent {
    id: u64,
    request: Value,
    answer: mpsc::Receiver<Result<Value, String>>,
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
    child: Mutex<Child>,
    timeout: Duration,
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
            Ok(Line::End) => return "the adapter closed its standard output (it exited?)".to_owned(),
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
        let Some(id) = answer.get("id").and_then(Value::as_u64) else {
            return format!("the adapter wrote an answer without an integer `id`: {}", quote(text));
        };
        let Some(sender) = lock(waiting).remove(&id) else {
            return format!("the adapter answered id {id}, which no request in flight has: {}", quote(text));
        };
        let _ = sender.send(Ok(answer));
    }
}

impl Adapter {
    fn start(command: &str, timeout: Duration) -> Result<Adapter, StorageError> {
        let mut child = shell(command)
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
            child: Mutex::new(child),
            timeout,
        };
        if let Some(stderr) = stderr {
            let tail = adapter.stderr.clone();
            std::thread::spawn(move || pipe::tail_lines(stderr, &tail, STDERR_TAIL));
        }
        if let Some(stdout) = stdout {
            let (waiting, broken, outbox) = (adapter.waiting.clone(), adapter.broken.clone(), adapter.outbox.clone());
            std::thread::spawn(move || {
                let why = read_answers(stdout, &waiting);
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

    fn fail(&self, request: &Value, why: &str) -> StorageError {
        StorageError::indeterminate(format!(
            "driver: adapter `{}`: request {request}: {why}; {}",
            self.command,
            self.stderr_tail()
        ))
    }

    /// Sends `request` (an id is added) and waits for its answer: the `ok` value, or the error
    /// object.
    fn call(&self, request: Value) -> Result<Result<Value, Value>, StorageError> {
        let sent = self.send(request)?;
        self.wait(&sent)
    }

    /// Sends `request` with an id added, without waiting for its answer.
    fn send(&self, request: Value) -> Result<Sent, StorageError> {
        self.send_all(vec![request]).pop().unwrap_or_else(|| Err(StorageError::new("no request was sent")))
    }

    /// Sends `requests`, each with an id added, in one write, without waiting for their answers.
    /// The write does not block: while the adapter's input is full it waits for room for at most
    /// the timeout, after which the adapter is broken.
    fn send_all(&self, requests: Vec<Value>) -> Vec<Result<Sent, StorageError>> {
        let deadline = std::time::Instant::now() + self.timeout;
        let mut lines = String::new();
        let mut numbered = Vec::with_capacity(requests.len());
        for mut request in requests {
            let id = self.next.fetch_add(1, Ordering::SeqCst);
            if let Some(fields) = request.as_object_mut() {
                fields.insert("id".into(), id.into());
            }
            // Whole lines in one write: the pipe is unbuffered, and `writeln!` would write each
            // JSON token on its own, waking the adapter for each.
            lines.push_str(&request.to_string());
            lines.push('\n');
            numbered.push((id, request));
        }
        if let Some(why) = lock(&self.broken).clone() {
            return numbered.iter().map(|(_, request)| Err(self.fail(request, &why))).collect();
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
                Err(self.fail(&s.request, &why))
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
        let mut line = json!({"id": id, "op": "close", "store": store}).to_string();
        line.push('\n');
        // The answer is read and dropped: its id must be one in flight.
        lock(&self.waiting).insert(id, mpsc::channel().0);
        match self.outbox.push(line.as_bytes(), None) {
            Ok(()) => {}
            Err(pipe::Unsent::Full) => drop(lock(&self.waiting).remove(&id)),
            Err(pipe::Unsent::Failed(why)) => break_adapter(&self.broken, &self.waiting, &self.outbox, why),
        }
    }

    /// Waits for the answer to a request sent: the `ok` value, or the error object.
    fn wait(&self, sent: &Sent) -> Result<Result<Value, Value>, StorageError> {
        let answer = match sent.answer.recv_timeout(self.timeout) {
            Ok(Ok(answer)) => answer,
            Ok(Err(why)) => return Err(self.fail(&sent.request, &why)),
            Err(_) => {
                lock(&self.waiting).remove(&sent.id);
                self.stopped_answering(sent);
                return Err(self.fail(&sent.request, &format!("no answer within {:?}", self.timeout)));
            }
        };
        let Value::Object(mut fields) = answer else {
            return Err(
                self.fail(&sent.request, &format!("the answer {} is not an object", quote(&answer.to_string())))
            );
        };
        match (fields.remove("ok"), fields.remove("error")) {
            (Some(ok), None) => Ok(Ok(ok)),
            (None, Some(error)) => Ok(Err(error)),
            (ok, error) => Err(self.fail(
                &sent.request,
                &format!(
                    "the answer has neither exactly one of `ok` and `error` ({})",
                    quote(&format!("ok: {ok:?}, error: {error:?}"))
                ),
            )),
        }
    }

    /// The `ok` of a request that must succeed.
    fn expect_ok(&self, request: Value) -> Result<Value, StorageError> {
        let shown = request.clone();
        match self.call(request)? {
            Ok(v) => Ok(v),
            Err(e) => Err(self.fail(&shown, &format!("the adapter answered an error: {}", quote(&e.to_string())))),
        }
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
        // Closing standard input asks the adapter to exit; then it is killed, by its process id.
        self.outbox.close();
        let mut child = lock(&self.child);
        for _ in 0..50 {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

fn shell(command: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c").arg(command);
    c
}

/// What an adapter declared in its `hello` answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The protocol version it speaks.
    pub protocol: u64,
    /// Whether its store survives `reopen`.
    pub durable: bool,
}

/// The suite's harness for a store behind an adapter command (see the module).
pub struct CommandHarness {
    adapter: Arc<Adapter>,
    hello: Hello,
    stores: AtomicU64,
    settings: Settings,
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
        let not_started = |e: StorageError| StorageError::new(format!("the adapter did not start: {}", e.message()));
        let ok = adapter.expect_ok(json!({"op": "hello", "protocol": PROTOCOL})).map_err(not_started)?;
        let protocol = number(&ok, "protocol").map_err(|e| not_started(adapter.fail(&json!({"op": "hello"}), &e)))?;
        if protocol != PROTOCOL {
            let why = format!("it speaks protocol {protocol}, the driver {PROTOCOL}");
            return Err(not_started(adapter.fail(&json!({"op": "hello"}), &why)));
        }
        let durable = ok.get("durable").and_then(Value::as_bool).unwrap_or(false);
        let settings = Settings::default().with_cases(1_000).with_differential_threads(8);
        Ok(CommandHarness { adapter, hello: Hello { protocol, durable }, stores: AtomicU64::new(0), settings })
    }

    /// How many requests the driver has sent the adapter so far, `hello` and `open` included.
    pub fn requests(&self) -> u64 {
        self.adapter.next.load(Ordering::SeqCst)
    }

    /// What the adapter declared.
    pub fn hello(&self) -> Hello {
        self.hello
    }

    /// This harness with `settings` for the randomized checks.
    pub fn with_settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    fn open(&self, clock: ManualClock, reopen: Option<u64>) -> CommandStore {
        let id = self.stores.fetch_add(1, Ordering::SeqCst);
        let mut request = json!({"op": "open", "store": id, "now": clock.now().as_millis()});
        if let Some(old) = reopen {
            request = json!({"op": "reopen", "store": old, "as": id, "now": clock.now().as_millis()});
        }
        let opened = self.adapter.expect_ok(request).err();
        CommandStore { adapter: self.adapter.clone(), id, clock, opened }
    }
}

impl Harness for CommandHarness {
    type Store = CommandStore;

    fn store(&self, clock: ManualClock) -> CommandStore {
        self.open(clock, None)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(self.hello.durable)
    }

    fn reopen(&self, store: CommandStore, clock: ManualClock) -> Option<CommandStore> {
        self.hello.durable.then(|| self.open(clock, Some(store.id)))
    }

    fn settings(&self) -> Settings {
        self.settings
    }

    /// Sends every lookup, then waits for their answers: one round trip for all.
    fn lookups(
        &self,
        store: &CommandStore,
        keys: &[(&ReservationScope, &Key)],
    ) -> Vec<StoreResult<Option<StoredReservation>>> {
        if let Some(e) = &store.opened {
            let why = format!("the adapter did not open the store: {e}");
            return keys.iter().map(|_| Err(StorageError::new(why.clone()).into())).collect();
        }
        let requests = keys.iter().map(|(scope, key)| store.lookup_request(scope, key)).collect();
        let sent = self.adapter.send_all(requests);
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
}

impl CommandStore {
    /// Sends `request` without waiting for its answer.
    fn begin(&self, request: Value) -> StoreResult<Sent> {
        if let Some(e) = &self.opened {
            return Err(StorageError::new(format!("the adapter did not open the store: {e}")).into());
        }
        Ok(self.adapter.send(request)?)
    }

    /// Waits for the answer to a request [`CommandStore::begin`] sent.
    fn end(&self, sent: &Sent) -> StoreResult<Value> {
        match self.adapter.wait(sent)? {
            Ok(v) => Ok(v),
            Err(error) => Err(self.error(&sent.request, &error)),
        }
    }

    fn lookup_request(&self, scope: &ReservationScope, key: &Key) -> Value {
        json!({"op": "lookup", "store": self.id, "now": self.clock.now().as_millis(), "scope": scope_json(scope), "key": key.as_str()})
    }

    /// The reservation a lookup's answer `ok` describes, or a failure naming what is wrong.
    fn found(&self, sent: &Sent) -> StoreResult<Option<StoredReservation>> {
        let ok = self.end(sent)?;
        parse_reservation(&ok).map_err(|why| {
            let why = format!("its lookup answer {}: {}", quote(&ok.to_string()), quote(&why));
            self.adapter.fail(&sent.request, &why).into()
        })
    }

    fn error(&self, request: &Value, error: &Value) -> StoreError {
        let kind = error.get("kind").and_then(Value::as_str);
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        match kind {
            Some("InvalidArgument") => {
                let name = error.get("name").and_then(Value::as_str).unwrap_or("");
                match invalid_by_name(name) {
                    Some(e) => e.into(),
                    None => self.adapter.fail(request, &format!("it answered the invalid argument {:?}, which SPEC.md does not name or this request cannot have: {}", quote(name), quote(&error.to_string()))).into(),
                }
            }
            Some("StorageError") => {
                let indeterminate = error.get("indeterminate").and_then(Value::as_bool).unwrap_or(true);
                StorageError::new(format!("adapter: {}", quote(message))).with_indeterminate(indeterminate).into()
            }
            _ => self
                .adapter
                .fail(
                    request,
                    &format!(
                        "an error whose `kind` is neither InvalidArgument nor StorageError: {}",
                        quote(&error.to_string())
                    ),
                )
                .into(),
        }
    }
}

impl Drop for CommandStore {
    /// Asks the adapter to close the store (`close`), without waiting for its answer.
    fn drop(&mut self) {
        if self.opened.is_none() {
            self.adapter.close(self.id);
        }
    }
}

impl ReservationStore for CommandStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        let sent = self.begin(operation_json(self.id, self.clock.now(), &request))?;
        let ok = self.end(&sent)?;
        let name = ok.as_str().unwrap_or("");
        match Outcome::from_name(name) {
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

// ---------------------------------------------------------------------------------------------
// The other side, for MemoryStore.

/// One store of [`serve`]: a `MemoryStore` on a clock that the requests move, never back.
struct Served {
    store: MemoryStore<ManualClock>,
    clock: ManualClock,
    /// Serializes "move the clock, run the operation", so that the clock is read under it (D10).
    turn: Mutex<()>,
}

/// Answers the protocol's requests, one line each, from `input` on `output`, with a
/// `MemoryStore` per store id (from its `open` to its `close`): the reference behind the driver
/// (`reservation serve`). Returns when `input` ends. A request it cannot read is answered with an
/// error naming the problem (`Unrepresentable` for a value the typed API cannot hold: a line that
/// is not UTF-8 or not JSON, a number beyond what JSON numbers are read as, a line longer than
/// [`MAX_LINE`] bytes, which is not read into memory), with the request's id when that can be
/// read, and the next line is read: never a crash.
///
/// Answers are buffered while more requests are already waiting in `input`, and written out
/// whenever it has none: one write for a burst of requests rather than one each.
pub fn serve(input: impl Read, output: impl Write) -> std::io::Result<()> {
    let mut input = BufReader::with_capacity(1 << 16, input);
    let mut output = std::io::BufWriter::with_capacity(1 << 16, output);
    let mut stores: HashMap<u64, Arc<Served>> = HashMap::new();
    let mut line = Vec::new();
    loop {
        let answer = match pipe::read_line(&mut input, &mut line, MAX_LINE)? {
            Line::End => break,
            Line::Whole => answer_bytes(&mut stores, &line),
            Line::TooLong => {
                pipe::skip_line(&mut input)?;
                let why = format!("a line longer than {MAX_LINE} bytes, the protocol's limit");
                Some(format!("{}\n", json!({"id": null, "error": unrepresentable(why)})))
            }
        };
        if let Some(answer) = answer {
            output.write_all(answer.as_bytes())?;
        }
        if input.buffer().is_empty() {
            output.flush()?;
        }
    }
    output.flush()
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
            json!({"id": id, "error": {"kind": "InvalidArgument", "name": "Unrepresentable", "message": why}})
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

pub(crate) fn unrepresentable(why: impl std::fmt::Display) -> Value {
    json!({"kind": "InvalidArgument", "name": "Unrepresentable", "message": why.to_string()})
}

/// The error for a request on a store that is not open.
fn unknown_store(store: u64) -> Value {
    unrepresentable(format!("no store {store} is open"))
}

fn answer(stores: &mut HashMap<u64, Arc<Served>>, r: &Value) -> Result<Value, Value> {
    let op = text(r, "op").map_err(unrepresentable)?;
    if op == "hello" {
        return Ok(json!({"protocol": PROTOCOL, "durable": false}));
    }
    let store = number(r, "store").map_err(unrepresentable)?;
    if op == "open" {
        // The clock is the latest `now` of the store's operations; none has run yet.
        let clock = ManualClock::new(Instant::ZERO);
        stores.insert(
            store,
            Arc::new(Served { store: MemoryStore::with_clock(clock.clone()), clock, turn: Mutex::new(()) }),
        );
        return Ok(Value::Null);
    }
    if op == "close" {
        // Later requests on the store answer that no such store is open.
        return stores.remove(&store).map(|_| Value::Null).ok_or_else(|| unknown_store(store));
    }
    if op == "reopen" {
        return Err(
            json!({"kind": "StorageError", "indeterminate": false, "message": "MemoryStore keeps nothing across a reopen"}),
        );
    }
    let served = stores.get(&store).ok_or_else(|| unknown_store(store))?.clone();
    let _turn = lock(&served.turn);
    run_request(&crate::MemoryHarness, &served.store, &served.clock, r)
}

/// Runs one operation or lookup request `r` (the protocol's fields; `id` and `store` are not
/// read) on `store`, first moving `clock` to the request's `now` unless it is already later
/// (D10), and answers as an adapter does: the `ok` value or the error object. The caller
/// serializes requests on one store.
pub(crate) fn run_request<H: Harness>(h: &H, store: &H::Store, clock: &ManualClock, r: &Value) -> Result<Value, Value> {
    let op = text(r, "op").map_err(unrepresentable)?;
    let now = Instant::from_millis(number(r, "now").map_err(unrepresentable)?);
    if now > clock.now() {
        clock.set(now);
    }
    let invalid = |e: InvalidArgument| error_json(&e.into());
    let scope = match parse_scope(r).map_err(unrepresentable)? {
        Field::Ok(s) => s,
        Field::Invalid(e) => return Err(invalid(e)),
    };
    let key = Key::new(text(r, "key").map_err(unrepresentable)?).map_err(invalid)?;
    let run = |operation| h.block_on(store.execute(Request::new(&scope, &key, operation)));
    let outcome = match op {
        "lookup" => {
            let found = h.block_on(store.lookup(&scope, &key)).map_err(|e| error_json(&e))?;
            return Ok(found.as_ref().map_or(Value::Null, reservation_json));
        }
        "reserve" | "confirm" | "release" | "abandon" => {
            let owner = match parse_owner(r).map_err(unrepresentable)? {
                Field::Ok(o) => o,
                Field::Invalid(e) => return Err(invalid(e)),
            };
            match op {
                "reserve" => {
                    let hold = HoldId::new(text(r, "hold").map_err(unrepresentable)?).map_err(invalid)?;
                    let ttl = Ttl::from_millis(number(r, "ttl").map_err(unrepresentable)?).map_err(invalid)?;
                    run(Operation::Reserve { owner: &owner, hold: &hold, ttl })
                }
                "abandon" => {
                    let hold = HoldId::new(text(r, "hold").map_err(unrepresentable)?).map_err(invalid)?;
                    run(Operation::Abandon { owner: &owner, hold: &hold })
                }
                "confirm" => {
                    let version = Version::from_u64(number(r, "version").map_err(|_| {
                        unrepresentable("confirm takes an integer version in 0..=2^64-1, not ANY (D4)")
                    })?);
                    run(Operation::Confirm { owner: &owner, version })
                }
                _ => {
                    let version = match r.get("version") {
                        Some(Value::String(s)) if s == "ANY" => ReleaseVersion::Any,
                        _ => ReleaseVersion::At(Version::from_u64(number(r, "version").map_err(unrepresentable)?)),
                    };
                    run(Operation::Release { owner: &owner, version })
                }
            }
        }
        other => return Err(unrepresentable(format!("unknown op {other:?}"))),
    };
    outcome.map(|o| Value::from(o.name())).map_err(|e| error_json(&e))
}
