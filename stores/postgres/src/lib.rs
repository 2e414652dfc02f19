//! [`PostgresStore`]: a [`ReservationStore`] on PostgreSQL.
//!
//! Each operation is one transaction on one pooled connection: it takes a transaction-scoped
//! advisory lock on its (scope, key) — which locks a key that has no row yet as well as one that
//! has — reads the row, reads the clock, decides with [`reservation_store::spec::apply`], and
//! writes or deletes the row. The lock is the whole concurrency control: two first reserves of a
//! free key queue on it, and the second reads the row the first committed. A lookup takes the
//! same lock shared. The rules live only in the spec functions; the one statement that restates
//! one is the sweep of expired pending rows, which the tests prove equal to
//! [`reservation_store::spec::lookup`].
//!
//! # The clock across a restart
//!
//! The table `reservation_clock` holds, per scope, the latest instant at which the store changed a
//! reservation of it (rule D10 across a restart). An operation reads the scope's row in its first
//! round trip, beside the reservation's, and decides at the later of its clock's reading and that
//! instant (and never earlier than the store decided before); a change writes its instant there
//! (`INSERT … ON CONFLICT DO UPDATE … WHERE latest < EXCLUDED.latest`, only when it is later) in
//! its second round trip, before the `COMMIT`, so the instant commits with the change or not at
//! all; a sweep writes its instant for the scopes it deleted from, in its one statement. A store
//! reconnected after a crash on a clock set back thus keeps every pending reservation that had
//! expired by its scope's latest change expired. Writers of one scope that move its clock at once
//! queue on the scope's row from that write to their `COMMIT`; writers of different scopes never
//! meet there. A schema of version 1, without the table, is migrated at connect.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use reservation_postgres::{PostgresOptions, PostgresStore, Time};
//! use reservation_store::*;
//!
//! let options = PostgresOptions::default().with_schema("reservations");
//! let store = PostgresStore::connect("postgres://app@db.internal:5432/app", Time::DATABASE, options).await?;
//! let scope = ReservationScope::parse("user", Some("acme"), "user-name")?;
//! let alice = AggregateRef::parse("user", Some("acme"), "alice-id")?;
//! let (key, hold) = (Key::new("alice")?, HoldId::new("decision-7f3a")?);
//! match store.reserve(&scope, &key, &alice, &hold, Ttl::from_millis(5_000)?).await {
//!     Ok(ReserveOutcome::Taken | ReserveOutcome::Joined | ReserveOutcome::AlreadyConfirmed) => {
//!         // append the events, at stream version 1, then:
//!         store.confirm(&scope, &key, &alice, Version::stream(1)?).await?;
//!     }
//!     Ok(ReserveOutcome::Conflict) => { /* the name is taken */ }
//!     Err(e) if e.is_indeterminate() => { /* it may have been reserved: look it up, or reserve again */ }
//!     Err(e) => return Err(e.into()),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Errors
//!
//! A lost connection, a statement timeout, a server shutting down, a pool with no connection to
//! give, an answer that did not come in time: each is a [`StorageError`], never an outcome. An
//! error before the transaction's `COMMIT` was sent, or one that the server reported as an
//! aborted statement, is determinate: nothing changed. An error after `COMMIT` was sent that the
//! server did not answer (the connection dropped, or its answer did not come within
//! [`PostgresOptions::response_timeout`]) is [`StorageError::is_indeterminate`]: the operation may
//! have taken effect, or may yet take effect if the `COMMIT` is still on its way. Look the key
//! up: a lookup waits for the key's lock, which that transaction holds until it has committed or
//! been rolled back, so a lookup that answers sees what became of it. Or repeat the operation.
//! With advisory locks under `READ COMMITTED` no transaction meets a serialization failure or a
//! deadlock (each takes one lock); if the server reports one all the same, the operation is
//! retried [`PostgresOptions::retries`] times before it becomes a [`StorageError`].
//!
//! # Bounded waits
//!
//! Every wait ends: for a connection from the pool and for a new connection (its handshake
//! included) after [`PostgresOptions::connect_timeout`]; for the answer to each round trip
//! (the statements an operation sends together) after [`PostgresOptions::response_timeout`],
//! whether the server is slow or the network path went silent with the connection still open.
//! A connection whose answer did not come is closed, never used again (an answer may still be on
//! its way), and the next operation connects anew. On the server, a statement ends after
//! [`PostgresOptions::statement_timeout`], and a transaction whose client stopped talking (a
//! silent path, a killed process) is rolled back, releasing its key, after
//! [`PostgresOptions::idle_transaction_timeout`].
//!
//! # Failover
//!
//! The store follows a primary that fails over to a standby through its connection string: name
//! every server, and ask for the one that takes writes,
//! `host=db1,db2 port=5432,5432 user=app dbname=app target_session_attrs=read-write`.
//! tokio-postgres tries the hosts in order, each within [`PostgresOptions::connect_timeout`],
//! and keeps the first that is not read-only. A connection to a primary that died fails the
//! operation it carries (an error like any lost connection's: indeterminate once the `COMMIT`
//! was sent) and is dropped, never handed out again; the pool also drops, before handing it
//! out, a connection it already knows closed. The next connection made reaches the promoted
//! standby. The crate's tests kill a primary and promote its standby while operations run,
//! and check that the store works again on its own.
//!
//! Under an orchestrator the same string serves: with pg_auto_failover, name both nodes (the
//! monitor is not a node the store talks to). The crate's tests run a monitor, a primary and a
//! synchronous standby of their own, kill the primary's node and let the monitor promote the
//! standby: about 5 s with the monitor's health checks and its demotion wait set to seconds
//! (by default they take about half a minute), after which the store reaches the promoted
//! standby at its next connection. The monitor keeps a promoted node read-only until the old
//! primary has had time to stop; `target_session_attrs=read-write` skips it meanwhile. With
//! Patroni, likewise: name every node (etcd and Patroni's REST API are not nodes the store
//! talks to); the tests run one etcd and two nodes, kill the leader's node and let Patroni
//! promote the standby once the leader's key has expired (8-9 s with a key living 8 s).
//! Patroni's synchronous mode (`synchronous_mode: true`) is what keeps acknowledged commits
//! across its failover; without it, what the standby had not received is lost.
//!
//! What a failover can lose depends on the replication, not on the store:
//!
//! - **Asynchronous** (PostgreSQL's default): a commit is acknowledged once it is on the
//!   primary's disk, and reaches the standby a moment later. A failover loses what the standby
//!   had not received: reservations and confirmations the store reported done vanish, and
//!   another owner may then reserve the key. The crate's tests show the conformance suite
//!   catching exactly this.
//! - **Synchronous** (`synchronous_commit = on` and the standby named in
//!   `synchronous_standby_names`): a commit is acknowledged once the standby too has it on disk,
//!   so an acknowledged operation survives the promotion of that standby. A commit the primary
//!   was still waiting on when it died is an indeterminate error: it may be on the dead
//!   primary's disk and not on the standby's. While the standby is unreachable, every commit
//!   waits for it, until [`PostgresOptions::response_timeout`] (indeterminate as well).
//! - Either way, a primary that comes back after its standby was promoted must not take writes
//!   again (fencing it is the operator's task): the store would connect to whichever of the two
//!   its connection string names first.
//!
//! # Features
//!
//! - `conformance`: `PostgresHarness`, the conformance suite's harness for this store, on a
//!   server it is given or on PostgreSQL clusters of its own that it can crash, pause and fail
//!   over (`PostgresHarness::on_cluster`, Debian's `pg_createcluster`).
//! - `broken-variants`: test only, never for use. Planted bugs that the conformance suite must
//!   catch: a key locked by `SELECT … FOR UPDATE` alone, which misses a row not yet written; and
//!   sessions with `synchronous_commit = off`, whose commits a server crash can lose after they
//!   were acknowledged; a store that does not persist the instant of its changes, whose clock
//!   goes back across a restart; and a harness whose server in the power-cut check's directory
//!   runs with `fsync = off`. Only the crate's own tests enable it, through their dev-dependency on the
//!   crate. A normal build has no way to make the store skip its advisory lock or its durable
//!   commit.
//!
//! # What is public, and for whom
//!
//! - A store's user: [`PostgresStore`], made by [`PostgresStore::connect`] (expiry decided by a
//!   [`Time`], [`Time::DATABASE`] for the server's clock) or [`PostgresStore::connect_system`];
//!   another clock on the same pool ([`PostgresStore::with_time`]); its upkeep
//!   ([`PostgresStore::sweep`], [`PostgresStore::len`], [`PostgresStore::is_empty`]), its pool
//!   ([`PostgresStore::connections`], [`PostgresStore::close`]) and its settings
//!   ([`PostgresStore::options`]). The settings, [`PostgresOptions`], are public fields, with
//!   [`PostgresOptions::with_schema`], [`PostgresOptions::with_max_connections`] and
//!   [`PostgresOptions::with_application_name`]. [`SCHEMA_VERSION`] is the version of the tables,
//!   the one an existing schema must carry to be used.
//! - Feature `conformance`, a store's tests (`reservation conform postgres`, this crate's tests
//!   and benches): `PostgresHarness`, made by `PostgresHarness::connect`, or on clusters of its
//!   own by `PostgresHarness::on_cluster` with a `Replication` (whose clusters
//!   `PostgresHarness::clusters` names and whose primary `PostgresHarness::primary_port` gives),
//!   and `PostgresHarness::settings` (the run's settings that suit it); `pg_url`, the test server's URL
//!   (`RESERVATION_PG_URL`). The faults the harness offers the suite's fault check are listed on
//!   `PostgresHarness`. A test that works beside the suite, on the harness's schema of its
//!   own, takes its stores from `PostgresHarness::store_with` (with a clock of its choosing) and
//!   runs them on `PostgresHarness::runtime`; `PostgresHarness::url` and
//!   `PostgresHarness::options` say where. This crate's server tests (faults, silent networks,
//!   corrupt rows, sweeps) are such tests; they cannot be written through the store alone, which
//!   would leave a schema behind per test.
//! - Feature `broken-variants`: `PostgresOptions::broken_row_lock_only`,
//!   `PostgresOptions::broken_commit_before_flush` and `PostgresOptions::broken_forgets_clock`,
//!   for this crate's tests only (above).
//!
//! Hidden from this documentation, `PostgresStore::baseline_write` is public only for this
//! crate's bench (a crate of its own), which measures the store's statements without its
//! decisions; it decides nothing and is not part of the interface.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "conformance")]
mod auto_failover;
#[cfg(feature = "conformance")]
mod cluster;
#[cfg(feature = "conformance")]
mod harness;
#[cfg(feature = "conformance")]
mod patroni;
#[cfg(feature = "conformance")]
mod process;
mod row;
mod schema;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use reservation_store::spec::{self, Step};
use reservation_store::{
    Clock, Instant, Key, Outcome, Request, ReservationScope, ReservationStore, StorageError, StoreResult,
    StoredReservation, SystemClock,
};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row, Statement};

