//! The driver's bounds against adapters that misbehave on purpose: one that stops reading, one
//! that stops answering, one that writes a line without end or a long one, each a prompt failure
//! that says what happened and quotes the adapter's text by a bounded prefix; and `close`, sent
//! when a store is dropped.

use std::time::{Duration, Instant};

use reservation_conformance::driver::{CommandHarness, MAX_LINE};
use reservation_conformance::services::service;
use reservation_conformance::{Harness, run_matching};
use reservation_store::error_chain;
use reservation_store::{
    AggregateRef, HoldId, Key, ManualClock, ReservationScope, ReservationStore, StorageError, StoreError, Ttl,
};

/// The answer to `hello` (id 0) of an adapter written in sh.
const HELLO: &str = r#"read l; echo '{"id":0,"ok":{"protocol":3,"durable":false,"power_cuts":null}}'"#;
/// The answer to the first `open` (id 1) of an adapter written in sh.
const OPENED: &str = r#"read l; echo '{"id":1,"ok":null}'"#;
/// In an adapter written in sh: the id of the request in `$l`, in `$id`.
const ID: &str = r#"id=${l#*\"id\":}; id=${id%%[!0-9]*}"#;

fn arguments() -> (ReservationScope, AggregateRef, Key, HoldId, Ttl) {
    (
        ReservationScope::parse("user", Some("acme"), "names").expect("valid"),
        AggregateRef::parse("user", Some("acme"), "a").expect("valid"),
        Key::new("k").expect("valid"),
        HoldId::new("h").expect("valid"),
        Ttl::from_millis(5).expect("valid"),
    )
}

fn clock() -> ManualClock {
    ManualClock::new(reservation_store::Instant::from_millis(5))
}

/// `f` on a thread of its own; its result, or a panic saying it did not return within `limit`
/// (the thread is left behind: the failure is the point).
fn within<T: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).unwrap_or_else(|_| panic!("{what} did not return within {limit:?}"))
}

/// One reserve on `store`: its storage error.
fn reserve_fails(h: &CommandHarness, store: &<CommandHarness as Harness>::Store) -> StorageError {
    let (scope, owner, key, hold, ttl) = arguments();
    match h.block_on(store.reserve(&scope, &key, &owner, &hold, ttl)) {
        Err(StoreError::Storage(e)) => e,
        other => panic!("the reserve did not fail: {other:?}"),
    }
}

#[test]
fn an_adapter_that_stops_reading_fails_within_the_timeout() {
    // It answers hello and open, then never reads again; the lookups below are 1.6 MB of
    // requests, far more than a pipe holds.
    let command = format!("{HELLO}; {OPENED}; exec sleep 60");
    let h = CommandHarness::start_with(&command, Duration::from_secs(2)).expect("the adapter starts");
    let started = Instant::now();
    let (answers, took) = within(Duration::from_secs(40), "the lookups", move || {
        let store = h.store(clock());
        let scope = ReservationScope::parse("user", Some("acme"), "names").expect("valid");
        let keys: Vec<Key> = (0..3_000).map(|i| Key::new(format!("{i:0>500}")).expect("valid")).collect();
        let asked: Vec<(&ReservationScope, &Key)> = keys.iter().map(|k| (&scope, k)).collect();
        let answers: Vec<String> = h
            .lookups(&store, &asked)
            .into_iter()
            .map(|a| error_chain(&a.expect_err("a lookup was answered")))
            .collect();
        // Later requests fail at once, for the same reason.
        let later = Instant::now();
        let again = error_chain(&reserve_fails(&h, &store));
        (answers, (later.elapsed(), again))
    });
    assert!(started.elapsed() < Duration::from_secs(20), "the lookups took {:?}", started.elapsed());
    // The write waited 2 s for room in the pipe, then gave up.
    let said = "the adapter stopped reading its standard input";
    assert!(answers.iter().all(|a| a.contains(said)), "{}", answers[0]);
    let (took, again) = took;
    assert!(took < Duration::from_secs(2) && again.contains(said), "{took:?}: {again}");
}

#[test]
fn an_adapter_that_stops_reading_holds_no_thread_beyond_the_timeout() {
    // Eight threads send 400 KB of lookups each at once, to an adapter that reads nothing after
    // open: one write waits for room, the others for it; none for longer than the timeout.
    let command = format!("{HELLO}; {OPENED}; exec sleep 60");
    let h = CommandHarness::start_with(&command, Duration::from_secs(2)).expect("the adapter starts");
    let started = Instant::now();
    let answers = within(Duration::from_secs(40), "the lookups", move || {
        let store = h.store(clock());
        let scope = ReservationScope::parse("user", Some("acme"), "names").expect("valid");
        let keys: Vec<Key> = (0..800).map(|i| Key::new(format!("{i:0>500}")).expect("valid")).collect();
        std::thread::scope(|s| {
            let threads: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        let asked: Vec<(&ReservationScope, &Key)> = keys.iter().map(|k| (&scope, k)).collect();
                        h.lookups(&store, &asked).into_iter().filter(Result::is_err).count()
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().expect("joined")).collect::<Vec<_>>()
        })
    });
    assert!(started.elapsed() < Duration::from_secs(20), "the lookups took {:?}", started.elapsed());
    assert_eq!(answers, [800; 8], "every lookup failed");
}

