//! Storage failures: connections killed mid-operation, a server restarted mid-run, conflicts past
//! the retry bound, connections cut before and after the `EXEC`. Each is a `StorageError`,
//! indeterminate exactly when the write may have landed, and the histories stay linearizable.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use reservation_conformance::START;
use reservation_conformance::linearizability::{self, Event, Names, Return};
use reservation_redis::{RedisHarness, RedisOptions, RedisStore, Time};
use reservation_store::error_chain;
use reservation_store::{ManualClock, ReservationStore, StoreError};
use reservation_testkit::proxy::CuttingProxy;

use crate::{durable_harness, harness, harness_with};

/// Sends one inline command to the server at `port` and returns its first answer line.
fn command(port: u16, line: &str) -> String {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else { return String::new() };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.write_all(format!("{line}\r\n").as_bytes());
    let mut answer = String::new();
    let _ = BufReader::new(stream).read_line(&mut answer);
    answer
}

fn port_of(h: &RedisHarness) -> u16 {
    let url = h.url();
    let authority = url.trim_start_matches("redis://").split('/').next().unwrap_or_default();
    authority.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(6379)
}

/// Records a history on `h` while `fault` runs on another thread, until the history is done.
fn record_under(h: &RedisHarness, fault: impl Fn(&AtomicBool) + Send) -> (Names, Vec<Event>) {
    reservation_testkit::while_running(fault, || linearizability::record(h, 8, 4_000, 0x0bad_c0de))
}

#[test]
fn killed_connections_give_storage_errors_and_linearizable_histories() {
    let Some(h) = durable_harness() else { return };
    let port = port_of(&h);
    let kills = AtomicU64::new(0);
    let (names, events) = record_under(&h, |stop| {
        let mut i = 0u64;
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(2 + i % 9));
            i += 1;
            let answer = command(port, "CLIENT KILL TYPE normal SKIPME yes");
            kills.fetch_add(answer.trim().trim_start_matches(':').parse().unwrap_or(0), Ordering::SeqCst);
        }
    });
    assert!(kills.load(Ordering::SeqCst) > 0, "no connection was killed");
    reservation_testkit::judge_faults(&names, &events, "killed connections");
}

#[test]
fn a_server_restart_mid_run_gives_storage_errors_and_linearizable_histories() {
    let Some(h) = durable_harness() else { return };
    let server = h.server().expect("a server of its own");
    let (names, events) = record_under(&h, |stop| {
        for _ in 0..3 {
            std::thread::sleep(Duration::from_millis(150));
            if stop.load(Ordering::SeqCst) {
                return;
            }
            server.restart().expect("the server restarted");
        }
    });
    reservation_testkit::judge_faults(&names, &events, "server restarts");
}

#[test]
fn conflicts_past_the_retry_bound_are_determinate_storage_errors() {
    let mut options = RedisOptions::default();
    options.retries = 0;
    let Some(h) = harness_with(options) else { return };
    let (names, events) = linearizability::record(&h, 8, 4_000, 0x00c0_ffee);
    let (errors, indeterminate) = reservation_testkit::judge_faults(&names, &events, "conflicts with no retry");
    assert_eq!(indeterminate, 0, "a conflict is known not to have written");
    let said = events
        .iter()
        .filter(|e| matches!(&e.ret, Return::Storage { message, .. } if message.contains("met another client's write")))
        .count();
    assert_eq!(said, errors, "every error names the conflict");
}

/// Cuts the connection when the client sends `pattern` (forwarding it or not) during a first
/// reserve of a free key; returns the error and whether the reservation exists afterwards.
fn cut_reserve(label: &str, pattern: &[u8], forward: bool) -> Option<(StoreError, bool)> {
    let h = harness()?;
    let cutter = CuttingProxy::start(("127.0.0.1", port_of(&h))).expect("a proxy");
    let clock = ManualClock::new(START);
    let url = format!("redis://127.0.0.1:{}/", cutter.port());
    let options = h.options().clone().with_max_connections(1);
    let through = h
        .runtime()
        .block_on(RedisStore::connect(&url, Time::Local(clock.clone()), options))
        .expect("connected through the proxy");
    let direct = h.store_with(Time::Local(clock));
    Some(reservation_testkit::cut_first_reserve(h.runtime(), &cutter, &through, &direct, label, pattern, forward))
}

