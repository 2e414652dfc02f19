//! The model's commands (`check`, `explore`, `swarm`: the `reservation_model` library) through
//! `reservation`, the one program that runs them: exit codes by verdict, JSON, bad values, and
//! every command line they print naming `reservation`.

use crate::{reservation, text};

#[test]
fn check_reports_json_and_exits_by_verdict() {
    let o = reservation(&["check", "--owners", "2", "--attempts", "1", "--json", "--quiet"]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        out.starts_with("{\"owners\":2,\"attempts\":1,") && out.contains("\"complete\":true,\"holds\":true"),
        "{out}"
    );
    let o = reservation(&["check", "--drop-assumption", "H8", "--owners", "2", "--strategy", "bfs", "--quiet"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("FAILS") && text(&o).contains("counterexample to"), "{}", text(&o));
    let o = reservation(&["check", "--timeout", "0.2", "--quiet"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// `figures` measures each configuration it is given, a line each with the ceiling's ratio and
/// its own peak memory, and exits by verdict: 0 complete, 2 stopped by its timeout (in JSON, one
/// object per configuration, named), 64 for a configuration it does not know.
#[test]
fn figures_prints_a_line_per_configuration_and_exits_by_verdict() {
    let o = reservation(&["figures", "--configurations", "default"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let line = out.lines().next().unwrap_or_default();
    assert!(line.starts_with("default (owners=3 attempts=2 keys=2 horizon=2 ttl=1 skew=1 assumptions=all): "), "{out}");
    let ratio = line.split(" MB, ratio to the ceiling ").nth(1).and_then(|r| r.split(':').next());
    assert!(line.contains(" processor s, peak ") && ratio.is_some_and(|r| r.parse::<f64>().is_ok()), "{out}");
    assert!(line.ends_with(": complete, every property holds, every rule reached"), "{out}");
    assert_eq!(out.lines().count(), 1, "{out}");
    let o = reservation(&["figures", "--configurations", "default,four-owners", "--json", "--timeout", "0.05"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("{\"name\":\"default\",\"owners\":3,"), "{out}");
    assert!(lines[1].starts_with("{\"name\":\"four-owners\",\"owners\":4,"), "{out}");
    assert!(lines.iter().all(|l| l.contains("\"complete\":false,") && l.contains("\"ratio_to_ceiling\":")), "{out}");
    let o = reservation(&["figures", "--configurations", "five-owners"]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    assert!(text(&o).contains("four-owners-three-keys"), "the names it knows:\n{}", text(&o));
}

/// A value out of bounds is refused, exit 64, whether clap refuses it (naming the flag) or the
/// model's configuration does (with the reason).
#[test]
fn bad_values_exit_64() {
    for timeout in ["-1", "NaN", "inf", "1e30", "0", "ten"] {
        let o = reservation(&["check", "--timeout", timeout]);
        assert_eq!(o.status.code(), Some(64), "--timeout {timeout}:\n{}", text(&o));
        // `-1` reads as a flag, which clap refuses with the usage.
        let says = text(&o);
        let named = says.contains("'--timeout <SECONDS>'") || says.contains("Usage: reservation check [OPTIONS]");
        assert!(named, "--timeout {timeout}:\n{says}");
    }
    for args in [&["check", "--threads", "0"][..], &["swarm", "--seeds", "5..5"], &["explore", "--port", "x"]] {
        let o = reservation(args);
        assert_eq!(o.status.code(), Some(64), "{args:?}:\n{}", text(&o));
        assert!(text(&o).contains(&format!("'{} <", args[1])), "{args:?}:\n{}", text(&o));
    }
    let o = reservation(&["check", "--owners", "9"]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    assert!(text(&o).contains("owners"), "a configuration out of bounds, said without its bound:\n{}", text(&o));
}

/// A failing swarm prints the command that replays its failing seed: a command of `reservation`,
/// which, run as printed, fails on the same seed the same way.
#[test]
fn a_failing_swarm_prints_a_replay_command_of_reservation_that_replays_it() {
    let o = reservation(&["swarm", "--drop-assumption", "H5", "--seeds", "0..20000", "--stop-at-failure", "--quiet"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = text(&o);
    let breaks =
        out.lines().find(|l| l.starts_with("seed ") && l.contains(" breaks ")).unwrap_or_else(|| panic!("{out}"));
    let replay = out
        .lines()
        .skip_while(|l| !l.contains("replay it with"))
        .nth(1)
        .map(str::trim)
        .unwrap_or_else(|| panic!("no replay command:\n{out}"));
    let words: Vec<&str> = replay.split_whitespace().collect();
    assert_eq!(words[..2], ["reservation", "swarm"], "{replay}");
    let again = reservation(&words[1..]);
    assert_eq!(again.status.code(), Some(1), "{replay}:\n{}", text(&again));
    assert!(text(&again).contains(breaks), "{replay} did not fail as {breaks:?}:\n{}", text(&again));
    assert!(text(&again).contains("swarm: 1 walks,"), "the replay ran more than its seed:\n{}", text(&again));
}

/// No line the model's commands print names a program other than `reservation`.
#[test]
fn the_model_s_commands_name_no_other_program() {
    for args in [
        &["check", "--help"][..],
        &["explore", "--help"],
        &["swarm", "--help"],
        &["check", "--bogus"],
        &["swarm", "--drop-assumption", "H5", "--seeds", "0..20000", "--stop-at-failure"],
    ] {
        let o = reservation(args);
        assert!(!text(&o).contains("reservation-model"), "{args:?}:\n{}", text(&o));
    }
}