#[cfg(feature = "conformance")]
pub use cluster::Replication;
#[cfg(feature = "conformance")]
pub use harness::{PostgresHarness, pg_url};
pub use schema::SCHEMA_VERSION;

use row::RowKey;

/// Which clock decides expiry.
#[derive(Clone, Debug)]
pub enum Time<C = SystemClock> {
    /// The application's clock `C`, read inside the transaction after the key's lock is taken
    /// (tests inject a `ManualClock`). Each node decides expiry on its own clock, so assumption
    /// H3 needs a safety margin at least as large as the skew between the nodes' clocks.
    Local(C),
    /// The database server's clock (`clock_timestamp()`, in milliseconds since the Unix epoch),
    /// read inside the transaction after the key's lock is taken. Every node then decides expiry
    /// on one clock, so the skew of H3 between the nodes' clocks no longer matters to the store;
    /// the attempts still judge their own deadline by their own clock, so H3 remains, with the
    /// skew between each node and the database server as its margin. PostgreSQL's clock follows
    /// the server's system time: stepping it backwards breaks rule D10 (the store's clock never
    /// goes back), so slew it.
    Database,
}

impl Time<SystemClock> {
    /// [`Time::Database`], with no local clock type to name.
    pub const DATABASE: Time<SystemClock> = Time::Database;
}

