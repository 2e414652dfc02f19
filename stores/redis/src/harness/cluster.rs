//! A Redis Cluster of the harness's own, as users run one: three primaries, each with one
//! replica, every node an [`AofServer`] (every write on disk) with `cluster-enabled`, made a
//! cluster by `redis-cli --cluster create`. The store finds each slot's primary by the map the
//! nodes answer (`redis+cluster://…`), and a failover is the cluster's own: the harness kills a
//! primary, or stops it, and waits for the other primaries to elect its replica; it never
//! promotes one itself.
//!
//! Every node listens on 127.0.0.1, where the store connects from, and connects to the others
//! (its replication link and its cluster bus) from a loopback address of its own, 127.0.4.1 to
//! 127.0.4.6 (Redis's `bind-source-addr`), giving 127.0.0.1 as its own address. So a partition of
//! one node is four nftables rules on this topology's ports: what reaches its port or its bus
//! port from an address other than 127.0.0.1, or leaves them for one, and what it sends from its
//! own address to another node's ports, or receives there, is dropped. The store still reaches
//! it; no other node does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use reservation_conformance::faults::{Fault, not_offered};
use reservation_conformance::services::Partition;
use reservation_store::StorageError;

use super::{AofServer, BEHIND, settle, signal};

/// How long a node goes without an answer from another before it calls it failing
/// (`cluster-node-timeout`): short, so that a failover takes seconds, yet longer than the fault
/// check's pause of a server, which must not start one.
const NODE_TIMEOUT: Duration = Duration::from_millis(1_000);

/// The longest `redis-cli --cluster create` may take.
const CREATE_WITHIN: Duration = Duration::from_secs(60);

/// The addresses the nodes connect to one another from, one each.
const NODES_FROM: [&str; 2 * PRIMARIES] =
    ["127.0.4.1", "127.0.4.2", "127.0.4.3", "127.0.4.4", "127.0.4.5", "127.0.4.6"];

/// The address the store connects from, and the one every node gives as its own.
const STORE_FROM: &str = "127.0.0.1";

/// How long, in a [`Fault::LongPause`] or a [`Fault::Partition`], the old primary stays apart
/// after its replica was elected.
const CUT_OFF_AFTER: Duration = Duration::from_millis(300);

/// What brings a primary set apart back: the network healed, or the process let go on.
type Back = Box<dyn FnOnce() -> Result<(), StorageError>>;

/// The longest a fault waits for a primary to hold a key, so that it is caused where the writes
/// go.
const WRITES_WITHIN: Duration = Duration::from_secs(2);

/// How many primaries the cluster has; each has one replica.
const PRIMARIES: usize = 3;

/// The topology: six nodes. Which of them are primaries is the cluster's to say.
pub(crate) struct Cluster {
    nodes: Vec<AofServer>,
    /// Whether the one failover it offers happened.
    failed_over: AtomicBool,
}

