//! The store on Redis Cluster, on a cluster of the test's own (three primaries, each with a
//! replica: `RedisHarness::cluster`): the `redis+cluster://` URL, malformed ones refused; each
//! scope's keys in one slot, the scopes spread over the primaries; the store following a slot to
//! its new primary (`MOVED`) and the cluster's own failover; the sweep over every scope's index;
//! and the suite's fault check across the cluster's failover, which loses acknowledged
//! confirmations unless the store waits for the replica, and loses none when it does.

use std::collections::BTreeSet;
use std::time::{Duration, Instant as WallInstant};

use reservation_conformance::faults::Fault;
use reservation_conformance::services::service;
use reservation_conformance::{Harness, START, unique_namespace};
use reservation_redis::{RedisHarness, RedisOptions, RedisStore, Time};
use reservation_store::rules::Rule;
use reservation_store::spec::Reservation;
use reservation_store::{
    AggregateRef, ConfirmOutcome, HoldId, Key, ManualClock, ReservationScope, ReservationStore, Ttl, Version,
    error_chain,
};

use crate::orchestrated::{caught_losing, fault_run, lost_nothing, port_of, replica_of};

/// A harness on a cluster of its own; or `None` (said once) without `redis-server` and
/// `redis-cli`.
fn cluster(options: RedisOptions) -> Option<RedisHarness> {
    service("redis-server and redis-cli (for the Redis Cluster's nodes)", RedisHarness::cluster(options))
}

/// The replica's acknowledgement, within 500 ms: what the store needs on a cluster to keep what
/// it acknowledged across a failover.
fn the_replica() -> RedisOptions {
    RedisOptions::default().with_replica_acks(1, Duration::from_millis(500))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

#[test]
fn a_malformed_cluster_url_is_refused_with_a_storage_error_that_does_not_quote_it() {
    let rt = runtime();
    let malformed = [
        ("redis+cluster://", "not host[:port]"),
        ("redis+cluster://127.0.0.1:0", "not host[:port]"),
        ("redis+cluster://127.0.0.1:70000", "not host[:port]"),
        ("redis+cluster://127.0.0.1:x", "not host[:port]"),
        ("redis+cluster://127.0.0.1:1,", "not host[:port]"),
        ("redis+cluster://[::1", "not host[:port]"),
        ("redis+cluster://bad host:1", "not host[:port]"),
        ("redis+cluster://127.0.0.1/1", "database 0 alone"),
        ("redis+cluster://127.0.0.1/db", "database 0 alone"),
        ("redis+cluster://127.0.0.1/0/x", "database 0 alone"),
        ("redis+cluster://127.0.0.1?timeout=1", "a query or a fragment"),
        ("redis+cluster://127.0.0.1#x", "a query or a fragment"),
    ];
    for (url, why) in malformed {
        let connected = rt.block_on(RedisStore::connect_system(url, RedisOptions::default()));
        let error = connected.expect_err(url);
        let said = error_chain(&error);
        assert!(said.contains("Redis: the Cluster URL: ") && said.contains(why), "{url}: {said}");
        assert!(!error.is_indeterminate(), "{url}: {said}");
    }
    let secret = "redis+cluster://:hunter2@127.0.0.1/7";
    let said =
        error_chain(&rt.block_on(RedisStore::connect_system(secret, RedisOptions::default())).expect_err(secret));
    assert!(!said.contains("hunter2"), "{said}");
    // A Cluster URL finds each slot's primary itself: other nodes beside it are refused.
    let with_nodes = RedisOptions::default().with_nodes(["redis://127.0.0.1:6379/"]);
    let error = rt.block_on(RedisStore::connect_system("redis+cluster://127.0.0.1", with_nodes)).expect_err("nodes");
    assert!(error_chain(&error).contains("give no other nodes"), "{}", error_chain(&error));
    // A prefix with a brace would move the scopes' hash tags.
    for prefix in ["a{b", "a}b", "{}"] {
        let options = RedisOptions::default().with_prefix(prefix);
        let error = rt.block_on(RedisStore::connect_system("redis+cluster://127.0.0.1:1", options)).expect_err(prefix);
        assert!(error_chain(&error).contains("holds no `{` or `}`"), "{prefix}: {}", error_chain(&error));
    }
}

#[test]
fn every_documented_form_of_a_cluster_url_is_accepted_and_its_nodes_asked() {
    let rt = runtime();
    let mut options = RedisOptions::default();
    options.timeout = Duration::from_secs(1);
    // Nothing listens on these ports (6379 by default is not asked: no URL here omits a port
    // but one, whose node is asked second): each URL is accepted, and the store asks every node
    // it names, in order.
    let port = reservation_conformance::services::loopback_port().expect("a free port");
    let accepted = [
        (format!("redis+cluster://127.0.0.1:{port}"), vec![format!("127.0.0.1:{port}")]),
        (format!("redis+cluster://127.0.0.1:{port}/"), vec![format!("127.0.0.1:{port}")]),
        (format!("redis+cluster://127.0.0.1:{port}/0"), vec![format!("127.0.0.1:{port}")]),
        (
            format!("redis+cluster://user:secret@127.0.0.1:{port},localhost:{port}"),
            vec![format!("127.0.0.1:{port}"), format!("localhost:{port}")],
        ),
        (format!("redis+cluster://[::1]:{port}"), vec![format!("::1:{port}")]),
    ];
    for (url, asked) in accepted {
        let started = WallInstant::now();
        let error = rt.block_on(RedisStore::connect_system(&url, options.clone())).expect_err(&url);
        let said = error_chain(&error);
        let count = format!("none of the {} nodes named answered one", asked.len());
        assert!(said.contains(&count), "{url}: {said}");
        for node in asked {
            assert!(said.contains(&format!("{node}: ")), "{url}: {node} not asked: {said}");
        }
        assert!(!said.contains("secret"), "{said}");
        assert!(!error.is_indeterminate(), "{url}: {said}");
        assert!(started.elapsed() < Duration::from_secs(5), "{url}: took {:?}", started.elapsed());
    }
}

fn scope(label: &str) -> ReservationScope {
    ReservationScope::parse("user", Some("acme"), unique_namespace(label).as_str()).expect("scope")
}

fn owner() -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), "alice").expect("owner")
}

