//! The power-cut check through the driver (PROTOCOL.md, "Power cuts"): the Python store that keeps
//! its rows in files (`adapters/python/file_store.py`) declares `"power_cuts": "names"` at
//! `hello`, is opened in the check's mount with `open`'s `dir`, and at each cut its process group
//! is killed and the adapter started again, to recover from what the cut left. The correct store
//! passes; each planted durability bug is caught P1 with its cause named.

use std::time::Duration;

use reservation_conformance::crashes::{CrashRun, power_cuts};
use reservation_conformance::driver::CommandHarness;
use reservation_conformance::services::service;
use reservation_conformance::{Harness, Persistence, Settings};
use reservation_store::rules::Rule;

const FILE_STORE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/python/file_store.py");

/// Whether python3 runs and FUSE mounts here (each said once where it does not).
fn can_run() -> bool {
    let present = std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if service(
        "python3 (for the Python file store behind the driver)",
        if present { Ok(()) } else { Err("not installed") },
    )
    .is_none()
    {
        return false;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    service("FUSE (a mount of /dev/fuse)", reservation_disk::Disk::mount(dir.path())).is_some()
}

/// The adapter's command with `bug` planted (`""`: none) and `args`.
fn command(bug: &str, args: &str) -> String {
    format!("RESERVATION_FILE_BUG={bug} exec python3 {FILE_STORE} {args}")
}

/// The power-cut check of the Python file store with `bug` on `seed`, promising `torn` for the
/// bug only a torn write shows and `names` otherwise.
fn cut_run(bug: &str, seed: u64) -> CrashRun {
    cut_run_with(bug, if bug == "torn-tail-read" { "--promise torn" } else { "" }, seed)
}

/// The power-cut check of the Python file store with `bug` and `args` on `seed`.
fn cut_run_with(bug: &str, args: &str, seed: u64) -> CrashRun {
    let harness = CommandHarness::start(&command(bug, args)).expect("the Python file store starts");
    power_cuts(&harness, &Settings::default().with_seed(seed))
}

#[test]
fn the_hello_of_a_store_that_survives_power_cuts_declares_its_model_and_the_harness_offers_it() {
    if !can_run() {
        return;
    }
    let harness = CommandHarness::start_with(&command("", ""), Duration::from_secs(10)).expect("it starts");
    assert_eq!(harness.hello().power_cuts, Some(Persistence::Names));
    let capabilities = harness.capabilities();
    assert!(capabilities.durable);
    assert_eq!(capabilities.power_cuts, Some(Persistence::Names));
    let harness = CommandHarness::start(&command("", "--promise torn")).expect("it starts");
    assert_eq!(harness.capabilities().power_cuts, Some(Persistence::Torn));
    // The store that promises nothing is offered no directory.
    let plain = CommandHarness::start(&format!("exec python3 {}", FILE_STORE.replace("file_store.py", "store.py")))
        .expect("store.py starts");
    assert_eq!(plain.capabilities().power_cuts, None);
    let dir = tempfile::tempdir().expect("a temporary directory");
    assert!(
        plain.store_in(dir.path(), reservation_store::ManualClock::new(reservation_store::Instant::ZERO)).is_none()
    );
}

#[test]
fn p1_the_correct_file_store_passes_the_power_cut_check_through_the_driver_restarted_at_every_cut() {
    if !can_run() {
        return;
    }
    let harness = CommandHarness::start(&command("", "")).expect("the Python file store starts");
    let before = harness.requests();
    let run = power_cuts(&harness, &Settings::default().with_seed(1));
    assert!(run.verdict.is_ok(), "{}", run.report);
    eprintln!("{}", run.report);
    let cuts = run.report.crashes.len();
    assert!(cuts >= 4, "the check made {cuts} cuts: {}", run.report);
    assert!(run.report.to_string().contains("inside the disk"), "{}", run.report);
    // Requests were sent to the adapters started after each cut, and counted.
    assert!(harness.requests() > before + 100, "{} requests", harness.requests() - before);
    // After the check the adapter, killed at its end, is started again for the next store: its
    // `hello`, the `open` and a lookup are three more requests, counted on top of the others.
    assert!(harness.broken().is_none());
    let sent = harness.requests();
    let store = harness.store(reservation_store::ManualClock::new(reservation_store::Instant::ZERO));
    let scope = reservation_store::ReservationScope::parse("user", Some("acme"), "user-name").expect("a scope");
    let key = reservation_store::Key::new("alice").expect("a key");
    assert_eq!(harness.block_on(reservation_store::ReservationStore::lookup(&store, &scope, &key)).ok(), Some(None));
    assert_eq!(harness.requests() - sent, 3);
}

/// Whether process `pid` runs (a zombie, dead and not yet reaped, does not).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.rsplit_once(") ").is_some_and(|(_, rest)| !rest.starts_with('Z')))
}

