//! `services::service`: a harness that connected is used; one that did not is a skip, or a
//! failure under `RESERVATION_REQUIRE_SERVICES=1`.

use reservation_conformance::services::{service, services_required};

#[test]
fn a_connected_harness_is_used() {
    assert_eq!(service("a test service", Ok::<_, String>(7)), Some(7));
}

#[test]
fn a_missing_server_is_a_skip_or_under_the_variable_a_failure() {
    let outcome = std::panic::catch_unwind(|| service::<u8, _>("a missing test service", Err("nothing listens")));
    if services_required() {
        let panic = outcome.expect_err("a missing server passed under RESERVATION_REQUIRE_SERVICES=1");
        let message = panic.downcast_ref::<String>().expect("a formatted message");
        assert!(message.contains("a missing test service unavailable: nothing listens"), "{message}");
    } else {
        assert_eq!(outcome.expect("a missing server failed without the variable"), None);
    }
}