/// A plain connection to the node at `url`.
fn node(h: &RedisHarness, url: &str) -> redis::aio::MultiplexedConnection {
    h.runtime().block_on(async {
        let client = redis::Client::open(url).expect("a client");
        client.get_multiplexed_async_connection().await.expect("a connection")
    })
}

/// The slot the node at `url` computes for `key` (`CLUSTER KEYSLOT`).
fn keyslot(h: &RedisHarness, conn: &mut redis::aio::MultiplexedConnection, key: &[u8]) -> u16 {
    h.runtime().block_on(redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query_async(conn)).expect("KEYSLOT")
}

/// Every key the store wrote under the harness's prefix on the node at `url`.
fn keys_on(h: &RedisHarness, url: &str) -> Vec<Vec<u8>> {
    let mut conn = node(h, url);
    let pattern = format!("{}:*", h.options().prefix);
    h.runtime().block_on(redis::cmd("KEYS").arg(pattern).query_async(&mut conn)).expect("KEYS")
}

/// Each scope's row, clock and index are in one slot, the slot the store computes as Redis does,
/// whatever the scope's parts hold (braces included); and scopes spread over the three
/// primaries, each written to the primary that serves its slot.
#[test]
fn on_a_cluster_each_scope_lives_in_one_slot_and_the_scopes_spread_over_the_primaries() {
    let started = WallInstant::now();
    let Some(h) = cluster(RedisOptions::default()) else { return };
    eprintln!("the cluster started in {:.2?}", started.elapsed());
    let store = h.store(ManualClock::new(START));
    let mut namespaces: Vec<String> = (0..24).map(|n| unique_namespace(&format!("cluster-{n}")).to_string()).collect();
    namespaces.extend(["a}b", "{", "}", "{x}", "x{}y"].map(|odd| format!("{}{odd}", unique_namespace("braces"))));
    let hold = HoldId::new("h").expect("hold");
    for namespace in &namespaces {
        let Ok(scope) = ReservationScope::parse("user", Some("acme"), namespace) else { continue };
        for key in ["k1", "k}2", "{k3}"] {
            let key = Key::new(key).expect("key");
            let outcome = h.runtime().block_on(store.reserve(
                &scope,
                &key,
                &owner(),
                &hold,
                Ttl::from_millis(60_000).expect("ttl"),
            ));
            outcome.unwrap_or_else(|e| panic!("{namespace}: {}", error_chain(&e)));
        }
    }
    // One operation at a time: the pool keeps one idle connection for each primary it reached.
    let held = store.connections();
    assert!((1..=3).contains(&held), "the pool holds {held} connections after operations one at a time");
    let primaries: Vec<&reservation_redis::AofServer> = h
        .cluster_nodes()
        .iter()
        .filter(|n| replica_of(&h, &n.url()).is_none() && !keys_on(&h, &n.url()).is_empty())
        .collect();
    assert_eq!(primaries.len(), 3, "the scopes are not spread over the three primaries");
    let mut conn = node(&h, &primaries[0].url());
    let mut scopes = 0;
    for primary in &primaries {
        // Every key but the list of indexes carries its scope's tag.
        let list = format!("{}:s", h.options().prefix).into_bytes();
        let keys: Vec<Vec<u8>> = keys_on(&h, &primary.url()).into_iter().filter(|k| *k != list).collect();
        let mut by_scope: std::collections::BTreeMap<Vec<u8>, BTreeSet<u16>> = Default::default();
        for key in &keys {
            let slot = keyslot(&h, &mut conn, key);
            // The scope's part: from the first `{` on.
            let open = key.iter().position(|b| *b == b'{').expect("a tagged key");
            let close = key[open..].iter().position(|b| *b == b'}').expect("a closed tag") + open;
            by_scope.entry(key[open..=close].to_vec()).or_default().insert(slot);
        }
        for (tag, slots) in &by_scope {
            assert_eq!(slots.len(), 1, "{}: keys of one scope in slots {slots:?}", String::from_utf8_lossy(tag));
        }
        scopes += by_scope.len();
    }
    assert!(scopes >= namespaces.len(), "{scopes} scopes found of {}", namespaces.len());
}

