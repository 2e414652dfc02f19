//! PostgreSQL clusters of the tests' own (feature `conformance`), never the system's: made with
//! Debian's `pg_createcluster` (postgresql-common) on free loopback ports, with trust
//! authentication on the local socket and on 127.0.0.1 (replication included) and `fsync` on;
//! each server run by `pg_ctlcluster --foreground` as a child of the test process, which reaps
//! it; a standby copied from its primary by `pg_basebackup -R` and streaming from it; each
//! cluster removed by `pg_dropcluster --stop` when dropped. Clusters are named
//! `reservation-test-<process id>-<process start>-<n>-<role>`: the clusters of a test process
//! that has ended are dropped by the next one to start a cluster.
//!
//! Making a cluster needs root (the server itself runs as the `postgres` user) and Linux (the
//! processes are found through `/proc`); signals are sent with the `kill` command.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use reservation_store::StorageError;
use tokio::runtime::Runtime;

use crate::process::{self, signal, wait_until};

/// How a [`PostgresHarness`](crate::PostgresHarness) made by
/// [`PostgresHarness::on_cluster`](crate::PostgresHarness::on_cluster) replicates its primary.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Replication {
    /// One cluster, no standby: no failover to offer.
    None,
    /// A streaming standby that every commit waits for (`synchronous_commit = on`,
    /// `synchronous_standby_names = '*'`): a commit is acknowledged once the standby has it on
    /// disk.
    Synchronous,
    /// A streaming standby that commits do not wait for: a commit is acknowledged once the
    /// primary has it on disk, and reaches the standby a moment later.
    Asynchronous,
}

/// The start of every cluster name this module gives.
const PREFIX: &str = "reservation-test-";

/// Where postgresql-common keeps each cluster's configuration: `<root>/<version>/<name>`.
const CONFIG_ROOT: &str = "/etc/postgresql";

/// Where the server binaries of each version are: `<root>/<version>/bin`.
pub(crate) const BINARIES: &str = "/usr/lib/postgresql";

/// Longest wait for one of postgresql-common's commands, or for `pg_basebackup`.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// Longest wait for a server to start answering, or to be promoted.
const START_LIMIT: Duration = Duration::from_secs(30);

/// Longest wait for the processes of a killed server to end, and for one stopped by a signal to
/// show it.
const SIGNAL_LIMIT: Duration = Duration::from_secs(10);

/// Longest wait for a standby to stream from its primary.
const STREAM_LIMIT: Duration = Duration::from_secs(30);

/// Longest wait for one question to a server: connecting, asking, answering.
const ASK_LIMIT: Duration = Duration::from_secs(2);

/// How long [`Clusters::pause`] keeps the primary stopped.
pub(crate) const PAUSE: Duration = Duration::from_millis(300);

/// How long the standby falls behind before [`Clusters::fail_over`] kills the primary.
pub(crate) const LAG: Duration = Duration::from_millis(500);

/// One cluster: its configuration, its data and, while it runs, its server.
pub(crate) struct Cluster {
    version: String,
    name: String,
    port: u16,
    data: PathBuf,
    /// The postmaster: `pg_ctlcluster --foreground` becomes it.
    server: Option<Child>,
    /// The last lines `pg_ctlcluster` wrote on its standard error, since its last start.
    said: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
}

/// How many lines of `pg_ctlcluster`'s standard error a cluster keeps.
const SAID_LINES: usize = 5;

impl Cluster {
    /// A new cluster, not started, with `settings` in its `postgresql.conf`, its data in
    /// postgresql-common's place.
    fn create(version: &str, n: u32, role: &str, settings: &[(&str, &str)]) -> Result<Cluster, StorageError> {
        Cluster::create_at(version, n, role, settings, None)
    }

    /// As [`Cluster::create`], its data directory `data` when given.
    fn create_at(
        version: &str,
        n: u32,
        role: &str,
        settings: &[(&str, &str)],
        data: Option<PathBuf>,
    ) -> Result<Cluster, StorageError> {
        let me = std::process::id();
        let started = process::stat(me).map_or(0, |s| s.started);
        let name = format!("{PREFIX}{me}-{started}-{n}-{role}");
        let port = free_port()?;
        let data = data.unwrap_or_else(|| PathBuf::from(format!("/var/lib/postgresql/{version}/{name}")));
        let cluster = Cluster { version: version.to_owned(), name, port, data, server: None, said: Default::default() };
        let port = port.to_string();
        let settings: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut args = vec![version, cluster.name.as_str(), "-p", &port, "-d"];
        let data = cluster.data.to_string_lossy().into_owned();
        args.push(&data);
        for setting in &settings {
            args.extend(["-o", setting.as_str()]);
        }
        // initdb's own writes are not synced: only an operating-system crash could lose them,
        // and the tests crash the server, never the system (the server runs with `fsync` on).
        // A cluster in a power-cut check's directory is synced whole by initdb: a power cut would
        // take back a cluster that was never synced, and the check is about what the server
        // acknowledges, not what initdb made.
        args.extend(["--", "--auth-local=trust", "--auth-host=trust"]);
        if role != POWERED {
            args.push("--no-sync");
        }
        process::run("pg_createcluster", &args, COMMAND_LIMIT)?;
        Ok(cluster)
    }

