//! The faults the harnesses cause for the suite's fault check: on the append-only server,
//! connections cut, a crash and a pause, which lose nothing; on a primary with a replica, a
//! failover, which loses acknowledged confirmations unless the store waits for the replica
//! (`WAIT`). And the two options a replicated store needs: its nodes (a replica listed first is
//! skipped) and its wait for replicas (too few acknowledgements are an indeterminate error).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant as WallInstant};

use reservation_conformance::faults::Fault;
use reservation_conformance::services::service;
use reservation_conformance::{Harness, START, unique_namespace};
use reservation_redis::{RedisHarness, RedisOptions, RedisStore, Time};
use reservation_store::spec::Reservation;
use reservation_store::{
    AggregateRef, ConfirmOutcome, Key, ManualClock, ReservationScope, ReservationStore, Version, error_chain,
};

use crate::durable_harness;

/// A harness on a primary and its replica of its own; or `None` (said once) without
/// `redis-server`.
fn replicated(options: RedisOptions) -> Option<RedisHarness> {
    service("redis-server (for the primary and replica of the failover tests)", RedisHarness::replicated(options))
}

/// What confirming keys during a fault came to.
#[derive(Debug, Default)]
struct Confirmed {
    /// The keys whose confirmation the store acknowledged.
    acknowledged: Vec<Key>,
    /// Storage errors, and the indeterminate ones among them.
    errors: usize,
    indeterminate: usize,
}

fn owner() -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), "alice").expect("owner")
}

fn version() -> Version {
    Version::stream(1).expect("a stream version")
}

