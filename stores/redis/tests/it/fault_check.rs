//! The suite's fault check (`faults::run`) on this store, and the faults its harnesses cause: on
//! the append-only server, connections cut, a crash and a pause, which lose nothing; on a primary
//! with a replica, a failover, which loses acknowledged confirmations unless the store waits for
//! the replica (`WAIT`), and which the check catches. And the two options a replicated store
//! needs: its nodes (a replica listed first is skipped) and its wait for replicas (too few
//! acknowledgements are an indeterminate error).
//!
//! Each fault run prints its report: the figures of RELIABILITY.md.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant as WallInstant};

use reservation_conformance::faults::{Fault, FaultReport, FaultSettings, run};
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

/// The `run_id` of the harness's server, which a new process draws afresh.
fn run_id(h: &RedisHarness) -> String {
    crate::info_line(h, h.url(), "run_id")
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
fn too_few_replica_acknowledgements_are_indeterminate_and_the_write_is_on_the_primary() {
    // One replica, two asked for: every committed write waits 50 ms and falls short.
    let Some(h) = replicated(RedisOptions::default().with_replica_acks(2, Duration::from_millis(50))) else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("short").as_str()).expect("scope");
    let key = Key::new("k").expect("key");
    let error =
        h.runtime().block_on(store.confirm(&scope, &key, &owner(), version())).expect_err("two replicas acknowledged");
    assert!(error.is_indeterminate(), "{}", error_chain(&error));
    // The one replica acknowledges in time on a quiet machine ("1 of 2"); on a busy one it may not
    // ("0 of 2"): either falls short of two.
    let chain = error_chain(&error);
    assert!(
        ["0 of 2", "1 of 2"]
            .iter()
            .any(|n| chain.contains(&format!("{n} replicas acknowledged the committed write within 50 ms"))),
        "{chain}"
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

/// Whether the primary of `h` lists a replica that is online (`INFO replication`).
fn replica_online(h: &RedisHarness) -> bool {
    let mut conn = crate::raw(h);
    let info: String =
        h.runtime().block_on(redis::cmd("INFO").arg("replication").query_async(&mut conn)).expect("INFO");
    info.lines().any(|l| l.starts_with("slave0:") && l.contains("state=online"))
}

#[test]
fn a_replicated_harness_has_its_replica_online_when_made_and_after_a_crash_of_the_primary() {
    // A replica whose primary crashed connects again from a timer that fires once a second:
    // without waiting for it, the harness would hand the restarted primary out with no replica.
    let Some(h) = replicated(RedisOptions::default()) else { return };
    assert!(replica_online(&h), "no replica online once the harness is made");
    inject(&h, Fault::Crash);
    assert!(replica_online(&h), "no replica online once the crashed primary is back");
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
fn a_failed_connection_closes_the_idle_ones_so_that_the_next_operation_connects_afresh() {
    let Some(h) = durable_harness() else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("purge").as_str()).expect("scope");
    let keys: Vec<Key> = (0..4).map(|i| Key::new(format!("k{i}")).expect("key")).collect();
    let alice = owner();
    let confirm = |key| store.confirm(&scope, key, &alice, version());
    // Four operations at once open a connection each when they overlap; on a loaded machine one
    // may end before the last starts, and the pool gives its connection to the next: run them
    // again until the pool holds several idle connections (ten rounds at most).
    for _ in 0..10 {
        let all = h.runtime().block_on(async {
            tokio::join!(confirm(&keys[0]), confirm(&keys[1]), confirm(&keys[2]), confirm(&keys[3]))
        });
        assert!(all.0.is_ok() && all.1.is_ok() && all.2.is_ok() && all.3.is_ok(), "{all:?}");
        if store.connections() == 4 {
            break;
        }
    }
    assert!(store.connections() >= 2, "operations at once, and a single connection: {}", store.connections());
    inject(&h, Fault::CutConnections);
    let error = h.runtime().block_on(store.lookup(&scope, &keys[0])).expect_err("a cut connection answered");
    assert!(!error.is_indeterminate(), "{}", error_chain(&error));
    assert_eq!(store.connections(), 0, "the cut connections were kept after one of them failed");
    let found = h.runtime().block_on(store.lookup(&scope, &keys[1])).expect("the next operation connects afresh");
    assert_eq!(found, Some(Reservation::confirmed(owner(), version())));
}

/// The `WAIT` commands the server at `h`'s primary has run since `CONFIG RESETSTAT`.
fn waits(h: &RedisHarness) -> u64 {
    let mut conn = crate::raw(h);
    let stats: String =
        h.runtime().block_on(redis::cmd("INFO").arg("commandstats").query_async(&mut conn)).expect("INFO");
    let line = stats.lines().find(|l| l.starts_with("cmdstat_wait:"));
    line.and_then(|l| l.strip_prefix("cmdstat_wait:calls=")?.split(',').next()?.parse().ok()).unwrap_or(0)
}

#[test]
fn the_store_waits_after_each_committed_exec_only_when_asked() {
    let Some(h) = replicated(RedisOptions::default()) else { return };
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("waits").as_str()).expect("scope");
    let key = Key::new("k").expect("key");
    let mut conn = crate::raw(&h);
    let () = h.runtime().block_on(redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut conn)).expect("reset");
    let plain = h.store_with(Time::Local(ManualClock::new(START)));
    h.runtime().block_on(plain.confirm(&scope, &key, &owner(), version())).expect("confirmed");
    h.runtime().block_on(plain.lookup(&scope, &key)).expect("looked up");
    assert_eq!(waits(&h), 0, "a store not asked to wait sent WAIT");
    let options = h.options().clone().with_replica_acks(1, Duration::from_secs(1));
    let replica = h.replica().expect("a replica").url();
    let waiting = RedisStore::connect(&replica, Time::Local(ManualClock::new(START)), options);
    let waiting = h.runtime().block_on(waiting).expect("connected");
    let outcome = h.runtime().block_on(waiting.confirm(&scope, &key, &owner(), version())).expect("confirmed");
    assert_eq!(outcome, ConfirmOutcome::AlreadyConfirmed);
    let found = h.runtime().block_on(waiting.lookup(&scope, &key)).expect("looked up");
    assert_eq!(found, Some(Reservation::confirmed(owner(), version())));
    assert_eq!(waits(&h), 2, "a write that changed nothing and a lookup: two committed EXECs, two WAITs");
}

