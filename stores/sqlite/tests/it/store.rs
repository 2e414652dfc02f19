//! Direct tests of `SqliteStore`: durability across reopening, the encodings at their extremes,
//! sweeping, locking, and the files it must refuse.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use reservation_sqlite::{OpenCheck, SCHEMA_VERSION, SqliteOptions, SqliteStore, Synchronous};
use reservation_store::spec::Reservation;
use reservation_store::*;
use rusqlite::Connection;

fn scope(tenant: Option<&str>) -> ReservationScope {
    ReservationScope::parse("user", tenant, "user-name").unwrap()
}

fn owner(tenant: Option<&str>, id: &str) -> AggregateRef {
    AggregateRef::parse("user", tenant, id).unwrap()
}

fn key(k: &str) -> Key {
    Key::new(k).unwrap()
}

fn hold(h: &str) -> HoldId {
    HoldId::new(h).unwrap()
}

fn ttl(ms: u64) -> Ttl {
    Ttl::from_millis(ms).unwrap()
}

fn v(n: u64) -> Version {
    Version::stream(n).unwrap()
}

fn open(path: &Path, clock: &ManualClock) -> SqliteStore<ManualClock> {
    SqliteStore::open_with_clock(path, clock.clone()).unwrap()
}

fn db(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("reservations.db")
}

fn storage_error<T: std::fmt::Debug>(result: Result<T, StorageError>) -> String {
    match result {
        Ok(v) => panic!("expected a storage error, got {v:?}"),
        Err(e) => error_chain(&e),
    }
}

#[test]
fn sqlite_store_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<SqliteStore>();
    check::<SqliteStore<ManualClock>>();
}

#[test]
fn every_state_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Instant::from_millis(1_000));
    let (s, alice, bob) = (scope(Some("acme")), owner(Some("acme"), "alice"), owner(Some("acme"), "bob"));
    {
        let store = open(&db(&dir), &clock);
        assert_eq!(
            block_on(store.reserve(&s, &key("p"), &alice, &hold("h1"), ttl(5_000))).unwrap(),
            ReserveOutcome::Taken
        );
        assert_eq!(
            block_on(store.reserve(&s, &key("p"), &alice, &hold("h2"), ttl(9_000))).unwrap(),
            ReserveOutcome::Joined
        );
        assert_eq!(block_on(store.confirm(&s, &key("c"), &bob, v(7))).unwrap(), ConfirmOutcome::Confirmed);
        assert_eq!(block_on(store.reserve(&s, &key("gone"), &bob, &hold("h"), ttl(1))).unwrap(), ReserveOutcome::Taken);
        assert_eq!(block_on(store.abandon(&s, &key("gone"), &bob, &hold("h"))).unwrap(), AbandonOutcome::Abandoned);
    }
    let store = open(&db(&dir), &clock);
    let pending = block_on(store.lookup(&s, &key("p"))).unwrap().unwrap();
    let pending = pending.as_pending().unwrap();
    assert_eq!(pending.owner(), &alice);
    assert_eq!(pending.holds(), &BTreeSet::from([hold("h1"), hold("h2")]));
    assert_eq!(pending.expires_at(), Instant::from_millis(10_000));
    let confirmed = block_on(store.lookup(&s, &key("c"))).unwrap().unwrap();
    assert_eq!(confirmed, Reservation::confirmed(bob.clone(), v(7)));
    assert_eq!(block_on(store.lookup(&s, &key("gone"))).unwrap(), None);
    assert_eq!(store.len().unwrap(), 2);
    // The reopened store still decides by the spec: the old version keeps the key (L5).
    assert_eq!(block_on(store.release(&s, &key("c"), &bob, v(6).into())).unwrap(), ReleaseOutcome::Kept);
    assert_eq!(block_on(store.reserve(&s, &key("p"), &bob, &hold("x"), ttl(5))).unwrap(), ReserveOutcome::Conflict);
    store.check_integrity().unwrap();
}

#[test]
fn system_tenant_and_tenant_ids_never_collide() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Instant::from_millis(1));
    let store = open(&db(&dir), &clock);
    let k = key("name");
    // Tenant ids that look like the system tenant's spellings are other tenants.
    for tenant in ["SYSTEM_TENANT", "\0", " ", "NULL"] {
        let o = owner(Some(tenant), "a");
        assert_eq!(block_on(store.confirm(&scope(Some(tenant)), &k, &o, v(1))).unwrap(), ConfirmOutcome::Confirmed);
    }
    let system_owner = owner(None, "a");
    assert_eq!(block_on(store.confirm(&scope(None), &k, &system_owner, v(1))).unwrap(), ConfirmOutcome::Confirmed);
    // A tenant's owner in the system scope is another owner than the system tenant's one (D5).
    let tenant_owner = owner(Some("SYSTEM_TENANT"), "a");
    assert_eq!(block_on(store.confirm(&scope(None), &k, &tenant_owner, v(2))).unwrap(), ConfirmOutcome::Conflict);
    drop(store);
    let store = open(&db(&dir), &clock);
    let found = block_on(store.lookup(&scope(None), &k)).unwrap().unwrap();
    assert_eq!(found.owner(), &system_owner);
    let found = block_on(store.lookup(&scope(Some("SYSTEM_TENANT")), &k)).unwrap().unwrap();
    assert_eq!(found.owner(), &tenant_owner);
    assert_eq!(store.len().unwrap(), 5);
}

