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
