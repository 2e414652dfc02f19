//! A Redis Sentinel topology of the harness's own, as users run one: a primary and two replicas
//! (each an [`AofServer`], every write on disk), watched by three sentinels (`redis-server
//! --sentinel`), a quorum of two. The store finds the primary through the sentinels
//! (`redis+sentinel://…`), and a failover is the sentinels' own: the harness kills the primary,
//! or cuts it off from the others, and waits for them to promote a replica; it never promotes
//! one itself.
//!
//! Every process listens on 127.0.0.1, where the store connects from; the servers connect to
//! one another from 127.0.1.1 and the sentinels to everything from 127.0.2.1 (Redis's
//! `bind-source-addr`), each giving 127.0.0.1 as its own address. So a partition is two
//! nftables rules: whatever reaches the primary's port, or leaves it, from or for an address
//! other than 127.0.0.1 is dropped. The store still reaches the primary; nothing else does.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reservation_conformance::faults::{Fault, not_offered};
use reservation_conformance::services::Partition;
use reservation_store::StorageError;

use super::{AofServer, BEHIND, MinReplicas, admin_at, lock, settle, signal, wait_until};

/// The name the sentinels watch the primary under.
pub(crate) const MASTER: &str = "reservation";

/// How long a sentinel waits, without an answer from a node, before it calls it down
/// (`down-after-milliseconds`): short, so that a failover takes seconds, yet longer than the
/// fault check's pause of a server, which must not start one.
const DOWN_AFTER: Duration = Duration::from_millis(1_000);

/// The address the store connects from, and the one every process gives as its own.
const STORE_FROM: &str = "127.0.0.1";

/// The address the servers connect to one another from.
const SERVERS_FROM: &str = "127.0.1.1";

/// The address the sentinels connect from.
const SENTINELS_FROM: &str = "127.0.2.1";

/// How long, in a [`Fault::Partition`] or a [`Fault::LongPause`], the old primary stays apart
/// after the sentinels promoted a replica.
const CUT_OFF_AFTER: Duration = Duration::from_millis(300);

/// What brings a primary set apart back: the network healed, or the process let go on.
type Back = Box<dyn FnOnce() -> Result<(), StorageError>>;

/// One sentinel: `redis-server sentinel.conf --sentinel` in a directory of its own, on a free
/// loopback port, its log in that directory (kept, and its path said, if the harness is dropped
/// while a test panics).
struct Sentinel {
    port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
}

