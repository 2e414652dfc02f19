//! [`SqliteStore`]: a durable store in one SQLite file, built on the functions of [`crate::spec`].

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, Row, params};

use crate::error::{StorageError, StoreResult};
use crate::operation::{Outcome, Request};
use crate::spec::{self, Reservation, Step};
use crate::store::{ReservationStore, StoredReservation};
use crate::time::{Clock, Instant, SystemClock, Version};
use crate::types::{AggregateRef, HoldId, Key, MAX_KEY_LEN, MAX_NAME_LEN, ReservationScope};

/// The version of the table layout this build writes and reads, kept in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i32 = 1;

/// `PRAGMA application_id` of a reservation store file: the bytes `RSRV`.
const APPLICATION_ID: i32 = 0x5253_5256;

/// The table, its length checks written from the same `MAX_*` constants that the types enforce,
/// so that the schema and the Rust limits cannot drift apart. An existing file's table must
/// equal it byte for byte.
fn create_table() -> String {
    format!(
        "CREATE TABLE reservation (
    aggregate_type BLOB NOT NULL CHECK (typeof(aggregate_type) = 'blob' AND length(aggregate_type) BETWEEN 1 AND {MAX_NAME_LEN}),
    tenant BLOB NOT NULL CHECK (typeof(tenant) = 'blob' AND length(tenant) <= {MAX_NAME_LEN}),
    namespace BLOB NOT NULL CHECK (typeof(namespace) = 'blob' AND length(namespace) BETWEEN 1 AND {MAX_NAME_LEN}),
    key BLOB NOT NULL CHECK (typeof(key) = 'blob' AND length(key) BETWEEN 1 AND {MAX_KEY_LEN}),
    owner_tenant BLOB NOT NULL CHECK (typeof(owner_tenant) = 'blob' AND length(owner_tenant) <= {MAX_NAME_LEN}),
    owner_id BLOB NOT NULL CHECK (typeof(owner_id) = 'blob' AND length(owner_id) BETWEEN 1 AND {MAX_NAME_LEN}),
    state INTEGER NOT NULL CHECK (state IN (0, 1)),
    holds BLOB,
    expires_at INTEGER,
    version INTEGER,
    PRIMARY KEY (aggregate_type, tenant, namespace, key),
    CHECK (length(tenant) = 0 OR owner_tenant = tenant),
    CHECK (
        (state = 0 AND typeof(holds) = 'blob' AND length(holds) > 2 AND typeof(expires_at) = 'integer'
            AND version IS NULL)
        OR (state = 1 AND holds IS NULL AND expires_at IS NULL AND typeof(version) = 'integer')
    )
) WITHOUT ROWID"
    )
}

const CREATE_INDEX: &str = "CREATE INDEX reservation_expiry ON reservation (expires_at) WHERE state = 0";

const SELECT_ROW: &str = "SELECT owner_tenant, owner_id, state, holds, expires_at, version FROM reservation
    WHERE aggregate_type = ?1 AND tenant = ?2 AND namespace = ?3 AND key = ?4";
const UPSERT_ROW: &str = "INSERT OR REPLACE INTO reservation
    (aggregate_type, tenant, namespace, key, owner_tenant, owner_id, state, holds, expires_at, version)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
const DELETE_ROW: &str =
    "DELETE FROM reservation WHERE aggregate_type = ?1 AND tenant = ?2 AND namespace = ?3 AND key = ?4";
const DELETE_EXPIRED: &str = "DELETE FROM reservation WHERE state = 0 AND expires_at <= ?1";

const PENDING: i64 = 0;
const CONFIRMED: i64 = 1;

/// When a commit is synced to disk (SQLite's `PRAGMA synchronous`, in WAL mode).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum Synchronous {
    /// Synced at checkpoints only: an acknowledged operation survives a process kill, but the
    /// last ones may be lost to a power loss or an operating-system crash.
    Normal,
    /// Synced at every commit: an acknowledged operation survives a process kill and a power
    /// loss. The default.
    #[default]
    Full,
}

impl Synchronous {
    /// The value `PRAGMA synchronous` is set to.
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }

    /// The number `PRAGMA synchronous` reads back once set.
    fn level(self) -> i64 {
        match self {
            Synchronous::Normal => 1,
            Synchronous::Full => 2,
        }
    }
}

