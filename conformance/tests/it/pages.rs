//! Failed checks as pages (`reservation_conformance::page`), from the planted broken stores: a
//! lost update (the linearizability check), acknowledged confirmations lost across reopens (the
//! fault check), a record acknowledged before it was written (the crash check), holds compared
//! ignoring case (the differential check). Each page is written where the settings say, its
//! history beside it as JSON, and opened in headless Chromium, as a user would open it: the
//! lanes and bars are there, the failing operation is marked, the key filter hides the other
//! keys, and the page reports no error of its own. Without Chromium (Debian: `apt-get install
//! chromium`) the browser half says so in one line and passes, unless
//! `RESERVATION_REQUIRE_SERVICES=1`.
//!
//! With `RESERVATION_PAGE_EXAMPLES=DIR`, the pages are copied there too: `docs/pages` keeps
//! them as examples.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use reservation_conformance::crashes::CrashSettings;
use reservation_conformance::services::service;
use reservation_conformance::{CheckResult, Failure, Report, Settings, page, run_matching};
use serde_json::Value;

use crate::broken_stores::{BrokenHarness, Bug, settings};
use crate::wal::{Bug as WalBug, WalHarness};

/// A directory of this test's own, emptied.
fn fresh(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("reservation-pages-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The one failure of `report`.
fn the_failure(report: &Report) -> &Failure {
    let failures: Vec<&Failure> = report.failures().collect();
    assert_eq!(failures.len(), 1, "{report}");
    failures[0]
}

/// The Chromium on the path, or `None`, said once (a failure under `RESERVATION_REQUIRE_SERVICES=1`).
fn chromium() -> Option<&'static str> {
    let found = ["chromium", "chromium-browser", "google-chrome"].into_iter().find(|c| {
        Command::new(c).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    });
    service("Chromium (apt-get install chromium)", found.ok_or("no chromium, chromium-browser or google-chrome"))
}

/// What headless Chromium shows of the page at `path` (with `fragment` after `#`): its DOM once
/// its script ran, and what the browser logged of the page's console.
fn open(browser: &str, path: &Path, fragment: &str) -> (String, String) {
    let url = format!("file://{}#{fragment}", path.display());
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
            &url,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {browser}: {e}"));
    let console: String = String::from_utf8_lossy(&out.stderr).lines().filter(|l| l.contains("CONSOLE")).collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), console)
}

/// How many elements the script drew that start `start` and go on with a number (the script's
/// own text, which the DOM holds too, goes on with a quote).
fn drawn(dom: &str, start: &str) -> usize {
    dom.match_indices(start).filter(|(i, _)| dom[i + start.len()..].starts_with(|c: char| c.is_ascii_digit())).count()
}

/// How many bars are marked failing.
fn marked_failing(dom: &str) -> usize {
    dom.matches(" failing\" data-i=\"").count()
}

/// The keys of the bars a DOM shows, each once.
fn keys_shown(dom: &str) -> std::collections::BTreeSet<String> {
    let key = |k: &&str| k.strip_prefix('k').is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    dom.split("data-key=\"").skip(1).filter_map(|rest| rest.split('"').next()).filter(key).map(str::to_owned).collect()
}

/// The page drew, and reported no error of its own, and the console holds none.
fn drew_cleanly(dom: &str, console: &str) {
    assert!(dom.contains("data-drawn="), "the page's script did not finish:\n{dom}");
    assert!(!dom.contains("data-errors="), "the page reported an error:\n{dom}");
    assert!(!console.contains("Uncaught") && !console.contains("Error"), "the console holds an error: {console}");
}

/// The page of `failure` in `dir` (and its history), as the runner wrote it; copied to
/// `RESERVATION_PAGE_EXAMPLES` as `example` when that is set.
fn written(dir: &Path, failure: &Failure, example: &str) -> PathBuf {
    let path = dir.join(format!("{}.html", failure.check));
    assert!(path.is_file(), "no page at {}", path.display());
    if let Some(examples) = std::env::var_os("RESERVATION_PAGE_EXAMPLES") {
        let examples = PathBuf::from(examples);
        std::fs::create_dir_all(&examples).expect("the examples' directory");
        std::fs::copy(&path, examples.join(format!("{example}.html"))).expect("an example copied");
    }
    path
}