/// A manual failover (`CLUSTER FAILOVER` on a replica: no write lost) makes the old primary a
/// replica, which answers `MOVED` to the store's pooled connection: the store asks the nodes
/// for the map again and goes on, with no error.
#[test]
fn a_slot_moved_to_another_node_is_followed_without_an_error() {
    let Some(h) = cluster(RedisOptions::default()) else { return };
    let store = h.store(ManualClock::new(START));
    let scope = scope("cluster-moved");
    let version = Version::stream(1).expect("a version");
    let confirm =
        |key: &str| h.runtime().block_on(store.confirm(&scope, &Key::new(key).expect("key"), &owner(), version));
    assert_eq!(confirm("before").expect("confirmed"), ConfirmOutcome::Confirmed);
    let old = h.server().expect("a primary").url();
    let replica = h
        .cluster_nodes()
        .iter()
        .find(|n| {
            crate::answering_line(&h, &n.url(), "tcp_port").is_some()
                && replica_of(&h, &n.url()).map(|(port, _)| port) == Some(port_of(&old))
        })
        .expect("the busiest primary's replica");
    let mut conn = node(&h, &replica.url());
    // Redis gives a manual failover 5 s to end, and drops it silently after: on a loaded machine
    // it is asked for again, up to four times.
    let swapped = || replica_of(&h, &old).map(|(port, _)| port) == Some(port_of(&replica.url()));
    let ended = (0..4).any(|_| {
        // Refused once the replica has become the primary between two looks: the look after says so.
        let _: Result<String, _> = h.runtime().block_on(redis::cmd("CLUSTER").arg("FAILOVER").query_async(&mut conn));
        let deadline = WallInstant::now() + Duration::from_secs(7);
        while !swapped() && WallInstant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        swapped()
    });
    assert!(ended, "the manual failover did not end, asked for four times");
    assert_eq!(confirm("after").expect("confirmed after the slot moved"), ConfirmOutcome::Confirmed);
    let found = h.runtime().block_on(store.lookup(&scope, &Key::new("before").expect("key"))).expect("looked up");
    assert_eq!(found, Some(Reservation::confirmed(owner(), version)));
}

