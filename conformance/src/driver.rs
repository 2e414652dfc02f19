//! The driver: the suite against a store in any language, through an adapter process that speaks
//! JSON lines on its standard input and output (`PROTOCOL.md` in the repository).
//!
//! [`CommandHarness`] starts the adapter and is a [`Harness`] like any other, so every named
//! check, the differential test and the linearizability check run unchanged: each store the
//! suite asks for is a store id in the adapter, each operation one request that carries the
//! suite's clock, and requests from several threads are in flight at once (the adapter may answer
//! them in any order). [`serve`] is the other side for `MemoryStore`
//! (`reservation serve`), so that the driver is tested against a store that decides through `spec`.
//!
//! An adapter that hangs, dies, writes a line that is not JSON, answers an id nobody asked or
//! writes an answer whose fields are not exactly those the protocol's schema gives it is a
//! [`StorageError`] (indeterminate: the request may have run) marked as a [`ProtocolError`], naming
//! the request and quoting the adapter's last lines of standard error; every wait ends after
//! [`CommandHarness::TIMEOUT`] (or the timeout given to [`CommandHarness::start_with`]). Once a
//! request has no answer within it, the adapter is broken: every request in flight and every
//! later one fails at once. A line is read up to [`MAX_LINE`] bytes and no further, the adapter's
//! text is quoted by its first 200 bytes, and requests are written without blocking, so that
//! neither a hang nor the memory a peer costs grows with what it does.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

use reservation_store::spec::Reservation;
use reservation_store::{
    AggregateId, AggregateRef, AggregateType, Clock, HoldId, Instant, InvalidArgument, Key, ManualClock, MemoryStore,
    Namespace, Operation, Outcome, ReleaseVersion, Request, ReservationScope, ReservationStore, StorageError,
    StoreError, StoreResult, StoredReservation, Tenant, Ttl, Version, error_chain,
};
use serde_json::{Value, json};

use crate::harness::{Capabilities, Harness, RawAnswer, RawRequest, Settings};

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
    exact(v, "the reservation's `owner`", &["aggregate_type", "tenant", "id"])?;
    match parse_owner(&json!({"owner": v}))? {
        Field::Ok(o) => Ok(o),
        Field::Invalid(e) => Err(format!("an owner the store answered is invalid: {}", e.name())),
    }
}

/// `v` as an object with exactly the fields `fields`, as the protocol's schema gives `what`:
/// `Err` names the first missing field, or a field the schema does not have.
fn exact<'a>(v: &'a Value, what: &str, fields: &[&str]) -> Result<&'a serde_json::Map<String, Value>, Bad> {
    let Value::Object(map) = v else { return Err(format!("{what} is not an object: {v}")) };
    if let Some(missing) = fields.iter().find(|f| !map.contains_key(**f)) {
        return Err(format!("{what} has no field `{missing}`"));
    }
    // Every field named is present: any other makes the map longer.
    if let Some(unknown) = map.keys().find(|k| !fields.contains(&k.as_str())) {
        return Err(format!("{what} has a field `{unknown}`, which the protocol does not give it"));
    }
    Ok(map)
}

/// A reservation the adapter answered, in D11's shapes, with exactly the fields the protocol's
/// schema gives each shape; `Err` says what is wrong with it, naming the field.
pub fn parse_reservation(v: &Value) -> Result<Option<StoredReservation>, Bad> {
    if v.is_null() {
        return Ok(None);
    }
    let state = v.get("state").ok_or("the reservation (D11) has no field `state`")?;
    let fields: &[&str] = match state.as_str() {
        Some("pending") => &["state", "owner", "holds", "expires_at"],
        Some("confirmed") => &["state", "owner", "version"],
        _ => return Err(format!("the reservation's `state` {state} is neither \"pending\" nor \"confirmed\" (D11)")),
    };
    let what = format!("a {} reservation (D11)", state.as_str().unwrap_or_default());
    exact(v, &what, fields)?;
    let owner = parse_owner_json(v.get("owner").ok_or("no `owner`")?)?;
    if state.as_str() == Some("pending") {
        let holds = v.get("holds").and_then(Value::as_array).ok_or("`holds` is not an array")?;
        let mut set = BTreeSet::new();
        for h in holds {
            let h = h.as_str().ok_or("a hold is not a string")?;
            let h = HoldId::new(h).map_err(|e| format!("a hold is invalid: {}", e.name()))?;
            if set.last().is_some_and(|last| *last >= h) {
                return Err("`holds` are not in ascending order of their UTF-8 bytes, or repeat (D11)".into());
            }
            set.insert(h);
        }
        let expires_at = Instant::from_millis(number(v, "expires_at")?);
        Reservation::pending(owner, set, expires_at)
            .map(Some)
            .ok_or_else(|| "a pending reservation with no hold".into())
    } else {
        Ok(Some(Reservation::confirmed(owner, Version::from_u64(number(v, "version")?))))
    }
}

