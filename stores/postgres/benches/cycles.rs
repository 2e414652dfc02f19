//! Reserve → confirm → release cycles per second, and each cycle's p50 and p99 latency, at 1, 4
//! and 16 connections: `PostgresStore` beside a baseline that sends the same statements with no
//! decoding, clock or spec function between them, and beside `pgbench` (its simple-update
//! transaction, five statements like one of ours, and its select-only one, one statement) on the
//! same server as the ceiling.
//!
//! `cargo bench -p reservation-postgres --bench cycles` (needs a server: `RESERVATION_PG_URL`,
//! by default the local one). `-- --quick` runs each measurement for 1 s instead of 3 s.

use std::collections::BTreeSet;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant as WallInstant};

use reservation_postgres::{PostgresOptions, PostgresStore, Time, pg_url};
use reservation_store::spec::Reservation;
use reservation_store::{
    AggregateRef, Clock, HoldId, Key, ReleaseVersion, ReservationScope, ReservationStore, SystemClock, Ttl, Version,
};

const CONNECTIONS: [usize; 3] = [1, 4, 16];

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Store,
    Baseline,
}

struct Figures {
    cycles_per_second: f64,
    p50: Duration,
    p99: Duration,
}

async fn cycle(
    store: &PostgresStore<SystemClock>,
    mode: Mode,
    scope: &ReservationScope,
    key: &Key,
    owner: &AggregateRef,
    hold: &HoldId,
) {
    let ttl = Ttl::from_millis(60_000).expect("non-zero");
    let version = Version::stream(1).expect("a stream version");
    match mode {
        Mode::Store => {
            store.reserve(scope, key, owner, hold, ttl).await.expect("reserved");
            store.confirm(scope, key, owner, version).await.expect("confirmed");
            store.release(scope, key, owner, ReleaseVersion::At(version)).await.expect("released");
        }
        Mode::Baseline => {
            let expires = SystemClock.now().saturating_add(ttl);
            let pending =
                Reservation::pending(owner.clone(), BTreeSet::from([hold.clone()]), expires).expect("one hold");
            let confirmed = Reservation::confirmed(owner.clone(), version);
            store.baseline_write(scope, key, Some(&pending)).await.expect("written");
            store.baseline_write(scope, key, Some(&confirmed)).await.expect("written");
            store.baseline_write(scope, key, None).await.expect("deleted");
        }
    }
}

fn measure(
    runtime: &tokio::runtime::Runtime,
    store: &PostgresStore<SystemClock>,
    mode: Mode,
    connections: usize,
    run: Duration,
) -> Figures {
    let started = WallInstant::now();
    let latencies: Vec<Duration> = runtime.block_on(async {
        let tasks: Vec<_> = (0..connections)
            .map(|task| {
                let store = store.clone();
                tokio::spawn(async move {
                    let scope =
                        ReservationScope::parse("user", Some("acme"), &format!("bench-{mode:?}-{connections}-{task}"))
                            .expect("scope");
                    let owner = AggregateRef::parse("user", Some("acme"), &format!("owner-{task}")).expect("owner");
                    let hold = HoldId::new("attempt").expect("hold");
                    let mut out = Vec::new();
                    let mut i = 0u64;
                    while started.elapsed() < run {
                        let key = Key::new(format!("k{}", i % 64)).expect("key");
                        let t = WallInstant::now();
                        cycle(&store, mode, &scope, &key, &owner, &hold).await;
                        out.push(t.elapsed());
                        i += 1;
                    }
                    out
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.expect("the task ran"));
        }
        all
    });
    let elapsed = started.elapsed();
    let mut sorted = latencies;
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)];
    Figures { cycles_per_second: sorted.len() as f64 / elapsed.as_secs_f64(), p50: at(0.50), p99: at(0.99) }
}

/// `pgbench`'s transactions per second at `clients` with its built-in script `script`
/// (`simple-update` or `select-only`), if pgbench is installed.
fn pgbench(url: &str, script: &str, clients: usize, run: Duration) -> Option<f64> {
    let seconds = run.as_secs().max(1).to_string();
    let threads = clients.min(2).to_string();
    let clients = clients.to_string();
    let out = Command::new("pgbench")
        .args(["-n", "-b", script, "-c", &clients, "-j", &threads, "-T", &seconds, url])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("tps = "))?;
    line.trim_start_matches("tps = ").split_whitespace().next()?.parse().ok()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let run = if quick { Duration::from_secs(1) } else { Duration::from_secs(3) };
    let url = pg_url();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    let schema = format!("reservation_bench_{}", std::process::id());
    let options = PostgresOptions::default().with_schema(&schema).with_max_connections(16);
    let store = match runtime.block_on(PostgresStore::connect(&url, Time::Local(SystemClock), options)) {
        Ok(store) => Arc::new(store),
        Err(e) => {
            println!("skipped: no PostgreSQL server at {url}: {e}");
            return;
        }
    };
    let pgbench_ready =
        Command::new("pgbench").args(["-i", "-q", "-s", "1", &url]).output().is_ok_and(|o| o.status.success());
    println!(
        "PostgresStore, reserve → confirm → release cycles ({} s per figure, best of two runs; {url})",
        run.as_secs()
    );
    println!(
        "| connections | store cycles/s | p50 | p99 | baseline cycles/s | p50 | p99 | store/baseline time | store tx/s | pgbench simple-update tps | pgbench select-only tps |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for connections in CONNECTIONS {
        let best = |mode| {
            let a = measure(&runtime, &store, mode, connections, run);
            let b = measure(&runtime, &store, mode, connections, run);
            if a.cycles_per_second >= b.cycles_per_second { a } else { b }
        };
        let baseline = best(Mode::Baseline);
        let ours = best(Mode::Store);
        let ceiling = |script| if pgbench_ready { pgbench(&url, script, connections, run) } else { None };
        let show = |tps: Option<f64>| tps.map_or("n/a".to_owned(), |t| format!("{t:.0}"));
        println!(
            "| {connections} | {:.0} | {:.2?} | {:.2?} | {:.0} | {:.2?} | {:.2?} | {:.2} | {:.0} | {} | {} |",
            ours.cycles_per_second,
            ours.p50,
            ours.p99,
            baseline.cycles_per_second,
            baseline.p50,
            baseline.p99,
            baseline.cycles_per_second / ours.cycles_per_second,
            ours.cycles_per_second * 3.0,
            show(ceiling("simple-update")),
            show(ceiling("select-only")),
        );
    }
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.expect("an admin connection");
        tokio::spawn(connection);
        let _ = client
            .batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{schema}\" CASCADE; DROP TABLE IF EXISTS pgbench_accounts, pgbench_branches, pgbench_history, pgbench_tellers"
            ))
            .await;
    });
}
