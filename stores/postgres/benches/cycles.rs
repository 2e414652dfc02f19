//! Reserve → confirm → release cycles per second, and each cycle's p50 and p99 latency, at 1, 4
//! and 16 connections: `PostgresStore` beside a baseline that sends the same statements with no
//! decoding, clock or spec function between them, and beside `pgbench` (its simple-update
//! transaction, five statements like one of ours, and its select-only one, one statement) on the
//! same server as the ceiling.
//!
//! `cargo bench -p reservation-postgres --bench cycles` (needs a server: `RESERVATION_PG_URL`,
//! by default the local one). `-- --quick` runs each measurement for 1 s instead of 3 s.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use reservation_postgres::{PostgresOptions, PostgresStore, Time, pg_url};
use reservation_store::SystemClock;
use reservation_testkit::{Cycle, baseline_rows, print_table, store_cycle};

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
    let (s, b) = (store.clone(), store.clone());
    print_table(
        &runtime,
        run,
        move |c: Arc<Cycle>| {
            let s = s.clone();
            async move { store_cycle(&*s, &c).await }
        },
        move |c: Arc<Cycle>| {
            let b = b.clone();
            async move {
                for row in baseline_rows(&c) {
                    b.baseline_write(&c.scope, &c.key, row.as_ref()).await.expect("written");
                }
            }
        },
        ["pgbench simple-update tps", "pgbench select-only tps"],
        |connections| {
            let tps = |script| if pgbench_ready { pgbench(&url, script, connections, run) } else { None };
            [tps("simple-update"), tps("select-only")]
        },
    );
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
