//! The protocol's JSON Schema (`conformance/schema/protocol.schema.json`): every message between
//! the driver and an adapter is valid against it, every vector file too, and it refuses
//! malformed messages.

use std::path::Path;

use reservation_conformance::driver::SCHEMA;
use reservation_conformance::vectors::FILES;
use serde_json::{Value, json};

/// A compiled JSON Schema (draft 2020-12), and whether a value is valid against it.
pub struct Validator {
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

impl Validator {
    /// Compiles `schema`; panics when it is not a valid draft 2020-12 schema.
    pub fn new(schema: Value) -> Self {
        let (mut schemas, mut compiler) = (boon::Schemas::new(), boon::Compiler::new());
        compiler.set_default_draft(boon::Draft::V2020_12);
        fn invalid<T>(e: boon::CompileError) -> T {
            panic!("the schema is not a valid draft 2020-12 schema: {e}")
        }
        compiler.add_resource(LOCATION, schema).unwrap_or_else(invalid);
        let index = compiler.compile(LOCATION, &mut schemas).unwrap_or_else(invalid);
        Validator { schemas, index }
    }

    /// Whether `value` is valid against the schema.
    pub fn is_valid(&self, value: &Value) -> bool {
        self.schemas.validate(value, self.index).is_ok()
    }

    /// `value` valid against the schema, or why not.
    pub fn validate(&self, value: &Value) -> Result<(), String> {
        self.schemas.validate(value, self.index).map_err(|e| e.to_string())
    }
}

/// The address under which the validator files the schema it compiles (the schema's `$id`, a
/// URN of its own, is resolved inside it).
const LOCATION: &str = "urn:reservation-store:compiled";

/// A validator for the schema's definition `def` (`request`, `answer`, `vector_file`), or for a
/// whole line (`None`).
pub fn validator(def: Option<&str>) -> Validator {
    let mut schema: Value = serde_json::from_str(SCHEMA).expect("the schema is JSON");
    if let Some(def) = def {
        schema["oneOf"] = json!([{"$ref": format!("#/$defs/{def}")}]);
    }
    Validator::new(schema)
}

/// Validates every line of `path` against `def`; the number of lines. Panics naming the first
/// invalid line and why.
pub fn validate_lines(path: &Path, def: &str) -> usize {
    let v = validator(Some(def));
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut n = 0;
    for (i, line) in text.lines().enumerate() {
        let message: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("line {i}: not JSON ({e}): {line}"));
        if let Err(e) = v.validate(&message) {
            panic!("{} line {i} is not a valid {def}: {e}\n{line}", path.display());
        }
        n += 1;
    }
    n
}