#[test]
fn keys_and_hold_ids_are_exact_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Instant::from_millis(1));
    let store = open(&db(&dir), &clock);
    let (s, a, b) = (scope(Some("t")), owner(Some("t"), "a"), owner(Some("t"), "b"));
    let odd = ["a", "a\0", "A", "a\u{0}b", "é", "e\u{301}", "[\"x\",]", "\u{10FFFF}"];
    for (i, k) in odd.iter().enumerate() {
        let who = if i % 2 == 0 { &a } else { &b };
        assert_eq!(
            block_on(store.reserve(&s, &key(k), who, &hold(k), ttl(100))).unwrap(),
            ReserveOutcome::Taken,
            "{k:?}"
        );
    }
    let holds: BTreeSet<HoldId> = odd.iter().map(|h| hold(h)).collect();
    for h in &holds {
        assert_eq!(block_on(store.reserve(&s, &key("a"), &a, h, ttl(100))).unwrap(), ReserveOutcome::Joined);
    }
    drop(store);
    let store = open(&db(&dir), &clock);
    let found = block_on(store.lookup(&s, &key("a"))).unwrap().unwrap();
    assert_eq!(found.as_pending().unwrap().holds(), &holds);
    for (i, k) in odd.iter().enumerate() {
        let found = block_on(store.lookup(&s, &key(k))).unwrap().unwrap();
        assert_eq!(found.owner(), if i % 2 == 0 { &a } else { &b }, "{k:?}");
    }
    let long_hold = hold(&"h".repeat(MAX_HOLD_ID_LEN));
    let long_key = key(&"k".repeat(MAX_KEY_LEN));
    assert_eq!(block_on(store.reserve(&s, &long_key, &a, &long_hold, ttl(100))).unwrap(), ReserveOutcome::Taken);
    let found = block_on(store.lookup(&s, &long_key)).unwrap().unwrap();
    assert_eq!(found.as_pending().unwrap().holds(), &BTreeSet::from([long_hold]));
}

#[test]
fn extreme_instants_and_versions_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let (s, a) = (scope(None), owner(None, "a"));
    let edges = [0, 1, i64::MAX as u64 - 1, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX - 2];
    let clock = ManualClock::new(Instant::ZERO);
    // Each edge in a scope of its own: a reopened store never decides a scope at an instant
    // earlier than its latest change (D10 across a restart), so the edges' reservations are
    // looked up, after the reopen, each in its scope at its edge.
    let edge = |i: usize| ReservationScope::parse("user", None, &format!("edge-{i}")).unwrap();
    {
        let store = open(&db(&dir), &clock);
        for (i, &at) in edges.iter().enumerate() {
            clock.set(Instant::from_millis(at));
            // The longest TTL saturates at Instant::MAX (D1); a short one lands just past `at`.
            let (e, k) = (edge(i), key(&format!("max{i}")));
            assert_eq!(block_on(store.reserve(&e, &k, &a, &hold("h"), ttl(u64::MAX))).unwrap(), ReserveOutcome::Taken);
            let k = key(&format!("short{i}"));
            assert_eq!(block_on(store.reserve(&e, &k, &a, &hold("h"), ttl(2))).unwrap(), ReserveOutcome::Taken);
        }
        for (i, n) in [1, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX].into_iter().enumerate() {
            let k = key(&format!("v{i}"));
            let ver = Version::from_u64(n);
            assert_eq!(block_on(store.confirm(&s, &k, &a, ver)).unwrap(), ConfirmOutcome::Confirmed);
        }
    }
    let store = open(&db(&dir), &clock);
    for (i, &at) in edges.iter().enumerate() {
        clock.set(Instant::from_millis(at));
        let found = block_on(store.lookup(&edge(i), &key(&format!("max{i}")))).unwrap().unwrap();
        assert_eq!(found.as_pending().unwrap().expires_at(), Instant::MAX);
        let found = block_on(store.lookup(&edge(i), &key(&format!("short{i}")))).unwrap().unwrap();
        assert_eq!(found.as_pending().unwrap().expires_at(), Instant::from_millis(at + 2));
    }
    for (i, n) in [1, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX].into_iter().enumerate() {
        let found = block_on(store.lookup(&s, &key(&format!("v{i}")))).unwrap().unwrap();
        assert_eq!(found, Reservation::confirmed(a.clone(), Version::from_u64(n)));
        // The order of versions survives the encoding: one below keeps the key (L5).
        if n > 1 {
            let below = ReleaseVersion::At(Version::from_u64(n - 1));
            assert_eq!(block_on(store.release(&s, &key(&format!("v{i}")), &a, below)).unwrap(), ReleaseOutcome::Kept);
        }
    }
    // SQL compares expiries in the clock's order across the i64 sign boundary: at the edge
    // i64::MAX + 1 the short reservations made at or before i64::MAX have expired, later ones not.
    // A store opened anew, whose clock has not been read beyond that edge yet.
    drop(store);
    let store = open(&db(&dir), &clock);
    clock.set(Instant::from_millis(i64::MAX as u64 + 1));
    assert_eq!(store.sweep().unwrap(), 3);
    for (i, &at) in edges.iter().enumerate() {
        let row = block_on(store.lookup(&edge(i), &key(&format!("short{i}")))).unwrap();
        assert_eq!(row.is_some(), at + 2 > i64::MAX as u64 + 1, "short{i}");
    }
    clock.set(Instant::MAX);
    assert_eq!(store.sweep().unwrap(), (edges.len() - 3) + edges.len());
    assert_eq!(store.len().unwrap(), 4);
}