impl Cluster {
    /// Starts six nodes, makes them a cluster of three primaries and three replicas, and waits
    /// until every node finds the cluster whole and every primary's replica acknowledges its
    /// writes.
    pub(crate) fn start() -> Result<Cluster, StorageError> {
        let nodes = NODES_FROM
            .into_iter()
            .map(|from| AofServer::start_node(from, NODE_TIMEOUT))
            .collect::<Result<Vec<_>, _>>()?;
        let mut create = std::process::Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        create.args(nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)));
        create.args(["--cluster-replicas", "1", "--cluster-yes"]);
        reservation_conformance::services::run_within(create, None, CREATE_WITHIN)?;
        let cluster = Cluster { nodes, failed_over: AtomicBool::new(false) };
        cluster.whole()?;
        Ok(cluster)
    }

    /// The URL a store connects with: `redis+cluster://` and every node.
    pub(crate) fn url(&self) -> String {
        let hosts: Vec<String> = self.nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        format!("{}{}", crate::cluster::SCHEME, hosts.join(","))
    }

    /// Every node, running or not.
    pub(crate) fn nodes(&self) -> &[AofServer] {
        &self.nodes
    }

    /// The nodes whose `ROLE` is `master`.
    fn primaries(&self) -> Vec<&AofServer> {
        self.nodes.iter().filter(|n| n.is_primary()).collect()
    }

    /// The primary a fault is for: the busiest ([`Cluster::busiest`]) once a primary holds a key,
    /// waiting at most [`WRITES_WITHIN`] for one to (a fault check's workers may not have written
    /// yet on a loaded machine, and a primary that holds none of its keys is not where its
    /// writes go); the busiest by commands if none does by then.
    fn faulted(&self) -> &AofServer {
        let written = || {
            self.primaries().iter().any(|n| n.admin(|conn| redis::cmd("DBSIZE").query::<u64>(conn)).unwrap_or(0) > 0)
        };
        let deadline = std::time::Instant::now() + WRITES_WITHIN;
        while !written() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.busiest()
    }

    /// The primary that holds the most keys (`DBSIZE`), where a test's writes go; of those that
    /// hold as many (none yet, early in a run), the one that has run the most commands
    /// (`total_commands_processed`); the first node if none answers.
    pub(crate) fn busiest(&self) -> &AofServer {
        let load = |n: &AofServer| {
            let keys = n.admin(|conn| redis::cmd("DBSIZE").query::<u64>(conn)).unwrap_or(0);
            let info = n.admin(|conn| redis::cmd("INFO").arg("stats").query::<redis::InfoDict>(conn));
            let commands = info.ok().and_then(|info| info.get::<u64>("total_commands_processed")).unwrap_or(0);
            (keys, commands)
        };
        let mut primaries: Vec<(&AofServer, (u64, u64))> = self.primaries().into_iter().map(|n| (n, load(n))).collect();
        // The greatest load last; of equal loads, the last listed.
        primaries.sort_by_key(|(_, load)| *load);
        primaries.last().map_or(&self.nodes[0], |(n, _)| n)
    }

    /// The node that answers `ROLE` as a replica of `primary`.
    fn replica_of(&self, primary: &AofServer) -> Option<&AofServer> {
        self.nodes.iter().find(|n| n.follows() == Some(primary.port))
    }

    /// Waits until every running node answers that the cluster is whole (`cluster_state:ok`),
    /// there are [`PRIMARIES`] primaries, and each one's replica acknowledges its writes.
    fn whole(&self) -> Result<(), StorageError> {
        settle("the cluster did not become whole, each primary with a replica that acknowledges its writes", || {
            let primaries = self.primaries();
            primaries.len() == PRIMARIES
                && primaries.iter().all(|p| p.has_replicas_that_acknowledge(1))
                && self.nodes.iter().filter(|n| n.pid().is_ok()).all(AofServer::cluster_is_ok)
        })
    }

    /// Whether a failover (by a kill or by a long pause) may still be asked for.
    pub(crate) fn offers_failover(&self) -> bool {
        !self.failed_over.load(Ordering::SeqCst)
    }

    /// Waits until `replica`, of `old` (which no longer answers), is a primary, and every
    /// other running node finds the cluster whole.
    fn elected(&self, old: &AofServer, replica: &AofServer) -> Result<(), StorageError> {
        settle("the cluster did not elect the replica of the primary", || {
            replica.is_primary()
                && self.nodes.iter().filter(|n| n.port != old.port && n.pid().is_ok()).all(AofServer::cluster_is_ok)
        })
    }

    /// The busiest primary's replica falls behind (stopped, its link cut, so that what is in
    /// flight stays with the primary), the primary takes writes alone for [`BEHIND`] and is
    /// killed, and the replica is let go on. The other primaries find the killed one failing
    /// after [`NODE_TIMEOUT`] and elect its replica; the old primary is started again, on its
    /// own `nodes.conf`, finds itself replaced and becomes a replica of the new one (its writes
    /// that the replica did not have are dropped by its first copy from it). The fault ends
    /// once the cluster is whole again. Once only.
    pub(crate) fn failover(&self) -> Result<(), StorageError> {
        if self.failed_over.swap(true, Ordering::SeqCst) {
            return Err(not_offered(Fault::Failover));
        }
        let old = self.faulted();
        let replica = self.replica_of(old).ok_or_else(|| StorageError::new("the busiest primary has no replica"))?;
        let pid = replica.pid()?;
        // Whatever goes wrong on the way, the replica is let go on, so that no stopped server
        // outlives the fault; what went wrong is reported at the end.
        let stopped = signal(pid, "STOP");
        let cut = old.admin::<u64>(|conn| redis::cmd("CLIENT").arg("KILL").arg("TYPE").arg("replica").query(conn));
        std::thread::sleep(BEHIND);
        old.kill();
        signal(pid, "CONT").and(stopped)?;
        self.elected(old, replica)?;
        old.spawn()?;
        self.whole()?;
        cut.map(drop)
    }

    /// The busiest primary is stopped (SIGSTOP) past the node timeout, until the other primaries
    /// elect its replica, and [`CUT_OFF_AFTER`] later let go on (SIGCONT): it comes back
    /// believing it leads, answers what the store sent it meanwhile and takes what the store
    /// sends next, until the cluster's messages tell it that it was replaced and it becomes a
    /// replica of the new primary. The fault ends once the cluster is whole again. Once only, in
    /// place of the failover.
    pub(crate) fn long_pause(&self) -> Result<(), StorageError> {
        self.apart(Fault::LongPause, |old| {
            let pid = old.pid()?;
            signal(pid, "STOP")?;
            Ok(Box::new(move || signal(pid, "CONT")))
        })
    }

    /// Whether this machine can cut a primary off: `nft` (nftables) runs, with the right to
    /// change the rules.
    pub(crate) fn can_partition(&self) -> bool {
        Partition::available()
    }

    /// The busiest primary is cut off from every other node while the store still reaches it
    /// ([`Cluster::cut`]): it goes on taking the store's writes, which reach no replica, until
    /// it has heard from no other primary for the node timeout and refuses them. The other
    /// primaries elect its replica; [`CUT_OFF_AFTER`] later the network heals, the cluster's
    /// messages make the old primary a replica of the new one (what it took alone dropped by its
    /// first copy from it), and the fault ends once the cluster is whole again. The harness
    /// promotes nothing and demotes nothing. Once only, in place of the failover.
    pub(crate) fn partition(&self) -> Result<(), StorageError> {
        self.apart(Fault::Partition, |old| {
            let cut = self.cut(old)?;
            Ok(Box::new(move || cut.heal()))
        })
    }

    /// The busiest primary set apart by `apart` (which gives what brings it back), as `fault`,
    /// until the other primaries elect its replica, and [`CUT_OFF_AFTER`] more; then brought
    /// back, whatever happened, and the fault ends once the cluster is whole again. Once only.
    fn apart(
        &self,
        fault: Fault,
        apart: impl FnOnce(&AofServer) -> Result<Back, StorageError>,
    ) -> Result<(), StorageError> {
        if self.failed_over.swap(true, Ordering::SeqCst) {
            return Err(not_offered(fault));
        }
        let old = self.faulted();
        let replica = self.replica_of(old).ok_or_else(|| StorageError::new("the busiest primary has no replica"))?;
        let back = apart(old)?;
        let elected = self.elected(old, replica);
        if elected.is_ok() {
            std::thread::sleep(CUT_OFF_AFTER);
        }
        // Whatever happened, the primary comes back before the fault ends.
        let brought = back();
        elected.and(brought)?;
        self.whole()
    }

    /// A partition of `node` from every other node of the topology ([`Partition`]): what
    /// reaches its port or bus port from an address other than [`STORE_FROM`], or leaves them
    /// for one, and what it sends from its own address to the other nodes' ports, or receives
    /// there, is dropped.
    fn cut(&self, node: &AofServer) -> Result<Partition, StorageError> {
        let ports = |n: &AofServer| [Some(n.port), n.cluster.map(|(bus, _)| bus)].into_iter().flatten();
        let set = |ports: Vec<u16>| ports.iter().map(u16::to_string).collect::<Vec<_>>().join(", ");
        let own = set(ports(node).collect());
        let others = set(self.nodes.iter().filter(|n| n.port != node.port).flat_map(ports).collect());
        let from = node.source.ok_or_else(|| StorageError::new("a cluster node with no address of its own"))?;
        let rules = [
            format!("tcp dport {{ {own} }} ip saddr != {STORE_FROM} drop"),
            format!("tcp sport {{ {own} }} ip daddr != {STORE_FROM} drop"),
            format!("ip saddr {from} tcp dport {{ {others} }} drop"),
            format!("ip daddr {from} tcp sport {{ {others} }} drop"),
        ];
        Partition::start(&node.port.to_string(), &rules)
    }
}