/// Every adapter process a cut ended is gone (killed, not left running beside the next one on
/// the disk that came back), and each cut started one more.
#[test]
fn p1_each_cut_kills_the_adapters_process_group_and_starts_it_again() {
    if !can_run() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pids = dir.path().join("pids");
    // A child of the adapter in its process group, which the kill must reach too.
    let adapter = format!("echo $$ >> {p}; sleep 600 & echo $! >> {p}; {}", command("", ""), p = pids.display());
    let harness = CommandHarness::start(&adapter).expect("the Python file store starts");
    let run = power_cuts(&harness, &Settings::default().with_seed(4));
    assert!(run.verdict.is_ok(), "{}", run.report);
    let cuts = run.report.crashes.len();
    let started = std::fs::read_to_string(&pids).expect("the process ids");
    let started: Vec<&str> = started.lines().collect();
    // The first adapter, one after each cut, and one more for the store the check ended with
    // (started on demand: none yet); each with its sleeping child.
    assert_eq!(started.len(), 2 * (cuts + 1), "{started:?} after {cuts} cuts");
    std::thread::sleep(Duration::from_millis(200));
    let left: Vec<&&str> = started.iter().filter(|pid| alive(pid)).collect();
    assert!(left.is_empty(), "processes a cut should have killed are running: {left:?} of {started:?}");
}

/// A harness dropped takes its adapter's whole process group with it: a process the adapter
/// started and left running (a server of its own) does not outlive the run.
#[test]
fn a_harness_dropped_leaves_no_process_of_its_adapter_running() {
    if !can_run() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pid = dir.path().join("pid");
    let adapter = format!("sleep 600 & echo $! > {}; {}", pid.display(), command("", ""));
    let harness = CommandHarness::start(&adapter).expect("the Python file store starts");
    let pid = std::fs::read_to_string(&pid).expect("the child's process id");
    let pid = pid.trim();
    let alive = || alive(pid);
    assert!(alive(), "the adapter's child is not running");
    drop(harness);
    let started = std::time::Instant::now();
    while alive() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(), "the adapter's child outlived its harness");
}

/// An adapter that cannot be started again after a cut, or declares another promise when it is,
/// fails the check with that reason, and the harness is broken from then on: no later check runs
/// on it.
#[test]
fn an_adapter_that_does_not_come_back_alike_after_a_cut_fails_the_check_and_breaks_the_harness() {
    if !can_run() {
        return;
    }
    for (again, says) in [
        ("echo 'no disk' >&2; exit 3", "started again after a power cut, it failed"),
        (&*command("", "--promise data"), "after the power cut"),
    ] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let marker = dir.path().join("started");
        let adapter = format!("if [ -e {m} ]; then {again}; fi; touch {m}; {}", command("", ""), m = marker.display());
        let harness = CommandHarness::start(&adapter).expect("the Python file store starts");
        let run = power_cuts(&harness, &Settings::default().with_seed(1));
        let failure = run.verdict.expect_err("the check went on without its adapter");
        assert!(failure.to_string().contains(says), "{says:?}: {failure}");
        // The cut it did not come back from is named beside its error.
        assert!(failure.context.first().is_some_and(|c| c.contains("was a power cut under the `")), "{failure}");
        let broken = harness.broken().expect("the harness is broken");
        assert!(broken.contains(says), "{broken}");
    }
}

/// The report of a run says that durability was checked through power cuts, under the model the
/// adapter declared, not only through `reopen`.
#[test]
fn the_report_says_durability_was_checked_through_power_cuts_under_the_declared_model() {
    if !can_run() {
        return;
    }
    let harness = CommandHarness::start(&command("", "--promise data")).expect("the Python file store starts");
    let settings = Settings::default().with_seed(2);
    let report = reservation_conformance::run_matching(&&harness, &settings, |name| {
        name.starts_with("p1_crashes") || name.starts_with("p1_power_cuts")
    });
    let text = report.to_string();
    assert!(report.is_ok(), "{text}");
    assert!(
        text.contains("was checked through power cuts (the store's storage on a disk that lost power under `data`"),
        "{text}"
    );
    assert!(!text.contains("checked only through the harness's reopen"), "{text}");
}

/// What a failure of the check on `bug` names, one of them: the unsynced effect the cut took
/// back, or the operation of the compaction the cut came inside.
fn causes(bug: &str) -> &'static [&'static str] {
    match bug {
        "never-synced" | "ack-before-sync" => &["of /log were written and never synced"],
        "dir-never-synced" => &["in / was made and never made durable", "and never made durable: no sync of / since"],
        "snapshot-never-synced" => &["of /snapshot were written and never synced"],
        "torn-tail-read" => &["of /log were written and never synced (torn: "],
        "truncate-before-snapshot" => &[
            "while a new name of / was in progress",
            "while a change of names of / was in progress",
            " of /snapshot.tmp was in progress",
            "while a sync of / was in progress",
        ],
        _ => &[],
    }
}

