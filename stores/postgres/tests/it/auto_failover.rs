//! PostgreSQL under pg_auto_failover, of the tests' own (`PostgresHarness::on_auto_failover`: a
//! monitor, a primary and a synchronous standby): the store connects as a production client
//! does (both nodes, `target_session_attrs=read-write`), follows the monitor's failover, and
//! keeps what it acknowledged. Without `pg_autoctl` (Debian's
//! `postgresql-<version>-auto-failover`) or root, each test says so in one line and passes,
//! unless `RESERVATION_REQUIRE_SERVICES=1`.

use std::time::Instant;

use reservation_conformance::faults::Fault;
use reservation_conformance::services::{Partition, service};
use reservation_conformance::{Harness, START, unique_namespace};
use reservation_postgres::{PostgresHarness, Replication};
use reservation_store::spec::Reservation;
use reservation_store::{
    AggregateRef, ConfirmOutcome, Key, ManualClock, ReservationScope, ReservationStore, Version, error_chain,
};

use crate::fault_check::{fault_run, lost_nothing, options};
use crate::patroni::{ONE_AT_A_TIME, Turn, asynchronous_caught, synchronous_loses_nothing};

/// A harness under pg_auto_failover of its own, or `None` (said once) without the means to
/// make one.
fn auto_failover() -> Option<PostgresHarness> {
    let started = Instant::now();
    let h = service("pg_auto_failover (pg_autoctl, as root)", PostgresHarness::on_auto_failover(options()))?;
    eprintln!("pg_auto_failover: a monitor, a primary and a standby started in {:.2?}", started.elapsed());
    Some(h)
}

/// The port of the node that takes writes now: the first of the harness's connection string
/// (both nodes, `target_session_attrs=read-write`) that answers as writable.
fn writable_port(h: &PostgresHarness) -> i32 {
    h.runtime().block_on(async {
        let (client, connection) =
            tokio_postgres::connect(h.url(), tokio_postgres::NoTls).await.expect("a writable node");
        tokio::spawn(connection);
        client.query_one("SELECT inet_server_port()", &[]).await.expect("its port").get(0)
    })
}

/// A harness under pg_auto_failover of its own, its standby in the write quorum or not as
/// `replication` says, after the turn it holds (one orchestrated topology at a time); or `None`
/// (said once) without the means to make one.
fn with_standby(replication: Replication) -> Option<(Turn, PostgresHarness)> {
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let made = PostgresHarness::on_auto_failover_with(replication, options());
    let h = service("pg_auto_failover (pg_autoctl, as root)", made)?;
    Some((turn, h))
}

#[test]
fn pg_auto_failover_needs_a_standby() {
    let Err(refused) = PostgresHarness::on_auto_failover_with(Replication::None, options()) else {
        panic!("a pg_auto_failover topology without a standby was made");
    };
    assert!(refused.to_string().contains("no standby has no failover"), "{refused}");
}

/// A long pause offered in place of the failover: the primary stopped until the standby is
/// promoted, then let go on until its keeper stops its server; neither offered again.
#[test]
fn under_pg_auto_failover_a_long_pause_of_the_primary_ends_with_the_standby_promoted() {
    let Some((_turn, h)) = with_standby(Replication::Synchronous) else { return };
    assert!(h.faults().contains(&Fault::LongPause), "{:?}", h.faults());
    let before = writable_port(&h);
    let started = Instant::now();
    h.inject(Fault::LongPause).unwrap_or_else(|e| panic!("the long pause: {}", error_chain(&e)));
    eprintln!("pg_auto_failover, a long pause of the primary, took {:.2?}", started.elapsed());
    assert_ne!(writable_port(&h), before, "the node that took writes before the long pause still does");
    for fault in [Fault::Failover, Fault::LongPause, Fault::Partition] {
        assert!(!h.faults().contains(&fault), "{fault} is offered after the long pause");
    }
}

/// A harness under pg_auto_failover that can cut its primary off, after its turn; or `None`
/// (said once) without the means to make one or without nftables.
fn partitionable(replication: Replication) -> Option<(Turn, PostgresHarness)> {
    let available = if Partition::available() { Ok(()) } else { Err("nft (nftables), as root") };
    service("nftables", available)?;
    with_standby(replication)
}

/// A partition offered in place of the failover: the primary cut off from the monitor and the
/// standby until the standby is promoted, the network healed, the old primary stopped by its
/// keeper; neither offered again.
#[test]
fn under_pg_auto_failover_a_partitioned_primary_is_replaced_and_stops_taking_writes() {
    let Some((_turn, h)) = partitionable(Replication::Synchronous) else { return };
    assert!(h.faults().contains(&Fault::Partition), "{:?}", h.faults());
    let before = writable_port(&h);
    let started = Instant::now();
    h.inject(Fault::Partition).unwrap_or_else(|e| panic!("the partition: {}", error_chain(&e)));
    eprintln!("pg_auto_failover, a partition of the primary, took {:.2?}", started.elapsed());
    assert_ne!(writable_port(&h), before, "the node that took writes before the partition still does");
    for fault in [Fault::Failover, Fault::LongPause, Fault::Partition] {
        assert!(!h.faults().contains(&fault), "{fault} is offered after the partition");
    }
}

#[test]
fn under_pg_auto_failover_the_store_follows_the_monitors_failover_and_keeps_what_it_acknowledged() {
    let Some(h) = auto_failover() else { return };
    follows_the_failover_and_keeps_what_it_acknowledged(h, "the monitor's failover");
}