/// A fault run of `h` with `fault` alone, at most `most` times, its report printed as `label`.
fn fault_run(h: &RedisHarness, label: &str, fault: Fault, most: usize) -> reservation_conformance::faults::FaultRun {
    let settings = FaultSettings::default().with_faults(&[fault]).with_max_faults(most);
    let started = WallInstant::now();
    let run = run(h, &settings.into());
    eprintln!("redis, {label}: {} in {:.2?}", run.report, started.elapsed());
    for fired in &run.report.fired {
        eprintln!("  {fired}");
    }
    let fired: Vec<Fault> = run.report.fired.iter().map(|f| f.fault).collect();
    assert!(!fired.is_empty() && fired.iter().all(|f| *f == fault), "{label}: fired {fired:?}");
    assert!(
        run.report.fired.iter().all(|f| f.recovered_after.is_some()),
        "{label}: the store did not answer again: {}",
        run.report
    );
    run
}

/// Asserts that `report`'s run looked up acknowledged confirmations after its faults.
fn checked_some(report: &FaultReport) {
    assert!(report.confirmations_checked > 0, "no acknowledged confirmation was looked up: {report}");
}

/// The crash check on `h`: its server killed and restarted at the points the check chooses, every
/// key compared whole after each (the figures of RELIABILITY.md).
fn crash_run(h: &RedisHarness, what: &str) -> reservation_conformance::crashes::CrashRun {
    use reservation_conformance::crashes::{CrashSettings, run};
    let started = std::time::Instant::now();
    let run = run(h, &CrashSettings::default().into());
    eprintln!("redis, crash check, {what}: {} in {:.2?}", run.report, started.elapsed());
    run
}