#[test]
fn the_schema_refuses_malformed_messages() {
    let line = validator(None);
    let scope = json!({"aggregate_type": "user", "tenant": "acme", "namespace": "n"});
    let owner = json!({"aggregate_type": "user", "tenant": null, "id": "a"});
    let good = [
        json!({"id": 0, "op": "hello", "protocol": 3}),
        json!({"id": 1, "op": "reserve", "store": 0, "now": 5, "scope": scope, "key": "k", "owner": owner, "hold": "h", "ttl": u64::MAX}),
        json!({"id": 2, "op": "release", "store": 0, "now": 5, "scope": scope, "key": "k", "owner": owner, "version": "ANY"}),
        json!({"id": 3, "op": "close", "store": 0}),
        json!({"id": 1, "ok": "Taken"}),
        json!({"id": 1, "ok": null}),
        json!({"id": 1, "ok": {"state": "pending", "owner": owner, "holds": ["h"], "expires_at": 9}}),
        json!({"id": 1, "error": {"kind": "StorageError", "indeterminate": true, "message": "lost"}}),
        json!({"id": 1, "error": {"kind": "InvalidArgument", "name": "TenantMismatch", "message": ""}}),
        json!({"id": 3, "op": "lookup", "store": 0, "now": "ask", "scope": scope, "key": "k"}),
        json!({"id": 3, "op": "reserve", "store": 0, "now": "ask", "scope": scope, "key": "k", "owner": owner, "hold": "h", "ttl": 5}),
        json!({"clock": 3}),
        json!({"clock": 3, "now": u64::MAX}),
    ];
    for m in &good {
        assert!(line.is_valid(m), "refused: {m}");
    }
    let bad = [
        json!({"op": "hello", "protocol": 3}),
        json!({"id": 0, "op": "hello", "protocol": 2}),
        json!({"id": 1, "op": "reserve", "store": 0, "now": 5, "scope": scope, "key": "k", "owner": owner, "hold": "h", "ttl": -1}),
        json!({"id": 1, "op": "reserve", "store": 0, "now": 5, "scope": scope, "key": "k", "owner": owner, "hold": "h"}),
        json!({"id": 1, "op": "confirm", "store": 0, "now": 5, "scope": scope, "key": "k", "owner": owner, "version": "ANY"}),
        json!({"id": 1, "op": "lookup", "store": 0, "now": 1.5, "scope": scope, "key": "k"}),
        json!({"id": 1, "op": "lookup", "store": 0, "now": 1, "scope": {"aggregate_type": "user", "namespace": "n"}, "key": "k"}),
        json!({"id": 3, "op": "close"}),
        json!({"id": 3, "op": "close", "store": 0, "now": 5}),
        json!({"id": 1, "ok": "taken"}),
        json!({"id": 1, "ok": "Taken", "error": {"kind": "StorageError", "indeterminate": true, "message": ""}}),
        json!({"id": 1, "ok": {"state": "pending", "owner": owner, "holds": [], "expires_at": 9}}),
        json!({"id": 1, "ok": {"state": "pending", "owner": owner, "holds": ["h", "h"], "expires_at": 9}}),
        json!({"id": 1, "ok": {"state": "confirmed", "owner": owner, "version": 1, "expires_at": 9}}),
        json!({"id": 1, "error": {"kind": "InvalidArgument", "name": "TenantNotAdmitted", "message": ""}}),
        json!({"id": 1, "error": {"kind": "StorageError", "message": "no indeterminate"}}),
        json!({"id": 1, "op": "open", "store": 0, "now": "ask"}),
        json!({"id": 1, "op": "lookup", "store": 0, "now": "later", "scope": scope, "key": "k"}),
        json!({"clock": -1}),
        json!({"clock": 3, "now": "ask"}),
        json!({"clock": 3, "id": 3}),
        json!({"clock": 3, "now": 5, "ok": null}),
    ];
    for m in &bad {
        assert!(!line.is_valid(m), "accepted: {m}");
    }
}

/// A clock question is a line of the adapter, its answer one of the driver's, and neither is a
/// request or an answer.
#[test]
fn clock_questions_and_answers_go_each_their_way() {
    let (driver, adapter) = (validator(Some("driver_line")), validator(Some("adapter_line")));
    let (request, answer) = (validator(Some("request")), validator(Some("answer")));
    let (question, reading) = (json!({"clock": 7}), json!({"clock": 7, "now": 12}));
    assert!(adapter.is_valid(&question) && !driver.is_valid(&question) && !answer.is_valid(&question));
    assert!(driver.is_valid(&reading) && !adapter.is_valid(&reading) && !request.is_valid(&reading));
}

#[test]
fn every_vector_file_is_valid_and_its_requests_are_protocol_requests() {
    let file_schema = validator(Some("vector_file"));
    let request = validator(Some("request"));
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../vectors");
    for (name, _) in FILES {
        let path = dir.join(format!("{name}.json"));
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("readable")).expect("JSON");
        if let Err(e) = file_schema.validate(&file) {
            panic!("{name}.json is not a valid vector file: {e}");
        }
        let (mut valid, mut all) = (0, 0);
        for step in
            file["cases"].as_array().into_iter().flatten().flat_map(|c| c["steps"].as_array().into_iter().flatten())
        {
            let mut r = step["request"].clone();
            r["id"] = 0.into();
            r["store"] = 0.into();
            all += 1;
            if request.is_valid(&r) {
                valid += 1;
            } else {
                // Only the arguments file holds requests the protocol's types refuse.
                assert_eq!(name, "arguments", "{name}.json: {r} is not a valid request");
            }
        }
        if name == "arguments" {
            assert!(valid > 0 && valid < all, "arguments.json: {valid} of {all} requests are valid");
        }
    }
}

