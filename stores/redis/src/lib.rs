//! [`RedisStore`]: a [`ReservationStore`] on Redis.
//!
//! One Redis key per (scope, key) holds the reservation as bytes. Each operation is an optimistic
//! transaction on one pooled connection: `WATCH` the key and `GET` it (and, on Redis's clock,
//! `TIME`) in one round trip; read the clock; decide with [`reservation_store::spec::apply`];
//! then `MULTI`, write the key, `EXEC` in a second. When another client wrote the key in between,
//! `EXEC` answers nothing and the operation starts again, up to [`RedisOptions::retries`] times.
//! No Lua script, and no rule anywhere but in the spec functions.
//!
//! Every operation writes its key, a lookup or an operation that changes nothing included (it
//! writes the same bytes back, or an empty value, a tombstone, where there was no row). So no
//! two operations on a key overlap between their `WATCH` and their `EXEC`: each one's clock is
//! read while no other can commit on its key, as a lock would give, and a decision by an older
//! clock reading can never land after a later reading was acted on.
//!
//! Every change also persists, inside its `MULTI`, the instant it was decided at as its scope's
//! latest (rule D10 across a restart): a sorted set per scope, `{prefix}:c:…`, holding that
//! instant as its one member (8 big-endian bytes at score 0, so the greatest member is the latest
//! instant, exactly; `ZADD` then `ZREMRANGEBYRANK … 0 -2` keep the later of the old and the new).
//! The first round trip reads it (`ZRANGE … -1 -1`), unwatched, and the store decides at the
//! later of its clock's reading and that instant, and never earlier than it decided before. With
//! an append-only file, a store reconnected after a crash on a clock set back keeps every pending
//! reservation that had expired by its scope's latest change expired.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use reservation_redis::{RedisOptions, RedisStore, Time};
//! use reservation_store::*;
//!
//! let store = RedisStore::connect("redis://cache.internal:6379/0", Time::REDIS, RedisOptions::default()).await?;
//! let scope = ReservationScope::parse("user", Some("acme"), "user-name")?;
//! let alice = AggregateRef::parse("user", Some("acme"), "alice-id")?;
//! let (key, hold) = (Key::new("alice")?, HoldId::new("decision-7f3a")?);
//! let outcome = store.reserve(&scope, &key, &alice, &hold, Ttl::from_millis(5_000)?).await?;
//! # let _ = outcome;
//! # Ok(())
//! # }
//! ```
//!
//! # Errors
//!
//! A dropped connection, a server restart, a timeout (every wait is bounded by
//! [`RedisOptions::timeout`]: for a connection from the pool, for a new connection, for each
//! answer, whether the server is slow or the network path went silent with the connection still
//! open), or more conflicts than [`RedisOptions::retries`] is a [`StorageError`], never an
//! outcome. An error before the `EXEC` was sent, and an `EXECABORT`, are determinate: nothing
//! changed. Any other error once the `EXEC` was sent, a timeout included, is
//! [`StorageError::is_indeterminate`]: the write may have landed, or may yet land if the `EXEC`
//! is still on its way; look the key up or repeat the operation. A connection that failed is
//! closed, never used again (an answer may still be on its way), and the pool's idle connections
//! with it: they lead to the same server, which may have gone, so the next operation connects
//! afresh.
//!
//! # Replicas and failover
//!
//! Redis replicates asynchronously: `EXEC` answers once the write is in the primary's memory (and,
//! with `appendfsync always`, in its append-only file), before any replica has it. A store given
//! several nodes ([`RedisOptions::with_nodes`]) makes each new connection to the one whose `ROLE`
//! is `master`, and so follows a replica promoted after its primary died. But a write the
//! primary acknowledged and had not yet sent to the replica is not on the new primary: a
//! confirmation the store reported is then lost, and another owner may take the key.
//!
//! [`RedisOptions::with_replica_acks`] makes the store send `WAIT n timeout` after every committed
//! `EXEC` (a lookup's write-back included, so that no answer rests on a write that is on the
//! primary alone) and answer only when `n` replicas acknowledged it; with fewer, the operation
//! fails with an indeterminate [`StorageError`]. `WAIT` is not strong consistency:
//!
//! - The write is visible on the primary before it is replicated: another client may read it
//!   before the `WAIT` answers, and it stays if the `WAIT` times out. A timeout does not roll it
//!   back.
//! - A replica acknowledges a write it holds in memory, not on disk.
//! - A failover to a replica that did not get the write loses it, acknowledged or not: with
//!   `n` lower than the number of replicas, the one promoted may be one that did not acknowledge.
//! - With every replica required (`n` the number of replicas) and a failover only ever to one of
//!   them, every write the store acknowledged is on the new primary. A primary with no replica
//!   left fails every operation until one is back.
//!
//! # Redis Sentinel
//!
//! Connected with a `redis+sentinel://` URL, the store asks Sentinel where the master is:
//!
//! ```text
//! redis+sentinel://[user:password@]host[:port][,host[:port]…]/master[/db]
//! redis+sentinel://10.0.0.5:26379,10.0.0.6:26379,10.0.0.7:26379/reservations/0
//! ```
//!
//! the sentinels' addresses (port 26379 by default), the name they watch the master under, the
//! database (0 by default); the user and password are the data nodes' (the sentinels are asked
//! without them). Each new connection asks the sentinels in turn
//! (`SENTINEL get-master-addr-by-name`) and goes to the first node named whose `ROLE` is
//! `master`; every connect and answer, a sentinel's included, is bounded by
//! [`RedisOptions::timeout`], and when none names a master that is one, the operation fails with a
//! determinate [`StorageError`] that says what each sentinel answered. A malformed URL, one with a
//! query string, or one given with [`RedisOptions::nodes`], is refused at
//! [`RedisStore::connect`] with a [`StorageError`], the URL not quoted (it may hold a password).
//!
//! Sentinel promotes the replica it judges most up to date, and what the previous paragraphs say
//! of a failover holds: without [`RedisOptions::with_replica_acks`], a confirmation the old
//! primary acknowledged and had not yet sent is lost when a replica is promoted; with `n` the
//! number of replicas, every acknowledged write is on whichever replica Sentinel promotes.
//!
//! A partition is worse: a primary cut off from the sentinels and its replicas, but not from the
//! store, goes on acknowledging the store's writes while the sentinels promote a replica, and
//! until they make it a replica of the new primary once the network heals, which drops every
//! one of those writes. The store's connection to it never fails meanwhile, so the store has no
//! reason to ask the sentinels again. In the crate's tests (a partition of about 14 s, most of it
//! the sentinels' wait to demote the old primary), the store without
//! [`RedisOptions::with_replica_acks`] lost 342 of 800 acknowledged confirmations; with `n` the
//! number of replicas, every write on the cut-off primary waited out its `WAIT` and ended
//! indeterminate, and none acknowledged was lost. A primary stopped past the sentinels' timeout
//! (a long pause of its host, a frozen virtual machine) does the same on a smaller scale: the
//! writes it had been sent when it stopped are answered once it goes on, by a primary that no
//! longer is one (2 acknowledged confirmations lost in the tests without `WAIT`, none with it).
//! Redis's own answer, `min-replicas-to-write` on the servers, makes a primary that has heard
//! from too few replicas refuse writes after `min-replicas-max-lag` seconds: it bounds the loss,
//! it does not prevent it (with 2 replicas and a lag of 1 s, 308 acknowledged confirmations were
//! still lost in the tests, against 2,342 without it over the same 12 s).
//!
//! The expiry sweep of a local clock deletes without waiting: a deletion lost in a failover
//! brings back an expired row, which the specification already treats as free.
//!
//! # Redis Cluster
//!
//! Connected with a `redis+cluster://` URL, the store routes each operation to the primary that
//! serves its scope's slot:
//!
//! ```text
//! redis+cluster://[user:password@]host[:port][,host[:port]…]
//! redis+cluster://10.0.0.5:6379,10.0.0.6:6379,10.0.0.7:6379
//! ```
//!
//! some of the cluster's nodes (port 6379 by default), asked in turn for the map of slots
//! (`CLUSTER SLOTS`) whenever the store has none; the user and password are every node's; the
//! database is 0, the only one a cluster has (a path other than `/` or `/0` is refused, as is a
//! query string, or other nodes in [`RedisOptions::nodes`]). An operation's transaction needs its
//! keys in one hash slot, so every key of a scope carries the scope as its hash tag:
//! `{prefix}:r:{…scope…}…key…` for a row, `{prefix}:c:{…scope…}` for its clock and, on a local
//! clock, `{prefix}:x:{…scope…}` for its expiry index, each listed in the set `{prefix}:s` (once
//! per scope by each store, before its first operation there) for [`RedisStore::sweep`]. So a
//! scope's keys live on one primary, and the scopes spread over the cluster; a prefix holding
//! `{` or `}` is refused at [`RedisStore::connect`]. The `redis` crate's cluster client routes
//! each command by itself and has no `WATCH`; the store holds one connection to the slot's
//! primary from its `WATCH` to its `EXEC`, as on one server.
//!
//! A node that no longer serves the slot answers `MOVED` (or `ASK`, `TRYAGAIN`, `CLUSTERDOWN`
//! while a slot moves or the cluster has no primary for it). Redis checks these before it runs
//! anything (a transaction's every command before its `EXEC` runs one), so each is determinate:
//! the store drops the connection and its map of slots, waits a little (1 ms, then one more each
//! time, at most 50), asks the nodes for the map again and tries again, within
//! [`RedisOptions::retries`]. A connection that fails drops the map too, so after a failover the
//! next operation finds the replica the cluster elected. On [`Time::REDIS`], the clock is that
//! of the primary serving the scope's slot; the scope's persisted instant keeps a decision from
//! going back when another node's clock takes over.
//!
//! What survives a failover is what "Replicas and failover" says: a cluster's replicas are
//! asynchronous, and the cluster elects one when its primary has not answered for the node
//! timeout. Without [`RedisOptions::with_replica_acks`], the confirmations the primary
//! acknowledged and had not sent are lost (60 in the crate's tests, caught by the conformance
//! suite's fault check); with `n` the number of replicas of each primary, none was lost. A primary
//! cut off from the other nodes, but not from the store, goes on acknowledging the store's writes
//! until its replica is elected and the network heals: 206 to 297 acknowledged confirmations lost
//! in the tests without `WAIT`, none with it. A primary stopped past the node timeout and let go
//! on mostly refused the writes the store had sent it, as determinate errors, rather than
//! acknowledge them (a Sentinel primary took them, and lost them): without `WAIT`, no
//! confirmation was lost in seven runs of eight, and in the eighth a key's acknowledged state was
//! (caught by the conformance suite); with `WAIT` none was.
//!
//! # Features
//!
//! - `conformance`: `RedisHarness`, the conformance suite's harness for this store.
//! - `broken-variants`: test only, never for use. Planted bugs (a store that does not watch its
//!   key, one that does not write back what changed nothing, one that does not persist the
//!   instant of its changes, and a harness whose server keeps nothing on disk), each of which the conformance suite must catch; only the crate's own tests
//!   enable it, through their dev-dependency on the crate. A normal build has no way to make the
//!   store skip its `WATCH` or its write-back.
//!
//! # What is public, and for whom
//!
//! - A store's user: [`RedisStore`], made by [`RedisStore::connect`] (expiry decided by a
//!   [`Time`], [`Time::REDIS`] for the server's clock) or [`RedisStore::connect_system`];
//!   another clock on the same pool ([`RedisStore::with_time`]); its upkeep
//!   ([`RedisStore::sweep`]), its pool ([`RedisStore::connections`]) and its settings
//!   ([`RedisStore::options`]). The settings, [`RedisOptions`], are public fields, with
//!   [`RedisOptions::with_prefix`], [`RedisOptions::with_max_connections`],
//!   [`RedisOptions::with_nodes`] and [`RedisOptions::with_replica_acks`].
//! - Feature `conformance`, a store's tests (`reservation conform redis`, this crate's tests and
//!   benches): `RedisHarness`, made by `RedisHarness::connect` (a shared server) or
//!   `RedisHarness::durable` or `RedisHarness::durable_with` (a server of its own that keeps every write on disk), with
//!   `RedisHarness::settings` (the run's settings that suit it); `redis_url`, the test server's URL
//!   (`RESERVATION_REDIS_URL`). A test that works beside the suite, under the harness's key
//!   prefix, takes its stores from `RedisHarness::store_with` (with a clock of its choosing) and
//!   runs them on `RedisHarness::runtime`; `RedisHarness::url` and `RedisHarness::options` say
//!   where. A durable harness's server, `AofServer` (`RedisHarness::server`), can be killed and
//!   started again (`AofServer::restart`, at `AofServer::url`): a test of what the store does
//!   across a server crash needs it, as this crate's fault tests do; only a server the harness
//!   started can be killed. A durable harness offers the conformance suite's faults (connections
//!   cut, a crash, a pause of the server); `RedisHarness::replicated` (a primary that keeps
//!   every write on disk and its replica, servers of its own) offers a failover besides, and
//!   `RedisHarness::sentinel` (a primary, two replicas and three sentinels of its own, its stores
//!   connected through the sentinels at `RedisHarness::sentinel_url`) a failover by the
//!   sentinels, and `RedisHarness::cluster` (a Redis Cluster of three primaries and three
//!   replicas of its own, `RedisHarness::cluster_url`, its nodes `RedisHarness::cluster_nodes`)
//!   a failover by the cluster.
//! - Feature `broken-variants`: `RedisOptions::broken_without_watch`,
//!   `RedisOptions::broken_without_write_back`, `RedisOptions::broken_forgets_clock` and
//!   `RedisHarness::broken_forgetful`, for this crate's tests only (above).
//!
//! Hidden from this documentation, `RedisStore::baseline_write` is public only for this crate's
//! bench (a crate of its own), which measures the store's round trips without its decisions; it
//! decides nothing and is not part of the interface.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod cluster;
#[cfg(feature = "conformance")]
mod harness;
mod pool;
mod row;
mod sentinel;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Value;
use reservation_store::spec::{self, Reservation, Step};
use reservation_store::{
    Clock, Instant, Key, Outcome, Request, ReservationScope, ReservationStore, StorageError, StoreResult,
    StoredReservation, SystemClock,
};

