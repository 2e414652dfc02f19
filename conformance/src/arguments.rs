//! The sweep of invalid arguments: every argument of SPEC.md's table of errors, each alone, in
//! every state a key can be in, through the protocol's requests ([`Harness::send_raw`]).
//!
//! A request names one (scope, key); each request of the sweep has exactly one argument that
//! is invalid (or one field at its maximum length, which is valid), so that the answer the
//! specification expects is one: the error the driver's parsing and the core's constructors
//! name for it (`Key::new`, `Ttl::from_millis`, …, [`reservation_store::Request::admitted`]),
//! or for a valid request the outcome of [`spec::apply`]. Each request whose own (scope, key)
//! is valid works on a key of its own, set up beforehand in one of seven states (free; pending,
//! the caller's or another owner's, live or expired; confirmed, the caller's or another's), and
//! that key is looked up afterwards: an invalid argument changes nothing (D6). One store per
//! state, and three batches on it: the setup, the requests, the lookups.
//!
//! A harness that speaks only the typed API runs the requests that parse into typed values:
//! the owners a scope does not admit, and the fields at their maximum.

use reservation_store::rules::Rule;
use reservation_store::{
    AggregateId, AggregateRef, AggregateType, HoldId, Instant, Key, MAX_HOLD_ID_LEN, MAX_KEY_LEN, MAX_NAME_LEN,
    ManualClock, Namespace, Operation, OperationKind, Outcome, ReleaseVersion, Request, ReservationScope,
    ReservationStore, StoreError, StoredReservation, Tenant, Ttl, Version, spec,
};
use serde_json::{Value, json};

use crate::failure::{Details, Failure};
use crate::harness::{Harness, RawAnswer, RawRequest, START, unique_namespace};
use crate::protocol::{
    Call, INVALID_ARGUMENT, Parsed, Verb, lookup_json, operation_json, parse_outcome, parse_request, parse_reservation,
    reservation_json,
};
use crate::session::guarded;
use crate::show::{ShowScope, show_state};

/// The check's test name.
pub(crate) const CHECK: &str = "d6_every_invalid_argument_in_every_state_changes_nothing";

const TYPE: &str = "rc-user";
const TTL_MS: u64 = 1_000;
/// The version the setup confirms at, and the one the requests name (above it).
const SET_VERSION: u64 = 2;
const VERSION: u64 = 3;
/// Every request of a key: the four operations and the lookup.
const OPS: [Verb; 5] = [
    Verb::Operation(OperationKind::Reserve),
    Verb::Operation(OperationKind::Confirm),
    Verb::Operation(OperationKind::Release),
    Verb::Operation(OperationKind::Abandon),
    Verb::Lookup,
];

/// A state a key is in before a request, seen from the request's owner.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum State {
    Free,
    OwnLive,
    OwnExpired,
    OtherLive,
    OtherExpired,
    OwnConfirmed,
    OtherConfirmed,
}

impl State {
    const ALL: [State; 7] = [
        State::Free,
        State::OwnLive,
        State::OwnExpired,
        State::OtherLive,
        State::OtherExpired,
        State::OwnConfirmed,
        State::OtherConfirmed,
    ];

    /// "a key {text}".
    fn text(self) -> &'static str {
        match self {
            State::Free => "that is free",
            State::OwnLive => "the caller holds pending, live",
            State::OwnExpired => "the caller held pending, expired",
            State::OtherLive => "another owner holds pending, live",
            State::OtherExpired => "another owner held pending, expired",
            State::OwnConfirmed => "the caller holds confirmed",
            State::OtherConfirmed => "another owner holds confirmed",
        }
    }

    fn label(self) -> &'static str {
        match self {
            State::Free => "arguments-free",
            State::OwnLive => "arguments-own-live",
            State::OwnExpired => "arguments-own-expired",
            State::OtherLive => "arguments-other-live",
            State::OtherExpired => "arguments-other-expired",
            State::OwnConfirmed => "arguments-own-confirmed",
            State::OtherConfirmed => "arguments-other-confirmed",
        }
    }

    /// The operation that puts a free key in this state at [`START`] (an expired one once the
    /// clock has moved one millisecond on).
    fn setup(self, row: &Row) -> Option<Operation<&AggregateRef, &HoldId>> {
        let ttl = |ms| Ttl::from_millis(ms).ok();
        let (owner, hold) = (&row.own, &row.hold);
        let other = &row.other;
        let confirmed = Version::from_u64(SET_VERSION);
        Some(match self {
            State::Free => return None,
            State::OwnLive => Operation::Reserve { owner, hold, ttl: ttl(TTL_MS)? },
            State::OwnExpired => Operation::Reserve { owner, hold, ttl: ttl(1)? },
            State::OtherLive => Operation::Reserve { owner: other, hold, ttl: ttl(TTL_MS)? },
            State::OtherExpired => Operation::Reserve { owner: other, hold, ttl: ttl(1)? },
            State::OwnConfirmed => Operation::Confirm { owner, version: confirmed },
            State::OtherConfirmed => Operation::Confirm { owner: other, version: confirmed },
        })
    }

    /// When the requests run.
    fn now(self) -> Instant {
        match self {
            State::OwnExpired | State::OtherExpired => START.saturating_add_millis(1),
            _ => START,
        }
    }
}