/// The longest [`SqliteOptions::busy_timeout`] SQLite can take, about 24.8 days (`i32::MAX`
/// milliseconds); a longer one is clamped to it.
pub const MAX_BUSY_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// Which SQLite consistency check [`SqliteStore::open_with`] runs before it returns a store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum OpenCheck {
    /// None: opening costs nothing more. The default.
    #[default]
    None,
    /// `PRAGMA quick_check`: the structure of every page, in time linear in the file's size.
    Quick,
    /// `PRAGMA integrity_check`: the quick check, and that the expiry index agrees with the table.
    /// As [`SqliteStore::check_integrity`].
    Full,
}

/// How a [`SqliteStore`] uses its file. Start from [`SqliteOptions::default`] and set fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// When commits are synced to disk; [`Synchronous::Full`] by default.
    pub synchronous: Synchronous,
    /// How long one transaction waits for another process's write lock; 5 s by default. Opening
    /// a file that another process is creating waits up to this long too. Clamped to
    /// [`MAX_BUSY_TIMEOUT`].
    pub busy_timeout: Duration,
    /// How many more times a transaction that found the database busy is tried before it
    /// becomes a [`StorageError`]; 2 by default.
    pub busy_retries: u32,
    /// Expired pending reservations are swept after this many new rows; 1024 by default
    /// (0 turns the automatic sweep off, leaving [`SqliteStore::sweep`]).
    pub sweep_every: u64,
    /// How many idle connections the store keeps open for later operations; 8 by default.
    pub max_idle_connections: usize,
    /// After how many pages the write-ahead log is checkpointed into the database file
    /// (`PRAGMA wal_autocheckpoint`); 1000 (about 4 MiB of 4 KiB pages), SQLite's default. A
    /// smaller value keeps the log, and the disk space it holds, smaller at the cost of more
    /// checkpoints; 0 turns automatic checkpoints off, leaving [`SqliteStore::checkpoint`].
    pub wal_autocheckpoint: u32,
    /// The consistency check run at open; [`OpenCheck::None`] by default.
    pub open_check: OpenCheck,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
            busy_retries: 2,
            sweep_every: 1024,
            max_idle_connections: 8,
            wal_autocheckpoint: 1000,
            open_check: OpenCheck::None,
        }
    }
}

/// A durable store in one SQLite file: linearizable per (scope, key) across the threads and
/// processes that share the file, and built on the spec functions, which it calls inside one
/// `BEGIN IMMEDIATE` transaction per operation.
///
/// Expired pending reservations are deleted when an operation touches them, by
/// [`SqliteStore::sweep`], and automatically after every [`SqliteOptions::sweep_every`] new
/// rows, so the file holds at most the live reservations, those that expired since the last
/// sweep, and the rows inserted since it.
///
/// # Layout
///
/// One table, `reservation`, holds one row per (scope, key); its primary key is the scope's three
/// parts and the key, so the database itself makes two owners of one key impossible. Every text
/// is stored as a BLOB of its exact UTF-8 bytes (rule D5: keys and hold ids compare as bytes,
/// whatever characters they hold). [`SYSTEM_TENANT`](crate::SYSTEM_TENANT) is stored as the empty
/// BLOB, which no tenant id can be (tenant ids are never empty), so the two never collide.
///
/// | column | pending | confirmed |
/// |---|---|---|
/// | `aggregate_type`, `tenant`, `namespace`, `key` | the scope and key | the scope and key |
/// | `owner_tenant`, `owner_id` | the owner (its type is the scope's, rule D6) | the owner |
/// | `state` | 0 | 1 |
/// | `holds` | the hold ids, each as a 2-byte big-endian length and its bytes, in ascending order | NULL |
/// | `expires_at` | the expiry | NULL |
/// | `version` | NULL | the confirmed version |
///
/// Instants and versions are `u64`; SQLite integers are `i64`. They are stored offset by 2⁶³
/// (`x - 2⁶³`, computed as a bit flip), a bijection that keeps their order, so every value,
/// [`Instant::MAX`] included, round-trips and SQL compares expiries correctly. `CHECK`
/// constraints reject a row whose columns do not fit its state. The schema is identified by
/// `PRAGMA application_id` and versioned by `PRAGMA user_version` ([`SCHEMA_VERSION`]); a file
/// with another application id, other tables, or another schema version is refused at open.
///
/// # Transactions and durability
///
/// Every operation validates its arguments (rule D6), then runs one `BEGIN IMMEDIATE`
/// transaction that reads the row, reads the clock, calls the spec function and writes its result
/// (deleting the row when the key becomes free), then commits. The outcome is returned only
/// after the commit succeeded. The file is in WAL mode. With [`Synchronous::Full`] (the default)
/// each commit is synced to disk before it is acknowledged: an acknowledged operation survives a
/// process kill and a power loss. With [`Synchronous::Normal`] it survives a process kill (the
/// commit is in the operating system's cache), but the last commits before a power loss or an
/// operating-system crash may be lost; the file stays consistent either way.
///
/// # Concurrency
///
/// Threads and processes may share one file. The store keeps a small pool of connections;
/// writers of one process take turns on a mutex, writers of several processes on SQLite's write
/// lock, waiting up to [`SqliteOptions::busy_timeout`] for it and retrying a busy transaction
/// [`SqliteOptions::busy_retries`] more times. A transaction that still finds the database busy
/// is rolled back and reported as a [`StorageError`], never as an outcome. Dropping the last open
/// handle on a file checkpoints the write-ahead log into the database, which costs a disk sync.
///
/// # Example
///
/// ```
/// use reservation_store::*;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("reservations.db");
/// let scope = ReservationScope::parse("user", Some("acme"), "user-name")?;
/// let alice = AggregateRef::parse("user", Some("acme"), "alice-id")?;
/// let key = Key::new("alice")?;
/// {
///     let store = SqliteStore::open(&path)?;
///     block_on(store.confirm(&scope, &key, &alice, Version::stream(1)?))?;
/// }
/// // A restart finds the confirmed reservation.
/// let store = SqliteStore::open(&path)?;
/// assert_eq!(block_on(store.lookup(&scope, &key))?.map(|r| r.owner().clone()), Some(alice));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SqliteStore<C = SystemClock> {
    path: PathBuf,
    clock: C,
    options: SqliteOptions,
    pool: Mutex<Vec<Connection>>,
    /// Writers of this process take turns here, rather than polling SQLite's lock.
    writer: Mutex<()>,
    /// New rows since the last automatic sweep.
    inserted: AtomicU64,
}