#[test]
fn sweep_deletes_only_expired_pending_rows() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Instant::from_millis(100));
    let store = open(&db(&dir), &clock);
    let (s, a) = (scope(None), owner(None, "a"));
    for i in 0..10u64 {
        block_on(store.reserve(&s, &key(&format!("p{i}")), &a, &hold("h"), ttl(10 * (i + 1)))).unwrap();
    }
    block_on(store.confirm(&s, &key("c"), &a, v(1))).unwrap();
    clock.set(Instant::from_millis(150)); // p0..p4 expire at 110..150: expired (D1)
    assert_eq!(store.sweep().unwrap(), 5);
    assert_eq!(store.len().unwrap(), 6);
    for i in 5..10 {
        assert!(block_on(store.lookup(&s, &key(&format!("p{i}")))).unwrap().is_some());
    }
    clock.advance(1_000_000);
    assert_eq!(store.sweep().unwrap(), 5);
    assert_eq!(store.len().unwrap(), 1);
    assert_eq!(store.sweep().unwrap(), 0);
}

#[test]
fn expired_rows_do_not_accumulate() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Instant::from_millis(1));
    let mut options = SqliteOptions::default();
    options.sweep_every = 16;
    options.synchronous = Synchronous::Normal;
    let store = SqliteStore::open_with(db(&dir), clock.clone(), options).unwrap();
    let (s, a) = (scope(None), owner(None, "a"));
    for i in 0..400 {
        block_on(store.reserve(&s, &key(&format!("k{i}")), &a, &hold("h"), ttl(5))).unwrap();
        clock.advance(10); // every earlier reservation has expired
    }
    let rows = store.len().unwrap();
    assert!(rows <= 16, "{rows} rows left, expected at most sweep_every");
    // Touching an expired row deletes it too (L1, A1).
    block_on(store.release(&s, &key("k399"), &a, ReleaseVersion::ANY_VERSION)).unwrap();
    assert!(store.len().unwrap() < rows);
}

#[test]
fn invalid_arguments_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Instant::from_millis(1));
    let store = open(&db(&dir), &clock);
    let s = scope(Some("acme"));
    let stranger = owner(Some("other"), "x");
    let wrong_type = AggregateRef::parse("order", Some("acme"), "x").unwrap();
    let err = block_on(store.reserve(&s, &key("k"), &stranger, &hold("h"), ttl(5))).unwrap_err();
    assert_eq!(err.invalid(), Some(InvalidArgument::TenantMismatch));
    let err = block_on(store.confirm(&s, &key("k"), &wrong_type, v(1))).unwrap_err();
    assert_eq!(err.invalid(), Some(InvalidArgument::OwnerTypeMismatch));
    let err = block_on(store.release(&s, &key("k"), &stranger, ReleaseVersion::ANY_VERSION)).unwrap_err();
    assert_eq!(err.invalid(), Some(InvalidArgument::TenantMismatch));
    let err = block_on(store.abandon(&s, &key("k"), &wrong_type, &hold("h"))).unwrap_err();
    assert_eq!(err.invalid(), Some(InvalidArgument::OwnerTypeMismatch));
    assert_eq!(store.len().unwrap(), 0);
}

#[test]
fn a_held_write_lock_is_a_storage_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Instant::from_millis(1));
    let mut options = SqliteOptions::default();
    options.busy_timeout = Duration::from_millis(30);
    options.busy_retries = 1;
    let store = SqliteStore::open_with(db(&dir), clock.clone(), options).unwrap();
    let (s, a) = (scope(None), owner(None, "a"));
    block_on(store.confirm(&s, &key("k"), &a, v(1))).unwrap();
    // Another process holds the write lock.
    let other = Connection::open(db(&dir)).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let err = block_on(store.release(&s, &key("k"), &a, v(1).into())).unwrap_err();
    assert!(matches!(err, StoreError::Storage(_)), "{err}");
    assert!(error_chain(&err).contains("locked"), "{err}");
    other.execute_batch("ROLLBACK").unwrap();
    // Nothing was released: the outcome was never reported, and it did not happen.
    assert_eq!(block_on(store.lookup(&s, &key("k"))).unwrap(), Some(Reservation::confirmed(a.clone(), v(1))));
    assert_eq!(block_on(store.release(&s, &key("k"), &a, v(1).into())).unwrap(), ReleaseOutcome::Released);
}

