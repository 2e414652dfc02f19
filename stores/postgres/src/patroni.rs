//! PostgreSQL under Patroni, of the tests' own (feature `conformance`): one `etcd` and two
//! Patroni nodes (Debian's `patroni` and `etcd-server`), each run as the `postgres` user in a
//! process group of its own, on free loopback ports, in a temporary directory removed when
//! dropped. The leader's key in etcd lives 8 s and is renewed every second, so that a failover
//! takes seconds, not the default's half minute. Synchronous mode (Patroni's
//! `synchronous_mode`) is on for [`Replication::Synchronous`], off for
//! [`Replication::Asynchronous`]. A failover is Patroni's own: the harness lets the standby fall
//! behind, kills the leader's node (Patroni and its server), and waits for the standby's Patroni
//! to take the leader's key and promote it; it promotes nothing.
//!
//! The store reaches every server at 127.0.0.1; the nodes reach one another at
//! `127.0.1.<node>` (the standby's WAL receiver, the other Patroni's questions to the REST API)
//! and etcd at `127.0.3.<node>`, so that a partition of a node is nftables rules dropping what
//! goes to or comes from its two addresses.
//!
//! Needs root (the nodes run as `postgres`), Linux, `patroni` and `etcd`; without them, an
//! error that says what is missing.

use std::path::PathBuf;
use std::time::Duration;

use reservation_store::StorageError;
use tokio::runtime::Runtime;

use reservation_conformance::faults::{Fault, not_offered};
use reservation_conformance::services::Partition;

use crate::cluster::{BINARIES, LAG, Replication, ask, free_port, version};
use crate::harness::Orchestrated;
use crate::process::{
    Daemon, descendants, logs_end, postmaster, run, senders, signal, stop_every, sweep_stale, wait_until,
};

/// The longest wait for a node to start and stream, and for a failover to end.
const SETTLE_WITHIN: Duration = Duration::from_secs(60);

/// How long, in a long pause or a partition, the old leader stays apart after Patroni promoted
/// the standby.
const LET_GO_AFTER: Duration = Duration::from_millis(300);

/// The start of the address each node is reached at by the others (its server by the standby's
/// WAL receiver, its REST API by the other Patroni), `127.0.1.<node>`; the store reaches every
/// server at 127.0.0.1.
const PEERS: &str = "127.0.1";

/// The start of the address each node's Patroni reaches etcd at, `127.0.3.<node>` (etcd listens
/// on each, and Patroni, told they are proxies, asks etcd for no other).
const ETCD_FOR: &str = "127.0.3";

/// What brings a leader set apart back: the network healed, or the node let go on.
type Back<'a> = Box<dyn FnOnce() -> Result<(), StorageError> + 'a>;

/// The bound of each wait of a question to etcd.
const ASK_ETCD: Duration = Duration::from_secs(1);

/// The bound of each command the harness runs itself (`chown`).
const COMMAND_LIMIT: Duration = Duration::from_secs(2);

/// How long the leader's key lives in etcd without being renewed (`ttl`, seconds), how often
/// Patroni's loop runs (`loop_wait`), and how long it retries etcd and PostgreSQL
/// (`retry_timeout`): Patroni asks `loop_wait + 2 × retry_timeout ≤ ttl`.
const TIMING: [(&str, u32); 3] = [("ttl", 8), ("loop_wait", 1), ("retry_timeout", 3)];

/// One Patroni node: its server's port, its data directory, and Patroni while it runs.
struct Node {
    name: String,
    /// Its number, from 1: its addresses' last byte.
    n: u8,
    port: u16,
    /// Its REST API's port.
    api: u16,
    data: PathBuf,
    patroni: Option<Daemon>,
}

impl Node {
    /// Kills the node: Patroni's process group, then its server, every process of it at once
    /// (Patroni starts the server in a session of its own, and each server process is its own
    /// process group), so that nothing of it answers or writes any more.
    fn kill(&mut self) {
        if let Some(patroni) = self.patroni.take() {
            patroni.kill();
        }
        let _ = signal("KILL", &self.server_processes());
    }

