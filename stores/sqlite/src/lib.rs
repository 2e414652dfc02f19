//! [`SqliteStore`]: a durable [`ReservationStore`] in one SQLite file, built on the spec functions
//! ([`reservation_store::spec`]). SQLite is compiled in: a fresh machine needs no system library.
//!
//! Each operation is one `BEGIN IMMEDIATE` transaction that reads the row of its (scope, key),
//! reads the clock, decides with the spec function and writes what it decided; the outcome is
//! returned once the transaction has committed. [`SqliteStore`] describes the file's layout, what
//! each [`Synchronous`] setting survives, and how threads and processes share one file;
//! [`SqliteOptions`] holds the settings, [`OpenCheck`] the consistency check run at open.
//!
//! With the feature `conformance`, `SqliteHarness` is the conformance suite's harness for this
//! store: the one the command line, this crate's tests and the fuzzer share. The feature
//! `broken-variants` is for this crate's tests only, never for use: `SqliteOptions::broken_forgets_clock`,
//! a planted bug (a store that does not persist the instant of its changes) that the tests show
//! the suite catching. Only the crate's dev-dependency on itself enables it.
//!
//! # What is public, and for whom
//!
//! - A store's user: [`SqliteStore`], opened by [`SqliteStore::open`],
//!   [`SqliteStore::open_with_clock`] or [`SqliteStore::open_with`]; its upkeep
//!   ([`SqliteStore::sweep`], [`SqliteStore::check_integrity`], [`SqliteStore::checkpoint`],
//!   [`SqliteStore::len`], [`SqliteStore::is_empty`]) and what it was opened with
//!   ([`SqliteStore::clock`], [`SqliteStore::path`], [`SqliteStore::options`]). Its settings,
//!   [`SqliteOptions`], with [`Synchronous`], [`OpenCheck`] and the longest busy timeout,
//!   [`MAX_BUSY_TIMEOUT`]. [`SCHEMA_VERSION`] is the file format's version, the one a file must
//!   carry to be opened.
//! - Feature `conformance`, a store's tests (`reservation conform sqlite`, the fuzz target
//!   `sqlite`, this crate's tests, a store compared with this one): `SqliteHarness`, made by
//!   `SqliteHarness::new` (the default options) or `SqliteHarness::scratch` (options of one's
//!   own).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "conformance")]
mod harness;
mod options;
mod row;
mod schema;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use reservation_store::spec::{self, Step};
use reservation_store::{
    AggregateRef, Clock, HoldId, Instant, Key, Outcome, Request, ReservationScope, ReservationStore, StorageError,
    StoreResult, StoredReservation, SystemClock,
};
use rusqlite::{Connection, ErrorCode, OpenFlags};

