//! Redis Sentinel: the URL that names a master by the sentinels that watch it, and the question
//! each new connection asks them.
//!
//! `redis+sentinel://[user:password@]host[:port][,host[:port]…]/master[/db]`: the sentinels'
//! addresses (port 26379 when none is given), the name of the master they watch (`sentinel
//! monitor <name> …` in their configuration), and the database number (0 by default). The user
//! and password, if any, are the data nodes' (`AUTH` on the master found), not the sentinels':
//! the sentinels are asked without them. Nothing after a `?` or `#` is accepted: a setting the
//! store would not apply is refused rather than ignored.
//!
//! The `redis` crate has a sentinel client (feature `sentinel`); the store asks the sentinels
//! itself, in a few lines, so that every connection to a sentinel is bounded by the store's own
//! timeout as every other wait is, and so that the pool, which already finds the node whose
//! `ROLE` is `master`, holds no lock across the question.

use redis::{AsyncConnectionConfig, Client, IntoConnectionInfo, RedisConnectionInfo};
use reservation_store::StorageError;

/// The URL's scheme.
pub(crate) const SCHEME: &str = "redis+sentinel://";

/// The port a sentinel listens on when the URL gives none.
const SENTINEL_PORT: u16 = 26379;

/// A parsed `redis+sentinel://` URL.
pub(crate) struct SentinelUrl {
    /// The sentinels, in the order they are asked.
    pub(crate) sentinels: Vec<Client>,
    /// The name of the master they watch.
    pub(crate) master: String,
    /// The data nodes' database, user and password.
    pub(crate) node: RedisConnectionInfo,
}

/// A URL refused, saying `why` (the URL itself is not quoted: it may hold a password).
fn refused(why: &str) -> StorageError {
    StorageError::new(format!(
        "Redis: the Sentinel URL: {why} (expected {SCHEME}[user:password@]host[:port][,host[:port]…]/master[/db])"
    ))
}

impl SentinelUrl {
    /// `url` parsed, if its scheme is `redis+sentinel`; `Ok(None)` for any other scheme.
    pub(crate) fn parse(url: &str) -> Result<Option<SentinelUrl>, StorageError> {
        let Some(rest) = url.strip_prefix(SCHEME) else { return Ok(None) };
        if rest.contains(['?', '#']) {
            return Err(refused("it has a query or a fragment, which the store would not apply"));
        }
        let (authority, path) = rest.split_once('/').ok_or_else(|| refused("it names no master"))?;
        let (userinfo, hosts) = user_and_hosts(authority);
        let mut sentinels = Vec::new();
        for host in hosts.split(',') {
            let (name, port) =
                host_and_port(host, SENTINEL_PORT).ok_or_else(|| refused("a sentinel's address is not host[:port]"))?;
            let client =
                Client::open((name, port)).map_err(|e| StorageError::with_source("Redis: a sentinel's address", e))?;
            sentinels.push(client);
        }
        let (master, db) = match path.split_once('/') {
            Some((master, db)) => (master, Some(db)),
            None => (path, None),
        };
        if master.is_empty() || master.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(refused("the master's name is empty or holds a space"));
        }
        let db = match db {
            None | Some("") => 0,
            Some(db) => db
                .parse::<i64>()
                .ok()
                .filter(|db| *db >= 0)
                .ok_or_else(|| refused("the database is not a number of 0 or more"))?,
        };
        let node = node_settings(userinfo, db).ok_or_else(|| refused("its user or password is not a URL's"))?;
        Ok(Some(SentinelUrl { sentinels, master: master.to_owned(), node }))
    }

    /// The master that `sentinel` names (`SENTINEL get-master-addr-by-name`), as a client with
    /// the URL's database, user and password; its connect and answer bounded by `config`. Else
    /// why not.
    pub(crate) async fn ask(&self, sentinel: &Client, config: &AsyncConnectionConfig) -> Result<Client, String> {
        let mut conn =
            sentinel.get_multiplexed_async_connection_with_config(config).await.map_err(|e| e.to_string())?;
        let named: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.master)
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        let (host, port) = named.ok_or_else(|| format!("it watches no master named `{}`", self.master))?;
        (host.as_str(), port)
            .into_connection_info()
            .map(|info| info.set_redis_settings(self.node.clone()))
            .and_then(Client::open)
            .map_err(|e| format!("it named {host}:{port}: {e}"))
    }
}

/// The user and password (before the last `@`, if any) and the hosts of a URL's authority.
pub(crate) fn user_and_hosts(authority: &str) -> (Option<&str>, &str) {
    match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => (Some(userinfo), hosts),
        None => (None, authority),
    }
}

/// The data nodes' settings: database `db`, and the user and password of `userinfo` decoded as a
/// `redis://` URL decodes them; `None` if they are not a URL's.
pub(crate) fn node_settings(userinfo: Option<&str>, db: i64) -> Option<RedisConnectionInfo> {
    let userinfo = userinfo.map_or_else(String::new, |u| format!("{u}@"));
    let info = format!("redis://{userinfo}127.0.0.1/{db}").into_connection_info().ok()?;
    Some(info.redis_settings().clone())
}

/// `host[:port]`, or `[v6]:port`, with the port `default` when none is given.
pub(crate) fn host_and_port(host: &str, default: u16) -> Option<(&str, u16)> {
    let (name, port) = match host.strip_prefix('[') {
        Some(v6) => {
            let (name, after) = v6.split_once(']')?;
            match after {
                "" => (name, None),
                _ => (name, Some(after.strip_prefix(':')?)),
            }
        }
        None => match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        },
    };
    let port = match port {
        None => default,
        Some(port) => port.parse::<u16>().ok().filter(|p| *p != 0)?,
    };
    // No `@` can be here: the user and password were split off at the last one.
    let valid = !name.is_empty() && !name.chars().any(|c| c.is_whitespace() || c.is_control());
    valid.then_some((name, port))
}
