//! The protocol's versions, negotiated at `hello` (PROTOCOL.md, "Versions"): an adapter of an
//! earlier version, frozen as it was written, and one of a version the driver does not know are
//! each refused at `hello` with a message that names the version and what changed; an adapter
//! that breaks the protocol or exits ends the whole run at once; the sweep sends every spelling
//! of text and numbers that PROTOCOL.md names, and the vectors hold each.

use std::time::{Duration, Instant};

use reservation_conformance::driver::{CommandHarness, PROTOCOL, VERSIONS, VERSIONS_SECTION};
use reservation_conformance::services::service;
use reservation_conformance::{CheckResult, Report, run_matching};
use reservation_store::error_chain;

/// The adapter and store of protocol 1, frozen as that text's teams wrote it: the Python store
/// as it was when PROTOCOL.md said protocol 1 (before clock questions, `close` and the line
/// bound). It answers `hello` with `{"protocol": 1, …}` and knows no `"now": "ask"`.
const PROTOCOL1_STORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/adapters/protocol1_store.py");

const PYTHON_STORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/python/store.py");

fn python3() -> Option<()> {
    let present = std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    service("python3 (for the adapters in Python)", if present { Ok(()) } else { Err("not installed") })
}

/// The failure of `command` to start, within the driver's bounded wait.
fn refusal(command: &str) -> String {
    let started = Instant::now();
    let error = match CommandHarness::start_with(command, Duration::from_secs(2)) {
        Ok(h) => panic!("the adapter `{command}` was accepted, speaking protocol {}", h.hello().protocol),
        Err(e) => error_chain(&e),
    };
    assert!(started.elapsed() < Duration::from_secs(10), "{command}: the driver waited {:?}", started.elapsed());
    assert!(error.contains("the adapter did not start"), "{error}");
    eprintln!("{command}:\n  {error}");
    error
}

#[test]
fn an_adapter_of_protocol_1_frozen_as_written_is_refused_at_hello_naming_what_changed() {
    if python3().is_none() {
        return;
    }
    let error = refusal(&format!("python3 {PROTOCOL1_STORE}"));
    for says in [
        "it speaks protocol 1, which this driver no longer runs (it runs protocol 3 only)",
        "protocol 2 added clock questions",
        "\"ask\"",
        "`close`",
        "1 MiB",
        "protocol 3 added power cuts",
        "Read PROTOCOL.md, \"Versions\"",
        ANSWER_WITH,
    ] {
        assert!(error.contains(says), "the refusal does not say {says:?}: {error}");
    }
    // What changed since protocol 1, not what protocol 1 itself was.
    assert!(!error.contains("protocol 1 added"), "{error}");
    // What to send, not the adapter's own answer back.
    assert!(!error.contains("\"durable\":false,\"protocol\":1"), "{error}");
}

/// What every refusal of an older adapter tells it to answer.
const ANSWER_WITH: &str = "answer `hello` with {\"protocol\": 3, \"durable\": true or false, \"power_cuts\": null or \
                           the persistence model the store survives}";

/// An adapter of protocol 2: the `hello` answer of the Python store as it was when PROTOCOL.md
/// said protocol 2 (before power cuts), `{"protocol": 2, "durable": …}` without `power_cuts`.
const PROTOCOL2_STORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/adapters/protocol2_store.py");

#[test]
fn an_adapter_of_protocol_2_is_refused_at_hello_naming_what_changed_and_what_to_send() {
    if python3().is_none() {
        return;
    }
    for durable in ["", " --durable"] {
        let error = refusal(&format!("python3 {PROTOCOL2_STORE}{durable}"));
        for says in [
            "it speaks protocol 2, which this driver no longer runs (it runs protocol 3 only)",
            "protocol 3 added power cuts",
            "`\"power_cuts\"`",
            "`dir`",
            ANSWER_WITH,
        ] {
            assert!(error.contains(says), "the refusal does not say {says:?}: {error}");
        }
        assert!(!error.contains("protocol 2 added"), "{error}");
        assert!(!error.contains("\"protocol\":2"), "the refusal quotes the adapter's answer: {error}");
    }
}