#[cfg(feature = "conformance")]
pub use harness::{AofServer, MinReplicas, RedisHarness, redis_url};

use pool::{Conn, Pool};
use row::{Indexes, Keys};

/// The most scopes a store remembers having listed for the sweep on a cluster before it forgets
/// them all and lists each again (a listing is idempotent).
const LISTED_AT_MOST: usize = 4096;

/// Which clock decides expiry.
#[derive(Clone, Debug)]
pub enum Time<C = SystemClock> {
    /// The application's clock `C` (tests inject a `ManualClock`), read after the key is watched
    /// and read. Rows never expire in Redis: an expired pending row stays, invisible (rule D7),
    /// until the sweep deletes it, which finds candidates in a sorted set by expiry and deletes
    /// each only if [`reservation_store::spec::lookup`] calls it free.
    Local(C),
    /// Redis's own clock (`TIME`, read in the same round trip as the row), so that every
    /// application node decides expiry on one clock (assumption H3 then needs a margin for the
    /// skew between each node and the Redis server only). A pending row is written with Redis's
    /// own expiry at its `expires_at` (`PXAT`), so Redis removes it when it expires by the same
    /// clock; nothing needs sweeping.
    Redis,
}

impl Time<SystemClock> {
    /// [`Time::Redis`], with no local clock type to name.
    pub const REDIS: Time<SystemClock> = Time::Redis;
}