/// A key of the sweep, with the names its setup and its request use.
#[derive(Clone)]
struct Row {
    scope: ReservationScope,
    key: Key,
    /// The request's owner.
    own: AggregateRef,
    /// Another owner the scope admits.
    other: AggregateRef,
    /// The hold the key is set up with, and the one abandon names.
    hold: HoldId,
    /// The hold reserve names: another one, so that a join shows.
    new_hold: HoldId,
}

/// One request of the sweep.
struct Case {
    /// What the request gives, naming the field: "the hold id empty".
    what: String,
    /// The rule its failure names.
    rule: Rule,
    request: RawRequest,
    /// The key it works on, looked up afterwards: `None` when its scope or key is what is
    /// invalid.
    row: Option<usize>,
}

/// A state's store: the keys to set up, then the requests.
struct Plan {
    state: State,
    rows: Vec<Row>,
    cases: Vec<Case>,
}

/// An answer, as the sweep compares them.
#[derive(Clone, PartialEq, Debug)]
enum Answer {
    Outcome(Outcome),
    Found(Option<StoredReservation>),
    /// An invalid argument, by its name in SPEC.md's table of errors.
    Invalid(String),
    /// No answer the protocol allows, or a storage error.
    Failed(String),
    /// The adapter behind the driver broke its protocol ([`crate::protocol::ProtocolError`]).
    Protocol(String),
}

/// A failure of the adapter itself, not of a rule, when `answer` is one.
fn protocol(answer: &Answer) -> Result<(), Failure> {
    match answer {
        Answer::Protocol(why) => Err(Failure::protocol(CHECK, why.clone())),
        _ => Ok(()),
    }
}

/// `e` as an answer: a protocol failure of the adapter, or the store's storage error.
fn from_storage(e: &reservation_store::StorageError) -> Answer {
    match crate::protocol::ProtocolError::of(e) {
        Some(p) => Answer::Protocol(p.to_string()),
        None => Answer::Failed(reservation_store::error_chain(e)),
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Outcome(o) => write!(f, "{o}"),
            Answer::Found(r) => write!(f, "{}", show_state(r.as_ref())),
            Answer::Invalid(name) => write!(f, "the invalid argument {name}"),
            Answer::Failed(why) => write!(f, "a failure ({why})"),
            Answer::Protocol(why) => write!(f, "the adapter broke the protocol ({why})"),
        }
    }
}

impl Answer {
    /// As the vectors write an expected answer.
    fn vector(&self) -> Value {
        match self {
            Answer::Outcome(o) => json!({"ok": o.name()}),
            Answer::Found(r) => json!({"ok": r.as_ref().map_or(Value::Null, reservation_json)}),
            Answer::Invalid(name) => json!({"error": {"kind": INVALID_ARGUMENT, "name": name}}),
            Answer::Failed(why) | Answer::Protocol(why) => json!({"error": {"kind": "StorageError", "message": why}}),
        }
    }
}

/// What the specification says of one request on a key in `state`: the answer, the rule that
/// decides it (an operation's), and the key's state afterwards.
fn expected(
    request: &RawRequest,
    state: Option<&StoredReservation>,
) -> (Answer, Option<Rule>, Option<StoredReservation>) {
    let unchanged = state.cloned();
    // A line serde_json refuses holds a lone surrogate: `serve` answers it Unrepresentable.
    let Some(value) = request.value() else {
        return (invalid(&crate::protocol::unrepresentable("")), None, unchanged);
    };
    let Parsed { now, scope, key, call } = match parse_request(&value) {
        Ok(parsed) => parsed,
        Err(error) => return (invalid(&error), None, unchanged),
    };
    match call {
        Call::Lookup => (Answer::Found(spec::lookup(state, now).cloned()), None, unchanged),
        Call::Operation(operation) => match Request::new(&scope, &key, operation.as_ref()).admitted() {
            Err(e) => (Answer::Invalid(e.name().to_owned()), None, unchanged),
            Ok(()) => {
                let step = spec::apply(unchanged, now, operation.as_ref());
                (Answer::Outcome(step.outcome), Some(step.rule), step.next)
            }
        },
    }
}

