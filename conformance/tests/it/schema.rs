//! The protocol's JSON Schema (`conformance/schema/protocol.schema.json`): every message between
//! the driver and an adapter is valid against it, every vector file too, and it refuses
//! malformed messages.

use std::path::Path;

use reservation_conformance::driver::SCHEMA;
use reservation_conformance::vectors::FILES;
use serde_json::{Value, json};

/// A validator for the schema's definition `def` (`request`, `answer`, `vector_file`), or for a
/// whole line (`None`).
pub fn validator(def: Option<&str>) -> jsonschema::Validator {
    let mut schema: Value = serde_json::from_str(SCHEMA).expect("the schema is JSON");
    if let Some(def) = def {
        schema["oneOf"] = json!([{"$ref": format!("#/$defs/{def}")}]);
    }
    jsonschema::draft202012::new(&schema).expect("the schema is a valid draft 2020-12 schema")
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
        json!({"id": 0, "op": "hello", "protocol": 1}),
        json!({"id": 1, "op": "reserve", "store": 0, "now": 5, "scope": scope, "key": "k", "owner": owner, "hold": "h", "ttl": u64::MAX}),
        json!({"id": 2, "op": "release", "store": 0, "now": 5, "scope": scope, "key": "k", "owner": owner, "version": "ANY"}),
        json!({"id": 3, "op": "close", "store": 0}),
        json!({"id": 1, "ok": "Taken"}),
        json!({"id": 1, "ok": null}),
        json!({"id": 1, "ok": {"state": "pending", "owner": owner, "holds": ["h"], "expires_at": 9}}),
        json!({"id": 1, "error": {"kind": "StorageError", "indeterminate": true, "message": "lost"}}),
        json!({"id": 1, "error": {"kind": "InvalidArgument", "name": "TenantMismatch", "message": ""}}),
    ];
    for m in &good {
        assert!(line.is_valid(m), "refused: {m}");
    }
    let bad = [
        json!({"op": "hello", "protocol": 1}),
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
    ];
    for m in &bad {
        assert!(!line.is_valid(m), "accepted: {m}");
    }
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