#[test]
fn on_a_cluster_the_store_follows_the_clusters_failover_and_keeps_what_the_replica_acknowledged() {
    let Some(h) = cluster(the_replica()) else { return };
    let store = h.store(ManualClock::new(START));
    let scope = scope("cluster-failover");
    let version = Version::stream(1).expect("a version");
    let confirm =
        |key: &str| h.runtime().block_on(store.confirm(&scope, &Key::new(key).expect("key"), &owner(), version));
    // A cluster just made, on a loaded machine, may leave a first write's `WAIT` unanswered
    // within its bound: it is then indeterminate, and the next try finds it confirmed.
    reservation_testkit::confirm_after_failover(|| confirm("before"));
    let before = h.server().expect("a primary").url();
    let started = WallInstant::now();
    h.inject(Fault::Failover).unwrap_or_else(|e| panic!("the cluster's failover: {}", error_chain(&e)));
    let took = started.elapsed();
    assert!(!h.faults().contains(&Fault::Failover), "a second failover is offered");
    assert!(replica_of(&h, &before).is_some(), "the old primary is not a replica after the failover");
    let tries = reservation_testkit::confirm_after_failover(|| confirm("after"));
    let found = h.runtime().block_on(store.lookup(&scope, &Key::new("before").expect("key"))).expect("looked up");
    assert_eq!(found, Some(Reservation::confirmed(owner(), version)), "a confirmation the replica had was lost");
    eprintln!("the cluster's failover took {took:.2?}; the store answered again after {tries} tries");
}

/// On a local clock, the sweep finds each scope's expiry index through the list the store keeps,
/// whichever primary serves it, and deletes what expired there.
#[test]
fn on_a_cluster_the_sweep_reaches_every_scopes_index() {
    let mut options = RedisOptions::default();
    options.sweep_every = 0;
    let Some(h) = cluster(options) else { return };
    let clock = ManualClock::new(START);
    let store = h.store_with(Time::Local(clock.clone()));
    let hold = HoldId::new("h").expect("hold");
    let scopes: Vec<ReservationScope> = (0..12).map(|n| scope(&format!("cluster-sweep-{n}"))).collect();
    for scope in &scopes {
        for key in ["a", "b"] {
            let key = Key::new(key).expect("key");
            h.runtime()
                .block_on(store.reserve(scope, &key, &owner(), &hold, Ttl::from_millis(1_000).expect("ttl")))
                .expect("reserved");
        }
    }
    let spread = h
        .cluster_nodes()
        .iter()
        .filter(|n| replica_of(&h, &n.url()).is_none() && !keys_on(&h, &n.url()).is_empty())
        .count();
    assert!(spread >= 2, "the scopes are on {spread} primary");
    assert_eq!(h.runtime().block_on(store.sweep()).expect("swept"), 0, "a live row was swept");
    clock.advance(1_001);
    assert_eq!(h.runtime().block_on(store.sweep()).expect("swept"), 24);
    for scope in &scopes {
        let found = h.runtime().block_on(store.lookup(scope, &Key::new("a").expect("key"))).expect("looked up");
        assert_eq!(found, None);
    }
}

