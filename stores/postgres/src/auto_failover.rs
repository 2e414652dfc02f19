//! PostgreSQL under pg_auto_failover, of the tests' own (feature `conformance`): a monitor, a
//! primary and a standby, synchronous (in the write quorum) or asynchronous (out of it,
//! `--replication-quorum false`), each a `pg_autoctl` node (Debian's
//! `postgresql-<version>-auto-failover`) run as the `postgres` user in a process group of its
//! own, on free loopback ports, in a temporary directory removed when dropped. The monitor
//! checks the nodes every second and calls one unhealthy after two seconds without an answer,
//! so that a failover takes seconds, not the default's half minute. A failover is the
//! monitor's own: the harness kills the primary's node (its `pg_autoctl` and its server, the
//! whole process group), or stops it for longer than the monitor waits, and waits for the
//! monitor to promote the standby; it promotes nothing.
//!
//! The store reaches every server at 127.0.0.1. The nodes reach one another, and the monitor
//! reaches them, at addresses of their own, `127.0.5.<node>`, where each node listens too; each
//! node reaches the monitor at an address of its own, `127.0.6.<node>`, where the monitor listens.
//! So a partition of one node is four nftables rules on its two addresses and the ports there.
//!
//! Needs root (the nodes run as `postgres`), Linux and `pg_autoctl`; without them, an error that
//! says what is missing.

use std::path::PathBuf;
use std::time::Duration;

use reservation_store::StorageError;
use tokio::runtime::Runtime;

use reservation_conformance::faults::{Fault, not_offered};

use crate::cluster::{BINARIES, LAG, Replication, query, version};
use crate::harness::Orchestrated;
use reservation_conformance::services::Partition;

use crate::process::{Daemon, descendants, postmaster, run, senders, signal, stop_every, sweep_stale, wait_until};

/// The start of the address each node is reached at by the monitor and the other node,
/// `127.0.5.<node>`.
const PEERS: &str = "127.0.5";

/// The start of the address each node reaches the monitor at, `127.0.6.<node>`.
const MONITOR_FOR: &str = "127.0.6";

/// The longest wait for a node to reach its state, and for a failover to end.
const SETTLE_WITHIN: Duration = Duration::from_secs(60);

/// How long, in a long pause, the old primary stays stopped after the monitor promoted the
/// standby, and how long its server is let go on before its `pg_autoctl`.
const LET_GO_AFTER: Duration = Duration::from_millis(300);

/// The bound of each command the harness runs itself (`chown`).
const COMMAND_LIMIT: Duration = Duration::from_secs(2);

/// The monitor's settings that make a failover take seconds: a health check every second, each
/// given a second, retried once after half a second, a node unhealthy after two seconds, and the
/// promoted standby let take writes two seconds after the old primary was told to stop (the
/// monitor's wait for a primary it cannot reach to demote itself; 30 s by default).
const FAST_CHECKS: [(&str, &str); 6] = [
    ("pgautofailover.primary_demote_timeout", "2000"),
    ("pgautofailover.health_check_period", "1000"),
    ("pgautofailover.health_check_timeout", "1000"),
    ("pgautofailover.health_check_max_retries", "1"),
    ("pgautofailover.health_check_retry_delay", "500"),
    ("pgautofailover.node_considered_unhealthy_timeout", "2000"),
];

/// One `pg_autoctl` process (a monitor or a node) and its data directory.
struct Node {
    /// Its number, from 1 (0 for the monitor): its addresses' last byte.
    n: u8,
    port: u16,
    dir: PathBuf,
    child: Option<Daemon>,
}

impl Node {
    /// Runs `pg_autoctl` with `args` as the `postgres` user (see [`Daemon::spawn`]).
    fn spawn(bin: &str, args: &[&str], log: &std::path::Path) -> Result<Daemon, StorageError> {
        Daemon::spawn(bin, "pg_autoctl", args, log)
    }

    /// Kills the node: its whole process group (its `pg_autoctl` processes and its server), and
    /// every process of its server and of its `pg_autoctl`, listed before the group goes (once
    /// their parents are gone they belong to no tree): a server process a fault stopped (a WAL
    /// sender) would otherwise never see its postmaster end, and a postmaster's logger and
    /// workers would outlive the test.
    fn kill(&mut self) {
        let every = [self.server_processes(), self.processes()].concat();
        if let Some(child) = self.child.take() {
            child.kill();
        }
        let _ = signal("KILL", &every);
    }

    /// The address the monitor and the other node reach it at.
    fn peer_address(&self) -> String {
        format!("{PEERS}.{}", self.n)
    }

    /// The address it reaches the monitor at.
    fn monitor_address(&self) -> String {
        format!("{MONITOR_FOR}.{}", self.n)
    }