/// The history written beside the page of `failure` in `dir`.
fn history(dir: &Path, failure: &Failure) -> Value {
    let text =
        std::fs::read_to_string(dir.join(format!("{}.json", failure.check))).expect("the history beside the page");
    serde_json::from_str(&text).expect("the history is JSON")
}

#[test]
fn a_lost_update_is_drawn_with_a_lane_per_thread_and_the_operation_no_order_places() {
    let dir = fresh("lost-update");
    // A race shows in some histories only: a few seeds, as the broken stores' own test gives it.
    let report = (7..12)
        .map(|seed| {
            let settings = settings().with_seed(seed).with_report_dir(&dir);
            run_matching(&BrokenHarness(Bug::ReadThenWrite), &settings, |n| n == "linearizability_under_threads")
        })
        .find(|r| !r.is_ok())
        .expect("a read then a write without a lock was caught");
    let failure = the_failure(&report);
    assert!(report.notes.iter().any(|n| n.contains("the pages of the 1 failed checks are in")), "{report}");
    let drawing = failure.drawing.as_ref().expect("the history behind the failure");
    let (key, failing) = (drawing.key.expect("a key"), drawing.failing.expect("a failing operation"));
    let events = &drawing.history.events;
    let failing_op = events.iter().find(|e| e.called == failing).expect("the failing operation is in the history");
    assert_eq!(failing_op.key, key);
    assert!(events.iter().any(|e| e.key != key), "the whole history, every key, is drawn");
    for stamp in &drawing.placed {
        let placed = events.iter().find(|e| e.called == *stamp).expect("a placed operation is in the history");
        assert!(placed.key == key && placed.called < failing, "placed: {placed:?}");
    }
    assert!(!drawing.states.is_empty(), "the states after the last placed operations");
    let json = history(&dir, failure);
    assert_eq!(json["failure"]["failing"], failing);
    assert_eq!(json["events"].as_array().map(Vec::len), Some(events.len()));
    let path = written(&dir, failure, "lost-update");

    let Some(browser) = chromium() else { return };
    let (dom, console) = open(browser, &path, "");
    drew_cleanly(&dom, &console);
    let threads = events.iter().map(|e| e.thread).max().expect("operations") + 1;
    assert_eq!(drawn(&dom, "<g class=\"lane\" data-thread=\""), threads, "a lane per thread");
    assert!(drawn(&dom, "data-i=\"") > 1, "bars");
    assert_eq!(marked_failing(&dom), 1, "the failing operation, marked once:\n{dom}");
    assert!(dom.contains(" placed\" data-i="), "the operations the search placed, marked");
    assert!(dom.contains("atomicity (H1)"), "the headline");
    assert!(dom.contains("RESERVATION_CONFORMANCE_SEED="), "the replay line");
    // The page opens on the failing key; every key, and one other key alone, on asking.
    assert_eq!(keys_shown(&dom), [format!("k{key}")].into(), "the failing key alone");
    let (every, console) = open(browser, &path, "key=all&view=whole");
    drew_cleanly(&every, &console);
    let all = keys_shown(&every);
    assert!(all.len() > 1, "every key: {all:?}");
    let other = all.iter().find(|k| **k != format!("k{key}")).expect("another key");
    let (filtered, console) = open(browser, &path, &format!("key={other}&view=whole"));
    drew_cleanly(&filtered, &console);
    assert_eq!(keys_shown(&filtered), [other.clone()].into(), "the filter hides the other keys");
    assert_eq!(marked_failing(&filtered), 0, "the failing operation is another key's");
}

#[test]
fn confirmations_lost_across_reopens_are_drawn_with_the_faults_as_bands() {
    let dir = fresh("fault-check");
    let check = "p1_faults_on_a_seeded_schedule_lose_no_acknowledged_confirmation";
    let report = run_matching(&BrokenHarness(Bug::ForgetsConfirmed), &settings().with_report_dir(&dir), |n| n == check);
    let failure = the_failure(&report);
    let drawing = failure.drawing.as_ref().expect("the history behind the failure");
    assert!(!drawing.bands.is_empty(), "the faults fired: {failure}");
    assert!(drawing.failing.is_some(), "{failure}");
    let path = written(&dir, failure, "lost-confirmations");
    let Some(browser) = chromium() else { return };
    let (dom, console) = open(browser, &path, "view=whole");
    drew_cleanly(&dom, &console);
    assert!(dom.contains("<g class=\"band\"><rect"), "the faults, as bands:\n{dom}");
    assert!(dom.contains(&drawing.bands[0].label), "a band's label");
}