/// How a [`RedisStore`] uses its server. Start from [`RedisOptions::default`].
#[derive(Clone)]
#[non_exhaustive]
pub struct RedisOptions {
    /// The start of every Redis key the store writes (`{prefix}:r:…` rows, `{prefix}:c:…` the
    /// scopes' clocks, `{prefix}:x` the expiry index; on a cluster, `{prefix}:x:…` the scopes'
    /// indexes and `{prefix}:s` their list); `rsv` by default. Stores with different prefixes
    /// never see each other's keys. On a cluster, it holds no `{` or `}`.
    pub prefix: String,
    /// Most connections in the pool; 16 by default.
    pub max_connections: usize,
    /// The longest wait for a connection from the pool, for a new connection, and for any answer
    /// from the server; 5 s by default.
    pub timeout: Duration,
    /// How many more times an operation whose `EXEC` met another client's write is tried before
    /// it becomes a [`StorageError`]; 100 by default.
    pub retries: u32,
    /// On a local clock, expired pending rows are swept after this many new rows; 1024 by default
    /// (0: only [`RedisStore::sweep`] sweeps).
    pub sweep_every: u64,
    /// How long a tombstone (the empty value a free key's operation writes) lives in Redis; 10 s.
    pub tombstone_ttl: Duration,
    /// More nodes of the same replicated set, besides the one whose URL the store is connected
    /// with: each new connection then goes to the first of them, in order, whose `ROLE` is
    /// `master`. None by default (the one URL, asked nothing). See
    /// [`RedisOptions::with_nodes`].
    pub nodes: Vec<String>,
    /// How many replicas must have each committed write before the store answers (`WAIT`); 0 by
    /// default, no wait. See [`RedisOptions::with_replica_acks`].
    pub replica_acks: u32,
    /// The longest `WAIT` for [`RedisOptions::replica_acks`] replicas (at least 1 ms: Redis's
    /// `WAIT` with 0 would wait forever); 1 s by default.
    pub replica_timeout: Duration,
    /// Whether the key is watched: always, but in a planted bug of the `broken-variants` feature.
    watch: bool,
    /// Whether an operation that changes nothing writes its key back: always, but in a planted
    /// bug of the `broken-variants` feature.
    touch: bool,
    /// Whether each change persists its instant and each operation reads it back (rule D10
    /// across a restart): always, but in a planted bug of the `broken-variants` feature.
    persist_clock: bool,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: "rsv".to_owned(),
            max_connections: 16,
            timeout: Duration::from_secs(5),
            retries: 100,
            sweep_every: 1024,
            tombstone_ttl: Duration::from_secs(10),
            nodes: Vec::new(),
            replica_acks: 0,
            replica_timeout: Duration::from_secs(1),
            watch: true,
            touch: true,
            persist_clock: true,
        }
    }
}