    /// Every process of the node: its `pg_autoctl` processes and its server's, which
    /// `pg_autoctl` starts.
    fn processes(&self) -> Vec<u32> {
        self.child.as_ref().map(|c| descendants(c.id())).unwrap_or_default()
    }

    /// Its server's processes.
    fn server_processes(&self) -> Vec<u32> {
        postmaster(&self.dir).map(descendants).unwrap_or_default()
    }

    /// Its `pg_autoctl` processes.
    fn keeper_processes(&self) -> Vec<u32> {
        let server = self.server_processes();
        self.processes().into_iter().filter(|pid| !server.contains(pid)).collect()
    }
}

/// The topology: the monitor, then the two nodes in the order they were made.
pub(crate) struct AutoFailover {
    dir: PathBuf,
    monitor: Node,
    nodes: Vec<Node>,
}

impl AutoFailover {
    /// Makes and starts the monitor, sets its health checks fast, then makes the primary and its
    /// standby (in the write quorum for [`Replication::Synchronous`], out of it for
    /// [`Replication::Asynchronous`]), and waits until the monitor reports them primary and
    /// secondary.
    pub(crate) fn start(runtime: &Runtime, replication: Replication) -> Result<AutoFailover, StorageError> {
        let quorum = match replication {
            Replication::Synchronous => "true",
            Replication::Asynchronous => "false",
            Replication::None => {
                return Err(StorageError::new("pg_auto_failover: a topology with no standby has no failover"));
            }
        };
        sweep_stale("reservation-auto-failover-");
        let bin = format!("{BINARIES}/{}/bin", version()?);
        let dir = std::env::temp_dir().join(format!("reservation-auto-failover-{}-{}", std::process::id(), port()?));
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::with_source("the topology's directory", e))?;
        run("chown", &["postgres:postgres", &dir.display().to_string()], COMMAND_LIMIT)?;
        let node = |n: u8, name: &str| -> Result<Node, StorageError> {
            Ok(Node { n, port: port()?, dir: dir.join(name), child: None })
        };
        let mut topology = AutoFailover { monitor: node(0, "monitor")?, nodes: Vec::new(), dir: dir.clone() };
        // Whatever stops the start, the logs' last lines go with the error: the directory goes
        // with the topology.
        match topology.bring_up(runtime, quorum, &bin, &node) {
            Ok(()) => Ok(topology),
            Err(e) => Err(StorageError::new(format!("{e}{}", crate::process::logs_end(&dir, |_| true)))),
        }
    }

    /// [`AutoFailover::start`], once its directory and its monitor's node are made: the monitor
    /// made and started, then the nodes (with `node` made), with `bin`'s `pg_autoctl`.
    fn bring_up(
        &mut self,
        runtime: &Runtime,
        quorum: &str,
        bin: &str,
        node: &dyn Fn(u8, &str) -> Result<Node, StorageError>,
    ) -> Result<(), StorageError> {
        let dir = self.dir.clone();
        let topology = self;
        let (mport, mdir) = (topology.monitor.port.to_string(), topology.monitor.dir.display().to_string());
        let common = ["--auth", "trust", "--no-ssl"];
        let listen = format!("127.0.0.1,{MONITOR_FOR}.1,{MONITOR_FOR}.2");
        let mut create = vec!["create", "monitor", "--pgdata", &mdir, "--pgport", &mport];
        create.extend(["--hostname", "127.0.0.1", "--listen", &listen]);
        create.extend(common);
        create.push("--run");
        topology.monitor.child = Some(Node::spawn(bin, &create, &dir.join("monitor.log"))?);
        let monitor_port = topology.monitor.port;
        wait_until(SETTLE_WITHIN, "the pg_auto_failover monitor did not answer", || monitor_up(runtime, monitor_port))?;
        for (name, value) in FAST_CHECKS {
            admin(runtime, topology.monitor.port, &format!("ALTER SYSTEM SET {name} = {value}"))?;
        }
        admin(runtime, topology.monitor.port, "SELECT pg_reload_conf()")?;
        // The reload is the server's to make: the settings count once it reads them.
        let read = "SELECT current_setting('pgautofailover.node_considered_unhealthy_timeout') = '2s'";
        wait_until(SETTLE_WITHIN, "the monitor did not take its fast health checks", || {
            admin_bool(runtime, monitor_port, "postgres", read).unwrap_or(false)
        })?;
        for (n, wanted) in [(1, ["single"].as_slice()), (2, ["primary", "secondary"].as_slice())] {
            let mut node = node(n, &format!("node{n}"))?;
            let monitor =
                format!("postgres://autoctl_node@{MONITOR_FOR}.{n}:{}/pg_auto_failover", topology.monitor.port);
            let (port, pgdata) = (node.port.to_string(), node.dir.display().to_string());
            let (peer, listen) = (node.peer_address(), format!("127.0.0.1,{}", node.peer_address()));
            let mut create = vec!["create", "postgres", "--pgdata", &pgdata, "--pgport", &port, "--monitor", &monitor];
            create.extend(["--hostname", &peer, "--listen", &listen]);
            create.extend(common);
            create.extend(["--replication-quorum", quorum]);
            create.push("--run");
            node.child = Some(Node::spawn(bin, &create, &dir.join(format!("node{n}.log")))?);
            topology.nodes.push(node);
            let what = format!("the monitor did not report the nodes {wanted:?}");
            wait_until(SETTLE_WITHIN, &what, || reported(&states(runtime, &topology.monitor)) == wanted)?;
        }
        Ok(())
    }
}