/// How a [`PostgresStore`] uses its database. Start from [`PostgresOptions::default`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// The PostgreSQL schema that holds the store's three tables (`reservation`,
    /// `reservation_clock` and `reservation_schema`); created if missing. `public` by default.
    pub schema: String,
    /// Most connections in the pool; 16 by default.
    pub max_connections: usize,
    /// Longest wait for a pooled connection, and for a new connection to be made (the TCP
    /// connection and the server's handshake); 5 s by default.
    pub connect_timeout: Duration,
    /// The server's `statement_timeout` on the store's connections: a statement running longer,
    /// including one waiting for a key's lock, fails with a [`StorageError`]; 5 s by default.
    /// The checks of [`PostgresStore::connect`], which may wait for another connect's turn on
    /// the tables, are bounded by [`PostgresOptions::response_timeout`] instead.
    pub statement_timeout: Duration,
    /// Longest wait for the server's answer to one round trip: the statements an operation sends
    /// together (begin, lock the key and read the row; write the row and commit), a statement's
    /// preparation on a new connection, the checks of [`PostgresStore::connect`]. 10 s by
    /// default: longer than [`PostgresOptions::statement_timeout`], so that a slow statement is
    /// the server's determinate error rather than the client's timeout, which is indeterminate
    /// once the `COMMIT` was sent. A connection whose answer did not come is closed.
    pub response_timeout: Duration,
    /// The server's `idle_in_transaction_session_timeout` on the store's connections: a session
    /// whose transaction waits longer than this for the client's next statement is ended by the
    /// server, which rolls the transaction back and releases the key's lock; 4 s by default.
    /// The store's transactions never pause between statements for longer than a round trip, so
    /// this only ends the sessions of clients that went away unseen (a silent network path, a
    /// frozen process), whose keys would otherwise stay locked until the server's TCP connection
    /// gives up. Shorter than [`PostgresOptions::statement_timeout`] by default, so that an
    /// operation waiting for such a key gets it rather than failing. In whole milliseconds; 0
    /// turns it off.
    pub idle_transaction_timeout: Duration,
    /// How many more times an operation that met a serialization failure or a deadlock is tried;
    /// 3 by default.
    pub retries: u32,
    /// Expired pending rows are swept after this many new rows; 1024 by default (0: only
    /// [`PostgresStore::sweep`] sweeps).
    pub sweep_every: u64,
    /// The `application_name` of the store's connections, as `pg_stat_activity` shows it.
    pub application_name: String,
    /// How the key is locked: by an advisory lock, always, but in the planted bug of the
    /// `broken-variants` feature.
    key_lock: KeyLock,
    /// Whether a commit is acknowledged before it is on disk: never, but in the planted bug of
    /// the `broken-variants` feature.
    commit_before_flush: bool,
    /// Whether each change persists its instant and each operation reads it back (rule D10
    /// across a restart): always, but in the planted bug of the `broken-variants` feature.
    persist_clock: bool,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: "public".to_owned(),
            max_connections: 16,
            connect_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(5),
            response_timeout: Duration::from_secs(10),
            idle_transaction_timeout: Duration::from_secs(4),
            retries: 3,
            sweep_every: 1024,
            application_name: "reservation-store".to_owned(),
            key_lock: KeyLock::Advisory,
            commit_before_flush: false,
            persist_clock: true,
        }
    }
}

