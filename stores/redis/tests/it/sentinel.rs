//! The store through Redis Sentinel, on a topology of the test's own (a primary, two replicas,
//! three sentinels: `RedisHarness::sentinel`): the `redis+sentinel://` URL, malformed ones
//! refused; the store finds the primary the sentinels name and follows their failover; and the
//! suite's fault check across that failover, which loses acknowledged confirmations unless the
//! store waits for both replicas, and loses none when it does.

use std::time::{Duration, Instant as WallInstant};

use reservation_conformance::faults::{Fault, FaultSettings};
use reservation_conformance::services::service;
use reservation_conformance::{Harness, START, unique_namespace};
use reservation_redis::{MinReplicas, RedisHarness, RedisOptions, RedisStore};
use reservation_store::rules::Rule;
use reservation_store::spec::Reservation;
use reservation_store::{
    AggregateRef, ConfirmOutcome, Key, ManualClock, ReservationScope, ReservationStore, Version, error_chain,
};

use crate::orchestrated::{caught_losing, lost_nothing, port_of, replica_of};

/// A harness on a Sentinel topology of its own; or `None` (said once) without `redis-server`.
fn sentinel(options: RedisOptions) -> Option<RedisHarness> {
    service("redis-server (for the Sentinel topology's servers and sentinels)", RedisHarness::sentinel(options))
}

/// Every replica's acknowledgement, within 500 ms: what the store needs under Sentinel to keep
/// what it acknowledged across a failover.
fn both_replicas() -> RedisOptions {
    RedisOptions::default().with_replica_acks(2, Duration::from_millis(500))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime")
}

#[test]
fn a_malformed_sentinel_url_is_refused_with_a_storage_error_that_does_not_quote_it() {
    let rt = runtime();
    let malformed = [
        ("redis+sentinel://", "names no master"),
        ("redis+sentinel://127.0.0.1:26379", "names no master"),
        ("redis+sentinel://127.0.0.1:26379/", "the master's name is empty"),
        ("redis+sentinel://127.0.0.1:26379/my master", "holds a space"),
        ("redis+sentinel://127.0.0.1:0/mymaster", "not host[:port]"),
        ("redis+sentinel://127.0.0.1:70000/mymaster", "not host[:port]"),
        ("redis+sentinel://127.0.0.1:x/mymaster", "not host[:port]"),
        ("redis+sentinel://127.0.0.1:1,/mymaster", "not host[:port]"),
        ("redis+sentinel://[::1/mymaster", "not host[:port]"),
        ("redis+sentinel://[::1]x/mymaster", "not host[:port]"),
        ("redis+sentinel://127.0.0.1/mymaster/-1", "not a number of 0 or more"),
        ("redis+sentinel://127.0.0.1/mymaster/zero", "not a number of 0 or more"),
        ("redis+sentinel://127.0.0.1/mymaster?db=1", "a query or a fragment"),
        ("redis+sentinel://127.0.0.1/mymaster#x", "a query or a fragment"),
    ];
    for (url, why) in malformed {
        let connected = rt.block_on(RedisStore::connect_system(url, RedisOptions::default()));
        let error = connected.expect_err(url);
        let said = error_chain(&error);
        assert!(said.contains("Redis: the Sentinel URL: ") && said.contains(why), "{url}: {said}");
        assert!(!error.is_indeterminate(), "{url}: {said}");
    }
    // The password is never quoted.
    let secret = "redis+sentinel://:hunter2@127.0.0.1/mymaster/x";
    let said =
        error_chain(&rt.block_on(RedisStore::connect_system(secret, RedisOptions::default())).expect_err(secret));
    assert!(!said.contains("hunter2"), "{said}");
    // A Sentinel URL finds the primary itself: other nodes beside it are refused.
    let with_nodes = RedisOptions::default().with_nodes(["redis://127.0.0.1:6379/"]);
    let error = rt.block_on(RedisStore::connect_system("redis+sentinel://127.0.0.1/m", with_nodes)).expect_err("nodes");
    assert!(error_chain(&error).contains("give no other nodes"), "{}", error_chain(&error));
}

