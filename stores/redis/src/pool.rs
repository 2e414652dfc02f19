//! A small pool of Redis connections, each used by one operation at a time (a `WATCH` belongs to
//! its connection). Bounded: at most `max` connections, and every wait ends after `timeout`.

use std::sync::Mutex;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client};
use reservation_store::StorageError;
use tokio::sync::{Semaphore, SemaphorePermit};

pub(crate) struct Pool {
    client: Client,
    config: AsyncConnectionConfig,
    idle: Mutex<Vec<MultiplexedConnection>>,
    permits: Semaphore,
    max: usize,
    timeout: Duration,
}

/// A connection lent by the pool. Dropped, it is closed; [`Conn::keep`] gives it back.
pub(crate) struct Conn<'p> {
    conn: Option<MultiplexedConnection>,
    pool: &'p Pool,
    _permit: SemaphorePermit<'p>,
}

impl Pool {
    pub(crate) fn new(url: &str, max: usize, timeout: Duration) -> Result<Pool, StorageError> {
        let client = Client::open(url).map_err(|e| StorageError::with_source("Redis: the connection URL", e))?;
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(timeout)).set_response_timeout(Some(timeout));
        let max = max.max(1);
        Ok(Pool { client, config, idle: Mutex::new(Vec::new()), permits: Semaphore::new(max), max, timeout })
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
            None => self
                .client
                .get_multiplexed_async_connection_with_config(&self.config)
                .await
                .map_err(|e| StorageError::with_source("Redis: no connection", e))?,
        };
        Ok(Conn { conn: Some(conn), pool: self, _permit: permit })
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