/// A `hello` answer's `power_cuts`: a model's name or null; a promise without `durable` is
/// refused, and so is an answer without the field.
#[test]
fn a_hello_whose_power_cuts_is_not_a_model_or_null_or_promised_without_durable_is_refused() {
    let error = refusal("read line; echo '{\"id\":0,\"ok\":{\"protocol\":3,\"durable\":true}}'; sleep 5");
    assert!(error.contains("has no field `power_cuts`"), "{error}");
    let error = refusal(
        "read line; echo '{\"id\":0,\"ok\":{\"protocol\":3,\"durable\":true,\"power_cuts\":\"lazy\"}}'; sleep 5",
    );
    assert!(error.contains("neither null nor one of the models process, data, names, torn, reorder"), "{error}");
    let error =
        refusal("read line; echo '{\"id\":0,\"ok\":{\"protocol\":3,\"durable\":true,\"power_cuts\":true}}'; sleep 5");
    assert!(error.contains("`power_cuts` is true, neither null nor"), "{error}");
    let error = refusal(
        "read line; echo '{\"id\":0,\"ok\":{\"protocol\":3,\"durable\":false,\"power_cuts\":\"names\"}}'; sleep 5",
    );
    assert!(error.contains("`power_cuts` declares a promise, but `durable` is false"), "{error}");
    for model in ["process", "data", "names", "torn", "reorder"] {
        let h = CommandHarness::start_with(
            &format!(
                "read line; echo '{{\"id\":0,\"ok\":{{\"protocol\":3,\"durable\":true,\"power_cuts\":\"{model}\"}}}}'; sleep 5"
            ),
            Duration::from_secs(2),
        )
        .expect("a promise of a model starts");
        assert_eq!(h.hello().power_cuts.map(|m| m.name()), Some(model));
    }
}

#[test]
fn an_adapter_of_a_version_the_driver_does_not_know_is_refused_at_hello() {
    let error = refusal("read line; echo '{\"id\":0,\"ok\":{\"protocol\":4,\"durable\":false}}'; sleep 5");
    assert!(
        error.contains("it speaks protocol 4, which this driver does not know (it runs protocol 3 only)"),
        "{error}"
    );
    assert!(error.contains(VERSIONS_SECTION), "{error}");
    // A list of versions without the driver's: refused, naming them.
    let error = refusal("read line; echo '{\"id\":0,\"ok\":{\"protocol\":[4,5],\"durable\":false}}'; sleep 5");
    assert!(error.contains("it speaks protocol 4, 5, which this driver does not know"), "{error}");
    // No version at all.
    let error = refusal("read line; echo '{\"id\":0,\"ok\":{\"protocol\":0,\"durable\":false}}'; sleep 5");
    assert!(error.contains("`protocol` is neither a version"), "{error}");
    let error = refusal("read line; echo '{\"id\":0,\"ok\":{\"protocol\":\"2\",\"durable\":false}}'; sleep 5");
    assert!(error.contains("`protocol` is neither a version"), "{error}");
    let error = refusal("read line; echo '{\"id\":0,\"ok\":{\"protocol\":[],\"durable\":false}}'; sleep 5");
    assert!(error.contains("`protocol` is neither a version"), "{error}");
    // An adapter that refuses the driver's `hello` (one that checks for protocol 1): the driver
    // says which version it runs, and where to read.
    let error = refusal(
        "read line; echo '{\"id\":0,\"error\":{\"kind\":\"InvalidArgument\",\"name\":\"Unrepresentable\",\"message\":\"protocol 1 only\"}}'; sleep 5",
    );
    assert!(error.contains("this driver runs protocol 3") && error.contains(VERSIONS_SECTION), "{error}");
}

