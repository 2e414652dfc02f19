//! The driver: the Python store of `adapters/python` through it (its planted bugs each caught,
//! with the rule named), and adapters that hang, die, write what is not JSON or answer an id
//! nobody asked, each a clear failure rather than a hang.

use std::time::Duration;

use reservation_conformance::driver::CommandHarness;
use reservation_conformance::services::service;
use reservation_conformance::{CheckResult, Report, Settings, run_matching};
use reservation_store::error_chain;

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
    let report = run_matching(&h, &CommandHarness::settings(), |name| name.starts_with(check));
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
    // The sweep of invalid arguments sends, on purpose, requests the schema refuses (and a lone
    // surrogate, which is not even read as JSON here): it runs on its own below.
    // 300 differential scripts, not the driver's 1,000, as the program's test of `serve` runs:
    // with 1,000 they were half of the run's requests, and the check draws more until every
    // rule is reached.
    let report = run_matching(&h, &CommandHarness::settings().with_cases(300), |name| name != SWEEP);
    drop(h);
    assert!(report.is_ok(), "{report}");
    let passed = report.checks.iter().filter(|(_, r, _)| *r == CheckResult::Passed).count();
    assert!(passed > 45, "{report}");
    let requests = crate::schema::validate_lines(&sent, "driver_line");
    let answers = crate::schema::validate_lines(&answered, "adapter_line");
    assert_eq!(requests, answers, "every request and every clock question is answered once");
    let asked = std::fs::read_to_string(&answered)
        .expect("the answers")
        .lines()
        .filter(|l| l.starts_with("{\"clock\""))
        .count();
    assert!(asked > 0, "no clock question: d10 did not ask the store for its clock");
    let Some(h) = python("") else { return };
    let sweep = run_matching(&h, &CommandHarness::settings(), |name| name == SWEEP);
    assert!(sweep.is_ok() && sweep.checks.len() == 1, "{sweep}");
    assert!(requests > 60_000, "{requests} requests");
    eprintln!("{requests} requests and answers, each valid against the schema");
    std::fs::remove_dir_all(&dir).expect("removed");
}

#[test]
fn python_bug_expiry_boundary_is_caught_by_d1() {
    caught("expiry-boundary", "d1_", "rule R2 broken (in the check of D1)");
}

#[test]
fn python_bug_join_expiry_is_caught_by_r3() {
    caught("join-expiry", "r3_", "rule R3 broken");
}

#[test]
fn python_bug_signed_version_order_is_caught_by_d8() {
    caught("version-order", "d8_", "(in the check of D8)");
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
    caught("owner-compare", "d5_owner_differing_only_in_tenant", "(in the check of D5)");
}

#[test]
fn python_bug_scope_isolation_is_caught_by_s1() {
    caught("scope-isolation", "s1_scope_tenants", "rule S1 broken\n");
}

/// The first line of each failure of the checks whose names start with `check`, against the
/// Python store with `bug`; `None` without python3.
fn headlines(bug: &str, check: &str) -> Option<Vec<String>> {
    let h = python(bug)?;
    let report = run_matching(&h, &CommandHarness::settings(), |name| name.starts_with(check));
    eprintln!("--- {bug}, {check}…:\n{report}");
    Some(report.failures().map(|f| f.to_string().lines().next().unwrap_or_default().to_owned()).collect())
}

/// A release at ANY_VERSION taken as one at UNVERSIONED was headlined "rule S1 broken" by each
/// of three scope checks: the rule that decided their failing step is L4.
#[test]
fn python_bug_any_version_is_headlined_l4_in_the_scope_checks() {
    let Some(lines) = headlines("any-version", "s1_scope_") else { return };
    let expected: Vec<String> = ["aggregate_types", "tenants", "namespaces"]
        .iter()
        .map(|s| {
            format!("conformance check `s1_scope_{s}_are_independent` failed: rule L4 broken (in the check of S1)")
        })
        .collect();
    assert_eq!(lines, expected);
}

/// An expiry-boundary bug was headlined "rule D2 broken" by the TTL check: R2 decided the step.
#[test]
fn python_bug_expiry_boundary_is_headlined_r2_in_the_ttl_check() {
    let Some(lines) = headlines("expiry-boundary", "d2_") else { return };
    assert_eq!(lines, ["conformance check `d2_ttl_zero_is_invalid` failed: rule R2 broken (in the check of D2)"]);
}