impl PostgresOptions {
    /// These options with the store's tables in `schema`.
    pub fn with_schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = schema.into();
        self
    }

    /// These options with at most `n` pooled connections.
    pub fn with_max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }

    /// These options with `name` as the connections' `application_name`.
    pub fn with_application_name(mut self, name: impl Into<String>) -> Self {
        self.application_name = name.into();
        self
    }
}

/// Planted bugs, for the crate's own tests only (feature `broken-variants`, which nothing but the
/// crate's dev-dependency on itself enables): each makes the store wrong, so that a test can show
/// the conformance suite catching it. Never enable the feature in a build that stores anything.
#[cfg(feature = "broken-variants")]
impl PostgresOptions {
    /// BROKEN ON PURPOSE: the key is locked by `SELECT … FOR UPDATE` only, which locks an existing
    /// row but not an absent one, so two first reserves of a free key both win and the
    /// linearizability check fails on atomicity.
    pub fn broken_row_lock_only(mut self) -> Self {
        self.key_lock = KeyLock::RowOnly;
        self
    }

    /// BROKEN ON PURPOSE: the store's sessions set `synchronous_commit = off`, so the server
    /// acknowledges a commit before its WAL is on disk; a server crash then loses the commits of
    /// the last moment, confirmations acknowledged included, and the fault check fails on P1.
    pub fn broken_commit_before_flush(mut self) -> Self {
        self.commit_before_flush = true;
        self
    }

    /// BROKEN ON PURPOSE: the store neither persists the instant of its changes nor reads it back,
    /// so a store reopened on a clock set back decides at that earlier instant, and a pending
    /// reservation that had expired before the restart is live again (D10 across a restart, P1).
    pub fn broken_forgets_clock(mut self) -> Self {
        self.persist_clock = false;
        self
    }
}

/// How an operation locks its (scope, key).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum KeyLock {
    /// A transaction-scoped advisory lock on a hash of the (scope, key): it locks a key with no
    /// row too. The store's only mode.
    Advisory,
    /// `SELECT … FOR UPDATE` only, which locks an existing row but not an absent one: two first
    /// reserves of a free key both win. The planted bug of
    /// `PostgresOptions::broken_row_lock_only`.
    #[cfg_attr(not(feature = "broken-variants"), expect(dead_code, reason = "only the planted bug builds it"))]
    RowOnly,
}

/// A [`ReservationStore`] on PostgreSQL; see the crate documentation.
///
/// Its futures need a tokio runtime (tokio-postgres). Cloning it is cheap and shares the pool.
pub struct PostgresStore<C = SystemClock> {
    pool: Pool,
    time: Time<C>,
    sql: schema::Sql,
    options: PostgresOptions,
    inserted: std::sync::Arc<AtomicU64>,
    /// The latest instant this store (and its clones) decided at, in milliseconds: it never
    /// decides at an earlier one, whatever its clock reads (rule D10), as
    /// [`reservation_store::Monotonic`].
    latest: std::sync::Arc<AtomicU64>,
}

impl<C: Clone> Clone for PostgresStore<C> {
    fn clone(&self) -> Self {
        PostgresStore {
            pool: self.pool.clone(),
            time: self.time.clone(),
            sql: self.sql.clone(),
            options: self.options.clone(),
            inserted: self.inserted.clone(),
            latest: self.latest.clone(),
        }
    }
}

impl<C> std::fmt::Debug for PostgresStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = self.pool.status();
        f.debug_struct("PostgresStore")
            .field("schema", &self.options.schema)
            .field("clock", &matches!(self.time, Time::Database).then_some("database").unwrap_or("local"))
            .field("connections", &status.size)
            .field("max_connections", &status.max_size)
            .finish()
    }
}

/// What went wrong.
enum Cause {
    /// The client or the server reported an error.
    Pg(tokio_postgres::Error),
    /// A row or a clock reading that this store would not have written.
    Corrupt(String),
    /// No answer came within this bound ([`PostgresOptions::response_timeout`]).
    Timeout(Duration),
}