impl Sentinel {
    fn start(primary: u16) -> Result<Sentinel, StorageError> {
        let port = reservation_conformance::services::loopback_port()
            .map_err(|e| StorageError::with_source("a free loopback port", e))?;
        let dir = std::env::temp_dir().join(format!("reservation-sentinel-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::with_source("the sentinel's directory", e))?;
        let down = DOWN_AFTER.as_millis();
        let config = format!(
            "port {port}\nbind 127.0.0.1\ndaemonize no\ndir {dir}\nlogfile {dir}/sentinel.log\n\
             protected-mode no\nbind-source-addr {SENTINELS_FROM}\nsentinel announce-ip {STORE_FROM}\n\
             sentinel monitor {MASTER} 127.0.0.1 {primary} 2\n\
             sentinel down-after-milliseconds {MASTER} {down}\n\
             sentinel failover-timeout {MASTER} 10000\n\
             sentinel parallel-syncs {MASTER} 2\n",
            dir = dir.display()
        );
        let file = dir.join("sentinel.conf");
        std::fs::write(&file, config).map_err(|e| StorageError::with_source("the sentinel's configuration", e))?;
        let child = Command::new("redis-server")
            .arg(&file)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| StorageError::with_source("starting redis-server --sentinel", e))?;
        let sentinel = Sentinel { port, dir, child: Mutex::new(Some(child)) };
        wait_until(&format!("the sentinel on port {port} did not answer"), || {
            Ok(sentinel.master().is_ok_and(|fields| !fields.is_empty()))
        })?;
        Ok(sentinel)
    }

    /// `SENTINEL MASTER`: what this sentinel knows of the primary, as field, value pairs.
    fn master(&self) -> Result<Vec<(String, String)>, StorageError> {
        let fields: Vec<String> = self.ask(|conn| redis::cmd("SENTINEL").arg("MASTER").arg(MASTER).query(conn))?;
        Ok(fields.chunks_exact(2).map(|pair| (pair[0].clone(), pair[1].clone())).collect())
    }

    /// A field of `SENTINEL MASTER`, as a number.
    fn count(&self, field: &str) -> Option<u64> {
        self.master().ok()?.into_iter().find(|(name, _)| name == field)?.1.parse().ok()
    }

    /// The port of the primary this sentinel names (`SENTINEL get-master-addr-by-name`).
    fn named(&self) -> Option<u16> {
        let named: Option<(String, u16)> =
            self.ask(|conn| redis::cmd("SENTINEL").arg("get-master-addr-by-name").arg(MASTER).query(conn)).ok()?;
        named.map(|(_, port)| port)
    }

    fn ask<T: redis::FromRedisValue>(
        &self,
        commands: impl FnOnce(&mut redis::Connection) -> redis::RedisResult<T>,
    ) -> Result<T, StorageError> {
        admin_at(self.port, &format!("the sentinel on port {}", self.port), commands)
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(mut child) = lock(&self.child).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("the sentinel on port {}: its log is kept in {}", self.port, self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The topology: three servers and three sentinels. Which server is the primary is the
/// sentinels' to say.
pub(crate) struct Sentinels {
    /// The sentinels; dropped (killed) before the servers, so that none fails over at teardown.
    sentinels: Vec<Sentinel>,
    servers: Vec<AofServer>,
    /// Whether the one failover it offers happened.
    failed_over: AtomicBool,
}

impl Sentinels {
    /// Starts the servers and the sentinels, and waits until every sentinel knows the two
    /// replicas and the two other sentinels (a failover needs a majority that knows each other),
    /// and the primary's two replicas acknowledge writes.
    pub(crate) fn start(min_replicas: Option<MinReplicas>) -> Result<Sentinels, StorageError> {
        let primary = AofServer::start_from(None, SERVERS_FROM, min_replicas)?;
        let port = primary.port;
        let mut servers = vec![primary];
        for _ in 0..2 {
            servers.push(AofServer::start_from(Some(port), SERVERS_FROM, min_replicas)?);
        }
        // The replicas first: a sentinel learns them from the primary's `INFO`, which it asks for
        // when it starts and then every ten seconds only.
        settle("the primary's two replicas did not acknowledge its writes", || {
            servers[0].has_replicas_that_acknowledge(2)
        })?;
        let sentinels = (0..3).map(|_| Sentinel::start(port)).collect::<Result<Vec<_>, _>>()?;
        let topology = Sentinels { sentinels, servers, failed_over: AtomicBool::new(false) };
        settle("the sentinels did not come to know each other and both replicas", || {
            topology
                .sentinels
                .iter()
                .all(|s| s.count("num-other-sentinels") == Some(2) && s.count("num-slaves") == Some(2))
        })?;
        Ok(topology)
    }

    /// The URL a store connects with: `redis+sentinel://` and the three sentinels.
    pub(crate) fn url(&self) -> String {
        let hosts: Vec<String> = self.sentinels.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect();
        format!("{}{}/{MASTER}", crate::sentinel::SCHEME, hosts.join(","))
    }

    /// The server the first sentinel that answers names as the primary; the first server if none
    /// answers (between a failover's start and end, the old one).
    pub(crate) fn primary(&self) -> &AofServer {
        let named = self.sentinels.iter().find_map(Sentinel::named);
        named.and_then(|port| self.servers.iter().find(|s| s.port == port)).unwrap_or(&self.servers[0])
    }

    /// The servers that are not the primary.
    fn replicas(&self) -> Vec<&AofServer> {
        let primary = self.primary().port;
        self.servers.iter().filter(|s| s.port != primary).collect()
    }

    /// Waits until both replicas acknowledge the primary's writes.
    fn replicas_online(&self) -> Result<(), StorageError> {
        settle("the primary's two replicas did not acknowledge its writes", || {
            self.primary().has_replicas_that_acknowledge(2)
        })
    }

    /// Whether a failover (by a kill or by a partition) may still be asked for.
    pub(crate) fn offers_failover(&self) -> bool {
        !self.failed_over.load(Ordering::SeqCst)
    }

    /// Whether this machine can cut the primary off: `nft` (nftables) runs, with the right to
    /// change the rules.
    pub(crate) fn can_partition(&self) -> bool {
        Partition::available()
    }

    /// The primary is cut off from the sentinels and from both replicas while the store still
    /// reaches it ([`cut`]); the store goes on writing to it, and those writes reach no replica.
    /// The sentinels find it down and promote a replica; [`CUT_OFF_AFTER`] later the network
    /// heals, the sentinels make the old primary a replica of the new one (its writes since the
    /// cut dropped by its first copy from the new primary), and the fault ends once it is one and
    /// both replicas acknowledge the new primary's writes. The harness promotes nothing and
    /// demotes nothing. Once only, in place of the failover.
    pub(crate) fn partition(&self) -> Result<(), StorageError> {
        self.apart(Fault::Partition, |old| {
            let cut = cut(old.port)?;
            Ok(Box::new(move || cut.heal()))
        })
    }

    /// The primary is stopped (SIGSTOP) past the sentinels' down-after, until they promote a
    /// replica, and [`CUT_OFF_AFTER`] later let go on (SIGCONT): it comes back believing it
    /// leads, answers what the store sent it meanwhile and takes what the store sends next, until
    /// the sentinels make it a replica of the new primary (its writes since the stop dropped by
    /// its first copy from the new primary). The fault ends once it is one and both replicas
    /// acknowledge the new primary's writes. Once only, in place of the failover.
    pub(crate) fn long_pause(&self) -> Result<(), StorageError> {
        self.apart(Fault::LongPause, |old| {
            let pid = old.pid()?;
            signal(pid, "STOP")?;
            Ok(Box::new(move || signal(pid, "CONT")))
        })
    }

    /// A failover by the sentinels of the primary set apart by `apart` (which gives what brings it
    /// back), as `fault`: they promote a replica; [`CUT_OFF_AFTER`] later the primary is brought
    /// back, whatever happened; the fault ends once both replicas of the new primary, the old
    /// primary among them (made one by the sentinels), acknowledge its writes. Once only.
    fn apart(
        &self,
        fault: Fault,
        apart: impl FnOnce(&AofServer) -> Result<Back, StorageError>,
    ) -> Result<(), StorageError> {
        if self.failed_over.swap(true, Ordering::SeqCst) {
            return Err(not_offered(fault));
        }
        let old = self.primary();
        let back = apart(old)?;
        let promoted = || {
            let named = self.sentinels.iter().find_map(Sentinel::named);
            named.filter(|port| *port != old.port).and_then(|port| self.servers.iter().find(|s| s.port == port))
        };
        let settled = settle("the sentinels did not promote a replica while the primary was apart", || {
            promoted().is_some_and(AofServer::is_primary)
        });
        if settled.is_ok() {
            std::thread::sleep(CUT_OFF_AFTER);
        }
        // Whatever happened, the primary comes back before the fault ends.
        let brought = back();
        settled.and(brought)?;
        // Both replicas of the new primary are the other replica and the old primary: once they
        // acknowledge its writes, the sentinels have made the old primary a replica.
        self.replicas_online()
    }

    /// The replicas fall behind (stopped, their links to the primary cut, so that what is in
    /// flight stays with the primary), the primary takes writes alone for [`BEHIND`] and is
    /// killed, and the replicas are let go on. The sentinels then find the primary down and
    /// promote one of them; the old primary is started again as a replica of the new one (its
    /// writes that no replica had are dropped by its first copy from the new primary), and the
    /// fault ends once both replicas acknowledge the new primary's writes. Once only.
    pub(crate) fn failover(&self) -> Result<(), StorageError> {
        if self.failed_over.swap(true, Ordering::SeqCst) {
            return Err(not_offered(Fault::Failover));
        }
        let old = self.primary();
        let replicas = self.replicas();
        let pids = replicas.iter().map(|r| r.pid()).collect::<Result<Vec<_>, _>>()?;
        // Whatever goes wrong on the way, the replicas are let go on, so that no stopped server
        // outlives the fault; what went wrong is reported at the end.
        let stopped: Vec<_> = pids.iter().map(|pid| signal(*pid, "STOP")).collect();
        let cut = old.admin::<u64>(|conn| redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica").query(conn));
        std::thread::sleep(BEHIND);
        old.kill();
        let resumed: Vec<_> = pids.iter().map(|pid| signal(*pid, "CONT")).collect();
        stopped.into_iter().chain(resumed).collect::<Result<Vec<()>, _>>()?;
        let promoted = || {
            let named = self.sentinels.iter().find_map(Sentinel::named);
            named.filter(|port| *port != old.port).and_then(|port| self.servers.iter().find(|s| s.port == port))
        };
        settle("the sentinels did not promote a replica", || promoted().is_some_and(AofServer::is_primary))?;
        let new = promoted().ok_or_else(|| StorageError::new("the promoted replica is gone"))?;
        old.follow(new.port);
        old.spawn()?;
        self.replicas_online()?;
        cut.map(drop)
    }
}

/// A partition of the server on `port` from every other process of the topology
/// ([`Partition`]): every packet to or from that port that does not come from, or go to,
/// [`STORE_FROM`] is dropped.
fn cut(port: u16) -> Result<Partition, StorageError> {
    let rules = [
        format!("tcp dport {port} ip saddr != {STORE_FROM} drop"),
        format!("tcp sport {port} ip daddr != {STORE_FROM} drop"),
    ];
    Partition::start(&port.to_string(), &rules)
}
