//! Every command of `reservation` through the built binary: its output and its exit code.

use std::process::Command;

use crate::{reservation, text};

/// Every command, as the program's help lists them.
const COMMANDS: [&str; 9] =
    ["check", "explore", "swarm", "figures", "conform", "serve", "vectors", "all", "completions"];

/// The commands a help text lists: the first word of each line of its `Commands:` section.
fn listed(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help")
        .collect()
}

#[test]
fn help_exits_0_and_names_every_command() {
    let help = reservation(&["--help"]);
    assert_eq!(help.status.code(), Some(0), "{}", text(&help));
    assert_eq!(listed(&text(&help)), COMMANDS, "{}", text(&help));
    for args in [&["help"][..], &["-h"]] {
        let o = reservation(args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert_eq!(listed(&text(&o)), COMMANDS, "{}", text(&o));
    }
    // With no command at all, the same list, rendered from the same parser, as an error.
    let o = reservation(&[]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    assert_eq!(listed(&text(&o)), COMMANDS, "{}", text(&o));
    assert!(text(&o).contains("Usage: reservation <COMMAND>"), "{}", text(&o));
}

#[test]
fn bad_arguments_exit_64() {
    for args in [
        &[][..],
        &["frobnicate"],
        &["conform", "oracle"],
        &["conform", "memory", "sqlite"],
        &["conform", "memory", "--command", "x"],
        &["conform", "--json"],
        &["conform", "--seed", "ten"],
        &["all", "-v"],
        &["serve", "--port", "1"],
        &["vectors"],
        &["vectors", "--write", "a", "--check", "b"],
    ] {
        let o = reservation(args);
        assert_eq!(o.status.code(), Some(64), "reservation {args:?}:\n{}", text(&o));
        let says = text(&o);
        assert!(says.contains("Usage:") || says.contains("try '--help'"), "reservation {args:?}:\n{says}");
    }
}

/// Each command's `--help` exits 0 and names each of its settings, with the environment
/// variable each falls back on.
#[test]
fn every_command_s_help_lists_its_settings() {
    let suite = [
        "--seed",
        "RESERVATION_CONFORMANCE_SEED",
        "linearizability",
        "--cases",
        "RESERVATION_CONFORMANCE_CASES",
        "--threads",
        "RESERVATION_CONFORMANCE_THREADS",
        "--regressions",
        "--pg-url",
        "RESERVATION_PG_URL",
        "--redis-url",
        "RESERVATION_REDIS_URL",
        "RESERVATION_REQUIRE_SERVICES",
    ];
    let conform = [
        "memory",
        "sqlite",
        "postgres",
        "redis",
        "--command <ADAPTER>",
        "PROTOCOL.md",
        "--json",
        "--timeout",
        "--only",
    ];
    let model = ["--owners", "--attempts", "--keys", "--horizon", "--ttl", "--skew", "--drop-assumption"];
    let settings: [(&str, Vec<&str>); 9] = [
        (
            "check",
            [
                &model[..],
                &[
                    "--strategy",
                    "--seed",
                    "--timeout",
                    "--threads",
                    "--json",
                    "--quiet",
                    "--no-symmetry",
                    "--symmetry-factor",
                    "Usage: reservation check [OPTIONS]",
                ],
            ]
            .concat(),
        ),
        ("explore", [&model[..], &["--port", "Usage: reservation explore [OPTIONS]"]].concat()),
        (
            "swarm",
            [
                &model[..],
                &[
                    "--seeds",
                    "--depth",
                    "--threads",
                    "--stop-at-failure",
                    "--quiet",
                    "Usage: reservation swarm [OPTIONS]",
                ],
            ]
            .concat(),
        ),
        (
            "figures",
            vec![
                "--configurations",
                "default",
                "four-owners",
                "four-owners-three-keys",
                "--timeout",
                "--json",
                "BENCHMARKS.md",
                "Usage: reservation figures [OPTIONS]",
            ],
        ),
        ("conform", [&suite[..], &conform].concat()),
        ("serve", vec!["MemoryStore", "PROTOCOL.md"]),
        ("vectors", vec!["--write <DIR>", "--check <DIR>"]),
        ("all", suite.to_vec()),
        ("completions", vec!["bash", "zsh", "fish"]),
    ];
    for (command, says) in settings {
        let o = reservation(&[command, "--help"]);
        assert_eq!(o.status.code(), Some(0), "{command} --help:\n{}", text(&o));
        for setting in says {
            assert!(text(&o).contains(setting), "{command} --help says nothing of {setting}:\n{}", text(&o));
        }
    }
}

/// A mistyped flag or value is refused with the one meant.
#[test]
fn a_typo_is_refused_with_the_setting_meant() {
    for (args, meant) in [
        (&["conform", "--comand", "python3 store.py"][..], "'--command'"),
        (&["conform", "--seeds", "1"], "'--seed'"),
        (&["check", "--owner", "2"], "'--owners'"),
        (&["check", "--strategy", "bf"], "'bfs'"),
        (&["conform", "memroy"], "memory"),
        (&["conform", "--cases", "10", "--regresions", "f"], "'--regressions'"),
    ] {
        let o = reservation(args);
        assert_eq!(o.status.code(), Some(64), "reservation {args:?}:\n{}", text(&o));
        assert!(text(&o).contains(meant), "reservation {args:?} does not suggest {meant}:\n{}", text(&o));
    }
}

/// A line per check on standard error as each ends (the store, the verdict, the check and its
/// time), the report on standard output.
#[test]
fn conform_prints_a_line_per_check_to_standard_error_as_it_ends() {
    let o = reservation(&["conform", "memory", "--only", "r1_", "--only", "c2_"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[0].starts_with("[MemoryStore] ok      r1_reserve_takes_a_free_key ("), "{err}");
    assert!(lines[1].starts_with("[MemoryStore] ok      c2_confirm_of_own_live_pending_clears_holds ("), "{err}");
    assert!(lines.iter().all(|l| l.ends_with("s)")), "no time:\n{err}");
    assert!(!out.contains("[MemoryStore]"), "{out}");
    assert!(out.contains("2 checks: 2 passed") && out.contains("MemoryStore: conforms"), "{out}");
}

/// The command line's settings win over the environment's, and the report's header says which
/// run.
#[test]
fn conform_runs_with_the_seed_and_cases_it_prints() {
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_reservation"))
            .args(args)
            .env("RESERVATION_CONFORMANCE_SEED", "5")
            .env("RESERVATION_CONFORMANCE_CASES", "7")
            .env_remove("RESERVATION_CONFORMANCE_THREADS")
            .output()
            .expect("the binary ran")
    };
    let o = run(&["conform", "memory", "--only", "r1_"]);
    assert!(text(&o).contains("(seed 5, 7 differential scripts on 1 thread)"), "{}", text(&o));
    let o = run(&["conform", "memory", "--only", "r1_", "--seed", "9", "--cases", "11", "--threads", "2"]);
    assert!(text(&o).contains("(seed 9, 11 differential scripts on 2 threads)"), "{}", text(&o));
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let o = reservation(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        let script = String::from_utf8_lossy(&o.stdout);
        assert!(script.contains("conform") && script.contains("regressions"), "{shell}:\n{script}");
    }
}

#[test]
fn check_passes_the_model_s_verdict_through() {
    let small = ["check", "--owners", "2", "--attempts", "1", "--keys", "1", "--horizon", "3", "--quiet"];
    let o = reservation(&small);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    // A dropped assumption has a counterexample: the exit code says the property failed.
    let mut dropped = small.to_vec();
    dropped.extend(["--drop-assumption", "H2", "--strategy", "bfs"]);
    let o = reservation(&dropped);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("FAILS"), "{}", text(&o));
}

#[test]
fn conform_memory_runs_the_whole_suite() {
    let o = reservation(&["conform", "memory"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("MemoryStore: conforms"), "{out}");
    for part in ["differential", "linearizability", "r1_"] {
        assert!(out.contains(part), "the report names no {part} check:\n{out}");
    }
    assert!(!out.contains("SqliteStore"), "conform memory ran SqliteStore too:\n{out}");
}

#[test]
fn conform_sqlite_runs_the_checks_asked_for_on_a_scratch_file() {
    // The whole suite on SQLite is the SQLite store's own tests' (and the main job's): here, the
    // command, a scratch file, and the durable reopen that needs one.
    let o = reservation(&["conform", "sqlite", "--only", "r1_", "--only", "p1_durable_reopen"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    assert!(out.contains("SqliteStore: conforms"), "{out}");
    assert!(out.contains("p1_durable_reopen_keeps_every_reservation") && out.contains("r1_"), "{out}");
    assert!(out.contains("2 checks: 2 passed"), "{out}");
    // The run with NORMAL says what it does not survive; the durable reopen runs again with FULL.
    assert!(
        out.contains(
            "SqliteStore runs the suite with synchronous NORMAL, which survives a process crash and not a power cut"
        ),
        "{out}"
    );
    assert!(out.contains("SqliteStore, synchronous FULL: conforms") && out.contains("1 checks: 1 passed"), "{out}");
}

/// `conform sqlite`'s power-cut check runs twice: with NORMAL under `process` only, with FULL
/// under every model.
#[test]
fn conform_sqlite_cuts_full_under_every_model_and_normal_under_process() {
    let o = reservation(&["conform", "sqlite", "--only", "p1_power_cuts", "--seed", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = text(&o);
    let full = out.split_once("conformance suite against SqliteStore, synchronous FULL").map(|(_, full)| full);
    let full = full.unwrap_or_else(|| panic!("no run with FULL:\n{out}"));
    let normal =
        out.split_once("conformance suite against SqliteStore, synchronous FULL").map_or("", |(normal, _)| normal);
    if out.contains("FUSE (a mount of /dev/fuse), for the power-cut check") && out.contains("skipped") {
        return;
    }
    assert!(normal.contains("power cuts (under process;"), "{normal}");
    let models = |run: &str| {
        let note = run.lines().find(|l| l.starts_with("note: p1_power_cuts")).unwrap_or_default().to_owned();
        note.split_once("(under ")
            .and_then(|(_, rest)| rest.split_once(';'))
            .map_or(String::new(), |(m, _)| m.to_owned())
    };
    assert_eq!(models(normal), "process", "{normal}");
    assert!(models(full).ends_with("torn, reorder"), "the declared model every other cut: {full}");
}

#[test]
fn conform_all_without_servers_skips_their_stores_saying_so() {
    let run = |required: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_reservation"));
        // One check per store: what is asked of `all` here is the skipping, the order and the
        // exit status, not the suite (each store's own tests run it whole).
        command
            .args(["conform", "all", "--only", "r1_"])
            .env("RESERVATION_PG_URL", "postgres://postgres@127.0.0.1:1/test")
            .env("RESERVATION_REDIS_URL", "redis://127.0.0.1:1/");
        if required {
            command.env("RESERVATION_REQUIRE_SERVICES", "1");
        } else {
            command.env_remove("RESERVATION_REQUIRE_SERVICES");
        }
        command.output().expect("the binary ran")
    };
    let o = run(false);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("PostgresStore: skipped: no server at postgres://postgres@127.0.0.1:1/test"),
        "{}",
        text(&o)
    );
    // The stores run at once, and their reports print in a fixed order, each whole.
    let out = String::from_utf8_lossy(&o.stdout);
    let at = |line: &str| out.find(line).unwrap_or_else(|| panic!("no {line:?} in:\n{out}"));
    let order = ["conformance suite against MemoryStore", "MemoryStore: conforms", "PostgresStore: skipped"];
    let order = order.into_iter().chain(["RedisStore: skipped", "conformance suite against SqliteStore"]);
    let positions: Vec<usize> = order.chain(["SqliteStore: conforms"]).map(at).collect();
    assert!(positions.is_sorted(), "{positions:?}:\n{out}");
    let o = run(true);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("PostgresStore: DOES NOT CONFORM: no server at"), "{}", text(&o));
}

/// Validates every line of `path` against the protocol schema's definition `def`: the count of
/// lines, and the ids of those outside it. The argument sweep breaks the protocol's rules on
/// purpose (a field missing, a number out of range, text that is not Unicode, which serde_json
/// cannot even read): those lines are outside, and the caller requires each to have been refused.
fn valid_lines(path: &std::path::Path, def: &str) -> (usize, Vec<u64>) {
    let mut schema: serde_json::Value =
        serde_json::from_str(reservation_conformance::driver::SCHEMA).expect("the schema is JSON");
    schema["oneOf"] = serde_json::json!([{"$ref": format!("#/$defs/{def}")}]);
    let (mut schemas, mut compiler) = (boon::Schemas::new(), boon::Compiler::new());
    compiler.set_default_draft(boon::Draft::V2020_12);
    fn invalid<T>(e: boon::CompileError) -> T {
        panic!("the schema is not a valid draft 2020-12 schema: {e}")
    }
    compiler.add_resource("urn:reservation-store:compiled", schema).unwrap_or_else(invalid);
    let index = compiler.compile("urn:reservation-store:compiled", &mut schemas).unwrap_or_else(invalid);
    let text = std::fs::read_to_string(path).expect("the copied lines");
    let mut outside = Vec::new();
    for line in text.lines() {
        let valid = serde_json::from_str::<serde_json::Value>(line).is_ok_and(|m| schemas.validate(&m, index).is_ok());
        if !valid {
            let id = line.split("\"id\":").nth(1).and_then(|rest| {
                rest.split(|c: char| !c.is_ascii_digit()).next().and_then(|digits| digits.parse().ok())
            });
            outside.push(id.unwrap_or_else(|| panic!("not a valid {def}, and no id: {line}")));
        }
    }
    (text.lines().count(), outside)
}

#[test]
fn memory_store_behind_serve_conforms_through_the_driver_and_reports_json() {
    // Every line each way is copied by tee and validated against the protocol's schema.
    let dir = std::env::temp_dir().join(format!("reservation-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let (sent, answered) = (dir.join("requests"), dir.join("answers"));
    let serve = format!(
        "tee '{}' | {} serve | tee '{}'",
        sent.display(),
        env!("CARGO_BIN_EXE_reservation"),
        answered.display()
    );
    let o = Command::new(env!("CARGO_BIN_EXE_reservation"))
        .args(["conform", "--command", &serve, "--json"])
        .env("RESERVATION_CONFORMANCE_CASES", "300")
        .output()
        .expect("the binary ran");
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let checks: Vec<_> = lines.iter().filter(|l| l.get("check").is_some()).collect();
    assert!(checks.len() > 40, "{out}");
    assert!(checks.iter().any(|c| c["check"] == "linearizability_under_threads" && c["result"] == "passed"), "{out}");
    assert!(
        checks
            .iter()
            .any(|c| c["check"] == "d10_the_clock_is_read_inside_the_critical_section" && c["result"] == "passed"),
        "{out}"
    );
    assert_eq!(lines.last().expect("a summary")["conforms"], true, "{out}");
    // serve's MemoryStore promises nothing about power cuts.
    assert_eq!(lines.last().expect("a summary")["power_cuts"], serde_json::Value::Null, "{out}");
    assert_eq!(lines.last().expect("a summary")["protocol"], 3, "{out}");
    let (requests, outside) = valid_lines(&sent, "driver_line");
    let (answers, wrong) = valid_lines(&answered, "adapter_line");
    assert_eq!(wrong, Vec::<u64>::new(), "answers of serve outside the protocol's schema");
    assert_eq!(requests, answers, "every request and clock question is answered once");
    // The argument sweep's requests outside the schema, each refused with an error.
    assert!(!outside.is_empty(), "no request of the argument sweep reached the adapter");
    let refused: std::collections::HashSet<u64> = std::fs::read_to_string(&answered)
        .expect("the answers")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|a| a.get("error").is_some())
        .filter_map(|a| a["id"].as_u64())
        .collect();
    for id in outside {
        assert!(refused.contains(&id), "request {id}, outside the protocol's schema, was not refused");
    }
    let asked = std::fs::read_to_string(&answered)
        .expect("the answers")
        .lines()
        .filter(|l| l.starts_with("{\"clock\""))
        .count();
    assert!(asked > 0, "no clock question: d10 did not ask the store for its clock");
    assert!(requests > 50_000, "{requests} requests");
    std::fs::remove_dir_all(&dir).expect("removed");
}

#[test]
fn serve_answers_bad_requests_with_typed_errors_and_keeps_going() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_reservation"))
        .arg("serve")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("serve started");
    let requests = [
        "not json",
        r#"{"id":1,"op":"open","store":0,"now":5}"#,
        r#"{"id":2,"op":"reserve","store":0,"now":-1,"scope":{},"key":"k"}"#,
        r#"{"id":3,"op":"reserve","store":0,"now":5,"scope":{"aggregate_type":"u","tenant":"t","namespace":"n"},"key":"","owner":{"aggregate_type":"u","tenant":"t","id":"a"},"hold":"h","ttl":5}"#,
        r#"{"id":4,"op":"confirm","store":0,"now":5,"scope":{"aggregate_type":"u","tenant":"t","namespace":"n"},"key":"k","owner":{"aggregate_type":"u","tenant":"t","id":"a"},"version":"ANY"}"#,
        r#"{"id":5,"op":"reserve","store":0,"now":5,"scope":{"aggregate_type":"u","tenant":"t","namespace":"n"},"key":"k","owner":{"aggregate_type":"u","tenant":"x","id":"a"},"hold":"h","ttl":5}"#,
        r#"{"id":6,"op":"reserve","store":0,"now":5,"scope":{"aggregate_type":"u","tenant":"t","namespace":"n"},"key":"k","owner":{"aggregate_type":"u","tenant":"t","id":"a"},"hold":"h","ttl":5}"#,
        r#"{"id":7,"op":"lookup","store":0,"now":5,"scope":{"aggregate_type":"u","tenant":"t","namespace":"n"},"key":"\ud800"}"#,
    ];
    {
        let mut stdin = child.stdin.take().expect("stdin");
        for r in requests {
            writeln!(stdin, "{r}").expect("written");
        }
    }
    let out = child.wait_with_output().expect("serve ended");
    assert_eq!(out.status.code(), Some(0));
    let answers: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let names: Vec<String> = answers
        .iter()
        .map(|a| a["error"]["name"].as_str().map_or_else(|| a["ok"].to_string(), str::to_owned))
        .collect();
    assert_eq!(
        names,
        [
            "Unrepresentable",
            "null",
            "Unrepresentable",
            "EmptyKey",
            "Unrepresentable",
            "TenantMismatch",
            "\"Taken\"",
            "Unrepresentable"
        ]
    );
    // The lone surrogate's line is answered with its request's id, saying why.
    assert_eq!(answers[7]["id"], 7);
    assert!(answers[7]["error"]["message"].as_str().is_some_and(|m| m.contains("not valid Unicode")), "{}", answers[7]);
}

const PYTHON_STORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/python/store.py");

/// Whether python3 runs; without it the test says it was skipped (or fails under
/// `RESERVATION_REQUIRE_SERVICES=1`).
fn python3() -> bool {
    let present = Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    let python = reservation_conformance::services::service(
        "python3 (for the Python store behind the driver)",
        if present { Ok(()) } else { Err("not installed") },
    );
    python.is_some()
}

/// `conform --command` against the Python store with its expiry-boundary bug, which the
/// differential test finds, from a scratch working directory: the failure prints the command
/// that replays the run (which runs, with the same seed), and no file is written unless
/// `--regressions` names one.
#[test]
fn conform_command_prints_the_replay_command_and_writes_no_file_unless_asked() {
    if !python3() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("reservation-regressions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The run that writes a regression file works in a directory of its own, so that the others'
    // can be seen to stay empty while all run at once.
    let (plain, saving) = (dir.join("plain"), dir.join("saving"));
    for d in [&plain, &saving] {
        std::fs::create_dir_all(d).expect("a temporary directory");
    }
    let adapter = format!("RESERVATION_PY_BUG=expiry-boundary python3 {PYTHON_STORE}");
    let conform = |extra: &[&str], cwd: &std::path::Path| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_reservation"));
        command
            .args(["conform", "--command", &adapter, "--only", "differential", "--cases", "300"])
            .args(extra)
            .current_dir(cwd)
            .env_remove("RESERVATION_CONFORMANCE_SEED")
            .env_remove("RESERVATION_CONFORMANCE_THREADS");
        if extra.contains(&"--seed") {
            command.env("RESERVATION_CONFORMANCE_SEED", "5");
        }
        command.output().expect("the binary ran")
    };
    let seed_of = |out: &str| {
        let header = out.lines().next().unwrap_or_default();
        let seed = header.split("(seed ").nth(1).and_then(|s| s.split(',').next()).map(str::to_owned);
        seed.unwrap_or_else(|| panic!("no seed in the header:\n{out}"))
    };
    // Four runs at once, each waiting on its own Python process: plain; --json; a --seed flag
    // beside the environment's seed (a flag wins over its environment variable, inside the
    // checks too); --regressions FILE.
    let runs: [&[&str]; 4] =
        [&[], &["--json"], &["--seed", "9", "--threads", "1"], &["--regressions", "saved/conform.txt"]];
    let [o, json, flag, saved] = all_at_once(&runs.map(|extra| {
        let cwd = if extra.contains(&"--regressions") { &saving } else { &plain };
        move || conform(extra, cwd)
    }));

    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(out.contains("failed: rule D1 broken"), "{out}");
    let seed = seed_of(&out);
    let replay = out.lines().find_map(|l| l.strip_prefix("to replay this run: ")).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        replay,
        format!(
            "reservation conform --command '{adapter}' --timeout 10 --seed {seed} --cases 300 --threads 8 --only differential"
        )
    );

    // The replay command, as printed, runs the same seed and fails the same way.
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_reservation")).parent().expect("the binary's directory");
    let path = std::env::join_paths(
        std::iter::once(bin.to_owned()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .expect("a PATH");
    let again =
        Command::new("sh").arg("-c").arg(replay).env("PATH", path).current_dir(&plain).output().expect("sh ran");
    let again_out = String::from_utf8_lossy(&again.stdout);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert_eq!(seed_of(&again_out), seed, "{again_out}");
    assert!(again_out.contains("failed: rule D1 broken"), "{again_out}");
    // Neither these runs nor the next two wrote a file.
    let written: Vec<_> =
        std::fs::read_dir(&plain).expect("the directory").map(|e| e.expect("an entry").path()).collect();
    assert!(written.is_empty(), "conform --command wrote {written:?}");

    // --json: the summary carries the seed and the replay command.
    let out = String::from_utf8_lossy(&json.stdout);
    let summary: serde_json::Value = serde_json::from_str(out.lines().last().expect("a summary")).expect("JSON");
    assert_eq!(summary["conforms"], false, "{out}");
    let seed = summary["seed"].as_u64().unwrap_or_else(|| panic!("no seed: {summary}"));
    let replay = summary["replay"].as_str().unwrap_or_else(|| panic!("no replay: {summary}"));
    assert!(replay.contains(&format!(" --seed {seed} ")), "{summary}");
    assert_eq!(summary["protocol"], 3, "{summary}");
    assert_eq!(summary["power_cuts"], serde_json::Value::Null, "{summary}");

    // The flag's seed, not the environment's, in the differential test's own replay line.
    let out = String::from_utf8_lossy(&flag.stdout);
    assert!(out.contains("to run the same scripts again: RESERVATION_CONFORMANCE_SEED=9 "), "{out}");

    // --regressions FILE: the failing script's seed is written there, and the output says so.
    let out = String::from_utf8_lossy(&saved.stdout);
    assert_eq!(saved.status.code(), Some(1), "{}", text(&saved));
    let kept = std::fs::read_to_string(saving.join("saved/conform.txt")).unwrap_or_else(|e| panic!("{e}:\n{out}"));
    assert!(kept.lines().any(|l| l.starts_with("cc ")), "{kept}");
    assert!(out.contains("the failing script's seed is in saved/conform.txt"), "{out}");
    assert!(out.contains("--only differential --regressions saved/conform.txt\n"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn serve_answers_what_it_cannot_read_with_the_requests_id_and_closes_stores() {
    use std::io::Write;
    let scope = r#""scope":{"aggregate_type":"u","tenant":"t","namespace":"n"}"#;
    let owner = r#""owner":{"aggregate_type":"u","tenant":"t","id":"a"}"#;
    let reserve = |id: u32, now: &str, ttl: &str| {
        format!(
            r#"{{"id":{id},"op":"reserve","store":0,"now":{now},{scope},"key":"k",{owner},"hold":"h","ttl":{ttl}}}"#
        )
    };
    let lookup = |id: u32| format!(r#"{{"id":{id},"op":"lookup","store":0,"now":5,{scope},"key":"k"}}"#);
    let mut lines: Vec<Vec<u8>> = vec![
        br#"{"id":1,"op":"open","store":0,"now":-0}"#.to_vec(),
        reserve(2, "5", "1e400").into_bytes(),
        reserve(3, "5", &"9".repeat(1_000_000)).into_bytes(),
        reserve(4, "-0", "5").into_bytes(),
        format!(r#"{{"id":5,"op":"confirm","store":0,"now":5,{scope},"key":"k",{owner},"version":-0}}"#).into_bytes(),
    ];
    // A namespace with a byte that is not UTF-8; a line of 2 MiB; then the session goes on.
    let mut not_utf8 = lookup(6).replace("\"n\"", "\"n#\"").into_bytes();
    let at = not_utf8.iter().position(|b| *b == b'#').expect("marked");
    not_utf8[at] = 0xff;
    lines.push(not_utf8);
    lines.push(
        format!(r#"{{"id":7,"op":"lookup","store":0,"now":5,{scope},"key":"{}"}}"#, "x".repeat(2 << 20)).into_bytes(),
    );
    lines.push(lookup(8).into_bytes());
    lines.push(br#"{"id":9,"op":"close","store":0}"#.to_vec());
    lines.push(lookup(10).into_bytes());
    lines.push(br#"{"id":11,"op":"close","store":0}"#.to_vec());
    assert!(std::str::from_utf8(&lines[5]).is_err(), "line 6 is not UTF-8");
    let mut child = Command::new(env!("CARGO_BIN_EXE_reservation"))
        .arg("serve")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("serve started");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        for line in lines {
            // serve may end early (the failure below says so): stop writing then.
            if stdin.write_all(&line).and_then(|()| stdin.write_all(b"\n")).is_err() {
                return;
            }
        }
    });
    let out = child.wait_with_output().expect("serve ended");
    writer.join().expect("written");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let answers: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    let shown: Vec<String> = answers
        .iter()
        .map(|a| {
            let said = a["error"]["name"].as_str().map_or_else(|| a["ok"].to_string(), str::to_owned);
            format!("{}: {said}", a["id"])
        })
        .collect();
    let expected = [
        "1: null",
        "2: Unrepresentable",
        "3: Unrepresentable",
        "4: \"Taken\"",
        "5: \"Confirmed\"",
        "6: Unrepresentable",
        "null: Unrepresentable",
        "8: {\"owner\":{\"aggregate_type\":\"u\",\"id\":\"a\",\"tenant\":\"t\"},\"state\":\"confirmed\",\"version\":0}",
        "9: null",
        "10: Unrepresentable",
        "11: Unrepresentable",
    ];
    assert_eq!(shown, expected);
    let message = |i: usize| answers[i]["error"]["message"].as_str().unwrap_or("").to_owned();
    assert!(message(1).contains("out of range"), "{}", message(1));
    assert!(message(5).contains("not UTF-8"), "{}", message(5));
    assert!(message(6).contains("longer than 1048576 bytes"), "{}", message(6));
    assert!(message(9).contains("no store 0 is open") && message(10) == message(9), "{}", message(10));
}

#[test]
fn conform_command_ends_soon_after_the_adapter_stops_answering() {
    // `reservation serve`, cut off after its first 3,000 answers: it goes on reading, answers
    // nothing more, and stays alive.
    let adapter = format!("{} serve | {{ sed -u 3000q; cat > /dev/null; }}", env!("CARGO_BIN_EXE_reservation"));
    // Its own directory: the failing differential check keeps its seed in a regression file there.
    let dir = std::env::temp_dir().join(format!("reservation-silent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let (out, err) = (dir.join("out"), dir.join("err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_reservation"))
        .args(["conform", "--command", &adapter])
        .current_dir(&dir)
        .stdout(std::fs::File::create(&out).expect("a file"))
        .stderr(std::fs::File::create(&err).expect("a file"))
        .spawn()
        .expect("conform started");
    // PROTOCOL.md's bound is one timeout (10 s) and a little; much more is a hang.
    let started = std::time::Instant::now();
    while child.try_wait().expect("waited").is_none() {
        if started.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("reservation conform --command still ran after {:?}", started.elapsed());
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let took = started.elapsed();
    let status = child.wait().expect("ended");
    let out = std::fs::read_to_string(&out).expect("its output") + &std::fs::read_to_string(&err).expect("its errors");
    assert_eq!(status.code(), Some(1), "{out}");
    // The check that met the silence says so; every later one points back to it.
    assert!(out.contains("no answer within 10s") && out.contains("broke the protocol earlier"), "{out}");
    // One timeout and a second after the silence, which comes a few seconds in: the run ends
    // there, not after the fault check's own waits on a store that no longer answers.
    assert!(took < std::time::Duration::from_secs(25), "the run took {took:?}:\n{out}");
    eprintln!("reservation conform --command ended {took:?} after it started");
    std::fs::remove_dir_all(&dir).expect("removed");
}

/// `conform --command … --fault crash=COMMAND`: the fault check runs the command on its schedule
/// (here it only counts its runs, in a file), and passes on a store that loses nothing; a command
/// that fails fails the check, quoting what it said; a fault the suite causes itself, or no
/// command, is refused as a bad argument.
#[test]
fn conform_command_fires_the_faults_given_by_command() {
    if !python3() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("reservation-fault-commands-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let fired = dir.join("fired");
    let adapter = format!("python3 {PYTHON_STORE}");
    let run_seed = |seed: &str, faults: &[String]| {
        let mut args = vec!["conform".to_owned(), "--command".to_owned(), adapter.clone()];
        args.extend(["--only".to_owned(), "p1_faults".to_owned(), "--seed".to_owned(), seed.to_owned()]);
        for fault in faults {
            args.extend(["--fault".to_owned(), fault.clone()]);
        }
        Command::new(env!("CARGO_BIN_EXE_reservation")).args(&args).output().expect("the binary ran")
    };
    // The seed drives the fault schedule, paced in wall time: seed 2's first three command faults
    // are crashes, and a loaded machine still left one run no time for any; the next seeds are
    // tried until the command has run.
    let run = |faults: &[String]| run_seed("2", faults);
    let logged = [format!("crash=echo crash >> {}", fired.display()), "pause=sleep 0.01".to_owned()];
    let mut o = run(&logged);
    for seed in ["3", "4", "5"] {
        if std::fs::read_to_string(&fired).is_ok_and(|r| !r.is_empty()) {
            break;
        }
        o = run_seed(seed, &logged);
    }
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let runs = std::fs::read_to_string(&fired).unwrap_or_default();
    assert!(
        runs.lines().count() > 0 && runs.lines().all(|l| l == "crash"),
        "the crash command never ran:\n{}",
        text(&o)
    );

    // The same faults offered, so that the same seed's first command fault is this crash.
    let failing = ["crash=echo the database would not stop >&2; exit 3".to_owned(), "pause=sleep 0.01".to_owned()];
    let mut o = run(&failing);
    for seed in ["3", "4", "5"] {
        if o.status.code() != Some(0) {
            break;
        }
        o = run_seed(seed, &failing);
    }
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("could not be caused") && out.contains("the database would not stop"), "{out}");

    for bad in ["restart=true", "crash=", "crash", "meteor=true"] {
        let o = run(&[bad.to_owned()]);
        assert_eq!(o.status.code(), Some(64), "--fault {bad}: {}", text(&o));
    }
    // A fault it does not know is refused naming every one a command causes.
    let said = text(&run(&["meteor=true".to_owned()]));
    assert!(said.contains("(cut-connections, crash, pause, failover, partition, long-pause)"), "{said}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One seed replays the whole run, the fault schedule included: `conform --seed 1` twice fires the
/// same faults in the same order (a run on a loaded machine may end before its last faults, so
/// the shorter schedule is a prefix of the longer), and another seed fires another schedule.
#[test]
fn conform_command_with_one_seed_fires_the_same_fault_schedule_twice() {
    if !python3() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("reservation-fault-schedule-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let schedule = |seed: &str, run: &str| {
        let log = dir.join(run);
        let log = log.display();
        let faults = [
            format!("crash=echo crash >> {log}"),
            format!("pause=echo pause >> {log}"),
            format!("cut-connections=echo cut >> {log}"),
        ];
        let mut args: Vec<String> = ["conform", "--command", &format!("python3 {PYTHON_STORE}"), "--only", "p1_faults"]
            .map(String::from)
            .into();
        args.extend(["--seed".to_owned(), seed.to_owned()]);
        for fault in faults {
            args.extend(["--fault".to_owned(), fault]);
        }
        let o = Command::new(env!("CARGO_BIN_EXE_reservation")).args(&args).output().expect("the binary ran");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        std::fs::read_to_string(dir.join(run)).unwrap_or_default().lines().map(String::from).collect::<Vec<_>>()
    };
    // The five runs at once: each paces its faults in wall time, which they spend waiting.
    let runs = [("1", "first"), ("1", "second"), ("2", "seed-2"), ("3", "seed-3"), ("4", "seed-4")];
    let mut schedules = all_at_once(&runs.map(|(seed, run)| move || schedule(seed, run))).into_iter();
    let (one, two) = (schedules.next().unwrap_or_default(), schedules.next().unwrap_or_default());
    let shorter = one.len().min(two.len());
    assert!(shorter >= 2, "too few faults fired to compare: {one:?} {two:?}");
    assert_eq!(one[..shorter], two[..shorter], "one seed fired two schedules");
    let others: Vec<Vec<String>> = schedules.collect();
    assert!(
        others.iter().any(|other| other[..shorter.min(other.len())] != one[..shorter.min(other.len())]),
        "three other seeds fired the schedule of seed 1: {one:?} {others:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `conform --command` sends the requests the typed API cannot make, as the driver's harness
/// does: the Python store that reads `1.0` as a number is caught by the argument sweep (D6).
#[test]
fn conform_command_sends_raw_requests_and_catches_a_lenient_adapter() {
    if !python3() {
        return;
    }
    let adapter = format!("RESERVATION_PY_BUG=lenient-numbers python3 {PYTHON_STORE}");
    let o = reservation(&["conform", "--command", &adapter, "--only", "d6_every"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("d6_every_invalid_argument_in_every_state_changes_nothing") && out.contains("D6"), "{out}");
}

const WAL_STORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/python/wal_store.py");

/// `conform --command … --fault crash=COMMAND` on the Python store with a write-ahead log, run as
/// PROTOCOL.md shows it: the crash check crashes it by the command and passes the correct store,
/// saying durability was checked through crashes; a recovery bug fails it, headlined by its rule
/// with the key and field, and the same `--seed` gives the same failure.
#[test]
fn conform_command_crash_check_catches_a_recovery_bug_and_the_seed_replays_it() {
    if !python3() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("reservation-crash-commands-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    // Each run's adapter writes its process id to a file of its own, which its crash command reads.
    let run = |n: usize, bug: &str, seed: &str| {
        let pid = dir.join(format!("wal-{n}.pid"));
        let adapter = format!("echo $$ > {}; RESERVATION_WAL_BUG={bug} exec python3 {WAL_STORE}", pid.display());
        let crash = format!("crash=kill -USR1 $(cat {})", pid.display());
        let args = ["conform", "--command", &adapter, "--fault", &crash, "--only", "p1_crashes", "--seed", seed];
        Command::new(env!("CARGO_BIN_EXE_reservation")).args(args).output().expect("the binary ran")
    };
    // The four runs at once: each waits on its adapter's restarts more than it computes.
    let runs = [
        (0, "", "5"),
        (1, "log-requested-version", "5"),
        (2, "log-requested-version", "5"),
        (3, "clock-not-restored", "6"),
    ];
    let [o, o_bug, again, o_clock] = all_at_once(&runs.map(|(n, bug, seed)| move || run(n, bug, seed)));
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("ok      p1_crashes_at_chosen_points_keep_every_state"), "{out}");
    assert!(out.contains("checked through crashes the harness caused"), "{out}");

    let out = text(&o_bug);
    assert_eq!(o_bug.status.code(), Some(1), "{out}");
    assert!(
        out.contains("rule P1 broken") && out.contains("the version changed") && out.contains("after crash"),
        "{out}"
    );
    let problem = |out: &str| out.lines().find(|l| l.starts_with("problem:")).map(str::to_owned);
    assert_eq!(problem(&out), problem(&text(&again)), "the same seed failed otherwise:\n{}", text(&again));

    let o = o_clock;
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("rule D10 broken") && out.contains("clock went back across the crash"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs each of `runs` on a thread of its own, all at once, and returns what each returned, in
/// order; a run's panic is this thread's.
fn all_at_once<T: Send, const N: usize>(runs: &[impl Fn() -> T + Sync; N]) -> [T; N] {
    std::thread::scope(|scope| {
        let threads = runs.each_ref().map(|run| scope.spawn(run));
        threads.map(|t| t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}

/// Fails unless every check `out` reports starts with one of `prefixes`.
fn assert_only_ran(out: &str, prefixes: &[&str]) {
    let ran = out.lines().filter_map(|line| line.split("ok      ").nth(1)).filter_map(|rest| rest.split(' ').next());
    for check in ran {
        assert!(prefixes.iter().any(|p| check.starts_with(p)), "{check} ran, not asked for:\n{out}");
    }
}

/// `reservation conform STORE ARGS…` against the server the store's tests use: its output once it
/// exited 0, or `None` when no server answered (a failure under `RESERVATION_REQUIRE_SERVICES=1`).
fn conform_on_server(store: &str, name: &str, service: &str, args: &[&str]) -> Option<String> {
    let o = reservation(&[&["conform", store], args].concat());
    let out = text(&o);
    if out.contains(&format!("{name}: DOES NOT CONFORM: no server at")) {
        // Asked for by name, a missing server is a failure; the workspace's own store tests say
        // whether one was required.
        assert_eq!(o.status.code(), Some(1), "{out}");
        assert!(!reservation_conformance::services::services_required(), "no {service} server answered:\n{out}");
        return None;
    }
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains(&format!("{name}: conforms")), "{out}");
    Some(out)
}

#[test]
fn conform_redis_runs_the_checks_asked_for_and_the_durable_check_or_says_why_not() {
    let Some(out) = conform_on_server("redis", "RedisStore", "Redis", &["--only", "r1_", "--only", "p1_"]) else {
        return;
    };
    assert!(out.contains("RedisStore on an append-only redis-server: conforms"), "{out}");
    assert!(out.contains("ok      p1_durable"), "the durable check did not run:\n{out}");
    // The crash and power-cut checks too, each on an append-only server of its own.
    assert!(out.contains("ok      p1_crashes"), "the crash check did not run:\n{out}");
    assert!(out.contains("ok      p1_power_cuts"), "the power-cut check did not run:\n{out}");
    assert!(!out.contains("d10_the_clock_never"), "a check not asked for ran:\n{out}");
    assert!(out.contains("ok      r1_"), "the check asked for did not run:\n{out}");
    assert_only_ran(&out, &["r1_", "p1_"]);
}

#[test]
fn conform_postgres_runs_the_checks_asked_for_and_the_durable_check_or_says_why_not() {
    let Some(out) = conform_on_server("postgres", "PostgresStore", "PostgreSQL", &["--only", "r1_", "--only", "p1_"])
    else {
        return;
    };
    assert!(out.contains("p1_durable"), "the durable check did not run:\n{out}");
    assert!(out.contains("ok      r1_"), "the check asked for did not run:\n{out}");
    assert_only_ran(&out, &["r1_", "p1_"]);
    // The crash and power-cut checks on a cluster of its own, which it crashes and starts on a
    // disk that can lose power; or a line saying why not.
    let own = "PostgresStore on a cluster of its own";
    if out.contains(&format!("{own}: skipped: no cluster of its own")) {
        assert!(!reservation_conformance::services::services_required(), "{out}");
        return;
    }
    assert!(out.contains(&format!("{own}: conforms")), "{out}");
    // Its crash note (the shared server's, before it, crashes nothing).
    let crashed = out.lines().any(|l| {
        l.starts_with("note: p1_crashes") && l.contains("crashes through Fault::Crash") && !l.contains(" 0 crashes")
    });
    assert!(crashed, "no crash of its own server:\n{out}");
    assert!(out.contains("ok      p1_power_cuts"), "the power-cut check did not run:\n{out}");
    // Where FUSE mounts (required with the services), eight cuts were made.
    if reservation_conformance::services::services_required() {
        assert!(out.contains("8 power cuts"), "{out}");
    }
}

/// Without the means to make a cluster of its own (no `pg_createcluster` on the `PATH`), `conform
/// postgres` skips the checks it runs there, saying why, and still conforms; with the services
/// required, it does not conform.
#[test]
fn conform_postgres_without_clusters_of_its_own_skips_their_checks_or_fails_when_required() {
    for required in [false, true] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_reservation"));
        command.args(["conform", "postgres", "--only", "p1_crashes"]).env("PATH", "/nonexistent");
        if required {
            command.env("RESERVATION_REQUIRE_SERVICES", "1");
        } else {
            command.env_remove("RESERVATION_REQUIRE_SERVICES");
        }
        let o = command.output().expect("reservation ran");
        let out = text(&o);
        if out.contains("PostgresStore: DOES NOT CONFORM: no server at") {
            assert!(!reservation_conformance::services::services_required(), "no PostgreSQL server answered:\n{out}");
            return;
        }
        let own = "PostgresStore on a cluster of its own";
        if required {
            assert!(out.contains(&format!("{own}: DOES NOT CONFORM: no cluster of its own: ")), "{out}");
            assert_eq!(o.status.code(), Some(1), "{out}");
        } else {
            assert!(out.contains(&format!("{own}: skipped: no cluster of its own: ")), "{out}");
            assert!(out.contains("PostgresStore: conforms"), "{out}");
            assert_eq!(o.status.code(), Some(0), "{out}");
        }
    }
}

/// The long tier (`reservation_conformance::tiers`): run by its own command, and by CI.
mod long {
    use super::*;

    #[test]
    fn conform_redis_runs_the_whole_suite_and_the_durable_check_or_says_why_not() {
        if !reservation_conformance::tiers::long_tier(
            "commands::long::conform_redis_runs_the_whole_suite_and_the_durable_check_or_says_why_not",
        ) {
            return;
        }
        let Some(out) = conform_on_server("redis", "RedisStore", "Redis", &[]) else { return };
        assert!(out.contains("RedisStore on an append-only redis-server: conforms"), "{out}");
        assert!(out.contains("ok      p1_durable"), "the durable check did not run:\n{out}");
        assert!(out.contains("differential"), "the differential check did not run:\n{out}");
    }

    #[test]
    fn conform_postgres_runs_the_whole_suite_or_says_why_not() {
        if !reservation_conformance::tiers::long_tier(
            "commands::long::conform_postgres_runs_the_whole_suite_or_says_why_not",
        ) {
            return;
        }
        let Some(out) = conform_on_server("postgres", "PostgresStore", "PostgreSQL", &[]) else { return };
        assert!(out.contains("p1_durable"), "the durable check did not run:\n{out}");
        assert!(out.contains("differential"), "the differential check did not run:\n{out}");
    }
}

/// A JUnit test case: its suite, its name, and its failure's message if it failed.
type JunitCase = (String, String, Option<String>);

/// The test cases of the JUnit document at `path`, and the suites' properties.
fn junit_cases(path: &std::path::Path) -> (Vec<JunitCase>, Vec<(String, String)>) {
    let xml = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc = roxmltree::Document::parse(&xml).unwrap_or_else(|e| panic!("not XML: {e}\n{xml}"));
    assert_eq!(doc.root_element().tag_name().name(), "testsuites", "{xml}");
    let mut cases = Vec::new();
    for suite in doc.descendants().filter(|n| n.has_tag_name("testsuite")) {
        let name = suite.attribute("name").expect("a suite's name").to_owned();
        for case in suite.children().filter(|n| n.has_tag_name("testcase")) {
            let failure = case.children().find(|n| n.has_tag_name("failure"));
            let message = failure.map(|f| f.attribute("message").expect("a failure's message").to_owned());
            cases.push((name.clone(), case.attribute("name").expect("a case's name").to_owned(), message));
        }
    }
    let properties = doc
        .descendants()
        .filter(|n| n.has_tag_name("property"))
        .map(|p| {
            (p.attribute("name").unwrap_or_default().to_owned(), p.attribute("value").unwrap_or_default().to_owned())
        })
        .collect();
    (cases, properties)
}

/// `conform --junit FILE` writes the run as JUnit XML beside its text: MemoryStore's checks each a
/// passing case under the store's suite, the seed and the replay command as properties; the
/// Python store with its expiry-boundary bug, through `--command`, its failing check a case whose
/// failure's message is the report's headline; both valid by the project's JUnit schema (where
/// xmllint is installed). A report that cannot be written fails the run.
/// `conform --report DIR`: a page for each failed check, in a directory of the store's, its
/// history beside it; none for a run that passes. (The pages' drawing, in a browser:
/// `reservation-conformance`'s test `pages`.)
#[test]
fn conform_writes_a_page_for_each_failed_check() {
    let dir = std::env::temp_dir().join(format!("reservation-pages-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let report = dir.to_str().expect("a path");
    let o = reservation(&["conform", "memory", "--only", "r3_", "--report", report]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!dir.exists(), "a passing run wrote pages");
    if !python3() {
        return;
    }
    let adapter = format!("RESERVATION_PY_BUG=expiry-boundary python3 {PYTHON_STORE}");
    let o = reservation(&[
        "conform",
        "--command",
        &adapter,
        "--only",
        "linearizability",
        "--seed",
        "3",
        "--report",
        report,
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let pages = dir.join("adapter");
    assert!(text(&o).contains(&format!("the pages of the 1 failed checks are in {}", pages.display())), "{}", text(&o));
    let page = std::fs::read_to_string(pages.join("linearizability_under_threads.html")).expect("the page");
    assert!(page.starts_with("<!DOCTYPE html>") && page.contains("\"check\":\"linearizability_under_threads\""));
    let history = std::fs::read_to_string(pages.join("linearizability_under_threads.json")).expect("its history");
    let history: serde_json::Value = serde_json::from_str(&history).expect("JSON");
    assert!(history["events"].as_array().is_some_and(|e| !e.is_empty()), "{history}");
    assert!(history["failure"]["failing"].is_u64(), "{history}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn conform_writes_a_junit_report_that_ci_systems_read() {
    let dir = std::env::temp_dir().join(format!("reservation-junit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let memory = dir.join("memory.xml");
    let o = reservation(&[
        "conform",
        "memory",
        "--only",
        "r3_",
        "--seed",
        "5",
        "--junit",
        memory.to_str().expect("a path"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (cases, properties) = junit_cases(&memory);
    let printed = text(&o).lines().filter(|l| l.trim_start().starts_with("ok ")).count();
    assert!(!cases.is_empty() && cases.len() == printed, "{cases:?}\n{}", text(&o));
    assert!(
        cases
            .iter()
            .all(|(suite, case, failure)| suite == "MemoryStore" && case.starts_with("r3_") && failure.is_none()),
        "{cases:?}"
    );
    assert!(properties.contains(&("seed".to_owned(), "5".to_owned())), "{properties:?}");
    let replay = properties.iter().find(|(k, _)| k == "replay").map(|(_, v)| v.as_str()).unwrap_or_default();
    assert!(replay.starts_with("reservation conform memory --seed 5 ") && replay.contains("--only r3_"), "{replay}");
    crate::junit::validates(&memory);
    // A file that cannot be written: the run fails, saying so.
    let nowhere = dir.join("no-such-directory").join("report.xml");
    let o = reservation(&["conform", "memory", "--only", "r3_", "--junit", nowhere.to_str().expect("a path")]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("cannot write the JUnit report to"), "{}", text(&o));
    if python3() {
        let failing = dir.join("python.xml");
        let adapter = format!("RESERVATION_PY_BUG=expiry-boundary python3 {PYTHON_STORE}");
        let args = ["conform", "--command", &adapter, "--only", "differential", "--cases", "300"];
        let o = reservation(&[&args[..], &["--junit", failing.to_str().expect("a path")]].concat());
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let (cases, _) = junit_cases(&failing);
        let failed: Vec<&String> = cases.iter().filter_map(|(_, _, f)| f.as_ref()).collect();
        assert!(!failed.is_empty() && failed.iter().all(|m| m.contains("rule D1 broken")), "{cases:?}");
        assert!(cases.iter().all(|(suite, _, _)| *suite == adapter), "{cases:?}");
        crate::junit::validates(&failing);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