impl<C> std::fmt::Debug for SqliteStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore").field("path", &self.path).field("options", &self.options).finish()
    }
}

impl SqliteStore<SystemClock> {
    /// Opens the store in the file at `path` on the system clock, creating the file and its
    /// schema if it does not exist (its directory must).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, StorageError> {
        Self::open_with(path, SystemClock, SqliteOptions::default())
    }
}

type Step_<Out> = Step<AggregateRef, BTreeSet<HoldId>, Out>;

/// A failure inside a transaction: SQLite's, or a row this build cannot read.
enum Fail {
    Sql(rusqlite::Error),
    Corrupt(String),
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(e)
    }
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

impl<C: Clock> SqliteStore<C> {
    /// Opens the store in the file at `path` on `clock` (a [`crate::ManualClock`] in tests), with
    /// the default options.
    pub fn open_with_clock(path: impl AsRef<Path>, clock: C) -> Result<Self, StorageError> {
        Self::open_with(path, clock, SqliteOptions::default())
    }

    /// Opens the store in the file at `path` on `clock` with `options`, creating the file and
    /// its schema if it does not exist.
    ///
    /// A missing directory, a read-only file, a file that is not a database, a database that
    /// holds other tables, and a reservation store of another schema version are each a
    /// [`StorageError`] saying so; the file is left as it was.
    pub fn open_with(path: impl AsRef<Path>, clock: C, options: SqliteOptions) -> Result<Self, StorageError> {
        let path = path.as_ref().to_path_buf();
        let store = Self {
            path,
            clock,
            options,
            pool: Mutex::new(Vec::new()),
            writer: Mutex::new(()),
            inserted: AtomicU64::new(0),
        };
        let conn = store.connect()?;
        store.prepare_schema(&conn)?;
        match store.options.open_check {
            OpenCheck::None => {}
            OpenCheck::Quick => store.run_check(&conn, "quick_check")?,
            OpenCheck::Full => store.run_check(&conn, "integrity_check")?,
        }
        store.give_back(conn);
        Ok(store)
    }

    /// The store's clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The file the store lives in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options the store was opened with.
    pub fn options(&self) -> &SqliteOptions {
        &self.options
    }