/// The nodes are shown by their addresses only: a URL may hold a password.
impl std::fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|url| {
                redis::Client::open(url.as_str())
                    .map_or_else(|_| "an invalid URL".to_owned(), |c| c.get_connection_info().addr().to_string())
            })
            .collect();
        f.debug_struct("RedisOptions")
            .field("prefix", &self.prefix)
            .field("max_connections", &self.max_connections)
            .field("timeout", &self.timeout)
            .field("retries", &self.retries)
            .field("sweep_every", &self.sweep_every)
            .field("tombstone_ttl", &self.tombstone_ttl)
            .field("nodes", &nodes)
            .field("replica_acks", &self.replica_acks)
            .field("replica_timeout", &self.replica_timeout)
            .field("watch", &self.watch)
            .field("touch", &self.touch)
            .field("persist_clock", &self.persist_clock)
            .finish()
    }
}

/// Planted bugs, for the crate's own tests only (feature `broken-variants`, which nothing but the
/// crate's dev-dependency on itself enables): each makes the store wrong, so that a test can show
/// the conformance suite catching it. Never enable the feature in a build that stores anything.
#[cfg(feature = "broken-variants")]
impl RedisOptions {
    /// BROKEN ON PURPOSE: the key is not watched, so two writers of one key can both commit, and
    /// the linearizability check fails on atomicity.
    pub fn broken_without_watch(mut self) -> Self {
        self.watch = false;
        self
    }

    /// BROKEN ON PURPOSE: an operation that changes nothing does not write its key back, so a
    /// decision by an older clock reading can land after a later reading was acted on (rule D10).
    pub fn broken_without_write_back(mut self) -> Self {
        self.touch = false;
        self
    }

    /// BROKEN ON PURPOSE: the store neither persists the instant of its changes nor reads it back,
    /// so a store reconnected after a server restart on a clock set back decides at that earlier
    /// instant, and a pending reservation that had expired before is live again (D10 across a
    /// restart, P1).
    pub fn broken_forgets_clock(mut self) -> Self {
        self.persist_clock = false;
        self
    }
}

impl RedisOptions {
    /// These options with the keys under `prefix`.
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// These options with at most `n` pooled connections.
    pub fn with_max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }

    /// These options with more nodes of the same replicated set (`redis://host:port/db` each),
    /// tried after the URL the store is connected with. Each new connection asks the nodes, in
    /// that order, for their `ROLE` and goes to the first that is `master`; a replica is never
    /// written to. A connection that failed is closed, so after a failover (a replica promoted by
    /// `REPLICAOF NO ONE` or by Sentinel) the next new connection reaches the new primary.
    /// Each node's connect and answer is bounded by [`RedisOptions::timeout`]; when no node is
    /// the primary, the operation fails with a determinate [`StorageError`].
    pub fn with_nodes<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.nodes = urls.into_iter().map(Into::into).collect();
        self
    }

    /// These options with `WAIT n timeout` after every committed `EXEC`, on the same connection:
    /// the store answers only once `n` replicas have acknowledged the write (0: no wait). Fewer
    /// acknowledgements within `timeout` is an indeterminate [`StorageError`]: the write is on the
    /// primary and may or may not survive a failover. Keep `timeout` below
    /// [`RedisOptions::timeout`], which bounds the answer to `WAIT` as any other (a longer wait
    /// ends in an indeterminate timeout). See "Replicas and failover" in the crate documentation
    /// for what this does and does not promise.
    pub fn with_replica_acks(mut self, n: u32, timeout: Duration) -> Self {
        self.replica_acks = n;
        self.replica_timeout = timeout;
        self
    }
}

/// A [`ReservationStore`] on Redis; see the crate documentation.
///
/// Its futures need a tokio runtime. Cloning it is cheap and shares the pool.
pub struct RedisStore<C = SystemClock> {
    pool: Arc<Pool>,
    time: Time<C>,
    options: RedisOptions,
    keys: Keys,
    /// On a cluster with a local clock, the scopes' indexes this store listed for the sweep.
    listed: Arc<Mutex<HashSet<Vec<u8>>>>,
    inserted: Arc<AtomicU64>,
    /// The latest instant this store (and its clones) decided at, in milliseconds: it never
    /// decides at an earlier one, whatever its clock reads (rule D10), as
    /// [`reservation_store::Monotonic`].
    latest: Arc<AtomicU64>,
}

impl<C: Clone> Clone for RedisStore<C> {
    fn clone(&self) -> Self {
        RedisStore {
            pool: self.pool.clone(),
            time: self.time.clone(),
            options: self.options.clone(),
            keys: self.keys.clone(),
            listed: self.listed.clone(),
            inserted: self.inserted.clone(),
            latest: self.latest.clone(),
        }
    }
}