#[test]
fn a_cluster_offers_a_long_pause_in_place_of_its_one_failover() {
    let Some(h) = cluster(RedisOptions::default()) else { return };
    for fault in [Fault::CutConnections, Fault::Pause, Fault::Failover, Fault::LongPause] {
        assert!(h.faults().contains(&fault), "{fault}: {:?}", h.faults());
    }
    assert!(!h.faults().contains(&Fault::Crash), "a crash of a cluster is offered: {:?}", h.faults());
    let before = h.server().expect("a primary").url();
    h.inject(Fault::LongPause).unwrap_or_else(|e| panic!("the long pause: {}", error_chain(&e)));
    assert!(replica_of(&h, &before).is_some(), "the paused primary is not a replica after the long pause");
    for fault in [Fault::Failover, Fault::LongPause, Fault::Partition] {
        assert!(!h.faults().contains(&fault), "{fault}: {:?}", h.faults());
        let said = error_chain(&h.inject(fault).expect_err("a second failover"));
        assert!(said.contains(&format!("cannot cause the fault `{fault}`")), "{said}");
    }
}

/// A harness on a cluster of its own that can cut a primary off; or `None` (said once) without
/// `redis-server` or without `nft` (nftables) and the right to use it.
fn partitionable(options: RedisOptions) -> Option<RedisHarness> {
    let h = cluster(options)?;
    let can = if h.faults().contains(&Fault::Partition) {
        Ok(h)
    } else {
        Err("`nft list tables` did not succeed (install the nftables package; the tests must run as root)")
    };
    service("nft (nftables), for a partition of a Redis Cluster's primary", can)
}

/// Cut off from every other node, the busiest primary is replaced by its replica, and once the
/// network heals it is a replica of the new one; the store, which reached it all along, then
/// finds the new primary, and the partition is not offered again. A writer confirms fresh keys
/// all through the partition: some of those the cut-off primary acknowledged are gone (174 of
/// 354 in a run here), none acknowledged before the cut.
#[test]
fn a_partitioned_cluster_primary_is_replaced_and_rejoins_as_a_replica() {
    let Some(h) = partitionable(RedisOptions::default()) else { return };
    let store = h.store(ManualClock::new(START));
    let scope = scope("cluster-partition");
    let version = Version::stream(1).expect("a version");
    let confirm = |key: &Key| h.runtime().block_on(store.confirm(&scope, key, &owner(), version));
    assert_eq!(confirm(&Key::new("before").expect("key")).expect("confirmed"), ConfirmOutcome::Confirmed);
    let before = h.server().expect("a primary").url();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = WallInstant::now();
    let (acknowledged, partitioned) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut acknowledged = Vec::new();
            for n in 0.. {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let key = Key::new(format!("k{n}")).expect("key");
                if let Ok(ConfirmOutcome::Confirmed) = confirm(&key) {
                    acknowledged.push((key, started.elapsed()));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            acknowledged
        });
        std::thread::sleep(Duration::from_millis(200));
        let partitioned = h.inject(Fault::Partition);
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        (writer.join().expect("the writer"), partitioned)
    });
    partitioned.unwrap_or_else(|e| panic!("the partition: {}", error_chain(&e)));
    eprintln!("the partition of a cluster primary took {:.2?}", started.elapsed());
    let (new, link) = replica_of(&h, &before).expect("the old primary is not a replica after the partition");
    assert_eq!(link, "connected", "{before}");
    assert_ne!(new, port_of(&before));
    let looked = |key: &Key| {
        (0..5).find_map(|_| h.runtime().block_on(store.lookup(&scope, key)).ok()).expect("the store never came back")
    };
    let lost: Vec<_> = acknowledged.iter().filter(|(key, _)| looked(key).is_none()).collect();
    eprintln!("{} confirmations acknowledged through the partition, {} lost", acknowledged.len(), lost.len());
    assert!(!lost.is_empty(), "no acknowledged confirmation was lost ({} acknowledged)", acknowledged.len());
    assert!(
        lost.iter().all(|(_, at)| *at >= Duration::from_millis(200)),
        "a confirmation from before the cut was lost"
    );
    let kept = Some(Reservation::confirmed(owner(), version));
    assert_eq!(looked(&Key::new("before").expect("key")), kept, "the confirmation made before the cut was lost");
    for fault in [Fault::Failover, Fault::LongPause, Fault::Partition] {
        assert!(!h.faults().contains(&fault), "{fault}: {:?}", h.faults());
    }
}

