//! A small pool of Redis connections, each used by one operation at a time (a `WATCH` belongs to
//! its connection). Bounded: at most `max` connections, and every wait ends after `timeout`.
//!
//! Given several nodes, the pool makes each new connection to the first of them, in order, whose
//! `ROLE` is `master`: never to a replica. Given sentinels (a `redis+sentinel://` URL), it asks
//! them, in order, which node is the master, and connects to the first node named whose `ROLE`
//! is `master`. A connection that failed is dropped by its user, and the idle ones with it, so
//! after a failover the next operation makes a new connection, which finds the promoted node.
//!
//! Given a Redis Cluster (a `redis+cluster://` URL), each connection goes to the primary that
//! serves the slot it is asked for, by the map of slots the nodes answer (`CLUSTER SLOTS`); the
//! idle connections are kept by node. A connection that failed, or that met a node that no longer
//! serves the slot (`MOVED`), is dropped with every idle one, and the map with them: the next
//! connection asks the nodes again, so that after a failover it finds the promoted replica.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Value};
use reservation_store::StorageError;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::cluster::{ClusterUrl, SlotMap};
use crate::sentinel::SentinelUrl;

/// Where new connections go.
enum Route {
    /// The nodes, in the order they are tried: one is used as it is; of several, the first whose
    /// `ROLE` is `master`.
    Nodes(Vec<Client>),
    /// The master the sentinels name.
    Sentinel(SentinelUrl),
    /// The primary of each slot, by the map the nodes answer, asked again after any failure.
    Cluster(ClusterUrl, Mutex<Option<Arc<SlotMap>>>),
}

/// The node a connection leads to: on a cluster, its host and port; elsewhere, the one primary.
type Node = Option<(String, u16)>;

pub(crate) struct Pool {
    route: Route,
    config: AsyncConnectionConfig,
    idle: Mutex<Vec<(Node, MultiplexedConnection)>>,
    permits: Semaphore,
    max: usize,
    timeout: Duration,
}

/// A connection lent by the pool. Dropped, it is closed, and so are the idle ones (they lead to
/// the same server, which may be gone); [`Conn::keep`] gives it back.
pub(crate) struct Conn<'p> {
    conn: Option<MultiplexedConnection>,
    node: Node,
    pool: &'p Pool,
    _permit: SemaphorePermit<'p>,
}