/// The name of every invalid argument of SPEC.md's table of errors, and `Unrepresentable`: the
/// names an `InvalidArgument` error may have.
pub fn error_names() -> [&'static str; 17] {
    use InvalidArgument::*;
    let (len, max) = (0, 0);
    let typed = [
        EmptyKey,
        KeyTooLong { len, max },
        EmptyHoldId,
        HoldIdTooLong { len, max },
        EmptyAggregateType,
        AggregateTypeTooLong { len, max },
        EmptyTenantId,
        TenantIdTooLong { len, max },
        EmptyNamespace,
        NamespaceTooLong { len, max },
        EmptyAggregateId,
        AggregateIdTooLong { len, max },
        TtlZero,
        ZeroStreamVersion,
        OwnerTypeMismatch,
        TenantMismatch,
    ];
    let mut names = ["Unrepresentable"; 17];
    for (name, e) in names.iter_mut().zip(typed) {
        *name = e.name();
    }
    names
}

/// Checks an answer's error object against the protocol's two shapes, naming the field that is
/// missing, unknown or of the wrong type.
fn check_error(error: &Value) -> Result<(), Bad> {
    match error.get("kind").and_then(Value::as_str) {
        Some("InvalidArgument") => {
            let e = exact(error, "the InvalidArgument error", &["kind", "name", "message"])?;
            let name = e.get("name").and_then(Value::as_str).ok_or("the error's `name` is not a string")?;
            if !error_names().contains(&name) {
                return Err(format!("the error's `name` {name:?} is one SPEC.md's table of errors does not name"));
            }
            e.get("message").and_then(Value::as_str).ok_or("the error's `message` is not a string")?;
        }
        Some("StorageError") => {
            let e = exact(error, "the StorageError error", &["kind", "indeterminate", "message"])?;
            e.get("indeterminate").and_then(Value::as_bool).ok_or("the error's `indeterminate` is not a boolean")?;
            e.get("message").and_then(Value::as_str).ok_or("the error's `message` is not a string")?;
        }
        _ => return Err(format!("an error whose `kind` is neither InvalidArgument nor StorageError: {error}")),
    }
    Ok(())
}

/// An answer split into its `ok` value or its error object, each checked against the protocol:
/// exactly `id` and one of `ok` and `error`, and an error of one of the two shapes.
fn split_answer(answer: Value) -> Result<Result<Value, Value>, Bad> {
    let Value::Object(mut fields) = answer else {
        return Err(format!("the answer {answer} is not an object"));
    };
    let (ok, error) = (fields.remove("ok"), fields.remove("error"));
    if let Some(unknown) = fields.keys().find(|k| *k != "id") {
        return Err(format!("the answer has a field `{unknown}`, which the protocol does not give it"));
    }
    match (ok, error) {
        (Some(ok), None) => Ok(Ok(ok)),
        (None, Some(error)) => check_error(&error).map(|()| Err(error)),
        (ok, error) => {
            Err(format!("the answer has neither exactly one of `ok` and `error` (ok: {ok:?}, error: {error:?})"))
        }
    }
}

/// What an adapter declared in its `hello` answer's `ok`: exactly `protocol`, this driver's, and
/// `durable`.
fn parse_hello(ok: &Value) -> Result<Hello, Bad> {
    exact(ok, "the hello answer", &["protocol", "durable"])?;
    let protocol = number(ok, "protocol")?;
    if protocol != PROTOCOL {
        return Err(format!("it speaks protocol {protocol}, the driver {PROTOCOL}"));
    }
    let durable = ok.get("durable").and_then(Value::as_bool).ok_or("`durable` is not a boolean")?;
    Ok(Hello { protocol, durable })
}