/// The invalid argument an error object names.
fn invalid(error: &Value) -> Answer {
    Answer::Invalid(error.get("name").and_then(Value::as_str).unwrap_or_default().to_owned())
}

/// The answer an adapter wrote to a request whose `op` is `op`.
fn from_raw(op: Option<Verb>, answer: RawAnswer) -> Answer {
    match answer {
        Err(e) => from_storage(&e),
        Ok(Err(error)) => {
            match (error.get("kind").and_then(Value::as_str), error.get("name").and_then(Value::as_str)) {
                (Some(INVALID_ARGUMENT), Some(name)) => Answer::Invalid(name.to_owned()),
                _ => Answer::Failed(format!("the error {error}")),
            }
        }
        Ok(Ok(ok)) if op == Some(Verb::Lookup) => match parse_reservation(&ok) {
            Ok(found) => Answer::Found(found),
            Err(why) => Answer::Failed(format!("the lookup answer {ok}: {why}")),
        },
        Ok(Ok(ok)) => match parse_outcome(&ok) {
            Some(o) => Answer::Outcome(o),
            None => Answer::Failed(format!("the answer {ok} is not an outcome")),
        },
    }
}

fn from_error(e: &StoreError) -> Answer {
    match e {
        StoreError::Invalid(i) => Answer::Invalid(i.name().to_owned()),
        StoreError::Storage(s) => from_storage(s),
    }
}

/// Runs `requests` on `store`: as written through [`Harness::send_raw`] when the harness can
/// (`raw`), else through the typed API, which is handed only requests that parse (a plan for a
/// typed harness holds no other).
fn run<H: Harness>(h: &H, store: &H::Store, raw: bool, requests: &[RawRequest]) -> Vec<Answer> {
    if raw && let Some(answers) = h.send_raw(store, requests) {
        let mut answers = answers.into_iter();
        return requests
            .iter()
            .map(|r| from_raw(r.op().and_then(Verb::from_name), answers.next().unwrap_or_else(|| Err(no_answer()))))
            .collect();
    }
    requests
        .iter()
        .map(|r| {
            let Some(Parsed { scope, key, call, .. }) = r.value().and_then(|v| parse_request(&v).ok()) else {
                return Answer::Failed("a request the typed API cannot hold, sent to a typed harness".into());
            };
            match call {
                Call::Lookup => match guarded(|| h.block_on(store.lookup(&scope, &key))) {
                    Ok(found) => Answer::Found(found),
                    Err(e) => from_error(&e),
                },
                Call::Operation(operation) => {
                    match guarded(|| h.block_on(store.execute(Request::new(&scope, &key, operation.as_ref())))) {
                        Ok(o) => Answer::Outcome(o),
                        Err(e) => from_error(&e),
                    }
                }
            }
        })
        .collect()
}

fn no_answer() -> reservation_store::StorageError {
    reservation_store::StorageError::new("the harness answered fewer requests than it was sent")
}