#[test]
fn a_record_acknowledged_before_it_was_written_is_drawn_across_its_crash() {
    let dir = fresh("crash-check");
    let settings = Settings::from(CrashSettings::default()).with_seed(1);
    let run = reservation_conformance::crashes::run(&WalHarness::new(Some(WalBug::AckBeforeWrite)), &settings);
    let failure = run.verdict.expect_err("the acknowledgement before the write was caught");
    let drawing = failure.drawing.as_ref().expect("the history behind the failure");
    assert!(!drawing.bands.is_empty() && drawing.failing.is_some(), "{failure}");
    let differs = drawing.differs.clone().expect("what differs");
    assert!(differs.contains("allows only"), "{differs}");
    page::write_page(&dir, &failure).expect("the page written");
    let path = written(&dir, &failure, "crash");
    let Some(browser) = chromium() else { return };
    let (dom, console) = open(browser, &path, "");
    drew_cleanly(&dom, &console);
    assert_eq!(marked_failing(&dom), 1, "the wrong answer, marked:\n{dom}");
    assert!(dom.contains("<g class=\"band\"><rect"), "the crash, as a band");
    assert!(dom.contains("allows only"), "what differs, said");
}

#[test]
fn a_differential_failure_is_a_page_of_its_script_with_the_step_that_differs_marked() {
    let dir = fresh("differential");
    let check = "differential_against_the_specification";
    let report = run_matching(&BrokenHarness(Bug::HoldsIgnoreCase), &settings().with_report_dir(&dir), |n| n == check);
    let failure = the_failure(&report);
    assert!(failure.drawing.is_none(), "a script, not a history");
    assert!(!dir.join(format!("{check}.json")).exists(), "no history to write");
    let path = written(&dir, failure, "differential");
    let Some(browser) = chromium() else { return };
    let (dom, console) = open(browser, &path, "");
    drew_cleanly(&dom, &console);
    assert!(dom.contains("<section id=\"timeline\" hidden"), "no timeline without a history");
    assert!(dom.contains("class=\"differs\""), "the step that differs, marked:\n{dom}");
    // Side by side: the specification's answer and the store's.
    assert!(dom.contains("<section id=\"sides\">"), "the answers side by side, shown:\n{dom}");
    assert!(dom.contains("<td class=\"spec\">") && dom.contains("<td class=\"store\">"), "{dom}");
}

/// The browser checks can fail: a page whose data is not a failure's reports its error, and a
/// page of a passing run's history (no failing operation) marks none.
#[test]
fn a_page_that_cannot_draw_says_so() {
    let Some(browser) = chromium() else { return };
    let dir = fresh("broken-page");
    std::fs::create_dir_all(&dir).expect("a directory");
    let good = page::page(&Failure::without_rule("a_check", "a problem"));
    let broken = good.replacen("\"text\":", "\"text\":1,\"_\":", 1);
    assert_ne!(good, broken);
    let path = dir.join("broken.html");
    std::fs::write(&path, broken).expect("written");
    let (dom, _) = open(browser, &path, "");
    assert!(dom.contains("data-errors=\"1\""), "the page did not say it could not draw:\n{dom}");
    assert!(dom.contains("The page could not draw the failure"), "{dom}");
}

/// Every failed check of a run gets a page; a passing run writes none.
#[test]
fn pages_are_written_for_failed_checks_only() {
    let dir = fresh("passing");
    let report = run_matching(&BrokenHarness(Bug::None), &settings().with_report_dir(&dir), |n| n.starts_with("r3_"));
    assert!(report.is_ok() && report.checks.iter().all(|(_, r, _)| *r == CheckResult::Passed), "{report}");
    assert!(!dir.exists(), "a passing run wrote pages");
}
