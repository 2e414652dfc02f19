//! Operation scripts applied to `MemoryStore` and to the spec functions side by side: every
//! outcome and lookup must agree, and the store's invariants hold after each step.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reservation_conformance::{MemoryHarness, oracle};
use reservation_store::ops::Op;

fuzz_target!(|script: Vec<Op>| {
    if let Err(failure) = oracle::ops(&MemoryHarness, &script) {
        panic!("{failure}");
    }
});
