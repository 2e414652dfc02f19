//! `PostgresStore` on a server whose data directory is a disk that can lose power, through the
//! suite's power-cut check ([`reservation_conformance::crashes::power_cuts`]): a harness that runs
//! its own servers (`PostgresHarness::on_cluster`) starts one in the check's directory, and after
//! each cut kills what is left of it and starts it again on what the cut left, its crash recovery
//! replaying the WAL. With `fsync` and `synchronous_commit` on, every acknowledged commit survives;
//! sessions with `synchronous_commit = off`, and a server with `fsync = off`, lose commits they
//! acknowledged, which the check catches, naming the WAL bytes the cut took back.

use std::time::Duration;

use reservation_conformance::crashes::{CrashRun, power_cuts};
use reservation_conformance::services::service;
use reservation_conformance::{Harness, Persistence, Settings};
use reservation_postgres::{PostgresHarness, PostgresOptions, Replication};
use reservation_store::rules::Rule;

/// Options that keep a run short: every wait of the store ends within a few seconds.
fn options() -> PostgresOptions {
    let mut options = PostgresOptions::default().with_max_connections(8);
    options.connect_timeout = Duration::from_secs(2);
    options.statement_timeout = Duration::from_secs(5);
    options.response_timeout = Duration::from_secs(6);
    options
}

/// Whether FUSE mounts here (said once where it does not; a failure under
/// `RESERVATION_REQUIRE_SERVICES=1`): a run with no cut is then a check that did not run.
fn mounts() -> bool {
    let dir = tempfile::tempdir().expect("a temporary directory");
    service("FUSE (a mount of /dev/fuse)", reservation_disk::Disk::mount(dir.path())).is_some()
}

/// A harness on clusters of its own with `options`, or `None` (said once) without the means.
fn cluster(options: PostgresOptions) -> Option<PostgresHarness> {
    service("PostgreSQL clusters of the tests' own", PostgresHarness::on_cluster(Replication::None, options))
}

/// The power-cut check of `harness` on `seed`.
fn cut(harness: &PostgresHarness, seed: u64) -> CrashRun {
    power_cuts(harness, &Settings::default().with_seed(seed))
}

#[test]
fn p1_the_power_cut_check_passes_postgres_with_fsync_and_synchronous_commit() {
    let Some(h) = cluster(options()) else { return };
    assert_eq!(h.capabilities().power_cuts, Some(Persistence::Names));
    let run = cut(&h, 1);
    eprintln!("PostgreSQL, fsync and synchronous_commit on: {}", run.report);
    if let Err(failure) = run.verdict {
        panic!("{failure}");
    }
    assert_eq!(run.report.crashes.len(), if mounts() { 8 } else { 0 }, "{}", run.report);
    // A second run of the check on the same harness, in a directory of its own: a server of its
    // own there, not the first run's started again on a disk that is gone.
    let again = cut(&h, 2);
    if let Err(failure) = again.verdict {
        panic!("the second run: {failure}");
    }
}

/// Whether `text`, a failure, names WAL bytes that were written and never synced.
fn names_unsynced_wal(text: &str) -> bool {
    text.contains("of /data/pg_wal/") && text.contains("were written and never synced")
}

/// The failure of the power-cut check on `h` (seed 1), P1, its first lines shown as `what`'s; `None`
/// where FUSE does not mount.
fn caught_p1(h: &PostgresHarness, what: &str) -> Option<String> {
    let run = cut(h, 1);
    if !mounts() {
        return None;
    }
    let failure = run.verdict.expect_err(&format!("{what} passed the power-cut check"));
    let text = failure.to_string();
    eprintln!("PostgreSQL, {what}: {}", text.lines().take(4).collect::<Vec<_>>().join("\n"));
    assert_eq!(failure.rule, Some(Rule::P1), "{text}");
    Some(text)
}

#[test]
fn p1_the_power_cut_check_catches_sessions_with_synchronous_commit_off() {
    let Some(h) = cluster(options().broken_commit_before_flush()) else { return };
    let Some(text) = caught_p1(&h, "synchronous_commit = off") else { return };
    // The WAL's unsynced bytes taken back; or none of the WAL among what the cut took back: the
    // commit was acknowledged while its WAL was still in the server's buffers, never written,
    // which a server crash loses too (a cut under `names` on seed 1, once in a run of CI's).
    assert!(names_unsynced_wal(&text) || wal_never_written(&text), "{text}");
}