/// The bugs `adapters/python/file_store.py` plants.
const BUGS: [&str; 6] = [
    "never-synced",
    "ack-before-sync",
    "dir-never-synced",
    "snapshot-never-synced",
    "truncate-before-snapshot",
    "torn-tail-read",
];

/// Whether the check on `bug` failed P1 on `seed` naming one of its causes: the failure's text
/// when it did not.
fn caught_naming_its_cause(bug: &str, seed: u64) -> Result<(), String> {
    let run = cut_run(bug, seed);
    let Err(failure) = run.verdict else {
        return Err(format!("{bug} passed the power-cut check on seed {seed}: {}", run.report));
    };
    let text = failure.to_string();
    if failure.rule != Some(Rule::P1) || !causes(bug).iter().any(|c| text.contains(c)) {
        return Err(format!("{bug}, seed {seed}: not P1 naming one of {:?}: {text}", causes(bug)));
    }
    Ok(())
}

/// The check on `bug` fails P1, on `seed`, naming one of its causes.
fn caught(bug: &str, seed: u64) {
    if !can_run() {
        return;
    }
    if let Err(why) = caught_naming_its_cause(bug, seed) {
        panic!("{why}");
    }
}

#[test]
fn p1_a_log_never_synced_is_caught_through_the_driver() {
    caught("never-synced", 1);
}

#[test]
fn p1_an_answer_before_the_sync_is_caught_through_the_driver() {
    caught("ack-before-sync", 1);
}

#[test]
fn p1_a_directory_never_synced_is_caught_through_the_driver() {
    caught("dir-never-synced", 1);
}

#[test]
fn p1_a_snapshot_never_synced_is_caught_through_the_driver() {
    caught("snapshot-never-synced", 1);
}

#[test]
fn p1_a_log_emptied_before_the_snapshot_is_in_place_is_caught_through_the_driver() {
    caught("truncate-before-snapshot", 1);
}

/// A trap on the sync of a record across a sector, cut under `torn`, tears the record; the store
/// that reads it as a record cannot open its log again, which the check says with the adapter's
/// error to `open` (rather than waiting for an answer that cannot come).
#[test]
fn p1_a_torn_tail_read_as_a_record_is_caught_through_the_driver() {
    caught("torn-tail-read", 1);
    if !can_run() {
        return;
    }
    let failure = cut_run("torn-tail-read", 2).verdict.expect_err("caught");
    assert!(
        failure.problem.starts_with("the store could not be opened again on its own storage after a power cut: ")
            && failure.problem.contains("pickle data was truncated"),
        "{failure}"
    );
}

/// The long tier: every bug on 20 seeds, and the correct store on 20.
mod long {
    /// The power-cut check of the Python file store on seeds 1 to 20, the correct store and each
    /// bug; prints the table RELIABILITY.md gives:
    /// `RESERVATION_LONG_TIER=1 cargo test --release -p reservation-conformance --test it power_driver::long -- --nocapture`.
    #[test]
    fn power_cut_rates_of_the_python_file_store_through_the_driver() {
        if !reservation_conformance::tiers::long_tier(
            "power_driver::long::power_cut_rates_of_the_python_file_store_through_the_driver",
        ) || !super::can_run()
        {
            return;
        }
        println!(
            "| the Python file store (`adapters/python/file_store.py`), through the driver | seeds 1-20: caught P1, cause named |"
        );
        println!("|---|---:|");
        let mut all = true;
        // The correct store twice: promising `names`, and `torn` (which sets traps on torn writes).
        for (bug, args) in [("", ""), ("", "--promise torn")].into_iter().chain(super::BUGS.map(|b| (b, ""))) {
            let outcomes: Vec<Result<(), String>> = std::thread::scope(|s| {
                let handles: Vec<_> = [1..=10u64, 11..=20]
                    .map(|seeds| {
                        s.spawn(move || {
                            seeds
                                .map(|seed| {
                                    if bug.is_empty() {
                                        let run = super::cut_run_with(bug, args, seed);
                                        run.verdict.map_err(|f| format!("the correct store, seed {seed}: {f}"))
                                    } else {
                                        super::caught_naming_its_cause(bug, seed)
                                    }
                                })
                                .collect::<Vec<_>>()
                        })
                    })
                    .into_iter()
                    .collect();
                handles.into_iter().flat_map(|h| h.join().expect("a run does not panic")).collect()
            });
            for why in outcomes.iter().filter_map(|o| o.as_ref().err()) {
                eprintln!("{why}");
            }
            let n = outcomes.iter().filter(|o| o.is_ok()).count();
            let what = match (bug, args) {
                ("", "") => "none: the correct store passes",
                ("", _) => "none: the correct store, promising `torn`, passes",
                _ => bug,
            };
            println!("| {what} | {n}/20 |");
            all &= n == 20;
        }
        assert!(all, "a bug went uncaught on some seed, or the correct store failed");
    }
}
