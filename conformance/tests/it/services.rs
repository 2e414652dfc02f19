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

#[test]
fn loopback_port_hands_out_each_port_once_below_the_ephemeral_range_and_nothing_listens_there() {
    // Two thousand random draws from the twenty thousand ports below the ephemeral range would
    // repeat one almost surely (about 90 pairs); handed out once each, none repeats.
    let ports: Vec<u16> =
        (0..2_000).map(|_| reservation_conformance::services::loopback_port().expect("a port")).collect();
    let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
    assert_eq!(distinct.len(), ports.len(), "a port was handed out twice");
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    assert!(ports.iter().all(|&p| (10_000..ephemeral).contains(&p)), "a port outside 10000..{ephemeral}");
    assert!(distinct.len() > 1 && distinct.iter().max() > distinct.iter().min(), "the same port every time");
    let last = *ports.last().expect("ports");
    assert!(std::net::TcpStream::connect(("127.0.0.1", last)).is_err(), "something listens on {last}");
    assert!(std::net::TcpListener::bind(("127.0.0.1", last)).is_ok(), "{last} cannot be bound");
}

#[test]
fn loopback_port_never_hands_out_a_port_something_listens_on() {
    // Listeners on 600 ports at the range's lower end, and 600 draws: drawn blindly, about 16 of
    // them would be held ports; a port handed out is never one of them.
    let held: Vec<std::net::TcpListener> =
        (10_000..10_600).filter_map(|p| std::net::TcpListener::bind(("127.0.0.1", p)).ok()).collect();
    let held_ports: std::collections::BTreeSet<u16> =
        held.iter().map(|l| l.local_addr().expect("an address").port()).collect();
    assert!(held_ports.len() > 500, "only {} of the ports could be held", held_ports.len());
    for _ in 0..600 {
        let port = reservation_conformance::services::loopback_port().expect("a port");
        assert!(!held_ports.contains(&port), "{port} is listened on");
    }
}