/// Whether `answer`, one line an adapter wrote, has the shape the protocol gives the answer to a
/// request of `op`, as the driver checks it: an integer `id` and exactly one of `ok` and `error`;
/// the `ok` of `hello` its two fields, of `open` and `reopen` null, of an operation an outcome's
/// name, of a lookup null or a reservation with exactly its shape's fields; an error of one of
/// the two shapes. `Err` says what is wrong, naming the field. The driver checks more than the
/// shape (an outcome its operation can have, an error name the request can have, valid values);
/// the protocol's schema says the same about the shape, which its tests hold it to.
pub fn check_answer(op: &str, answer: &Value) -> Result<(), String> {
    answer.get("id").and_then(Value::as_u64).ok_or("the answer has no integer `id`")?;
    let Ok(ok) = split_answer(answer.clone())? else { return Ok(()) };
    match op {
        "hello" => parse_hello(&ok).map(drop),
        "open" | "reopen" if ok.is_null() => Ok(()),
        "open" | "reopen" => Err(format!("the answer to {op} is {ok}, not null")),
        "lookup" => parse_reservation(&ok).map(drop),
        "reserve" | "confirm" | "release" | "abandon" => match ok.as_str().and_then(Outcome::from_name) {
            Some(_) => Ok(()),
            None => Err(format!("{ok} is not an outcome's name")),
        },
        other => Err(format!("no request has the op {other:?}")),
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
// Protocol failures.

/// The mark of a [`StorageError`] that the driver raised because the adapter broke the protocol
/// (`PROTOCOL.md`): it hung, died, wrote a line that is not JSON (a log line on its standard
/// output), answered an id nobody asked, or an answer the protocol does not allow. Such an error
/// is the error's [source](std::error::Error::source), and says what happened; the error itself
/// is indeterminate (the request may have run). The suite reports it as the adapter's failure,
/// never as a rule broken, once per run, and saves no regression seed for it.
///
/// A `StorageError` that the adapter answered (`{"kind": "StorageError", ...}`) is the store's,
/// and carries no mark.
#[derive(Debug)]
pub struct ProtocolError(String);

impl ProtocolError {
    /// The message of every marked error; the details are its source's.
    pub const MESSAGE: &'static str = "the adapter broke the protocol";

    /// An indeterminate [`StorageError`] marked as the adapter's protocol failure, which
    /// `details` describes.
    pub fn error(details: impl Into<String>) -> StorageError {
        StorageError::with_source(Self::MESSAGE, ProtocolError(details.into())).with_indeterminate(true)
    }

    /// The mark of `error`, if the driver raised it for a protocol failure.
    pub fn of(error: &StorageError) -> Option<&ProtocolError> {
        std::error::Error::source(error).and_then(|s| s.downcast_ref::<ProtocolError>())
    }

    /// The mark of `error`, if it is a storage error the driver raised for a protocol failure.
    pub fn in_result_error(error: &StoreError) -> Option<&ProtocolError> {
        match error {
            StoreError::Storage(e) => ProtocolError::of(e),
            StoreError::Invalid(_) => None,
        }
    }

    /// What the adapter did: the request, what went wrong, and the end of its standard error.
    pub fn details(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// The mark of a lookup answered with a reservation that is not of D11's shapes (a field the
/// shape does not have, holds out of order): a well-formed answer whose content breaks D11, the
/// store's failure and not a break of the protocol.
#[derive(Debug)]
pub struct ShapeError(String);

impl ShapeError {
    /// An indeterminate [`StorageError`] marked as a reservation of the wrong shape, which
    /// `details` describes.
    pub fn error(details: impl Into<String>) -> StorageError {
        StorageError::with_source("the store answered a reservation of no shape D11 gives", ShapeError(details.into()))
            .with_indeterminate(true)
    }

    /// The mark of `error`, if it is a storage error the driver raised for a reservation's shape.
    pub fn in_result_error(error: &StoreError) -> Option<&ShapeError> {
        match error {
            StoreError::Storage(e) => std::error::Error::source(e).and_then(|s| s.downcast_ref::<ShapeError>()),
            StoreError::Invalid(_) => None,
        }
    }
}

impl std::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ShapeError {}

/// `error`, which kept a store from opening, as the error of a request to that store: still
/// marked when it was a protocol failure.
fn not_opened(error: &StorageError) -> StorageError {
    match ProtocolError::of(error) {
        Some(p) => ProtocolError::error(format!("the adapter did not open the store: {p}")),
        None => StorageError::new(format!("the adapter did not open the store: {}", error_chain(error))),
    }
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
        ProtocolError::error(format!(
            "driver: adapter `{}`: request {request}: {why}; {}",
            self.command,
            self.stderr_tail()
        ))
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
            Some(clock) if sent.request.get("now").and_then(Value::as_str) == Some("ask") => clock,
            _ => {
                return Err(
                    self.fail(&sent.request, "the adapter asked for the clock of a request whose `now` is not \"ask\"")
                );
            }
        };
        let mut line = json!({"clock": sent.id, "now": clock.now().as_millis()}).to_string();
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
        let not_started = |e: StorageError| {
            let why = ProtocolError::of(&e).map_or_else(|| e.message().to_owned(), ToString::to_string);
            StorageError::new(format!("the adapter did not start: {why}"))
        };
        let ok = adapter.expect_ok(json!({"op": "hello", "protocol": PROTOCOL})).map_err(not_started)?;
        let hello = parse_hello(&ok).map_err(|e| {
            not_started(adapter.fail(&json!({"op": "hello"}), &format!("{e}: {}", quote(&ok.to_string()))))
        })?;
        let settings = Settings::default().with_cases(1_000).with_differential_threads(8);
        Ok(CommandHarness { adapter, hello, stores: AtomicU64::new(0), settings })
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
        // A peek: opening is not the store deciding, so it takes no reading a check holds.
        let now = clock.peek().as_millis();
        let mut request = json!({"op": "open", "store": id, "now": now});
        if let Some(old) = reopen {
            request = json!({"op": "reopen", "store": old, "as": id, "now": now});
        }
        let opened = match self.adapter.expect_ok(request.clone()) {
            Ok(Value::Null) => None,
            Ok(ok) => Some(self.adapter.fail(&request, &format!("the answer's `ok` is {ok}, not null"))),
            Err(e) => Some(e),
        };
        CommandStore { adapter: self.adapter.clone(), id, clock, opened }
    }
}

impl Harness for CommandHarness {
    type Store = CommandStore;

    fn store(&self, clock: ManualClock) -> CommandStore {
        self.open(clock, None)
    }

    fn capabilities(&self) -> Capabilities {
        // The protocol asks every durable adapter to keep a store's clock across a reopen.
        Capabilities::default().with_durable(self.hello.durable).with_clock_survives_reopen(self.hello.durable)
    }

    fn reopen(&self, store: CommandStore, clock: ManualClock) -> Option<CommandStore> {
        self.hello.durable.then(|| self.open(clock, Some(store.id)))
    }

    fn settings(&self) -> Settings {
        self.settings
    }

    /// Sends every request as it is written, with the store's id, then waits for their answers:
    /// one round trip for all. An answer's `error` is handed back as the adapter wrote it, its
    /// name unchecked, since a request the typed API cannot make may have any error of the
    /// protocol.
    fn send_raw(&self, store: &CommandStore, requests: &[RawRequest]) -> Option<Vec<RawAnswer>> {
        if let Some(e) = &store.opened {
            return Some(requests.iter().map(|_| Err(not_opened(e))).collect());
        }
        let sent = self.adapter.send_raw(store.id, requests);
        Some(sent.into_iter().map(|s| s.and_then(|s| self.adapter.wait(&s, Some(&store.clock)))).collect())
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
        self.timed(|now| json!({"op": "lookup", "store": self.id, "now": now.as_millis(), "scope": scope_json(scope), "key": key.as_str()}))
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
            fields.insert("now".into(), "ask".into());
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
        if field("kind") == "StorageError" {
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
    /// Asks the adapter to close the store (`close`), without waiting for its answer.
    fn drop(&mut self) {
        if self.opened.is_none() {
            self.adapter.close(self.id);
        }
    }
}

impl ReservationStore for CommandStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        let sent = self.begin(self.timed(|now| operation_json(self.id, now, &request)))?;
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
/// `MemoryStore` per store id (from its `open` to its `close`): the store behind the driver's
/// own tests (`reservation serve`). Returns when `input` ends. A request it cannot read is answered with an
/// error naming the problem (`Unrepresentable` for a value the typed API cannot hold: a line that
/// is not UTF-8 or not JSON, a number beyond what JSON numbers are read as, a line longer than
/// [`MAX_LINE`] bytes, which is not read into memory), with the request's id when that can be
/// read, and the next line is read: never a crash.
///
/// Answers are buffered while more requests are already waiting in `input`, and written out
/// whenever it has none: one write for a burst of requests rather than one each.
///
/// A request whose `now` is `"ask"` asks the driver for its clock when it runs
/// ([`ask_clock`]); requests that arrive before the answer wait their turn.
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
    if !line.contains("\"ask\"") {
        return None;
    }
    let request = serde_json::from_str::<Value>(line).ok()?;
    if request.get("now")?.as_str()? != "ask" {
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
    let mut question = json!({"clock": id}).to_string();
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
    text(r, "op").map_err(unrepresentable)?;
    let now = Instant::from_millis(number(r, "now").map_err(unrepresentable)?);
    if now > clock.now() {
        clock.set(now);
    }
    let Parsed { scope, key, call, .. } = parse_request(r)?;
    match call {
        Call::Lookup => {
            let found = h.block_on(store.lookup(&scope, &key)).map_err(|e| error_json(&e))?;
            Ok(found.as_ref().map_or(Value::Null, reservation_json))
        }
        Call::Operation(operation) => h
            .block_on(store.execute(Request::new(&scope, &key, operation.as_ref())))
            .map(|o| Value::from(o.name()))
            .map_err(|e| error_json(&e)),
    }
}

/// A request of the protocol read into typed values.
pub(crate) struct Parsed {
    /// The request's instant.
    pub(crate) now: Instant,
    pub(crate) scope: ReservationScope,
    pub(crate) key: Key,
    pub(crate) call: Call,
}

/// What a [`Parsed`] request does on its (scope, key).
pub(crate) enum Call {
    Lookup,
    Operation(Operation<AggregateRef, HoldId>),
}

/// Reads the request `r` (the protocol's fields; `id` and `store` are not read) into typed
/// values, or the error object an adapter answers it with: `Unrepresentable` for a value the
/// typed API cannot hold, else the invalid argument that the core's constructors name. Whether
/// the scope admits the owner is left to [`Request::admitted`].
pub(crate) fn parse_request(r: &Value) -> Result<Parsed, Value> {
    let op = text(r, "op").map_err(unrepresentable)?;
    let now = Instant::from_millis(number(r, "now").map_err(unrepresentable)?);
    let invalid = |e: InvalidArgument| error_json(&e.into());
    let scope = match parse_scope(r).map_err(unrepresentable)? {
        Field::Ok(s) => s,
        Field::Invalid(e) => return Err(invalid(e)),
    };
    let key = Key::new(text(r, "key").map_err(unrepresentable)?).map_err(invalid)?;
    let call = match op {
        "lookup" => Call::Lookup,
        "reserve" | "confirm" | "release" | "abandon" => {
            let owner = match parse_owner(r).map_err(unrepresentable)? {
                Field::Ok(o) => o,
                Field::Invalid(e) => return Err(invalid(e)),
            };
            let hold = || HoldId::new(text(r, "hold").map_err(unrepresentable)?).map_err(invalid);
            Call::Operation(match op {
                "reserve" => {
                    let hold = hold()?;
                    let ttl = Ttl::from_millis(number(r, "ttl").map_err(unrepresentable)?).map_err(invalid)?;
                    Operation::Reserve { owner, hold, ttl }
                }
                "abandon" => Operation::Abandon { owner, hold: hold()? },
                "confirm" => {
                    let version = Version::from_u64(number(r, "version").map_err(|_| {
                        unrepresentable("confirm takes an integer version in 0..=2^64-1, not ANY (D4)")
                    })?);
                    Operation::Confirm { owner, version }
                }
                _ => {
                    let version = match r.get("version") {
                        Some(Value::String(s)) if s == "ANY" => ReleaseVersion::Any,
                        _ => ReleaseVersion::At(Version::from_u64(number(r, "version").map_err(unrepresentable)?)),
                    };
                    Operation::Release { owner, version }
                }
            })
        }
        other => return Err(unrepresentable(format!("unknown op {other:?}"))),
    };
    Ok(Parsed { now, scope, key, call })
}