/// The sweep (see the module): each state on a store of its own.
pub(crate) fn check<H: Harness>(h: &H) -> Result<(), Failure> {
    for state in State::ALL {
        let clock = ManualClock::new(START);
        let store = h.store(clock.clone());
        let raw = h.send_raw(&store, &[]).is_some();
        let plan = plan(state, unique_namespace(state.label()), raw);
        let setups: Vec<(usize, RawRequest)> =
            plan.rows.iter().enumerate().filter_map(|(i, row)| Some((i, setup_request(&plan, row)?))).collect();
        let requests: Vec<RawRequest> = setups.iter().map(|(_, r)| r.clone()).collect();
        let mut states: Vec<Option<StoredReservation>> = vec![None; plan.rows.len()];
        for ((i, request), answer) in setups.iter().zip(run(h, &store, raw, &requests)) {
            let (want, rule, next) = expected(request, None);
            protocol(&answer)?;
            if answer != want {
                let row = plan.rows.get(*i);
                let problem = format!(
                    "setting up a key {} ({}): the store answered {answer}; the specification says {want}",
                    state.text(),
                    row.map_or(String::new(), |r| format!("{:?} in {}", r.key.as_str(), ShowScope(&r.scope))),
                );
                return Err(fail(&plan, rule, None, problem, vec![show_request(request)]));
            }
            if let Some(slot) = states.get_mut(*i) {
                *slot = next;
            }
        }
        clock.set(state.now());
        let requests: Vec<RawRequest> = plan.cases.iter().map(|c| c.request.clone()).collect();
        let answers = run(h, &store, raw, &requests);
        let mut after = states.clone();
        for (case, answer) in plan.cases.iter().zip(answers) {
            let before = case.row.and_then(|i| states.get(i)).and_then(Option::as_ref);
            let (want, rule, next) = expected(&case.request, before);
            protocol(&answer)?;
            if answer != want {
                let problem = format!(
                    "{} with {}, on a key {}: the store answered {answer}; the specification says {want}",
                    case.request.op().unwrap_or("a request"),
                    case.what,
                    state.text()
                );
                return Err(fail(&plan, Some(case.rule), rule, problem, transcript(&plan, case, before, &answer)));
            }
            if let Some(slot) = case.row.and_then(|i| after.get_mut(i)) {
                *slot = next;
            }
        }
        // Every key a request worked on, looked up.
        let keys: Vec<(&ReservationScope, &Key)> = plan.rows.iter().map(|r| (&r.scope, &r.key)).collect();
        let found = match guarded(|| Ok(h.lookups(&store, &keys))) {
            Ok(found) => found,
            Err(e) => {
                let why = reservation_store::error_chain(&e);
                keys.iter().map(|_| Err(reservation_store::StorageError::new(why.clone()).into())).collect()
            }
        };
        let now = state.now();
        let found: Vec<Answer> = found
            .into_iter()
            .map(|found| match found {
                Ok(f) => Answer::Found(f),
                Err(e) => from_error(&e),
            })
            .collect();
        // An adapter that broke fails every lookup; a lookup that alone answers what the protocol
        // cannot hold (a pending reservation with an empty hold) shows what a request wrote.
        if !found.is_empty() && found.iter().all(|a| matches!(a, Answer::Protocol(_))) {
            found.first().map(protocol).transpose()?;
        }
        for (i, got) in found.into_iter().enumerate() {
            let got = match got {
                Answer::Protocol(why) => Answer::Failed(why),
                other => other,
            };
            let want = spec::lookup(after.get(i).and_then(Option::as_ref), now).cloned();
            if got == Answer::Found(want.clone()) {
                continue;
            }
            let Some(case) = plan.cases.iter().find(|c| c.row == Some(i)) else { continue };
            let before = states.get(i).and_then(Option::as_ref);
            let (answer, rule, _) = expected(&case.request, before);
            let problem = format!(
                "{} with {}, on a key {}: answered {answer}, and then a lookup of the key returned {got}; the specification says {}{}",
                case.request.op().unwrap_or("a request"),
                case.what,
                state.text(),
                show_state(want.as_ref()),
                if rule.is_none() { " (unchanged: an invalid argument changes nothing)" } else { "" },
            );
            let mut lines = transcript(&plan, case, before, &answer);
            lines.push(format!("    lookup: expected {}, actual {got}   <-- differs", show_state(want.as_ref())));
            return Err(fail(&plan, Some(case.rule), rule, problem, lines));
        }
    }
    Ok(())
}

/// The request that puts `row` in the plan's state, if any.
fn setup_request(plan: &Plan, row: &Row) -> Option<RawRequest> {
    let operation = plan.state.setup(row)?;
    Some(request_json(START, &Request::new(&row.scope, &row.key, operation)))
}

fn request_json(now: Instant, request: &Request<'_>) -> RawRequest {
    RawRequest::new(operation_json(None, now, request))
}

/// The valid request `op` on `row` at `now`.
fn valid(op: Verb, row: &Row, now: Instant) -> Option<RawRequest> {
    let (scope, key, owner) = (&row.scope, &row.key, &row.own);
    let version = Version::from_u64(VERSION);
    let Verb::Operation(kind) = op else {
        return Some(RawRequest::new(lookup_json(None, now, scope, key)));
    };
    let operation = match kind {
        OperationKind::Reserve => {
            Operation::Reserve { owner, hold: &row.new_hold, ttl: Ttl::from_millis(TTL_MS).ok()? }
        }
        OperationKind::Confirm => Operation::Confirm { owner, version },
        OperationKind::Release => Operation::Release { owner, version: ReleaseVersion::At(version) },
        OperationKind::Abandon => Operation::Abandon { owner, hold: &row.hold },
    };
    Some(request_json(now, &Request::new(scope, key, operation)))
}

/// `prefix` followed by `c` up to exactly `len` bytes (one `x` first when `c`'s width does not
/// divide what is left).
fn pad(prefix: &str, len: usize, c: char) -> String {
    let mut s = prefix.to_owned();
    if !(len - s.len().min(len)).is_multiple_of(c.len_utf8()) {
        s.push('x');
    }
    while s.len() + c.len_utf8() <= len {
        s.push(c);
    }
    s
}

