//! `SqliteStore` under attack: processes racing to create one file, a schema tampered with,
//! options at their extremes, bad paths and corrupted pages. Each test reproduces a way the store
//! once failed.

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use reservation_sqlite::{MAX_BUSY_TIMEOUT, OpenCheck, SqliteOptions, SqliteStore, Synchronous};
use reservation_store::*;
use rusqlite::Connection;

fn storage_error<T>(result: Result<T, StorageError>) -> String {
    match result {
        Ok(_) => panic!("expected a storage error, got a store"),
        Err(e) => error_chain(&e),
    }
}

fn scope() -> ReservationScope {
    ReservationScope::parse("user", Some("acme"), "user-name").unwrap()
}

fn owner(id: &str) -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), id).unwrap()
}

/// Confirms `n` keys, so that the file has rows on several pages.
fn fill(path: &Path, n: u64) {
    let store = SqliteStore::open(path).unwrap();
    for i in 0..n {
        let k = Key::new(format!("a-rather-long-user-name-{i:06}")).unwrap();
        block_on(store.confirm(&scope(), &k, &owner(&format!("owner-{i}")), Version::stream(1).unwrap())).unwrap();
    }
}

const CHILD_ENV: &str = "RESERVATION_SQLITE_OPEN_RACE_CHILD";
const RACERS: usize = 4;
const ROUNDS: usize = 40;

/// In a child: for each `go` line, opens the fresh file `<dir>/r<round>.db` and says how it went.
fn open_racer(dir: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    for (round, line) in std::io::stdin().lock().lines().enumerate() {
        if line.unwrap() != "go" {
            break;
        }
        let path = Path::new(dir).join(format!("r{round}.db"));
        match SqliteStore::open(&path) {
            Ok(_) => writeln!(out, "OK").unwrap(),
            Err(e) => writeln!(out, "ERR {}", error_chain(&e)).unwrap(),
        }
        out.flush().unwrap();
    }
}

/// Four processes open the same new file at once, forty times over: every open succeeds (the
/// switch to WAL mode, which SQLite does not retry, used to fail with "database is locked" within
/// milliseconds about once in forty opens).
#[test]
fn concurrent_first_opens_of_a_new_file_all_succeed() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        return open_racer(&dir);
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut children, mut outputs): (Vec<_>, Vec<_>) = (0..RACERS)
        .map(|_| {
            crate::spawn_ready_child(
                "adversary::concurrent_first_opens_of_a_new_file_all_succeed",
                CHILD_ENV,
                dir.path(),
            )
        })
        .unzip();
    let mut errors = Vec::new();
    for round in 0..ROUNDS {
        for child in &mut children {
            writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
        }
        for lines in &mut outputs {
            let line = loop {
                let line = lines.next().unwrap().unwrap();
                if line == "OK" || line.starts_with("ERR") {
                    break line;
                }
            };
            if line != "OK" {
                errors.push(format!("round {round}: {line}"));
            }
        }
    }
    for mut child in children {
        drop(child.stdin.take());
        assert!(child.wait().unwrap().success());
    }
    assert!(errors.is_empty(), "{} of {} opens failed:\n{}", errors.len(), RACERS * ROUNDS, errors.join("\n"));
}

/// Every object of the schema is verified: a trigger that deletes what is written, a view, an
/// extra table or index, and a dropped expiry index are each refused at open, named.
#[test]
fn a_tampered_schema_is_refused_naming_the_object() {
    let tampers = [
        ("CREATE TRIGGER forget AFTER INSERT ON reservation BEGIN DELETE FROM reservation; END", "trigger \"forget\""),
        ("CREATE VIEW everything AS SELECT * FROM reservation", "view \"everything\""),
        ("CREATE TABLE extra (x)", "table \"extra\""),
        ("CREATE INDEX by_owner ON reservation (owner_id)", "index \"by_owner\""),
        ("DROP INDEX reservation_expiry", "reservation_expiry index is missing"),
    ];
    for (sql, named) in tampers {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        drop(SqliteStore::open(&path).unwrap());
        Connection::open(&path).unwrap().execute_batch(sql).unwrap();
        let msg = storage_error(SqliteStore::open(&path));
        assert!(msg.contains(named), "{sql}: {msg}");
    }
}