/// Confirms new keys of `scope` on four tasks, from before `fault` runs until 200 ms after it
/// ended.
fn confirm_during(h: &RedisHarness, scope: &ReservationScope, fault: impl FnOnce()) -> Confirmed {
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let stop = Arc::new(AtomicBool::new(false));
    let next = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let (store, scope, stop, next) = (store.clone(), scope.clone(), stop.clone(), next.clone());
            h.runtime().spawn(async move {
                let mut done = Confirmed::default();
                while !stop.load(Ordering::SeqCst) {
                    let key = Key::new(format!("k{}", next.fetch_add(1, Ordering::SeqCst))).expect("key");
                    match store.confirm(&scope, &key, &owner(), version()).await {
                        Ok(outcome) => {
                            assert_eq!(outcome, ConfirmOutcome::Confirmed, "a new key");
                            done.acknowledged.push(key);
                        }
                        Err(e) => {
                            assert!(matches!(e, reservation_store::StoreError::Storage(_)), "{}", error_chain(&e));
                            done.errors += 1;
                            done.indeterminate += usize::from(e.is_indeterminate());
                        }
                    }
                }
                done
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    fault();
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    let mut all = Confirmed::default();
    for task in tasks {
        let done = h.runtime().block_on(task).expect("the task ran");
        all.acknowledged.extend(done.acknowledged);
        all.errors += done.errors;
        all.indeterminate += done.indeterminate;
    }
    all
}

/// The acknowledged confirmations of `confirmed` that a lookup no longer finds.
fn lost(h: &RedisHarness, scope: &ReservationScope, confirmed: &Confirmed) -> usize {
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let expected = Reservation::confirmed(owner(), version());
    confirmed
        .acknowledged
        .iter()
        .filter(|key| {
            // A connection from before the fault may fail once, and is then closed with the idle
            // ones.
            let found = (0..3).find_map(|_| h.runtime().block_on(store.lookup(scope, key)).ok());
            found.expect("looked up") != Some(expected.clone())
        })
        .count()
}

fn inject(h: &RedisHarness, fault: Fault) -> Duration {
    let started = WallInstant::now();
    h.inject(fault).unwrap_or_else(|e| panic!("{fault}: {}", error_chain(&e)));
    started.elapsed()
}

/// The `run_id` of the server at `url`, which a new process draws afresh.
fn run_id(h: &RedisHarness) -> String {
    let mut conn = crate::raw(h);
    let info: String = h.runtime().block_on(redis::cmd("INFO").arg("server").query_async(&mut conn)).expect("INFO");
    let line = info.lines().find(|l| l.starts_with("run_id:")).expect("a run_id line");
    line.trim_start_matches("run_id:").trim().to_owned()
}

/// The ids of the normal clients connected to the harness's server, but the one asking.
fn client_ids(h: &RedisHarness) -> BTreeSet<u64> {
    let mut conn = crate::raw(h);
    let (me, list): (u64, String) = h
        .runtime()
        .block_on(
            redis::pipe()
                .cmd("CLIENT")
                .arg("ID")
                .cmd("CLIENT")
                .arg("LIST")
                .arg("TYPE")
                .arg("normal")
                .query_async(&mut conn),
        )
        .expect("CLIENT LIST");
    let ids = list.lines().filter_map(|l| l.strip_prefix("id=")?.split(' ').next()?.parse().ok());
    ids.filter(|id| *id != me).collect()
}

#[test]
fn each_harness_offers_the_faults_it_can_cause() {
    let (Some(shared), Some(durable)) = (crate::harness(), durable_harness()) else { return };
    assert_eq!(shared.faults(), Vec::<Fault>::new(), "a shared server is never harmed");
    let refused = shared.inject(Fault::Crash).expect_err("a shared server was crashed");
    assert!(error_chain(&refused).contains("cannot cause the fault `crash`"), "{}", error_chain(&refused));
    assert_eq!(durable.faults(), [Fault::CutConnections, Fault::Crash, Fault::Pause]);
    assert!(durable.inject(Fault::Failover).is_err(), "a failover with no replica");
    assert!(durable.inject(Fault::Restart).is_err(), "the suite's own fault, caused by the harness");
    let Some(replicated) = replicated(RedisOptions::default()) else { return };
    assert_eq!(replicated.faults(), [Fault::CutConnections, Fault::Crash, Fault::Pause, Fault::Failover]);
    inject(&replicated, Fault::Failover);
    assert_eq!(replicated.faults(), [Fault::CutConnections, Fault::Crash, Fault::Pause], "a failover once only");
    assert!(replicated.inject(Fault::Failover).is_err(), "a second failover");
}

#[test]
fn a_cut_a_crash_and_a_pause_of_the_append_only_server_happen_and_lose_nothing() {
    let Some(h) = durable_harness() else { return };
    let scope =
        ReservationScope::parse("user", Some("acme"), unique_namespace("durable-faults").as_str()).expect("scope");
    let confirmed = confirm_during(&h, &scope, || {
        let before = client_ids(&h);
        assert!(!before.is_empty(), "the store has no connection to cut");
        inject(&h, Fault::CutConnections);
        let left: Vec<u64> = client_ids(&h).intersection(&before).copied().collect();
        assert_eq!(left, Vec::<u64>::new(), "the cut left these of the store's connections open");
        let before = run_id(&h);
        inject(&h, Fault::Crash);
        assert_ne!(run_id(&h), before, "the crash did not start a new server");
        let took = inject(&h, Fault::Pause);
        assert!(took >= Duration::from_millis(300), "the pause took {took:?}");
    });
    eprintln!(
        "cut, crash, pause: {confirmed:?}",
        confirmed = (confirmed.acknowledged.len(), confirmed.errors, confirmed.indeterminate)
    );
    assert!(confirmed.errors > 0, "no operation failed: the faults did not reach the store");
    assert!(confirmed.acknowledged.len() > 50, "too few confirmations to tell: {}", confirmed.acknowledged.len());
    assert_eq!(lost(&h, &scope, &confirmed), 0, "acknowledged confirmations lost on the append-only server");
}

#[test]
fn a_failover_without_wait_loses_acknowledged_confirmations() {
    let Some(h) = replicated(RedisOptions::default()) else { return };
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("failover").as_str()).expect("scope");
    let confirmed = confirm_during(&h, &scope, || {
        inject(&h, Fault::Failover);
    });
    let lost = lost(&h, &scope, &confirmed);
    eprintln!(
        "failover without WAIT: {} acknowledged, {} errors ({} indeterminate), {lost} lost",
        confirmed.acknowledged.len(),
        confirmed.errors,
        confirmed.indeterminate
    );
    assert!(lost > 0, "nothing acknowledged was lost in a failover to a replica that fell behind");
}

#[test]
fn with_wait_for_the_replica_a_failover_loses_nothing() {
    let Some(h) = replicated(RedisOptions::default().with_replica_acks(1, Duration::from_millis(100))) else { return };
    let scope =
        ReservationScope::parse("user", Some("acme"), unique_namespace("failover-wait").as_str()).expect("scope");
    let confirmed = confirm_during(&h, &scope, || {
        inject(&h, Fault::Failover);
    });
    let lost = lost(&h, &scope, &confirmed);
    eprintln!(
        "failover with WAIT 1: {} acknowledged, {} errors ({} indeterminate), {lost} lost",
        confirmed.acknowledged.len(),
        confirmed.errors,
        confirmed.indeterminate
    );
    assert!(confirmed.indeterminate > 0, "no write waited in vain for the stopped replica");
    assert_eq!(lost, 0, "an acknowledged confirmation was lost although the one replica acknowledged it");
}

#[test]
fn too_few_replica_acknowledgements_are_indeterminate_and_the_write_is_on_the_primary() {
    // One replica, two asked for: every committed write waits 50 ms and falls short.
    let Some(h) = replicated(RedisOptions::default().with_replica_acks(2, Duration::from_millis(50))) else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("short").as_str()).expect("scope");
    let key = Key::new("k").expect("key");
    let error =
        h.runtime().block_on(store.confirm(&scope, &key, &owner(), version())).expect_err("two replicas acknowledged");
    assert!(error.is_indeterminate(), "{}", error_chain(&error));
    assert!(
        error_chain(&error).contains("1 of 2 replicas acknowledged the committed write within 50 ms"),
        "{}",
        error_chain(&error)
    );
    // The write is on the primary: a store that waits for one replica finds it.
    let one = RedisStore::connect(
        h.url(),
        Time::Local(ManualClock::new(START)),
        h.options().clone().with_replica_acks(1, Duration::from_secs(2)),
    );
    let one = h.runtime().block_on(one).expect("connected");
    let found = h.runtime().block_on(one.lookup(&scope, &key)).expect("looked up");
    assert_eq!(found, Some(Reservation::confirmed(owner(), version())));
    // A lookup writes back what it read, and waits as a change does.
    let error = h.runtime().block_on(store.lookup(&scope, &key)).expect_err("two replicas acknowledged a lookup");
    assert!(error.is_indeterminate(), "{}", error_chain(&error));
}

