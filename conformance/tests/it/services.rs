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

/// `run_within`: what the command was given on its standard input reaches it; a command that
/// fails is an error quoting what it said; one that outlasts its bound is killed, and an error.
#[test]
fn run_within_passes_input_quotes_a_failure_and_bounds_the_wait() {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use reservation_conformance::services::run_within;
    let sh = |script: &str| {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        command
    };
    let second = Duration::from_secs(5);
    run_within(sh(r#"read line; [ "$line" = hello ]"#), Some("hello\n"), second).expect("it read what it was given");
    let refused = run_within(sh(r#"read line; [ "$line" = hello ]"#), Some("other\n"), second);
    assert!(refused.is_err(), "a command that exits 1 passed");
    let said =
        reservation_store::error_chain(&run_within(sh("echo nope >&2; exit 3"), None, second).expect_err("exit 3"));
    assert!(said.contains("exit status: 3") && said.contains("nope"), "{said}");
    let started = Instant::now();
    let said = reservation_store::error_chain(
        &run_within(sh("sleep 30"), None, Duration::from_millis(200)).expect_err("a command past its bound"),
    );
    assert!(said.contains("did not end within 200ms"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(10), "the wait was not bounded: {:?}", started.elapsed());
    // A command that fails leaving a process that holds its standard error open: its answer
    // comes within the bound all the same, quoting what came by then.
    let started = Instant::now();
    let left = run_within(sh("echo first >&2; sleep 30 & exit 4"), None, Duration::from_millis(500));
    let said = reservation_store::error_chain(&left.expect_err("exit 4"));
    assert!(said.contains("exit status: 4"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(10), "the wait was not bounded: {:?}", started.elapsed());
    // What a talkative command says is kept up to a bound, and does not hold it up.
    let loud = run_within(sh("head -c 1000000 /dev/zero | tr '\\0' Z >&2; exit 5"), None, second);
    let said = reservation_store::error_chain(&loud.expect_err("exit 5"));
    assert!(said.contains("exit status: 5"), "{}", &said[..said.len().min(200)]);
    // The command itself, quoted, holds one `Z`.
    let kept = said.matches('Z').count() - 1;
    let most = usize::try_from(reservation_conformance::services::SAID_AT_MOST).expect("a size");
    assert!(kept > 0 && kept <= most, "{kept} bytes of standard error kept");
}

/// A `Partition` drops what its rules say until it heals; rules nft refuses are an error that
/// quotes it. Without nft or the right to use it, says so and passes, unless
/// `RESERVATION_REQUIRE_SERVICES=1`.
#[test]
fn a_partition_drops_what_its_rules_say_until_it_heals() {
    use std::net::{TcpListener, TcpStream};
    use std::time::Duration;

    use reservation_conformance::services::Partition;
    let available = if Partition::available() { Ok(()) } else { Err("nft (nftables), as root") };
    if service("nftables", available).is_none() {
        return;
    }
    let said = reservation_store::error_chain(
        &Partition::start("refused", &["no such rule".to_owned()]).err().expect("nft refused the rule"),
    );
    assert!(said.contains("nft -f -: exit status"), "{said}");
    let listener = TcpListener::bind("127.0.0.1:0").expect("a listener");
    let port = listener.local_addr().expect("its address").port();
    let reach = || {
        TcpStream::connect_timeout(
            &format!("127.0.0.1:{port}").parse().expect("an address"),
            Duration::from_millis(300),
        )
    };
    reach().expect("reached before the partition");
    let cut = Partition::start(&format!("test_{port}"), &[format!("tcp dport {port} drop")]).expect("a partition");
    assert!(reach().is_err(), "reached through the partition");
    cut.heal().expect("healed");
    reach().expect("reached after the partition healed");
    // Dropped without healing, it heals all the same.
    let cut = Partition::start(&format!("dropped_{port}"), &[format!("tcp dport {port} drop")]).expect("a partition");
    drop(cut);
    reach().expect("reached after the partition was dropped");
}