#[test]
fn every_documented_form_of_a_sentinel_url_is_accepted_and_its_sentinels_asked() {
    let rt = runtime();
    let mut options = RedisOptions::default();
    options.timeout = Duration::from_secs(1);
    // Nothing listens on these ports (26379 by default included, on a machine of the tests): each
    // URL is accepted, and the store asks every sentinel it names, in order.
    let port = reservation_conformance::services::loopback_port().expect("a free port");
    let accepted = [
        (format!("redis+sentinel://127.0.0.1:{port}/mymaster"), vec![format!("127.0.0.1:{port}")]),
        (format!("redis+sentinel://127.0.0.1:{port}/mymaster/"), vec![format!("127.0.0.1:{port}")]),
        (format!("redis+sentinel://127.0.0.1:{port}/mymaster/3"), vec![format!("127.0.0.1:{port}")]),
        (
            format!("redis+sentinel://user:secret@127.0.0.1:{port},localhost:{port}/mymaster/0"),
            vec![format!("127.0.0.1:{port}"), format!("localhost:{port}")],
        ),
        ("redis+sentinel://127.0.0.1/mymaster".to_owned(), vec!["127.0.0.1:26379".to_owned()]),
        (format!("redis+sentinel://[::1]:{port}/mymaster"), vec![format!("::1:{port}")]),
        ("redis+sentinel://[::1]/mymaster".to_owned(), vec!["::1:26379".to_owned()]),
    ];
    for (url, asked) in accepted {
        let error = rt.block_on(RedisStore::connect_system(&url, options.clone())).expect_err(&url);
        let said = error_chain(&error);
        let count = format!("none of the {} sentinels named a master `mymaster`", asked.len());
        assert!(said.contains(&count), "{url}: {said}");
        for sentinel in asked {
            assert!(said.contains(&format!("sentinel {sentinel}: ")), "{url}: {sentinel} not asked: {said}");
        }
        assert!(!said.contains("secret"), "{said}");
    }
    // A space or a control character in a sentinel's host is refused, not asked.
    for url in ["redis+sentinel://bad host:1/mymaster", "redis+sentinel://bad\thost:1/mymaster"] {
        let error = rt.block_on(RedisStore::connect_system(url, options.clone())).expect_err(url);
        assert!(error_chain(&error).contains("not host[:port]"), "{url}: {}", error_chain(&error));
    }
}

#[test]
fn sentinels_that_do_not_answer_or_watch_no_such_master_fail_in_time_and_say_so() {
    let rt = runtime();
    let mut options = RedisOptions::default();
    options.timeout = Duration::from_secs(1);
    // Nothing listens on the port: every sentinel fails, each named with its reason.
    let port = reservation_conformance::services::loopback_port().expect("a free port");
    let url = format!("redis+sentinel://127.0.0.1:{port},127.0.0.1:{port}/mymaster");
    let started = WallInstant::now();
    let error = rt.block_on(RedisStore::connect_system(&url, options.clone())).expect_err("nothing listens");
    let said = error_chain(&error);
    assert!(said.contains("none of the 2 sentinels named a master `mymaster`"), "{said}");
    assert!(said.matches(&format!("sentinel 127.0.0.1:{port}: ")).count() == 2, "{said}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(!error.is_indeterminate(), "{said}");
    // Sentinels that answer, and watch another name.
    let Some(h) = sentinel(RedisOptions::default()) else { return };
    let url = sentinel_url(&h).replace("/reservation", "/another");
    let error = rt.block_on(RedisStore::connect_system(&url, options)).expect_err("no such master");
    let said = error_chain(&error);
    assert_eq!(said.matches("it watches no master named `another`").count(), 3, "{said}");
}

/// The URL the harness's stores connect with.
fn sentinel_url(h: &RedisHarness) -> String {
    h.sentinel_url().expect("a Sentinel harness").to_owned()
}

fn scope(label: &str) -> ReservationScope {
    ReservationScope::parse("user", Some("acme"), unique_namespace(label).as_str()).expect("scope")
}

fn owner() -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), "alice").expect("owner")
}

#[test]
fn through_sentinel_the_store_writes_to_the_primary_and_follows_the_sentinels_failover() {
    let started = WallInstant::now();
    let Some(h) = sentinel(both_replicas()) else { return };
    eprintln!("the Sentinel topology started in {:.2?}", started.elapsed());
    let before = h.url().to_owned();
    let store = h.store(ManualClock::new(START));
    let scope = scope("sentinel-failover");
    let version = Version::stream(1).expect("a version");
    let confirm = |key: &str| {
        let key = Key::new(key).expect("key");
        h.runtime().block_on(store.confirm(&scope, &key, &owner(), version))
    };
    assert_eq!(confirm("before").expect("confirmed through the sentinels"), ConfirmOutcome::Confirmed);
    // The write went to the primary, and both replicas have it.
    let mut conn = crate::raw(&h);
    let found: Option<Vec<u8>> = h
        .runtime()
        .block_on(
            redis::cmd("GET").arg(crate::row_key(&h, &scope, &Key::new("before").expect("key"))).query_async(&mut conn),
        )
        .expect("read on the primary");
    assert!(found.is_some(), "the row is not on the server the sentinels name");
    let started = WallInstant::now();
    h.inject(Fault::Failover).unwrap_or_else(|e| panic!("the sentinels' failover: {}", error_chain(&e)));
    let took = started.elapsed();
    assert_ne!(h.url(), before, "the sentinels name the old primary still");
    assert!(!h.faults().contains(&Fault::Failover), "a second failover is offered");
    // The store's connections led to the dead primary: the next operations fail until one finds
    // the new primary through the sentinels, within a few tries (a try whose `WAIT` ran out on a
    // loaded machine may have confirmed the key already).
    let tries = reservation_testkit::confirm_after_failover(|| confirm("after"));
    let found = h.runtime().block_on(store.lookup(&scope, &Key::new("before").expect("key"))).expect("looked up");
    assert_eq!(found, Some(Reservation::confirmed(owner(), version)), "a confirmation both replicas had was lost");
    eprintln!("the sentinels' failover took {took:.2?}; the store answered again after {tries} tries");
}