#[test]
fn an_adapter_that_stops_answering_fails_every_later_request_at_once() {
    // It answers hello and open, then reads every request and answers none.
    let command = format!("{HELLO}; {OPENED}; cat > /dev/null");
    let h = CommandHarness::start_with(&command, Duration::from_secs(2)).expect("the adapter starts");
    let (first, later, took) = within(Duration::from_secs(60), "the requests", move || {
        let store = h.store(clock());
        let first = reserve_fails(&h, &store);
        let started = Instant::now();
        let mut later = Vec::new();
        for _ in 0..10 {
            let other = h.store(clock());
            later.push(reserve_fails(&h, &other));
            later.push(reserve_fails(&h, &store));
        }
        (first, later, started.elapsed())
    });
    assert!(first.is_indeterminate() && error_chain(&first).contains("no answer within 2s"), "{}", error_chain(&first));
    // Twenty requests (and ten opens) cost nothing more, where each would wait its own 2 s.
    assert!(took < Duration::from_secs(5), "the later requests took {took:?}");
    for e in &later {
        let e = error_chain(&e);
        assert!(e.contains("stopped answering (request 2 had no answer within 2s)"), "{e}");
    }
}

/// The Python store's command, cut off after its first `answers` answers: it goes on reading and
/// running requests, but no answer reaches the driver. `None` without python3.
fn python_falling_silent(answers: usize) -> Option<String> {
    let present = std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    service("python3 (for the Python store behind the driver)", if present { Ok(()) } else { Err("not installed") })?;
    let store = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/python/store.py");
    Some(format!("python3 '{store}' | {{ sed -u {answers}q; cat > /dev/null; }}"))
}

#[test]
fn a_suite_run_ends_about_one_timeout_after_the_adapter_stops_answering() {
    // The suite from the differential check on: cut off in the differential (its thousand scripts
    // send some 30,000 requests), which has eight scripts' requests in flight at once; the
    // linearizability and fault checks follow it. The checks before it would only add answers
    // before the silence.
    let from_the_differential = ["differential_", "linearizability_", "p1_"];
    let Some(command) = python_falling_silent(5_000) else { return };
    // The timeout leaves room for python3 to start on a loaded machine.
    let h = CommandHarness::start_with(&command, Duration::from_secs(5)).expect("the adapter starts");
    // The differential's failure is the adapter's, not a script to keep for replay.
    let settings = CommandHarness::settings().with_regressions(None);
    let started = Instant::now();
    let report = within(Duration::from_secs(120), "the suite", move || {
        run_matching(&h, &settings, |name| from_the_differential.iter().any(|p| name.starts_with(p)))
    });
    let took = started.elapsed();
    assert!(!report.is_ok(), "{report}");
    let failures: Vec<String> = report.failures().map(ToString::to_string).collect();
    assert!(failures.iter().any(|f| f.contains("no answer within 5s")), "{report}");
    assert!(failures.iter().any(|f| f.contains("stopped answering")), "{report}");
    let failed = |name: &str| report.failures().any(|f| f.to_string().contains(&format!("check `{name}` failed")));
    assert!(failed("differential_against_the_specification") && failed("linearizability_under_threads"), "{report}");
    eprintln!("the suite ended {took:?} after it started, with {} failures", failures.len());
}

#[test]
fn a_hello_never_answered_is_a_failure_to_start_not_an_indeterminate_operation() {
    let error = CommandHarness::start_with("cat > /dev/null", Duration::from_secs(1)).err().expect("refused");
    assert!(!error.is_indeterminate(), "{}", error_chain(&error));
    let text = error_chain(&error);
    assert!(text.starts_with("the adapter did not start: "), "{text}");
    assert!(text.contains("\"op\":\"hello\"") && text.contains("no answer within 1s"), "{text}");
    assert!(!text.contains("may have taken effect"), "{text}");
}

/// Asserts that `message` quotes the adapter's text of `len` bytes by a bounded prefix.
fn quoted_by_a_prefix(message: &str, len: usize) {
    assert!(message.contains(&format!("… ({len} bytes)")), "{}", &message[..message.len().min(2_000)]);
    assert!(message.len() < 8_000, "a message of {} bytes: {}…", message.len(), &message[..2_000]);
}