    /// The address the other nodes reach it at: its server's for replication, its REST API's.
    fn peer_address(&self) -> String {
        format!("{PEERS}.{}", self.n)
    }

    /// The address its Patroni reaches etcd at.
    fn etcd_address(&self) -> String {
        format!("{ETCD_FOR}.{}", self.n)
    }

    /// Every process of the node: Patroni's, and its server's.
    fn processes(&self) -> Vec<u32> {
        let mut all = self.patroni_processes();
        all.extend(self.server_processes());
        all
    }

    /// Patroni's processes.
    fn patroni_processes(&self) -> Vec<u32> {
        self.patroni.as_ref().map(|p| descendants(p.id())).unwrap_or_default()
    }

    /// Its server's processes.
    fn server_processes(&self) -> Vec<u32> {
        self.postmaster().map(descendants).unwrap_or_default()
    }

    /// The process id of the node's postmaster, while it runs.
    fn postmaster(&self) -> Option<u32> {
        postmaster(&self.data)
    }

    /// The node's WAL senders.
    fn senders(&self) -> Vec<u32> {
        senders(&self.data)
    }
}

/// The topology: etcd and the two nodes, the first the one that bootstrapped the cluster.
pub(crate) struct Patroni {
    dir: PathBuf,
    etcd: Option<Daemon>,
    nodes: Vec<Node>,
    /// Whether this machine can cut a node off ([`Partition::available`]).
    can_partition: bool,
    /// The port etcd answers its clients on.
    etcd_port: u16,
}

/// The nodes' numbers.
const NODES: [u8; 2] = [1, 2];

impl Patroni {
    /// Starts etcd, then the first node (which makes the cluster and leads) and the second
    /// (which copies it and streams from it), and waits until the leader takes writes and its
    /// standby streams (as the synchronous standby when `replication` says so).
    pub(crate) fn start(runtime: &Runtime, replication: Replication) -> Result<Patroni, StorageError> {
        let synchronous = match replication {
            Replication::Synchronous => true,
            Replication::Asynchronous => false,
            Replication::None => return Err(StorageError::new("Patroni's topology needs a standby")),
        };
        sweep_stale("reservation-patroni-");
        let bin = format!("{BINARIES}/{}/bin", version()?);
        let dir = std::env::temp_dir().join(format!("reservation-patroni-{}-{}", std::process::id(), free_port()?));
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::with_source("the topology's directory", e))?;
        run("chown", &["postgres:postgres", &dir.display().to_string()], COMMAND_LIMIT)?;
        let can_partition = Partition::available();
        let (client, peer) = (free_port()?, free_port()?);
        let mut topology =
            Patroni { dir: dir.clone(), etcd: None, nodes: Vec::new(), can_partition, etcd_port: client };
        // Whatever stops the start, the logs' last lines go with the error: the directory goes
        // with the topology.
        match topology.bring_up(runtime, synchronous, &bin, peer) {
            Ok(()) => Ok(topology),
            Err(e) => Err(StorageError::new(format!("{e}{}", topology.logs_end()))),
        }
    }

    /// [`Patroni::start`], once its directory is made: etcd (its clients on
    /// [`Patroni::etcd_port`], its peer on `peer`), then the nodes, with `bin`'s servers.
    fn bring_up(&mut self, runtime: &Runtime, synchronous: bool, bin: &str, peer: u16) -> Result<(), StorageError> {
        let (dir, client) = (self.dir.clone(), self.etcd_port);
        let topology = self;
        let (client_url, peer_url) = (format!("http://127.0.0.1:{client}"), format!("http://127.0.0.1:{peer}"));
        let listen: Vec<String> = std::iter::once(client_url.clone())
            .chain(NODES.map(|n| format!("http://{ETCD_FOR}.{n}:{client}")))
            .collect();
        let etcd_args = [
            "--name",
            "etcd",
            "--data-dir",
            &dir.join("etcd").display().to_string(),
            "--listen-client-urls",
            &listen.join(","),
            "--advertise-client-urls",
            &client_url,
            "--listen-peer-urls",
            &peer_url,
            "--initial-advertise-peer-urls",
            &peer_url,
            "--initial-cluster",
            &format!("etcd={peer_url}"),
        ]
        .map(str::to_owned);
        let etcd_args: Vec<&str> = etcd_args.iter().map(String::as_str).collect();
        topology.etcd = Some(Daemon::spawn("/usr/bin", "etcd", &etcd_args, &dir.join("etcd.log"))?);
        // Patroni gives up on an etcd that has not yet settled its cluster's version.
        wait_until(SETTLE_WITHIN, "etcd did not settle its cluster's version", || etcd_ready(client))?;
        let scope = dir.file_name().and_then(|n| n.to_str()).unwrap_or("reservation-patroni").to_owned();
        for n in NODES {
            let name = format!("node{n}");
            let (port, api) = (free_port()?, free_port()?);
            let node = Node { name: name.clone(), n, port, api, data: dir.join(&name), patroni: None };
            let config = dir.join(format!("{name}.yml"));
            let yaml = node_config(&scope, &node, client, bin, &dir, synchronous);
            std::fs::write(&config, yaml).map_err(|e| StorageError::with_source("a Patroni node's settings", e))?;
            let log = dir.join(format!("{name}.log"));
            let patroni = Daemon::spawn(bin, "patroni", &[&config.display().to_string()], &log)?;
            topology.nodes.push(Node { patroni: Some(patroni), ..node });
            // The first node makes the cluster; the second copies it once it leads.
            if n == NODES[0] {
                let port = topology.nodes[0].port;
                wait_until(SETTLE_WITHIN, "Patroni's first node did not lead", || writable(runtime, port))?;
            }
        }
        let leader = topology.nodes[0].port;
        let state = if synchronous { "sync" } else { "async" };
        // The standby's own WAL receiver, by the name Patroni gives it: the base backup that
        // made it streams too, as another application.
        let streaming = format!(
            "SELECT count(*) = 1 FROM pg_stat_replication \
             WHERE application_name = 'node2' AND state = 'streaming' AND sync_state = '{state}'"
        );
        wait_until(SETTLE_WITHIN, &format!("Patroni's second node did not stream ({state})"), || {
            ask(runtime, leader, &streaming).unwrap_or(false)
        })?;
        Ok(())
    }
}

