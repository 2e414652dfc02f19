//! Storage failures: backends terminated mid-operation, connections cut before and after the
//! `COMMIT`, a statement timeout. Each is a `StorageError`, indeterminate exactly when the
//! operation may have taken effect, and the histories stay linearizable.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reservation_conformance::linearizability::{self, Faults, Return};
use reservation_conformance::{START, unique_namespace};
use reservation_postgres::{PostgresOptions, PostgresStore, Time};
use reservation_store::{
    AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, ReserveOutcome, Tenant, TenantId, Ttl,
};

use crate::{admin, harness_with};

fn scope(label: &str) -> ReservationScope {
    ReservationScope::new(
        reservation_store::AggregateType::new("user").expect("a valid type"),
        Tenant::Id(TenantId::new("acme").expect("a valid tenant")),
        unique_namespace(label),
    )
}

fn owner(id: &str) -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), id).expect("a valid owner")
}

#[test]
fn killed_backends_give_storage_errors_and_linearizable_histories() {
    let Some(h) = harness_with(PostgresOptions::default()) else { return };
    let app = h.options().application_name.clone();
    let stop = AtomicBool::new(false);
    let killed = AtomicU64::new(0);
    let (names, events) = std::thread::scope(|s| {
        s.spawn(|| {
            h.runtime().block_on(async {
                let admin = admin().await;
                let mut i = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(2 + i % 9));
                    i += 1;
                    let n = admin
                        .query_one(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND state <> 'idle'",
                            &[&app],
                        )
                        .await
                        .map_or(0, |r| r.get::<_, i64>(0));
                    killed.fetch_add(n.unsigned_abs(), Ordering::SeqCst);
                }
            });
        });
        let recorded = linearizability::record(&h, 8, 4_000, 0x0bad_c0de);
        stop.store(true, Ordering::SeqCst);
        recorded
    });
    let errors: Vec<_> = events.iter().filter(|e| matches!(e.ret, Return::Storage { .. })).collect();
    let indeterminate = errors.iter().filter(|e| matches!(e.ret, Return::Storage { indeterminate: true, .. })).count();
    let others: Vec<_> = events.iter().filter(|e| matches!(e.ret, Return::Error(_))).collect();
    eprintln!(
        "{} operations, {} backends terminated, {} storage errors ({indeterminate} indeterminate)",
        events.len(),
        killed.load(Ordering::SeqCst),
        errors.len()
    );
    assert!(others.is_empty(), "a killed backend gave something else than a StorageError: {:?}", others[0]);
    assert!(killed.load(Ordering::SeqCst) > 0 && !errors.is_empty(), "no backend was killed mid-operation");
    assert!(linearizability::check_history(&names, &events).is_err(), "the history's storage errors went unseen");
    if let Err(failure) = linearizability::check_history_with(&names, &events, Faults::Tolerated) {
        panic!("{failure}");
    }
}