#[test]
fn a_connection_cut_before_the_exec_is_determinate_and_changed_nothing() {
    let Some((error, exists)) = cut_reserve("cut-watch", b"WATCH", false) else { return };
    assert!(!error.is_indeterminate(), "{}", error_chain(&error));
    assert!(matches!(error, StoreError::Storage(_)), "{}", error_chain(&error));
    assert!(error_chain(&error).starts_with("Redis: "), "{}", error_chain(&error));
    assert!(!exists, "a determinate error, yet the reservation was made");
}

#[test]
fn a_connection_cut_after_the_exec_was_sent_is_indeterminate() {
    // The EXEC reaches the server, which runs the transaction; its answer never comes back.
    let Some((error, exists)) = cut_reserve("cut-exec", b"EXEC", true) else { return };
    assert!(error.is_indeterminate(), "{}", error_chain(&error));
    assert!(error_chain(&error).contains("may have taken effect"), "{}", error_chain(&error));
    assert!(exists, "the server got the EXEC, so the reservation was made");
    // The EXEC never reaches the server: the outcome is still unknown to the caller.
    let Some((error, exists)) = cut_reserve("cut-exec-lost", b"EXEC", false) else { return };
    assert!(error.is_indeterminate(), "{}", error_chain(&error));
    assert!(!exists, "the EXEC never reached the server, yet the reservation was made");
}

#[test]
fn an_operation_gives_up_after_one_attempt_more_than_its_retries() {
    // Another client writes the key without pause (the same bytes, so that every row stays
    // valid): nearly every attempt meets its write, and an operation that gives up says how many
    // attempts it made, which is the first one and `retries` more.
    let mut options = RedisOptions::default();
    options.retries = 2;
    let Some(h) = harness_with(options) else { return };
    let clock = ManualClock::new(START);
    let store = h.store_with(Time::Local(clock));
    let scope = reservation_store::ReservationScope::parse("user", Some("acme"), "contended").expect("scope");
    let key = reservation_store::Key::new("k").expect("key");
    let owner = |id: &str| reservation_store::AggregateRef::parse("user", Some("acme"), id).expect("owner");
    let version = reservation_store::Version::stream(1).expect("a stream version");
    h.runtime().block_on(store.confirm(&scope, &key, &owner("bob"), version)).expect("confirmed");
    let member = crate::row_key(&h, &scope, &key);
    let mut conn = crate::raw(&h);
    let bytes: Vec<u8> = h.runtime().block_on(redis::cmd("GET").arg(&member).query_async(&mut conn)).expect("the row");
    let writer = |stop: &AtomicBool| {
        while !stop.load(Ordering::SeqCst) {
            let mut p = redis::pipe();
            for _ in 0..64 {
                p.cmd("SET").arg(&member).arg(&bytes).ignore();
            }
            let _: Result<(), _> = h.runtime().block_on(p.query_async(&mut conn.clone()));
        }
    };
    let messages = reservation_testkit::while_running(writer, || {
        let hold = reservation_store::HoldId::new("h").expect("hold");
        let ttl = reservation_store::Ttl::from_millis(60_000).expect("ttl");
        let mut messages = Vec::new();
        for _ in 0..500 {
            if let Err(e) = h.runtime().block_on(store.reserve(&scope, &key, &owner("alice"), &hold, ttl)) {
                messages.push(error_chain(&e));
                if messages.len() == 10 {
                    break;
                }
            }
        }
        messages
    });
    assert!(!messages.is_empty(), "no operation gave up under a writer that never pauses");
    for message in &messages {
        assert!(message.contains("Redis: 3 attempts in a row met another client's write"), "{message}");
    }
}

#[test]
fn a_recording_that_panics_stops_the_fault_beside_it_and_fails_rather_than_hang() {
    // The fault loops until told to stop; the recording beside it panics (as a store that cannot
    // connect under the fault once made it): the panic must reach the test, the fault stopped.
    let (sender, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let fault = |stop: &AtomicBool| {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(1));
            }
        };
        let run = std::panic::catch_unwind(|| {
            reservation_testkit::while_running(fault, || -> u32 { panic!("the recording failed") })
        });
        let said = run.err().and_then(|p| p.downcast_ref::<&str>().map(|s| (*s).to_owned()));
        let _ = sender.send(said);
    });
    let said = ended.recv_timeout(Duration::from_secs(10)).expect("the fault never stopped: a hang");
    assert_eq!(said.as_deref(), Some("the recording failed"));
}
