//! The whole suite against `MemoryStore`, through the macro.

use reservation_conformance::MemoryHarness;

reservation_conformance::tests!(memory_store, MemoryHarness);

/// `tests!(…, durable)` on a harness that does not declare durability would let its durable
/// check pass without running: the generated test fails first, saying why.
#[test]
fn the_durable_word_on_a_harness_not_declared_durable_fails() {
    let caught = std::panic::catch_unwind(|| {
        reservation_conformance::__assert_declared(&MemoryHarness, reservation_conformance::Requirement::Durable)
    });
    let message = caught.expect_err("a harness that is not durable passed as durable");
    let text = message
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| message.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(text.contains("does not declare the durable capability"), "{text}");
}