impl<C> std::fmt::Debug for RedisStore<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.options.prefix)
            .field("clock", &if matches!(self.time, Time::Redis) { "redis" } else { "local" })
            .field("connections", &self.pool.size())
            .finish()
    }
}

/// What failed, and whether the `EXEC` had been sent when it did.
struct Fail {
    what: &'static str,
    error: Result<redis::RedisError, String>,
    exec_sent: bool,
}

impl Fail {
    fn at(what: &'static str, exec_sent: bool) -> impl FnOnce(redis::RedisError) -> Fail {
        move |e| Fail { what, error: Ok(e), exec_sent }
    }

    fn corrupt(what: &'static str) -> impl FnOnce(String) -> Fail {
        move |message| Fail { what, error: Err(message), exec_sent: false }
    }

    /// A committed write that too few replicas acknowledged: it is on the primary only.
    fn unreplicated(acks: u64, wanted: u32, timeout: u64) -> Fail {
        let message = format!("{acks} of {wanted} replicas acknowledged the committed write within {timeout} ms");
        Fail { what: "wait for replicas", error: Err(message), exec_sent: true }
    }

    /// Whether the write may have landed: the `EXEC` was sent, and the server did not refuse the
    /// whole transaction (`EXECABORT`, after which nothing ran, or a cluster's refusal of a
    /// command or of the `EXEC` itself, [`Fail::is_redirect`]).
    fn is_indeterminate(&self) -> bool {
        self.exec_sent
            && !self.is_redirect()
            && !matches!(&self.error, Ok(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ExecAbort))
    }

    /// Whether a cluster refused the command as not its node's to run: `MOVED` or `ASK` (another
    /// node serves the slot), `TRYAGAIN` (the slot is moving), `CLUSTERDOWN` (no map serves it).
    /// Redis checks these before it runs a command, and checks a transaction's every command
    /// before its `EXEC` runs any: nothing was done.
    fn is_redirect(&self) -> bool {
        use redis::ServerErrorKind::{Ask, ClusterDown, Moved, TryAgain};
        matches!(&self.error, Ok(e) if matches!(e.kind(), redis::ErrorKind::Server(Moved | Ask | TryAgain | ClusterDown)))
    }

    fn into_storage(self) -> StorageError {
        let indeterminate = self.is_indeterminate();
        let what = format!("Redis: {}", self.what);
        match self.error {
            Ok(e) => StorageError::with_source(what, e),
            Err(message) => StorageError::new(format!("{what}: {message}")),
        }
        .with_indeterminate(indeterminate)
    }
}

/// What the store was asked.
enum Job<'a> {
    Execute(&'a Request<'a>),
    Lookup(&'a ReservationScope, &'a Key),
}

/// What it answered: an operation's outcome and whether it inserted a row, or a lookup's.
enum Answer {
    Executed(Outcome, bool),
    Found(Option<StoredReservation>),
}

/// What one attempt of an operation came to.
enum Attempt<T> {
    Done(T),
    /// Another client wrote the key between the `WATCH` and the `EXEC`.
    Conflict,
}

impl RedisStore<SystemClock> {
    /// Connects to the server at `url` (`redis://host:port/db`) on the local system clock; as
    /// [`RedisStore::connect`].
    pub async fn connect_system(url: &str, options: RedisOptions) -> Result<Self, StorageError> {
        RedisStore::connect(url, Time::Local(SystemClock), options).await
    }
}

impl<C: Clock> RedisStore<C> {
    /// Connects to the server at `url` (`redis://host:port/db`), or to the master the sentinels
    /// of a `redis+sentinel://` URL name (see "Redis Sentinel" in the crate documentation), or
    /// to the primaries of a Redis Cluster (`redis+cluster://`, see "Redis Cluster"), deciding
    /// expiry by `time`. The first connection is made (and answers `PING`) before this returns.
    pub async fn connect(url: &str, time: Time<C>, options: RedisOptions) -> Result<Self, StorageError> {
        if options.prefix.is_empty() {
            return Err(StorageError::new("Redis: the key prefix is empty"));
        }
        let pool = Pool::new(url, &options.nodes, options.max_connections, options.timeout)?;
        if pool.is_cluster() && options.prefix.contains(['{', '}']) {
            return Err(StorageError::new(
                "Redis: on a cluster, the key prefix holds no `{` or `}`: they would move the scopes' hash tags",
            ));
        }
        let store = RedisStore {
            keys: Keys::new(&options.prefix, pool.is_cluster()),
            pool: Arc::new(pool),
            time,
            options,
            listed: Arc::default(),
            inserted: Arc::default(),
            latest: Arc::default(),
        };
        let mut conn = store.pool.get(0).await?;
        redis::cmd("PING")
            .query_async::<String>(&mut *conn)
            .await
            .map_err(|e| Fail::at("ping", false)(e).into_storage())?;
        conn.keep();
        Ok(store)
    }

    /// A store on the same pool and keys that decides expiry by `time`.
    pub fn with_time<D>(&self, time: Time<D>) -> RedisStore<D> {
        RedisStore {
            pool: self.pool.clone(),
            time,
            options: self.options.clone(),
            keys: self.keys.clone(),
            listed: self.listed.clone(),
            inserted: self.inserted.clone(),
            latest: Arc::default(),
        }
    }

    /// The options the store was made with.
    pub fn options(&self) -> &RedisOptions {
        &self.options
    }

    /// Connections the pool holds now (busy or idle).
    pub fn connections(&self) -> usize {
        self.pool.size()
    }

