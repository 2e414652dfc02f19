//! Every command of `reservation` through the built binary: its output and its exit code.

use std::process::{Command, Output};

fn reservation(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reservation"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running reservation {args:?}: {e}"))
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn help_exits_0_and_names_every_command() {
    let o = reservation(&["--help"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    for command in ["check", "explore", "swarm", "conform", "all"] {
        assert!(text(&o).contains(&format!("reservation {command}")), "{command} missing:\n{}", text(&o));
    }
}

#[test]
fn bad_arguments_exit_64() {
    for args in [&[][..], &["frobnicate"], &["conform", "oracle"], &["conform", "memory", "sqlite"], &["all", "-v"]] {
        let o = reservation(args);
        assert_eq!(o.status.code(), Some(64), "reservation {args:?}:\n{}", text(&o));
        assert!(text(&o).contains("usage:"), "reservation {args:?} prints no usage:\n{}", text(&o));
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
fn conform_sqlite_runs_the_suite_on_a_scratch_file() {
    let o = reservation(&["conform", "sqlite"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("SqliteStore: conforms"), "{}", text(&o));
}

#[test]
fn conform_redis_runs_the_suite_and_the_durable_check_or_says_why_not() {
    let o = reservation(&["conform", "redis"]);
    let out = text(&o);
    if out.contains("RedisStore: DOES NOT CONFORM: no server at") {
        assert_eq!(o.status.code(), Some(1), "{out}");
        assert!(!reservation_conformance::services::services_required(), "no Redis server answered:\n{out}");
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("RedisStore: conforms"), "{out}");
    assert!(out.contains("RedisStore on an append-only redis-server: conforms"), "{out}");
    assert!(out.contains("ok      p1_durable"), "the durable check did not run:\n{out}");
}

#[test]
fn conform_postgres_runs_the_suite_or_says_why_not() {
    let o = reservation(&["conform", "postgres"]);
    let out = text(&o);
    if out.contains("PostgresStore: DOES NOT CONFORM: no server at") {
        // Asked for by name, a missing server is a failure; the workspace's own PostgreSQL
        // tests say whether one was required.
        assert_eq!(o.status.code(), Some(1), "{out}");
        assert!(!reservation_conformance::services::services_required(), "no PostgreSQL server answered:\n{out}");
        return;
    }
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("PostgresStore: conforms"), "{out}");
    assert!(out.contains("p1_durable"), "the durable check did not run:\n{out}");
}

#[test]
fn conform_all_without_servers_skips_their_stores_saying_so() {
    let run = |required: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_reservation"));
        command
            .args(["conform", "all"])
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
    let o = run(true);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("PostgresStore: DOES NOT CONFORM: no server at"), "{}", text(&o));
}

/// Validates every line of `path` against the protocol schema's definition `def`; the count.
fn valid_lines(path: &std::path::Path, def: &str) -> usize {
    let mut schema: serde_json::Value =
        serde_json::from_str(reservation_conformance::driver::SCHEMA).expect("the schema is JSON");
    schema["oneOf"] = serde_json::json!([{"$ref": format!("#/$defs/{def}")}]);
    let validator = jsonschema::draft202012::new(&schema).expect("a valid schema");
    let text = std::fs::read_to_string(path).expect("the copied lines");
    for line in text.lines() {
        let message: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        if let Err(e) = validator.validate(&message) {
            panic!("not a valid {def}: {e}: {line}");
        }
    }
    text.lines().count()
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
    let requests = valid_lines(&sent, "request");
    assert_eq!(requests, valid_lines(&answered, "answer"), "every request is answered once");
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
    let status = child.wait().expect("ended");
    let out = std::fs::read_to_string(&out).expect("its output") + &std::fs::read_to_string(&err).expect("its errors");
    assert_eq!(status.code(), Some(1), "{out}");
    assert!(out.contains("no answer within 10s") && out.contains("stopped answering"), "{out}");
    eprintln!("reservation conform --command ended {:?} after it started", started.elapsed());
    std::fs::remove_dir_all(&dir).expect("removed");
}