#[test]
fn an_adapter_that_speaks_several_versions_runs_the_drivers() {
    let h = CommandHarness::start_with(
        "read line; echo '{\"id\":0,\"ok\":{\"protocol\":[1,2,3,4],\"durable\":false,\"power_cuts\":null}}'; sleep 5",
        Duration::from_secs(2),
    )
    .expect("an adapter that speaks 3 among others starts");
    assert_eq!(h.hello().protocol, PROTOCOL);
    let error = refusal("read line; echo '{\"id\":0,\"ok\":{\"protocol\":[1],\"durable\":false}}'; sleep 5");
    assert!(error.contains("it speaks protocol 1, which this driver no longer runs"), "{error}");
}

#[test]
fn protocol_md_keeps_the_history_of_every_version_as_the_driver_names_it() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../PROTOCOL.md")).expect("PROTOCOL.md");
    assert!(text.contains("\n## Versions\n"), "PROTOCOL.md has no section \"Versions\"");
    for (version, added) in VERSIONS {
        let line = format!("- **{version}**: {added}.");
        assert!(text.contains(&line), "PROTOCOL.md's history does not say, as the driver does: {line}");
    }
    assert_eq!(VERSIONS.last().map(|(v, _)| *v), Some(PROTOCOL));
    assert!(text.contains(&format!("`hello` | `protocol`: {PROTOCOL}")), "PROTOCOL.md's table names another version");
}

/// Runs every check against `command` (waiting at most `timeout` for an answer) and asserts that
/// the run ends within `bound` of its start with one protocol failure saying `says`, every later
/// check pointing back to it and none blaming a rule.
fn ends_at_once(command: &str, timeout: Duration, bound: Duration, says: &str) -> Report {
    let h = CommandHarness::start_with(command, timeout).expect("the adapter starts");
    let started = Instant::now();
    // Borrowed, as a test binary's static harness is: the borrow passes on why it is broken.
    let report = run_matching(&&h, &CommandHarness::settings(), |_| true);
    let took = started.elapsed();
    let text = report.to_string();
    let headlines: Vec<&str> = text.lines().filter(|l| l.starts_with("conformance check `")).collect();
    let broken: Vec<&&str> =
        headlines.iter().filter(|l| l.contains("failed: the adapter broke the protocol: ")).collect();
    assert_eq!(broken.len(), 1, "{text}");
    assert!(broken[0].contains(says), "{text}");
    let earlier =
        headlines.iter().filter(|l| l.contains("the adapter broke the protocol earlier (see check `")).count();
    assert!(earlier + 1 == headlines.len() && earlier > 10, "{text}");
    assert!(took < bound, "{command}: the run took {took:?}, more than {bound:?}:\n{text}");
    let passed = report.checks.iter().filter(|(_, r, _)| *r == CheckResult::Passed).count();
    eprintln!("{command}: the run ended {took:?} after it started; {passed} checks passed");
    report
}

/// PROTOCOL.md's bound is a second; this leaves room for a loaded machine, and the run took
/// 30 s before the driver ended it at the first failure.
const AT_ONCE: Duration = Duration::from_secs(5);

#[test]
fn an_adapter_that_exits_right_after_hello_ends_the_run_at_once() {
    // It closes its output, then exits a moment later: the driver waits for the exit status.
    ends_at_once(
        "read l; echo '{\"id\":0,\"ok\":{\"protocol\":3,\"durable\":false,\"power_cuts\":null}}'; exec >&-; sleep 0.03; exit 3",
        CommandHarness::TIMEOUT,
        AT_ONCE,
        "closed its standard output: it exited (exit status: 3)",
    );
}

#[test]
fn an_adapter_that_writes_garbage_or_a_wrong_id_or_invalid_utf8_ends_the_run_at_once() {
    let hello = "read l; echo '{\"id\":0,\"ok\":{\"protocol\":3,\"durable\":false,\"power_cuts\":null}}'; read l;";
    ends_at_once(&format!("{hello} echo garbage; exec cat > /dev/null"), CommandHarness::TIMEOUT, AT_ONCE, "not JSON");
    ends_at_once(
        &format!("{hello} echo '{{\"id\":999,\"ok\":null}}'; exec cat > /dev/null"),
        CommandHarness::TIMEOUT,
        AT_ONCE,
        "which no request in flight has",
    );
    ends_at_once(
        &format!("{hello} printf '\\377\\376\\n'; exec cat > /dev/null"),
        CommandHarness::TIMEOUT,
        AT_ONCE,
        "not UTF-8",
    );
}