    /// On a local clock: deletes the pending rows that expired by the store's clock, finding them
    /// in the expiry index (on a cluster, in each scope's index that the store's stores listed)
    /// and deleting each only when [`reservation_store::spec::lookup`] calls it free (each in its
    /// own optimistic transaction); returns how many. On Redis's clock, Redis deletes them
    /// itself: 0.
    pub async fn sweep(&self) -> Result<u64, StorageError> {
        let Time::Local(clock) = &self.time else { return Ok(0) };
        let now = self.decision_instant(clock.now(), None);
        let indexes = match self.keys.indexes() {
            Indexes::One(index) => vec![index],
            Indexes::Listed(list) => {
                let mut conn = self.pool.get(cluster::slot(&list)).await?;
                let indexes: Vec<Vec<u8>> = redis::cmd("SMEMBERS")
                    .arg(&list)
                    .query_async(&mut *conn)
                    .await
                    .map_err(|e| Fail::at("read the list of expiry indexes", false)(e).into_storage())?;
                conn.keep();
                indexes
            }
        };
        let mut deleted = 0;
        for index in indexes {
            deleted += self.sweep_index(&index, now).await?;
        }
        Ok(deleted)
    }

    /// Deletes the pending rows of the expiry index `index` that expired by `now`; returns how
    /// many.
    async fn sweep_index(&self, index: &[u8], now: Instant) -> Result<u64, StorageError> {
        let mut conn = self.pool.get(cluster::slot(index)).await?;
        let candidates: Vec<Vec<u8>> = redis::cmd("ZRANGEBYSCORE")
            .arg(index)
            .arg("-inf")
            .arg(score(now))
            .query_async(&mut *conn)
            .await
            .map_err(|e| Fail::at("read the expiry index", false)(e).into_storage())?;
        let mut deleted = 0;
        for key in candidates {
            let Some((scope, _)) = self.keys.parse_row(&key) else {
                continue;
            };
            let (value,): (Option<Vec<u8>>,) = redis::pipe()
                .cmd("WATCH")
                .arg(&key)
                .ignore()
                .cmd("GET")
                .arg(&key)
                .query_async(&mut *conn)
                .await
                .map_err(|e| Fail::at("read a row", false)(e).into_storage())?;
            let current =
                value.as_deref().map(|b| row::decode(b, &scope)).transpose().map_err(StorageError::new)?.flatten();
            let free = spec::lookup(current.as_ref(), now).is_none();
            let mut p = redis::pipe();
            match &current {
                // Expired by the store's clock: the spec calls it free, so it goes, and the
                // sweep's instant is persisted as its scope's (a deletion is a change: reopened on
                // a clock set back, the store must not find the key free while it was live).
                Some(_) if free => {
                    p.atomic().cmd("DEL").arg(&key).cmd("ZREM").arg(index).arg(&key);
                    if self.options.persist_clock {
                        self.advance_clock(&mut p, &self.keys.clock(&scope), now);
                    }
                    &mut p
                }
                // Live: it stays, and so does its index entry.
                Some(Reservation::Pending(_)) => p.cmd("UNWATCH"),
                // Confirmed or free: the index entry is stale.
                _ => p.atomic().cmd("ZREM").arg(index).arg(&key),
            };
            let done: Value =
                p.query_async(&mut *conn).await.map_err(|e| Fail::at("sweep a row", true)(e).into_storage())?;
            if current.is_some() && free && !matches!(done, Value::Nil) {
                deleted += 1;
            }
        }
        conn.keep();
        Ok(deleted)
    }

    /// On a cluster with a local clock, lists `index` (a scope's expiry index) for the sweep,
    /// unless this store listed it before: before the operation that may add to it, so that no
    /// index holds a row the sweep cannot find.
    async fn list_index(&self, index: &[u8]) -> Result<(), StorageError> {
        let Indexes::Listed(list) = self.keys.indexes() else { return Ok(()) };
        if !matches!(self.time, Time::Local(_)) || lock(&self.listed).contains(index) {
            return Ok(());
        }
        let mut conn = self.pool.get(cluster::slot(&list)).await?;
        let _: u64 = redis::cmd("SADD")
            .arg(&list)
            .arg(index)
            .query_async(&mut *conn)
            .await
            .map_err(|e| Fail::at("list the scope's expiry index", false)(e).into_storage())?;
        conn.keep();
        let mut listed = lock(&self.listed);
        if listed.len() >= LISTED_AT_MOST {
            listed.clear();
        }
        listed.insert(index.to_vec());
        Ok(())
    }

    /// Reads the row of `key` (watching it), its scope's persisted instant (from `clock_key`,
    /// not watched) and the clock, in one round trip; returns the row's bytes, the row, the
    /// instant to decide at (the clock's reading, never earlier than the persisted instant) and
    /// the persisted instant.
    ///
    /// The scope's clock is not watched: watching it would make every two writers of one scope
    /// conflict, and retry, as if they wrote one key. Unwatched, a writer of another key of the
    /// scope may persist a later instant between this read and this `EXEC`; the two operations
    /// overlap, so ordering this one first is a valid order, and the persisted instant keeps the
    /// later of the two (the sorted set keeps its greatest member).
    async fn watch_and_read(
        &self,
        conn: &mut Conn<'_>,
        key: &[u8],
        clock_key: &[u8],
        scope: &ReservationScope,
    ) -> Result<(Option<Vec<u8>>, Option<StoredReservation>, Instant, Option<Instant>), Fail> {
        let mut p = redis::pipe();
        if self.options.watch {
            p.cmd("WATCH").arg(key).ignore();
        }
        p.cmd("GET").arg(key);
        if self.options.persist_clock {
            p.cmd("ZRANGE").arg(clock_key).arg(-1).arg(-1);
        }
        if matches!(self.time, Time::Redis) {
            p.cmd("TIME");
        }
        let values: Vec<Value> = p.query_async(&mut **conn).await.map_err(Fail::at("read the row", false))?;
        let mut values = values.into_iter();
        let raw: Option<Vec<u8>> = redis::from_redis_value(values.next().unwrap_or(Value::Nil))
            .map_err(|e| Fail::corrupt("read the row")(e.to_string()))?;
        let persisted = if self.options.persist_clock {
            let members: Vec<Vec<u8>> = redis::from_redis_value(values.next().unwrap_or(Value::Nil))
                .map_err(|e| Fail::corrupt("read the scope's clock")(e.to_string()))?;
            members
                .last()
                .map(|m| row::clock_instant(m))
                .transpose()
                .map_err(Fail::corrupt("read the scope's clock"))?
        } else {
            None
        };
        let reading = match &self.time {
            Time::Local(clock) => clock.now(),
            Time::Redis => {
                let (secs, micros): (u64, u64) = redis::from_redis_value(values.next().unwrap_or(Value::Nil))
                    .map_err(|e| Fail::corrupt("read the clock")(e.to_string()))?;
                Instant::from_millis(secs.saturating_mul(1000).saturating_add(micros / 1000))
            }
        };
        let now = self.decision_instant(reading, persisted);
        let current = raw
            .as_deref()
            .map(|b| row::decode(b, scope))
            .transpose()
            .map_err(Fail::corrupt("decode the row"))?
            .flatten();
        Ok((raw, current, now, persisted))
    }