/// A store that merges tenants was headlined "rule D6 broken" by the invalid-argument check: the
/// step that went wrong was a reserve of a key free in its own scope, answered as in the tenant it
/// was merged with (S1).
#[test]
fn python_bug_tenant_merge_is_headlined_by_its_step_in_the_invalid_argument_check() {
    let Some(lines) = headlines("tenant-merge", "d6_") else { return };
    assert_eq!(
        lines,
        [
            "conformance check `d6_invalid_arguments_are_typed_and_change_nothing` failed: rule S1 broken (in the check of D6)"
        ]
    );
}

/// The one-thread verdict of the linearizability check named D7 for a join that shortens the
/// expiry; it names the rule that decided the step one thread could not explain.
#[test]
fn python_bug_join_expiry_one_thread_verdict_names_the_join_rule() {
    let Some(lines) = headlines("join-expiry", "linearizability_") else { return };
    let [line] = lines.as_slice() else { panic!("{lines:?}") };
    assert!(
        line.starts_with("conformance check `linearizability_under_threads` failed: rule R")
            && line.contains("a single thread's operations already break the rule")
            && !line.contains("D7"),
        "{line}"
    );
}

/// Runs the whole suite against the adapter `command` (the Python store, made to break the
/// protocol midway), with a regression file of its own; asserts that the adapter's protocol
/// failure is reported once, by one check, that no failure blames a rule, and that no regression
/// seed was saved. `None` without python3.
fn protocol_broken_midway(command: &str, says: &str) -> Option<Report> {
    python("")?;
    let dir = std::env::temp_dir().join(format!("reservation-protocol-{}-{}", std::process::id(), says.len()));
    let _ = std::fs::remove_dir_all(&dir);
    let regressions: &'static str =
        Box::leak(dir.join("regressions.txt").to_string_lossy().into_owned().into_boxed_str());
    let settings = Settings::default().with_cases(200).with_differential_threads(4).with_regressions(Some(regressions));
    let h = CommandHarness::start(command).expect("the adapter starts");
    let report = run_matching(&h, &settings, |_| true);
    let text = report.to_string();
    let headlines: Vec<&str> = text.lines().filter(|l| l.starts_with("conformance check `")).collect();
    let broken: Vec<&&str> =
        headlines.iter().filter(|l| l.contains("failed: the adapter broke the protocol: ")).collect();
    assert_eq!(broken.len(), 1, "{text}");
    assert!(broken[0].contains(says), "{text}");
    assert!(!headlines.iter().any(|l| l.contains(" failed: rule ")), "{text}");
    let earlier =
        headlines.iter().filter(|l| l.contains("the adapter broke the protocol earlier (see check `")).count();
    assert!(earlier + 1 == headlines.len() && earlier > 10, "{text}");
    assert!(!std::path::Path::new(regressions).exists(), "a regression seed was saved:\n{text}");
    eprintln!("{text}");
    Some(report)
}

#[test]
fn an_adapter_that_writes_a_log_line_to_its_standard_output_midway_is_one_protocol_failure() {
    let log = "awk 'NR == 300 { print \"log: cache flushed\"; fflush() } { print; fflush() }'";
    protocol_broken_midway(&format!("python3 {PYTHON_STORE} | {log}"), "not JSON");
}

