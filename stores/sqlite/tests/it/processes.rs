//! Several processes share one file: child processes race to confirm the same keys, each through
//! its own store, and every key must end with exactly one owner, the one whose confirm said so.

use std::io::Write;

use reservation_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use reservation_store::spec::Reservation;
use reservation_store::*;

/// Set in a child: the file, and the child's number.
const CHILD_ENV: &str = "RESERVATION_SQLITE_PROCESS_CHILD";
const CHILDREN: usize = 3;
const KEYS: u64 = 300;

fn scope() -> ReservationScope {
    ReservationScope::parse("user", None, "user-name").unwrap()
}

fn owner(n: usize) -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), &format!("process-{n}")).unwrap()
}

fn key(i: u64) -> Key {
    Key::new(format!("k{i}")).unwrap()
}

/// Reserves and confirms every key in order, printing which it won and which it lost.
fn child(path: &str, n: usize) {
    let mut options = SqliteOptions::default();
    options.synchronous = Synchronous::Normal;
    let store = SqliteStore::open_with(path, SystemClock, options).unwrap();
    let (s, me, hold) = (scope(), owner(n), HoldId::new(format!("attempt-{n}")).unwrap());
    let ttl = Ttl::from_millis(60_000).unwrap();
    let mut out = std::io::stdout().lock();
    // Start together: say so, then wait for the parent's word.
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    for i in 0..KEYS {
        let k = key(i);
        let won = match block_on(store.reserve(&s, &k, &me, &hold, ttl)).unwrap() {
            ReserveOutcome::Taken => {
                assert_eq!(
                    block_on(store.confirm(&s, &k, &me, Version::stream(1).unwrap())).unwrap(),
                    ConfirmOutcome::Confirmed
                );
                true
            }
            ReserveOutcome::Conflict => false,
            other => panic!("k{i}: {other:?}"),
        };
        writeln!(out, "{} {i}", if won { "WON" } else { "LOST" }).unwrap();
    }
    out.flush().unwrap();
}

#[test]
fn sqlite_processes_sharing_a_file_give_each_key_one_owner() {
    if let Ok(arg) = std::env::var(CHILD_ENV) {
        let (n, path) = arg.split_once(':').unwrap();
        return child(path, n.parse().unwrap());
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    // No file yet: the children race to create it and its schema, too.
    let (mut children, outputs): (Vec<_>, Vec<_>) = (0..CHILDREN)
        .map(|n| {
            crate::spawn_ready_child(
                "processes::sqlite_processes_sharing_a_file_give_each_key_one_owner",
                CHILD_ENV,
                format!("{n}:{}", path.display()),
            )
        })
        .unzip();
    for child in &mut children {
        writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    }
    let mut winners: Vec<Vec<usize>> = vec![Vec::new(); KEYS as usize];
    let mut answers = 0;
    for (n, (mut child, lines)) in children.into_iter().zip(outputs).enumerate() {
        for line in lines {
            let line = line.unwrap();
            let mut words = line.split_whitespace();
            let (word, i) = (words.next(), words.next().and_then(|i| i.parse::<usize>().ok()));
            match (word, i) {
                (Some("WON"), Some(i)) => winners[i].push(n),
                (Some("LOST"), Some(_)) => {}
                _ => continue,
            }
            answers += 1;
        }
        assert!(child.wait().unwrap().success(), "child {n} failed");
    }
    assert_eq!(answers, CHILDREN * KEYS as usize, "every child answered for every key");
    let share: Vec<usize> = (0..CHILDREN).map(|n| winners.iter().filter(|w| w.contains(&n)).count()).collect();
    eprintln!("keys won by each process: {share:?}");
    let store = SqliteStore::open(&path).unwrap();
    for (i, won) in winners.iter().enumerate() {
        assert_eq!(won.len(), 1, "k{i} was won by {won:?}");
        let found = block_on(store.lookup(&scope(), &key(i as u64))).unwrap();
        assert_eq!(found, Some(Reservation::confirmed(owner(won[0]), Version::stream(1).unwrap())), "k{i}");
    }
    store.check_integrity().unwrap();
}