mod long {
    use super::*;

    crate::orchestrated::long_fault_checks! {
        "cluster";
        without_wait_the_fault_check_catches_what_the_clusters_failover_loses:
            cluster(RedisOptions::default()) => caught_losing(Fault::Failover, "Cluster, failover without WAIT");
        with_wait_for_the_replica_the_clusters_failover_loses_nothing:
            cluster(the_replica()) => lost_nothing(Fault::Failover, "Cluster, failover with WAIT 1");
        with_wait_for_the_replica_a_cluster_primary_paused_past_the_node_timeout_loses_nothing:
            cluster(the_replica()) => lost_nothing(Fault::LongPause, "Cluster, long pause with WAIT 1");
        without_wait_the_fault_check_catches_what_a_partitioned_cluster_primary_loses:
            partitionable(RedisOptions::default()) => caught_losing(Fault::Partition, "Cluster, partition without WAIT");
        with_wait_for_the_replica_a_partitioned_cluster_primary_loses_nothing:
            partitionable(the_replica()) => lost_nothing(Fault::Partition, "Cluster, partition with WAIT 1");
    }

    /// A cluster primary stopped past the node timeout and let go on lost no ledger confirmation
    /// without `WAIT` in seven runs of eight here (about 6 of the store's writes refused,
    /// determinate, each run); in the eighth, a clean-clone CI run, it lost a contended key's
    /// acknowledged state, which the check caught as P1 naming the long pause. Whatever it
    /// answers is judged as any other run: a loss, of a ledger confirmation or of another
    /// acknowledged state, caught as P1 naming the fault; no loss, a pass.
    #[test]
    fn without_wait_a_cluster_primary_paused_past_the_node_timeout_is_judged_by_what_it_lost() {
        if !reservation_conformance::tiers::long_tier(
            "cluster::long::without_wait_a_cluster_primary_paused_past_the_node_timeout_is_judged_by_what_it_lost",
        ) {
            return;
        }
        let Some(h) = cluster(RedisOptions::default()) else { return };
        let run = fault_run(&h, Fault::LongPause, "Cluster, long pause without WAIT");
        assert!(run.report.confirmations_checked > 0, "no acknowledged confirmation was looked up: {}", run.report);
        match run.verdict {
            Ok(()) => assert_eq!(run.report.lost, 0, "{}", run.report),
            Err(failure) => {
                assert_eq!(failure.rule, Some(Rule::P1), "{failure}");
                assert!(failure.to_string().contains(Fault::LongPause.name()), "{failure}");
            }
        }
    }

    #[test]
    fn the_whole_suite_passes_on_a_cluster_waiting_for_each_replica() {
        if !reservation_conformance::tiers::long_tier(
            "cluster::long::the_whole_suite_passes_on_a_cluster_waiting_for_each_replica",
        ) {
            return;
        }
        let Some(h) = cluster(the_replica()) else { return };
        let started = WallInstant::now();
        let report = reservation_conformance::run_all(&h, &RedisHarness::settings());
        eprintln!("the suite on a Redis Cluster, in {:.2?}", started.elapsed());
        if let Err(report) = report.into_result() {
            panic!("{report}");
        }
    }
}