#[test]
fn a_silent_adapter_ends_the_run_within_one_timeout() {
    // It reads on and stays alive, but answers nothing after `hello`; and one that stops reading.
    let timeout = Duration::from_secs(2);
    let hello = "read l; echo '{\"id\":0,\"ok\":{\"protocol\":3,\"durable\":false,\"power_cuts\":null}}';";
    let bound = timeout + AT_ONCE;
    ends_at_once(&format!("{hello} while read l; do :; done"), timeout, bound, "no answer within 2s");
    ends_at_once(&format!("{hello} exec sleep 600"), timeout, bound, "no answer within 2s");
}

#[test]
fn a_store_that_reads_upper_case_or_low_surrogate_escapes_as_text_is_caught_by_the_sweep() {
    if python3().is_none() {
        return;
    }
    // A JSON reader that knows lone surrogates only in lower-case hex, or only high ones: the
    // Python store behind a filter that mends the other spellings into text.
    for (mend, says) in [
        (r"s/\\uD8/\\u00/g", "a lone high surrogate in upper case"),
        (r"s/\\udc00/\\u00dc/g", "a lone low surrogate"),
        (r"s/\\ud800\\u0041/\\u00d8A/g", "a high surrogate followed by one that is not low"),
    ] {
        let command = format!("sed -u '{mend}' | python3 {PYTHON_STORE}");
        let h = CommandHarness::start(&command).expect("the adapter starts");
        let report = run_matching(&h, &CommandHarness::settings(), |name| {
            name == "d6_every_invalid_argument_in_every_state_changes_nothing"
        });
        let message = report.failures().next().map(ToString::to_string).unwrap_or_default();
        for text in ["rule D9 broken", says, "Unrepresentable"] {
            assert!(message.contains(text), "{mend}: the failure does not say {text:?}:\n{report}");
        }
    }
}

#[test]
fn a_store_that_refuses_minus_zero_is_caught_by_the_sweep() {
    if python3().is_none() {
        return;
    }
    // A JSON reader that takes `-0` for something other than 0: the Python store behind a filter
    // that makes it a string, which the store refuses.
    for (mend, says) in [
        (r#"s/"ttl":-0/"ttl":"-0"/g"#, ["rule D2 broken", "the TTL -0 (the integer 0 in JSON)"]),
        (r#"s/"version":-0/"version":"-0"/g"#, ["rule D8 broken", "the version -0 (the integer 0 in JSON)"]),
    ] {
        let command = format!("sed -u '{mend}' | python3 {PYTHON_STORE}");
        let h = CommandHarness::start(&command).expect("the adapter starts");
        let report = run_matching(&h, &CommandHarness::settings(), |name| {
            name == "d6_every_invalid_argument_in_every_state_changes_nothing"
        });
        let message = report.failures().next().map(ToString::to_string).unwrap_or_default();
        for text in says {
            assert!(message.contains(text), "{mend}: the failure does not say {text:?}:\n{report}");
        }
    }
}

#[test]
fn the_vectors_hold_every_spelling_the_sweep_sends() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../vectors/arguments.json");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the vectors")).expect("JSON");
    let lines: Vec<String> = file["cases"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|case| case["steps"].as_array().into_iter().flatten())
        .filter_map(|step| step["line"].as_str().map(str::to_owned))
        .collect();
    for spelling in [
        r#""\ud800""#,
        r#""\uD800""#,
        r#""\udc00""#,
        r#""\ud800\u0041""#,
        ":1e400",
        ":1e3",
        ":-0",
        ":18446744073709551616",
    ] {
        assert!(lines.iter().any(|l| l.contains(spelling)), "no vector's line holds {spelling}");
    }
    let requests = file.to_string();
    assert!(requests.contains(":1.0,") || requests.contains(":1.0}"), "no vector holds 1.0");
}