/// Whether `text`, a failure after a cut, names no byte of the WAL among what the cut took back:
/// the lost commit's WAL was never written to its file.
fn wal_never_written(text: &str) -> bool {
    text.contains("it took back") && !text.contains("of /data/pg_wal/")
}

#[test]
fn p1_the_power_cut_check_catches_a_server_with_fsync_off() {
    let Some(h) = cluster(options()) else { return };
    let Some(text) = caught_p1(&h.broken_without_fsync(), "fsync = off") else { return };
    assert!(text.contains("were written and never synced"), "{text}");
}

/// Whether a failure names its cause: the bytes a cut took back, or a loss under the `process`
/// model, which takes back nothing (a commit acknowledged before its WAL was even written, as a
/// server crash loses it).
fn names_the_cause(text: &str) -> bool {
    text.contains("were written and never synced")
        || text.contains("under the `process` model") && text.contains("nothing unsynced was taken back")
        || wal_never_written(text)
}

/// The power-cut check on seeds 1 to 20: the durable server, sessions with
/// `synchronous_commit = off`, a server with `fsync = off`; prints the rows RELIABILITY.md
/// gives: `cargo test --release -p reservation-postgres --test it power_cut_rates -- --ignored
/// --nocapture` (about 9 minutes).
#[test]
#[ignore = "a measurement: 60 runs of the power-cut check, each on a PostgreSQL cluster of its own"]
fn power_cut_rates_of_postgres() {
    let Some(_) = cluster(options()) else { return };
    assert!(mounts(), "FUSE does not mount here");
    type Make = fn() -> PostgresHarness;
    let rows: [(&str, Make, bool); 3] = [
        ("`fsync` and `synchronous_commit` on", || cluster(options()).expect("a cluster"), false),
        (
            "sessions with `synchronous_commit = off`",
            || cluster(options().broken_commit_before_flush()).expect("a cluster"),
            true,
        ),
        ("a server with `fsync = off`", || cluster(options()).expect("a cluster").broken_without_fsync(), true),
    ];
    let mut all = true;
    for (what, make, broken) in rows {
        let started = std::time::Instant::now();
        let mut n = 0;
        for seed in 1..=20 {
            let run = cut(&make(), seed);
            let ok = match (&run.verdict, broken) {
                (Ok(()), false) => true,
                (Err(f), true) if f.rule == Some(Rule::P1) && names_the_cause(&f.to_string()) => true,
                (Err(f), _) => {
                    eprintln!("{what}, seed {seed}: {f}");
                    false
                }
                (Ok(()), true) => {
                    eprintln!("{what}, seed {seed}: passed: {}", run.report);
                    false
                }
            };
            n += usize::from(ok);
        }
        let verdict = if broken { "caught" } else { "passes" };
        println!("| PostgreSQL, {what} | {verdict} {n}/20 | {:.0?} |", started.elapsed());
        all &= n == 20;
    }
    assert!(all, "a broken server went uncaught on some seed, or the durable one failed");
}

/// A server that cannot start again (its data directory gone, as a cut can take it) fails with
/// what `pg_ctlcluster` said, not only with its exit status.
#[test]
fn a_server_that_cannot_start_again_says_why() {
    use std::os::unix::fs::PermissionsExt;
    let Some(h) = cluster(options()) else { return };
    let dir = tempfile::tempdir().expect("a temporary directory");
    // The server runs as the `postgres` user, which must reach the directory.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("permissions");
    let clock = reservation_store::ManualClock::new(reservation_conformance::START);
    let first = h.store_in(dir.path(), clock.clone()).expect("a store in the directory");
    drop(first);
    std::fs::remove_dir_all(dir.path().join("data")).expect("the data directory removed");
    let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.store_in(dir.path(), clock)));
    let why = match again {
        Ok(_) => panic!("a server started with its data directory gone"),
        Err(payload) => payload.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(why.contains("pg_ctlcluster said:") && why.contains("data"), "{why}");
}
