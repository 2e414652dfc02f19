//! Crash test: a child process confirms and releases reservations in a loop, printing each
//! outcome once the store has acknowledged it, and is killed with SIGKILL in the middle of the
//! stream. The reopened file must hold every acknowledged confirm, undo no acknowledged release,
//! and pass SQLite's integrity check.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use reservation_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use reservation_store::spec::Reservation;
use reservation_store::*;

/// Set in the child: the file it writes to.
const CHILD_ENV: &str = "RESERVATION_SQLITE_CRASH_CHILD";
/// Set in the child: `normal` or `full`.
const SYNC_ENV: &str = "RESERVATION_SQLITE_CRASH_SYNC";
/// Set in the child: the run number, which prefixes its keys.
const RUN_ENV: &str = "RESERVATION_SQLITE_CRASH_RUN";
/// Acknowledged operations the parent waits for before it kills the child.
const KILL_AFTER: usize = 120;

fn scope() -> ReservationScope {
    ReservationScope::parse("user", Some("acme"), "user-name").unwrap()
}

fn owner() -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), "crasher").unwrap()
}

fn key(run: u32, i: u64) -> Key {
    Key::new(format!("run{run}-k{i}")).unwrap()
}

/// Key `i` is reserved, confirmed at version 1, and every third key is then released.
fn child(path: &str, sync: Synchronous, run: u32) -> ! {
    let mut options = SqliteOptions::default();
    options.synchronous = sync;
    let store = SqliteStore::open_with(path, SystemClock, options).unwrap();
    let (s, o) = (scope(), owner());
    let hold = HoldId::new("attempt").unwrap();
    let ttl = Ttl::from_millis(3_600_000).unwrap();
    let v1 = Version::stream(1).unwrap();
    // Written straight to the process's stdout, never captured by the test harness.
    let mut out = std::io::stdout();
    for i in 0.. {
        let k = key(run, i);
        assert_eq!(block_on(store.reserve(&s, &k, &o, &hold, ttl)).unwrap(), ReserveOutcome::Taken);
        assert_eq!(block_on(store.confirm(&s, &k, &o, v1)).unwrap(), ConfirmOutcome::Confirmed);
        writeln!(out, "ACK confirm {i}").unwrap();
        if i % 3 == 0 {
            assert_eq!(block_on(store.release(&s, &k, &o, v1.into())).unwrap(), ReleaseOutcome::Released);
            writeln!(out, "ACK release {i}").unwrap();
        }
        out.flush().unwrap();
    }
    unreachable!()
}

/// Runs the child until it has acknowledged [`KILL_AFTER`] operations, kills it, and returns the
/// acknowledged confirms and releases.
fn run_and_kill(path: &std::path::Path, sync: &str, run: u32) -> (Vec<u64>, Vec<u64>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash::sqlite_crash_keeps_every_acknowledged_operation", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, path)
        .env(SYNC_ENV, sync)
        .env(RUN_ENV, run.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut confirmed, mut released) = (Vec::new(), Vec::new());
    let mut acks = 0;
    while acks < KILL_AFTER {
        let line = lines.next().expect("the child stopped before it was killed").unwrap();
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next().and_then(|n| n.parse::<u64>().ok())) {
            (Some("ACK"), Some("confirm"), Some(i)) => confirmed.push(i),
            (Some("ACK"), Some("release"), Some(i)) => released.push(i),
            _ => continue,
        }
        acks += 1;
    }
    // SIGKILL on unix: no destructor, no flush, no orderly close of the database.
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child was supposed to die: {status}");
    // Lines the child wrote between our last read and the kill were acknowledged too.
    for line in lines.map_while(Result::ok) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next().and_then(|n| n.parse::<u64>().ok())) {
            (Some("ACK"), Some("confirm"), Some(i)) => confirmed.push(i),
            (Some("ACK"), Some("release"), Some(i)) => released.push(i),
            _ => {}
        }
    }
    (confirmed, released)
}

fn check_after_crash(path: &std::path::Path, sync: &str, run: u32) {
    let (confirmed, released) = run_and_kill(path, sync, run);
    assert!(confirmed.len() >= KILL_AFTER / 2, "{} confirms acknowledged", confirmed.len());
    let store = SqliteStore::open(path).unwrap();
    store.check_integrity().unwrap();
    let (s, o) = (scope(), owner());
    let v1 = Version::stream(1).unwrap();
    let last = confirmed.iter().max().copied().unwrap_or(0);
    for i in &confirmed {
        let found = block_on(store.lookup(&s, &key(run, *i))).unwrap();
        if released.contains(i) || (*i == last && i % 3 == 0 && found.is_none()) {
            // The last key's release may have committed just before the kill, unacknowledged.
            assert_eq!(found, None, "the acknowledged release of k{i} was undone ({sync})");
        } else {
            assert_eq!(
                found,
                Some(Reservation::confirmed(o.clone(), v1)),
                "acknowledged confirm of k{i} lost ({sync})"
            );
        }
    }
    // Keys past the last acknowledged one were never confirmed, or confirmed by the operation
    // in flight when the child died: nothing else.
    for i in last + 2..last + 10 {
        assert_eq!(block_on(store.lookup(&s, &key(run, i))).unwrap(), None, "k{i} appeared from nowhere");
    }
}

#[test]
fn sqlite_crash_keeps_every_acknowledged_operation() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        let sync = match std::env::var(SYNC_ENV).as_deref() {
            Ok("normal") => Synchronous::Normal,
            _ => Synchronous::Full,
        };
        let run = std::env::var(RUN_ENV).ok().and_then(|r| r.parse().ok()).unwrap_or(0);
        child(&path, sync, run);
    }
    // Synchronous::Normal is the weaker setting: a process kill must still lose nothing.
    for sync in ["normal", "full"] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("crash.db");
        // The second child works on the file the first one crashed on, and crashes too.
        check_after_crash(&path, sync, 1);
        check_after_crash(&path, sync, 2);
    }
}