/// What failed, and whether the transaction's `COMMIT` had been sent when it did.
struct Fail {
    what: &'static str,
    cause: Cause,
    commit_sent: bool,
}

impl Fail {
    fn at(what: &'static str, commit_sent: bool) -> impl FnOnce(tokio_postgres::Error) -> Fail {
        move |error| Fail { what, cause: Cause::Pg(error), commit_sent }
    }

    fn corrupt(what: &'static str) -> impl FnOnce(String) -> Fail {
        move |message| Fail { what, cause: Cause::Corrupt(message), commit_sent: false }
    }

    fn pg(&self) -> Option<&tokio_postgres::Error> {
        match &self.cause {
            Cause::Pg(e) => Some(e),
            Cause::Corrupt(_) | Cause::Timeout(_) => None,
        }
    }

    /// Whether the server reported a serialization failure or a deadlock, which a retry may pass.
    fn is_retryable(&self) -> bool {
        self.pg()
            .and_then(tokio_postgres::Error::code)
            .is_some_and(|c| *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED)
    }

    /// Whether the operation may have taken effect: the `COMMIT` was sent and the server did not
    /// answer with an error of its own (an `ERROR`, which aborts the transaction, as opposed to
    /// the connection closing or a `FATAL` that ends the session, after which the commit may or
    /// may not have happened).
    fn is_indeterminate(&self) -> bool {
        self.commit_sent && self.pg().and_then(|e| e.as_db_error()).is_none_or(|db| db.severity() != "ERROR")
    }

    fn into_storage(self) -> StorageError {
        let indeterminate = self.is_indeterminate();
        let what = format!("PostgreSQL: {}", self.what);
        match self.cause {
            // A server's error shows its severity and message through its source (the chain reads
            // `db error: ERROR: …`), but not its code: the message adds that alone.
            Cause::Pg(e) => match e.as_db_error() {
                Some(db) => StorageError::with_source(format!("{what}: SQLSTATE {}", db.code().code()), e),
                None => StorageError::with_source(what, e),
            },
            Cause::Corrupt(message) => StorageError::new(format!("{what}: {message}")),
            Cause::Timeout(limit) => StorageError::new(format!("{what}: no answer within {limit:?}")),
        }
        .with_indeterminate(indeterminate)
    }
}

/// The deadline of one round trip: every answer it waits for is due by then.
#[derive(Clone, Copy)]
struct Round {
    due: tokio::time::Instant,
    limit: Duration,
}

impl Round {
    /// A round trip that starts now, bounded by `limit`.
    fn new(limit: Duration) -> Round {
        // `checked_add`: a bound too far off to represent is no bound.
        let due = tokio::time::Instant::now().checked_add(limit).unwrap_or_else(far_future);
        Round { due, limit }
    }

    /// `answer`'s result, or a timeout at the deadline, as the failure of `what`, `COMMIT` sent or
    /// not. A timeout leaves the connection unusable: the caller drops it.
    async fn wait<T>(
        self,
        what: &'static str,
        commit_sent: bool,
        answer: impl Future<Output = Result<T, tokio_postgres::Error>>,
    ) -> Result<T, Fail> {
        match tokio::time::timeout_at(self.due, answer).await {
            Ok(result) => result.map_err(Fail::at(what, commit_sent)),
            Err(_) => Err(Fail { what, cause: Cause::Timeout(self.limit), commit_sent }),
        }
    }
}

/// An instant about thirty years from now, as tokio itself takes for "never".
fn far_future() -> tokio::time::Instant {
    tokio::time::Instant::now() + Duration::from_secs(86_400 * 365 * 30)
}

/// `sql` prepared on `client`, once per connection; a round trip on a new connection.
async fn prepared(client: &Object, sql: &str, limit: Duration) -> Result<Statement, Fail> {
    Round::new(limit).wait("prepare a statement", false, client.prepare_cached(sql)).await
}

impl PostgresStore<SystemClock> {
    /// Connects to the database at `url` (a `postgres://` URL or a `key=value` string), creates
    /// the store's tables in [`PostgresOptions::schema`] if they are missing, and verifies them:
    /// a schema version this build does not know, or a `reservation` table it did not create, is
    /// refused with an error that says which.
    pub async fn connect_system(url: &str, options: PostgresOptions) -> Result<Self, StorageError> {
        PostgresStore::connect(url, Time::Local(SystemClock), options).await
    }
}