/// The names the sweep's keys use, in `namespace`.
struct Base {
    namespace: Namespace,
}

impl Base {
    fn row(&self, key: &str) -> Option<Row> {
        let scope = ReservationScope::parse(TYPE, Some("acme"), self.namespace.as_str()).ok()?;
        Some(Row {
            scope,
            key: Key::new(key).ok()?,
            own: AggregateRef::parse(TYPE, Some("acme"), "alice").ok()?,
            other: AggregateRef::parse(TYPE, Some("acme"), "bob").ok()?,
            hold: HoldId::new("attempt-1").ok()?,
            new_hold: HoldId::new("attempt-2").ok()?,
        })
    }

    /// The rows of one field at its maximum, `c` filling it: one per operation.
    fn at_max(&self, field: Field, c: char) -> Option<Vec<Row>> {
        let name = |prefix: &str| pad(prefix, MAX_NAME_LEN, c);
        let mut rows = Vec::new();
        for op in OPS {
            let key = format!("{}-{}-{}", field.label(), c.len_utf8(), op.name());
            let mut row = self.row(&key)?;
            match field {
                Field::Key => row.key = Key::new(pad(&key, MAX_KEY_LEN, c)).ok()?,
                Field::Hold => {
                    row.hold = HoldId::new(pad("1-", MAX_HOLD_ID_LEN, c)).ok()?;
                    row.new_hold = HoldId::new(pad("2-", MAX_HOLD_ID_LEN, c)).ok()?;
                }
                Field::ScopeType | Field::OwnerType => {
                    let ty = AggregateType::new(name(TYPE)).ok()?;
                    row.scope.aggregate_type = ty.clone();
                    row.own.aggregate_type = ty.clone();
                    row.other.aggregate_type = ty;
                }
                Field::ScopeTenant => {
                    let tenant = Tenant::id(name("acme")).ok()?;
                    row.scope.tenant = tenant.clone();
                    row.own.tenant = tenant.clone();
                    row.other.tenant = tenant;
                }
                Field::Namespace => row.scope.namespace = Namespace::new(name(self.namespace.as_str())).ok()?,
                Field::OwnerTenant => {
                    row.scope.tenant = Tenant::System;
                    row.own.tenant = Tenant::id(name("acme")).ok()?;
                }
                Field::OwnerId => row.own.id = AggregateId::new(name("alice")).ok()?,
            }
            rows.push(row);
        }
        Some(rows)
    }
}

/// The text fields of a request.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Field {
    Key,
    Hold,
    ScopeType,
    ScopeTenant,
    Namespace,
    OwnerType,
    OwnerTenant,
    OwnerId,
}

impl Field {
    const ALL: [Field; 8] = [
        Field::Key,
        Field::Hold,
        Field::ScopeType,
        Field::ScopeTenant,
        Field::Namespace,
        Field::OwnerType,
        Field::OwnerTenant,
        Field::OwnerId,
    ];

    fn text(self) -> &'static str {
        match self {
            Field::Key => "the key",
            Field::Hold => "the hold id",
            Field::ScopeType => "the scope's aggregate type",
            Field::ScopeTenant => "the scope's tenant id",
            Field::Namespace => "the namespace",
            Field::OwnerType => "the owner's aggregate type",
            Field::OwnerTenant => "the owner's tenant id",
            Field::OwnerId => "the owner's id",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Field::Key => "key",
            Field::Hold => "hold",
            Field::ScopeType => "scope-type",
            Field::ScopeTenant => "scope-tenant",
            Field::Namespace => "namespace",
            Field::OwnerType => "owner-type",
            Field::OwnerTenant => "owner-tenant",
            Field::OwnerId => "owner-id",
        }
    }

    fn pointer(self) -> &'static str {
        match self {
            Field::Key => "/key",
            Field::Hold => "/hold",
            Field::ScopeType => "/scope/aggregate_type",
            Field::ScopeTenant => "/scope/tenant",
            Field::Namespace => "/scope/namespace",
            Field::OwnerType => "/owner/aggregate_type",
            Field::OwnerTenant => "/owner/tenant",
            Field::OwnerId => "/owner/id",
        }
    }

    /// Its maximum length in bytes.
    fn max(self) -> usize {
        match self {
            Field::Key => MAX_KEY_LEN,
            Field::Hold => MAX_HOLD_ID_LEN,
            _ => MAX_NAME_LEN,
        }
    }

    /// Whether a request `op` has this field.
    fn in_op(self, op: Verb) -> bool {
        match self {
            Field::Key | Field::ScopeType | Field::ScopeTenant | Field::Namespace => true,
            Field::Hold => matches!(op, Verb::Operation(OperationKind::Reserve | OperationKind::Abandon)),
            _ => op != Verb::Lookup,
        }
    }

    /// Whether the request still names its own (scope, key) with this field invalid.
    fn keeps_row(self) -> bool {
        !matches!(self, Field::Key | Field::ScopeType | Field::ScopeTenant | Field::Namespace)
    }
}