/// On `h`, a harness on an orchestrated topology (both nodes in its connection string), the
/// store confirms a key, `what` (the harness's one failover, the orchestrator's) kills the node
/// that took writes, the store finds the promoted one within a few tries and the key is still
/// confirmed there; dropped, the harness leaves no node answering.
pub(crate) fn follows_the_failover_and_keeps_what_it_acknowledged(h: PostgresHarness, what: &str) {
    let store = h.store(ManualClock::new(START));
    let scope =
        ReservationScope::parse("user", Some("acme"), unique_namespace("orchestrated").as_str()).expect("scope");
    let alice = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let version = Version::stream(1).expect("a version");
    let confirm = |key: &str| {
        let key = Key::new(key).expect("key");
        h.runtime().block_on(store.confirm(&scope, &key, &alice, version))
    };
    assert_eq!(confirm("before").expect("confirmed on the primary"), ConfirmOutcome::Confirmed);
    assert!(h.faults().contains(&Fault::Failover), "{:?}", h.faults());
    let before = writable_port(&h);
    let started = Instant::now();
    h.inject(Fault::Failover).unwrap_or_else(|e| panic!("{what}: {}", error_chain(&e)));
    eprintln!("{what} took {:.2?}", started.elapsed());
    // One failover uses the standby up: neither it nor a long pause or a partition in its place
    // is offered again, or caused.
    for fault in [Fault::Failover, Fault::LongPause, Fault::Partition] {
        assert!(!h.faults().contains(&fault), "{fault} is offered after the failover");
        let refused = h.inject(fault).expect_err("a second failover");
        assert!(
            error_chain(&refused).contains(&format!("cannot cause the fault `{fault}`")),
            "{}",
            error_chain(&refused)
        );
    }
    assert_ne!(writable_port(&h), before, "the node that took writes before the failover still does");
    // The connections to the dead primary fail until one reaches the promoted standby.
    reservation_testkit::confirm_after_failover(|| confirm("after"));
    let found = h.runtime().block_on(store.lookup(&scope, &Key::new("before").expect("key"))).expect("looked up");
    assert_eq!(found, Some(Reservation::confirmed(alice, version)), "a confirmation the standby had was lost ({what})");
    // Dropped, the harness leaves no node running.
    let url = h.url().to_owned();
    drop(store);
    drop(h);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let answered =
        runtime.block_on(tokio_postgres::connect(&format!("{url} connect_timeout=2"), tokio_postgres::NoTls));
    assert!(answered.is_err(), "a node of the dropped harness still answers");
}

/// The long tier (`reservation_conformance::tiers`): run by its own command, and by CI.
mod long {
    use super::*;

    #[test]
    fn under_pg_auto_failover_with_a_synchronous_standby_the_monitors_failover_loses_nothing() {
        if !reservation_conformance::tiers::long_tier(
            "auto_failover::long::under_pg_auto_failover_with_a_synchronous_standby_the_monitors_failover_loses_nothing",
        ) {
            return;
        }
        let Some(h) = auto_failover() else { return };
        let run = fault_run(&h, "pg_auto_failover, the monitor's failover", Fault::Failover, 1);
        lost_nothing(&run, Fault::Failover);
        assert_eq!(run.report.fired.len(), 1, "{}", run.report);
    }

    #[test]
    fn the_fault_check_catches_the_monitors_failover_to_an_asynchronous_standby() {
        if reservation_conformance::tiers::long_tier(
            "auto_failover::long::the_fault_check_catches_the_monitors_failover_to_an_asynchronous_standby",
        ) {
            asynchronous_caught(with_standby, Fault::Failover, "pg_auto_failover");
        }
    }

    #[test]
    fn under_pg_auto_failover_with_a_synchronous_standby_a_primary_paused_past_the_monitors_timeout_loses_nothing() {
        if reservation_conformance::tiers::long_tier(
            "auto_failover::long::under_pg_auto_failover_with_a_synchronous_standby_a_primary_paused_past_the_monitors_timeout_loses_nothing",
        ) {
            synchronous_loses_nothing(with_standby, Fault::LongPause, "pg_auto_failover");
        }
    }

    #[test]
    fn the_fault_check_catches_a_primary_paused_past_the_monitors_timeout_with_an_asynchronous_standby() {
        if reservation_conformance::tiers::long_tier(
            "auto_failover::long::the_fault_check_catches_a_primary_paused_past_the_monitors_timeout_with_an_asynchronous_standby",
        ) {
            asynchronous_caught(with_standby, Fault::LongPause, "pg_auto_failover");
        }
    }

    #[test]
    fn under_pg_auto_failover_with_a_synchronous_standby_a_partitioned_primary_loses_nothing() {
        if reservation_conformance::tiers::long_tier(
            "auto_failover::long::under_pg_auto_failover_with_a_synchronous_standby_a_partitioned_primary_loses_nothing",
        ) {
            synchronous_loses_nothing(partitionable, Fault::Partition, "pg_auto_failover");
        }
    }

    #[test]
    fn the_fault_check_catches_a_partitioned_primary_with_an_asynchronous_standby() {
        if reservation_conformance::tiers::long_tier(
            "auto_failover::long::the_fault_check_catches_a_partitioned_primary_with_an_asynchronous_standby",
        ) {
            asynchronous_caught(partitionable, Fault::Partition, "pg_auto_failover");
        }
    }

    #[test]
    fn the_whole_suite_passes_under_pg_auto_failover() {
        if !reservation_conformance::tiers::long_tier(
            "auto_failover::long::the_whole_suite_passes_under_pg_auto_failover",
        ) {
            return;
        }
        let Some(h) = auto_failover() else { return };
        let started = Instant::now();
        let report = reservation_conformance::run_all(&h, &PostgresHarness::settings());
        eprintln!("the suite under pg_auto_failover, in {:.2?}", started.elapsed());
        if let Err(report) = report.into_result() {
            panic!("{report}");
        }
    }
}