/// Every node of `v` by JSON pointer, `v` itself first.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    out.push(at.clone());
    match v {
        Value::Object(fields) => {
            for (name, field) in fields {
                pointers(field, format!("{at}/{name}"), out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                pointers(item, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// `answer` and every answer one edit away from it: a node replaced by a value of another type,
/// a field taken out, a field added. Strings are replaced by `"a"` only, a valid value of every
/// text field that keeps holds `["a", "b"]` in order or repeats one: the driver also checks values
/// (holds in order, lengths, no empty text), which the schema leaves to the spec.
fn mutations(answer: &Value) -> Vec<Value> {
    let mut out = vec![answer.clone()];
    let mut at = Vec::new();
    pointers(answer, String::new(), &mut at);
    // An integer that is the protocol's version, so that a `hello` answer changed elsewhere still
    // speaks the driver's.
    let others = [json!(null), json!(true), json!(-1), json!(1.5), json!(3), json!("a"), json!([]), json!({})];
    for p in &at {
        for other in &others {
            let mut m = answer.clone();
            if let Some(node) = m.pointer_mut(p) {
                *node = other.clone();
                out.push(m);
            }
        }
        if let Some(fields) = answer.pointer(p).and_then(Value::as_object) {
            for name in fields.keys().map(String::as_str).chain(["extra"]) {
                let mut m = answer.clone();
                if let Some(Value::Object(fields)) = m.pointer_mut(p) {
                    if fields.remove(name).is_none() {
                        fields.insert(name.to_owned(), json!(0));
                    }
                    out.push(m);
                }
            }
        }
    }
    out
}

/// The driver's check of an answer's shape (`driver::check_answer`) and the protocol's schema
/// agree on every answer, right or one edit wrong, to every kind of request: a field missing,
/// unknown or of another type is refused by both, or accepted by both. The schema's `answer`
/// allows any result to any request; the request's own result is its definition in the schema
/// (`capabilities`, null, `outcome`, or null or `reservation`).
#[test]
fn the_driver_and_the_schema_accept_the_same_answers() {
    use reservation_conformance::driver::check_answer;
    let answer = validator(Some("answer"));
    let result_of = |one_of: Value| {
        let mut schema: Value = serde_json::from_str(SCHEMA).expect("the schema is JSON");
        schema["oneOf"] = one_of;
        Validator::new(schema)
    };
    let nothing = json!({"type": "null"});
    let results = [
        ("hello", result_of(json!([{"$ref": "#/$defs/capabilities"}]))),
        ("open", result_of(json!([nothing]))),
        ("reopen", result_of(json!([nothing]))),
        ("reserve", result_of(json!([{"$ref": "#/$defs/outcome"}]))),
        ("release", result_of(json!([{"$ref": "#/$defs/outcome"}]))),
        ("lookup", result_of(json!([nothing, {"$ref": "#/$defs/reservation"}]))),
    ];
    let owner = json!({"aggregate_type": "user", "tenant": "acme", "id": "a"});
    let system = json!({"aggregate_type": "user", "tenant": null, "id": "a"});
    let right = [
        json!({"id": 0, "ok": {"protocol": 3, "durable": false, "power_cuts": null}}),
        json!({"id": 1, "ok": null}),
        json!({"id": 2, "ok": "Taken"}),
        json!({"id": 3, "ok": "Kept"}),
        json!({"id": 4, "ok": {"state": "pending", "owner": owner, "holds": ["a", "b"], "expires_at": 9}}),
        json!({"id": 5, "ok": {"state": "confirmed", "owner": system, "version": 0}}),
        json!({"id": 6, "error": {"kind": "InvalidArgument", "name": "TenantMismatch", "message": "m"}}),
        json!({"id": 7, "error": {"kind": "InvalidArgument", "name": "KeyTooLong", "message": ""}}),
        json!({"id": 8, "error": {"kind": "StorageError", "indeterminate": true, "message": "lost"}}),
        json!({"id": 9, "ok": null, "error": {"kind": "StorageError", "indeterminate": false, "message": ""}}),
    ];
    let (mut accepted, mut refused) = (0, 0);
    for a in right.iter().flat_map(mutations) {
        for (op, result) in &results {
            let schema = answer.is_valid(&a) && a.get("ok").is_none_or(|ok| result.is_valid(ok));
            let driver = check_answer(op, &a);
            assert_eq!(driver.is_ok(), schema, "{op}: {a}\n  the driver says {driver:?}, the schema {schema}");
            if schema { accepted += 1 } else { refused += 1 }
        }
    }
    assert!(accepted > 50 && refused > 1_000, "{accepted} accepted, {refused} refused");
}

/// The error names the schema allows are the driver's: SPEC.md's table and `Unrepresentable`.
#[test]
fn the_schema_and_the_driver_name_the_same_errors() {
    let schema: Value = serde_json::from_str(SCHEMA).expect("the schema is JSON");
    let in_schema: Vec<&str> =
        schema["$defs"]["error_name"]["enum"].as_array().expect("an enum").iter().filter_map(Value::as_str).collect();
    assert_eq!(in_schema, reservation_conformance::driver::error_names());
}
