//! [`PostgresHarness`]: the conformance suite's harness for [`PostgresStore`] (feature
//! `conformance`).

use std::path::Path;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reservation_conformance::faults::{Fault, not_offered};
use reservation_conformance::{Capabilities, Harness, Persistence, Settings};
use reservation_store::{ManualClock, StorageError};
use tokio::runtime::Runtime;

use crate::auto_failover::AutoFailover;
use crate::cluster::{Clusters, Powered, Replication};
use crate::patroni::Patroni;
use crate::schema::quote;
use crate::{PostgresOptions, PostgresStore, Time};

/// The server the tests use: `RESERVATION_PG_URL`, or `postgres://postgres@127.0.0.1:5432/test`.
pub fn pg_url() -> String {
    std::env::var("RESERVATION_PG_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Test schemas older than this are dropped by the next harness that connects: runs that ended
/// without dropping their own (a test binary keeps its harness in a static).
const STALE: Duration = Duration::from_secs(6 * 3600);

/// `PostgresStore`s on one database, in a schema of this harness's own
/// (`reservation_test_<seconds>_<process>_<n>`), so that runs never collide; dropped with the
/// harness. Every store the suite asks for shares one pool of up to 16 connections, each with
/// the suite's clock. Durable: [`Harness::reopen`] closes the store's pool and connects a new one
/// to the same tables, as a process restart would.
///
/// Faults ([`Harness::faults`]): a harness made by [`PostgresHarness::connect`], on a server it
/// does not run, offers [`Fault::CutConnections`] alone. One made by
/// [`PostgresHarness::on_cluster`] runs its own servers, and offers as well
/// [`Fault::Crash`], [`Fault::Pause`] and, while a standby is left, [`Fault::Failover`]:
///
/// - [`Fault::CutConnections`]: `pg_terminate_backend` of every session of the harness's
///   `application_name`, busy or idle.
/// - [`Fault::Crash`]: every process of the primary killed with SIGKILL at once (the postmaster
///   and its backends, as a crash ends them), the server started again on the same data, and
///   the standby, if any, streaming from it again.
/// - [`Fault::Pause`]: every process of the primary stopped with SIGSTOP for 300 ms, then let go
///   on with SIGCONT. It neither answers nor closes a connection meanwhile.
/// - [`Fault::Failover`], once: the primary's WAL senders are stopped, so the standby falls
///   behind, for 500 ms while the primary goes on committing; the primary is killed and stays
///   down; the standby is promoted. The store follows through its connection string, which
///   names both servers with `target_session_attrs=read-write`. With
///   [`Replication::Asynchronous`], what the primary acknowledged in those 500 ms never reached
///   the standby, and is lost: the fault check catches it. With [`Replication::Synchronous`]
///   no commit is acknowledged in those 500 ms: each waits for the standby, and fails when the
///   primary dies, an indeterminate error (the commit is on the dead primary's disk, not on the
///   standby's). Stopping the standby's WAL receiver instead would lose nothing: what the
///   primary had sent would wait in the standby's socket, and be read once it went on.
///
/// A harness made by [`PostgresHarness::on_auto_failover`] or [`PostgresHarness::on_patroni`]
/// offers [`Fault::CutConnections`] and, once, [`Fault::Failover`] by its orchestrator, or
/// under Patroni [`Fault::LongPause`] or [`Fault::Partition`] in its place (see each).
///
/// Power cuts: a harness made by [`PostgresHarness::on_cluster`] declares that its server
/// survives a power cut under `names` ([`Capabilities::power_cuts`]), and for the power-cut check
/// ([`Harness::store_in`]) starts a server of its own whose data directory is in the directory
/// the check mounts its disk on, killed and started again on what each cut left.
pub struct PostgresHarness {
    runtime: Runtime,
    url: String,
    options: PostgresOptions,
    base: PostgresStore<ManualClock>,
    /// The servers of a harness made by [`PostgresHarness::on_cluster`]; dropped last, once the
    /// runtime and its connections are gone.
    clusters: Option<Mutex<Clusters>>,
    /// The server in the power-cut check's directory ([`Harness::store_in`]), while there is one.
    powered: Mutex<Option<Powered>>,
    /// The settings of that server beyond the durable ones (test only: `fsync = off`).
    power_settings: Vec<(&'static str, &'static str)>,
    /// The orchestrated topology of a harness made by [`PostgresHarness::on_auto_failover`] or
    /// [`PostgresHarness::on_patroni`]; dropped last, as `clusters`.
    orchestrated: Option<Mutex<Orchestration>>,
}

impl PostgresHarness {
    /// A harness on the server at `url`, in a new schema; `options.schema` and
    /// `options.application_name` are replaced by the harness's own.
    pub fn connect(url: &str, options: PostgresOptions) -> Result<Self, StorageError> {
        PostgresHarness::build(runtime()?, url, options, None)
    }

    /// A harness on PostgreSQL clusters of its own, made with Debian's `pg_createcluster` on free
    /// loopback ports and removed (`pg_dropcluster --stop`) when the harness is dropped: a
    /// primary and, unless `replication` is [`Replication::None`], a standby streaming from it.
    /// The faults it offers are listed on [`PostgresHarness`]. `options.schema` and
    /// `options.application_name` are replaced by the harness's own; short timeouts in `options`
    /// keep a fault run short.
    ///
    /// It needs the tools of Debian's `postgresql-common` and a PostgreSQL server installed the
    /// Debian way, root (each server runs as the `postgres` user), and Linux; without them, an
    /// error that says what is missing. Clusters are named
    /// `reservation-test-<process id>-<process start>-<n>-<role>`; those of a test process that
    /// ended without removing them are removed by the next harness made here.
    pub fn on_cluster(replication: Replication, options: PostgresOptions) -> Result<Self, StorageError> {
        let runtime = runtime()?;
        let clusters = Clusters::start(&runtime, replication)?;
        let url = clusters.url().to_owned();
        PostgresHarness::build(runtime, &url, options, Some(clusters))
    }

    /// A harness on PostgreSQL under pg_auto_failover, of its own: a monitor, a primary and a
    /// synchronous standby, each a `pg_autoctl` node run as the `postgres` user on free loopback
    /// ports (Debian's `postgresql-<version>-auto-failover`), the monitor's health checks set to
    /// call a node unhealthy after two seconds; all killed and removed when the harness is
    /// dropped (their logs kept, and their directory said, when that happens while a test
    /// panics). Its stores connect with both nodes and `target_session_attrs=read-write`. It
    /// offers [`Fault::CutConnections`] and, once, [`Fault::Failover`] by the monitor: the
    /// primary's node is killed (its `pg_autoctl` and its server) and stays down, and the monitor
    /// promotes the standby; the harness promotes nothing. In place of the failover, a long pause
    /// ([`PostgresHarness::on_auto_failover_with`]). About 20 s to start on two cores.
    /// What a test process that ended without dropping its harness left (processes, directory)
    /// is swept by the next one made here.
    pub fn on_auto_failover(options: PostgresOptions) -> Result<Self, StorageError> {
        Self::on_auto_failover_with(Replication::Synchronous, options)
    }

    /// As [`PostgresHarness::on_auto_failover`], its standby in the write quorum for
    /// [`Replication::Synchronous`] (every commit waits for it) or out of it for
    /// [`Replication::Asynchronous`] (`pg_autoctl create postgres --replication-quorum false`:
    /// no commit waits for it); [`Replication::None`] is an error. Its failover stops the
    /// primary's WAL senders for half a second before it kills the primary, so that an
    /// asynchronous standby falls behind. Besides, once and in place of the failover, it offers
    /// [`Fault::LongPause`]: the primary's whole node stopped until the monitor has promoted the
    /// standby, then let go on (its server first), until its `pg_autoctl`, told it was replaced,
    /// stops its server; and, where `nft` (nftables) runs, [`Fault::Partition`]: the primary cut
    /// off from the monitor and the standby (which reach it at `127.0.5.<n>`, and it the monitor
    /// at `127.0.6.<n>`) while the store, at 127.0.0.1, still reaches it, until the monitor has
    /// promoted the standby, then healed, until its `pg_autoctl` stops its server.
    pub fn on_auto_failover_with(replication: Replication, options: PostgresOptions) -> Result<Self, StorageError> {
        let runtime = runtime()?;
        let topology = started_once_more(replication, || AutoFailover::start(&runtime, replication))?;
        PostgresHarness::orchestrated(runtime, Box::new(topology), options)
    }

    /// A harness on PostgreSQL under Patroni, of its own: one `etcd` and two Patroni nodes, each
    /// run as the `postgres` user on free loopback ports (Debian's `patroni` and `etcd-server`),
    /// the leader's key in etcd living 8 s; all killed and removed when the harness is dropped
    /// (their logs kept, and their directory said, when that happens while a test panics).
    /// `replication` sets Patroni's synchronous mode: on for [`Replication::Synchronous`], off
    /// for [`Replication::Asynchronous`]; [`Replication::None`] is an error. Its stores connect
    /// with both nodes and `target_session_attrs=read-write`. It offers
    /// [`Fault::CutConnections`] and, once, one of [`Fault::Failover`] by Patroni (the standby
    /// falls behind for half a second, the leader's node is killed, Patroni and its server, and
    /// stays down, and once its key has expired the standby's Patroni promotes its server) and
    /// [`Fault::LongPause`] (the leader's whole node stopped until Patroni has promoted the
    /// standby, then let go on, until its own Patroni demotes it) and, where `nft` (nftables)
    /// runs, [`Fault::Partition`] (the leader cut off from etcd and from the standby while the
    /// store still reaches it, until Patroni has promoted the standby and the leader's own
    /// Patroni, out of reach of etcd, has demoted it); the harness promotes and demotes nothing.
    /// The nodes reach one another at 127.0.1.x and etcd at 127.0.3.x, the store every server
    /// at 127.0.0.1. 5-11 s to start on two cores. What a test process that ended without
    /// dropping its harness left (processes, directory) is swept by the next one made here.
    pub fn on_patroni(replication: Replication, options: PostgresOptions) -> Result<Self, StorageError> {
        let runtime = runtime()?;
        let topology = started_once_more(replication, || Patroni::start(&runtime, replication))?;
        PostgresHarness::orchestrated(runtime, Box::new(topology), options)
    }

    /// A harness on `topology`, through its connection string.
    fn orchestrated(
        runtime: Runtime,
        topology: Box<dyn Orchestrated>,
        options: PostgresOptions,
    ) -> Result<Self, StorageError> {
        let url = every_node(&topology.ports());
        let mut harness = PostgresHarness::build(runtime, &url, options, None)?;
        harness.orchestrated = Some(Mutex::new(Orchestration { topology, failed_over: false }));
        Ok(harness)
    }

    /// A harness on `url`, in a new schema, with `clusters` if it runs its own servers.
    fn build(
        runtime: Runtime,
        url: &str,
        options: PostgresOptions,
        clusters: Option<Clusters>,
    ) -> Result<Self, StorageError> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let schema = format!("reservation_test_{secs}_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let options = options.with_application_name(schema.clone()).with_schema(schema);
        let base = runtime.block_on(async {
            let store = PostgresStore::connect(
                url,
                Time::Local(ManualClock::new(reservation_conformance::START)),
                options.clone(),
            )
            .await?;
            drop_stale_schemas(&store, secs).await;
            Ok::<_, StorageError>(store)
        })?;
        let clusters = clusters.map(Mutex::new);
        Ok(PostgresHarness {
            runtime,
            url: url.to_owned(),
            options,
            base,
            clusters,
            powered: Mutex::new(None),
            power_settings: Vec::new(),
            orchestrated: None,
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

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The options of the harness's stores: its schema, its connections' `application_name`.
    pub fn options(&self) -> &PostgresOptions {
        &self.options
    }

    /// A store on the harness's pool and tables that decides expiry by `time`.
    pub fn store_with<C>(&self, time: Time<C>) -> PostgresStore<C> {
        self.base.with_time(time)
    }

    /// The names of the harness's own clusters, as `pg_lsclusters` lists them: the primary's,
    /// the standby's, then the one a failover took out of service. None for a harness made by
    /// [`PostgresHarness::connect`].
    pub fn clusters(&self) -> Vec<String> {
        self.clusters.as_ref().map_or_else(Vec::new, |c| lock(c).names())
    }

    /// The port on 127.0.0.1 of the harness's primary now (after a failover, the promoted
    /// standby's); `None` for a harness made by [`PostgresHarness::connect`].
    pub fn primary_port(&self) -> Option<u16> {
        self.clusters.as_ref().map(|c| lock(c).primary_port())
    }

    /// Terminates every session of the harness's `application_name` on the primary.
    fn cut_connections(&self) -> Result<(), StorageError> {
        let app = &self.options.application_name;
        let limit = self.options.connect_timeout + self.options.response_timeout;
        let cut = async {
            let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls).await?;
            tokio::spawn(connection);
            let sql = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1";
            client.query_one(sql, &[app]).await.map(drop)
        };
        match self.runtime.block_on(async { tokio::time::timeout(limit, cut).await }) {
            Ok(cut) => cut.map_err(|e| StorageError::with_source("PostgreSQL: terminating the store's sessions", e)),
            Err(_) => {
                Err(StorageError::new(format!("PostgreSQL: terminating the store's sessions: not within {limit:?}")))
            }
        }
    }
}

/// Planted bugs, for the crate's own tests only (feature `broken-variants`).
#[cfg(feature = "broken-variants")]
impl PostgresHarness {
    /// BROKEN ON PURPOSE: the server this harness starts in the power-cut check's directory runs
    /// with `fsync = off`, so nothing it writes is ever synced, while the harness still promises
    /// to survive power cuts: a cut takes back commits it acknowledged.
    pub fn broken_without_fsync(mut self) -> Self {
        self.power_settings.push(("fsync", "off"));
        self
    }
}

/// What a harness that runs its own servers promises when the machine loses power: a server with
/// `fsync` and `synchronous_commit` on keeps every acknowledged commit through a power cut that
/// takes back every unsynced byte and name (the power-cut check's measure, RELIABILITY.md).
const POWER_PROMISE: Persistence = Persistence::Names;

/// The harness's runtime: two worker threads.
fn runtime() -> Result<Runtime, StorageError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| StorageError::with_source("a tokio runtime", e))
}

/// The clusters, even if a thread panicked holding them.
fn lock<T>(clusters: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    clusters.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Drops the test schemas older than [`STALE`]; best effort.
async fn drop_stale_schemas<C: reservation_store::Clock>(store: &PostgresStore<C>, now_secs: u64) {
    let Ok(client) = store.client().await else { return };
    let Ok(rows) =
        client.query("SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'reservation\\_test\\_%'", &[]).await
    else {
        return;
    };
    for row in rows {
        let name: String = row.get(0);
        let secs = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
        if secs.is_some_and(|s| s.saturating_add(STALE.as_secs()) < now_secs) {
            let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", quote(&name))).await;
        }
    }
}

impl Drop for PostgresHarness {
    fn drop(&mut self) {
        if self.clusters.is_some() {
            // The clusters go with the schema in them (the field is dropped last).
            self.base.close();
            return;
        }
        let schema = quote(&self.options.schema);
        let base = &self.base;
        self.runtime.block_on(async {
            if let Ok(client) = base.client().await {
                let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
            }
            base.close();
        });
    }
}

impl Harness for PostgresHarness {
    type Store = PostgresStore<ManualClock>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        self.base.with_time(Time::Local(clock))
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Durable; a harness that runs its own servers ([`PostgresHarness::on_cluster`]) promises
    /// too that a power cut under `names` takes back nothing acknowledged: its server
    /// in the power-cut check's directory syncs each commit's WAL before it is acknowledged.
    fn capabilities(&self) -> Capabilities {
        // The store persists the instant of every change per scope (D10 across a restart); the
        // checks share the schema, each in a namespace of its own, so none moves another's clock.
        let durable = Capabilities::default().with_durable(true);
        if self.clusters.is_some() { durable.with_power_cuts(POWER_PROMISE) } else { durable }
    }

    /// For a harness that runs its own servers: a store on a server of its own whose data
    /// directory is in `dir`, made there at the first call; at every later one the server that
    /// ran there (on a disk that lost power) is killed and started again on what the cut left,
    /// and its crash recovery runs, as on a machine restarting.
    fn store_in(&self, dir: &Path, clock: ManualClock) -> Option<Self::Store> {
        self.clusters.as_ref()?;
        let mut powered = self.powered.lock().unwrap_or_else(PoisonError::into_inner);
        let server = match powered.take() {
            Some(mut server) if server.dir == dir => server.restart(&self.runtime).map(|()| server),
            other => {
                drop(other);
                Powered::start_in(&self.runtime, dir, &self.power_settings)
            }
        };
        let server = server.unwrap_or_else(|e| {
            panic!("starting PostgreSQL in {}: {}", dir.display(), reservation_store::error_chain(&e))
        });
        let store =
            self.runtime.block_on(PostgresStore::connect(&server.url(), Time::Local(clock), self.options.clone()));
        *powered = Some(server);
        Some(store.unwrap_or_else(|e| {
            panic!("connecting to PostgreSQL in {}: {}", dir.display(), reservation_store::error_chain(&e))
        }))
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        // The first store shares the harness's pool: dropping the handle, not closing the pool,
        // is what a restarting process does to it; the new store has a pool of its own.
        drop(store);
        let reopened =
            self.runtime.block_on(PostgresStore::connect(&self.url, Time::Local(clock), self.options.clone()));
        Some(reopened.unwrap_or_else(|e| {
            panic!("reopening the PostgreSQL store failed: {}", reservation_store::error_chain(&e))
        }))
    }

    fn faults(&self) -> Vec<Fault> {
        let mut faults = vec![Fault::CutConnections];
        if let Some(orchestrated) = &self.orchestrated {
            let orchestrated = lock(orchestrated);
            if !orchestrated.failed_over {
                faults.extend(orchestrated.topology.offers());
            }
        }
        if let Some(clusters) = &self.clusters {
            faults.extend([Fault::Crash, Fault::Pause]);
            if lock(clusters).can_fail_over() {
                faults.push(Fault::Failover);
            }
        }
        faults
    }

    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        if fault == Fault::CutConnections {
            return self.cut_connections();
        }
        if let Some(orchestrated) = &self.orchestrated {
            let mut orchestrated = lock(orchestrated);
            if orchestrated.failed_over || !orchestrated.topology.offers().contains(&fault) {
                return Err(not_offered(fault));
            }
            orchestrated.failed_over = true;
            return orchestrated.topology.cause(fault, &self.runtime);
        }
        let Some(clusters) = &self.clusters else { return Err(not_offered(fault)) };
        let mut clusters = lock(clusters);
        match fault {
            Fault::Crash => clusters.crash(&self.runtime),
            Fault::Pause => clusters.pause(),
            Fault::Failover if clusters.can_fail_over() => clusters.fail_over(&self.runtime),
            _ => Err(not_offered(fault)),
        }
    }
}

/// A topology whose orchestrator, not the harness, fails its primary over (pg_auto_failover,
/// Patroni).
pub(crate) trait Orchestrated: Send {
    /// The ports of the nodes the store may write to, on 127.0.0.1.
    fn ports(&self) -> Vec<u16>;
    /// The faults it offers, once, one in place of another (each uses the standby up):
    /// [`Fault::Failover`] by the orchestrator (the node that takes writes killed and kept down,
    /// another promoted), and those of its orchestrator's own.
    fn offers(&self) -> Vec<Fault>;
    /// Causes `fault`, one that it offers; it ends once the promoted node takes writes and the
    /// old one none.
    fn cause(&mut self, fault: Fault, runtime: &Runtime) -> Result<(), StorageError>;
}

/// An orchestrated topology, and whether its one failover happened.
struct Orchestration {
    topology: Box<dyn Orchestrated>,
    failed_over: bool,
}

/// The connection string of a store on the nodes on `ports`: every one named, the one that takes
/// writes chosen (`target_session_attrs=read-write`).
fn every_node(ports: &[u16]) -> String {
    let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
    format!(
        "host={} port={} user=postgres dbname=postgres target_session_attrs=read-write",
        vec!["127.0.0.1"; ports.len()].join(","),
        ports.join(",")
    )
}

/// A topology of the tests' own, of `replication`, that `start` makes: once more, on fresh ports
/// and in a fresh directory, when the first try does not come up (a port another process took
/// between its choice and its server's bind, a machine too loaded for a program's first minute),
/// the first try's error said on standard error and kept in the second's. A topology with no
/// standby, which `start` refuses, is not tried again.
fn started_once_more<T>(
    replication: Replication,
    start: impl Fn() -> Result<T, StorageError>,
) -> Result<T, StorageError> {
    start().or_else(|first| {
        if replication == Replication::None {
            return Err(first);
        }
        eprintln!("a topology did not come up; once more: {first}");
        start().map_err(|again| StorageError::new(format!("{again} (the try before: {first})")))
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    /// A topology that does not come up is started once more, and only once; one with no standby
    /// is not tried again; both tries' errors are said.
    #[test]
    fn a_topology_that_does_not_come_up_is_started_once_more() {
        let tries = Cell::new(0);
        let second_comes_up = || {
            tries.set(tries.get() + 1);
            if tries.get() == 1 { Err(StorageError::new("port taken")) } else { Ok(tries.get()) }
        };
        assert_eq!(started_once_more(Replication::Synchronous, second_comes_up).ok(), Some(2));
        tries.set(0);
        let never = || {
            tries.set(tries.get() + 1);
            Err::<(), _>(StorageError::new(format!("try {}", tries.get())))
        };
        let e = started_once_more(Replication::Asynchronous, never).expect_err("never up").to_string();
        assert!(e.contains("try 2") && e.contains("(the try before: try 1)"), "{e}");
        assert_eq!(tries.get(), 2);
        tries.set(0);
        let e = started_once_more(Replication::None, never).expect_err("refused").to_string();
        assert_eq!((e.as_str(), tries.get()), ("try 1", 1));
    }
}