/// Every spelling of text that is not Unicode (D9) that the sweep writes in each text field: a
/// lone surrogate escape, in lower and upper case, high and low, and a high surrogate followed by
/// an escape that is not a low one. Each is `Unrepresentable`.
const SURROGATES: [(&str, &str); 4] = [
    ("\"\\ud800\"", "a lone high surrogate"),
    ("\"\\uD800\"", "a lone high surrogate in upper case"),
    ("\"\\udc00\"", "a lone low surrogate"),
    ("\"\\ud800\\u0041\"", "a high surrogate followed by one that is not low"),
];

/// Every request of the sweep for a key in `state`, the keys in `namespace`: all of them when
/// they are sent as written (`raw`), else those that parse into typed values.
fn plan(state: State, namespace: Namespace, raw: bool) -> Plan {
    let mut plan = Plan { state, rows: Vec::new(), cases: Vec::new() };
    let base = Base { namespace };
    let now = state.now();
    // Adds the request `edit` makes of the valid request `op` on a key of its own.
    let add = |plan: &mut Plan,
               op: Verb,
               what: String,
               rule: Rule,
               keeps_row: bool,
               row: Option<Row>,
               edit: &dyn Fn(Value) -> RawRequest| {
        let Some(row) = row.or_else(|| base.row(&format!("c{}", plan.cases.len()))) else { return false };
        let Some(request) = valid(op, &row, now).and_then(|r| r.value()).map(edit) else { return false };
        if !raw && request.value().is_none_or(|v| parse_request(&v).is_err()) {
            return false;
        }
        let index = keeps_row.then_some(plan.rows.len());
        if keeps_row {
            plan.rows.push(row);
        }
        plan.cases.push(Case { what, rule, request, row: index });
        true
    };
    let over = |field: Field, c: char| c.to_string().repeat(field.max() / c.len_utf8() + 1);
    for op in OPS {
        for field in Field::ALL.into_iter().filter(|f| f.in_op(op)) {
            let (text, at, keeps) = (field.text(), field.pointer(), field.keeps_row());
            let set = |value: String| setting(vec![(at, value.into())]);
            add(&mut plan, op, format!("{text} empty"), Rule::D6, keeps, None, &set(String::new()));
            let n = field.max() + 1;
            add(
                &mut plan,
                op,
                format!("{text} one byte over its maximum ({n} bytes)"),
                Rule::D9,
                keeps,
                None,
                &set(over(field, 'x')),
            );
            let wide = over(field, 'é');
            let what = format!(
                "{text} over its maximum in two-byte characters ({} × \"é\", {} bytes)",
                wide.chars().count(),
                wide.len()
            );
            add(&mut plan, op, what, Rule::D9, keeps, None, &set(wide));
            for (token, why) in SURROGATES {
                let what = format!("{text} not valid Unicode ({why}, {token})");
                add(&mut plan, op, what, Rule::D9, keeps, None, &|request| RawRequest::with_raw(request, at, token));
            }
            let what = format!("{text} a number, not text");
            add(&mut plan, op, what, Rule::D9, keeps, None, &|request| RawRequest::with_raw(request, at, "7"));
        }
        // Numbers that are not unsigned 64-bit integers (D8), as raw JSON and as shown.
        let numbers = [
            ("-1", "-1", "negative"),
            ("18446744073709551616", "2^64", "over 2^64-1"),
            ("1e400", "1e400", "beyond what a JSON reader holds"),
            ("1.5", "1.5", "not an integer"),
            ("1.0", "1.0", "an integer's value written with a fraction"),
            ("1e3", "1e3", "an integer's value written with an exponent"),
            ("\"1000\"", "\"1000\"", "a string"),
            ("null", "null", "not a number"),
        ];
        let mut fields = vec![("/now", "the instant (now)")];
        match op {
            Verb::Operation(OperationKind::Reserve) => fields.push(("/ttl", "the TTL")),
            Verb::Operation(OperationKind::Confirm | OperationKind::Release) => {
                fields.push(("/version", "the version"))
            }
            _ => {}
        }
        for (at, text) in fields.iter().copied() {
            for (token, shown, why) in numbers {
                let what = format!("{text} {shown} ({why})");
                add(&mut plan, op, what, Rule::D8, true, None, &|request| RawRequest::with_raw(request, at, token));
            }
        }
        // The largest number a field holds, 2^64-1 (valid); not as `now`, for the reason `-0`
        // is not below.
        for (at, text) in fields.iter().copied().filter(|(at, _)| *at != "/now") {
            let what = format!("{text} 2^64-1 (its maximum)");
            add(&mut plan, op, what, Rule::D8, true, None, &setting(vec![(at, u64::MAX.into())]));
        }
        // A zero TTL (D2), ANY_VERSION where it is not one (D4).
        let named = match op {
            Verb::Operation(OperationKind::Reserve) => Some(("the TTL 0", Rule::D2, "/ttl", Value::from(0))),
            Verb::Operation(OperationKind::Confirm) => {
                Some(("the version \"ANY\" (ANY_VERSION is for release only)", Rule::D4, "/version", "ANY".into()))
            }
            Verb::Operation(OperationKind::Release) => {
                Some(("the version \"any\" (ANY_VERSION is spelled \"ANY\")", Rule::D4, "/version", "any".into()))
            }
            _ => None,
        };
        if let Some((what, rule, at, value)) = named {
            add(&mut plan, op, what.into(), rule, true, None, &setting(vec![(at, value)]));
        }
        // `-0` is the integer 0 (PROTOCOL.md): what 0 is there, a zero TTL (D2) or `UNVERSIONED`.
        // Not as `now`: the requests of a state run in any order and a store's clock never goes
        // back, so which reading decides would depend on the order.
        for (at, text) in fields.into_iter().filter(|(at, _)| *at != "/now") {
            let what = format!("{text} -0 (the integer 0 in JSON)");
            let rule = if at == "/ttl" { Rule::D2 } else { Rule::D8 };
            add(&mut plan, op, what, rule, true, None, &|request| RawRequest::with_raw(request, at, "-0"));
            if at == "/version" {
                let what = format!("{text} 0 (UNVERSIONED)");
                add(&mut plan, op, what, Rule::D8, true, None, &setting(vec![(at, 0.into())]));
            }
        }
        // Owners the scope does not admit, and the one a SYSTEM_TENANT scope admits (S1).
        if op != Verb::Lookup {
            let admits: [(&str, Rule, Edits); 5] = [
                ("an owner of another aggregate type", Rule::D6, vec![("/owner/aggregate_type", "rc-order".into())]),
                ("an owner of another tenant", Rule::D6, vec![("/owner/tenant", "globex".into())]),
                ("an owner of SYSTEM_TENANT in a tenant's scope", Rule::D6, vec![("/owner/tenant", Value::Null)]),
                (
                    "an owner of another aggregate type in a SYSTEM_TENANT scope",
                    Rule::D6,
                    vec![("/owner/aggregate_type", "rc-order".into()), ("/scope/tenant", Value::Null)],
                ),
                (
                    "an owner of SYSTEM_TENANT in a SYSTEM_TENANT scope (admitted)",
                    Rule::S1,
                    vec![("/owner/tenant", Value::Null), ("/scope/tenant", Value::Null)],
                ),
            ];
            for (what, rule, edits) in admits {
                let system = edits.iter().any(|(at, _)| *at == "/scope/tenant");
                let row = base.row(&format!("c{}", plan.cases.len())).map(|mut row| {
                    if system {
                        row.scope.tenant = Tenant::System;
                    }
                    row
                });
                add(&mut plan, op, what.into(), rule, true, row, &setting(edits));
            }
        }
    }
    // Every field at its maximum, in one-byte and in two-byte characters: valid.
    for field in Field::ALL {
        for c in ['x', 'é'] {
            let Some(rows) = base.at_max(field, c) else { continue };
            // Lookups of these keys follow every request: no lookup request of its own.
            for (op, row) in OPS.into_iter().zip(rows) {
                if !field.in_op(op) || op == Verb::Lookup {
                    continue;
                }
                let chars = if c == 'x' { "" } else { " in two-byte characters" };
                let what = format!("{} at its maximum{chars} ({} bytes)", field.text(), field.max());
                add(&mut plan, op, what, Rule::D9, true, Some(row), &RawRequest::new);
            }
        }
    }
    plan
}