    /// How many rows the file holds, expired pending reservations not yet swept included.
    pub fn len(&self) -> Result<usize, StorageError> {
        let conn = self.take()?;
        let count: i64 = conn
            .query_row("SELECT count(*) FROM reservation", [], |r| r.get(0))
            .map_err(|e| self.error("cannot count the rows", e))?;
        self.give_back(conn);
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// Whether the file holds no rows at all.
    pub fn is_empty(&self) -> Result<bool, StorageError> {
        self.len().map(|n| n == 0)
    }

    /// Deletes every pending reservation that is expired by the store's clock; returns how many
    /// it deleted. No answer changes: an expired pending reservation is already a free key (D7).
    pub fn sweep(&self) -> Result<usize, StorageError> {
        let conn = self.take()?;
        let deleted = self.write_txn(&conn, |conn| {
            let now = self.clock.now();
            Ok(conn.prepare_cached(DELETE_EXPIRED)?.execute([sortable(now.as_millis())])?)
        });
        self.settle(conn, deleted)
    }

    /// Runs SQLite's `PRAGMA integrity_check` on the file: `Ok` when it reports `ok`, otherwise
    /// an error listing what it found.
    ///
    /// SQLite detects a torn or flipped page only when it reads it, and a flipped byte inside a
    /// row may read as a valid row with another owner or no row at all: run this after a crash of
    /// the machine, a restore from backup, or on a schedule, or open with
    /// [`SqliteOptions::open_check`].
    pub fn check_integrity(&self) -> Result<(), StorageError> {
        let conn = self.take()?;
        let result = self.run_check(&conn, "integrity_check");
        self.give_back(conn);
        result
    }

    /// Runs `PRAGMA {pragma}` (`quick_check` or `integrity_check`): `Ok` when it reports `ok`.
    fn run_check(&self, conn: &Connection, pragma: &str) -> Result<(), StorageError> {
        let found: Vec<String> = conn
            .prepare(&format!("PRAGMA {pragma}"))
            .and_then(|mut s| s.query_map([], |r| r.get::<_, String>(0))?.collect())
            .map_err(|e| match e.sqlite_error_code() {
                Some(ErrorCode::DatabaseCorrupt) => self.error(format_args!("{pragma} failed: the file is corrupt"), e),
                _ => self.error(format_args!("cannot run {pragma}"), e),
            })?;
        if found == ["ok"] { Ok(()) } else { Err(self.fail(format!("{pragma} failed: {}", found.join("; ")))) }
    }

    /// Copies every committed transaction from the write-ahead log into the database file and
    /// truncates the log to zero bytes, returning its disk space. A long-running reader of
    /// another connection or process can keep it from completing, which is a [`StorageError`];
    /// try again later. The store also checkpoints by itself, after
    /// [`SqliteOptions::wal_autocheckpoint`] pages, but only truncates the log here and at close.
    pub fn checkpoint(&self) -> Result<(), StorageError> {
        let conn = self.take()?;
        let busy = conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get::<_, i64>(0))
            .map_err(|e| self.error("cannot checkpoint the write-ahead log", e));
        self.give_back(conn);
        match busy? {
            0 => Ok(()),
            _ => Err(self.fail("the checkpoint did not complete: another connection is using the log")),
        }
    }

    /// The busy timeout SQLite is given: the option, clamped to [`MAX_BUSY_TIMEOUT`].
    fn busy_timeout(&self) -> Duration {
        self.options.busy_timeout.min(MAX_BUSY_TIMEOUT)
    }

