//! The driver: the Python store of `adapters/python` through it (its planted bugs each caught,
//! with the rule named), and adapters that hang, die, write what is not JSON or answer an id
//! nobody asked, each a clear failure rather than a hang.

use std::time::Duration;

use reservation_conformance::driver::CommandHarness;
use reservation_conformance::services::service;
use reservation_conformance::{CheckResult, run_matching};

const PYTHON_STORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/python/store.py");

/// The Python store's harness, with `bug` planted (`""`: none); `None` without python3.
fn python(bug: &str) -> Option<CommandHarness> {
    let present = std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    let python = service(
        "python3 (for the Python store behind the driver)",
        if present { Ok(()) } else { Err("not installed") },
    );
    python?;
    let command = format!("RESERVATION_PY_BUG={bug} python3 {PYTHON_STORE}");
    Some(CommandHarness::start(&command).expect("the Python adapter starts"))
}

/// Runs the checks whose names start with `check` against the Python store with `bug`, and
/// asserts that one fails saying `says`.
fn caught(bug: &str, check: &str, says: &str) {
    let Some(h) = python(bug) else { return };
    let report = run_matching(&h, |name| name.starts_with(check));
    assert!(!report.checks.is_empty(), "no check is named {check}…");
    let failures: Vec<String> = report
        .checks
        .iter()
        .filter_map(|(_, r, _)| match r {
            CheckResult::Failed(f) => Some(f.to_string()),
            _ => None,
        })
        .collect();
    assert!(failures.iter().any(|f| f.contains(says)), "{bug}: {check} did not fail saying {says:?}:\n{report}");
}