#[test]
fn a_long_line_is_quoted_by_its_first_bytes_in_every_later_failure() {
    // After hello and open, a line of 200,000 bytes that is not JSON, and as long a line on
    // standard error.
    let command = format!(
        "{HELLO}; {OPENED}; read l; head -c 200000 /dev/zero | tr '\\0' x >&2; echo >&2; \
         head -c 200000 /dev/zero | tr '\\0' y; echo; cat > /dev/null"
    );
    let h = CommandHarness::start_with(&command, Duration::from_secs(5)).expect("the adapter starts");
    let store = h.store(clock());
    let first = error_chain(&reserve_fails(&h, &store));
    assert!(first.contains("not JSON"), "{}", &first[..first.len().min(2_000)]);
    quoted_by_a_prefix(&first, 200_000);
    assert!(first.contains(&format!("\"{}… (200000 bytes)\"", "y".repeat(200))), "{first}");
    // The standard error's line, quoted too, once its own thread has read it; a later request
    // fails at once, quoting the line of standard output again by its prefix.
    let stderr_line = format!("its standard error ends:\n  {}… (200000 bytes)", "x".repeat(200));
    let mut later = String::new();
    for _ in 0..100 {
        later = error_chain(&reserve_fails(&h, &store));
        if later.contains(&stderr_line) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    quoted_by_a_prefix(&later, 200_000);
    assert!(later.contains(&stderr_line) && later.contains("not JSON"), "{later}");
}

#[test]
fn a_long_error_message_is_quoted_by_its_first_bytes() {
    // Every request after open answered with a storage error whose message is 300,000 bytes.
    let error =
        r#"{"kind":"StorageError","indeterminate":false,"message":"'$(head -c 300000 /dev/zero | tr '\0' m)'"}"#;
    let command = format!("{HELLO}; {OPENED}; while read l; do {ID}; echo '{{\"id\":'$id',\"error\":{error}}}'; done");
    let h = CommandHarness::start_with(&command, Duration::from_secs(5)).expect("the adapter starts");
    let store = h.store(clock());
    let e = reserve_fails(&h, &store);
    assert!(!e.is_indeterminate(), "{}", error_chain(&e));
    quoted_by_a_prefix(&error_chain(&e), 300_000);
}

#[test]
fn a_line_without_end_breaks_the_adapter_after_the_line_bound() {
    // After hello and open, 3 MB without a newline.
    let command = format!("{HELLO}; {OPENED}; read l; head -c 3000000 /dev/zero | tr '\\0' x; cat > /dev/null");
    let h = CommandHarness::start_with(&command, Duration::from_secs(5)).expect("the adapter starts");
    let e = within(Duration::from_secs(60), "the reserve", move || {
        let store = h.store(clock());
        reserve_fails(&h, &store)
    });
    let e = error_chain(&e);
    assert!(e.contains(&format!("a line longer than {MAX_LINE} bytes")), "{}", &e[..e.len().min(2_000)]);
    quoted_by_a_prefix(&e, MAX_LINE);
}

#[test]
fn dropping_a_store_closes_it_in_the_adapter() {
    let dir = std::env::temp_dir().join(format!("reservation-close-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let sent = dir.join("requests");
    // Answers hello, then every request with ok null.
    let command = format!(
        "tee '{}' | {{ {HELLO}; while read l; do {ID}; echo '{{\"id\":'$id',\"ok\":null}}'; done; }}",
        sent.display()
    );
    let h = CommandHarness::start_with(&command, Duration::from_secs(5)).expect("the adapter starts");
    let store = h.store(clock());
    let (scope, _, key, _, _) = arguments();
    assert!(matches!(h.block_on(store.lookup(&scope, &key)), Ok(None)));
    assert_eq!(h.requests(), 3, "hello, open, lookup");
    drop(store);
    assert_eq!(h.requests(), 4, "hello, open, lookup, close");
    drop(h);
    let requests = std::fs::read_to_string(&sent).expect("the requests");
    let last: serde_json::Value = serde_json::from_str(requests.lines().last().expect("a line")).expect("JSON");
    assert_eq!(last, serde_json::json!({"id": 3, "op": "close", "store": 0}), "{requests}");
    crate::schema::validate_lines(&sent, "request");
    std::fs::remove_dir_all(&dir).expect("removed");
}

/// Input whose first read fails with `kind`, then holds `data`.
struct FailsOnce {
    kind: Option<std::io::ErrorKind>,
    data: &'static [u8],
}

impl std::io::Read for FailsOnce {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if let Some(kind) = self.kind.take() {
            return Err(kind.into());
        }
        let n = buf.len().min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// `serve` reads its input again after a read a signal interrupted, and ends with any other
/// error of its input rather than taking it for a line.
#[test]
fn serve_retries_an_interrupted_read_and_returns_any_other_error() {
    use reservation_conformance::driver::serve;
    let hello: &[u8] = b"{\"id\":0,\"op\":\"hello\",\"protocol\":3}\n";
    let mut out = Vec::new();
    let input = FailsOnce { kind: Some(std::io::ErrorKind::Interrupted), data: hello };
    serve(input, &mut out).expect("an interrupted read is tried again");
    assert!(String::from_utf8_lossy(&out).contains("\"protocol\":3"), "{}", String::from_utf8_lossy(&out));
    let input = FailsOnce { kind: Some(std::io::ErrorKind::BrokenPipe), data: hello };
    let failed = serve(input, Vec::new()).err().map(|e| e.kind());
    assert_eq!(failed, Some(std::io::ErrorKind::BrokenPipe));
}
