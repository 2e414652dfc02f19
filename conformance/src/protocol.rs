//! The protocol's wire format (`PROTOCOL.md`): requests encoded from typed values and decoded
//! back into them, answers encoded and decoded, each checked against the shapes the protocol's
//! schema gives them; the names of requests (an operation's is its [`OperationKind::name`]) and
//! of errors, the rules numbers follow, and the bound on a line; the marks of the errors of an
//! adapter that breaks the protocol ([`ProtocolError`]) or answers a reservation of no shape
//! ([`ShapeError`]); and one request run on a harness's store ([`run_request`]). The driver's
//! client and [`serve()`](crate::driver::serve()) speak through it, and so do the vectors, the
//! sweep of arguments and the failures that quote a request.

use std::collections::BTreeSet;

use reservation_store::spec::Reservation;
use reservation_store::{
    AggregateId, AggregateRef, AggregateType, Clock, HoldId, Instant, InvalidArgument, Key, ManualClock, Namespace,
    Operation, OperationKind, Outcome, ReleaseVersion, Request, ReservationScope, ReservationStore, StorageError,
    StoreError, StoredReservation, Tenant, Ttl, Version,
};
use serde_json::{Value, json};

use crate::harness::{Harness, Persistence};

/// The longest line, in bytes without its `\n`, that the driver reads from an adapter and that
/// `serve` reads from the driver: 1 MiB. The longest legal answer is a lookup of a pending
/// reservation: a few kilobytes and each hold's JSON string, at most 770 bytes (128 bytes of
/// UTF-8, each escaped as `\u00XX`), so that more than a thousand holds fit.
pub const MAX_LINE: usize = 1 << 20;

/// The protocol's JSON Schema (draft 2020-12): one line is a request or an answer; its
/// `$defs.vector_file` describes a test vector file ([`crate::vectors`]).
pub const SCHEMA: &str = include_str!("../schema/protocol.schema.json");

/// The protocol's version: the one the driver runs, sent in `hello` (`PROTOCOL.md`, "Versions").
pub const PROTOCOL: u64 = 3;

/// Each version of the protocol and what it added, oldest first: the driver's refusal of an
/// older adapter names what changed since its version; `PROTOCOL.md`'s history says the same.
pub const VERSIONS: [(u64, &str); 3] = [
    (1, "requests and answers as JSON lines, `hello`, `open`, `reopen`, the four operations and `lookup`"),
    (
        2,
        "clock questions (an operation's or lookup's `now` may be \"ask\": the adapter asks `{\"clock\": ID}` and the \
         driver answers `{\"clock\": ID, \"now\": T}`), `close`, a line of at most 1 MiB, `hello` negotiated",
    ),
    (
        3,
        "power cuts: `hello`'s answer declares what the store survives (`\"power_cuts\"`: null or a persistence \
         model), and an adapter that declares one is sent `open` with a `dir`, where the store keeps its storage, \
         and is killed and started again at each cut",
    ),
];

/// The section of `PROTOCOL.md` that an adapter refused at `hello` is sent to.
pub const VERSIONS_SECTION: &str = "PROTOCOL.md, \"Versions\"";

/// How a request writes `ANY_VERSION` (release only, D4).
const ANY: &str = "ANY";

/// The `now` of a request that leaves the reading of the clock to the store, which asks the
/// driver for it when it decides (D10).
pub(crate) const ASK: &str = "ask";

/// The `kind` of an error for an invalid argument.
pub(crate) const INVALID_ARGUMENT: &str = "InvalidArgument";

/// The `kind` of a storage error.
pub(crate) const STORAGE_ERROR: &str = "StorageError";

/// The name of the invalid argument a value the typed API cannot hold is.
const UNREPRESENTABLE: &str = "Unrepresentable";

/// What a request asks, by its `op`; an operation's name is its [`OperationKind::name`]. Each
/// name is written here once, and requests are encoded and decoded through it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Verb {
    /// `hello`: the protocol's version and the adapter's capabilities.
    Hello,
    /// `open`: a new store.
    Open,
    /// `reopen`: a store closed and opened again on the same storage.
    Reopen,
    /// `close`: the driver is done with a store.
    Close,
    /// `lookup`: a key's reservation.
    Lookup,
    /// One of the four operations.
    Operation(OperationKind),
}

impl Verb {
    /// The requests that are not operations.
    const OTHERS: [Verb; 5] = [Verb::Hello, Verb::Open, Verb::Reopen, Verb::Close, Verb::Lookup];