    /// The cluster's name, as `pg_lsclusters` shows it.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The cluster's port on 127.0.0.1.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Starts the server and waits until it answers.
    fn start(&mut self, runtime: &Runtime) -> Result<(), StorageError> {
        let mut child = Command::new("pg_ctlcluster")
            .args(["--foreground", "--stdlog", &self.version, &self.name, "start"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| StorageError::with_source("running `pg_ctlcluster --foreground`", e))?;
        // What `pg_ctlcluster` says before the server logs anything (a data directory that is
        // gone), its last lines kept for an error, read to its end so that it never blocks.
        let said = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        let (read_out, all_read) = std::sync::mpsc::channel::<()>();
        if let Some(stderr) = child.stderr.take() {
            let said = std::sync::Arc::clone(&said);
            std::thread::spawn(move || {
                let _read_out = read_out;
                use std::io::BufRead;
                for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                    let mut said = said.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    if said.len() == SAID_LINES {
                        said.pop_front();
                    }
                    said.push_back(line.chars().take(300).collect::<String>());
                }
            });
        }
        self.said = said;
        self.server = Some(child);
        let mut ended = None;
        // Another server answering on the port is not this one: the answer must come from the
        // cluster's own data directory (its path is made of the cluster's name, nothing to quote).
        let ours = format!("SELECT current_setting('data_directory') = '{}'", self.data.display());
        let answered = wait_until(START_LIMIT, &format!("cluster {} answering", self.name), || {
            ended = self.server.as_mut().and_then(|c| c.try_wait().ok().flatten());
            ended.is_some() || ask(runtime, self.port, &ours).is_ok_and(|yes| yes)
        });
        match (answered, ended) {
            (Ok(()), None) => Ok(()),
            (Ok(()), Some(status)) => {
                self.server = None;
                // What it said, read to its end (the channel closes then), for at most a second.
                let _ = all_read.recv_timeout(Duration::from_secs(1));
                Err(StorageError::new(format!("cluster {}: the server ended ({status}){}", self.name, self.log_tail())))
            }
            (Err(e), _) => Err(StorageError::new(format!("{e}{}", self.log_tail()))),
        }
    }

    /// The last lines of the server's log, and of what `pg_ctlcluster` said, for an error
    /// message.
    fn log_tail(&self) -> String {
        let log = format!("/var/log/postgresql/postgresql-{}-{}.log", self.version, self.name);
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines.get(lines.len().saturating_sub(5)..).unwrap_or_default();
        let mut shown = if tail.is_empty() { String::new() } else { format!("; its log ends:\n{}", tail.join("\n")) };
        let said = self.said.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !said.is_empty() {
            let said: Vec<&str> = said.iter().map(String::as_str).collect();
            shown.push_str(&format!("; pg_ctlcluster said:\n{}", said.join("\n")));
        }
        shown
    }

    /// Every live process of the cluster: the postmaster, whose command line names the cluster's
    /// configuration, and each process it started, whose title names the cluster (one just
    /// started shows its postmaster's command line until it sets its title).
    fn processes(&self) -> Vec<u32> {
        let config = format!("/{}/{}/postgresql.conf", self.version, self.name);
        let title = format!("{}/{}: ", self.version, self.name);
        process::pids_where(|command| command.contains(&config) || command.contains(&title))
    }

    /// The cluster's WAL senders.
    fn senders(&self) -> Vec<u32> {
        let title = format!("{}/{}: walsender ", self.version, self.name);
        process::pids_where(|command| command.contains(&title))
    }

    /// Stops (SIGSTOP) every process `pick` lists, listing them again until each one is stopped,
    /// so that a process started meanwhile is stopped too. An error if there is none.
    fn stop_every(&self, what: &str, pick: impl Fn() -> Vec<u32>) -> Result<(), StorageError> {
        process::stop_every(&format!("cluster {}: {what}", self.name), SIGNAL_LIMIT, pick)
    }