#[test]
fn threads_and_handles_sharing_a_file_give_each_key_one_owner() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let clock = ManualClock::new(Instant::from_millis(1));
    let mut options = SqliteOptions::default();
    options.synchronous = Synchronous::Normal;
    // Two handles on one file stand for two processes; each is used by two threads.
    let stores = [
        SqliteStore::open_with(&path, clock.clone(), options.clone()).unwrap(),
        SqliteStore::open_with(&path, clock.clone(), options).unwrap(),
    ];
    let s = scope(None);
    let rounds = 40;
    let winners: Vec<Vec<(usize, u64)>> = std::thread::scope(|t| {
        let handles: Vec<_> = (0..4)
            .map(|w| {
                let store = &stores[w % 2];
                let s = &s;
                t.spawn(move || {
                    let me = owner(None, &format!("w{w}"));
                    let mut won = Vec::new();
                    for r in 0..rounds {
                        let k = key(&format!("k{r}"));
                        if block_on(store.confirm(s, &k, &me, v(1))).unwrap() == ConfirmOutcome::Confirmed {
                            won.push((w, r));
                        }
                    }
                    won
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut won: Vec<(usize, u64)> = winners.into_iter().flatten().collect();
    won.sort_by_key(|&(_, r)| r);
    assert_eq!(won.len(), rounds as usize, "each key confirmed exactly once: {won:?}");
    for (w, r) in won {
        let found = block_on(stores[1].lookup(&s, &key(&format!("k{r}")))).unwrap().unwrap();
        assert_eq!(found.owner(), &owner(None, &format!("w{w}")));
    }
}

#[test]
fn a_missing_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let msg = storage_error(SqliteStore::open(dir.path().join("no-such-dir").join("r.db")));
    assert!(msg.contains("no-such-dir does not exist"), "{msg}");
    assert!(!dir.path().join("no-such-dir").exists());
}

#[test]
fn a_file_that_is_not_a_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let content = "user,alice\nuser,bob\n".repeat(100);
    std::fs::write(&path, &content).unwrap();
    let msg = storage_error(SqliteStore::open(&path));
    assert!(msg.contains("not a database"), "{msg}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
}

#[test]
fn a_foreign_database_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let other = Connection::open(&path).unwrap();
    other.execute_batch("CREATE TABLE invoices (id INTEGER PRIMARY KEY); INSERT INTO invoices VALUES (1);").unwrap();
    drop(other);
    let msg = storage_error(SqliteStore::open(&path));
    assert!(msg.contains("not a reservation store"), "{msg}");
    let other = Connection::open(&path).unwrap();
    let mode: String = other.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "delete", "the foreign file was switched to WAL");
    let tables: i64 = other.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0)).unwrap();
    assert_eq!(tables, 1);
}

#[test]
fn an_unknown_schema_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    drop(SqliteStore::open(&path).unwrap());
    let raw = Connection::open(&path).unwrap();
    raw.pragma_update(None, "user_version", SCHEMA_VERSION + 1).unwrap();
    let msg = storage_error(SqliteStore::open(&path));
    assert!(msg.contains(&format!("version {}", SCHEMA_VERSION + 1)), "{msg}");
    // A table changed behind the store's back is refused as well.
    raw.pragma_update(None, "user_version", SCHEMA_VERSION).unwrap();
    raw.execute_batch("DROP TABLE reservation; CREATE TABLE reservation (k BLOB PRIMARY KEY)").unwrap();
    let msg = storage_error(SqliteStore::open(&path));
    assert!(msg.contains("reservation table"), "{msg}");
}

fn writable(path: &Path) -> bool {
    std::fs::OpenOptions::new().write(true).open(path).is_ok()
}

/// Clears the immutable attribute it set, so that the temporary directory can be removed.
struct Immutable<'a>(&'a Path);

impl Drop for Immutable<'_> {
    fn drop(&mut self) {
        let _ = std::process::Command::new("chattr").arg("-i").arg(self.0).status();
    }
}

/// A store's file in `dir` holding one confirmed row, closed.
fn file_with_one_row(dir: &tempfile::TempDir) -> std::path::PathBuf {
    let path = db(dir);
    let store = SqliteStore::open(&path).unwrap();
    block_on(store.confirm(&scope(None), &key("k"), &owner(None, "a"), v(1))).unwrap();
    path
}

#[test]
fn a_read_only_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_with_one_row(&dir);
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&path, perms).unwrap();
    // A privileged user writes through the permission bits; the immutable attribute stops it.
    let mut _immutable = None;
    if writable(&path) && std::process::Command::new("chattr").arg("+i").arg(&path).status().is_ok_and(|s| s.success())
    {
        _immutable = Some(Immutable(&path));
    }
    if writable(&path) {
        // Neither worked (a privileged user without chattr): the store must at least work.
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.len().unwrap(), 1);
        eprintln!("could not make the file read-only for this user: checked that the store works instead");
        return;
    }
    let before = std::fs::read(&path).unwrap();
    let msg = storage_error(SqliteStore::open(&path));
    assert!(msg.contains("read-only"), "{msg}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn an_unreadable_row_is_a_storage_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let clock = ManualClock::new(Instant::from_millis(1));
    let store = open(&path, &clock);
    let raw = Connection::open(&path).unwrap();
    // Rows that satisfy the table's constraints but that no store writes: (what, owner id, holds).
    let bad = [
        ("truncated holds", "x'61'", "x'0005616263'"),
        ("holds out of order", "x'61'", "x'000162000161'"),
        ("owner id not UTF-8", "x'ff'", "x'000161'"),
        ("a hold id not UTF-8", "x'61'", "x'0001ff'"),
        ("a repeated hold id", "x'61'", "x'000161000161'"),
        ("a truncated hold length", "x'61'", "x'00016100'"),
        ("an empty hold id", "x'61'", "x'0000000161'"),
    ];
    for (i, (what, owner_id, holds)) in bad.iter().enumerate() {
        raw.execute_batch(&format!(
            "INSERT INTO reservation VALUES (CAST('user' AS BLOB), x'', CAST('user-name' AS BLOB), \
             CAST('k{i}' AS BLOB), x'', {owner_id}, 0, {holds}, 9223372036854775807, NULL)"
        ))
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        let err = block_on(store.lookup(&scope(None), &key(&format!("k{i}")))).unwrap_err();
        assert!(error_chain(&err).contains("unreadable row"), "{what}: {err}");
        let err = block_on(store.confirm(&scope(None), &key(&format!("k{i}")), &owner(None, "a"), v(1))).unwrap_err();
        assert!(matches!(err, StoreError::Storage(_)), "{what}: {err}");
    }
    // The constraints refuse rows whose columns do not fit their state.
    for (cols, what) in [
        ("x'', x'61', 1, x'000161', NULL, 5", "confirmed with holds"),
        ("x'', x'61', 0, NULL, 5, NULL", "pending without holds"),
        ("x'', x'61', 0, x'0000', 5, NULL", "pending with holds of two bytes"),
        ("x'', x'61', 2, NULL, NULL, 5", "unknown state"),
        ("CAST('b' AS BLOB), x'61', 1, NULL, NULL, 5", "owner of another tenant"),
    ] {
        let tenant = if what.contains("tenant") { "CAST('a' AS BLOB)" } else { "x''" };
        let sql = format!(
            "INSERT INTO reservation VALUES (CAST('user' AS BLOB), {tenant}, CAST('n' AS BLOB), CAST('{what}' AS BLOB), {cols})"
        );
        assert!(raw.execute_batch(&sql).is_err(), "{what} was accepted");
    }
}