/// A busy timeout beyond what SQLite takes is clamped, not a panic.
#[test]
fn a_busy_timeout_of_duration_max_is_clamped() {
    let dir = tempfile::tempdir().unwrap();
    for timeout in [Duration::MAX, Duration::from_secs(25 * 24 * 3600), MAX_BUSY_TIMEOUT] {
        let mut options = SqliteOptions::default();
        options.busy_timeout = timeout;
        let store = SqliteStore::open_with(dir.path().join("r.db"), SystemClock, options).unwrap();
        let k = Key::new("k").unwrap();
        block_on(store.confirm(&scope(), &k, &owner("a"), Version::stream(1).unwrap())).unwrap();
    }
}

/// Each bad path or file gets an error naming its actual problem.
#[test]
fn bad_paths_and_files_are_named_for_what_they_are() {
    let dir = tempfile::tempdir().unwrap();
    assert!(storage_error(SqliteStore::open("")).contains("the path is empty"));
    assert!(storage_error(SqliteStore::open(dir.path())).contains("is a directory"));
    let garbage = dir.path().join("garbage.db");
    std::fs::write(&garbage, vec![0x5a; 8192]).unwrap();
    let msg = storage_error(SqliteStore::open(&garbage));
    assert!(msg.contains("is not an SQLite database"), "{msg}");
    let fifo = dir.path().join("fifo");
    if Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()) {
        let msg = storage_error(SqliteStore::open(&fifo));
        assert!(msg.contains("not a regular file"), "{msg}");
    } else {
        eprintln!("skipped the FIFO case: mkfifo is not available");
    }
}

/// `checkpoint` truncates the write-ahead log; `wal_autocheckpoint` bounds its size while the
/// store runs.
#[test]
fn checkpoint_truncates_the_log_and_autocheckpoint_bounds_it() {
    let wal_after = |autocheckpoint: u32| -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let mut options = SqliteOptions::default();
        options.synchronous = Synchronous::Normal;
        options.wal_autocheckpoint = autocheckpoint;
        let store = SqliteStore::open_with(&path, SystemClock, options).unwrap();
        for i in 0..1_500 {
            let k = Key::new(format!("k{i}")).unwrap();
            block_on(store.confirm(&scope(), &k, &owner("a"), Version::stream(1).unwrap())).unwrap();
        }
        let wal = dir.path().join("r.db-wal");
        let size = std::fs::metadata(&wal).unwrap().len();
        store.checkpoint().unwrap();
        assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0, "the log after checkpoint()");
        size
    };
    let (default, small) = (wal_after(1000), wal_after(16));
    assert!(small * 4 < default, "log of {small} bytes with autocheckpoint 16, {default} with 1000");
}

/// Overwrites the header of the file's second page, then opens it: the quick check at open finds
/// it; without it the store opens, and `check_integrity` finds it.
#[test]
fn open_check_finds_a_corrupted_page() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.db");
    fill(&path, 300);
    let mut bytes = std::fs::read(&path).unwrap();
    let page = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
    assert!(bytes.len() >= 3 * page, "the file has {} bytes", bytes.len());
    bytes[page..page + 16].fill(0xee);
    std::fs::write(&path, &bytes).unwrap();

    for check in [OpenCheck::Quick, OpenCheck::Full] {
        let mut options = SqliteOptions::default();
        options.open_check = check;
        let msg = storage_error(SqliteStore::open_with(&path, SystemClock, options));
        assert!(msg.contains("check failed"), "{check:?}: {msg}");
    }
    let store = SqliteStore::open(&path).expect("no check at open by default");
    assert!(store.check_integrity().is_err());
}
