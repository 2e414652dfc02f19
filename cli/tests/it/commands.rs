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
    for args in [&[][..], &["frobnicate"], &["conform", "postgres"], &["conform", "memory", "sqlite"], &["all", "-v"]] {
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