/// The one place a rule is restated outside the spec functions is the index-driven SQL sweep
/// (`expires_at <= now` on pending rows). After every sweep, the rows left are exactly the ones
/// the spec calls live (rule D7 through `Reservation::is_live`), at every instant around every
/// expiry, `Instant::MAX` and confirmed rows included.
#[test]
fn d7_the_sql_sweep_removes_exactly_what_the_spec_calls_expired() {
    let dir = tempfile::tempdir().unwrap();
    let start = Instant::from_millis(1_000);
    let clock = ManualClock::new(start);
    let mut options = SqliteOptions::default();
    options.sweep_every = 0;
    let store = SqliteStore::open_with(db(&dir), clock.clone(), options).unwrap();
    let (s, a) = (scope(Some("acme")), owner(Some("acme"), "a"));
    let mut expected: Vec<(String, StoredReservation)> = Vec::new();
    for ms in (1..=20).chain([u64::MAX]) {
        let k = format!("p{ms}");
        block_on(store.reserve(&s, &key(&k), &a, &hold("h"), ttl(ms))).unwrap();
        let row = block_on(store.lookup(&s, &key(&k))).unwrap().expect("just reserved");
        expected.push((k, row));
    }
    for n in 1..=3 {
        let k = format!("c{n}");
        block_on(store.confirm(&s, &key(&k), &a, v(n))).unwrap();
        expected.push((k, Reservation::confirmed(a.clone(), v(n))));
    }
    let raw = Connection::open(db(&dir)).unwrap();
    let rows = || -> BTreeSet<String> {
        let mut stmt = raw.prepare("SELECT key FROM reservation").unwrap();
        stmt.query_map([], |r| r.get::<_, Vec<u8>>(0))
            .unwrap()
            .map(|k| String::from_utf8(k.unwrap()).unwrap())
            .collect()
    };
    for step in 0..=22 {
        let now = start.saturating_add_millis(step);
        clock.set(now);
        store.sweep().unwrap();
        let live: BTreeSet<String> = expected.iter().filter(|(_, r)| r.is_live(now)).map(|(k, _)| k.clone()).collect();
        assert_eq!(rows(), live, "rows left by the sweep at {now}");
    }
}

/// The table's length checks are written from `MAX_KEY_LEN` and `MAX_NAME_LEN`: a row at each
/// limit is accepted by SQLite, one byte more is refused, so the schema cannot drift from the
/// limits the types enforce.
#[test]
fn d6_the_schema_s_length_checks_are_the_types_limits() {
    let dir = tempfile::tempdir().unwrap();
    drop(SqliteStore::open(db(&dir)).unwrap());
    let raw = Connection::open(db(&dir)).unwrap();
    let insert = |namespace: usize, key: usize, owner_id: usize| {
        raw.execute(
            "INSERT INTO reservation (aggregate_type, tenant, namespace, key, owner_tenant, owner_id, state, version)
             VALUES (x'75', x'', ?1, ?2, x'', ?3, 1, 1)",
            (vec![b'n'; namespace], vec![b'k'; key], vec![b'o'; owner_id]),
        )
    };
    insert(MAX_NAME_LEN, MAX_KEY_LEN, MAX_NAME_LEN).expect("a row at every limit");
    assert!(insert(MAX_NAME_LEN + 1, 1, 1).is_err(), "a namespace of MAX_NAME_LEN + 1 bytes was stored");
    assert!(insert(1, MAX_KEY_LEN + 1, 1).is_err(), "a key of MAX_KEY_LEN + 1 bytes was stored");
    assert!(insert(1, 2, MAX_NAME_LEN + 1).is_err(), "an owner id of MAX_NAME_LEN + 1 bytes was stored");
    assert!(Key::new("k".repeat(MAX_KEY_LEN + 1)).is_err());
}

// ---------------------------------------------------------------------------------------------
// integrity, busy retries and the public accessors