    /// The instant to decide at: the clock's `reading`, but never earlier than `persisted` (the
    /// latest change of the scope, rule D10 across a restart) nor than an instant this store
    /// decided at before (D10 in one process).
    fn decision_instant(&self, reading: Instant, persisted: Option<Instant>) -> Instant {
        let read = reading.max(persisted.unwrap_or(Instant::ZERO)).as_millis();
        Instant::from_millis(self.latest.fetch_max(read, Ordering::SeqCst).max(read))
    }

    /// Adds to the transaction `p` the persistence of `at` as the latest instant of the scope
    /// whose clock is `clock_key`: its member, then all members but the greatest removed, so the
    /// set keeps the later of `at` and what it held (a maximum, the one computation on instants
    /// done in Redis).
    fn advance_clock(&self, p: &mut redis::Pipeline, clock_key: &[u8], at: Instant) {
        p.cmd("ZADD").arg(clock_key).arg(0).arg(&row::clock_member(at)[..]).ignore();
        p.cmd("ZREMRANGEBYRANK").arg(clock_key).arg(0).arg(-2).ignore();
    }

    /// `MULTI`, the write of `key` (`next` when `changed`, else the same bytes `raw` back), the
    /// persistence of `advance` as the latest instant of the scope whose clock is `clock_key`
    /// (when given, with a change), `EXEC`: whether it committed.
    async fn write(
        &self,
        conn: &mut Conn<'_>,
        (key, index): (&[u8], &[u8]),
        raw: Option<&[u8]>,
        next: Option<&StoredReservation>,
        changed: bool,
        advance: Option<(&[u8], Instant)>,
    ) -> Result<bool, Fail> {
        let mut p = redis::pipe();
        p.atomic();
        let tombstone = u64::try_from(self.options.tombstone_ttl.as_millis()).unwrap_or(u64::MAX).max(1);
        if !changed && !self.options.touch {
            let _: Value = redis::cmd("UNWATCH").query_async(&mut **conn).await.map_err(Fail::at("unwatch", false))?;
            return Ok(true);
        }
        if !changed {
            // A write of what is there: it changes nothing, but no other operation on the key
            // can now commit between its own WATCH and EXEC across this one.
            match raw {
                Some(bytes) => p.cmd("SET").arg(key).arg(bytes).arg("KEEPTTL"),
                None => p.cmd("SET").arg(key).arg(b"").arg("PX").arg(tombstone),
            };
        } else {
            match next {
                Some(next) => {
                    let set = p.cmd("SET").arg(key).arg(row::encode(next));
                    if let (Time::Redis, Reservation::Pending(pending)) = (&self.time, next) {
                        // Redis takes expiry instants up to i64::MAX ms; a later one never expires.
                        if let Ok(at) = i64::try_from(pending.expires_at().as_millis()) {
                            set.arg("PXAT").arg(at);
                        }
                    }
                }
                None => {
                    p.cmd("SET").arg(key).arg(b"").arg("PX").arg(tombstone);
                }
            }
            if matches!(self.time, Time::Local(_)) {
                match next {
                    Some(Reservation::Pending(pending)) => {
                        p.cmd("ZADD").arg(index).arg(score(pending.expires_at())).arg(key);
                    }
                    _ => {
                        p.cmd("ZREM").arg(index).arg(key);
                    }
                }
            }
            if let Some((clock_key, at)) = advance {
                self.advance_clock(&mut p, clock_key, at);
            }
        }
        let done: Value = p.query_async(&mut **conn).await.map_err(Fail::at("write the row", true))?;
        let committed = !matches!(done, Value::Nil);
        if committed && self.options.replica_acks > 0 {
            self.wait_for_replicas(conn).await?;
        }
        Ok(committed)
    }

    /// `WAIT` for [`RedisOptions::replica_acks`] replicas: an indeterminate failure with fewer.
    async fn wait_for_replicas(&self, conn: &mut Conn<'_>) -> Result<(), Fail> {
        let wanted = self.options.replica_acks;
        // `WAIT n 0` waits forever: the wait is at least 1 ms.
        let timeout = u64::try_from(self.options.replica_timeout.as_millis()).unwrap_or(u64::MAX).max(1);
        let acks: u64 = redis::cmd("WAIT")
            .arg(wanted)
            .arg(timeout)
            .query_async(&mut **conn)
            .await
            .map_err(Fail::at("wait for replicas", true))?;
        if acks < u64::from(wanted) {
            return Err(Fail::unreplicated(acks, wanted, timeout));
        }
        Ok(())
    }