    /// Kills every process of the cluster (SIGKILL) at once, as a crash ends them, and waits
    /// until they have all ended, killing any the postmaster started meanwhile. The server is
    /// down afterwards.
    fn crash(&mut self) -> Result<(), StorageError> {
        wait_until(SIGNAL_LIMIT, &format!("every process of cluster {} ending", self.name), || {
            let left = self.processes();
            let _ = signal("KILL", &left);
            left.is_empty()
        })?;
        self.reap();
        Ok(())
    }

    /// Reaps the postmaster, this process's child, so that its process id is free again: killed
    /// first if it still runs, so the wait ends.
    fn reap(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Stops every process of the cluster (SIGSTOP) for `pause`, then lets them go on (SIGCONT).
    fn pause(&self, pause: Duration) -> Result<(), StorageError> {
        let stopped = self.stop_every("process", || self.processes());
        if stopped.is_ok() {
            std::thread::sleep(pause);
        }
        let resumed = signal("CONT", &self.processes());
        stopped.and(resumed)
    }

    /// Stops (SIGSTOP) the primary's WAL senders, so that its standby falls behind.
    fn stop_senders(&self) -> Result<(), StorageError> {
        self.stop_every("WAL sender", || self.senders())
    }

    /// Promotes the standby and waits until it takes writes.
    fn promote(&self, runtime: &Runtime) -> Result<(), StorageError> {
        process::run("pg_ctlcluster", &[&self.version, &self.name, "promote"], COMMAND_LIMIT)?;
        wait_until(START_LIMIT, &format!("cluster {} taking writes", self.name), || {
            ask(runtime, self.port, "SELECT NOT pg_is_in_recovery()").is_ok_and(|yes| yes)
        })
    }

    /// Makes this (new, stopped) cluster a copy of `primary` that streams from it, and starts it.
    fn follow(&mut self, primary: &Cluster, runtime: &Runtime) -> Result<(), StorageError> {
        // pg_basebackup writes into an empty directory; the cluster's owner owns this one.
        let entries = std::fs::read_dir(&self.data)
            .map_err(|e| StorageError::with_source(format!("reading {}", self.data.display()), e))?;
        for entry in entries.flatten() {
            let path = entry.path();
            let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            removed.map_err(|e| StorageError::with_source(format!("emptying {}", self.data.display()), e))?;
        }
        let basebackup = format!("{BINARIES}/{}/bin/pg_basebackup", self.version);
        let (port, data) = (primary.port.to_string(), self.data.to_string_lossy().into_owned());
        let args = [
            "-u",
            "postgres",
            "--",
            &basebackup,
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-U",
            "postgres",
            "-D",
            &data,
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
        ];
        process::run("runuser", &args, COMMAND_LIMIT)?;
        self.start(runtime)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let config = PathBuf::from(CONFIG_ROOT).join(&self.version).join(&self.name);
        if config.exists() {
            // A paused server would not stop: let every process go on first.
            let _ = signal("CONT", &self.processes());
            let args = ["--stop", self.version.as_str(), self.name.as_str()];
            if process::run("pg_dropcluster", &args, COMMAND_LIMIT).is_err() {
                let _ = signal("KILL", &self.processes());
                let _ = process::run("pg_dropcluster", &args[1..], COMMAND_LIMIT);
            }
        }
        self.reap();
    }
}

/// A port on 127.0.0.1 that nothing listens on now, and no cluster of this process had.
pub(crate) fn free_port() -> Result<u16, StorageError> {
    reservation_conformance::services::loopback_port()
        .map_err(|e| StorageError::with_source("finding a free port on 127.0.0.1", e))
}

/// The newest PostgreSQL server installed the Debian way (`/usr/lib/postgresql/<version>/bin`).
pub(crate) fn version() -> Result<String, StorageError> {
    let entries = std::fs::read_dir(BINARIES)
        .map_err(|e| StorageError::with_source(format!("no PostgreSQL in {BINARIES}"), e))?;
    entries
        .flatten()
        .filter(|e| e.path().join("bin").join("postgres").exists())
        .filter_map(|e| e.file_name().to_str()?.parse::<f64>().ok())
        .max_by(f64::total_cmp)
        .map(|v| v.to_string())
        .ok_or_else(|| StorageError::new(format!("no PostgreSQL server in {BINARIES}")))
}

/// Drops the clusters of `version` that test processes now ended left behind; best effort.
fn drop_stale(version: &str) {
    let Ok(entries) = std::fs::read_dir(PathBuf::from(CONFIG_ROOT).join(version)) else { return };
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        let Some(owner) = name.strip_prefix(PREFIX) else { continue };
        let mut parts = owner.split('-').map(|p| p.parse::<u64>().ok());
        let (Some(Some(pid)), Some(Some(started))) = (parts.next(), parts.next()) else { continue };
        let running = u32::try_from(pid)
            .ok()
            .and_then(process::stat)
            .is_some_and(|s| s.started == started && !matches!(s.state, 'Z' | 'X'));
        if !running {
            // Its drop stops and removes it.
            drop(Cluster {
                version: version.to_owned(),
                name,
                port: 0,
                data: PathBuf::new(),
                server: None,
                said: Default::default(),
            });
        }
    }
}