    /// Runs `f` again while SQLite says the database is busy, for up to the busy timeout: the
    /// steps of an open that SQLite runs without its busy handler (the switch to WAL mode).
    fn until_not_busy<T>(&self, mut f: impl FnMut() -> Result<T, rusqlite::Error>) -> Result<T, rusqlite::Error> {
        let started = std::time::Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            match f() {
                Err(e) if is_busy(&e) && started.elapsed() < self.busy_timeout() => {
                    std::thread::sleep(pause);
                    pause = pause.saturating_mul(2).min(Duration::from_millis(50));
                }
                result => return result,
            }
        }
    }

    /// Refuses, before SQLite sees it, a path that cannot be a store's file, naming why.
    fn check_path(&self) -> Result<(), StorageError> {
        if self.path.as_os_str().is_empty() {
            return Err(StorageError::new("SQLite store: the path is empty; a store needs a file"));
        }
        match std::fs::metadata(&self.path) {
            Ok(m) if m.is_dir() => Err(self.fail("is a directory, not a database file")),
            Ok(m) if !m.is_file() => Err(self.fail("is not a regular file (a FIFO, a socket or a device)")),
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                match self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    Some(dir) if !dir.is_dir() => {
                        Err(self.fail(format_args!("its directory {} does not exist", dir.display())))
                    }
                    _ => Ok(()),
                }
            }
            Err(_) => Ok(()),
        }
    }

    fn fail(&self, what: impl std::fmt::Display) -> StorageError {
        StorageError::new(format!("SQLite store {}: {what}", self.path.display()))
    }

    fn error(&self, what: impl std::fmt::Display, e: rusqlite::Error) -> StorageError {
        if e.sqlite_error_code() == Some(ErrorCode::NotADatabase) {
            // Whichever statement first read the header, the file is the problem.
            let what = "is not an SQLite database (another kind of file, or its header is corrupt)";
            return StorageError::with_source(format!("SQLite store {}: {what}", self.path.display()), e);
        }
        StorageError::with_source(format!("SQLite store {}: {what}", self.path.display()), e)
    }

    fn convert(&self, fail: Fail) -> StorageError {
        match fail {
            Fail::Sql(e) if is_busy(&e) => self.error(
                format_args!(
                    "the database stayed locked by another connection ({} tries of {:?}); gave up",
                    self.options.busy_retries.saturating_add(1),
                    self.options.busy_timeout
                ),
                e,
            ),
            Fail::Sql(e) => self.error("the transaction failed", e),
            Fail::Corrupt(what) => self.fail(format_args!("unreadable row: {what}")),
        }
    }

    /// A new connection, configured; refuses a file the store could not write.
    fn connect(&self) -> Result<Connection, StorageError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            .union(OpenFlags::SQLITE_OPEN_CREATE)
            .union(OpenFlags::SQLITE_OPEN_NO_MUTEX);
        self.check_path()?;
        let conn = Connection::open_with_flags(&self.path, flags).map_err(|e| self.error("cannot open the file", e))?;
        if conn.is_readonly("main").map_err(|e| self.error("cannot open the file", e))? {
            return Err(self.fail("the file is read-only"));
        }
        conn.busy_timeout(self.busy_timeout()).map_err(|e| self.error("cannot set the busy timeout", e))?;
        // Read back: SQLite ignores a value it does not know, and the durability promised by
        // `Synchronous` rests on this one setting.
        let synchronous = self.options.synchronous;
        let level: i64 = conn
            .pragma_update(None, "synchronous", synchronous.pragma())
            .and_then(|()| conn.pragma_query_value(None, "synchronous", |r| r.get(0)))
            .map_err(|e| self.error("cannot set synchronous", e))?;
        if level != synchronous.level() {
            return Err(self.fail(format_args!("PRAGMA synchronous is {level} after setting it to {synchronous:?}")));
        }
        conn.pragma_update(None, "wal_autocheckpoint", self.options.wal_autocheckpoint)
            .map_err(|e| self.error("cannot set wal_autocheckpoint", e))?;
        conn.set_prepared_statement_cache_capacity(16);
        Ok(conn)
    }

    /// Checks that the file is a reservation store of this schema version, or empty; creates the
    /// schema in an empty one. Never writes to a file it refuses.
    fn prepare_schema(&self, conn: &Connection) -> Result<(), StorageError> {
        let identify = |conn: &Connection| -> Result<(i32, i32, i64), rusqlite::Error> {
            // One statement, so one snapshot: another process may be creating the schema.
            conn.query_row(
                "SELECT (SELECT application_id FROM pragma_application_id),
                        (SELECT user_version FROM pragma_user_version),
                        (SELECT count(*) FROM sqlite_schema)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
        };
        let found = self
            .until_not_busy(|| identify(conn))
            .map_err(|e| self.error("cannot read the file as an SQLite database", e))?;
        self.judge_schema(conn, found)?;
        // SQLite does not call the busy handler for this switch: another process creating the
        // file at the same moment makes it fail at once, so it is retried here.
        let mode: String = self
            .until_not_busy(|| conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)))
            .map_err(|e| self.error("cannot switch to WAL mode", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(self.fail(format_args!("the file cannot be put in WAL mode (it is in {mode} mode)")));
        }
        if found.0 == APPLICATION_ID {
            return Ok(());
        }
        // An empty database: create the schema, unless another connection just did.
        let created = self.write_txn(conn, |conn| {
            let found = identify(conn)?;
            if found == (0, 0, 0) {
                conn.execute_batch(&create_table())?;
                conn.execute_batch(CREATE_INDEX)?;
                conn.pragma_update(None, "application_id", APPLICATION_ID)?;
                conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            }
            Ok(found)
        });
        let found = created.map_err(|f| self.convert(f))?;
        self.judge_schema(conn, found)
    }

    fn judge_schema(&self, conn: &Connection, (app, version, objects): (i32, i32, i64)) -> Result<(), StorageError> {
        if app == APPLICATION_ID {
            if version != SCHEMA_VERSION {
                return Err(self.fail(format_args!(
                    "the reservation schema is version {version}, this build knows only version {SCHEMA_VERSION}"
                )));
            }
            self.verify_objects(conn)
        } else if (app, version, objects) == (0, 0, 0) {
            Ok(())
        } else {
            Err(self.fail(format_args!(
                "not a reservation store: application_id {app:#x}, user_version {version}, {objects} schema objects"
            )))
        }
    }

    /// Verifies every object of the file's schema: exactly the `reservation` table and its
    /// expiry index, each as this schema version defines it. A trigger, a view, another table or
    /// index (SQLite's own `sqlite_*` statistics excepted), or a missing or altered object could
    /// change what the store reads back, so each is refused, named.
    fn verify_objects(&self, conn: &Connection) -> Result<(), StorageError> {
        let found: Vec<(String, String, Option<String>)> = conn
            .prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name")
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect())
            .map_err(|e| self.error("cannot read the schema", e))?;
        let expected =
            [("table", "reservation", create_table()), ("index", "reservation_expiry", CREATE_INDEX.to_owned())];
        for (kind, name, want) in &expected {
            match found.iter().find(|(k, n, _)| k == kind && n == name) {
                None => return Err(self.fail(format_args!("the {name} {kind} is missing"))),
                Some((_, _, sql)) if sql.as_deref() != Some(want.as_str()) => {
                    return Err(self.fail(format_args!(
                        "the {name} {kind} is not the one schema version {SCHEMA_VERSION} defines"
                    )));
                }
                Some(_) => {}
            }
        }
        for (kind, name, _) in &found {
            if name.starts_with("sqlite_") && kind == "table" {
                continue;
            }
            if !expected.iter().any(|(k, n, _)| k == kind && n == name) {
                return Err(self.fail(format_args!(
                    "the file holds the {kind} {name:?}, which a reservation store does not have; \
                     it could change what the store reads back, so the file is refused"
                )));
            }
        }
        Ok(())
    }

    /// A connection from the pool, or a new one.
    fn take(&self) -> Result<Connection, StorageError> {
        let idle = lock(&self.pool).pop();
        match idle {
            Some(conn) => Ok(conn),
            None => self.connect(),
        }
    }

    fn give_back(&self, conn: Connection) {
        let mut pool = lock(&self.pool);
        if pool.len() < self.options.max_idle_connections {
            pool.push(conn);
        }
    }

    /// Returns `conn` to the pool unless a failed transaction left it unusable, and converts the
    /// result.
    fn settle<T>(&self, conn: Connection, result: Result<T, Fail>) -> Result<T, StorageError> {
        if conn.is_autocommit() {
            self.give_back(conn);
        }
        result.map_err(|f| self.convert(f))
    }

    /// Runs `body` in one `BEGIN IMMEDIATE` transaction, committed if `body` succeeds and rolled
    /// back otherwise; a busy database is retried up to [`SqliteOptions::busy_retries`] times.
    fn write_txn<T>(&self, conn: &Connection, mut body: impl FnMut(&Connection) -> Result<T, Fail>) -> Result<T, Fail> {
        let _turn = lock(&self.writer);
        let mut retries = self.options.busy_retries;
        loop {
            let result = (|| {
                conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
                let out = body(conn)?;
                conn.prepare_cached("COMMIT")?.execute([])?;
                Ok(out)
            })();
            match result {
                Ok(out) => return Ok(out),
                Err(fail) => {
                    if !conn.is_autocommit() {
                        // If even the rollback fails, `settle` drops the connection, which rolls back.
                        let _ = conn.execute_batch("ROLLBACK");
                    }
                    match fail {
                        Fail::Sql(e) if is_busy(&e) && retries > 0 => retries -= 1,
                        fail => return Err(fail),
                    }
                }
            }
        }
    }

    /// One read-modify-write of (scope, key) through a spec function, in one transaction.
    fn apply<Out>(
        &self,
        scope: &ReservationScope,
        key: &Key,
        transition: impl Fn(Option<StoredReservation>, Instant) -> Step_<Out>,
    ) -> StoreResult<Out> {
        let conn = self.take()?;
        let pk = RowKey::new(scope, key);
        let result = self.write_txn(&conn, |conn| {
            let current = read_row(conn, scope, &pk)?;
            // The clock is read inside the transaction, so the order of the operations on the key
            // and the order of the instants they saw agree.
            let now = self.clock.now();
            let step = transition(current.clone(), now);
            let inserted = current.is_none() && step.next.is_some();
            if step.next != current {
                match &step.next {
                    Some(next) => write_row(conn, &pk, next)?,
                    None => {
                        conn.prepare_cached(DELETE_ROW)?.execute(pk.params())?;
                    }
                }
            }
            Ok((step.outcome, inserted))
        });
        let (outcome, inserted) = self.settle(conn, result)?;
        if inserted {
            self.after_insert();
        }
        Ok(outcome)
    }

    /// Counts a new row and sweeps when [`SqliteOptions::sweep_every`] have accumulated. The
    /// sweep is best effort: the operation that triggered it has committed, so a failure here
    /// is left for the next sweep.
    fn after_insert(&self) {
        let every = self.options.sweep_every;
        if every > 0 && self.inserted.fetch_add(1, Ordering::Relaxed).saturating_add(1) >= every {
            self.inserted.store(0, Ordering::Relaxed);
            let _ = self.sweep();
        }
    }

    fn read(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        let conn = self.take()?;
        let pk = RowKey::new(scope, key);
        // The row and the clock are read under the writers' lock, so that no write of this store
        // takes effect between them: a lookup never judges an older row at a later instant than
        // a write that changed it (rule D10). In WAL mode no writer blocks a reader, so the read
        // is not retried: a read that still finds the database busy after SQLite's busy timeout
        // (another connection in exclusive locking mode) is a storage error at once.
        let (result, now) = {
            let _turn = lock(&self.writer);
            (read_row(&conn, scope, &pk), self.clock.now())
        };
        let current = self.settle(conn, result)?;
        Ok(spec::lookup(current.as_ref(), now).cloned())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded values stay consistent across a panic: a connection is pushed or popped whole,
    // and the writer mutex guards nothing.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `x - 2⁶³` as an `i64`: a bijection from `u64` that keeps the order, so SQL compares stored
/// instants as the store does.
fn sortable(x: u64) -> i64 {
    i64::from_be_bytes((x ^ (1 << 63)).to_be_bytes())
}

/// The inverse of [`sortable`].
fn unsortable(x: i64) -> u64 {
    u64::from_be_bytes(x.to_be_bytes()) ^ (1 << 63)
}

/// The primary key of a row, as the bytes it is stored as.
struct RowKey<'a> {
    aggregate_type: &'a [u8],
    tenant: &'a [u8],
    namespace: &'a [u8],
    key: &'a [u8],
}

