//! Operation scripts applied to `MemoryStore` and to the spec functions side by side: every
//! outcome, and after every step the lookup of every key the script touched, must agree.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reservation_conformance::ops::Op;
use reservation_conformance::{MemoryHarness, oracle};

fuzz_target!(|script: Vec<Op>| {
    if let Err(failure) = oracle::ops(&MemoryHarness, &script) {
        panic!("{failure}");
    }
});
