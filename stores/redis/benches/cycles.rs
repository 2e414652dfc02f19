//! Reserve → confirm → release cycles per second, and each cycle's p50 and p99 latency, at 1, 4
//! and 16 connections: `RedisStore` beside a baseline that sends the same commands with no
//! decoding, clock or spec function between them, and beside `redis-benchmark` (`SET` and `GET`
//! at the same number of connections) on the same server as the ceiling.
//!
//! `cargo bench -p reservation-redis --bench cycles` (needs a server: `RESERVATION_REDIS_URL`,
//! by default the local one). `-- --quick` runs each measurement for 1 s instead of 3 s.

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use reservation_redis::{RedisOptions, RedisStore, Time, redis_url};
use reservation_store::SystemClock;
use reservation_testkit::{Cycle, baseline_rows, print_table, store_cycle};

/// `redis-benchmark`'s requests per second for `command` (`set` or `get`) at `clients`, if it is
/// installed.
fn redis_benchmark(host: &str, port: &str, command: &str, clients: usize) -> Option<f64> {
    let out = Command::new("redis-benchmark")
        .args(["-h", host, "-p", port, "-q", "-n", "50000", "-t", command, "-c", &clients.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // Progress lines end in `\r`; the result is the last one that gives a rate.
    let line = text.split(['\r', '\n']).rfind(|l| l.contains("requests per second"))?;
    line.split(": ").nth(1)?.split_whitespace().next()?.parse().ok()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let run = if quick { Duration::from_secs(1) } else { Duration::from_secs(3) };
    let url = redis_url();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    let prefix = format!("rsv-bench:{}", std::process::id());
    let options = RedisOptions::default().with_prefix(&prefix).with_max_connections(16);
    let store = match runtime.block_on(RedisStore::connect(&url, Time::Local(SystemClock), options)) {
        Ok(store) => Arc::new(store),
        Err(e) => {
            println!("skipped: no Redis server at {url}: {e}");
            return;
        }
    };
    let authority = url.trim_start_matches("redis://").split('/').next().unwrap_or_default().to_owned();
    let (host, port) = authority.rsplit_once(':').unwrap_or((&authority, "6379"));
    println!(
        "RedisStore, reserve → confirm → release cycles ({} s per figure, best of two runs; {url})",
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
        ["redis-benchmark SET/s", "redis-benchmark GET/s"],
        |connections| {
            [redis_benchmark(host, port, "set", connections), redis_benchmark(host, port, "get", connections)]
        },
    );
}