impl<'a> RowKey<'a> {
    fn new(scope: &'a ReservationScope, key: &'a Key) -> Self {
        Self {
            aggregate_type: scope.aggregate_type.as_str().as_bytes(),
            tenant: scope.tenant.as_bytes(),
            namespace: scope.namespace.as_str().as_bytes(),
            key: key.as_str().as_bytes(),
        }
    }

    fn params(&self) -> [&'a [u8]; 4] {
        [self.aggregate_type, self.tenant, self.namespace, self.key]
    }
}

fn read_row(conn: &Connection, scope: &ReservationScope, pk: &RowKey<'_>) -> Result<Option<StoredReservation>, Fail> {
    let mut select = conn.prepare_cached(SELECT_ROW)?;
    let mut rows = select.query(pk.params())?;
    match rows.next()? {
        None => Ok(None),
        Some(row) => decode_row(row, scope).map(Some),
    }
}

fn decode_row(row: &Row<'_>, scope: &ReservationScope) -> Result<StoredReservation, Fail> {
    let owner_tenant: Vec<u8> = row.get(0)?;
    let owner_id: Vec<u8> = row.get(1)?;
    let state: i64 = row.get(2)?;
    let owner =
        AggregateRef::from_stored(scope.aggregate_type.clone(), &owner_tenant, &owner_id).map_err(Fail::Corrupt)?;
    match state {
        PENDING => {
            let holds = decode_holds(&row.get::<_, Vec<u8>>(3)?)?;
            let expires_at = Instant::from_millis(unsortable(row.get(4)?));
            Reservation::pending(owner, holds, expires_at)
                .ok_or_else(|| Fail::Corrupt("a pending reservation with no hold".into()))
        }
        CONFIRMED => Ok(Reservation::confirmed(owner, Version::from_u64(unsortable(row.get(5)?)))),
        other => Err(Fail::Corrupt(format!("state {other}"))),
    }
}