impl Orchestrated for Patroni {
    fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    fn offers(&self) -> Vec<Fault> {
        let mut offered = vec![Fault::Failover, Fault::LongPause];
        if self.can_partition {
            offered.push(Fault::Partition);
        }
        offered
    }

    fn cause(&mut self, fault: Fault, runtime: &Runtime) -> Result<(), StorageError> {
        match fault {
            Fault::Failover => self.fail_over(runtime),
            Fault::LongPause => self.apart(runtime, |node| {
                let stopped = stop_every(&format!("Patroni's {}", node.name), SETTLE_WITHIN, || node.processes());
                // Whatever happened, the node is let go on before the fault ends: its server
                // first, its Patroni `LET_GO_AFTER` later, so that the server takes writes as the
                // leader for at least that long before Patroni can demote it (Patroni's own
                // loop, on a machine let go on, may come to it at once).
                let back: Back<'_> = Box::new(|| {
                    let server = signal("CONT", &node.server_processes());
                    std::thread::sleep(LET_GO_AFTER);
                    server.and(signal("CONT", &node.patroni_processes()))
                });
                match stopped {
                    Ok(()) => Ok(back),
                    Err(e) => Err(back().err().unwrap_or(e)),
                }
            }),
            Fault::Partition => self.apart(runtime, |node| {
                // Addresses and ports both: another topology's nodes may have the same addresses.
                let (peer, etcd_at, etcd) = (node.peer_address(), node.etcd_address(), self.etcd_port);
                let (port, api) = (node.port, node.api);
                let rules = [
                    format!("ip daddr {peer} tcp dport {{ {port}, {api} }} drop"),
                    format!("ip saddr {peer} tcp sport {{ {port}, {api} }} drop"),
                    format!("ip daddr {etcd_at} tcp dport {etcd} drop"),
                    format!("ip saddr {etcd_at} tcp sport {etcd} drop"),
                ];
                let cut = Partition::start(&format!("patroni_{}", node.port), &rules)?;
                Ok(Box::new(move || cut.heal()))
            }),
            _ => Err(not_offered(fault)),
        }
    }
}

