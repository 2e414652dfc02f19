//! Arbitrary raw strings, lengths, durations and versions through the validated constructors
//! and the store: every bad input is a typed error, nothing panics, nothing changes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use reservation_conformance::{MemoryHarness, oracle};

fuzz_target!(|input: oracle::RawInput| {
    if let Err(failure) = oracle::inputs(&MemoryHarness, &input) {
        panic!("{failure}");
    }
});
