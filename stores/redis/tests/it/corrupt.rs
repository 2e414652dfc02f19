//! A row this build would not have written is a `StorageError` that names what is wrong, for
//! every operation and for lookup, and nothing is written over it.

use reservation_conformance::{START, unique_namespace};
use reservation_redis::Time;
use reservation_store::error_chain;
use reservation_store::{AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, Ttl};

use crate::harness;

/// `bytes` as a 2-byte length and the bytes, as a row encodes a text.
fn text(bytes: &[u8]) -> Vec<u8> {
    let mut out = u16::try_from(bytes.len()).expect("short").to_be_bytes().to_vec();
    out.extend_from_slice(bytes);
    out
}

/// A row: the format, the state, the owner (tenant `acme`, id `id`), then `rest`.
fn row(format: u8, state: u8, id: &[u8], rest: &[u8]) -> Vec<u8> {
    let mut out = vec![format, state];
    out.extend(text(b"acme"));
    out.extend(text(id));
    out.extend_from_slice(rest);
    out
}

/// A pending row's tail: an expiry far ahead, then the holds.
fn pending(holds: &[&[u8]]) -> Vec<u8> {
    let mut out = (START.as_millis() + 60_000).to_be_bytes().to_vec();
    out.extend(u16::try_from(holds.len()).expect("few").to_be_bytes());
    for hold in holds {
        out.extend(text(hold));
    }
    out
}

#[test]
fn a_row_it_would_not_have_written_is_a_storage_error_that_names_it() {
    let Some(h) = harness() else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let namespace = unique_namespace("corrupt");
    let scope = ReservationScope::parse("user", Some("acme"), namespace.as_str()).expect("scope");
    let key = Key::new("k").expect("key");
    let owner = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let hold = HoldId::new("h").expect("hold");
    let mut redis_key = format!("{}:r:", h.options().prefix).into_bytes();
    for part in ["user", "acme", namespace.as_str(), "k"] {
        redis_key.extend(format!("{}:{part}", part.len()).into_bytes());
    }
    let version = 5u64.to_be_bytes();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("another format", row(2, 1, b"alice", &version), "a row of format 2, this build reads 1"),
        ("truncated", vec![1], "a truncated row"),
        ("an unknown state", row(1, 7, b"alice", &version), "state 7"),
        ("no hold", row(1, 0, b"alice", &pending(&[])), "a pending row with no hold"),
        ("holds out of order", row(1, 0, b"alice", &pending(&[b"b", b"a"])), "holds out of order"),
        ("a hold not UTF-8", row(1, 0, b"alice", &pending(&[b"\xff"])), "a hold id that is not UTF-8"),
        ("an empty hold", row(1, 0, b"alice", &pending(&[b""])), "holds:"),
        ("an owner id not UTF-8", row(1, 1, b"\xff", &version), "owner_id is not UTF-8"),
        ("an empty owner id", row(1, 1, b"", &version), "owner_id:"),
        ("bytes after the row", [row(1, 1, b"alice", &version), vec![0]].concat(), "bytes after the row"),
        ("a truncated expiry", row(1, 0, b"alice", &[0, 0, 1]), "a truncated row"),
    ];
    for (what, bytes, expected) in cases {
        let read_raw = || -> Option<Vec<u8>> {
            h.runtime().block_on(async {
                let client = redis::Client::open(h.url()).expect("a client");
                let mut conn = client.get_multiplexed_async_connection().await.expect("a connection");
                redis::cmd("GET").arg(&redis_key).query_async(&mut conn).await.expect("read")
            })
        };
        h.runtime().block_on(async {
            let client = redis::Client::open(h.url()).expect("a client");
            let mut conn = client.get_multiplexed_async_connection().await.expect("a connection");
            let () = redis::cmd("SET").arg(&redis_key).arg(&bytes).query_async(&mut conn).await.expect("written");
        });
        let looked = h.runtime().block_on(store.lookup(&scope, &key)).expect_err(what);
        let reserved = h
            .runtime()
            .block_on(store.reserve(&scope, &key, &owner, &hold, Ttl::from_millis(10).expect("ttl")))
            .expect_err(what);
        for error in [looked, reserved] {
            assert!(error_chain(&error).contains(expected), "{what}: {}", error_chain(&error));
            assert!(error_chain(&error).contains("decode the row"), "{what}: {}", error_chain(&error));
            assert!(!error.is_indeterminate(), "{what}: {}", error_chain(&error));
        }
        assert_eq!(read_raw(), Some(bytes), "{what}: the row was written over");
    }
}