    /// The `op` of a request that asks this.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Verb::Hello => "hello",
            Verb::Open => "open",
            Verb::Reopen => "reopen",
            Verb::Close => "close",
            Verb::Lookup => "lookup",
            Verb::Operation(kind) => kind.name(),
        }
    }

    /// The request whose `op` is `name`, exactly as [`Verb::name`] spells it.
    pub(crate) fn from_name(name: &str) -> Option<Verb> {
        Verb::OTHERS
            .into_iter()
            .find(|v| v.name() == name)
            .or_else(|| OperationKind::from_name(name).map(Verb::Operation))
    }
}

// Requests.

/// The `hello` request, without its id.
pub(crate) fn hello_json() -> Value {
    json!({"op": Verb::Hello.name(), "protocol": PROTOCOL})
}

/// The `ok` of the answer to `hello`: this protocol, whether the stores are `durable`, and the
/// promise to survive power cuts, none.
pub(crate) fn hello_answer_json(durable: bool) -> Value {
    json!({"protocol": PROTOCOL, "durable": durable, "power_cuts": null})
}

/// The request that opens store `store` at `now`, without its id; with `dir`, the directory where
/// the store keeps its storage (the power-cut check's mount).
pub(crate) fn open_json(store: u64, now: Instant, dir: Option<&str>) -> Value {
    let mut request = json!({"op": Verb::Open.name(), "store": store, "now": now.as_millis()});
    if let (Some(dir), Some(fields)) = (dir, request.as_object_mut()) {
        fields.insert("dir".into(), dir.into());
    }
    request
}

/// The request that reopens store `old` as store `new` at `now`, without its id.
pub(crate) fn reopen_json(old: u64, new: u64, now: Instant) -> Value {
    json!({"op": Verb::Reopen.name(), "store": old, "as": new, "now": now.as_millis()})
}

/// The request `id` that closes store `store`.
pub(crate) fn close_json(id: u64, store: u64) -> Value {
    json!({"id": id, "op": Verb::Close.name(), "store": store})
}

/// The adapter's question for the clock of request `id`.
pub(crate) fn clock_question_json(id: u64) -> Value {
    json!({"clock": id})
}

/// The driver's answer to the adapter's question for the clock of request `id`.
pub(crate) fn clock_json(id: u64, now: Instant) -> Value {
    json!({"clock": id, "now": now.as_millis()})
}

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

pub(crate) fn owner_json(o: &AggregateRef) -> Value {
    json!({"aggregate_type": o.aggregate_type.as_str(), "tenant": tenant_json(&o.tenant), "id": o.id.as_str()})
}

/// An operation's outcome as the protocol writes it: its name.
pub(crate) fn outcome_json(outcome: Outcome) -> Value {
    Value::from(outcome.name())
}

/// The outcome an answer's `ok` names, if it names one.
pub(crate) fn parse_outcome(ok: &Value) -> Option<Outcome> {
    ok.as_str().and_then(Outcome::from_name)
}

/// A reservation as the protocol writes it (D11's shapes): holds in ascending order of their
/// UTF-8 bytes, the expiry as an absolute instant.
pub(crate) fn reservation_json(r: &StoredReservation) -> Value {
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

/// The request `op` on `scope`/`key` at `now`, on store `store` (without one, as the vectors
/// write requests), without its id.
fn keyed_json(op: Verb, store: Option<u64>, now: Instant, scope: &ReservationScope, key: &Key) -> Value {
    let mut v = json!({"op": op.name(), "now": now.as_millis(), "scope": scope_json(scope), "key": key.as_str()});
    if let (Some(store), Some(fields)) = (store, v.as_object_mut()) {
        fields.insert("store".into(), store.into());
    }
    v
}

/// The lookup request of `scope`/`key` at `now`, on store `store` (without one, as the vectors
/// write requests), without its id.
pub(crate) fn lookup_json(store: Option<u64>, now: Instant, scope: &ReservationScope, key: &Key) -> Value {
    keyed_json(Verb::Lookup, store, now, scope, key)
}

/// The request for `request`'s operation on its scope and key at `now`, on store `store`
/// (without one, as the vectors write requests), without its id.
pub(crate) fn operation_json(store: Option<u64>, now: Instant, request: &Request<'_>) -> Value {
    let op = Verb::Operation(request.operation.kind());
    let mut v = keyed_json(op, store, now, request.scope, request.key);
    let Some(fields) = v.as_object_mut() else { return v };
    match request.operation {
        Operation::Reserve { owner, hold, ttl } => {
            fields.insert("owner".into(), owner_json(owner));
            fields.insert("hold".into(), hold.as_str().into());
            fields.insert("ttl".into(), ttl.as_millis().into());
        }
        Operation::Confirm { owner, version } => {
            fields.insert("owner".into(), owner_json(owner));
            fields.insert("version".into(), version.as_u64().into());
        }
        Operation::Release { owner, version } => {
            fields.insert("owner".into(), owner_json(owner));
            let version = match version {
                ReleaseVersion::Any => Value::from(ANY),
                ReleaseVersion::At(v) => v.as_u64().into(),
            };
            fields.insert("version".into(), version);
        }
        Operation::Abandon { owner, hold } => {
            fields.insert("owner".into(), owner_json(owner));
            fields.insert("hold".into(), hold.as_str().into());
        }
    }
    v
}

/// Why a JSON value is not what the protocol says.
pub(crate) type Bad = String;

pub(crate) fn text<'a>(v: &'a Value, field: &str) -> Result<&'a str, Bad> {
    v.get(field).and_then(Value::as_str).ok_or_else(|| format!("`{field}` is not a string"))
}