/// Asks the server on `port` a question whose answer is one boolean, within [`ASK_LIMIT`].
pub(crate) fn ask(runtime: &Runtime, port: u16, sql: &str) -> Result<bool, StorageError> {
    let rows = query(runtime, port, "postgres", sql)?;
    let first = rows.first().ok_or_else(|| StorageError::new(format!("asking port {port} `{sql}`: no row")))?;
    first.try_get::<_, bool>(0).map_err(|e| StorageError::with_source(format!("asking port {port} `{sql}`"), e))
}

/// The rows `sql` gives on the server on `port`, in database `db`, as the `postgres` user, every
/// wait bounded by [`ASK_LIMIT`].
pub(crate) fn query(
    runtime: &Runtime,
    port: u16,
    db: &str,
    sql: &str,
) -> Result<Vec<tokio_postgres::Row>, StorageError> {
    let config = format!(
        "host=127.0.0.1 port={port} user=postgres dbname={db} application_name=reservation-test-admin connect_timeout={}",
        ASK_LIMIT.as_secs()
    );
    runtime.block_on(async {
        let answer = async {
            let (client, connection) = tokio_postgres::connect(&config, tokio_postgres::NoTls).await?;
            tokio::spawn(connection);
            client.query(sql, &[]).await
        };
        match tokio::time::timeout(ASK_LIMIT, answer).await {
            Ok(answer) => answer.map_err(|e| StorageError::with_source(format!("asking port {port} `{sql}`"), e)),
            Err(_) => Err(StorageError::new(format!("asking port {port} `{sql}`: no answer within {ASK_LIMIT:?}"))),
        }
    })
}

/// The settings of every cluster that must keep what it acknowledged: each commit's WAL synced
/// before it is acknowledged.
const DURABLE: [(&str, &str); 3] = [("fsync", "on"), ("synchronous_commit", "on"), ("shared_buffers", "32MB")];

/// The role in the name of a cluster in a power-cut check's directory.
const POWERED: &str = "powered";

/// A cluster whose data directory is in a directory the power-cut check mounts a disk on: made
/// there at the first start, started again on what each cut left.
pub(crate) struct Powered {
    cluster: Cluster,
    /// The directory the check gave.
    pub(crate) dir: PathBuf,
}

impl Powered {
    /// A new cluster with its data in `dir/data`, with [`DURABLE`]'s settings and then
    /// `settings` (a later one of a name wins), started.
    pub(crate) fn start_in(runtime: &Runtime, dir: &Path, settings: &[(&str, &str)]) -> Result<Powered, StorageError> {
        static N: AtomicU32 = AtomicU32::new(0);
        let version = version()?;
        drop_stale(&version);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let all: Vec<(&str, &str)> = DURABLE.iter().chain(settings).copied().collect();
        let mut cluster = Cluster::create_at(&version, n, POWERED, &all, Some(dir.join("data")))?;
        // initdb synced the data directory and everything in it, not the name of the directory
        // in its parent: made durable here, as it would be on a machine set up before it ran.
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| StorageError::with_source(format!("syncing {}", dir.display()), e))?;
        cluster.start(runtime)?;
        Ok(Powered { cluster, dir: dir.to_path_buf() })
    }

    /// Kills whatever is left of the server (it ran on a disk that lost power) and starts it
    /// again on the data the cut left: the server's own crash recovery runs.
    pub(crate) fn restart(&mut self, runtime: &Runtime) -> Result<(), StorageError> {
        self.cluster.crash()?;
        self.cluster.start(runtime)
    }

    /// The connection string of the server.
    pub(crate) fn url(&self) -> String {
        format!("host=127.0.0.1 port={} user=postgres dbname=postgres", self.cluster.port())
    }
}