/// Flips one byte of a confirmed row's owner tenant in the table's data page, so that the row
/// breaks the table's `CHECK (owner_tenant = tenant)`: a healthy file passes `check_integrity`,
/// the flipped one fails it, naming the check.
#[test]
fn check_integrity_reports_a_flipped_byte_in_a_data_page() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let clock = ManualClock::new(Instant::from_millis(1));
    let (s, o) = (scope(Some("acme")), owner(Some("acme"), "marker-owner"));
    {
        let store = open(&path, &clock);
        block_on(store.confirm(&s, &key("marker-key"), &o, v(1))).unwrap();
        store.check_integrity().expect("a healthy file passes");
    }
    let mut bytes = std::fs::read(&path).unwrap();
    let row = b"marker-keyacmemarker-owner";
    let at = bytes.windows(row.len()).position(|w| w == row).expect("the row is in the database file");
    bytes[at + "marker-key".len()] ^= 0x03; // "acme" becomes "bcme"
    std::fs::write(&path, &bytes).unwrap();
    let store = open(&path, &clock);
    let msg = storage_error(store.check_integrity());
    assert!(msg.contains("integrity_check failed"), "{msg}");
}

/// A clock that counts how often it is read: the store reads it once per attempted transaction
/// that reached its body.
#[derive(Clone, Default)]
struct CountingClock(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl Clock for CountingClock {
    fn now(&self) -> Instant {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Instant::from_millis(1)
    }
}

impl CountingClock {
    fn reads(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

fn busy_options(timeout_ms: u64, retries: u32) -> SqliteOptions {
    let mut options = SqliteOptions::default();
    options.busy_timeout = Duration::from_millis(timeout_ms);
    options.busy_retries = retries;
    options
}

/// Runs `op` on another thread while a second connection holds a write lock on the file at
/// `path`, which it lets go when `op` returned or after `release_after`, whichever comes first.
fn while_locked<T: Send>(path: &Path, release_after: Duration, op: impl FnOnce() -> T + Send) -> T {
    let holder = Connection::open(path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|t| {
        let worker = t.spawn(|| {
            let out = op();
            let _ = done.send(());
            out
        });
        let _ = finished.recv_timeout(release_after);
        holder.execute_batch("ROLLBACK").unwrap();
        worker.join().unwrap()
    })
}

/// Opens a store on `dir` with `busy_timeout` and `busy_retries`, and confirms key `k` for owner
/// `a` while another connection holds the write lock (see [`while_locked`]).
fn confirm_while_locked(
    dir: &tempfile::TempDir,
    (timeout_ms, retries): (u64, u32),
    release_after: Duration,
) -> (SqliteStore<ManualClock>, StoreResult<ConfirmOutcome>) {
    let clock = ManualClock::new(Instant::from_millis(1));
    let store = SqliteStore::open_with(db(dir), clock, busy_options(timeout_ms, retries)).unwrap();
    let result = while_locked(&db(dir), release_after, || {
        block_on(store.confirm(&scope(None), &key("k"), &owner(None, "a"), v(1)))
    });
    (store, result)
}

/// Another connection holds the write lock past one busy timeout and then lets go: the store's
/// transaction found the database busy, was tried again, and succeeded.
#[test]
fn a_busy_write_is_retried_until_the_lock_is_released() {
    let dir = tempfile::tempdir().unwrap();
    // About 5 s of tries in all; the lock is held for 4 busy timeouts.
    let (store, outcome) = confirm_while_locked(&dir, (50, 100), Duration::from_millis(200));
    assert_eq!(outcome.unwrap(), ConfirmOutcome::Confirmed);
    let found = block_on(store.lookup(&scope(None), &key("k"))).unwrap();
    assert_eq!(found, Some(Reservation::confirmed(owner(None, "a"), v(1))));
}

/// The lock is held until the store gives up: the error is a storage error that says the
/// database stayed locked through every try, with SQLite's busy error as its source, and the
/// operation did not happen.
#[test]
fn a_write_lock_held_through_every_retry_is_a_typed_busy_storage_error() {
    let dir = tempfile::tempdir().unwrap();
    // Released early only if the store keeps trying far longer than its 3 tries of 20 ms.
    let (store, result) = confirm_while_locked(&dir, (20, 2), Duration::from_secs(10));
    let Err(StoreError::Storage(e)) = result else { panic!("expected a storage error, got {result:?}") };
    assert!(e.message().contains("stayed locked by another connection (3 tries of 20ms)"), "{e}");
    assert!(!e.is_indeterminate());
    let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<rusqlite::Error>());
    assert_eq!(source.and_then(rusqlite::Error::sqlite_error_code), Some(rusqlite::ErrorCode::DatabaseBusy), "{e}");
    assert_eq!(block_on(store.lookup(&scope(None), &key("k"))).unwrap(), None);
}

/// A trigger added behind the store's back makes every write fail with a constraint error: that
/// failure is reported as a failed transaction, at once, not retried as if the database were
/// busy (the clock is read once, by the one attempt).
#[test]
fn a_failure_other_than_busy_is_reported_without_retrying() {
    let dir = tempfile::tempdir().unwrap();
    let clock = CountingClock::default();
    let store = SqliteStore::open_with(db(&dir), clock.clone(), busy_options(20, 5)).unwrap();
    Connection::open(db(&dir))
        .unwrap()
        .execute_batch("CREATE TRIGGER refuse BEFORE INSERT ON reservation BEGIN SELECT RAISE(ABORT, 'refused'); END")
        .unwrap();
    let before = clock.reads();
    let result = block_on(store.confirm(&scope(None), &key("k"), &owner(None, "a"), v(1)));
    let Err(StoreError::Storage(e)) = result else { panic!("expected a storage error, got {result:?}") };
    assert_eq!(clock.reads() - before, 1, "the failed transaction was tried again: {e}");
    assert!(e.message().contains("the transaction failed"), "{e}");
    assert!(error_chain(&e).contains("refused"), "{e}");
}

/// `len` counts every row, an expired pending one included, and `is_empty` agrees with it.
#[test]
fn len_and_is_empty_count_every_row_until_it_is_swept() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Instant::from_millis(1));
    let store = open(&db(&dir), &clock);
    let (s, a) = (scope(None), owner(None, "a"));
    assert_eq!((store.len().unwrap(), store.is_empty().unwrap()), (0, true));
    block_on(store.reserve(&s, &key("p"), &a, &hold("h"), ttl(5))).unwrap();
    assert_eq!((store.len().unwrap(), store.is_empty().unwrap()), (1, false));
    block_on(store.confirm(&s, &key("c"), &a, v(1))).unwrap();
    clock.advance(10);
    assert_eq!((store.len().unwrap(), store.is_empty().unwrap()), (2, false));
    assert_eq!(store.sweep().unwrap(), 1);
    block_on(store.release(&s, &key("c"), &a, ReleaseVersion::ANY_VERSION)).unwrap();
    assert_eq!((store.len().unwrap(), store.is_empty().unwrap()), (0, true));
}