pub(crate) fn number(v: &Value, field: &str) -> Result<u64, Bad> {
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
pub(crate) fn parse_reservation(v: &Value) -> Result<Option<StoredReservation>, Bad> {
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
    let mut names = [UNREPRESENTABLE; 17];
    for (name, e) in names.iter_mut().zip(typed) {
        *name = e.name();
    }
    names
}

/// Checks an answer's error object against the protocol's two shapes, naming the field that is
/// missing, unknown or of the wrong type.
fn check_error(error: &Value) -> Result<(), Bad> {
    match error.get("kind").and_then(Value::as_str) {
        Some(INVALID_ARGUMENT) => {
            let e = exact(error, "the InvalidArgument error", &["kind", "name", "message"])?;
            let name = e.get("name").and_then(Value::as_str).ok_or("the error's `name` is not a string")?;
            if !error_names().contains(&name) {
                return Err(format!("the error's `name` {name:?} is one SPEC.md's table of errors does not name"));
            }
            e.get("message").and_then(Value::as_str).ok_or("the error's `message` is not a string")?;
        }
        Some(STORAGE_ERROR) => {
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
pub(crate) fn split_answer(answer: Value) -> Result<Result<Value, Value>, Bad> {
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

/// What an adapter declared in its `hello` answer's `ok`: exactly `protocol`, the version it
/// speaks or a list of the versions it speaks, among them this driver's, and `durable`. An
/// adapter that does not speak [`PROTOCOL`] is refused, saying what changed since its version
/// ([`refusal`]).
pub(crate) fn parse_hello(ok: &Value) -> Result<Hello, Bad> {
    let spoken = versions(ok.get("protocol"))?;
    if !spoken.contains(&PROTOCOL) {
        return Err(refusal(&spoken));
    }
    exact(ok, "the hello answer", &["protocol", "durable", "power_cuts"])?;
    let durable = ok.get("durable").and_then(Value::as_bool).ok_or("`durable` is not a boolean")?;
    let power_cuts = match ok.get("power_cuts") {
        Some(Value::Null) | None => None,
        Some(v) => Some(v.as_str().and_then(Persistence::from_name).ok_or_else(|| {
            let names: Vec<&str> = Persistence::ALL.iter().map(|m| m.name()).collect();
            format!("`power_cuts` is {v}, neither null nor one of the models {}", names.join(", "))
        })?),
    };
    if power_cuts.is_some() && !durable {
        return Err("`power_cuts` declares a promise, but `durable` is false: a store that survives a power cut \
                    survives a restart"
            .into());
    }
    Ok(Hello { protocol: PROTOCOL, durable, power_cuts })
}

/// The versions a `hello` answer's `protocol` names: one version (an integer from 1), or a
/// list of them.
fn versions(protocol: Option<&Value>) -> Result<Vec<u64>, Bad> {
    let bad = || "`protocol` is neither a version (an integer from 1) nor a list of versions".to_owned();
    let version = |v: &Value| v.as_u64().filter(|n| *n >= 1).ok_or_else(bad);
    match protocol {
        None => Err("the hello answer has no field `protocol`".into()),
        Some(Value::Array(list)) if !list.is_empty() => list.iter().map(version).collect(),
        Some(v) => version(v).map(|n| vec![n]),
    }
}

/// How every refusal of an adapter's version ([`refusal`]) begins.
pub(crate) const REFUSED: &str = "it speaks protocol ";

/// Why the driver does not run an adapter that speaks only the versions `spoken` (none of them
/// [`PROTOCOL`], each at least 1): for an older version, what changed since it; for one the
/// driver does not know, that a newer driver or an adapter that also speaks this one is needed.
pub(crate) fn refusal(spoken: &[u64]) -> String {
    let list = spoken.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    let newest = spoken.iter().copied().max().unwrap_or_default();
    // Every version below the driver's is in VERSIONS: the adapter's is older or newer.
    if let std::cmp::Ordering::Less = newest.cmp(&PROTOCOL) {
        let since: Vec<String> = VERSIONS
            .iter()
            .filter(|(v, _)| *v > newest)
            .map(|(v, added)| format!("protocol {v} added {added}"))
            .collect();
        format!(
            "{REFUSED}{list}, which this driver no longer runs (it runs protocol {PROTOCOL} only): {}. \
             Read {VERSIONS_SECTION}, then answer `hello` with {{\"protocol\": {PROTOCOL}, \"durable\": true or \
             false, \"power_cuts\": null or the persistence model the store survives}}",
            since.join("; ")
        )
    } else {
        format!(
            "{REFUSED}{list}, which this driver does not know (it runs protocol {PROTOCOL} only): run the \
             `reservation` that speaks {newest}, or have the adapter also speak {PROTOCOL} ({VERSIONS_SECTION})"
        )
    }
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
    match Verb::from_name(op) {
        Some(Verb::Hello) => parse_hello(&ok).map(drop),
        Some(Verb::Open | Verb::Reopen | Verb::Close) if ok.is_null() => Ok(()),
        Some(Verb::Open | Verb::Reopen | Verb::Close) => Err(format!("the answer to {op} is {ok}, not null")),
        Some(Verb::Lookup) => parse_reservation(&ok).map(drop),
        Some(Verb::Operation(_)) => match parse_outcome(&ok) {
            Some(_) => Ok(()),
            None => Err(format!("{ok} is not an outcome's name")),
        },
        None => Err(format!("no request has the op {op:?}")),
    }
}

pub(crate) fn error_json(e: &StoreError) -> Value {
    match e {
        StoreError::Invalid(e) => json!({"kind": INVALID_ARGUMENT, "name": e.name(), "message": e.to_string()}),
        StoreError::Storage(e) => {
            json!({"kind": STORAGE_ERROR, "indeterminate": e.is_indeterminate(), "message": e.message()})
        }
    }
}

/// The invalid argument named `name`; `None` for a name the typed API cannot be given (a length
/// or an emptiness its types rule out before any request).
pub(crate) fn invalid_by_name(name: &str) -> Option<InvalidArgument> {
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

/// What an adapter declared in its `hello` answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The protocol version it speaks.
    pub protocol: u64,
    /// Whether its store survives `reopen`.
    pub durable: bool,
    /// What its store survives when the machine loses power (`power_cuts`): `None` promises
    /// nothing ([`crate::Capabilities::power_cuts`]).
    pub power_cuts: Option<Persistence>,
}

/// The error object of a value the typed API cannot hold (`Unrepresentable`), saying `why`.
pub(crate) fn unrepresentable(why: impl std::fmt::Display) -> Value {
    json!({"kind": INVALID_ARGUMENT, "name": UNREPRESENTABLE, "message": why.to_string()})
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
    let call = match Verb::from_name(op) {
        Some(Verb::Lookup) => Call::Lookup,
        Some(Verb::Operation(kind)) => {
            let owner = match parse_owner(r).map_err(unrepresentable)? {
                Field::Ok(o) => o,
                Field::Invalid(e) => return Err(invalid(e)),
            };
            let hold = || HoldId::new(text(r, "hold").map_err(unrepresentable)?).map_err(invalid);
            Call::Operation(match kind {
                OperationKind::Reserve => {
                    let hold = hold()?;
                    let ttl = Ttl::from_millis(number(r, "ttl").map_err(unrepresentable)?).map_err(invalid)?;
                    Operation::Reserve { owner, hold, ttl }
                }
                OperationKind::Abandon => Operation::Abandon { owner, hold: hold()? },
                OperationKind::Confirm => {
                    let version = Version::from_u64(number(r, "version").map_err(|_| {
                        unrepresentable("confirm takes an integer version in 0..=2^64-1, not ANY (D4)")
                    })?);
                    Operation::Confirm { owner, version }
                }
                OperationKind::Release => {
                    let version = match r.get("version") {
                        Some(Value::String(s)) if s == ANY => ReleaseVersion::Any,
                        _ => ReleaseVersion::At(Version::from_u64(number(r, "version").map_err(unrepresentable)?)),
                    };
                    Operation::Release { owner, version }
                }
            })
        }
        _ => return Err(unrepresentable(format!("unknown op {op:?}"))),
    };
    Ok(Parsed { now, scope, key, call })
}

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
            .map(outcome_json)
            .map_err(|e| error_json(&e)),
    }
}
