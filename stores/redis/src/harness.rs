//! [`RedisHarness`]: the conformance suite's harness for [`RedisStore`] (feature `conformance`),
//! and [`AofServer`], a Redis server of its own that keeps everything on disk.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant as WallInstant};

use reservation_conformance::faults::{Fault, not_offered};
use reservation_conformance::{Capabilities, Harness, Persistence, START, Settings};
use reservation_store::{ManualClock, StorageError};
use tokio::runtime::Runtime;

use crate::{RedisOptions, RedisStore, Time};

mod cluster;
mod sentinels;

use cluster::Cluster;
use sentinels::Sentinels;

/// The longest wait for a server to start, load its data or catch up as a replica.
const START_WITHIN: Duration = Duration::from_secs(10);

/// The bound of each command the harness sends a server itself, and of each `kill` it runs.
const ADMIN: Duration = Duration::from_secs(2);

/// How many times a store of a harness with a server of its own tries its first connection.
const CONNECT_TRIES: u32 = 5;

/// How long [`Fault::Pause`] stops the server.
const PAUSE: Duration = Duration::from_millis(300);

/// How long, in a [`Fault::Failover`], the primary takes writes its stopped replica does not get.
const BEHIND: Duration = Duration::from_millis(300);

/// Locks `mutex`; what it guards stays whole across a panic.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Sends `signal` (`STOP`, `CONT`) to the process `pid`, with the `kill` command.
fn signal(pid: u32, signal: &str) -> Result<(), StorageError> {
    let mut kill = Command::new("kill");
    kill.arg(format!("-{signal}")).arg(pid.to_string());
    bounded(kill, None)
}

/// Runs `command`, `input` on its standard input, within [`ADMIN`]
/// ([`reservation_conformance::services::run_within`]).
fn bounded(command: Command, input: Option<&str>) -> Result<(), StorageError> {
    reservation_conformance::services::run_within(command, input, ADMIN)
}