fn write_row(conn: &Connection, pk: &RowKey<'_>, next: &StoredReservation) -> Result<(), Fail> {
    let owner = next.owner();
    let owner_tenant = owner.tenant.as_bytes();
    let owner_id = owner.id.as_str().as_bytes();
    let (state, holds, expires_at, version) = match next {
        Reservation::Pending(p) => {
            (PENDING, Some(encode_holds(p.holds())?), Some(sortable(p.expires_at().as_millis())), None)
        }
        Reservation::Confirmed(c) => (CONFIRMED, None, None, Some(sortable(c.version.as_u64()))),
    };
    let [aggregate_type, tenant, namespace, key] = pk.params();
    conn.prepare_cached(UPSERT_ROW)?.execute(params![
        aggregate_type,
        tenant,
        namespace,
        key,
        owner_tenant,
        owner_id,
        state,
        holds,
        expires_at,
        version
    ])?;
    Ok(())
}

/// Each hold as a 2-byte big-endian length and its bytes, in the set's (ascending) order.
fn encode_holds(holds: &BTreeSet<HoldId>) -> Result<Vec<u8>, Fail> {
    let mut out = Vec::with_capacity(holds.iter().map(|h| 2 + h.as_str().len()).sum());
    for hold in holds {
        let bytes = hold.as_str().as_bytes();
        let len = u16::try_from(bytes.len()).map_err(|_| Fail::Corrupt("a hold id too long to store".into()))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(bytes);
    }
    Ok(out)
}

