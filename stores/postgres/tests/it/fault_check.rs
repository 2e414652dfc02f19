//! Clusters of the tests' own (`PostgresHarness::on_cluster`): the faults they offer, each caused
//! and the store finding its way back; and the clusters removed afterwards. Without
//! `pg_createcluster` (or root) each test says so in one line and passes, unless
//! `RESERVATION_REQUIRE_SERVICES=1`.

use std::time::{Duration, Instant};

use reservation_conformance::faults::{self, Fault, FaultRun, FaultSettings};
use reservation_conformance::services::service;
use reservation_conformance::{Harness, START, unique_namespace};
use reservation_postgres::{PostgresHarness, PostgresOptions, PostgresStore, Replication};
use reservation_store::rules::Rule;
use reservation_store::{
    AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, StoreResult, Ttl, Version, error_chain,
};

/// Options that keep a fault run short: every wait of the store ends within a few seconds.
pub(crate) fn options() -> PostgresOptions {
    let mut options = PostgresOptions::default().with_max_connections(8);
    options.connect_timeout = Duration::from_secs(2);
    options.statement_timeout = Duration::from_secs(2);
    options.response_timeout = Duration::from_secs(3);
    options.idle_transaction_timeout = Duration::from_millis(1_500);
    options
}

/// What a test without the means to make clusters says it skipped.
const SERVICE: &str = "PostgreSQL clusters of the tests' own";

/// A harness on clusters of its own, or `None` (said once) without the means to make them.
fn cluster(replication: Replication) -> Option<PostgresHarness> {
    service(SERVICE, PostgresHarness::on_cluster(replication, options()))
}

fn scope(label: &str) -> ReservationScope {
    ReservationScope::parse("user", Some("acme"), unique_namespace(label).as_str()).expect("a valid scope")
}

/// Reserves and confirms `key` for its own owner.
async fn confirm(store: &PostgresStore<ManualClock>, scope: &ReservationScope, key: &str) -> StoreResult<()> {
    let (key, owner) = (Key::new(key).expect("key"), AggregateRef::parse("user", Some("acme"), key).expect("owner"));
    let ttl = Ttl::from_millis(60_000).expect("ttl");
    store.reserve(scope, &key, &owner, &HoldId::new("h").expect("hold"), ttl).await?;
    store.confirm(scope, &key, &owner, Version::stream(1).expect("version")).await?;
    Ok(())
}