/// `options` and `path` give back what the store was opened with, and its `Debug` output names
/// both.
#[test]
fn options_path_and_debug_show_what_the_store_was_opened_with() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = SqliteOptions::default();
    options.synchronous = Synchronous::Normal;
    options.busy_timeout = Duration::from_millis(1234);
    options.busy_retries = 7;
    options.sweep_every = 99;
    options.max_idle_connections = 3;
    options.wal_autocheckpoint = 77;
    options.open_check = OpenCheck::Quick;
    let store = SqliteStore::open_with(db(&dir), ManualClock::new(Instant::from_millis(1)), options.clone()).unwrap();
    assert_eq!(store.path(), db(&dir));
    assert_eq!(format!("{:?}", store.options()), format!("{options:?}"));
    let debug = format!("{store:?}");
    assert!(debug.starts_with("SqliteStore {"), "{debug}");
    assert!(debug.contains(&format!("{:?}", db(&dir))), "{debug}");
    assert!(debug.contains(&format!("{options:?}")), "{debug}");
}

/// A path whose directory is a regular file is not a missing directory: SQLite refuses to open
/// it, and the file in its place is left as it was.
#[test]
fn a_path_under_a_regular_file_cannot_be_opened() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain");
    std::fs::write(&file, "not a directory").unwrap();
    let msg = storage_error(SqliteStore::open(file.join("r.db")));
    assert!(msg.contains("cannot open the file"), "{msg}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "not a directory");
}

/// A database with no tables but another application's id, or a user version, belongs to
/// someone else: it is refused, and no schema is created in it.
#[test]
fn an_empty_database_of_another_application_is_refused_untouched() {
    for (pragma, value) in [("application_id", 7), ("user_version", 3)] {
        let dir = tempfile::tempdir().unwrap();
        let path = db(&dir);
        Connection::open(&path).unwrap().pragma_update(None, pragma, value).unwrap();
        let msg = storage_error(SqliteStore::open(&path));
        assert!(msg.contains("not a reservation store"), "{pragma}: {msg}");
        let raw = Connection::open(&path).unwrap();
        let objects: i64 = raw.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0)).unwrap();
        assert_eq!(objects, 0, "{pragma}: a schema was created");
    }
}

/// `ANALYZE` adds SQLite's own statistics table, `sqlite_stat1`: the file is still a reservation
/// store.
#[test]
fn a_file_with_sqlite_s_statistics_tables_still_opens() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_with_one_row(&dir);
    Connection::open(&path).unwrap().execute_batch("ANALYZE").unwrap();
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(store.len().unwrap(), 1);
}

/// The write-ahead log exists while some connection has the file open; closing the last one
/// checkpoints and removes it. So it shows whether the store kept a connection.
fn log_exists(dir: &tempfile::TempDir) -> bool {
    dir.path().join("reservations.db-wal").exists()
}

/// With `max_idle_connections` 0 the store keeps no connection between operations (the log is
/// removed after each); with 1 it keeps one, even after a transaction that failed (it was rolled
/// back, so the connection is reusable).
#[test]
fn idle_connections_are_kept_up_to_max_idle_connections() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Instant::from_millis(1));
    let (s, a) = (scope(None), owner(None, "a"));
    let with_idle = |max: usize| {
        let mut options = SqliteOptions::default();
        options.max_idle_connections = max;
        SqliteStore::open_with(db(&dir), clock.clone(), options).unwrap()
    };
    let store = with_idle(0);
    assert!(!log_exists(&dir));
    block_on(store.confirm(&s, &key("k"), &a, v(1))).unwrap();
    assert!(!log_exists(&dir), "a connection was kept with max_idle_connections 0");
    drop(store);
    let store = with_idle(1);
    assert!(log_exists(&dir), "no connection was kept after the open");
    block_on(store.confirm(&s, &key("k2"), &a, v(1))).unwrap();
    assert!(log_exists(&dir), "no connection was kept after an operation");
    // An unreadable row makes the transaction fail inside its body.
    let raw = Connection::open(db(&dir)).unwrap();
    raw.execute_batch(
        "INSERT INTO reservation VALUES (CAST('user' AS BLOB), x'', CAST('user-name' AS BLOB), \
         CAST('bad' AS BLOB), x'', x'ff', 1, NULL, NULL, 1)",
    )
    .unwrap();
    drop(raw);
    let err = block_on(store.confirm(&s, &key("bad"), &a, v(1))).unwrap_err();
    assert!(error_chain(&err).contains("unreadable row"), "{err}");
    assert!(log_exists(&dir), "the connection of the failed transaction was not kept");
    drop(store);
    assert!(!log_exists(&dir));
}