#[test]
fn a_replica_listed_first_is_skipped_and_a_store_on_no_primary_fails_determinately() {
    let Some(h) = replicated(RedisOptions::default()) else { return };
    let replica = h.replica().expect("a replica").url();
    assert_eq!(h.options().nodes, [h.url()], "the harness's stores know the primary after the replica");
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("nodes").as_str()).expect("scope");
    let key = Key::new("k").expect("key");
    let connect = |url: &str, options: RedisOptions| {
        h.runtime().block_on(RedisStore::connect(url, Time::Local(ManualClock::new(START)), options))
    };
    // The replica first, the primary second: the write goes to the primary.
    let store = connect(&replica, h.options().clone()).expect("connected");
    let outcome = h.runtime().block_on(store.confirm(&scope, &key, &owner(), version())).expect("confirmed");
    assert_eq!(outcome, ConfirmOutcome::Confirmed);
    let mut conn = crate::raw(&h);
    let row: Option<Vec<u8>> = h
        .runtime()
        .block_on(redis::cmd("GET").arg(crate::row_key(&h, &scope, &key)).query_async(&mut conn))
        .expect("GET");
    assert!(row.is_some(), "the confirmation is not on the primary");
    // The same store on the replica alone, asked nothing, cannot write there: skipping it matters.
    let alone = connect(&replica, h.options().clone().with_nodes(Vec::<String>::new())).expect("connected");
    let other = Key::new("other").expect("key");
    let refused =
        h.runtime().block_on(alone.confirm(&scope, &other, &owner(), version())).expect_err("a replica took a write");
    assert!(error_chain(&refused).contains("read only replica"), "{}", error_chain(&refused));
    // No node is the primary: a determinate error that says what each node is.
    let none =
        connect(&replica, h.options().clone().with_nodes([replica.clone()])).expect_err("connected to a replica");
    assert!(!none.is_indeterminate(), "{}", error_chain(&none));
    let said = error_chain(&none);
    assert!(said.contains("none of the 2 nodes is the primary") && said.contains("its role is `slave`"), "{said}");
}

#[test]
fn a_crash_of_a_server_that_keeps_nothing_on_disk_loses_acknowledged_confirmations() {
    // The planted bug: the crash check above, on a server with no append-only file.
    let Some(h) = service("redis-server (for the forgetful server)", RedisHarness::broken_forgetful()) else { return };
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("forgetful").as_str()).expect("scope");
    let confirmed = confirm_during(&h, &scope, || {
        inject(&h, Fault::Crash);
    });
    let lost = lost(&h, &scope, &confirmed);
    eprintln!("crash of a forgetful server: {} acknowledged, {lost} lost", confirmed.acknowledged.len());
    assert!(lost > 0, "a crash of a server that keeps nothing lost nothing");
}