#[test]
fn python_store_passes_the_whole_suite_through_the_driver_and_every_message_is_valid() {
    if python("").is_none() {
        return;
    }
    // Every line each way, copied by tee, then validated against the protocol's schema.
    let dir = std::env::temp_dir().join(format!("reservation-driver-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let (sent, answered) = (dir.join("requests"), dir.join("answers"));
    let command = format!("tee '{}' | python3 {PYTHON_STORE} | tee '{}'", sent.display(), answered.display());
    let h = CommandHarness::start(&command).expect("the Python adapter starts");
    let report = run_matching(&h, |_| true);
    drop(h);
    assert!(report.is_ok(), "{report}");
    let passed = report.checks.iter().filter(|(_, r, _)| *r == CheckResult::Passed).count();
    assert!(passed > 45, "{report}");
    let requests = crate::schema::validate_lines(&sent, "request");
    let answers = crate::schema::validate_lines(&answered, "answer");
    assert_eq!(requests, answers, "every request is answered once");
    assert!(requests > 100_000, "{requests} requests");
    eprintln!("{requests} requests and answers, each valid against the schema");
    std::fs::remove_dir_all(&dir).expect("removed");
}

#[test]
fn python_bug_expiry_boundary_is_caught_by_d1() {
    caught("expiry-boundary", "d1_", "rule D1 broken");
}

#[test]
fn python_bug_join_expiry_is_caught_by_r3() {
    caught("join-expiry", "r3_", "rule R3 broken");
}

#[test]
fn python_bug_signed_version_order_is_caught_by_d8() {
    caught("version-order", "d8_", "rule D8 broken");
}

#[test]
fn python_bug_release_version_is_caught_by_l5() {
    caught("release-version", "l5_", "rule L5 broken");
}

#[test]
fn python_bug_hold_set_is_caught_by_a3() {
    caught("hold-set", "a3_", "rule A3 broken");
}

#[test]
fn python_bug_owner_comparison_is_caught_by_d5() {
    caught("owner-compare", "d5_owner_differing_only_in_tenant", "rule D5 broken");
}

#[test]
fn python_bug_scope_isolation_is_caught_by_s1() {
    caught("scope-isolation", "s1_scope_tenants", "rule S1 broken");
}

#[test]
fn python_bug_atomicity_is_caught_by_the_linearizability_check() {
    caught("atomicity", "linearizability_under_threads", "atomicity (H1) broken");
}

/// `command` as an adapter must fail to start, within the driver's bounded wait, saying one of
/// `says` (`|`-separated).
fn refused(command: &str, says: &str) {
    let started = std::time::Instant::now();
    let error = match CommandHarness::start_with(command, Duration::from_secs(2)) {
        Ok(_) => panic!("the adapter `{command}` was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(started.elapsed() < Duration::from_secs(10), "{command}: the driver waited {:?}", started.elapsed());
    assert!(says.split('|').any(|s| error.contains(s)), "{command}: {error}");
    assert!(error.contains("\"op\":\"hello\""), "{command}: the failure does not name the request: {error}");
}

#[test]
fn an_adapter_that_hangs_is_a_failure_after_the_timeout() {
    refused("echo waiting >&2; sleep 30", "no answer within 2s");
}

#[test]
fn an_adapter_that_dies_is_a_failure_quoting_its_stderr() {
    // Dead before the request is written, or after: either way a failure that says so.
    refused("echo 'it broke here' >&2; exit 3", "closed its standard output|writing to the adapter failed");
    let error = CommandHarness::start_with("echo 'it broke here' >&2; sleep 0.2; exit 3", Duration::from_secs(2))
        .err()
        .expect("refused");
    // Quoted from its standard error, not only from the command line the message names.
    assert!(error.to_string().contains("its standard error ends:\n  it broke here"), "{error}");
}

#[test]
fn an_adapter_that_writes_what_is_not_json_is_a_failure() {
    refused("read line; echo 'hello there'; sleep 5", "not JSON");
}

#[test]
fn a_failure_quotes_the_last_twenty_lines_of_the_adapters_stderr() {
    let error = CommandHarness::start_with(
        "for i in $(seq 1 25); do echo \"line $i\" >&2; done; sleep 0.3; exit 3",
        Duration::from_secs(2),
    )
    .err()
    .expect("refused")
    .to_string();
    let tail = error.split("its standard error ends:\n").nth(1).unwrap_or_else(|| panic!("no stderr quoted: {error}"));
    let quoted: Vec<&str> = tail.lines().map(str::trim).collect();
    let expected: Vec<String> = (6..=25).map(|i| format!("line {i}")).collect();
    assert_eq!(quoted, expected, "{error}");
}

/// An adapter (in Python) that answers `hello` (declaring `durable`), `open` and `reopen`, and
/// every other request with `answer` (the answer's fields but the id, as Python); after its input ends it lingers for 30 s, so that only the
/// driver's kill ends it early. Its process id is in the returned file.
fn scripted(durable: bool, answer: &str) -> Option<(CommandHarness, std::path::PathBuf)> {
    let present = std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    service("python3 (for a scripted adapter)", if present { Ok(()) } else { Err("not installed") })?;
    let durable = if durable { "True" } else { "False" };
    let script = format!(
        "import json,sys,time\nfor l in sys.stdin:\n r=json.loads(l)\n a={{'id':r['id'],'ok':{{'protocol':1,'durable':{durable}}}}} if r['op']=='hello' else {{'id':r['id'],'ok':None}} if r['op'] in ('open','reopen') else {{'id':r['id'],{answer}}}\n print(json.dumps(a),flush=True)\ntime.sleep(30)\n"
    );
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("reservation-scripted-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let (path, pid) = (dir.join("adapter.py"), dir.join("pid"));
    std::fs::write(&path, script).expect("written");
    let command = format!("echo $$ > '{}'; exec python3 '{}'", pid.display(), path.display());
    Some((CommandHarness::start(&command).expect("the adapter starts"), pid))
}

fn answering(error: &str) -> Option<CommandHarness> {
    scripted(false, &format!("'error':{error}")).map(|(h, _)| h)
}

fn alive(pid_file: &std::path::Path) -> bool {
    let pid = std::fs::read_to_string(pid_file).expect("the pid").trim().to_owned();
    std::process::Command::new("kill").args(["-0", &pid]).output().is_ok_and(|o| o.status.success())
}

#[test]
fn dropping_the_harness_ends_an_adapter_that_outlives_its_input() {
    let Some((h, pid)) = scripted(false, "'ok':None") else { return };
    assert!(alive(&pid));
    drop(h);
    // Its input closed, it lingers; the driver kills it and reaps it.
    assert!(!alive(&pid), "the adapter still runs after the harness was dropped");
}

#[test]
fn a_durable_adapter_is_reopened_and_counted_requests_are_exact() {
    use reservation_conformance::Harness;
    use reservation_store::{ManualClock, ReservationStore, StoreError};
    let error = "'error':{'kind':'StorageError','indeterminate':False,'message':'scripted'}";
    let Some((h, _)) = scripted(true, error) else { return };
    assert!(h.hello().durable && h.capabilities().durable);
    assert_eq!(h.requests(), 1, "hello");
    let clock = ManualClock::new(reservation_store::Instant::from_millis(5));
    let store = h.store(clock.clone());
    assert_eq!(h.requests(), 2, "hello, open");
    let reopened = h.reopen(store, clock).expect("a durable adapter's store reopens");
    // The store reopened from is closed once the reopen is answered.
    assert_eq!(h.requests(), 4, "hello, open, reopen, close");
    let (scope, _, key, _, _) = arguments();
    // The reopened store is open: its lookup reaches the adapter and gets its answer.
    match h.block_on(reopened.lookup(&scope, &key)) {
        Err(StoreError::Storage(e)) => assert!(e.to_string().contains("scripted") && !e.is_indeterminate(), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(h.requests(), 5);
    let Some((plain, _)) = scripted(false, error) else { return };
    assert!(!plain.capabilities().durable);
    assert!(
        plain.reopen(plain.store(ManualClock::new(reservation_store::Instant::ZERO)), ManualClock::default()).is_none()
    );
}

/// A valid scope, owner, key, hold and TTL for requests to a scripted adapter.
fn arguments() -> (
    reservation_store::ReservationScope,
    reservation_store::AggregateRef,
    reservation_store::Key,
    reservation_store::HoldId,
    reservation_store::Ttl,
) {
    (
        reservation_store::ReservationScope::parse("user", Some("acme"), "names").expect("valid"),
        reservation_store::AggregateRef::parse("user", Some("acme"), "a").expect("valid"),
        reservation_store::Key::new("k").expect("valid"),
        reservation_store::HoldId::new("h").expect("valid"),
        reservation_store::Ttl::from_millis(5).expect("valid"),
    )
}

#[test]
fn an_outcome_its_operation_cannot_have_is_the_adapters_failure() {
    use reservation_conformance::Harness;
    use reservation_store::{ManualClock, ReservationStore, StoreError};
    let Some((h, _)) = scripted(false, "'ok':'Kept'") else { return };
    let store = h.store(ManualClock::new(reservation_store::Instant::from_millis(5)));
    let (scope, owner, key, hold, ttl) = arguments();
    // Kept is a release's outcome, never a reserve's.
    match h.block_on(store.reserve(&scope, &key, &owner, &hold, ttl)) {
        Err(StoreError::Storage(e)) => assert!(e.to_string().contains("is not one reserve can answer"), "{e}"),
        other => panic!("{other:?}"),
    }
    let released = h.block_on(store.release(&scope, &key, &owner, reservation_store::ReleaseVersion::Any));
    assert!(matches!(released, Ok(reservation_store::ReleaseOutcome::Kept)), "{released:?}");
}

#[test]
fn the_driver_runs_a_thousand_differential_scripts_eight_at_a_time() {
    let Some(h) = answering("{}") else { return };
    let settings = reservation_conformance::Harness::settings(&h);
    assert_eq!((settings.cases, settings.differential_threads), (1_000, 8));
}

#[test]
fn an_invalid_argument_answer_becomes_the_error_of_its_name() {
    use reservation_conformance::Harness;
    use reservation_store::{InvalidArgument, ManualClock, ReservationStore, StoreError};
    let Some(h) = answering("{'kind':'InvalidArgument','name':'TenantMismatch','message':''}") else { return };
    let store = h.store(ManualClock::new(reservation_store::Instant::from_millis(5)));
    let (scope, owner, key, hold, ttl) = arguments();
    let got = h.block_on(store.reserve(&scope, &key, &owner, &hold, ttl));
    assert!(matches!(got, Err(StoreError::Invalid(InvalidArgument::TenantMismatch))), "{got:?}");
    // A name SPEC.md does not have is the adapter's failure, not an invalid argument.
    let Some(h) = answering("{'kind':'InvalidArgument','name':'TenantNotAdmitted','message':''}") else { return };
    let store = h.store(ManualClock::new(reservation_store::Instant::from_millis(5)));
    let got = h.block_on(store.reserve(&scope, &key, &owner, &hold, ttl));
    match got {
        Err(StoreError::Storage(e)) => {
            assert!(e.is_indeterminate() && e.to_string().contains("does not name"), "{e}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_adapter_that_answers_an_unknown_id_is_a_failure() {
    refused("read line; echo '{\"id\": 999, \"ok\": null}'; sleep 5", "answered id 999");
}

/// The Go store of `adapters/go`, built into a temporary directory; `None` without `go`.
fn go_store() -> Option<std::path::PathBuf> {
    let present = std::process::Command::new("go").arg("version").output().is_ok_and(|o| o.status.success());
    service("go (for the Go store behind the driver)", if present { Ok(()) } else { Err("not installed") })?;
    let dir = std::env::temp_dir().join(format!("reservation-go-{}", std::process::id()));
    let binary = dir.join("go-store");
    let source = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/go");
    let vet = std::process::Command::new("go").args(["vet", "."]).current_dir(source).output().expect("go vet runs");
    assert!(vet.status.success(), "go vet: {}", String::from_utf8_lossy(&vet.stderr));
    let built = std::process::Command::new("go")
        .args(["build", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(source)
        .output()
        .expect("go build runs");
    assert!(built.status.success(), "go build: {}", String::from_utf8_lossy(&built.stderr));
    Some(binary)
}

#[test]
fn go_store_passes_the_whole_suite_through_the_driver() {
    let Some(binary) = go_store() else { return };
    let h = CommandHarness::start(&format!("'{}'", binary.display())).expect("the Go adapter starts");
    let report = run_matching(&h, |_| true);
    drop(h);
    assert!(report.is_ok(), "{report}");
    assert!(report.checks.iter().filter(|(_, r, _)| *r == CheckResult::Passed).count() > 45, "{report}");
    let _ = std::fs::remove_dir_all(binary.parent().expect("a directory"));
}

#[test]
fn readme_quotes_the_go_adapter_whole() {
    let adapter = include_str!("../../../adapters/go/adapter.go");
    let readme = include_str!("../../../README.md");
    assert!(
        readme.contains(&format!("```go\n{adapter}```")),
        "README.md does not quote adapters/go/adapter.go as it is"
    );
    assert!(adapter.lines().count() <= 65, "the adapter is meant to be short");
}