/// Waits, at most [`START_WITHIN`], until `ready` says yes; an error of `ready` ends the wait.
fn wait_until(what: &str, mut ready: impl FnMut() -> Result<bool, StorageError>) -> Result<(), StorageError> {
    let deadline = WallInstant::now() + START_WITHIN;
    while WallInstant::now() < deadline {
        if ready()? {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Err(StorageError::new(format!("{what} within {START_WITHIN:?}")))
}

/// The longest wait for an orchestrated topology (Sentinel, Cluster) to form, and for its
/// failover to end with a new primary that its replicas follow.
const SETTLE_WITHIN: Duration = Duration::from_secs(30);

/// Waits, at most [`SETTLE_WITHIN`], until `ready` says yes.
fn settle(what: &str, mut ready: impl FnMut() -> bool) -> Result<(), StorageError> {
    let deadline = WallInstant::now() + SETTLE_WITHIN;
    while WallInstant::now() < deadline {
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(StorageError::new(format!("{what} within {SETTLE_WITHIN:?}")))
}

/// The faults a topology an orchestrator fails over offers: cut connections and a pause always;
/// while its one failover is unused, the failover, a long pause and, where `nft` runs, a
/// partition, in place of one another.
fn orchestrated_faults(offers_failover: bool, can_partition: bool) -> Vec<Fault> {
    let mut faults = vec![Fault::CutConnections, Fault::Pause];
    if offers_failover {
        faults.extend([Fault::Failover, Fault::LongPause]);
        if can_partition {
            faults.push(Fault::Partition);
        }
    }
    faults
}

/// Sends `commands` to the `redis-server` (a server or a sentinel), called `what`, on the
/// loopback port `port`, on a connection of its own, every wait bounded by [`ADMIN`].
fn admin_at<T: redis::FromRedisValue>(
    port: u16,
    what: &str,
    commands: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
) -> Result<T, StorageError> {
    let error = |e: redis::RedisError| StorageError::with_source(what.to_owned(), e);
    let client = redis::Client::open(("127.0.0.1", port)).map_err(error)?;
    let mut conn = client.get_connection_with_timeout(ADMIN).map_err(error)?;
    conn.set_read_timeout(Some(ADMIN)).map_err(error)?;
    conn.set_write_timeout(Some(ADMIN)).map_err(error)?;
    commands(&mut conn).map_err(error)
}

/// The server the tests use: `RESERVATION_REDIS_URL`, or `redis://127.0.0.1:6379/`.
pub fn redis_url() -> String {
    std::env::var("RESERVATION_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned())
}

/// A `redis-server` of its own, in a temporary directory, on a free loopback port, with
/// `appendonly yes` and `appendfsync always`: every acknowledged write is on disk before the
/// answer, so a killed server restarts with all of them. Killed (by its process id) and its
/// directory removed when dropped. A [`RedisHarness::durable`] starts one, and hands it out by
/// [`RedisHarness::server`]; a [`RedisHarness::replicated`] starts two, a primary and its
/// replica.
pub struct AofServer {
    port: u16,
    url: String,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
    /// The port of the primary it replicates, while it is a replica.
    primary: Mutex<Option<u16>>,
    /// Whether it writes its append-only file: always, but in a planted bug of the
    /// `broken-variants` feature.
    keeps: bool,
    /// Its `appendfsync` policy: `always`, or `everysec`.
    fsync: &'static str,
    /// Whether `dir` is its own, removed when it is dropped (not a directory the suite gave).
    owns_dir: bool,
    /// The address its own connections to other servers come from (`bind-source-addr`), when
    /// not the default: a partition tells them from the store's by it.
    source: Option<&'static str>,
    /// `min-replicas-to-write` and `min-replicas-max-lag` (seconds), when set: as a primary, it
    /// refuses writes while fewer replicas than that acknowledged its stream that recently.
    min_replicas: Option<MinReplicas>,
    /// As a node of a Redis Cluster, the port of its cluster bus and its node timeout.
    cluster: Option<(u16, Duration)>,
}

/// Redis's `min-replicas-to-write` and `min-replicas-max-lag`: a primary refuses writes
/// (`NOREPLICAS`) while fewer than `replicas` replicas have acknowledged its stream within the
/// last `max_lag_secs` seconds.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MinReplicas {
    /// `min-replicas-to-write`.
    pub replicas: u32,
    /// `min-replicas-max-lag`, in seconds.
    pub max_lag_secs: u32,
}

impl AofServer {
    /// Starts a server (the `redis-server` on the `PATH`), a replica of the server on the port
    /// `primary` if one is given, and waits until it answers.
    fn start(primary: Option<u16>) -> Result<AofServer, StorageError> {
        Self::start_keeping(primary, true)
    }

    /// As [`AofServer::start`], its connections to other servers made from the loopback address
    /// `source`, and the address it gives them for itself 127.0.0.1 (`replica-announce-ip`).
    /// With `min_replicas`, it refuses writes as a primary while too few replicas keep up.
    fn start_from(
        primary: Option<u16>,
        source: &'static str,
        min_replicas: Option<MinReplicas>,
    ) -> Result<AofServer, StorageError> {
        Self::start_with(primary, true, (Some(source), min_replicas))
    }

    /// As [`AofServer::start`]; with `keeps` false, the server writes no append-only file.
    fn start_keeping(primary: Option<u16>, keeps: bool) -> Result<AofServer, StorageError> {
        Self::start_with(primary, keeps, (None, None))
    }

    fn start_with(
        primary: Option<u16>,
        keeps: bool,
        (source, min_replicas): (Option<&'static str>, Option<MinReplicas>),
    ) -> Result<AofServer, StorageError> {
        let port = reservation_conformance::services::loopback_port()
            .map_err(|e| StorageError::with_source("a free loopback port", e))?;
        let dir = std::env::temp_dir().join(format!("reservation-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::with_source("the server's directory", e))?;
        let url = format!("redis://127.0.0.1:{port}/");
        let server = AofServer {
            port,
            url,
            dir,
            child: Mutex::new(None),
            primary: Mutex::new(primary),
            keeps,
            fsync: "always",
            owns_dir: true,
            source,
            min_replicas,
            cluster: None,
        };
        server.spawn()?;
        Ok(server)
    }

    /// A node of a Redis Cluster (`cluster-enabled`), every write on disk, not yet in a cluster:
    /// its cluster bus on a free loopback port of its own, a node called failing after
    /// `node_timeout` without an answer; its connections to other nodes made from the loopback
    /// address `source`, and the address it gives them for itself 127.0.0.1.
    fn start_node(source: &'static str, node_timeout: Duration) -> Result<AofServer, StorageError> {
        let free = || {
            reservation_conformance::services::loopback_port()
                .map_err(|e| StorageError::with_source("a free loopback port", e))
        };
        let (port, bus) = (free()?, free()?);
        let dir = std::env::temp_dir().join(format!("reservation-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::with_source("the server's directory", e))?;
        let server = AofServer {
            port,
            url: format!("redis://127.0.0.1:{port}/"),
            dir,
            child: Mutex::new(None),
            primary: Mutex::new(None),
            keeps: true,
            fsync: "always",
            owns_dir: true,
            source: Some(source),
            min_replicas: None,
            cluster: Some((bus, node_timeout)),
        };
        server.spawn()?;
        Ok(server)
    }

    /// A server whose directory is `dir`, given (and kept when the server is dropped), with the
    /// `appendfsync` policy `fsync`.
    fn start_in(dir: &Path, fsync: &'static str) -> Result<AofServer, StorageError> {
        let port = reservation_conformance::services::loopback_port()
            .map_err(|e| StorageError::with_source("a free loopback port", e))?;
        let url = format!("redis://127.0.0.1:{port}/");
        let dir = dir.to_path_buf();
        let server = AofServer {
            port,
            url,
            dir,
            child: Mutex::new(None),
            primary: Mutex::new(None),
            keeps: true,
            fsync,
            owns_dir: false,
            source: None,
            min_replicas: None,
            cluster: None,
        };
        server.spawn()?;
        Ok(server)
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    fn spawn(&self) -> Result<(), StorageError> {
        let mut command = Command::new("redis-server");
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--appendonly", if self.keeps { "yes" } else { "no" }])
            .args(["--appendfsync", self.fsync, "--save", "", "--daemonize", "no"])
            // A replica's first copy is sent at once, not after the default 5 s.
            .args(["--repl-diskless-sync-delay", "0"])
            .arg("--dir")
            .arg(&self.dir);
        if let Some(primary) = *lock(&self.primary) {
            command.args(["--replicaof", "127.0.0.1", &primary.to_string()]);
        }
        if let Some(source) = self.source {
            // Connections from another loopback address than 127.0.0.1 are refused in protected
            // mode; the server listens on 127.0.0.1 alone all the same.
            command.args(["--bind-source-addr", source, "--replica-announce-ip", "127.0.0.1"]);
            command.args(["--protected-mode", "no"]);
        }
        if let Some((bus, node_timeout)) = self.cluster {
            // Its map of the cluster, `nodes.conf`, in its own directory; a restart reads it.
            command.args(["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]);
            command.args(["--cluster-port", &bus.to_string(), "--cluster-announce-ip", "127.0.0.1"]);
            command.args(["--cluster-node-timeout", &node_timeout.as_millis().to_string()]);
        }
        if let Some(MinReplicas { replicas, max_lag_secs }) = self.min_replicas {
            command.args(["--min-replicas-to-write", &replicas.to_string()]);
            command.args(["--min-replicas-max-lag", &max_lag_secs.to_string()]);
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| StorageError::with_source("starting redis-server", e))?;
        let pid = child.id();
        *lock(&self.child) = Some(child);
        let answers =
            wait_until(&format!("redis-server on port {} did not answer", self.port), || self.answers_as(pid));
        if answers.is_err() {
            self.kill();
        }
        answers
    }

    /// Whether the server answers `PING` with `PONG` and has loaded its data.
    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else { return false };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let mut answer = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok() && stream.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n"
    }

    /// Whether the server answers, and is the process `pid` (`process_id` of `INFO server`):
    /// another process on the port is not this server. An error once the process has ended.
    fn answers_as(&self, pid: u32) -> Result<bool, StorageError> {
        if let Some(child) = lock(&self.child).as_mut()
            && let Ok(Some(status)) = child.try_wait()
        {
            return Err(StorageError::new(format!("redis-server on port {} ended: {status}", self.port)));
        }
        if !self.answers() {
            return Ok(false);
        }
        let info = self.admin(|conn| redis::cmd("INFO").arg("server").query::<redis::InfoDict>(conn));
        Ok(info.is_ok_and(|info| info.get::<u32>("process_id") == Some(pid)))
    }

    fn kill(&self) {
        if let Some(mut child) = lock(&self.child).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The server's process id, while it runs.
    fn pid(&self) -> Result<u32, StorageError> {
        lock(&self.child)
            .as_ref()
            .map(Child::id)
            .ok_or_else(|| StorageError::new(format!("redis-server on port {} is not running", self.port)))
    }

    /// Sends `commands` to the server on a connection of its own, every wait bounded by
    /// [`ADMIN`].
    fn admin<T: redis::FromRedisValue>(
        &self,
        commands: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, StorageError> {
        admin_at(self.port, &format!("redis-server on port {}", self.port), commands)
    }

    /// Closes every client connection (not a replica's): `CLIENT KILL TYPE normal`.
    fn cut_connections(&self) -> Result<u64, StorageError> {
        self.admin(|conn| {
            redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("normal").arg("SKIPME").arg("yes").query(conn)
        })
    }

    /// Stops the server (SIGSTOP) for `pause`, then lets it go on (SIGCONT) and waits until it
    /// answers.
    fn pause(&self, pause: Duration) -> Result<(), StorageError> {
        let pid = self.pid()?;
        // Let go on even if the stop seemed to fail: a stopped server must not outlive the fault.
        let stopped = signal(pid, "STOP");
        std::thread::sleep(pause);
        signal(pid, "CONT").and(stopped)?;
        wait_until(&format!("redis-server on port {} did not answer once let go on", self.port), || {
            self.answers_as(pid)
        })
    }

    /// Whether this server, a primary, has a replica that acknowledges a write within 100 ms.
    fn has_replica_that_acknowledges(&self) -> bool {
        self.has_replicas_that_acknowledge(1)
    }

    /// Whether this server, a primary, has `n` replicas that acknowledge a write within 100 ms:
    /// `WAIT n` after a `PUBLISH`, a write that changes no data but is replicated.
    fn has_replicas_that_acknowledge(&self, n: u64) -> bool {
        let acks = self.admin(|conn| {
            let (acks,): (u64,) = redis::pipe()
                .cmd("PUBLISH")
                .arg("reservation-harness")
                .arg("is a replica there?")
                .ignore()
                .cmd("WAIT")
                .arg(n)
                .arg(100)
                .query(conn)?;
            Ok(acks)
        });
        acks.is_ok_and(|acks| acks >= n)
    }

    /// Whether the server answers that its `ROLE` is `master`.
    fn is_primary(&self) -> bool {
        let role = self.admin(|conn| redis::cmd("ROLE").query::<Vec<redis::Value>>(conn));
        role.ok()
            .and_then(|role| role.into_iter().next())
            .and_then(|first| redis::from_redis_value::<String>(first).ok())
            .is_some_and(|role| role == "master")
    }

    /// The port of the primary this server answers `ROLE` as a replica of, if it does.
    fn follows(&self) -> Option<u16> {
        let role = self.admin(|conn| redis::cmd("ROLE").query::<Vec<redis::Value>>(conn)).ok()?;
        let mut role = role.into_iter();
        let kind: String = redis::from_redis_value(role.next()?).ok()?;
        let _host = role.next()?;
        let port: u16 = redis::from_redis_value(role.next()?).ok()?;
        (kind == "slave").then_some(port)
    }

    /// Whether this node of a cluster answers that the cluster is whole (`cluster_state:ok`).
    fn cluster_is_ok(&self) -> bool {
        self.admin(|conn| redis::cmd("CLUSTER").arg("INFO").query::<String>(conn))
            .is_ok_and(|info| info.lines().any(|line| line.trim() == "cluster_state:ok"))
    }

    /// Makes the server start, at its next start, as a replica of the server on port `primary`.
    fn follow(&self, primary: u16) {
        *lock(&self.primary) = Some(primary);
    }

    /// Makes this replica a primary (`REPLICAOF NO ONE`); a restart keeps it one.
    fn promote(&self) -> Result<(), StorageError> {
        let _: String = self.admin(|conn| redis::cmd("REPLICAOF").arg("NO").arg("ONE").query(conn))?;
        *lock(&self.primary) = None;
        Ok(())
    }

    /// Kills the server (SIGKILL: nothing is flushed at exit) and starts it again on the same
    /// port and directory, where it reloads its append-only file. It waits for the new process
    /// itself to answer: if another server holds the port meanwhile, the new one ends and the
    /// restart fails, rather than take the other for its own.
    pub fn restart(&self) -> Result<(), StorageError> {
        self.kill();
        self.spawn()
    }
}

impl Drop for AofServer {
    fn drop(&mut self) {
        self.kill();
        if self.owns_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A primary that keeps every write on disk and its replica, then, once the replica was promoted,
/// the new primary and a replica of its own.
struct Replicated {
    /// The primary at the start, killed in the failover.
    first: AofServer,
    /// Its replica, the primary once promoted.
    second: AofServer,
    /// The replica of `second` started after the failover.
    spare: OnceLock<AofServer>,
    /// Whether the failover happened: `second` is the primary.
    promoted: AtomicBool,
}

impl Replicated {
    fn start() -> Result<Replicated, StorageError> {
        let first = AofServer::start(None)?;
        let second = AofServer::start(Some(first.port))?;
        let servers = Replicated { first, second, spare: OnceLock::new(), promoted: AtomicBool::new(false) };
        servers.replica_online()?;
        Ok(servers)
    }

    fn primary(&self) -> &AofServer {
        if self.promoted.load(Ordering::SeqCst) { &self.second } else { &self.first }
    }

    /// Waits until the primary's replica acknowledges writes.
    fn replica_online(&self) -> Result<(), StorageError> {
        let primary = self.primary();
        wait_until(&format!("redis-server on port {} had no replica that acknowledges writes", primary.port), || {
            Ok(primary.has_replica_that_acknowledges())
        })
    }

    /// The replica falls behind (stopped, and its link to the primary cut, so that what is in
    /// flight stays with the primary), the primary takes writes alone for [`BEHIND`] and is
    /// killed, and the replica is let go on and promoted; a new replica of it is started, so that
    /// a store waiting for one replica's acknowledgement works again. Once only.
    fn failover(&self) -> Result<(), StorageError> {
        if self.promoted.load(Ordering::SeqCst) {
            return Err(not_offered(Fault::Failover));
        }
        let (old, new) = (&self.first, &self.second);
        let pid = new.pid()?;
        // Whatever goes wrong on the way, the failover goes on, so that the world has a primary
        // after it and no stopped server; what went wrong is reported at the end.
        let stopped = signal(pid, "STOP");
        let cut = old.admin::<u64>(|conn| redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica").query(conn));
        std::thread::sleep(BEHIND);
        old.kill();
        signal(pid, "CONT").and(stopped)?;
        new.promote()?;
        self.promoted.store(true, Ordering::SeqCst);
        let spare = AofServer::start(Some(new.port))?;
        // Set once: the failover happens once.
        let _ = self.spare.set(spare);
        self.replica_online()?;
        cut.map(drop)
    }
}

/// The servers a harness uses.
enum Servers {
    /// A shared server, which the harness does nothing to.
    Shared,
    /// An [`AofServer`] of its own.
    Durable(AofServer),
    /// A primary and its replica, of its own.
    Replicated(Box<Replicated>),
    /// A primary, two replicas and three sentinels, of its own.
    Sentinel(Box<Sentinels>),
    /// A Redis Cluster of three primaries and three replicas, of its own.
    Cluster(Box<Cluster>),
}

/// `RedisStore`s on one server under a key prefix of this harness's own, so that runs never
/// collide; its keys are deleted when the harness is dropped. Every store the suite asks for
/// shares one pool of up to 16 connections, each with the suite's clock.
///
/// [`RedisHarness::connect`] uses a shared server, such as the one at [`redis_url`] (which, as
/// configured for the tests, keeps nothing on disk: not durable), and offers no fault.
/// [`RedisHarness::durable`] starts an [`AofServer`] of its own and declares the durable
/// capability: [`Harness::reopen`] kills and restarts that server and connects a new pool, as a
/// crash and a process restart would. It offers the fault check [`Fault::CutConnections`]
/// (`CLIENT KILL TYPE normal`), [`Fault::Crash`] (the server killed and restarted, as at a
/// reopen) and [`Fault::Pause`] (the server stopped for 300 ms). [`RedisHarness::replicated`]
/// starts a primary and its replica and offers [`Fault::Failover`] besides, once.
pub struct RedisHarness {
    runtime: Runtime,
    url: String,
    options: RedisOptions,
    base: RedisStore<ManualClock>,
    servers: Servers,
    /// The `appendfsync` policy of the servers it starts in the suite's directories.
    fsync: &'static str,
    /// The server of the power-cut check, in the directory the suite gave, while it runs.
    powered: Mutex<Option<AofServer>>,
}

impl RedisHarness {
    /// A harness on a new [`AofServer`], durable.
    pub fn durable() -> Result<Self, StorageError> {
        Self::durable_with(RedisOptions::default())
    }

    /// A harness on a new [`AofServer`], durable, whose stores use `options`
    /// (`options.prefix` is replaced by the harness's own).
    pub fn durable_with(options: RedisOptions) -> Result<Self, StorageError> {
        Self::on_own(AofServer::start(None)?, options)
    }

    /// A harness like [`RedisHarness::durable`] whose servers in the power-cut check's directories
    /// sync their append-only file once a second (`appendfsync everysec`), as Redis does by
    /// default: the last second of acknowledged writes may be lost to a power cut, and, while a
    /// sync of the file is slow, to a process crash too (Redis then puts off writing the file for
    /// up to two seconds and answers meanwhile; the power-cut check finds it under `process`
    /// when its trap holds a write or a sync of the file). It promises no power cut: it is
    /// durable across the crash check's kills, on a disk that keeps up.
    pub fn durable_everysec() -> Result<Self, StorageError> {
        let mut harness = Self::durable()?;
        harness.fsync = "everysec";
        Ok(harness)
    }

    /// A harness on `server`, its own, whose stores use `options`.
    fn on_own(server: AofServer, options: RedisOptions) -> Result<Self, StorageError> {
        let mut harness = Self::connect(&server.url(), options)?;
        harness.servers = Servers::Durable(server);
        Ok(harness)
    }

    /// BROKEN ON PURPOSE (feature `broken-variants`, for this crate's tests only): a harness like
    /// [`RedisHarness::durable`] whose server writes no append-only file, so that a crash loses
    /// every acknowledged write, and the suite's checks after a crash must say so.
    #[cfg(feature = "broken-variants")]
    pub fn broken_forgetful() -> Result<Self, StorageError> {
        Self::on_own(AofServer::start_keeping(None, false)?, RedisOptions::default())
    }

    /// A harness on a primary [`AofServer`] and its replica (an [`AofServer`] too), both of its
    /// own, durable. Its stores know both nodes, the replica first
    /// ([`RedisOptions::with_nodes`]), so that they follow the replica once it is promoted;
    /// `options` may ask them to wait for the replica ([`RedisOptions::with_replica_acks`]).
    /// [`Fault::Failover`]: the replica falls behind for 300 ms (stopped, its link to the primary
    /// cut) while the primary takes writes alone, the primary is killed, and the replica is let
    /// go on and promoted (`REPLICAOF NO ONE`); a new replica of it is started before the fault
    /// ends. Without a wait for the replica, what the store acknowledged in those 300 ms is lost.
    pub fn replicated(options: RedisOptions) -> Result<Self, StorageError> {
        let servers = Replicated::start()?;
        let options = options.with_nodes([servers.first.url()]);
        let mut harness = Self::connect(&servers.second.url(), options)?;
        harness.servers = Servers::Replicated(Box::new(servers));
        Ok(harness)
    }

    /// A harness on a Redis Sentinel topology of its own, as users run one: a primary and two
    /// replicas ([`AofServer`]s, every write on disk), watched by three sentinels (a quorum of
    /// two, a node called down after a second without an answer); each server and sentinel a
    /// `redis-server` process on a loopback port, all killed when the harness is dropped (a
    /// sentinel's log kept, its path said, when that happens while a test panics). Its stores
    /// connect through the sentinels (`redis+sentinel://…`); `options` may ask them to wait for
    /// replicas ([`RedisOptions::with_replica_acks`]). It offers [`Fault::CutConnections`],
    /// [`Fault::Pause`] (300 ms, shorter than the sentinels' down-after) and, once,
    /// [`Fault::Failover`] by the sentinels: both replicas fall behind for 300 ms (stopped, their
    /// links cut) while the primary takes writes alone, the primary is killed, and the sentinels
    /// promote a replica; the harness promotes nothing. Without a wait for both replicas, what
    /// the store acknowledged in those 300 ms is lost. In place of that failover, where `nft`
    /// (nftables) runs, it offers [`Fault::Partition`]: the primary cut off from the sentinels and
    /// both replicas (nftables rules drop what reaches it from the addresses they connect from,
    /// 127.0.1.1 and 127.0.2.1) while the store, on 127.0.0.1, still reaches it, until the
    /// sentinels promote a replica; then the network heals and the fault ends once the sentinels
    /// have made the old primary a replica of the new one. Also in place of the failover,
    /// [`Fault::LongPause`]: the primary stopped (SIGSTOP) until the sentinels promote a replica,
    /// then let go on, taking writes until they make it a replica. Not durable: its store is
    /// never reopened.
    pub fn sentinel(options: RedisOptions) -> Result<Self, StorageError> {
        Self::sentinel_with(options, None)
    }

    /// As [`RedisHarness::sentinel`], each server set with `min-replicas-to-write` and
    /// `min-replicas-max-lag` when `min_replicas` is given: a primary that has not heard from
    /// enough replicas recently refuses writes, Redis's own bound on what a primary cut off from
    /// its replicas acknowledges alone.
    pub fn sentinel_with(options: RedisOptions, min_replicas: Option<MinReplicas>) -> Result<Self, StorageError> {
        let topology = Sentinels::start(min_replicas)?;
        let mut harness = Self::connect(&topology.url(), options)?;
        harness.servers = Servers::Sentinel(Box::new(topology));
        Ok(harness)
    }

    /// A harness on a Redis Cluster of its own, as users run one: three primaries, each with one
    /// replica, every node an [`AofServer`] (every write on disk) with `cluster-enabled` and a
    /// node timeout of one second, made a cluster by `redis-cli --cluster create`; each node a
    /// `redis-server` process on a loopback port, all killed when the harness is dropped. Its
    /// stores connect with a `redis+cluster://` URL naming every node; `options` may ask them to
    /// wait for each primary's replica ([`RedisOptions::with_replica_acks`] with 1). It offers
    /// [`Fault::CutConnections`] (on every node), [`Fault::Pause`] (of the primary that holds
    /// the most keys, 300 ms, shorter than the node timeout) and, once, [`Fault::Failover`] by
    /// the cluster: that primary's replica falls behind for 300 ms (stopped, its link cut) while
    /// the primary takes writes alone, the primary is killed, and the other primaries elect the
    /// replica; the harness promotes nothing. Without a wait for the replica, what the store
    /// acknowledged in those 300 ms is lost. In place of that failover, [`Fault::LongPause`]: the
    /// primary stopped (SIGSTOP) until its replica is elected, then let go on, taking writes
    /// until the cluster tells it it was replaced. Also in place of the failover, where `nft`
    /// (nftables) runs, [`Fault::Partition`]: that primary cut off from every other node (each
    /// node connects to the others from a loopback address of its own, 127.0.4.1 to 127.0.4.6)
    /// while the store, on 127.0.0.1, still reaches it, until the others elect its replica; then
    /// the network heals, and the fault ends once the cluster has made the old primary a replica
    /// of the new one. Not durable: its store is never reopened.
    pub fn cluster(options: RedisOptions) -> Result<Self, StorageError> {
        let topology = Cluster::start()?;
        let mut harness = Self::connect(&topology.url(), options)?;
        harness.servers = Servers::Cluster(Box::new(topology));
        Ok(harness)
    }

    /// A harness on the server at `url`; `options.prefix` is replaced by the harness's own.
    pub fn connect(url: &str, options: RedisOptions) -> Result<Self, StorageError> {
        use std::sync::atomic::AtomicU32;
        static N: AtomicU32 = AtomicU32::new(0);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| StorageError::with_source("a tokio runtime", e))?;
        let prefix = format!(
            "rsv-test:{}:{}:{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
        );
        let options = options.with_prefix(prefix);
        let base = runtime.block_on(RedisStore::connect(url, Time::Local(ManualClock::new(START)), options.clone()))?;
        Ok(RedisHarness {
            runtime,
            url: url.to_owned(),
            options,
            base,
            servers: Servers::Shared,
            fsync: "always",
            powered: Mutex::new(None),
        })
    }

    /// The settings that suit this store, for the run to start from: 300 differential scripts
    /// (each step a round trip; more are drawn while a rule is still unreached), and
    /// linearizability histories on 8 threads.
    pub fn settings() -> Settings {
        Settings::default().with_cases(300).with_concurrency(8, 3_000, 10_000)
    }

    /// The runtime the stores' futures run on.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The server's URL: the primary's, for a replicated harness.
    pub fn url(&self) -> &str {
        self.server().map_or(&self.url, |server| &server.url)
    }

    /// The `redis+sentinel://` URL a harness made by [`RedisHarness::sentinel`] connects its
    /// stores with; `None` for the others.
    pub fn sentinel_url(&self) -> Option<&str> {
        matches!(self.servers, Servers::Sentinel(_)).then_some(self.url.as_str())
    }

    /// The `redis+cluster://` URL a harness made by [`RedisHarness::cluster`] connects its
    /// stores with; `None` for the others.
    pub fn cluster_url(&self) -> Option<&str> {
        matches!(self.servers, Servers::Cluster(_)).then_some(self.url.as_str())
    }

    /// The nodes of a harness made by [`RedisHarness::cluster`]'s cluster (empty for the others),
    /// running or not: whichever are its primaries now.
    pub fn cluster_nodes(&self) -> &[AofServer] {
        match &self.servers {
            Servers::Cluster(topology) => topology.nodes(),
            _ => &[],
        }
    }

    /// The options of the harness's stores: its key prefix.
    pub fn options(&self) -> &RedisOptions {
        &self.options
    }

    /// The harness's own server, if it runs one: the primary, for a replicated harness; on a
    /// cluster, the primary that holds the most keys.
    pub fn server(&self) -> Option<&AofServer> {
        match &self.servers {
            Servers::Shared => None,
            Servers::Durable(server) => Some(server),
            Servers::Replicated(servers) => Some(servers.primary()),
            Servers::Sentinel(topology) => Some(topology.primary()),
            Servers::Cluster(topology) => Some(topology.busiest()),
        }
    }

    /// Whether the harness runs a topology an orchestrator fails over (Sentinel, Cluster), which
    /// it never reopens.
    fn orchestrated(&self) -> bool {
        matches!(self.servers, Servers::Sentinel(_) | Servers::Cluster(_))
    }

    /// A replicated harness's replica of the primary, while it has one.
    pub fn replica(&self) -> Option<&AofServer> {
        let Servers::Replicated(servers) = &self.servers else { return None };
        if servers.promoted.load(Ordering::SeqCst) { servers.spare.get() } else { Some(&servers.second) }
    }

    /// Kills and restarts the harness's server (the primary), and waits until a replica it has
    /// is online again.
    fn crash(&self) -> Result<(), StorageError> {
        let server = self.server().ok_or_else(|| not_offered(Fault::Crash))?;
        server.restart()?;
        match &self.servers {
            Servers::Replicated(servers) => servers.replica_online(),
            _ => Ok(()),
        }
    }

    /// A store on the harness's pool and keys that decides expiry by `time`.
    pub fn store_with<C>(&self, time: Time<C>) -> RedisStore<C> {
        self.base.with_time(time)
    }
}

impl Drop for RedisHarness {
    fn drop(&mut self) {
        if !matches!(self.servers, Servers::Shared) {
            return;
        }
        // Deletes the harness's keys from the shared server; best effort.
        let pattern = format!("{}:*", self.options.prefix);
        let base = &self.base;
        self.runtime.block_on(async {
            let Ok(mut conn) = base.pool.get(0).await else { return };
            let mut cursor = 0u64;
            loop {
                let Ok((next, keys)): Result<(u64, Vec<Vec<u8>>), _> = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut *conn)
                    .await
                else {
                    return;
                };
                if !keys.is_empty() {
                    let _: Result<u64, _> = redis::cmd("UNLINK").arg(&keys).query_async(&mut *conn).await;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            conn.keep();
        });
    }
}

impl Harness for RedisHarness {
    type Store = RedisStore<ManualClock>;

    /// A store on the harness's pool; on a server of the harness's own, which a reopen or a crash
    /// kills and restarts (breaking every connection the pool held), on a pool of its own. A test
    /// may be cutting that server's connections already while the store connects: the connection
    /// is tried up to `CONNECT_TRIES` times, 25 ms apart.
    fn store(&self, clock: ManualClock) -> Self::Store {
        if self.server().is_none() {
            return self.base.with_time(Time::Local(clock));
        }
        let mut tries = 0;
        loop {
            tries += 1;
            let connect = RedisStore::connect(&self.url, Time::Local(clock.clone()), self.options.clone());
            match self.runtime.block_on(connect) {
                Ok(store) => return store,
                Err(_) if tries < CONNECT_TRIES => std::thread::sleep(Duration::from_millis(25)),
                Err(e) => panic!(
                    "connecting to the Redis server failed, {tries} times: {}",
                    reservation_store::error_chain(&e)
                ),
            }
        }
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// On a server of its own, which keeps every write on disk, the store's persisted instants
    /// (one per scope, written with each change) survive the kill at every reopen too. With
    /// `appendfsync always` it promises to survive a power cut under `data`, not `names`:
    /// `redis-server` 7 makes its `appendonlydir` and never syncs the directory that holds it, so
    /// a cut that takes back unsynced names takes the whole append-only file. With `everysec`, no
    /// power cut, not even under `process` ([`RedisHarness::durable_everysec`]).
    fn capabilities(&self) -> Capabilities {
        match (self.server().is_some() && !self.orchestrated(), self.fsync) {
            (false, _) => Capabilities::default(),
            (true, "always") => Capabilities::default().with_power_cuts(Persistence::Data),
            (true, _) => Capabilities::default().with_durable(true),
        }
    }

    /// A store on a server of the harness's whose directory is `dir`, with its `appendfsync`
    /// policy: the server started there at the first call, killed and started again on what a
    /// cut left at every later one (the machine that lost power restarting it).
    fn store_in(&self, dir: &Path, clock: ManualClock) -> Option<Self::Store> {
        self.server().filter(|_| !self.orchestrated())?;
        let mut powered = lock(&self.powered);
        let server = match powered.take() {
            Some(server) if server.dir == dir => server.restart().map(|()| server),
            _ => AofServer::start_in(dir, self.fsync),
        };
        let server = server.unwrap_or_else(|e| {
            panic!("starting redis-server in {}: {}", dir.display(), reservation_store::error_chain(&e))
        });
        let store = self.runtime.block_on(RedisStore::connect(&server.url(), Time::Local(clock), self.options.clone()));
        *powered = Some(server);
        Some(store.unwrap_or_else(|e| {
            panic!("connecting to the Redis server in {}: {}", dir.display(), reservation_store::error_chain(&e))
        }))
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        self.server().filter(|_| !self.orchestrated())?;
        drop(store);
        self.crash()
            .unwrap_or_else(|e| panic!("restarting the Redis server failed: {}", reservation_store::error_chain(&e)));
        let reopened = self.runtime.block_on(RedisStore::connect(&self.url, Time::Local(clock), self.options.clone()));
        Some(reopened.unwrap_or_else(|e| {
            panic!("reconnecting to the restarted Redis server failed: {}", reservation_store::error_chain(&e))
        }))
    }

    fn faults(&self) -> Vec<Fault> {
        match &self.servers {
            Servers::Shared => Vec::new(),
            Servers::Durable(_) => vec![Fault::CutConnections, Fault::Crash, Fault::Pause],
            Servers::Replicated(servers) => {
                let mut faults = vec![Fault::CutConnections, Fault::Crash, Fault::Pause];
                if !servers.promoted.load(Ordering::SeqCst) {
                    faults.push(Fault::Failover);
                }
                faults
            }
            Servers::Sentinel(topology) => orchestrated_faults(topology.offers_failover(), topology.can_partition()),
            Servers::Cluster(topology) => orchestrated_faults(topology.offers_failover(), topology.can_partition()),
        }
    }

    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        let server = self.server().ok_or_else(|| not_offered(fault))?;
        match (fault, &self.servers) {
            (Fault::CutConnections, Servers::Cluster(topology)) => {
                let cut: Vec<_> = topology.nodes().iter().map(AofServer::cut_connections).collect();
                cut.into_iter().collect::<Result<Vec<u64>, _>>().map(drop)
            }
            (Fault::CutConnections, _) => server.cut_connections().map(drop),
            (Fault::Crash, Servers::Sentinel(_) | Servers::Cluster(_)) => Err(not_offered(fault)),
            (Fault::Crash, _) => self.crash(),
            (Fault::Pause, _) => server.pause(PAUSE),
            (Fault::Failover, Servers::Replicated(servers)) => servers.failover(),
            (Fault::Failover, Servers::Sentinel(topology)) => topology.failover(),
            (Fault::Partition, Servers::Sentinel(topology)) => topology.partition(),
            (Fault::LongPause, Servers::Sentinel(topology)) => topology.long_pause(),
            (Fault::Failover, Servers::Cluster(topology)) => topology.failover(),
            (Fault::LongPause, Servers::Cluster(topology)) => topology.long_pause(),
            (Fault::Partition, Servers::Cluster(topology)) => topology.partition(),
            _ => Err(not_offered(fault)),
        }
    }
}