impl<C: Clock> PostgresStore<C> {
    /// Connects to the database at `url`, deciding expiry by `time`; as
    /// [`PostgresStore::connect_system`].
    pub async fn connect(url: &str, time: Time<C>, options: PostgresOptions) -> Result<Self, StorageError> {
        let mut config: tokio_postgres::Config =
            url.parse().map_err(|e| StorageError::with_source("PostgreSQL: the connection string", e))?;
        let mut settings = format!(
            "-c statement_timeout={} -c idle_in_transaction_session_timeout={}",
            options.statement_timeout.as_millis(),
            options.idle_transaction_timeout.as_millis()
        );
        if options.commit_before_flush {
            settings.push_str(" -c synchronous_commit=off");
        }
        config.application_name(&options.application_name).connect_timeout(options.connect_timeout).options(settings);
        let manager = Manager::from_config(config, NoTls, ManagerConfig { recycling_method: RecyclingMethod::Fast });
        let pool = Pool::builder(manager)
            .max_size(options.max_connections.max(1))
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(options.connect_timeout))
            .create_timeout(Some(options.connect_timeout))
            .recycle_timeout(Some(options.connect_timeout))
            .build()
            .map_err(|e| StorageError::with_source("PostgreSQL: the connection pool", e))?;
        let sql = schema::Sql::new(&options.schema, options.key_lock)?;
        let store =
            PostgresStore { pool, time, sql, options, inserted: Default::default(), latest: Default::default() };
        let mut client = store.client().await?;
        let limit = store.options.response_timeout;
        let prepared =
            tokio::time::timeout(limit, schema::prepare(&mut client, &store.sql, &store.options.schema, limit))
                .await
                .unwrap_or_else(|_| {
                    Err(StorageError::new(format!("PostgreSQL: the store's tables: no answer within {limit:?}")))
                });
        if prepared.is_err() {
            // It may be mid-transaction, or have an answer on its way.
            let _ = Object::take(client);
        }
        prepared?;
        Ok(store)
    }

    /// A store on the same pool and tables that decides expiry by `time`.
    pub fn with_time<D>(&self, time: Time<D>) -> PostgresStore<D> {
        PostgresStore {
            pool: self.pool.clone(),
            time,
            sql: self.sql.clone(),
            options: self.options.clone(),
            inserted: self.inserted.clone(),
            latest: Default::default(),
        }
    }

    /// The options the store was made with.
    pub fn options(&self) -> &PostgresOptions {
        &self.options
    }

    /// Connections the pool holds now (busy or idle).
    pub fn connections(&self) -> usize {
        self.pool.status().size
    }

    /// Closes the pool: its idle connections now, busy ones when they come back.
    pub fn close(&self) {
        self.pool.close();
    }

    /// Rows in the table, live or not.
    pub async fn len(&self) -> Result<u64, StorageError> {
        let client = self.client().await?;
        let row = self.round().wait("count rows", false, client.query_one(&self.sql.count, &[])).await;
        let row = row.map_err(|fail| drop_on(client, fail))?;
        Ok(row.get::<_, i64>(0).unsigned_abs())
    }

    /// Whether the table has no row.
    pub async fn is_empty(&self) -> Result<bool, StorageError> {
        Ok(self.len().await? == 0)
    }

    /// Deletes the pending rows that expired by the store's clock (an index scan on
    /// `expires_at`), never a confirmed row or a live pending one; returns how many. Runs by
    /// itself after every [`PostgresOptions::sweep_every`] new rows.
    pub async fn sweep(&self) -> Result<u64, StorageError> {
        let client = self.client().await?;
        let swept = async {
            let reading = match &self.time {
                Time::Local(clock) => clock.now(),
                Time::Database => {
                    let row =
                        self.round().wait("read the clock", false, client.query_one(&self.sql.clock, &[])).await?;
                    row::instant(row.get(0))
                }
            };
            let now = self.decision_instant(reading, None);
            // One statement in its own transaction: once sent, it may have committed.
            let sortable = row::sortable(now.as_millis());
            let row =
                self.round().wait("sweep expired rows", true, client.query_one(&self.sql.sweep, &[&sortable])).await?;
            Ok(row.get::<_, i64>(0).unsigned_abs())
        }
        .await;
        swept.map_err(|fail| drop_on(client, fail))
    }

    /// A round trip that starts now.
    fn round(&self) -> Round {
        Round::new(self.options.response_timeout)
    }

    async fn client(&self) -> Result<Object, StorageError> {
        // deadpool reports a timeout, a closed pool or a failed connect, all before any statement.
        self.pool.get().await.map_err(|e| StorageError::with_source("PostgreSQL: no connection", e))
    }

    /// Runs `request` as one transaction, retrying a serialization failure or a deadlock.
    async fn run(&self, request: &Request<'_>) -> StoreResult<Outcome> {
        let mut retries = self.options.retries;
        loop {
            let client = self.client().await?;
            match self.transaction(&client, request).await {
                Ok((outcome, inserted)) => {
                    drop(client);
                    if inserted {
                        self.after_insert().await;
                    }
                    return Ok(outcome);
                }
                Err(fail) => {
                    // The connection may be mid-transaction or broken: it never goes back to the pool.
                    let _ = Object::take(client);
                    if fail.is_retryable() && !fail.is_indeterminate() && retries > 0 {
                        retries -= 1;
                        continue;
                    }
                    return Err(fail.into_storage().into());
                }
            }
        }
    }

    /// Begins a transaction, takes the key's lock (`shared` for a lookup), reads the row, then the
    /// scope's persisted instant (with `persisted`) and (on the database's clock) the clock, in
    /// one pipeline: the server runs the statements in order, so all are read with the lock held,
    /// and the persisted instant after the row.
    async fn fetch(&self, client: &Object, pk: &RowKey<'_>, shared: bool, persisted: bool) -> Result<Fetched, Fail> {
        let sql = &self.sql;
        let params = pk.params();
        let lock = pk.lock_id();
        let (lock_sql, select_sql) =
            if shared { (&sql.lock_shared, &sql.select) } else { (&sql.lock, &sql.select_for_write) };
        let limit = self.options.response_timeout;
        let lock_statement = prepared(client, lock_sql, limit).await?;
        let select = prepared(client, select_sql, limit).await?;
        let clock_statement = match self.time {
            Time::Database => Some(prepared(client, &sql.clock, limit).await?),
            Time::Local(_) => None,
        };
        let latest_statement = match persisted {
            true => Some(prepared(client, &sql.latest, limit).await?),
            false => None,
        };
        let scope_params = [params[0], params[1], params[2]];
        let lock_params: [&(dyn ToSql + Sync); 2] = [&lock.0, &lock.1];
        // Nothing is written before the `COMMIT` of `write_and_commit`, so a timeout here is
        // determinate: the connection is dropped, and the transaction never commits.
        let round = self.round();
        let (begin, locked, row, latest, clock) = tokio::join!(
            round.wait("begin", false, client.batch_execute("BEGIN")),
            round.wait("lock the key", false, client.execute(&lock_statement, &lock_params)),
            round.wait("read the row", false, client.query_opt(&select, &params)),
            async {
                match &latest_statement {
                    Some(st) => round.wait("read the scope's clock", false, client.query_opt(st, &scope_params)).await,
                    None => Ok(None),
                }
            },
            async {
                match &clock_statement {
                    Some(st) => round
                        .wait("read the clock", false, client.query_one(st, &[]))
                        .await
                        .map(|r| r.try_get::<_, i64>(0).ok()),
                    None => Ok(None),
                }
            },
        );
        begin?;
        locked?;
        let (row, latest, clock) = (row?, latest?, clock?);
        let latest = match latest {
            Some(r) => {
                Some(row::instant_of(r.try_get(0).map_err(|e| Fail::corrupt("read the scope's clock")(e.to_string()))?))
            }
            None => None,
        };
        Ok(Fetched { row, clock, latest })
    }

    /// The instant to decide at: the clock's `reading`, but never earlier than `persisted` (the
    /// latest change of the scope, rule D10 across a restart) nor than an instant this store
    /// decided at before (D10 in one process).
    fn decision_instant(&self, reading: Instant, persisted: Option<Instant>) -> Instant {
        let read = reading.max(persisted.unwrap_or(Instant::ZERO)).as_millis();
        Instant::from_millis(self.latest.fetch_max(read, Ordering::SeqCst).max(read))
    }

    /// [`PostgresStore::fetch`], then the row decoded and the instant to decide at: the clock's
    /// reading (the local clock now, with the lock held), never earlier than the scope's persisted
    /// instant, which is returned too.
    async fn lock_and_read(
        &self,
        client: &Object,
        scope: &ReservationScope,
        pk: &RowKey<'_>,
        shared: bool,
    ) -> Result<(Option<StoredReservation>, Instant, Option<Instant>), Fail> {
        let Fetched { row, clock, latest } = self.fetch(client, pk, shared, self.options.persist_clock).await?;
        let reading = match (&self.time, clock) {
            (Time::Local(c), _) => c.now(),
            (Time::Database, Some(millis)) => row::instant(millis),
            (Time::Database, None) => return Err(Fail::corrupt("read the clock")("no reading".into())),
        };
        let now = self.decision_instant(reading, latest);
        let current = row.map(|r| row::decode(&r, scope)).transpose().map_err(Fail::corrupt("decode the row"))?;
        Ok((current, now, latest))
    }

    /// Writes `next` as the row of `pk` (deletes it for `None`), persists `advance` as the
    /// scope's latest instant (when given) and commits, in one pipeline: once it is sent, a lost
    /// connection leaves the outcome unknown.
    async fn write_and_commit(
        &self,
        client: &Object,
        pk: &RowKey<'_>,
        next: Option<&StoredReservation>,
        advance: Option<Instant>,
    ) -> Result<(), Fail> {
        let params = pk.params();
        let statement = prepared(
            client,
            if next.is_some() { &self.sql.upsert } else { &self.sql.delete },
            self.options.response_timeout,
        )
        .await?;
        let advance_statement = match advance {
            Some(_) => Some(prepared(client, &self.sql.advance, self.options.response_timeout).await?),
            None => None,
        };
        let advance_to = advance.map(|at| row::sortable(at.as_millis()));
        let write = async {
            match next {
                Some(next) => {
                    let r = row::encode(next);
                    let values: [&(dyn ToSql + Sync); 10] = [
                        params[0],
                        params[1],
                        params[2],
                        params[3],
                        &r.owner_tenant,
                        &r.owner_id,
                        &r.state,
                        &r.holds,
                        &r.expires_at,
                        &r.version,
                    ];
                    client.execute(&statement, &values).await
                }
                None => client.execute(&statement, &params).await,
            }
        };
        // A write the server refused aborted the transaction, whatever became of the `COMMIT`:
        // that failure comes first, and is determinate. Any other failure once the `COMMIT` was
        // sent, a timeout included, is not.
        let persist = async {
            match (&advance_statement, &advance_to) {
                (Some(st), Some(at)) => {
                    let values: [&(dyn ToSql + Sync); 4] = [params[0], params[1], params[2], at];
                    client.execute(st, &values).await.map(drop)
                }
                _ => Ok(()),
            }
        };
        let round = self.round();
        let (written, persisted, committed) = tokio::join!(
            round.wait("write the row", true, write),
            round.wait("persist the scope's clock", true, persist),
            round.wait("commit", true, client.batch_execute("COMMIT"))
        );
        written?;
        persisted?;
        committed?;
        Ok(())
    }

    /// One transaction: lock the key, read the row and the clock, decide, write, commit. Returns
    /// the outcome and whether a row was inserted.
    async fn transaction(&self, client: &Object, request: &Request<'_>) -> Result<(Outcome, bool), Fail> {
        let pk = RowKey::new(request.scope, request.key);
        let (current, now, persisted) = self.lock_and_read(client, request.scope, &pk, false).await?;
        let Step { next, outcome, .. } = spec::apply(current.clone(), now, request.operation);
        if next == current {
            // Nothing was written: whatever becomes of this `COMMIT`, nothing changes.
            self.round().wait("commit", false, client.batch_execute("COMMIT")).await?;
            return Ok((outcome, false));
        }
        // The instant of the change, in the change's transaction (D10 across a restart); written
        // only when it moves the scope's clock, so that writers of one scope within one
        // millisecond do not queue on its row.
        let advance = (self.options.persist_clock && persisted.is_none_or(|p| p < now)).then_some(now);
        self.write_and_commit(client, &pk, next.as_ref(), advance).await?;
        Ok((outcome, current.is_none()))
    }

    /// The benchmark's baseline: the statements of one operation that writes — begin, lock, read
    /// the row, write `next`, commit — with no decoding, no clock and no spec function between
    /// them, and without the scope's persisted instant (neither read nor written), so that the
    /// ratio to it includes what persisting the instant costs.
    #[doc(hidden)]
    pub async fn baseline_write(
        &self,
        scope: &ReservationScope,
        key: &Key,
        next: Option<&StoredReservation>,
    ) -> Result<(), StorageError> {
        let client = self.client().await?;
        let pk = RowKey::new(scope, key);
        let result = async {
            self.fetch(&client, &pk, false, false).await?;
            self.write_and_commit(&client, &pk, next, None).await
        }
        .await;
        result.map_err(|fail| {
            let _ = Object::take(client);
            fail.into_storage()
        })
    }

    async fn after_insert(&self) {
        let every = self.options.sweep_every;
        if every > 0 && self.inserted.fetch_add(1, Ordering::Relaxed).saturating_add(1) >= every {
            self.inserted.store(0, Ordering::Relaxed);
            // Best effort: the operation has committed; a failed sweep is left to the next one.
            let _ = self.sweep().await;
        }
    }

    async fn read(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        let client = self.client().await?;
        let pk = RowKey::new(scope, key);
        // The row and the clock are read under the key's lock (shared), so that no write takes
        // effect between them (rule D10).
        let result = async {
            let read = self.lock_and_read(&client, scope, &pk, true).await?;
            self.round().wait("commit", false, client.batch_execute("COMMIT")).await?;
            Ok::<_, Fail>(read)
        }
        .await;
        match result {
            Ok((current, now, _)) => Ok(spec::lookup(current.as_ref(), now).cloned()),
            Err(fail) => {
                let _ = Object::take(client);
                Err(fail.into_storage().into())
            }
        }
    }
}

/// What [`PostgresStore::fetch`] read: the row, the database's clock (on [`Time::Database`]) and
/// the scope's persisted instant.
struct Fetched {
    row: Option<Row>,
    clock: Option<i64>,
    latest: Option<Instant>,
}

/// Closes `client` (it may be mid-transaction, or have an answer on its way) and converts `fail`.
fn drop_on(client: Object, fail: Fail) -> StorageError {
    let _ = Object::take(client);
    fail.into_storage()
}

impl<C: Clock> ReservationStore for PostgresStore<C> {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        request.admitted()?;
        self.run(&request).await
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        self.read(scope, key).await
    }
}
