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
fn loopback_port_hands_out_free_ports_below_the_ephemeral_range_each_once() {
    use reservation_conformance::services::{loopback_port, loopback_port_range};
    let range = loopback_port_range(std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok().as_deref());
    // Listeners on 600 ports at the range's lower end; drawn blindly, about one draw in 38 would
    // be one of them.
    let held: Vec<std::net::TcpListener> =
        (range.start..range.start + 600).filter_map(|p| std::net::TcpListener::bind(("127.0.0.1", p)).ok()).collect();
    let held: std::collections::BTreeSet<u16> =
        held.iter().map(|l| l.local_addr().expect("an address").port()).collect();
    assert!(held.len() > 500, "only {} of the ports could be held", held.len());
    // Two thousand random draws from the ports below the ephemeral range (about twenty thousand)
    // would repeat one almost surely (about 90 pairs); handed out once each, none repeats.
    let draws = (range.len() / 4).min(2_000);
    let ports: Vec<u16> = (0..draws).map(|_| loopback_port().expect("a port")).collect();
    let distinct: std::collections::BTreeSet<u16> = ports.iter().copied().collect();
    assert_eq!(distinct.len(), ports.len(), "a port was handed out twice");
    assert!(ports.iter().all(|p| range.contains(p)), "a port outside {range:?}");
    assert_eq!(distinct.intersection(&held).count(), 0, "a port something listens on was handed out");
    let last = *ports.last().expect("ports");
    assert!(std::net::TcpListener::bind(("127.0.0.1", last)).is_ok(), "{last} cannot be bound");
}

#[test]
fn loopback_port_range_ends_where_the_ephemeral_range_starts() {
    use reservation_conformance::services::loopback_port_range as range;
    assert_eq!(range(Some("32768\t60999\n")), 10_000..32_768);
    assert_eq!(range(Some("20000 60999")), 10_000..20_000);
    assert_eq!(range(Some("11000 60999")), 10_000..11_000, "a thousand ports are enough");
    assert_eq!(range(Some("10999 60999")), 10_000..32_768, "fewer are not");
    assert_eq!(range(Some("1024 65535")), 10_000..32_768);
    assert_eq!(range(Some("")), 10_000..32_768);
    assert_eq!(range(Some("many")), 10_000..32_768);
    assert_eq!(range(None), 10_000..32_768);
}