/// A primary and, replicated, its standby, each a cluster of its own; clusters taken out of
/// service by a failover stay, stopped, until these are dropped.
pub(crate) struct Clusters {
    replication: Replication,
    // Dropped in this order: the standby first, so that it does not try the stopped primary.
    standby: Option<Cluster>,
    primary: Cluster,
    retired: Vec<Cluster>,
    url: String,
}

impl Clusters {
    /// A primary, started, and with `replication` a standby streaming from it.
    pub(crate) fn start(runtime: &Runtime, replication: Replication) -> Result<Clusters, StorageError> {
        static N: AtomicU32 = AtomicU32::new(0);
        let version = version()?;
        drop_stale(&version);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let mut settings = DURABLE.to_vec();
        if replication == Replication::Synchronous {
            settings.push(("synchronous_standby_names", "*"));
        }
        let mut primary = Cluster::create(&version, n, "primary", &settings)?;
        primary.start(runtime)?;
        let standby = match replication {
            Replication::None => None,
            Replication::Synchronous | Replication::Asynchronous => {
                // The standby must not wait for a standby of its own once promoted.
                let settings = [("fsync", "on"), ("shared_buffers", "32MB"), ("wal_retrieve_retry_interval", "200ms")];
                let mut standby = Cluster::create(&version, n, "standby", &settings)?;
                standby.follow(&primary, runtime)?;
                Some(standby)
            }
        };
        let url = match &standby {
            None => format!("host=127.0.0.1 port={} user=postgres dbname=postgres", primary.port),
            Some(standby) => format!(
                "host=127.0.0.1,127.0.0.1 port={},{} user=postgres dbname=postgres target_session_attrs=read-write",
                primary.port, standby.port
            ),
        };
        let clusters = Clusters { replication, standby, primary, retired: Vec::new(), url };
        clusters.wait_streaming(runtime)?;
        Ok(clusters)
    }

    /// The connection string that reaches whichever cluster is the primary.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The clusters' names: the primary's, the standby's, then those a failover retired.
    pub(crate) fn names(&self) -> Vec<String> {
        let all = std::iter::once(&self.primary).chain(&self.standby).chain(&self.retired);
        all.map(|c| c.name().to_owned()).collect()
    }

    /// The port of the primary now.
    pub(crate) fn primary_port(&self) -> u16 {
        self.primary.port()
    }

    /// Whether a standby is left to fail over to.
    pub(crate) fn can_fail_over(&self) -> bool {
        self.standby.is_some()
    }

    /// Waits until the standby, if any, streams from the primary (and, synchronous, is the one
    /// commits wait for).
    fn wait_streaming(&self, runtime: &Runtime) -> Result<(), StorageError> {
        let sql = match (&self.standby, self.replication) {
            (None, _) | (_, Replication::None) => return Ok(()),
            (Some(_), Replication::Synchronous) => {
                "SELECT count(*) > 0 FROM pg_stat_replication WHERE state = 'streaming' AND sync_state = 'sync'"
            }
            (Some(_), Replication::Asynchronous) => {
                "SELECT count(*) > 0 FROM pg_stat_replication WHERE state = 'streaming'"
            }
        };
        wait_until(STREAM_LIMIT, "the standby streaming", || ask(runtime, self.primary.port, sql).is_ok_and(|yes| yes))
    }

    /// Kills the primary (every process of it, SIGKILL), starts it again on the same data, and
    /// waits until it answers and its standby streams from it again.
    pub(crate) fn crash(&mut self, runtime: &Runtime) -> Result<(), StorageError> {
        self.primary.crash()?;
        self.primary.start(runtime)?;
        self.wait_streaming(runtime)
    }

    /// Stops every process of the primary for [`PAUSE`], then lets them go on.
    pub(crate) fn pause(&self) -> Result<(), StorageError> {
        self.primary.pause(PAUSE)
    }

    /// The standby falls behind (the primary's WAL senders stopped) for [`LAG`] while the
    /// primary goes on; the primary is killed and stays down; the standby is promoted and takes
    /// writes. With asynchronous replication, the commits the primary acknowledged meanwhile are
    /// lost; with synchronous, they wait for the standby, and fail when the primary dies.
    pub(crate) fn fail_over(&mut self, runtime: &Runtime) -> Result<(), StorageError> {
        let Some(standby) = self.standby.take() else {
            return Err(StorageError::new("no standby left to fail over to"));
        };
        let lagging = self.primary.stop_senders();
        if lagging.is_ok() {
            std::thread::sleep(LAG);
        }
        let crashed = self.primary.crash();
        let old = std::mem::replace(&mut self.primary, standby);
        self.retired.push(old);
        lagging?;
        crashed?;
        self.primary.promote(runtime)
    }
}