/// Edits of a request: JSON pointers, each with the value written there.
type Edits = Vec<(&'static str, Value)>;

/// The edit of a request that writes each of `edits` (a JSON pointer, and the value there).
fn setting(edits: Edits) -> impl Fn(Value) -> RawRequest {
    move |mut request| {
        for (at, value) in &edits {
            if let Some(slot) = request.pointer_mut(at) {
                *slot = value.clone();
            }
        }
        RawRequest::new(request)
    }
}

/// A request in one line, long strings shortened.
fn show_request(request: &RawRequest) -> String {
    match request.value() {
        Some(mut value) => {
            shorten(&mut value);
            format!("    {value}")
        }
        None => format!("    {}", request.text()),
    }
}

fn shorten(value: &mut Value) {
    match value {
        Value::String(s) if s.len() > 64 => {
            let head: String = s.chars().take(8).collect();
            *s = format!("{head}… ({} bytes)", s.len());
        }
        Value::Object(fields) => fields.values_mut().for_each(shorten),
        _ => {}
    }
}

/// The lines a failure shows: the key's setup, the request, its answer.
fn transcript(plan: &Plan, case: &Case, before: Option<&StoredReservation>, answer: &Answer) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(setup) = case.row.and_then(|i| plan.rows.get(i)).and_then(|row| setup_request(plan, row)) {
        lines.push(format!("  {START} setup:"));
        lines.push(show_request(&setup));
    }
    lines.push(format!("  {} the key is {}; the request:", plan.state.now(), show_state(before)));
    lines.push(show_request(&case.request));
    lines.push(format!("    answered {answer}"));
    lines
}