/// The inverse of [`encode_holds`]; refuses anything it would not have written.
fn decode_holds(mut bytes: &[u8]) -> Result<BTreeSet<HoldId>, Fail> {
    let corrupt = |what: &str| Fail::Corrupt(format!("holds: {what}"));
    let mut holds = BTreeSet::new();
    while !bytes.is_empty() {
        let (len, rest) = bytes.split_first_chunk::<2>().ok_or_else(|| corrupt("a truncated length"))?;
        let len = usize::from(u16::from_be_bytes(*len));
        let (hold, rest) = rest.split_at_checked(len).ok_or_else(|| corrupt("a truncated hold id"))?;
        let hold = std::str::from_utf8(hold).map_err(|_| corrupt("a hold id that is not UTF-8"))?;
        let hold = HoldId::new(hold).map_err(|e| corrupt(&e.to_string()))?;
        if holds.last().is_some_and(|last| *last >= hold) {
            return Err(corrupt("hold ids out of order"));
        }
        holds.insert(hold);
        bytes = rest;
    }
    Ok(holds)
}

impl<C: Clock> ReservationStore for SqliteStore<C> {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        request.admitted()?;
        self.apply(request.scope, request.key, |current, now| spec::apply(current, now, request.operation))
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        self.read(scope, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sortable_keeps_order_and_round_trips_at_the_extremes() {
        let values = [0, 1, 1 << 62, i64::MAX as u64, (i64::MAX as u64) + 1, u64::MAX - 1, u64::MAX];
        for pair in values.windows(2) {
            assert!(sortable(pair[0]) < sortable(pair[1]), "{pair:?}");
        }
        for v in values {
            assert_eq!(unsortable(sortable(v)), v);
        }
        assert_eq!(sortable(0), i64::MIN);
        assert_eq!(sortable(u64::MAX), i64::MAX);
    }

    #[test]
    fn holds_round_trip_whatever_their_bytes() {
        let holds: BTreeSet<HoldId> = ["a", "\0", "a\u{0}b", "é,\"[]", &"x".repeat(crate::MAX_HOLD_ID_LEN)]
            .iter()
            .map(|h| HoldId::new(h).unwrap())
            .collect();
        let bytes = encode_holds(&holds).ok().unwrap();
        assert_eq!(decode_holds(&bytes).ok(), Some(holds));
    }

    #[test]
    fn malformed_holds_are_refused() {
        for bad in
            [&b"\x00"[..], b"\x00\x05ab", b"\x00\x00", b"\x00\x01\xff", b"\x00\x01b\x00\x01a", b"\x00\x01a\x00\x01a"]
        {
            assert!(decode_holds(bad).is_err(), "{bad:?}");
        }
    }
}