/// The fault check with `fault` alone on `h`, whose store waits for both replicas: it must pass,
/// with writes that waited in vain.
fn loses_nothing(h: &RedisHarness, fault: Fault, label: &str) {
    let run = lost_nothing(h, fault, label);
    assert!(run.report.indeterminate > 0, "no write waited in vain for the replicas: {}", run.report);
}

/// A harness on a Sentinel topology of its own that can cut its primary off; or `None` (said
/// once) without `redis-server` or without `nft` (nftables) and the right to use it.
fn partitionable(options: RedisOptions) -> Option<RedisHarness> {
    let h = sentinel(options)?;
    let can = if h.faults().contains(&Fault::Partition) {
        Ok(h)
    } else {
        Err("`nft list tables` did not succeed (install the nftables package; the tests must run as root)")
    };
    service("nft (nftables), for a partition of the Sentinel topology's primary", can)
}

/// The fault `fault` on `h`, after which the old primary must already be a replica of the new
/// one, its link up: the fault ends only once the sentinels have demoted it, so that no write
/// the store makes afterwards reaches it.
fn apart_and_demoted(h: &RedisHarness, fault: Fault) {
    let before = h.url().to_owned();
    h.inject(fault).unwrap_or_else(|e| panic!("{fault}: {}", error_chain(&e)));
    let after = h.url().to_owned();
    assert_ne!(after, before, "{fault}: the sentinels name the old primary still");
    assert_eq!(replica_of(h, &before), Some((port_of(&after), "connected".to_owned())), "{fault}: {before}");
}

/// The partition and the long pause offered, and refused once the topology's one failover was
/// used.
#[test]
fn a_sentinel_topology_offers_a_partition_and_a_long_pause_in_place_of_its_one_failover() {
    let Some(h) = partitionable(RedisOptions::default()) else { return };
    for fault in [Fault::Failover, Fault::Partition, Fault::LongPause] {
        assert!(h.faults().contains(&fault), "{fault}: {:?}", h.faults());
    }
    apart_and_demoted(&h, Fault::LongPause);
    for fault in [Fault::Failover, Fault::Partition, Fault::LongPause] {
        assert!(!h.faults().contains(&fault), "{fault}: {:?}", h.faults());
        let refused = h.inject(fault).expect_err("a second failover");
        let said = error_chain(&refused);
        assert!(said.contains(&format!("cannot cause the fault `{fault}`")), "{said}");
    }
}

