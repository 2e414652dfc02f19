//! A row this build would not have written (one the table's checks let through) is a
//! `StorageError` that names what is wrong, for every operation and for lookup, and nothing is
//! written over it.

use reservation_conformance::{START, unique_namespace};
use reservation_postgres::Time;
use reservation_store::error_chain;
use reservation_store::{AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, Ttl};

use crate::{admin, harness};

#[test]
fn a_row_it_would_not_have_written_is_a_storage_error_that_names_it() {
    let Some(h) = harness() else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("corrupt").as_str()).expect("scope");
    let key = Key::new("k").expect("key");
    let owner = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let hold = HoldId::new("h").expect("hold");
    let ttl = Ttl::from_millis(60_000).expect("ttl");
    h.runtime().block_on(store.reserve(&scope, &key, &owner, &hold, ttl)).expect("reserved");
    let table = format!("\"{}\".reservation", h.options().schema);
    let cases = [
        ("holds out of order", "holds = ARRAY['\\x62'::bytea, '\\x61'::bytea]", "holds out of order"),
        ("a hold not UTF-8", "holds = ARRAY['\\xff'::bytea]", "not UTF-8"),
        ("an owner id not UTF-8", "owner_id = '\\xff'::bytea", "owner_id is not UTF-8"),
    ];
    for (what, set, expected) in cases {
        let row = |set: &str| {
            let sql = format!("UPDATE {table} SET {set} WHERE namespace = $1 RETURNING holds, owner_id, owner_tenant");
            h.runtime().block_on(async {
                let r = admin().await.query_one(&sql, &[&scope.namespace.as_str().as_bytes()]).await.expect("updated");
                (r.get::<_, Vec<Vec<u8>>>(0), r.get::<_, Vec<u8>>(1), r.get::<_, Vec<u8>>(2))
            })
        };
        let written = row(set);
        let looked = h.runtime().block_on(store.lookup(&scope, &key)).expect_err(what);
        let reserved = h.runtime().block_on(store.reserve(&scope, &key, &owner, &hold, ttl)).expect_err(what);
        for error in [looked, reserved] {
            assert!(error_chain(&error).contains(expected), "{what}: {}", error_chain(&error));
            assert!(error_chain(&error).contains("decode the row"), "{what}: {}", error_chain(&error));
            assert!(!error.is_indeterminate(), "{what}: {}", error_chain(&error));
        }
        assert_eq!(row("state = state"), written, "{what}: the row was written over");
        row("holds = ARRAY['\\x68'::bytea], owner_id = '\\x616c696365'::bytea");
    }
}