/// Set in the child of [`d10_clock_survives_a_crash`]: the file it writes to.
const CLOCK_CHILD_ENV: &str = "RESERVATION_SQLITE_CLOCK_CHILD";
/// Set in the child too when the store is the planted bug that forgets its clock.
const CLOCK_BROKEN_ENV: &str = "RESERVATION_SQLITE_CLOCK_BROKEN";
/// Where the clock starts, and the TTL of bob's reservation.
const T0: u64 = 1_000_000;
const TTL: u64 = 10;

fn clock_options(broken: bool) -> SqliteOptions {
    let options = SqliteOptions::default();
    if broken { options.broken_forgets_clock() } else { options }
}

/// The child: bob reserves `bob` at `T0` for `TTL`; at `T0 + 2·TTL`, when bob's reservation has
/// expired, alice reserves `alice` (a change, whose instant the store persists). Then it says
/// `READY` and waits to be killed.
fn clock_child(path: &str, broken: bool) -> ! {
    let clock = ManualClock::new(Instant::from_millis(T0));
    let store = SqliteStore::open_with(path, clock.clone(), clock_options(broken)).unwrap();
    let (s, ttl) = (scope(), Ttl::from_millis(TTL).unwrap());
    let bob = AggregateRef::parse("user", Some("acme"), "bob-id").unwrap();
    let alice = AggregateRef::parse("user", Some("acme"), "alice-id").unwrap();
    let hold = HoldId::new("h").unwrap();
    assert_eq!(
        block_on(store.reserve(&s, &Key::new("bob").unwrap(), &bob, &hold, ttl)).unwrap(),
        ReserveOutcome::Taken
    );
    clock.set(Instant::from_millis(T0 + 2 * TTL));
    assert_eq!(
        block_on(store.reserve(&s, &Key::new("alice").unwrap(), &alice, &hold, ttl)).unwrap(),
        ReserveOutcome::Taken
    );
    // Written straight to the process's stdout and flushed: the parent waits for it.
    let mut out = std::io::stdout();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    unreachable!("the child is killed before its stdin closes")
}

/// Runs the child on a fresh file, kills it (SIGKILL: no close, no checkpoint), reopens the file
/// on a clock set back to `T0`, and returns what a lookup of bob's key shows and the outcome of
/// carol's reserve of it, with what carol's reservation shows afterwards.
fn after_the_crash(broken: bool) -> (Option<StoredReservation>, ReserveOutcome, Option<StoredReservation>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clock.db");
    let env = if broken { "1" } else { "" };
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash::d10_clock_survives_a_crash", "--nocapture", "--test-threads=1"])
        .env(CLOCK_CHILD_ENV, &path)
        .env(CLOCK_BROKEN_ENV, env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The test harness may print the test's name on the same line, before it.
    while !lines.next().expect("the child stopped before it was ready").unwrap().ends_with("READY") {}
    child.kill().unwrap();
    assert!(!child.wait().unwrap().success(), "the child was supposed to die");

    let clock = ManualClock::new(Instant::from_millis(T0));
    let store = SqliteStore::open_with(&path, clock, clock_options(broken)).unwrap();
    let (s, key) = (scope(), Key::new("bob").unwrap());
    let shown = block_on(store.lookup(&s, &key)).unwrap();
    let carol = AggregateRef::parse("user", Some("acme"), "carol-id").unwrap();
    let hold = HoldId::new("h").unwrap();
    let outcome = block_on(store.reserve(&s, &key, &carol, &hold, Ttl::from_millis(TTL).unwrap())).unwrap();
    let after = block_on(store.lookup(&s, &key)).unwrap();
    (shown, outcome, after)
}

/// D10 across a restart (and P1): a process changes a reservation at `T0 + 2·TTL`, after bob's
/// reservation expired at `T0 + TTL`, and is killed. Reopened on a clock set back to `T0`, the
/// store decides at `T0 + 2·TTL` all the same: bob's reservation stays expired, carol takes the
/// key, and her reservation expires a TTL after `T0 + 2·TTL`. The planted bug that forgets the
/// clock shows bob's reservation live again and refuses carol: the test catches it.
#[test]
fn d10_clock_survives_a_crash() {
    if let Ok(path) = std::env::var(CLOCK_CHILD_ENV) {
        clock_child(&path, std::env::var(CLOCK_BROKEN_ENV).is_ok_and(|v| !v.is_empty()));
    }
    let bob = AggregateRef::parse("user", Some("acme"), "bob-id").unwrap();
    let carol = AggregateRef::parse("user", Some("acme"), "carol-id").unwrap();
    let hold = HoldId::new("h").unwrap();
    let (shown, outcome, after) = after_the_crash(false);
    assert_eq!(shown, None, "bob's reservation expired before the crash, and is live again after it");
    assert_eq!(outcome, ReserveOutcome::Taken);
    let expected = Reservation::pending(carol, [hold.clone()].into(), Instant::from_millis(T0 + 3 * TTL)).unwrap();
    assert_eq!(after, Some(expected), "carol's reservation was decided at an instant before the crash's");

    // The planted bug: what this test exists to catch.
    let (shown, outcome, _) = after_the_crash(true);
    let live = Reservation::pending(bob, [hold].into(), Instant::from_millis(T0 + TTL)).unwrap();
    assert_eq!(shown, Some(live), "the store that forgets its clock should show bob's reservation live again");
    assert_eq!(outcome, ReserveOutcome::Conflict);
}