impl Orchestrated for AutoFailover {
    fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    fn offers(&self) -> Vec<Fault> {
        let mut offered = vec![Fault::Failover, Fault::LongPause];
        if Partition::available() {
            offered.push(Fault::Partition);
        }
        offered
    }

    fn cause(&mut self, fault: Fault, runtime: &Runtime) -> Result<(), StorageError> {
        match fault {
            Fault::Failover => self.fail_over(runtime),
            Fault::LongPause => self.long_pause(runtime),
            Fault::Partition => self.partition(runtime),
            _ => Err(not_offered(fault)),
        }
    }
}

impl AutoFailover {
    /// The primary's index in `nodes` and the standby's port, as the monitor reports them.
    fn roles(&self, runtime: &Runtime) -> Result<(usize, u16), StorageError> {
        let now = states(runtime, &self.monitor);
        let primary = now
            .iter()
            .find(|s| s.1 == "primary")
            .and_then(|s| self.nodes.iter().position(|n| n.port == s.0))
            .ok_or_else(|| StorageError::new(format!("the monitor reports no primary: {now:?}")))?;
        let standby = self
            .nodes
            .iter()
            .enumerate()
            .find(|(i, _)| *i != primary)
            .map(|(_, n)| n.port)
            .ok_or_else(|| StorageError::new("no standby to promote"))?;
        Ok((primary, standby))
    }

    /// [`Fault::Failover`]: the standby falls behind (the primary's WAL senders stopped) for
    /// [`LAG`] while the primary goes on; then the primary's node is killed (SIGKILL, its whole
    /// process group) and stays down; the monitor finds it unhealthy and promotes the standby,
    /// which takes writes alone (`wait_primary`: no standby left to wait for). The fault ends
    /// once it answers that it takes writes. With the standby in the write quorum the commits
    /// made meanwhile wait for it, and fail with the primary; out of it, they are acknowledged,
    /// and lost.
    fn fail_over(&mut self, runtime: &Runtime) -> Result<(), StorageError> {
        let (primary, standby) = self.roles(runtime)?;
        let dir = self.nodes[primary].dir.clone();
        let what = "pg_auto_failover's primary: WAL sender";
        let lagging = wait_until(SETTLE_WITHIN, &format!("{what}: none streaming"), || !senders(&dir).is_empty())
            .and_then(|()| stop_every(what, SETTLE_WITHIN, || senders(&dir)));
        if lagging.is_ok() {
            std::thread::sleep(LAG);
        }
        self.nodes[primary].kill();
        lagging?;
        wait_until(SETTLE_WITHIN, "the monitor did not promote the standby", || writable(runtime, standby))
    }

    /// [`Fault::LongPause`]: the primary's whole node (its `pg_autoctl` and its server) is
    /// stopped (SIGSTOP), as a machine that stops answering is, until the monitor has promoted
    /// the standby; [`LET_GO_AFTER`] later its server is let go on, and its `pg_autoctl`
    /// [`LET_GO_AFTER`] after that, so that the server takes writes on the connections the
    /// store kept to it before its keeper, told by the monitor that it was replaced, stops it.
    /// The fault ends once it takes none. With the standby in the write quorum those commits wait
    /// for a standby that no longer follows, and fail; out of it, they are acknowledged, and
    /// lost.
    fn long_pause(&mut self, runtime: &Runtime) -> Result<(), StorageError> {
        let (primary, standby) = self.roles(runtime)?;
        let node = &self.nodes[primary];
        let stopped = stop_every("pg_auto_failover's primary", SETTLE_WITHIN, || node.processes());
        let promoted = stopped.and_then(|()| {
            wait_until(SETTLE_WITHIN, "the monitor did not promote the standby while the primary was stopped", || {
                writable(runtime, standby)
            })
        });
        if promoted.is_ok() {
            std::thread::sleep(LET_GO_AFTER);
        }
        // Whatever happened, the node is let go on before the fault ends: its server first.
        let server = signal("CONT", &node.server_processes());
        std::thread::sleep(LET_GO_AFTER);
        let keeper = signal("CONT", &node.keeper_processes());
        promoted.and(server).and(keeper)?;
        wait_until(SETTLE_WITHIN, "the old primary's keeper did not stop its server taking writes", || {
            !writable(runtime, node.port)
        })
    }
}