impl Pool {
    /// A pool of connections to the node at `url`, or, when `others` are given, to whichever of
    /// `url` and `others` is the primary.
    /// With a `redis+sentinel://` URL, to the master its sentinels name; with a
    /// `redis+cluster://` URL, to the primary of each slot (no `others` then).
    pub(crate) fn new(url: &str, others: &[String], max: usize, timeout: Duration) -> Result<Pool, StorageError> {
        let found = match (SentinelUrl::parse(url)?, ClusterUrl::parse(url)?) {
            (Some(sentinels), _) => Some(Route::Sentinel(sentinels)),
            (None, Some(cluster)) => Some(Route::Cluster(cluster, Mutex::new(None))),
            (None, None) => None,
        };
        let route = match found {
            Some(_) if !others.is_empty() => {
                return Err(StorageError::new(
                    "Redis: a Sentinel or Cluster URL finds the primary itself: give no other nodes (`RedisOptions::nodes`)",
                ));
            }
            Some(route) => route,
            None => Route::Nodes(
                std::iter::once(url)
                    .chain(others.iter().map(String::as_str))
                    .map(|url| Client::open(url).map_err(|e| StorageError::with_source("Redis: the connection URL", e)))
                    .collect::<Result<Vec<_>, _>>()?,
            ),
        };
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(timeout)).set_response_timeout(Some(timeout));
        let max = max.max(1);
        Ok(Pool { route, config, idle: Mutex::new(Vec::new()), permits: Semaphore::new(max), max, timeout })
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(Node, MultiplexedConnection)>> {
        // A vector of connections stays whole across a panic.
        self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the pool routes by slot, to a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.route, Route::Cluster(..))
    }

    /// Connections held now: lent and idle.
    pub(crate) fn size(&self) -> usize {
        self.max - self.permits.available_permits() + self.idle().len()
    }

    /// A connection to the node that serves `slot` on a cluster (any slot elsewhere: there is
    /// one primary).
    pub(crate) async fn get(&self, slot: u16) -> Result<Conn<'_>, StorageError> {
        let permit = tokio::time::timeout(self.timeout, self.permits.acquire())
            .await
            .map_err(|_| StorageError::new(format!("Redis: no connection free within {:?}", self.timeout)))?
            .map_err(|_| StorageError::new("Redis: the pool is closed"))?;
        let node = match &self.route {
            Route::Cluster(url, map) => Some(self.serving(url, map, slot).await?),
            _ => None,
        };
        let idle = {
            let mut idle = self.idle();
            idle.iter().rposition(|(at, _)| *at == node).map(|i| idle.swap_remove(i).1)
        };
        let conn = match (idle, &self.route, &node) {
            (Some(conn), ..) => conn,
            (None, Route::Cluster(url, _), Some((host, port))) => self.node(url, host, *port).await?,
            (None, ..) => self.connect().await?,
        };
        Ok(Conn { conn: Some(conn), node, pool: self, _permit: permit })
    }

    /// The host and port of the primary that serves `slot`, by the map, asked for first if the
    /// pool has none.
    async fn serving(
        &self,
        url: &ClusterUrl,
        map: &Mutex<Option<Arc<SlotMap>>>,
        slot: u16,
    ) -> Result<(String, u16), StorageError> {
        let known = lock(map).clone();
        let map = match known {
            Some(known) => known,
            None => {
                let asked = Arc::new(self.ask_slots(url).await?);
                *lock(map) = Some(asked.clone());
                asked
            }
        };
        map.primary(slot)
            .map(|(host, port)| (host.to_owned(), port))
            .ok_or_else(|| StorageError::new(format!("Redis: no node of the cluster serves slot {slot}")))
    }

    /// The map of slots, from the first node that answers `CLUSTER SLOTS`: each node the URL
    /// names, in order; each connect and answer bounded by the timeout.
    async fn ask_slots(&self, url: &ClusterUrl) -> Result<SlotMap, StorageError> {
        let mut seen = Vec::with_capacity(url.seeds.len());
        for (host, port) in &url.seeds {
            let asked = async {
                let mut conn = self.node(url, host, *port).await.map_err(|e| reservation_store::error_chain(&e))?;
                let answer: Value =
                    redis::cmd("CLUSTER").arg("SLOTS").query_async(&mut conn).await.map_err(|e| e.to_string())?;
                SlotMap::parse(answer, host)
            };
            match asked.await {
                Ok(map) => return Ok(map),
                Err(why) => seen.push(format!("{host}:{port}: {why}")),
            }
        }
        Err(StorageError::new(format!(
            "Redis: no map of the cluster's slots: none of the {} nodes named answered one ({})",
            url.seeds.len(),
            seen.join("; ")
        )))
    }

    /// A new connection to the node at `host`:`port` of a cluster, its connect bounded by the
    /// timeout.
    async fn node(&self, url: &ClusterUrl, host: &str, port: u16) -> Result<MultiplexedConnection, StorageError> {
        let client = url.client(host, port).map_err(StorageError::new)?;
        client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
            .map_err(|e| StorageError::with_source(format!("Redis: no connection to the node {host}:{port}"), e))
    }

    /// Forgets the map of slots, if any: the next connection asks for it again.
    fn forget_map(&self) {
        if let Route::Cluster(_, map) = &self.route {
            *lock(map) = None;
        }
    }

    /// A new connection: to the one node, or to the first node whose `ROLE` is `master`, or to
    /// the master a sentinel names. Each node's and sentinel's connect and answer is bounded by
    /// the timeout.
    async fn connect(&self) -> Result<MultiplexedConnection, StorageError> {
        let nodes = match &self.route {
            Route::Nodes(nodes) => nodes,
            Route::Sentinel(sentinels) => return self.through(sentinels).await,
            Route::Cluster(..) => return Err(StorageError::new("Redis: a cluster's connection is to a slot's node")),
        };
        if let [node] = nodes.as_slice() {
            return node
                .get_multiplexed_async_connection_with_config(&self.config)
                .await
                .map_err(|e| StorageError::with_source("Redis: no connection", e));
        }
        let mut seen = Vec::with_capacity(nodes.len());
        for node in nodes {
            match self.primary(node).await {
                Ok(conn) => return Ok(conn),
                Err(why) => seen.push(format!("{}: {why}", node.get_connection_info().addr())),
            }
        }
        Err(StorageError::new(format!(
            "Redis: no connection: none of the {} nodes is the primary ({})",
            nodes.len(),
            seen.join("; ")
        )))
    }

    /// A connection to the master a sentinel names, asking each in turn until one names a node
    /// whose `ROLE` is `master`.
    async fn through(&self, url: &SentinelUrl) -> Result<MultiplexedConnection, StorageError> {
        let mut seen = Vec::with_capacity(url.sentinels.len());
        for sentinel in &url.sentinels {
            let at = sentinel.get_connection_info().addr().to_string();
            let named = match url.ask(sentinel, &self.config).await {
                Ok(named) => named,
                Err(why) => {
                    seen.push(format!("sentinel {at}: {why}"));
                    continue;
                }
            };
            match self.primary(&named).await {
                Ok(conn) => return Ok(conn),
                Err(why) => seen.push(format!("sentinel {at} named {}: {why}", named.get_connection_info().addr())),
            }
        }
        Err(StorageError::new(format!(
            "Redis: no connection: none of the {} sentinels named a master `{}` that is one ({})",
            url.sentinels.len(),
            url.master,
            seen.join("; ")
        )))
    }

    /// A connection to `node` if its `ROLE` is `master`; else what it is.
    async fn primary(&self, node: &Client) -> Result<MultiplexedConnection, String> {
        let mut conn =
            node.get_multiplexed_async_connection_with_config(&self.config).await.map_err(|e| e.to_string())?;
        let role: Vec<Value> = redis::cmd("ROLE").query_async(&mut conn).await.map_err(|e| e.to_string())?;
        let role: String = role
            .into_iter()
            .next()
            .map(redis::from_redis_value)
            .transpose()
            .map_err(|e| e.to_string())?
            .unwrap_or_default();
        if role == "master" { Ok(conn) } else { Err(format!("its role is `{role}`")) }
    }
}

impl Conn<'_> {
    /// Gives the connection back to the pool: it watches nothing and has no answer pending.
    pub(crate) fn keep(mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.idle().push((self.node.take(), conn));
        }
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        if self.conn.take().is_some() {
            self.pool.idle().clear();
            self.pool.forget_map();
        }
    }
}

/// Locks `mutex`; what it guards stays whole across a panic.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl std::ops::Deref for Conn<'_> {
    type Target = MultiplexedConnection;
    fn deref(&self) -> &MultiplexedConnection {
        self.conn.as_ref().expect("a lent connection is present until kept")
    }
}

impl std::ops::DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut MultiplexedConnection {
        self.conn.as_mut().expect("a lent connection is present until kept")
    }
}
