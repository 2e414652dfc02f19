//! A small pool of Redis connections, each used by one operation at a time (a `WATCH` belongs to
//! its connection). Bounded: at most `max` connections, and every wait ends after `timeout`.
//!
//! Given several nodes, the pool makes each new connection to the first of them, in order, whose
//! `ROLE` is `master`: never to a replica. Given sentinels (a `redis+sentinel://` URL), it asks
//! them, in order, which node is the master, and connects to the first node named whose `ROLE`
//! is `master`. A connection that failed is dropped by its user, and the idle ones with it, so
//! after a failover the next operation makes a new connection, which finds the promoted node.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Value};
use reservation_store::StorageError;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::sentinel::SentinelUrl;

/// Where new connections go.
enum Route {
    /// The nodes, in the order they are tried: one is used as it is; of several, the first whose
    /// `ROLE` is `master`.
    Nodes(Vec<Client>),
    /// The master the sentinels name.
    Sentinel(SentinelUrl),
}

pub(crate) struct Pool {
    route: Route,
    config: AsyncConnectionConfig,
    idle: Mutex<Vec<MultiplexedConnection>>,
    permits: Semaphore,
    max: usize,
    timeout: Duration,
}

/// A connection lent by the pool. Dropped, it is closed, and so are the idle ones (they lead to
/// the same server, which may be gone); [`Conn::keep`] gives it back.
pub(crate) struct Conn<'p> {
    conn: Option<MultiplexedConnection>,
    pool: &'p Pool,
    _permit: SemaphorePermit<'p>,
}

impl Pool {
    /// A pool of connections to the node at `url`, or, when `others` are given, to whichever of
    /// `url` and `others` is the primary.
    /// With a `redis+sentinel://` URL, to the master its sentinels name (no `others` then).
    pub(crate) fn new(url: &str, others: &[String], max: usize, timeout: Duration) -> Result<Pool, StorageError> {
        let route = match SentinelUrl::parse(url)? {
            Some(_) if !others.is_empty() => {
                return Err(StorageError::new(
                    "Redis: a Sentinel URL finds the master itself: give no other nodes (`RedisOptions::nodes`)",
                ));
            }
            Some(sentinels) => Route::Sentinel(sentinels),
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

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<MultiplexedConnection>> {
        // A vector of connections stays whole across a panic.
        self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Connections held now: lent and idle.
    pub(crate) fn size(&self) -> usize {
        self.max - self.permits.available_permits() + self.idle().len()
    }

    pub(crate) async fn get(&self) -> Result<Conn<'_>, StorageError> {
        let permit = tokio::time::timeout(self.timeout, self.permits.acquire())
            .await
            .map_err(|_| StorageError::new(format!("Redis: no connection free within {:?}", self.timeout)))?
            .map_err(|_| StorageError::new("Redis: the pool is closed"))?;
        let idle = self.idle().pop();
        let conn = match idle {
            Some(conn) => conn,
            None => self.connect().await?,
        };
        Ok(Conn { conn: Some(conn), pool: self, _permit: permit })
    }

    /// A new connection: to the one node, or to the first node whose `ROLE` is `master`, or to
    /// the master a sentinel names. Each node's and sentinel's connect and answer is bounded by
    /// the timeout.
    async fn connect(&self) -> Result<MultiplexedConnection, StorageError> {
        let nodes = match &self.route {
            Route::Nodes(nodes) => nodes,
            Route::Sentinel(sentinels) => return self.through(sentinels).await,
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
            self.pool.idle().push(conn);
        }
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        if self.conn.take().is_some() {
            self.pool.idle().clear();
        }
    }
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