/// On Redis's clock nothing needs sweeping: a cluster store lists no scope's index.
#[test]
fn on_redis_clock_a_cluster_store_lists_no_index() {
    let Some(h) = cluster(RedisOptions::default()) else { return };
    let store = h.store_with(Time::REDIS);
    let hold = HoldId::new("h").expect("hold");
    let scope = scope("cluster-redis-clock");
    let key = Key::new("k").expect("key");
    h.runtime()
        .block_on(store.reserve(&scope, &key, &owner(), &hold, Ttl::from_millis(60_000).expect("ttl")))
        .expect("reserved");
    let list = format!("{}:s", h.options().prefix).into_bytes();
    for node in h.cluster_nodes() {
        assert!(!keys_on(&h, &node.url()).contains(&list), "a list of indexes on {}", node.url());
    }
    // On a local clock the list is there (the test's control).
    let local = h.store_with(Time::Local(ManualClock::new(START)));
    h.runtime()
        .block_on(local.reserve(
            &scope,
            &Key::new("l").expect("key"),
            &owner(),
            &hold,
            Ttl::from_millis(60_000).expect("ttl"),
        ))
        .expect("reserved");
    assert!(h.cluster_nodes().iter().any(|n| keys_on(&h, &n.url()).contains(&list)), "no list on a local clock");
}

/// A node that says it serves every slot and answers `MOVED` to every command of an operation:
/// its port, and how many `WATCH`es it was sent. Anything else (`PING`, a client's settings) it
/// answers `OK`.
fn always_moved() -> (u16, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let watches = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = watches.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counted = counted.clone();
            std::thread::spawn(move || {
                let mut out = stream.try_clone().expect("a second handle");
                let mut input = BufReader::new(stream);
                let mut line = String::new();
                // One command: `*N`, then N bulk strings; its first word decides the answer.
                while input.read_line(&mut line).is_ok_and(|n| n > 0) {
                    let n: usize = line.trim().trim_start_matches('*').parse().unwrap_or(0);
                    let mut words = Vec::new();
                    for _ in 0..n {
                        line.clear();
                        let _ = input.read_line(&mut line);
                        let len: usize = line.trim().trim_start_matches('$').parse().unwrap_or(0);
                        let mut word = vec![0; len + 2];
                        let _ = std::io::Read::read_exact(&mut input, &mut word);
                        words.push(String::from_utf8_lossy(&word[..len]).to_uppercase());
                    }
                    line.clear();
                    let answer = match words.first().map(String::as_str) {
                        Some("CLUSTER") => {
                            format!("*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n$9\r\n127.0.0.1\r\n:{port}\r\n$2\r\nid\r\n")
                        }
                        Some("PING") => "+PONG\r\n".to_owned(),
                        Some("WATCH") => {
                            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            format!("-MOVED 1 127.0.0.1:{port}\r\n")
                        }
                        Some("GET" | "ZRANGE" | "TIME" | "MULTI" | "SET" | "EXEC" | "UNWATCH" | "SADD") => {
                            format!("-MOVED 1 127.0.0.1:{port}\r\n")
                        }
                        _ => "+OK\r\n".to_owned(),
                    };
                    if out.write_all(answer.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (port, watches)
}

/// A node that keeps answering `MOVED`: each answer is determinate (nothing ran), the store asks
/// for the map again and tries again, `retries` times more, and then fails with a determinate
/// `StorageError`, in time.
#[test]
fn redirects_are_retried_within_the_bound_and_then_fail_determinate() {
    let rt = runtime();
    let (port, watches) = always_moved();
    let mut options = RedisOptions::default();
    options.retries = 3;
    options.timeout = Duration::from_secs(2);
    let url = format!("redis+cluster://127.0.0.1:{port}");
    let store = rt
        .block_on(RedisStore::connect(&url, Time::Local(ManualClock::new(START)), options))
        .unwrap_or_else(|e| panic!("{}", error_chain(&e)));
    let started = WallInstant::now();
    let key = Key::new("k").expect("key");
    let error = rt.block_on(store.lookup(&scope("cluster-moved-forever"), &key)).expect_err("a slot no node serves");
    let said = error_chain(&error);
    assert!(!error.is_indeterminate(), "{said}");
    assert!(said.contains("Moved"), "{said}");
    assert_eq!(watches.load(std::sync::atomic::Ordering::SeqCst), 4, "one attempt and three retries: {said}");
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
}