fn fail(plan: &Plan, rule: Option<Rule>, step_rule: Option<Rule>, problem: String, transcript: Vec<String>) -> Failure {
    let mut context = vec![format!("every request works on a key {}", plan.state.text())];
    if let Some(rule) = rule.filter(|r| *r != Rule::D6) {
        context
            .push(format!("the check is about D6 (an invalid argument changes nothing); this request breaks {rule}"));
    }
    Failure::from(Details {
        check: CHECK.to_owned(),
        rule,
        check_rule: Some(Rule::D6),
        property: None,
        step_rule,
        protocol: None,
        problem,
        finding: None,
        cause: None,
        context,
        transcript,
        replay: None,
        undecided: None,
        drawing: None,
    })
}

/// The sweep as test vectors (`vectors/arguments.json`): per state, the setup of every key, each
/// request with its expected answer (as its `line` when a JSON value cannot write it as it is
/// sent), then a lookup of every key.
pub(crate) fn vector_cases() -> Vec<Value> {
    let mut cases = Vec::new();
    for state in State::ALL {
        let plan = plan(state, unique_namespace(state.label()), true);
        // Every key of the plan is some case's.
        let mut states: Vec<Option<StoredReservation>> = vec![None; plan.rows.len()];
        let mut steps = Vec::new();
        for (i, row) in plan.rows.iter().enumerate() {
            let Some(request) = setup_request(&plan, row) else { continue };
            let (answer, rule, next) = expected(&request, None);
            steps.push(step(&request, &answer, rule));
            if let Some(slot) = states.get_mut(i) {
                *slot = next;
            }
        }
        let mut after = states.clone();
        for case in &plan.cases {
            let before = case.row.and_then(|i| states.get(i)).and_then(Option::as_ref);
            let (answer, rule, next) = expected(&case.request, before);
            steps.push(step(&case.request, &answer, rule));
            if let Some(slot) = case.row.and_then(|i| after.get_mut(i)) {
                *slot = next;
            }
        }
        let now = state.now();
        for (i, row) in plan.rows.iter().enumerate() {
            let found = spec::lookup(after.get(i).and_then(Option::as_ref), now);
            let lookup = lookup_json(None, now, &row.scope, &row.key);
            steps.push(json!({"request": lookup, "expect": {"ok": found.map_or(Value::Null, reservation_json)}}));
        }
        let check = format!("every invalid argument on a key {}", state.text());
        cases.push(json!({"check": check, "case": 0, "steps": steps}));
    }
    cases
}

/// A step of the vectors: the request as a JSON value, or, when no JSON value writes it as the
/// driver does (a lone surrogate, `1e400`, `1e3`, `-0`), as its `line` of text.
fn step(request: &RawRequest, answer: &Answer, rule: Option<Rule>) -> Value {
    let text = request.text();
    let mut step = match request.value().filter(|v| serde_json::to_string(v).is_ok_and(|written| written == text)) {
        Some(value) => json!({"request": value, "expect": answer.vector()}),
        None => json!({"line": text, "expect": answer.vector()}),
    };
    if let (Some(rule), Some(fields)) = (rule, step.as_object_mut()) {
        fields.insert("rule".into(), rule.id().into());
    }
    step
}