/// The long tier (`reservation_conformance::tiers`): run by its own command, and by CI.
mod long {
    use super::*;

    #[test]
    fn a_cut_a_crash_and_a_pause_of_the_append_only_server_happen_and_lose_nothing() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::a_cut_a_crash_and_a_pause_of_the_append_only_server_happen_and_lose_nothing",
        ) {
            return;
        }
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
            let (took, answered) = std::thread::scope(|s| {
                let ping = s.spawn(|| {
                    std::thread::sleep(Duration::from_millis(100));
                    let started = WallInstant::now();
                    let mut conn = crate::raw(&h);
                    let _: String = h.runtime().block_on(redis::cmd("PING").query_async(&mut conn)).expect("PING");
                    started.elapsed()
                });
                (inject(&h, Fault::Pause), ping.join().expect("pinged"))
            });
            assert!(took >= Duration::from_millis(300), "the pause took {took:?}");
            assert!(answered >= Duration::from_millis(100), "the paused server answered in {answered:?}");
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
    fn the_fault_check_passes_with_cuts_crashes_pauses_and_restarts_of_the_append_only_server() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::the_fault_check_passes_with_cuts_crashes_pauses_and_restarts_of_the_append_only_server",
        ) {
            return;
        }
        for (fault, most) in [(Fault::CutConnections, 8), (Fault::Crash, 4), (Fault::Pause, 4), (Fault::Restart, 4)] {
            let Some(h) = durable_harness() else { return };
            let run = fault_run(&h, &format!("append-only server, {fault}"), fault, most);
            if let Err(failure) = run.verdict {
                panic!("{failure}");
            }
            assert_eq!(run.report.lost, 0);
            checked_some(&run.report);
        }
    }

    #[test]
    fn the_fault_check_catches_a_crash_of_a_server_that_keeps_nothing_on_disk() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::the_fault_check_catches_a_crash_of_a_server_that_keeps_nothing_on_disk",
        ) {
            return;
        }
        // The planted bug: a crash of the server above, with no append-only file.
        let Some(h) = service("redis-server (for the forgetful server)", RedisHarness::broken_forgetful()) else {
            return;
        };
        let run = fault_run(&h, "forgetful server, crash", Fault::Crash, 2);
        let failure = run.verdict.expect_err("a crash of a server that keeps nothing lost nothing");
        assert_eq!(failure.rule, Some(reservation_store::rules::Rule::P1), "{failure}");
        assert!(run.report.lost > 0, "{}", run.report);
    }

    #[test]
    fn the_fault_check_catches_a_failover_without_wait_losing_acknowledged_confirmations() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::the_fault_check_catches_a_failover_without_wait_losing_acknowledged_confirmations",
        ) {
            return;
        }
        let Some(h) = replicated(RedisOptions::default()) else { return };
        let run = fault_run(&h, "primary and replica, failover without WAIT", Fault::Failover, 1);
        let failure = run.verdict.expect_err("a failover to a replica that fell behind lost nothing");
        assert_eq!(failure.rule, Some(reservation_store::rules::Rule::P1), "{failure}");
        assert!(run.report.lost > 0, "{}", run.report);
        let said = failure.to_string();
        assert!(said.contains("acknowledged confirmations lost") && said.contains("failover"), "{said}");
        assert!(said.contains("RESERVATION_CONFORMANCE_SEED="), "{said}");
    }

    #[test]
    fn with_wait_for_the_one_replica_a_failover_loses_nothing() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::with_wait_for_the_one_replica_a_failover_loses_nothing",
        ) {
            return;
        }
        // Every replica required, and the failover to that replica: what the store acknowledged is
        // on the new primary, as the crate documentation promises.
        let Some(h) = replicated(RedisOptions::default().with_replica_acks(1, Duration::from_millis(100))) else {
            return;
        };
        let run = fault_run(&h, "primary and replica, failover with WAIT 1", Fault::Failover, 1);
        assert_eq!(run.report.lost, 0, "{}", run.report);
        if let Err(failure) = run.verdict {
            panic!("{failure}");
        }
        checked_some(&run.report);
        assert!(run.report.indeterminate > 0, "no write waited in vain for the stopped replica: {}", run.report);
    }

    #[test]
    fn p1_the_crash_check_passes_on_the_append_only_server() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::p1_the_crash_check_passes_on_the_append_only_server",
        ) {
            return;
        }
        let Some(h) = durable_harness() else { return };
        let run = crash_run(&h, "append-only server");
        if let Err(failure) = &run.verdict {
            panic!("{failure}");
        }
        assert!(run.report.count(reservation_conformance::crashes::CrashKind::Crash) >= 4, "{}", run.report);
    }

    #[test]
    fn p1_the_crash_check_catches_a_server_that_keeps_nothing_on_disk() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::p1_the_crash_check_catches_a_server_that_keeps_nothing_on_disk",
        ) {
            return;
        }
        let Some(h) = service("redis-server (for the forgetful server)", RedisHarness::broken_forgetful()) else {
            return;
        };
        let run = crash_run(&h, "forgetful server (planted)");
        let failure = run.verdict.expect_err("a crash of a server that keeps nothing lost nothing");
        assert_eq!(failure.rule, Some(reservation_store::rules::Rule::P1), "{failure}");
        assert!(failure.to_string().contains("after crash"), "{failure}");
    }

    #[test]
    fn each_harness_offers_the_faults_it_can_cause() {
        if !reservation_conformance::tiers::long_tier("fault_check::long::each_harness_offers_the_faults_it_can_cause")
        {
            return;
        }
        let (Some(shared), Some(durable)) = (crate::harness(), durable_harness()) else { return };
        assert_eq!(shared.faults(), Vec::<Fault>::new(), "a shared server is never harmed");
        let refused = shared.inject(Fault::Crash).expect_err("a shared server was crashed");
        assert!(error_chain(&refused).contains("cannot cause the fault `crash`"), "{}", error_chain(&refused));
        assert_eq!(durable.faults(), [Fault::CutConnections, Fault::Crash, Fault::Pause]);
        assert!(durable.inject(Fault::Failover).is_err(), "a failover with no replica");
        assert!(durable.inject(Fault::Restart).is_err(), "the suite's own fault, caused by the harness");
        // Its stores wait for the replica: each fault ends with the replica acknowledging writes
        // (within a bound generous enough for a busy machine: the wait ends at the acknowledgement).
        let Some(h) = replicated(RedisOptions::default().with_replica_acks(1, Duration::from_secs(5))) else { return };
        assert_eq!(h.faults(), [Fault::CutConnections, Fault::Crash, Fault::Pause, Fault::Failover]);
        let store = h.store_with(Time::Local(ManualClock::new(START)));
        let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("offered").as_str()).expect("scope");
        let confirm = |key: &str| {
            let key = Key::new(key).expect("key");
            // A connection from before the fault fails once, and is then closed with the idle ones.
            let _ = h.runtime().block_on(store.lookup(&scope, &key));
            h.runtime().block_on(store.confirm(&scope, &key, &owner(), version()))
        };
        confirm("before").expect("confirmed");
        let (primary, replica) = (h.url().to_owned(), h.replica().expect("a replica").url());
        inject(&h, Fault::Crash);
        confirm("after-crash").unwrap_or_else(|e| panic!("the replica did not acknowledge: {}", error_chain(&e)));
        inject(&h, Fault::Failover);
        assert_eq!(h.url(), replica, "the replica is the primary");
        assert!(h.replica().is_some_and(|r| r.url() != primary && r.url() != replica), "a new replica");
        confirm("after-failover")
            .unwrap_or_else(|e| panic!("the new replica did not acknowledge: {}", error_chain(&e)));
        assert_eq!(h.faults(), [Fault::CutConnections, Fault::Crash, Fault::Pause], "a failover once only");
        assert!(h.inject(Fault::Failover).is_err(), "a second failover");
    }
}