/// Cut off from the sentinels and its replicas, the primary goes on taking the store's writes
/// while the sentinels promote a replica; once the network heals, the sentinels make it a
/// replica of the new one, and what it took meanwhile is gone. The store, which never asked
/// for replicas' acknowledgements, acknowledged a confirmation that no node keeps, and then
/// follows the new primary.
#[test]
fn a_partitioned_sentinel_primary_acknowledges_writes_the_new_primary_never_gets() {
    let Some(h) = partitionable(RedisOptions::default()) else { return };
    let store = h.store(ManualClock::new(START));
    let scope = scope("sentinel-partition");
    let version = Version::stream(1).expect("a version");
    let before = h.url().to_owned();
    // A writer confirms fresh keys one after another, all through the partition.
    let stop = std::sync::atomic::AtomicBool::new(false);
    let (acknowledged, partitioned) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut acknowledged = Vec::new();
            for n in 0.. {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let key = Key::new(format!("k{n}")).expect("key");
                if let Ok(ConfirmOutcome::Confirmed) =
                    h.runtime().block_on(store.confirm(&scope, &key, &owner(), version))
                {
                    acknowledged.push(key);
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
    let after = h.url().to_owned();
    assert_ne!(after, before, "the sentinels name the old primary still");
    assert_eq!(replica_of(&h, &before), Some((port_of(&after), "connected".to_owned())), "{before}");
    // The store reaches the new primary within a few tries, and some confirmations it
    // acknowledged are not there.
    let looked = |key: &Key| {
        (0..5).find_map(|_| h.runtime().block_on(store.lookup(&scope, key)).ok()).expect("the store never came back")
    };
    let lost: Vec<&Key> = acknowledged.iter().filter(|key| looked(key).is_none()).collect();
    eprintln!("{} confirmations acknowledged through the partition, {} of them lost", acknowledged.len(), lost.len());
    assert!(!lost.is_empty(), "no acknowledged confirmation was lost ({} acknowledged)", acknowledged.len());
    let kept = Some(Reservation::confirmed(owner(), version));
    assert_eq!(looked(&acknowledged[0]), kept, "the first confirmation, made before the cut, was lost");
}

/// The long tier (`reservation_conformance::tiers`): run by its own command, and by CI.
mod long {
    use super::*;

    crate::orchestrated::long_fault_checks! {
        "sentinel";
        the_fault_check_catches_a_sentinel_failover_without_wait_losing_acknowledged_confirmations:
            sentinel(RedisOptions::default()) => caught_losing(Fault::Failover, "Sentinel, failover without WAIT");
        with_wait_for_both_replicas_a_sentinel_failover_loses_nothing:
            sentinel(both_replicas()) => loses_nothing(Fault::Failover, "Sentinel, failover with WAIT 2");
        the_fault_check_catches_a_sentinel_partition_without_wait_losing_acknowledged_confirmations:
            partitionable(RedisOptions::default()) => caught_losing(Fault::Partition, "Sentinel, partition without WAIT");
        with_wait_for_both_replicas_a_sentinel_partition_loses_nothing:
            partitionable(both_replicas()) => loses_nothing(Fault::Partition, "Sentinel, partition with WAIT 2");
        the_fault_check_catches_a_sentinel_primary_paused_past_the_sentinels_timeout_without_wait:
            sentinel(RedisOptions::default()) => caught_losing(Fault::LongPause, "Sentinel, long pause without WAIT");
        with_wait_for_both_replicas_a_sentinel_primary_paused_past_the_sentinels_timeout_loses_nothing:
            sentinel(both_replicas()) => loses_nothing(Fault::LongPause, "Sentinel, long pause with WAIT 2");
    }

    /// `min-replicas-to-write` on the servers makes a primary cut off from its replicas refuse
    /// writes once they are late, and so bounds what it acknowledges alone, without ending it:
    /// with it, the partition still loses acknowledged confirmations (caught), under half of
    /// those lost without it in the same test, and the refused writes are determinate errors.
    /// Both runs go on for 12 s, most of the partition, at the default settings' pace.
    #[test]
    fn min_replicas_to_write_bounds_what_a_partitioned_sentinel_primary_loses_without_ending_it() {
        if !reservation_conformance::tiers::long_tier(
            "sentinel::long::min_replicas_to_write_bounds_what_a_partitioned_sentinel_primary_loses_without_ending_it",
        ) {
            return;
        }
        let through = |h: &RedisHarness, label: &str| {
            let settings = FaultSettings::default()
                .with_faults(&[Fault::Partition])
                .with_max_faults(1)
                .with_duration(Duration::from_secs(12))
                .with_ops(24_000)
                .with_ledger_keys(2_400);
            let run = reservation_conformance::faults::run(h, &settings.into());
            eprintln!("redis, {label}: {}", run.report);
            run
        };
        let Some(plain) = partitionable(RedisOptions::default()) else { return };
        let without = through(&plain, "Sentinel, partition without WAIT, 12 s");
        drop(plain);
        let both_within_a_second = MinReplicas { replicas: 2, max_lag_secs: 1 };
        let bounded = RedisHarness::sentinel_with(RedisOptions::default(), Some(both_within_a_second));
        let Some(bounded) = service("redis-server (for the Sentinel topology)", bounded) else { return };
        let with = through(&bounded, "Sentinel, partition without WAIT, min-replicas-to-write 2, 12 s");
        for run in [&without, &with] {
            let failure = run.verdict.as_ref().expect_err("a primary cut off from its sentinels lost nothing");
            assert_eq!(failure.rule, Some(Rule::P1), "{failure}");
        }
        let (lost_without, lost_with) = (without.report.lost, with.report.lost);
        assert!(0 < lost_with && 2 * lost_with < lost_without, "lost {lost_with} with, {lost_without} without");
        assert!(with.report.determinate > 0, "no write was refused: {}", with.report);
    }

    #[test]
    fn the_whole_suite_passes_through_sentinel_waiting_for_both_replicas() {
        if !reservation_conformance::tiers::long_tier(
            "sentinel::long::the_whole_suite_passes_through_sentinel_waiting_for_both_replicas",
        ) {
            return;
        }
        let Some(h) = sentinel(both_replicas()) else { return };
        let started = WallInstant::now();
        let report = reservation_conformance::run_all(&h, &RedisHarness::settings());
        eprintln!("the suite through Sentinel, in {:.2?}", started.elapsed());
        if let Err(report) = report.into_result() {
            panic!("{report}");
        }
    }
}