impl Patroni {
    /// [`Fault::Failover`]: the standby falls behind (the leader's WAL senders stopped) for
    /// [`LAG`] while the leader goes on; then the leader's node is killed (Patroni and its
    /// server) and stays down. Once the leader's key has expired in etcd, the standby's Patroni
    /// takes it and promotes its server; the fault ends once that takes writes. In synchronous
    /// mode the commits made meanwhile wait for the standby, and fail with the leader; without
    /// it, they are acknowledged, and lost.
    fn fail_over(&mut self, runtime: &Runtime) -> Result<(), StorageError> {
        let (leader, standby) = self.roles(runtime)?;
        // The standby streams since the topology started; should Patroni have restarted it
        // since, the fault starts once it streams again.
        let node = &self.nodes[leader];
        let what = format!("Patroni's {}: WAL sender", node.name);
        let lagging = wait_until(SETTLE_WITHIN, &format!("{what}: none streaming"), || !node.senders().is_empty())
            .and_then(|()| stop_every(&what, SETTLE_WITHIN, || node.senders()));
        if lagging.is_ok() {
            std::thread::sleep(LAG);
        }
        self.nodes[leader].kill();
        lagging?;
        wait_until(SETTLE_WITHIN, "Patroni did not promote the standby", || writable(runtime, standby))
    }

    /// [`Fault::LongPause`] and [`Fault::Partition`]: the leader's node is set apart by `apart`
    /// (which gives what brings it back): its whole node stopped (SIGSTOP), as a machine that
    /// stops answering is, or cut off from etcd and from the standby (its server's and its REST
    /// API's peer address, its etcd address) while the store still reaches its server. Patroni on
    /// the standby, finding the leader's key expired, promotes its server; [`LET_GO_AFTER`] later
    /// the node is brought back, whatever happened. A paused leader comes back taking writes on
    /// the connections the store kept to it (its server let go on [`LET_GO_AFTER`] before its
    /// Patroni), a cut-off one has taken them all along, until its own Patroni, finding the key
    /// another's or etcd out of reach, demotes it; the fault ends once one node alone takes
    /// writes (the old leader again, should the standby have let the key lapse; the harness says
    /// so). In synchronous mode those commits wait for a standby that no longer follows, and
    /// fail; without it, they are acknowledged, and lost.
    fn apart<'a>(
        &'a self,
        runtime: &Runtime,
        apart: impl FnOnce(&'a Node) -> Result<Back<'a>, StorageError>,
    ) -> Result<(), StorageError> {
        let (leader, standby) = self.roles(runtime)?;
        let node = &self.nodes[leader];
        let back = apart(node)?;
        let promoted =
            wait_until(SETTLE_WITHIN, "Patroni did not promote the standby while the leader was apart", || {
                writable(runtime, standby)
            });
        if promoted.is_ok() {
            std::thread::sleep(LET_GO_AFTER);
        }
        let brought = back();
        promoted.and(brought)?;
        // Patroni settles on one leader: the promoted standby, its old leader demoted; or, where
        // the standby failed to renew the leader's key in time (a loaded machine, etcd slow to
        // write), the old leader, which takes the lapsed key back, the standby demoted. Either is
        // Patroni's to choose; both taking writes past the wait is not.
        let settled = wait_until(SETTLE_WITHIN, "Patroni did not settle on one leader", || {
            self.nodes.iter().filter(|n| writable(runtime, n.port)).count() == 1
        });
        match settled {
            Ok(()) if writable(runtime, node.port) => {
                eprintln!(
                    "Patroni gave the lead back to {}, the leader set apart: its standby's key lapsed",
                    node.name
                );
                Ok(())
            }
            Ok(()) => Ok(()),
            Err(e) => Err(StorageError::new(format!("{e}{}", self.logs_end()))),
        }
    }