/// The automatic sweep runs when the `sweep_every`-th new row is inserted, not before, and only
/// new rows count; `sweep_every` 0 turns it off.
#[test]
fn the_automatic_sweep_runs_after_exactly_sweep_every_new_rows() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Instant::from_millis(1));
    let (s, a) = (scope(None), owner(None, "a"));
    let with_sweep_every = |every: u64, file: &str| {
        let mut options = SqliteOptions::default();
        options.sweep_every = every;
        SqliteStore::open_with(dir.path().join(file), clock.clone(), options).unwrap()
    };
    // Each reservation has expired by the time the next one is made.
    let reserve_expiring = |store: &SqliteStore<ManualClock>, k: &str| {
        assert_eq!(block_on(store.reserve(&s, &key(k), &a, &hold("h"), ttl(1))).unwrap(), ReserveOutcome::Taken);
        clock.advance(10);
    };
    let store = with_sweep_every(4, "every4.db");
    for k in ["a", "b", "c"] {
        reserve_expiring(&store, k);
    }
    // Operations that insert no row do not count.
    block_on(store.release(&s, &key("none"), &a, ReleaseVersion::ANY_VERSION)).unwrap();
    block_on(store.abandon(&s, &key("none"), &a, &hold("h"))).unwrap();
    assert_eq!(store.len().unwrap(), 3, "swept before the fourth new row");
    block_on(store.confirm(&s, &key("d"), &a, v(1))).unwrap();
    assert_eq!(store.len().unwrap(), 1, "the fourth new row did not sweep the three expired ones");
    let store = with_sweep_every(0, "never.db");
    for i in 0..20 {
        reserve_expiring(&store, &format!("k{i}"));
    }
    assert_eq!(store.len().unwrap(), 20, "swept with sweep_every 0");
}

/// `clock` is the clock the store was opened with.
#[test]
fn the_store_reads_the_clock_it_was_opened_with() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(Instant::from_millis(42));
    let store = open(&db(&dir), &clock);
    assert_eq!(store.clock().now(), Instant::from_millis(42));
    clock.advance(1);
    assert_eq!(store.clock().now(), Instant::from_millis(43));
}

/// Opening a new file while another connection holds a lock on it: the switch to WAL mode,
/// which SQLite runs without its busy handler, finds the file busy and is tried again until the
/// lock is released, within the busy timeout.
#[test]
fn opening_a_file_another_connection_has_locked_waits_for_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    std::fs::File::create(&path).unwrap();
    // Released after the open has found the file busy, long before its 5 s are up.
    let opened = while_locked(&path, Duration::from_millis(200), || {
        SqliteStore::open_with(&path, SystemClock, busy_options(5_000, 2))
    });
    let store = opened.expect("the open waited for the lock");
    assert_eq!(store.len().unwrap(), 0);
}

/// A failure to switch to WAL mode other than a busy file (here: the directory does not let
/// SQLite create the log) is reported at once, not retried for the busy timeout (the largest,
/// so that retrying would hang).
#[test]
fn a_failure_to_switch_to_wal_mode_is_reported_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    std::fs::File::create(&path).unwrap();
    let _immutable = Immutable(dir.path());
    let locked = std::process::Command::new("chattr").arg("+i").arg(dir.path()).status().is_ok_and(|s| s.success())
        && std::fs::File::create(dir.path().join("probe")).is_err();
    if !locked {
        eprintln!("could not make the directory unwritable for this user (chattr): skipped");
        return;
    }
    let msg = storage_error(SqliteStore::open_with(&path, SystemClock, busy_options(u64::MAX, 2)));
    assert!(msg.contains("cannot switch to WAL mode"), "{msg}");
}

/// A file of schema version 1 (no clock table) is migrated at open: the clock table is added,
/// the version set, the rows kept; and the store then persists the instant of its changes there.
#[test]
fn a_version_1_file_is_migrated_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = file_with_one_row(&dir);
    let raw = Connection::open(&path).unwrap();
    raw.execute_batch("DROP TABLE reservation_clock; PRAGMA user_version = 1;").unwrap();
    drop(raw);
    let store = SqliteStore::open(&path).unwrap();
    assert_eq!(
        block_on(store.lookup(&scope(None), &key("k"))).unwrap().map(|r| r.owner().clone()),
        Some(owner(None, "a"))
    );
    block_on(store.confirm(&scope(None), &key("k2"), &owner(None, "a"), v(1))).unwrap();
    drop(store);
    let raw = Connection::open(&path).unwrap();
    let version: i32 = raw.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let scopes: i64 = raw.query_row("SELECT count(*) FROM reservation_clock", [], |r| r.get(0)).unwrap();
    assert_eq!(scopes, 1, "the change after the migration persisted no instant");
}