impl AutoFailover {
    /// [`Fault::Partition`]: the primary is cut off from the monitor and from the standby (what
    /// reaches its server at its peer address, and what passes between it and the monitor at its
    /// monitor address, is dropped) while the store still reaches its server at 127.0.0.1. The
    /// monitor, its health checks unanswered, promotes the standby; [`LET_GO_AFTER`] later the
    /// network heals, and the fault ends once the old primary's keeper, told it was replaced,
    /// has stopped its server. Until then it takes the store's writes: with the standby in the
    /// write quorum they wait for a standby that no longer follows, and fail; out of it, they are
    /// acknowledged, and lost.
    fn partition(&mut self, runtime: &Runtime) -> Result<(), StorageError> {
        let (primary, standby) = self.roles(runtime)?;
        let node = &self.nodes[primary];
        let (peer, port, to_monitor, monitor) =
            (node.peer_address(), node.port, node.monitor_address(), self.monitor.port);
        // Addresses and ports both: another topology may use the same addresses.
        let rules = [
            format!("ip daddr {peer} tcp dport {port} drop"),
            format!("ip saddr {peer} tcp sport {port} drop"),
            format!("ip daddr {to_monitor} tcp dport {monitor} drop"),
            format!("ip saddr {to_monitor} tcp sport {monitor} drop"),
        ];
        let cut = Partition::start(&format!("auto_failover_{port}"), &rules)?;
        let promoted =
            wait_until(SETTLE_WITHIN, "the monitor did not promote the standby while the primary was cut off", || {
                writable(runtime, standby)
            });
        if promoted.is_ok() {
            std::thread::sleep(LET_GO_AFTER);
        }
        // Whatever happened, the network heals before the fault ends.
        let healed = cut.heal();
        promoted.and(healed)?;
        wait_until(SETTLE_WITHIN, "the old primary's keeper did not stop its server taking writes", || {
            !writable(runtime, port)
        })
    }
}

/// Whether the node on `port` takes writes: out of recovery, and not read-only (the monitor
/// keeps a promoted node read-only until it has reached `wait_primary`).
fn writable(runtime: &Runtime, port: u16) -> bool {
    let sql = "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'";
    admin_bool(runtime, port, "postgres", sql).unwrap_or(false)
}

impl Drop for AutoFailover {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        self.monitor.kill();
        if std::thread::panicking() {
            eprintln!("pg_auto_failover: its logs are kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// A free loopback port.
fn port() -> Result<u16, StorageError> {
    reservation_conformance::services::loopback_port().map_err(|e| StorageError::with_source("a free loopback port", e))
}

/// The reported states of the nodes, in node order: `(port, reported, assigned)`; empty while the
/// monitor does not answer.
fn states(runtime: &Runtime, monitor: &Node) -> Vec<(u16, String, String)> {
    let sql = "SELECT nodeport, reportedstate::text, goalstate::text FROM pgautofailover.node ORDER BY nodeid";
    let rows = query(runtime, monitor.port, "pg_auto_failover", sql).unwrap_or_default();
    rows.iter()
        .filter_map(|r| {
            Some((u16::try_from(r.try_get::<_, i32>(0).ok()?).ok()?, r.try_get(1).ok()?, r.try_get(2).ok()?))
        })
        .collect()
}

/// The states the nodes reported, when each is also the state the monitor assigned it.
fn reported(states: &[(u16, String, String)]) -> Vec<&str> {
    states.iter().filter(|s| s.1 == s.2).map(|s| s.1.as_str()).collect()
}

/// Whether the monitor's server answers.
fn monitor_up(runtime: &Runtime, port: u16) -> bool {
    admin_bool(runtime, port, "pg_auto_failover", "SELECT true").unwrap_or(false)
}

/// Runs `sql` on the server on `port` as `postgres`, in database `postgres`.
fn admin(runtime: &Runtime, port: u16, sql: &str) -> Result<(), StorageError> {
    query(runtime, port, "postgres", sql).map(drop)
}

/// The first column of the first row `sql` gives, as a boolean.
fn admin_bool(runtime: &Runtime, port: u16, db: &str, sql: &str) -> Result<bool, StorageError> {
    let rows = query(runtime, port, db, sql)?;
    rows.first().and_then(|r| r.try_get(0).ok()).ok_or_else(|| StorageError::new(format!("no answer to `{sql}`")))
}
