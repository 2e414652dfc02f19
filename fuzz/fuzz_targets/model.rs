//! Random walks through the model's `next_state`, driven by the fuzzer's bytes, checking its
//! always-properties after every step.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use reservation_model::ModelConfig;

static CONFIG: LazyLock<ModelConfig> = LazyLock::new(ModelConfig::fuzz);

fuzz_target!(|choices: &[u8]| {
    if let Err(violation) = reservation_model::walk(&CONFIG, choices) {
        panic!("{violation}");
    }
});