    /// One attempt of `job`: watch and read, decide, write.
    async fn once(&self, conn: &mut Conn<'_>, job: &Job<'_>) -> Result<Attempt<Answer>, Fail> {
        let (scope, key) = match job {
            Job::Execute(request) => (request.scope, request.key),
            Job::Lookup(scope, key) => (*scope, *key),
        };
        let (row_key, clock_key, index) = (self.keys.row(scope, key), self.keys.clock(scope), self.keys.index(scope));
        let (raw, current, now, persisted) = self.watch_and_read(conn, &row_key, &clock_key, scope).await?;
        let (next, answer) = match job {
            Job::Execute(request) => {
                let Step { next, outcome, .. } = spec::apply(current.clone(), now, request.operation);
                let inserted = current.is_none() && next.is_some();
                (next, Answer::Executed(outcome, inserted))
            }
            Job::Lookup(..) => (current.clone(), Answer::Found(spec::lookup(current.as_ref(), now).cloned())),
        };
        // The instant of a change, in the change's transaction (D10 across a restart); only when
        // it moves the scope's clock.
        let advance =
            (self.options.persist_clock && persisted.is_none_or(|p| p < now)).then_some((&clock_key[..], now));
        if !self.write(conn, (&row_key, &index), raw.as_deref(), next.as_ref(), next != current, advance).await? {
            return Ok(Attempt::Conflict);
        }
        Ok(Attempt::Done(answer))
    }

    /// The benchmark's baseline: the commands of one operation that writes — `WATCH` and `GET`,
    /// then `MULTI`, the write of `next`, `EXEC` — with no decoding, no clock and no spec function
    /// between them, and without the scope's persisted instant (neither read nor written), so
    /// that the ratio to it includes what persisting the instant costs.
    #[doc(hidden)]
    pub async fn baseline_write(
        &self,
        scope: &ReservationScope,
        key: &Key,
        next: Option<&StoredReservation>,
    ) -> Result<bool, StorageError> {
        let row_key = self.keys.row(scope, key);
        let mut conn = self.pool.get(cluster::slot(&row_key)).await?;
        let (_, raw): ((), Option<Vec<u8>>) = redis::pipe()
            .cmd("WATCH")
            .arg(&row_key)
            .cmd("GET")
            .arg(&row_key)
            .query_async(&mut *conn)
            .await
            .map_err(|e| Fail::at("read the row", false)(e).into_storage())?;
        let done = self
            .write(&mut conn, (&row_key, &self.keys.index(scope)), raw.as_deref(), next, true, None)
            .await
            .map_err(Fail::into_storage)?;
        conn.keep();
        Ok(done)
    }

    /// Runs attempts of `job` until one commits, up to [`RedisOptions::retries`] more after a
    /// conflict.
    async fn retrying(&self, job: Job<'_>) -> Result<Answer, StorageError> {
        let (scope, key) = match &job {
            Job::Execute(request) => (request.scope, request.key),
            Job::Lookup(scope, key) => (*scope, *key),
        };
        let slot = cluster::slot(&self.keys.row(scope, key));
        if let Job::Execute(_) = job {
            self.list_index(&self.keys.index(scope)).await?;
        }
        let mut conflicts = 0;
        loop {
            let mut conn = self.pool.get(slot).await?;
            match self.once(&mut conn, &job).await {
                Ok(Attempt::Done(done)) => {
                    conn.keep();
                    return Ok(done);
                }
                Ok(Attempt::Conflict) => {
                    conn.keep();
                    conflicts += 1;
                    if conflicts > self.options.retries {
                        return Err(StorageError::new(format!(
                            "Redis: {conflicts} attempts in a row met another client's write to the key; nothing was written"
                        )));
                    }
                    // Let the writer that won finish before the next attempt.
                    tokio::time::sleep(Duration::from_micros(50 * u64::from(conflicts.min(20)))).await;
                }
                // Another node serves the slot, or the cluster is between two maps: nothing was
                // done. The connection is dropped, and the pool's map with it; the next attempt
                // asks the nodes for the map again.
                Err(fail) if fail.is_redirect() && conflicts < self.options.retries => {
                    drop(conn);
                    conflicts += 1;
                    tokio::time::sleep(Duration::from_millis(u64::from(conflicts.min(50)))).await;
                }
                // The connection may still watch a key, or be broken: it is dropped.
                Err(fail) => return Err(fail.into_storage()),
            }
        }
    }

    async fn after_insert(&self) {
        let every = self.options.sweep_every;
        if every > 0 && self.inserted.fetch_add(1, Ordering::Relaxed).saturating_add(1) >= every {
            self.inserted.store(0, Ordering::Relaxed);
            // Best effort: the operation has committed; a failed sweep is left to the next one.
            let _ = self.sweep().await;
        }
    }
}

/// An expiry instant as a sorted set's score. Scores are doubles: rounding keeps the order, so
/// every row that expired by `now` scores at most `score(now)`; the sweep decides each candidate
/// exactly.
fn score(at: Instant) -> f64 {
    at.as_millis() as f64
}

impl<C: Clock> ReservationStore for RedisStore<C> {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        request.admitted()?;
        match self.retrying(Job::Execute(&request)).await? {
            Answer::Executed(outcome, inserted) => {
                if inserted {
                    self.after_insert().await;
                }
                Ok(outcome)
            }
            Answer::Found(_) => Err(StorageError::new("Redis: a lookup's answer to an operation").into()),
        }
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        match self.retrying(Job::Lookup(scope, key)).await? {
            Answer::Found(found) => Ok(found),
            Answer::Executed(..) => Err(StorageError::new("Redis: an operation's answer to a lookup").into()),
        }
    }
}

/// Locks `mutex`; what it guards stays whole across a panic.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