    /// The last lines of each log of the topology (etcd's, each node's Patroni's) that say what
    /// happened (Patroni's loop's "no action" lines left out), for an error.
    fn logs_end(&self) -> String {
        logs_end(&self.dir, said)
    }

    /// The node that takes writes, and the other one's port: the fault's roles.
    fn roles(&self, runtime: &Runtime) -> Result<(usize, u16), StorageError> {
        let leader = self
            .nodes
            .iter()
            .position(|n| writable(runtime, n.port))
            .ok_or_else(|| StorageError::new("no Patroni node takes writes"))?;
        let standby = self
            .nodes
            .iter()
            .enumerate()
            .find(|(i, _)| *i != leader)
            .map(|(_, n)| n.port)
            .ok_or_else(|| StorageError::new("no standby to promote"))?;
        Ok((leader, standby))
    }
}

impl Drop for Patroni {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        if let Some(etcd) = self.etcd.take() {
            etcd.kill();
        }
        if std::thread::panicking() {
            eprintln!("Patroni: its logs are kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The settings of `node`, in the cluster `scope` kept in the etcd
/// answering on `etcd`: its server's binaries in `bin`, its socket and its password file in
/// `dir`, trust over loopback, synchronous mode as `synchronous` says.
fn node_config(scope: &str, node: &Node, etcd: u16, bin: &str, dir: &std::path::Path, synchronous: bool) -> String {
    let timing: String = TIMING.iter().map(|(name, value)| format!("    {name}: {value}\n")).collect();
    let (name, port, api, data, dir) = (&node.name, node.port, node.api, node.data.display(), dir.display());
    let (peer, etcd_at) = (node.peer_address(), node.etcd_address());
    format!(
        "scope: {scope}\n\
         name: {name}\n\
         restapi:\n  listen: {peer}:{api}\n  connect_address: {peer}:{api}\n\
         etcd3:\n  hosts: {etcd_at}:{etcd}\n  use_proxies: true\n\
         bootstrap:\n  dcs:\n{timing}    synchronous_mode: {synchronous}\n\
         \x20 pg_hba:\n  - host all all 127.0.0.0/8 trust\n  - host replication all 127.0.0.0/8 trust\n  - local all all trust\n\
         postgresql:\n  listen: 127.0.0.1,{peer}:{port}\n  connect_address: {peer}:{port}\n  data_dir: {data}\n  bin_dir: {bin}\n\
         \x20 pgpass: {dir}/{name}.pgpass\n\
         \x20 authentication:\n    superuser: {{username: postgres}}\n    replication: {{username: postgres}}\n\
         \x20 parameters:\n    unix_socket_directories: {dir}\n"
    )
}

/// Whether a line of a Patroni topology's log says what happened: Patroni's loop's "no action"
/// lines say nothing.
fn said(line: &str) -> bool {
    !line.contains("no action")
}

/// Whether the server on `port` answers and takes writes.
fn writable(runtime: &Runtime, port: u16) -> bool {
    ask(runtime, port, "SELECT NOT pg_is_in_recovery()").unwrap_or(false)
}

/// Whether the etcd answering on `port` has settled its cluster's version (`GET /version`), each
/// wait of the question bounded.
fn etcd_ready(port: u16) -> bool {
    use std::io::{Read as _, Write as _};
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&(std::net::Ipv4Addr::LOCALHOST, port).into(), ASK_ETCD)
    else {
        return false;
    };
    let asked = stream.set_read_timeout(Some(ASK_ETCD)).and_then(|()| stream.set_write_timeout(Some(ASK_ETCD)));
    let sent = asked.and_then(|()| stream.write_all(b"GET /version HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"));
    let mut answer = Vec::new();
    // The answer is a few hundred bytes; more is not read.
    let read = sent.and_then(|()| stream.take(4_096).read_to_end(&mut answer));
    read.is_ok() && String::from_utf8_lossy(&answer).contains("\"etcdcluster\":\"3.")
}