/// The pattern that cuts the connection, and whether its chunk is forwarded first.
type Trigger = Arc<Mutex<Option<(&'static [u8], bool)>>>;

/// A TCP proxy to the test server that, once armed with a pattern, forwards the client's bytes
/// up to and including the first chunk that contains it (or, with `forward` false, excluding
/// it), then cuts both connections without relaying any answer.
struct Cutter {
    port: u16,
    armed: Trigger,
    cut: Arc<AtomicBool>,
}

impl Cutter {
    fn start() -> Cutter {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = listener.local_addr().expect("bound").port();
        let armed: Trigger = Arc::default();
        let cut = Arc::new(AtomicBool::new(false));
        let (a, c) = (armed.clone(), cut.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(server) = TcpStream::connect("127.0.0.1:5432") else { continue };
                let (mut c_read, mut s_write) =
                    (client.try_clone().expect("clone"), server.try_clone().expect("clone"));
                let (mut s_read, mut c_write) = (server, client);
                let (armed, cut) = (a.clone(), c.clone());
                let (c_to_close, s_to_close) =
                    (c_write.try_clone().expect("clone"), s_read.try_clone().expect("clone"));
                let muted = Arc::new(AtomicBool::new(false));
                let mute = muted.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = c_read.read(&mut buf) {
                        let chunk = &buf[..n];
                        let trigger = *armed.lock().expect("not poisoned");
                        if let Some((pattern, forward)) = trigger
                            && chunk.windows(pattern.len()).any(|w| w == pattern)
                        {
                            // No answer reaches the client from now on.
                            mute.store(true, Ordering::SeqCst);
                            if forward {
                                let _ = s_write.write_all(chunk);
                                // Let the server read the bytes before its connection closes.
                                std::thread::sleep(Duration::from_millis(100));
                            }
                            *armed.lock().expect("not poisoned") = None;
                            cut.store(true, Ordering::SeqCst);
                            let _ = c_to_close.shutdown(Shutdown::Both);
                            let _ = s_to_close.shutdown(Shutdown::Both);
                            return;
                        }
                        if s_write.write_all(chunk).is_err() {
                            return;
                        }
                    }
                });
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(n @ 1..) = s_read.read(&mut buf) {
                        if muted.load(Ordering::SeqCst) || c_write.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Cutter { port, armed, cut }
    }

    fn arm(&self, pattern: &'static [u8], forward: bool) {
        self.cut.store(false, Ordering::SeqCst);
        *self.armed.lock().expect("not poisoned") = Some((pattern, forward));
    }
}

/// Cuts the connection when the client sends `pattern` (forwarding it or not) during a first
/// reserve of a free key; returns the error and whether the reservation exists afterwards.
fn cut_reserve(label: &str, pattern: &'static [u8], forward: bool) -> Option<(reservation_store::StoreError, bool)> {
    let h = harness_with(PostgresOptions::default())?;
    let cutter = Cutter::start();
    let url = format!("postgres://postgres@127.0.0.1:{}/test", cutter.port);
    let clock = ManualClock::new(START);
    let through = h
        .runtime()
        .block_on(PostgresStore::connect(&url, Time::Local(clock.clone()), h.options().clone().with_max_connections(1)))
        .expect("connected through the proxy");
    let (scope, key, alice, hold) =
        (scope(label), Key::new("k").expect("key"), owner("alice"), HoldId::new("h").expect("hold"));
    let ttl = Ttl::from_millis(60_000).expect("non-zero");
    // Prepare the statements first, so that the cut operation sends only its own messages.
    let warm = Key::new("warm").expect("key");
    h.runtime()
        .block_on(through.reserve(&scope, &warm, &alice, &hold, ttl))
        .expect("a first reserve through the proxy");
    cutter.arm(pattern, forward);
    let error = h
        .runtime()
        .block_on(through.reserve(&scope, &key, &alice, &hold, ttl))
        .expect_err("the cut connection answered");
    assert!(cutter.cut.load(Ordering::SeqCst), "the proxy never saw {:?}", String::from_utf8_lossy(pattern));
    let direct = h.store_with(Time::Local(clock));
    let exists = h.runtime().block_on(direct.lookup(&scope, &key)).expect("looked up directly").is_some();
    Some((error, exists))
}

#[test]
fn a_connection_cut_before_the_commit_is_determinate_and_changed_nothing() {
    let Some((error, exists)) = cut_reserve("cut-begin", b"BEGIN", false) else { return };
    assert!(!error.is_indeterminate(), "{error}");
    assert!(error.to_string().contains("storage failure: PostgreSQL"), "{error}");
    assert!(!exists, "a determinate error, yet the reservation was made");
}

#[test]
fn a_connection_cut_after_the_commit_was_sent_is_indeterminate() {
    // The COMMIT reaches the server, which commits; its answer never comes back.
    let Some((error, exists)) = cut_reserve("cut-commit", b"COMMIT", true) else { return };
    assert!(error.is_indeterminate(), "{error}");
    assert!(error.to_string().contains("may have taken effect"), "{error}");
    assert!(exists, "the server got the COMMIT, so the reservation was made");
    // The COMMIT never reaches the server: the outcome is still unknown to the caller.
    let Some((error, exists)) = cut_reserve("cut-commit-lost", b"COMMIT", false) else { return };
    assert!(error.is_indeterminate(), "{error}");
    assert!(!exists, "the COMMIT never reached the server, yet the reservation was made");
}

#[test]
fn a_statement_timeout_is_a_determinate_storage_error_that_changed_nothing() {
    let mut options = PostgresOptions::default();
    options.statement_timeout = Duration::from_millis(300);
    let Some(h) = harness_with(options) else { return };
    let store = h.store_with(Time::Local(ManualClock::new(START)));
    let (scope, key, alice, hold) =
        (scope("timeout"), Key::new("k").expect("key"), owner("alice"), HoldId::new("h").expect("hold"));
    let ttl = Ttl::from_millis(60_000).expect("non-zero");
    let blocker = h.runtime().block_on(async {
        let admin = admin().await;
        let table = format!("\"{}\".reservation", h.options().schema);
        admin.batch_execute(&format!("BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")).await.expect("locked");
        admin
    });
    let error =
        h.runtime().block_on(store.reserve(&scope, &key, &alice, &hold, ttl)).expect_err("a locked table answered");
    h.runtime().block_on(blocker.batch_execute("ROLLBACK")).expect("unlocked");
    assert!(!error.is_indeterminate(), "{error}");
    assert!(error.to_string().contains("statement timeout"), "{error}");
    assert_eq!(h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up"), None);
    let outcome =
        h.runtime().block_on(store.reserve(&scope, &key, &alice, &hold, ttl)).expect("reserved after the timeout");
    assert_eq!(outcome, ReserveOutcome::Taken);
}
