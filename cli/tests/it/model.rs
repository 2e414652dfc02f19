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

/// `check --report DIR`: with each assumption dropped, each counterexample as a sequence chart,
/// an SVG document that parses: a lifeline for each owner, each subscription and the store, a
/// row for each step of the counterexample as printed, the property broken at the end; and in
/// headless Chromium, where one is installed, a picture. A property that holds gets none; a
/// directory that cannot be written fails the run. With `RESERVATION_PAGE_EXAMPLES=DIR`, the
/// charts are copied there too (`docs/pages` keeps them as examples).
#[test]
fn check_writes_each_counterexample_as_a_sequence_chart() {
    let dir = std::env::temp_dir().join(format!("reservation-charts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let passing = dir.join("passing");
    let o = reservation(&["check", "--owners", "2", "--quiet", "--report", passing.to_str().expect("a path")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!passing.exists(), "a chart of a property that holds");
    for assumption in reservation_model::Assumption::ALL {
        let id = assumption.id();
        let charts = dir.join(id);
        let args = [
            "check",
            "--owners",
            "2",
            "--drop-assumption",
            id,
            "--quiet",
            "--report",
            charts.to_str().expect("a path"),
        ];
        let o = reservation(&args);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let written: Vec<&str> = out.lines().filter_map(|l| l.split(" as a sequence chart: ").nth(1)).collect();
        assert!(!written.is_empty(), "{id}: no chart\n{out}");
        for path in written {
            let svg = std::fs::read_to_string(path).expect("the chart");
            let doc = roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{path}: {e}"));
            let class = |c: &str| doc.descendants().filter(|n| n.attribute("class") == Some(c)).count();
            assert_eq!(class("lifeline"), 5, "{path}: two owners, their subscriptions, the store");
            // The property, and the steps, as the counterexample printed them.
            let property =
                out.lines().find(|l| l.contains(path)).and_then(|l| l.split('"').nth(1)).expect("the property named");
            let header = format!("counterexample to \"{property}\" (");
            let printed = out.split(&header).nth(1).expect("the counterexample printed");
            let steps: usize = printed.split(' ').next().and_then(|n| n.parse().ok()).expect("its steps");
            assert_eq!(class("step"), steps, "{path}");
            let violation = doc.descendants().find(|n| n.attribute("class") == Some("violation")).expect("the end");
            let said: String = violation.descendants().filter_map(|n| n.text()).collect();
            assert!(said.contains(property), "{said}");
            assert!(doc.descendants().any(|n| n.attribute("class") == Some("call")), "{path}: no call to the store");
            if let Some(examples) = std::env::var_os("RESERVATION_PAGE_EXAMPLES") {
                let examples = std::path::PathBuf::from(examples);
                std::fs::create_dir_all(&examples).expect("the examples' directory");
                let name = std::path::Path::new(path).file_name().expect("a file").to_string_lossy().into_owned();
                std::fs::copy(path, examples.join(format!("model-without-{id}-{name}"))).expect("copied");
            }
        }
    }
    let blocked = dir.join("a-file");
    std::fs::write(&blocked, "").expect("a file where the directory would go");
    let o = reservation(&[
        "check",
        "--owners",
        "2",
        "--drop-assumption",
        "H8",
        "--quiet",
        "--report",
        blocked.to_str().expect("a path"),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("cannot write the counterexamples' charts"), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `swarm --report DIR`: the first walk that broke each property as a sequence chart, named by
/// the property and the walk's seed, a row for each step of the walk's trace as printed.
#[test]
fn swarm_writes_the_first_failing_walk_of_each_property_as_a_sequence_chart() {
    let dir = std::env::temp_dir().join(format!("reservation-swarm-charts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let report = dir.to_str().expect("a path");
    let o =
        reservation(&["swarm", "--owners", "2", "--drop-assumption", "H8", "--seeds", "0..200", "--report", report]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let written: Vec<&str> = out.lines().filter_map(|l| l.split(" as a sequence chart: ").nth(1)).collect();
    assert_eq!(written.len(), 1, "one property broken, one chart:\n{out}");
    let path = written[0];
    let seed = path.split("-seed-").nth(1).and_then(|s| s.strip_suffix(".svg")).expect("named by its seed");
    assert!(out.contains(&format!("--seeds {seed}..")), "the seed of a failing walk:\n{out}");
    let svg = std::fs::read_to_string(path).expect("the chart");
    let doc = roxmltree::Document::parse(&svg).expect("an SVG document");
    let steps = doc.descendants().filter(|n| n.attribute("class") == Some("step")).count();
    // The first failing walk's trace, as printed: its steps are numbered from 1 until the next
    // trace starts again from 1.
    let numbers: Vec<usize> = out
        .lines()
        .filter_map(|l| l.trim_start().split_once(". [store t=").and_then(|(n, _)| n.parse().ok()))
        .collect();
    let first_trace = numbers.iter().enumerate().take_while(|(i, n)| **n == i + 1).count();
    assert!(first_trace > 0, "{out}");
    assert_eq!(steps, first_trace, "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}
