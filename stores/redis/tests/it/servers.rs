//! The test harness's own upkeep: a harness deletes its keys when dropped, and the append-only
//! server of a durable harness is really killed and started again, and stopped with the harness.

use std::net::TcpStream;
use std::time::Duration;

use reservation_conformance::START;
use reservation_redis::Time;
use reservation_store::{AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, Ttl};

use crate::{answering_line, durable_harness, harness, info_line, raw};

/// The keys under `prefix` on the server `h` uses.
fn keys_under(h: &reservation_redis::RedisHarness, prefix: &str) -> Vec<Vec<u8>> {
    let mut conn = raw(h);
    h.runtime().block_on(redis::cmd("KEYS").arg(format!("{prefix}:*")).query_async(&mut conn)).expect("KEYS")
}

#[test]
fn a_harness_deletes_its_keys_when_dropped() {
    let (Some(h), Some(other)) = (harness(), harness()) else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let scope = ReservationScope::parse("user", Some("acme"), "dropped").expect("scope");
    let owner = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let (hold, ttl) = (HoldId::new("h").expect("hold"), Ttl::from_millis(60_000).expect("ttl"));
    for i in 0..3 {
        let key = Key::new(format!("k{i}")).expect("key");
        h.runtime().block_on(store.reserve(&scope, &key, &owner, &hold, ttl)).expect("reserved");
    }
    let prefix = h.options().prefix.clone();
    // More keys than one SCAN batch holds, so that the cleanup must follow the cursor.
    let mut conn = raw(&h);
    let mut set = redis::cmd("MSET");
    for i in 0..3_000 {
        set.arg(format!("{prefix}:filler-{i}")).arg(i);
    }
    let () = h.runtime().block_on(set.query_async(&mut conn)).expect("written");
    assert_eq!(
        keys_under(&other, &prefix).len(),
        3_005,
        "three rows, the scope's clock, the expiry index and the filler"
    );
    drop(store);
    drop(h);
    assert_eq!(keys_under(&other, &prefix), Vec::<Vec<u8>>::new(), "the dropped harness left its keys");
}

/// Waits up to 10 s for `done`.
fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

#[test]
fn a_restart_that_finds_another_server_on_its_port_fails_and_never_takes_it_for_its_own() {
    let Some(durable) = durable_harness() else { return };
    let server = durable.server().expect("a durable harness runs a server of its own");
    let url = server.url();
    let port = url.trim_start_matches("redis://127.0.0.1:").trim_end_matches('/').to_owned();
    let pid = info_line(&durable, &url, "process_id");
    // The harness's server dies behind its back...
    let killed = std::process::Command::new("kill").args(["-KILL", &pid]).status().expect("kill runs");
    assert!(killed.success());
    let port_number: u16 = port.parse().expect("a port");
    assert!(eventually(|| TcpStream::connect(("127.0.0.1", port_number)).is_err()), "the server did not die");
    // ...and another server takes its port.
    let dir = std::env::temp_dir().join(format!("reservation-redis-intruder-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let mut intruder = std::process::Command::new("redis-server")
        .args(["--port", &port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir"])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("redis-server starts");
    let intruder_pid = intruder.id().to_string();
    let took = eventually(|| answering_line(&durable, &url, "process_id").as_ref() == Some(&intruder_pid));
    let restarted = took.then(|| server.restart());
    let answering = answering_line(&durable, &url, "process_id");
    let _ = intruder.kill();
    let _ = intruder.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(took, "the other server did not answer on the port");
    assert_eq!(answering, Some(intruder_pid), "the other server holds the port throughout");
    let error = restarted.expect("restarted").expect_err("the restart took the other server on its port for its own");
    let chain = reservation_store::error_chain(&error);
    assert!(chain.contains(&format!("redis-server on port {port} ended")), "{chain}");
}

/// The server's `run_id`, which a new process draws afresh.
fn run_id(h: &reservation_redis::RedisHarness, url: &str) -> String {
    info_line(h, url, "run_id")
}

#[test]
fn the_append_only_server_restarts_as_a_new_process_keeps_its_data_and_stops_when_dropped() {
    let (Some(h), Some(durable)) = (harness(), durable_harness()) else { return };
    let server = durable.server().expect("a durable harness runs a server of its own");
    let url = server.url();
    assert!(url.starts_with("redis://127.0.0.1:") && url != h.url() && url == durable.url(), "{url}");
    let first = run_id(&h, &url);
    h.runtime().block_on(async {
        let client = redis::Client::open(url.as_str()).expect("a client");
        let mut conn = client.get_multiplexed_async_connection().await.expect("a connection");
        let () = redis::cmd("SET").arg("kept").arg("yes").query_async(&mut conn).await.expect("written");
        // Enough data that loading it takes a while: the restart must wait until the server has
        // loaded it (a server still loading answers every command, PING included, with LOADING).
        // A million keys took more than the restart's 10 s to load on two cores beside four
        // spinning threads and seven other tests; 300,000 take a few hundred milliseconds quiet.
        // Written a thousand at a time: one command of ten thousand, appended and synced on a
        // loaded machine, outlasted the connection's response timeout.
        for batch in 0..300 {
            let mut set = redis::cmd("MSET");
            for i in 0..1_000 {
                set.arg(format!("filler-{batch}-{i}")).arg(i);
            }
            let () = set.query_async(&mut conn).await.expect("written");
        }
    });
    server.restart().expect("restarted");
    assert_ne!(run_id(&h, &url), first, "the restart did not start a new process");
    let kept: Option<String> = h.runtime().block_on(async {
        let client = redis::Client::open(url.as_str()).expect("a client");
        let mut conn = client.get_multiplexed_async_connection().await.expect("a connection");
        redis::cmd("GET").arg("kept").query_async(&mut conn).await.expect("read")
    });
    assert_eq!(kept.as_deref(), Some("yes"), "an acknowledged write was lost across the restart");
    let authority = url.trim_start_matches("redis://").trim_end_matches('/').to_owned();
    drop(durable);
    assert!(TcpStream::connect(&authority).is_err(), "the dropped server still accepts connections");
}