#[test]
fn an_adapter_that_exits_midway_is_one_protocol_failure() {
    // In front of the store, and in place of the shell (which would hold the output open): it
    // passes 300 answers on, then exits.
    let relay = "import os, subprocess, sys\n\
                 store = subprocess.Popen([sys.executable] + sys.argv[1:], stdout=subprocess.PIPE)\n\
                 for _, line in zip(range(300), store.stdout):\n    sys.stdout.buffer.write(line)\n    sys.stdout.buffer.flush()\n\
                 os._exit(0)\n";
    let dir = std::env::temp_dir().join(format!("reservation-relay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let path = dir.join("relay.py");
    std::fs::write(&path, relay).expect("written");
    protocol_broken_midway(&format!("exec python3 '{}' {PYTHON_STORE}", path.display()), "closed its standard output");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn python_bug_atomicity_is_caught_by_the_linearizability_check() {
    caught("atomicity", "linearizability_under_threads", "atomicity (H1) broken");
}

/// The store reads its clock (its latest instant, then the driver's reading) before it takes its
/// lock. Through the driver, d10's held reading is the store's own (the reserve says
/// `"now": "ask"`), so the check sees it every time; when the driver read the clock for the
/// store, the store read its latest instant after the lookup and d10 passed.
#[test]
fn python_bug_clock_before_lock_is_caught_by_d10() {
    use reservation_conformance::checks::d10;
    let Some(h) = python("clock-before-lock") else { return };
    let runs = 20;
    let caught = (0..runs)
        .filter(|_| {
            d10(&h, &CommandHarness::settings()).is_err_and(|f| f.rule == Some(reservation_store::rules::Rule::D10))
        })
        .count();
    eprintln!("clock-before-lock caught by d10 in {caught} of {runs} runs");
    assert_eq!(caught, runs, "d10 missed the clock read before the lock");
    let failure = d10(&h, &CommandHarness::settings()).expect_err("caught").to_string();
    assert!(failure.contains("rule D10 broken") && failure.contains("answered Joined"), "{failure}");
    // The same store, reading its clock inside its lock, passes.
    let Some(h) = python("") else { return };
    for _ in 0..3 {
        d10(&h, &CommandHarness::settings()).unwrap_or_else(|f| panic!("{f}"));
    }
}

/// A store that shows a pending reservation at its expiry instant answers d10's scenario in a way
/// no order explains; d10 replays the scenario one operation at a time first, and so names the
/// expiry boundary (D1), not the clock.
#[test]
fn python_bug_expiry_boundary_is_named_d1_by_d10() {
    let Some(h) = python("expiry-boundary") else { return };
    let failure = reservation_conformance::checks::d10(&h, &CommandHarness::settings())
        .expect_err("an expiry boundary bug passed d10");
    assert_eq!(failure.rule, Some(reservation_store::rules::Rule::D1), "{failure}");
    assert!(failure.to_string().contains("rule D1 broken"), "{failure}");
}

/// The sweep of invalid arguments, in every state.
const SWEEP: &str = "d6_every_invalid_argument_in_every_state_changes_nothing";

/// As [`caught`], with the sweep of invalid arguments: it fails saying each of `says` (the rule
/// and the field). (Every other check passes these bugs: the driver cannot send what they get
/// wrong without the sweep's raw requests.)
fn caught_by_the_sweep(bug: &str, says: &[&str]) {
    let Some(h) = python(bug) else { return };
    let report = run_matching(&h, &CommandHarness::settings(), |name| name == SWEEP);
    assert_eq!(report.checks.len(), 1, "{report}");
    let message = report.failures().next().map(ToString::to_string).unwrap_or_default();
    for text in says {
        assert!(message.contains(text), "{bug}: the failure does not say {text:?}:\n{message}");
    }
    eprintln!("--- {bug}:\n{message}");
}

#[test]
fn python_bug_ttl_zero_refused_only_where_a_pending_is_written_is_caught_by_the_sweep() {
    caught_by_the_sweep(
        "ttl-zero-only-on-pending",
        &[
            "rule D2 broken",
            "reserve with the TTL 0, on a key another owner holds pending, live",
            "this request breaks D2",
            // The transcript: the key's setup by another owner, then the request.
            "setup:\n      {\"hold\":\"attempt-1\",\"key\":\"c",
            "\"now\":1000000,\"op\":\"reserve\",\"owner\":{\"aggregate_type\":\"rc-user\",\"id\":\"bob\"",
            "\"ttl\":0}\n      answered Conflict",
        ],
    );
}

/// The Python store with `--durable`, with `bug` planted (`""`: none); `None` without python3.
fn python_durable(bug: &str) -> Option<CommandHarness> {
    python("")?;
    let command = format!("RESERVATION_PY_BUG={bug} python3 {PYTHON_STORE} --durable");
    Some(CommandHarness::start(&command).expect("the Python adapter starts"))
}

/// Runs the checks whose names start with `check` against `h`, and asserts that one fails
/// saying each of `says`.
fn caught_saying(h: Option<CommandHarness>, check: &str, says: &[&str]) {
    let Some(h) = h else { return };
    let report = run_matching(&h, &CommandHarness::settings(), |name| name.starts_with(check));
    assert!(!report.checks.is_empty(), "no check is named {check}…");
    let failures: Vec<String> = report.failures().map(ToString::to_string).collect();
    assert!(
        failures.iter().any(|f| says.iter().all(|s| f.contains(s))),
        "{check} did not fail saying {says:?}:\n{report}"
    );
}

#[test]
fn python_bug_arguments_checked_after_the_write_is_caught_by_the_sweep() {
    caught_by_the_sweep(
        "check-after-write",
        &[
            "rule D6 broken",
            "reserve with the hold id empty",
            "and then a lookup of the key returned",
            "lookup: expected free, actual a failure",
        ],
    );
}

#[test]
fn python_bug_empty_tenant_accepted_is_caught_by_the_sweep() {
    caught_by_the_sweep("skip-tenant-empty", &["rule D6 broken", "the scope's tenant id empty", "EmptyTenantId"]);
}

#[test]
fn python_bug_empty_aggregate_type_accepted_is_caught_by_the_sweep() {
    caught_by_the_sweep(
        "skip-type-empty",
        &["rule D6 broken", "the scope's aggregate type empty", "EmptyAggregateType"],
    );
}

#[test]
fn python_bug_empty_aggregate_id_accepted_is_caught_by_the_sweep() {
    caught_by_the_sweep("skip-aggregate-id-empty", &["rule D6 broken", "the owner's id empty", "EmptyAggregateId"]);
}

#[test]
fn python_bug_names_of_any_length_is_caught_by_the_sweep() {
    caught_by_the_sweep(
        "skip-name-length",
        &["rule D9 broken", "the scope's aggregate type one byte over its maximum (257 bytes)", "AggregateTypeTooLong"],
    );
}

#[test]
fn python_bug_lengths_in_characters_is_caught_by_the_sweep() {
    caught_by_the_sweep(
        "chars-not-bytes",
        &[
            "rule D9 broken",
            "the key over its maximum in two-byte characters (257 × \"é\", 514 bytes)",
            "KeyTooLong",
            // Long strings shortened in the transcript, the namespace whole.
            "the key is free; the request:\n      {\"hold\":\"attempt-2\",\"key\":\"éééééééé… (514 bytes)\"",
            "\"namespace\":\"arguments-free.",
        ],
    );
}

#[test]
fn python_bug_lone_surrogates_replaced_is_caught_by_the_sweep() {
    caught_by_the_sweep("surrogates-replaced", &["rule D9 broken", "the key not valid Unicode", "Unrepresentable"]);
}

#[test]
fn python_bug_fractional_numbers_taken_is_caught_by_the_sweep() {
    caught_by_the_sweep("lenient-numbers", &["rule D8 broken", "the instant (now) 1.5", "Unrepresentable"]);
}

#[test]
fn python_bug_any_given_to_confirm_is_caught_by_the_sweep() {
    caught_by_the_sweep("confirm-any", &["rule D4 broken", "confirm with the version \"ANY\"", "Unrepresentable"]);
}

#[test]
fn a_raw_request_reaches_the_adapter_as_written_and_its_error_comes_back_by_name() {
    use reservation_conformance::{Harness, RawRequest};
    use reservation_store::ManualClock;
    use serde_json::json;
    let Some(h) = python("") else { return };
    let store = h.store(ManualClock::new(reservation_store::Instant::from_millis(5)));
    let scope = json!({"aggregate_type": "user", "tenant": "acme", "namespace": "names"});
    let lookup = json!({"op": "lookup", "now": 5, "scope": scope, "key": "k"});
    let requests = [
        RawRequest::with_raw(lookup.clone(), "/key", "\"\\ud800\""),
        RawRequest::new(json!({"op": "lookup", "now": 5, "scope": scope, "key": ""})),
        RawRequest::with_raw(lookup.clone(), "/now", "18446744073709551616"),
        RawRequest::new(lookup),
    ];
    assert!(requests[0].text().contains(r#""key":"\ud800""#), "{}", requests[0].text());
    assert!(requests[0].value().is_none(), "serde_json reads no lone surrogate");
    // A field the request does not have is added.
    assert_eq!(RawRequest::with_raw(json!({"op": "lookup"}), "/now", "-1").text(), r#"{"now":-1,"op":"lookup"}"#);
    // Through a borrowed harness, as a test binary that keeps its harness in a static does.
    let answers = <&CommandHarness as Harness>::send_raw(&&h, &store, &requests).expect("the driver sends them");
    let names: Vec<Option<String>> = answers
        .iter()
        .map(|a| match a {
            Ok(Err(error)) => error["name"].as_str().map(str::to_owned),
            Ok(Ok(_)) => None,
            Err(e) => panic!("{e}"),
        })
        .collect();
    assert_eq!(names, [Some("Unrepresentable".into()), Some("EmptyKey".into()), Some("Unrepresentable".into()), None]);
    assert!(matches!(&answers[3], Ok(Ok(serde_json::Value::Null))), "{answers:?}");
    // The typed harnesses send none.
    let memory = reservation_conformance::MemoryHarness;
    let typed = memory.store(ManualClock::default());
    assert!(memory.send_raw(&typed, &[]).is_none());
}

#[test]
fn python_bug_extra_fields_is_caught_by_d11() {
    let says = ["rule D11 broken", "a confirmed reservation (D11) has a field `expires_at`"];
    caught_saying(python("extra-fields"), "d11_", &says);
}

#[test]
fn python_bug_utf16_hold_order_is_caught_by_d11() {
    let says = ["rule D11 broken", "`holds` are not in ascending order of their UTF-8 bytes"];
    caught_saying(python("utf16-hold-order"), "d11_", &says);
}

#[test]
fn python_bug_clock_back_on_reopen_is_caught_by_d10_across_a_restart() {
    let says = ["rule D10 broken", "the clock was set back", "the specification says free"];
    caught_saying(python_durable("clock-back-on-reopen"), "d10_the_clock_never_goes_back_across_a_restart", &says);
}

#[test]
fn python_store_with_durable_passes_every_check_that_reopens() {
    let Some(h) = python_durable("") else { return };
    assert!(h.hello().durable);
    let report = run_matching(&h, &CommandHarness::settings(), |name| {
        name.starts_with("p1_") || name.starts_with("d10_") || name.starts_with("sweeper")
    });
    assert_eq!(report.checks.len(), 8, "{report}");
    assert!(report.to_string().contains("checked only through the harness's reopen"), "{report}");
    // The driver has no way yet to tell an adapter where its storage must live: no power cuts.
    let power_cuts_skipped = |name: &str, r: &CheckResult| {
        name == "p1_power_cuts_take_back_nothing_the_store_promised" && matches!(r, CheckResult::Skipped(_))
    };
    assert!(report.checks.iter().all(|(n, r, _)| *r == CheckResult::Passed || power_cuts_skipped(n, r)), "{report}");
}

/// `command` as an adapter must fail to start, within the driver's bounded wait, saying one of
/// `says` (`|`-separated).
fn refused(command: &str, says: &str) {
    let started = std::time::Instant::now();
    let error = match CommandHarness::start_with(command, Duration::from_secs(2)) {
        Ok(_) => panic!("the adapter `{command}` was accepted"),
        Err(e) => error_chain(&e),
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
    assert!(error_chain(&error).contains("its standard error ends:\n  it broke here"), "{}", error_chain(&error));
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
    .map(|e| error_chain(&e))
    .expect("refused");
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
        "import json,sys,time\nfor l in sys.stdin:\n r=json.loads(l)\n a={{'id':r['id'],'ok':{{'protocol':3,'durable':{durable},'power_cuts':None}}}} if r['op']=='hello' else {{'id':r['id'],'ok':None}} if r['op'] in ('open','reopen') else {{'id':r['id'],{answer}}}\n print(json.dumps(a),flush=True)\ntime.sleep(30)\n"
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
        Err(StoreError::Storage(e)) => assert!(error_chain(&e).contains("scripted") && !e.is_indeterminate(), "{e}"),
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
        Err(StoreError::Storage(e)) => assert!(error_chain(&e).contains("is not one reserve can answer"), "{e}"),
        other => panic!("{other:?}"),
    }
    // The adapter broke the protocol: nothing more is sent to it, and a later request fails at
    // once, saying why (PROTOCOL.md).
    let released = h.block_on(store.release(&scope, &key, &owner, reservation_store::ReleaseVersion::Any));
    match released {
        Err(StoreError::Storage(e)) => assert!(error_chain(&e).contains("is not one reserve can answer"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(h.broken().is_some_and(|why| why.contains("is not one reserve can answer")));
}

#[test]
fn the_driver_runs_a_thousand_differential_scripts_eight_at_a_time() {
    let settings = CommandHarness::settings();
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
            assert!(e.is_indeterminate() && error_chain(&e).contains("does not name"), "{}", error_chain(&e));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_hello_answer_with_a_field_missing_or_unknown_is_refused() {
    refused("read line; echo '{\"id\":0,\"ok\":{\"protocol\":3}}'; sleep 5", "has no field `durable`");
    refused(
        "read line; echo '{\"id\":0,\"ok\":{\"protocol\":3,\"durable\":false,\"power_cuts\":null,\"version\":2}}'; sleep 5",
        "has a field `version`",
    );
    refused(
        "read line; echo '{\"id\":0,\"ok\":{\"protocol\":3,\"durable\":\"no\",\"power_cuts\":null}}'; sleep 5",
        "`durable` is not a boolean",
    );
}

#[test]
fn an_answer_or_error_with_a_field_missing_or_unknown_is_the_adapters_failure() {
    use reservation_conformance::Harness;
    use reservation_store::{ManualClock, ReservationStore, StoreError};
    let (scope, owner, key, hold, ttl) = arguments();
    let cases = [
        ("'ok':'Taken','extra':1", "the answer has a field `extra`"),
        ("'error':{'kind':'StorageError','message':'lost'}", "has no field `indeterminate`"),
        ("'error':{'kind':'StorageError','indeterminate':'yes','message':'lost'}", "`indeterminate` is not a boolean"),
        ("'error':{'kind':'InvalidArgument','name':'TenantMismatch'}", "has no field `message`"),
        ("'error':{'kind':'InvalidArgument','name':'TenantMismatch','message':'','rule':'D6'}", "has a field `rule`"),
    ];
    for (answer, says) in cases {
        let Some((h, _)) = scripted(false, answer) else { return };
        let store = h.store(ManualClock::new(reservation_store::Instant::from_millis(5)));
        match h.block_on(store.reserve(&scope, &key, &owner, &hold, ttl)) {
            Err(StoreError::Storage(e)) => {
                assert!(e.is_indeterminate() && error_chain(&e).contains(says), "{answer}: {e}")
            }
            other => panic!("{answer}: {other:?}"),
        }
    }
}

#[test]
fn an_open_answered_with_anything_but_null_is_the_adapters_failure() {
    use reservation_conformance::Harness;
    use reservation_store::{ManualClock, ReservationStore, StoreError};
    let adapter = "read l; echo '{\"id\":0,\"ok\":{\"protocol\":3,\"durable\":false,\"power_cuts\":null}}'; read l; echo '{\"id\":1,\"ok\":true}'; sleep 5";
    let h = CommandHarness::start_with(adapter, Duration::from_secs(2)).expect("the adapter starts");
    let store = h.store(ManualClock::new(reservation_store::Instant::from_millis(5)));
    let (scope, owner, key, hold, ttl) = arguments();
    match h.block_on(store.reserve(&scope, &key, &owner, &hold, ttl)) {
        Err(StoreError::Storage(e)) => {
            assert!(
                error_chain(&e).contains("did not open the store") && error_chain(&e).contains("not null"),
                "{}",
                error_chain(&e)
            );
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
    // 300 differential scripts, as the Python store's whole run above.
    let report = run_matching(&h, &CommandHarness::settings().with_cases(300), |_| true);
    drop(h);
    assert!(report.is_ok(), "{report}");
    assert!(report.checks.iter().filter(|(_, r, _)| *r == CheckResult::Passed).count() > 45, "{report}");
    let _ = std::fs::remove_dir_all(binary.parent().expect("a directory"));
}

#[test]
fn the_guide_quotes_the_go_adapter_whole() {
    let adapter = include_str!("../../../adapters/go/adapter.go");
    let guide = include_str!("../../../docs/other-languages.md");
    assert!(
        guide.contains(&format!("```go\n{adapter}```")),
        "docs/other-languages.md does not quote adapters/go/adapter.go as it is"
    );
    assert!(adapter.lines().count() <= 90, "the adapter is meant to be short");
}

#[test]
fn an_adapter_that_asks_the_clock_of_an_unknown_id_is_a_failure() {
    refused("read line; echo '{\"clock\": 999}'; sleep 5", "asked for the clock of id 999");
}

/// An adapter (in Python) that asks for the clock of every operation and lookup, whatever its
/// `now`, and once the driver answers, answers `Taken` if the reading is 6 (else `Kept`, which no
/// reserve can answer).
fn always_asking() -> Option<CommandHarness> {
    let present = std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    service("python3 (for a scripted adapter)", if present { Ok(()) } else { Err("not installed") })?;
    let script = "import json,sys\nfor l in sys.stdin:\n r=json.loads(l)\n if 'op' not in r: print(json.dumps({'id':r['clock'],'ok':'Taken' if r['now']==6 else 'Kept'}),flush=True); continue\n if r['op']=='hello': print(json.dumps({'id':r['id'],'ok':{'protocol':3,'durable':False,'power_cuts':None}}),flush=True)\n elif r['op']=='open': print(json.dumps({'id':r['id'],'ok':None}),flush=True)\n else: print(json.dumps({'clock':r['id']}),flush=True)\n";
    let command = format!("python3 -c \"{script}\"");
    Some(CommandHarness::start(&command).expect("the adapter starts"))
}

#[test]
fn a_clock_question_is_answered_with_a_held_reading_and_only_for_a_request_that_said_ask() {
    use reservation_conformance::Harness;
    use reservation_store::{Instant, ManualClock, ReservationStore, StoreError};
    let Some(h) = always_asking() else { return };
    let (scope, owner, key, hold, ttl) = arguments();
    // No hold: the request carries the reading, and a question for it is the adapter's failure.
    let clock = ManualClock::new(Instant::from_millis(6));
    let store = h.store(clock.clone());
    match h.block_on(store.reserve(&scope, &key, &owner, &hold, ttl)) {
        Err(StoreError::Storage(e)) => {
            assert!(
                e.is_indeterminate() && error_chain(&e).contains("whose `now` is not \"ask\""),
                "{}",
                error_chain(&e)
            );
        }
        other => panic!("{other:?}"),
    }
    // A hold pending: the request says "ask", and the reading is taken, and held, on the thread
    // waiting for it; the answer is the instant read before the hold (6), whatever the clock
    // reads when the hold is let go.
    let Some(h) = always_asking() else { return };
    let store = h.store(clock.clone());
    let held = clock.hold_next_reading();
    std::thread::scope(|s| {
        let reserve = s.spawn(|| h.block_on(store.reserve(&scope, &key, &owner, &hold, ttl)));
        assert!(held.wait_reached(std::time::Duration::from_secs(10)), "the driver never read the clock");
        assert!(!reserve.is_finished(), "the reserve was answered while its reading was held");
        clock.set(Instant::from_millis(7));
        drop(held);
        let answered = reserve.join().expect("no panic");
        assert!(matches!(answered, Ok(reservation_store::ReserveOutcome::Taken)), "{answered:?}");
    });
    assert!(!clock.hold_pending(), "the store's reading took the hold");
}

/// The Python store's planted variants of the broken stores whose headlines name the cause
/// (`broken_stores.rs`): each check named fails with the headline given, through the driver.
#[test]
fn python_bugs_are_headlined_by_the_rule_that_names_their_cause() {
    let cases = [
        // A pending reservation with no holds is of no shape D11 gives; but the key must be
        // free, and A2 decided the step that should have freed it.
        ("last-abandon-keeps", "a2_", "a2_abandon_of_the_last_hold_frees", "rule A2 broken"),
        ("lookup-expired", "d7_", "d7_expired_pending_is_a_free_key", "rule D7 broken"),
        ("zero-version-absent", "d3_", "d3_versions_order_unversioned_first", "rule D3 broken"),
        ("hold-case", "d5_owners_keys", "d5_owners_keys_holds_compared_exactly", "rule D5 broken"),
        ("hold-case", "a4_", "a4_abandon_of_a_hold_it_lacks_is_not_held", "rule D5 broken (in the check of A4)"),
        ("float-versions", "d8_", "d8_unsigned_versions_and_the_last_instant", "rule D8 broken"),
        ("float-versions", "d3_", "d3_versions_order_unversioned_first", "rule D8 broken (in the check of D3)"),
    ];
    for (bug, prefix, check, rule) in cases {
        let Some(lines) = headlines(bug, prefix) else { return };
        assert_eq!(lines, [format!("conformance check `{check}` failed: {rule}")], "{bug}");
    }
}

/// Lookups served from a copy one write behind: most checks fail, and the report leads with the
/// cause they share.
#[test]
fn python_bug_stale_read_is_reported_as_the_shared_cause() {
    let Some(h) = python("stale-read") else { return };
    let report =
        run_matching(&h, &CommandHarness::settings(), |name| ["r", "c", "l", "a"].iter().any(|p| name.starts_with(p)));
    let cause = report.shared_cause().unwrap_or_else(|| panic!("no shared cause:\n{report}"));
    assert!(cause.contains("(a stale read)"), "{cause}\n{report}");
}