#[cfg(feature = "conformance")]
pub use harness::SqliteHarness;
pub use options::{MAX_BUSY_TIMEOUT, OpenCheck, SqliteOptions, Synchronous};
use row::{RowKey, read_row, write_row};
pub use schema::SCHEMA_VERSION;

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
/// whatever characters they hold). [`SYSTEM_TENANT`](reservation_store::SYSTEM_TENANT) is stored as the empty
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
/// A second table, `reservation_clock`, holds one row per scope: its three parts, the primary key,
/// and `latest`, the latest instant at which the store changed a reservation of the scope (rule
/// D10 across a restart). Every change writes it in its own transaction, when its instant is
/// later; every operation and lookup reads it and decides at the later of the clock's reading and
/// `latest`, so a file reopened after a crash on a clock set back keeps an expired reservation
/// expired. It is per scope, not one for the file, because processes and the suite's checks share
/// a file, each scope on its own clock.
///
/// Instants and versions are `u64`; SQLite integers are `i64`. They are stored offset by 2⁶³
/// (`x - 2⁶³`, computed as a bit flip), a bijection that keeps their order, so every value,
/// [`Instant::MAX`] included, round-trips and SQL compares expiries correctly. `CHECK`
/// constraints reject a row whose columns do not fit its state. The schema is identified by
/// `PRAGMA application_id` and versioned by `PRAGMA user_version` ([`SCHEMA_VERSION`]); a file
/// with another application id, other tables, or another schema version is refused at open; a
/// file of version 1, which had no `reservation_clock`, is migrated at open (the table created,
/// empty, and the version set, in one transaction).
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
/// operating-system crash may be lost; the file stays consistent either way. A `COMMIT` that
/// fails other than busy (an I/O error, a sync the disk refused) is an indeterminate
/// [`StorageError`]: its frames may already be in the log, where a restart finds the transaction
/// committed.
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
/// use reservation_sqlite::SqliteStore;
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
    /// The latest instant this store object decided at, in milliseconds: it never decides at an
    /// earlier one, whatever its clock reads (rule D10), as [`reservation_store::Monotonic`].
    latest: AtomicU64,
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
    /// The `COMMIT` failed other than busy: its log frames may have been written, and a restart
    /// may find the transaction committed (a sync that fails does not take back what was
    /// written), so the operation's outcome is unknown.
    Commit(rusqlite::Error),
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
    /// Opens the store in the file at `path` on `clock` (a [`reservation_store::ManualClock`] in tests), with
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
            latest: AtomicU64::new(0),
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
            let now = self.now(None);
            row::delete_expired(conn, now)
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
            Fail::Commit(e) => self
                .error("the commit failed; the transaction may or may not have been made durable", e)
                .with_indeterminate(true),
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
                match conn.prepare_cached("COMMIT").and_then(|mut commit| commit.execute([])) {
                    Ok(_) => Ok(out),
                    Err(e) if is_busy(&e) => Err(Fail::Sql(e)),
                    Err(e) => Err(Fail::Commit(e)),
                }
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
            let persisted = self.persisted_latest(conn, &pk)?;
            // The clock is read inside the transaction, so the order of the operations on the key
            // and the order of the instants they saw agree.
            let now = self.now(persisted);
            let step = transition(current.clone(), now);
            let inserted = current.is_none() && step.next.is_some();
            if step.next != current {
                match &step.next {
                    Some(next) => write_row(conn, &pk, next)?,
                    None => row::delete_row(conn, &pk)?,
                }
                // The instant of the change, in the change's transaction (D10 across a restart);
                // only when it moves the scope's clock, so that the clock row is written at most
                // once per scope and millisecond.
                if self.options.persist_clock && persisted.is_none_or(|p| p < now) {
                    row::advance_latest(conn, &pk, now)?;
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

    /// The latest instant persisted for `pk`'s scope (none in the planted bug that forgets it).
    fn persisted_latest(&self, conn: &Connection, pk: &RowKey<'_>) -> Result<Option<Instant>, Fail> {
        if self.options.persist_clock { row::read_latest(conn, pk) } else { Ok(None) }
    }

    /// The instant to decide at: the clock's reading, but never earlier than `persisted` (the
    /// latest change of the scope, rule D10 across a restart) nor than an instant this store
    /// object decided at before (D10 in one process).
    fn now(&self, persisted: Option<Instant>) -> Instant {
        let read = self.clock.now().max(persisted.unwrap_or(Instant::ZERO)).as_millis();
        Instant::from_millis(self.latest.fetch_max(read, Ordering::SeqCst).max(read))
    }

    fn read(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        let conn = self.take()?;
        let pk = RowKey::new(scope, key);
        // The row and the clock are read under the writers' lock, so that no write of this store
        // takes effect between them: a lookup never judges an older row at a later instant than
        // a write that changed it (rule D10). In WAL mode no writer blocks a reader, so the read
        // is not retried: a read that still finds the database busy after SQLite's busy timeout
        // (another connection in exclusive locking mode) is a storage error at once.
        //
        // The row is read before the scope's persisted instant: a write of another process that
        // lands between the two is then judged, if at all, at an instant no earlier than its own.
        let result = {
            let _turn = lock(&self.writer);
            read_row(&conn, scope, &pk)
                .and_then(|row| Ok((row, self.persisted_latest(&conn, &pk)?)))
                .map(|(row, persisted)| (row, self.now(persisted)))
        };
        let (current, now) = self.settle(conn, result)?;
        Ok(spec::lookup(current.as_ref(), now).cloned())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded values stay consistent across a panic: a connection is pushed or popped whole,
    // and the writer mutex guards nothing.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
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