/// Whether `key` is confirmed in `store`, asked until the store answers (within 20 s).
fn is_confirmed(h: &PostgresHarness, store: &PostgresStore<ManualClock>, scope: &ReservationScope, key: &str) -> bool {
    let key = Key::new(key).expect("key");
    let start = Instant::now();
    loop {
        match h.runtime().block_on(store.lookup(scope, &key)) {
            Ok(found) => return found.is_some_and(|r| r.as_confirmed().is_some()),
            Err(e) if start.elapsed() < Duration::from_secs(20) => {
                eprintln!("lookup after the fault: {}", error_chain(&e));
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => panic!("the store did not find its way back: {}", error_chain(&e)),
        }
    }
}

/// The clusters `pg_lsclusters` lists. It fails when a cluster it is reading is removed
/// meanwhile (another test's harness dropping its own): then it is asked again, up to ten times.
fn listed() -> String {
    let mut failures = Vec::new();
    while failures.len() < 10 {
        let out = std::process::Command::new("pg_lsclusters").arg("-h").output().expect("pg_lsclusters runs");
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        failures.push(String::from_utf8_lossy(&out.stderr).into_owned());
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("pg_lsclusters failed ten times: {failures:?}");
}

/// A cluster as the test sees it from outside: its name, its version, its log, its processes.
struct Outside {
    name: String,
    version: String,
    log: String,
}

impl Outside {
    /// The cluster `name`, as `pg_lsclusters` lists it.
    fn of(name: &str) -> Outside {
        let listed = listed();
        let line = listed.lines().find(|l| l.split_whitespace().nth(1) == Some(name)).expect("the cluster is listed");
        let columns: Vec<&str> = line.split_whitespace().collect();
        Outside { name: name.to_owned(), version: columns[0].to_owned(), log: columns[6].to_owned() }
    }

    /// The cluster's live processes, with their state letters and whether each is a WAL sender:
    /// the postmaster (its command line names the cluster's configuration) and those whose
    /// titles name the cluster.
    fn processes(&self) -> Vec<(u32, char, bool)> {
        let config = format!("/{}/{}/postgresql.conf", self.version, self.name);
        let title = format!("{}/{}: ", self.version, self.name);
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let command = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let command = String::from_utf8_lossy(&command).replace('\0', " ");
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let state = stat.rsplit(')').next().and_then(|rest| rest.trim_start().chars().next());
            match state {
                Some(state) if state != 'Z' && (command.contains(&config) || command.contains(&title)) => {
                    found.push((pid, state, command.contains(&format!("{title}walsender "))));
                }
                _ => {}
            }
        }
        found
    }

    /// How many lines of the cluster's log contain `text`.
    fn logged(&self, text: &str) -> usize {
        std::fs::read_to_string(&self.log).unwrap_or_default().lines().filter(|l| l.contains(text)).count()
    }
}

/// The first column, text, of each row `sql` gives on the server on `port`.
fn query(h: &PostgresHarness, port: u16, sql: &str) -> Vec<String> {
    h.runtime().block_on(async {
        let url = format!("host=127.0.0.1 port={port} user=postgres dbname=postgres");
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("connected");
        tokio::spawn(connection);
        let rows = client.query(sql, &[]).await.expect("answered");
        rows.iter().map(|r| r.get::<_, String>(0)).collect()
    })
}

/// Waits up to 5 s for `done`.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(5) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Run only by [`clusters_left_by_an_ended_process_are_removed_by_the_next_harness`], in a
/// process of its own: makes a harness, prints its clusters' names, and ends the process without
/// dropping it, as a test process killed mid-run would.
#[test]
#[ignore = "run by clusters_left_by_an_ended_process_are_removed_by_the_next_harness, in a process of its own"]
fn leave_a_cluster_behind() {
    let h = PostgresHarness::on_cluster(Replication::None, options()).expect("a cluster");
    println!("left behind: {}", h.clusters().join(" "));
    std::process::exit(0);
}

/// One fault run on `h` with only `fault` fired, at most `max` times; its report and the faults
/// fired printed (the figures of RELIABILITY.md).
pub(crate) fn fault_run(h: &PostgresHarness, what: &str, fault: Fault, max: usize) -> FaultRun {
    fault_run_for(h, what, fault, max, Duration::from_secs(6))
}

/// As [`fault_run`], the run going on for `duration`, with as many operations a second.
pub(crate) fn fault_run_for(h: &PostgresHarness, what: &str, fault: Fault, max: usize, duration: Duration) -> FaultRun {
    let per_second = |n: u32| usize::try_from(u128::from(n) * duration.as_millis() / 1_000).unwrap_or(usize::MAX);
    let settings = FaultSettings::default()
        .with_faults(&[fault])
        .with_duration(duration)
        .with_max_faults(max)
        .with_gap(Duration::from_millis(1_200))
        .with_ops(per_second(1_000))
        .with_ledger_keys(per_second(200));
    let run = faults::run(h, &settings.into());
    eprintln!("PostgreSQL, {what}: {}", run.report);
    for fired in &run.report.fired {
        eprintln!("  {fired}");
    }
    run
}

/// A fault run on clusters of `replication`, `fault` fired at most `max` times: it lost nothing,
/// was judged linearizable, and fired `fault` at least once; after a fault that can lose data, it
/// looked acknowledged confirmations up.
fn loses_nothing(replication: Replication, what: &str, fault: Fault, max: usize) {
    let Some(h) = cluster(replication) else { return };
    lost_nothing(&fault_run(&h, what, fault, max), fault);
}

/// `run`, a fault run of `fault`: it lost nothing, was judged linearizable, and fired `fault` at
/// least once; after a fault that can lose data, it looked acknowledged confirmations up.
pub(crate) fn lost_nothing(run: &FaultRun, fault: Fault) {
    if let Err(failure) = &run.verdict {
        panic!("{failure}");
    }
    let report = &run.report;
    assert_eq!((report.lost, report.two_owners), (0, 0), "{report}");
    assert!(report.fired.iter().any(|f| f.fault == fault), "no {fault} fired: {report}");
    assert!(report.fired.iter().all(|f| f.recovered_after.is_some()), "the store did not answer again: {report}");
    if matches!(fault, Fault::Crash | Fault::Failover) {
        assert!(report.confirmations_checked > 0, "no acknowledged confirmation was looked up: {report}");
    }
}

/// A fault run on a cluster of `replication` whose store has `options`, `fault` fired at most
/// `max` times: it failed on P1, having found acknowledged confirmations lost. The check counts
/// a key as lost when its history becomes linearizable once the confirmation, and what returned
/// before the losing fault had ended, are taken as operations that may not have happened.
fn caught_losing(replication: Replication, options: PostgresOptions, what: &str, fault: Fault, max: usize) {
    let Some(h) = service(SERVICE, PostgresHarness::on_cluster(replication, options)) else { return };
    lost_and_caught(&fault_run(&h, what, fault, max));
}

/// `run` failed on P1, having found acknowledged confirmations lost.
pub(crate) fn lost_and_caught(run: &FaultRun) {
    let failure = run.verdict.as_ref().expect_err("confirmations were lost, and the fault check passed");
    assert_eq!(failure.rule, Some(Rule::P1), "{failure}");
    let report = &run.report;
    assert!(report.lost > 0, "{report}");
}

/// The crash check on a cluster of its own: its server killed (SIGKILL) and restarted at the
/// points the check chooses, every key compared whole after each (the figures of RELIABILITY.md).
fn crash_run(options: PostgresOptions, what: &str) -> Option<reservation_conformance::crashes::CrashRun> {
    use reservation_conformance::crashes::{CrashSettings, run};
    let h = service(SERVICE, PostgresHarness::on_cluster(Replication::None, options))?;
    let started = Instant::now();
    let run = run(&h, &CrashSettings::default().into());
    eprintln!("PostgreSQL, crash check, {what}: {} in {:.2?}", run.report, started.elapsed());
    Some(run)
}

/// The long tier (`reservation_conformance::tiers`): run by its own command, and by CI.
mod long {
    use super::*;

    #[test]
    fn each_fault_is_caused_and_the_store_finds_its_way_back() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::each_fault_is_caused_and_the_store_finds_its_way_back",
        ) {
            return;
        }
        use std::sync::atomic::{AtomicBool, Ordering};

        let Some(h) = cluster(Replication::Synchronous) else { return };
        assert_eq!(h.faults(), [Fault::CutConnections, Fault::Crash, Fault::Pause, Fault::Failover]);
        let store = h.store(ManualClock::new(START));
        let scope = scope("each-fault");
        let app = h.options().application_name.clone();
        let sessions_sql = format!("SELECT pid::text FROM pg_stat_activity WHERE application_name = '{app}'");
        for (i, fault) in
            [Fault::CutConnections, Fault::Pause, Fault::Crash, Fault::Failover, Fault::Crash].into_iter().enumerate()
        {
            let key = format!("before-{i}-{fault}");
            h.runtime().block_on(confirm(&store, &scope, &key)).expect("confirmed before the fault");
            let (port, primary) = (h.primary_port().expect("a port"), Outside::of(&h.clusters()[0]));
            let (processes, sessions) = (primary.processes(), query(&h, port, &sessions_sql));
            let (crashes, sender_stopped, all_stopped, watching) = (
                primary.logged("automatic recovery in progress"),
                AtomicBool::new(false),
                AtomicBool::new(false),
                AtomicBool::new(true),
            );
            let start = Instant::now();
            std::thread::scope(|s| {
                s.spawn(|| {
                    while watching.load(Ordering::SeqCst) {
                        let now = primary.processes();
                        // Every process stopped, the postmaster and its backends with the WAL
                        // senders: while a failover kills the primary, a look may find its
                        // stopped senders alone, the others already gone, which is not a pause.
                        let beside_senders = now.iter().any(|(_, _, sender)| !*sender);
                        if beside_senders && now.iter().all(|(_, state, _)| *state == 'T') {
                            all_stopped.store(true, Ordering::SeqCst);
                        }
                        if now.iter().any(|(_, state, sender)| *sender && *state == 'T') {
                            sender_stopped.store(true, Ordering::SeqCst);
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                });
                h.inject(fault).unwrap_or_else(|e| panic!("{fault}: {}", error_chain(&e)));
                watching.store(false, Ordering::SeqCst);
            });
            eprintln!("{fault}: caused in {:?}", start.elapsed());
            let gone =
                |pids: &[(u32, char, bool)]| !primary.processes().iter().any(|p| pids.iter().any(|q| q.0 == p.0));
            match fault {
                Fault::CutConnections => {
                    assert!(!sessions.is_empty(), "the store had no session to cut");
                    let ended = eventually(|| query(&h, port, &sessions_sql).iter().all(|pid| !sessions.contains(pid)));
                    assert!(ended, "a session of the store outlived the cut");
                }
                Fault::Pause => {
                    assert!(all_stopped.load(Ordering::SeqCst), "the cluster's processes were never all stopped");
                    assert!(
                        eventually(|| primary.processes().iter().all(|(_, state, _)| *state != 'T')),
                        "a process stayed stopped"
                    );
                }
                Fault::Crash => {
                    assert!(gone(&processes), "a process of the crashed server lived on");
                    assert_eq!(primary.logged("automatic recovery in progress"), crashes + 1, "no crash recovery");
                }
                _ => {
                    assert!(
                        sender_stopped.load(Ordering::SeqCst),
                        "the standby never fell behind: no WAL sender stopped"
                    );
                    assert!(!all_stopped.load(Ordering::SeqCst), "the whole primary was stopped, not its WAL senders");
                    assert_ne!(h.primary_port(), Some(port), "the primary did not change");
                    assert!(primary.processes().is_empty(), "the old primary still runs");
                    assert_eq!(Outside::of(&h.clusters()[0]).logged("received promote request"), 1, "no promotion");
                }
            }
            if h.faults().contains(&Fault::Failover) {
                let sql =
                    "SELECT count(*)::text FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'";
                assert_eq!(query(&h, port, sql), ["1"], "{fault}: the standby does not stream again");
            }
            assert!(is_confirmed(&h, &store, &scope, &key), "{fault} lost an acknowledged confirmation");
        }
        assert_eq!(h.faults(), [Fault::CutConnections, Fault::Crash, Fault::Pause], "a second failover was offered");
        let error = h.inject(Fault::Failover).expect_err("a failover with no standby left");
        assert!(error.message().contains("cannot cause"), "{}", error_chain(&error));
    }

    #[test]
    fn clusters_are_removed_when_the_harness_drops() {
        if !reservation_conformance::tiers::long_tier("fault_check::long::clusters_are_removed_when_the_harness_drops")
        {
            return;
        }
        let start = Instant::now();
        let Some(h) = cluster(Replication::Asynchronous) else { return };
        let made = start.elapsed();
        let names = h.clusters();
        assert_eq!(names.len(), 2, "{names:?}");
        let before = listed();
        for name in &names {
            assert!(before.contains(name.as_str()), "{name} is not listed:\n{before}");
        }
        let start = Instant::now();
        drop(h);
        eprintln!("a primary and its standby: made in {made:?}, removed in {:?}", start.elapsed());
        let after = listed();
        for name in &names {
            assert!(!after.contains(name.as_str()), "{name} is still listed:\n{after}");
        }
    }

    #[test]
    fn the_store_follows_a_failover_through_its_connection_string() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::the_store_follows_a_failover_through_its_connection_string",
        ) {
            return;
        }
        let Some(h) = cluster(Replication::Synchronous) else { return };
        let store = h.store(ManualClock::new(START));
        let scope = scope("follows");
        // Every pooled connection is open, to the primary.
        std::thread::scope(|s| {
            for i in 0..8 {
                let (h, store, scope) = (&h, &store, &scope);
                s.spawn(move || {
                    h.runtime().block_on(confirm(store, scope, &format!("before-{i}"))).expect("confirmed")
                });
            }
        });
        let connections = store.connections();
        assert!(connections > 1, "{connections} connections");
        let old = h.primary_port();
        h.inject(Fault::Failover).unwrap_or_else(|e| panic!("{}", error_chain(&e)));
        assert_ne!(h.primary_port(), old, "the primary did not change");
        // A connection to the dead primary fails at most once and is dropped; the next one made
        // reaches the promoted standby.
        let mut failures = 0;
        while let Err(e) = h.runtime().block_on(confirm(&store, &scope, "after")) {
            failures += 1;
            assert!(
                failures <= connections,
                "{failures} failures, more than the pool's connections: {}",
                error_chain(&e)
            );
        }
        eprintln!("after the failover: {failures} failed operations, then the store worked");
        for i in 0..8 {
            assert!(
                is_confirmed(&h, &store, &scope, &format!("before-{i}")),
                "a synchronous failover lost a confirmation"
            );
        }
        let app = h.options().application_name.clone();
        let sessions = h.runtime().block_on(async {
            let url =
                format!("host=127.0.0.1 port={} user=postgres dbname=postgres", h.primary_port().expect("a port"));
            let (client, connection) =
                tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("the new primary");
            tokio::spawn(connection);
            let sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1";
            client.query_one(sql, &[&app]).await.expect("counted").get::<_, i64>(0)
        });
        assert!(sessions > 0, "the store has no session on the promoted standby");
    }

    #[test]
    fn clusters_left_by_an_ended_process_are_removed_by_the_next_harness() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::clusters_left_by_an_ended_process_are_removed_by_the_next_harness",
        ) {
            return;
        }
        // A cluster of this live process: kept.
        let Some(kept) = cluster(Replication::None) else { return };
        let version = Outside::of(&kept.clusters()[0]).version;
        // A cluster of a test process that ended without dropping its harness.
        let exe = std::env::current_exe().expect("the test binary");
        let out = std::process::Command::new(exe)
            .args(["--ignored", "--exact", "fault_check::leave_a_cluster_behind", "--nocapture"])
            .output()
            .expect("the test binary runs");
        let said = String::from_utf8_lossy(&out.stdout);
        let left = said.lines().find_map(|l| l.strip_prefix("left behind: ")).expect("a name").to_owned();
        // A cluster named for this process's id but another start: its process ended, and the id
        // was given again. (Another test's harness, made meanwhile, may remove either first.)
        let reused = format!("reservation-test-{}-1-0-primary", std::process::id());
        let created = std::process::Command::new("pg_createcluster").args([&version, &reused]).output().expect("runs");
        eprintln!("{reused}: {}", if created.status.success() { "made" } else { "not made" });
        assert!(listed().contains(kept.clusters()[0].as_str()), "a live process's cluster was removed");
        // The next harness removes both. Harnesses of other tests may be making and removing
        // clusters at the same moment, and a removal that races with another fails: a second or third
        // harness made after it removes what the first could not.
        let mut after = String::new();
        for _ in 0..3 {
            let Some(next) = cluster(Replication::None) else { return };
            after = listed();
            drop(next);
            if ![&left, &reused].iter().any(|name| after.contains(name.as_str())) {
                break;
            }
        }
        for name in [&left, &reused] {
            assert!(!after.contains(name.as_str()), "{name} is still listed:\n{after}");
        }
        assert!(after.contains(kept.clusters()[0].as_str()), "a live process's cluster was removed:\n{after}");
        drop(kept);
    }

    #[test]
    fn a_crash_mid_run_loses_nothing() {
        if !reservation_conformance::tiers::long_tier("fault_check::long::a_crash_mid_run_loses_nothing") {
            return;
        }
        loses_nothing(Replication::None, "crash", Fault::Crash, 3);
    }

    #[test]
    fn a_synchronous_failover_loses_nothing() {
        if !reservation_conformance::tiers::long_tier("fault_check::long::a_synchronous_failover_loses_nothing") {
            return;
        }
        loses_nothing(Replication::Synchronous, "failover, synchronous standby", Fault::Failover, 1);
    }

    #[test]
    fn an_asynchronous_failover_is_caught_losing_acknowledged_confirmations() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::an_asynchronous_failover_is_caught_losing_acknowledged_confirmations",
        ) {
            return;
        }
        caught_losing(Replication::Asynchronous, options(), "failover, asynchronous standby", Fault::Failover, 1);
    }

    #[test]
    fn cut_connections_lose_nothing() {
        if !reservation_conformance::tiers::long_tier("fault_check::long::cut_connections_lose_nothing") {
            return;
        }
        loses_nothing(Replication::None, "cut connections", Fault::CutConnections, 4);
    }

    #[test]
    fn pauses_lose_nothing() {
        if !reservation_conformance::tiers::long_tier("fault_check::long::pauses_lose_nothing") {
            return;
        }
        loses_nothing(Replication::None, "pause", Fault::Pause, 4);
    }

    #[test]
    fn a_store_whose_commits_are_acknowledged_before_they_are_on_disk_is_caught_by_a_crash() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::a_store_whose_commits_are_acknowledged_before_they_are_on_disk_is_caught_by_a_crash",
        ) {
            return;
        }
        let options = options().broken_commit_before_flush();
        caught_losing(
            Replication::None,
            options,
            "crash, commits acknowledged before flush (planted)",
            Fault::Crash,
            3,
        );
    }

    #[test]
    fn p1_the_crash_check_passes_on_a_crashing_server() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::p1_the_crash_check_passes_on_a_crashing_server",
        ) {
            return;
        }
        let Some(run) = crash_run(options(), "crashes of the server") else { return };
        if let Err(failure) = &run.verdict {
            panic!("{failure}");
        }
        assert!(run.report.count(reservation_conformance::crashes::CrashKind::Crash) >= 4, "{}", run.report);
    }

    #[test]
    fn p1_commits_acknowledged_before_they_are_on_disk_are_caught_by_the_crash_check() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::p1_commits_acknowledged_before_they_are_on_disk_are_caught_by_the_crash_check",
        ) {
            return;
        }
        let options = options().broken_commit_before_flush();
        let Some(run) = crash_run(options, "commits acknowledged before flush (planted)") else { return };
        let failure = run.verdict.expect_err("a crash lost acknowledged commits, and the crash check passed");
        assert_eq!(failure.rule, Some(Rule::P1), "{failure}");
        // What the crash loses depends on what the server had flushed: acknowledged rows (a key's
        // state changed after the crash), or even the store's tables, created just before (the store
        // never answers again).
        let text = failure.to_string();
        assert!(text.contains("after crash") || text.contains("did not answer within 30s"), "{text}");
    }

    #[test]
    fn a_restart_that_finds_another_server_on_its_port_fails_and_never_takes_it_for_its_own() {
        if !reservation_conformance::tiers::long_tier(
            "fault_check::long::a_restart_that_finds_another_server_on_its_port_fails_and_never_takes_it_for_its_own",
        ) {
            return;
        }
        let Some(h) = cluster(Replication::None) else { return };
        let port = h.primary_port().expect("a cluster's port");
        let outside = Outside::of(&h.clusters()[0]);
        // The cluster dies behind the harness's back, and its port is taken by a relay to the
        // shared server, another PostgreSQL that answers every question.
        let pids: Vec<String> = outside.processes().iter().map(|(pid, _, _)| pid.to_string()).collect();
        assert!(std::process::Command::new("kill").arg("-KILL").args(&pids).status().expect("kill runs").success());
        assert!(eventually(|| outside.processes().is_empty()), "the cluster's processes did not end");
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).expect("the cluster's port, now free");
        let shared: tokio_postgres::Config = reservation_postgres::pg_url().parse().expect("a connection string");
        let upstream = match (shared.get_hosts(), shared.get_ports()) {
            ([tokio_postgres::config::Host::Tcp(host), ..], [port, ..]) => format!("{host}:{port}"),
            _ => panic!("the shared server is not on TCP"),
        };
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = std::net::TcpStream::connect(&upstream) else { continue };
                for (mut from, mut to) in
                    [(client.try_clone().expect("a handle"), server.try_clone().expect("a handle")), (server, client)]
                {
                    std::thread::spawn(move || std::io::copy(&mut from, &mut to));
                }
            }
        });
        let answered = query(&h, port, "SELECT current_setting('data_directory')");
        let restarted = h.inject(Fault::Crash);
        assert!(!answered[0].contains(&h.clusters()[0]), "the relay reached the cluster: {answered:?}");
        let error = restarted.expect_err("the restart took the other server on its port for its own");
        assert!(error_chain(&error).contains("the server ended"), "{}", error_chain(&error));
    }
}
