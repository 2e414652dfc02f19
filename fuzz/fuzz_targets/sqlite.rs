//! The `ops` oracle on `SqliteStore`: operation scripts applied to the durable store and to the
//! spec functions side by side. One database file in the temporary directory serves the whole
//! run; the store sweeps expired rows after every new row.
#![no_main]

#[path = "../harness/sqlite.rs"]
mod harness;

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use reservation_conformance::ops::Op;
use reservation_conformance::oracle;

static HARNESS: LazyLock<reservation_sqlite::SqliteHarness> = LazyLock::new(harness::harness);

fuzz_target!(|script: Vec<Op>| {
    if let Err(failure) = oracle::ops(&*HARNESS, &script) {
        panic!("{failure}");
    }
});
