//! Redis Cluster: the URL that names a cluster by some of its nodes, the hash slot of a Redis
//! key, and the map of slots to the primaries that serve them.
//!
//! `redis+cluster://[user:password@]host[:port][,host[:port]…][/]`: some of the cluster's nodes
//! (port 6379 when none is given), asked in turn for the map of slots (`CLUSTER SLOTS`); the user
//! and password are every node's. A cluster has one database, 0: a path other than `/` or `/0`
//! is refused, and so is anything after a `?` or `#` (a setting the store would not apply).
//!
//! The `redis` crate's cluster client (feature `cluster-async`) routes each command by itself
//! and has no `WATCH`: a transaction needs one connection to the node that serves its slot, held
//! from the `WATCH` to the `EXEC`. So the store routes itself, in a few lines: the slot of the
//! row's key, its primary in the map, a pooled connection to that node. Every key of one
//! operation carries its scope's hash tag, so all of them are in that slot.

use redis::{Client, IntoConnectionInfo, RedisConnectionInfo, Value};
use reservation_store::StorageError;

use crate::sentinel::{host_and_port, node_settings, user_and_hosts};

/// The URL's scheme.
pub(crate) const SCHEME: &str = "redis+cluster://";

/// The port a node listens on when the URL gives none.
const PORT: u16 = 6379;

/// How many hash slots a cluster has.
const SLOTS: u16 = 16384;

/// The most slot ranges a map may hold: one per slot.
const MOST_RANGES: usize = SLOTS as usize;

/// A parsed `redis+cluster://` URL.
pub(crate) struct ClusterUrl {
    /// The nodes named, in the order they are asked for the map.
    pub(crate) seeds: Vec<(String, u16)>,
    /// Every node's user and password (database 0).
    node: RedisConnectionInfo,
}

/// A URL refused, saying `why` (the URL itself is not quoted: it may hold a password).
fn refused(why: &str) -> StorageError {
    StorageError::new(format!(
        "Redis: the Cluster URL: {why} (expected {SCHEME}[user:password@]host[:port][,host[:port]…])"
    ))
}

impl ClusterUrl {
    /// `url` parsed, if its scheme is `redis+cluster`; `Ok(None)` for any other scheme.
    pub(crate) fn parse(url: &str) -> Result<Option<ClusterUrl>, StorageError> {
        let Some(rest) = url.strip_prefix(SCHEME) else { return Ok(None) };
        if rest.contains(['?', '#']) {
            return Err(refused("it has a query or a fragment, which the store would not apply"));
        }
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if !matches!(path, "" | "0") {
            return Err(refused("a cluster has database 0 alone"));
        }
        let (userinfo, hosts) = user_and_hosts(authority);
        let seeds = hosts
            .split(',')
            .map(|host| host_and_port(host, PORT).map(|(name, port)| (name.to_owned(), port)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| refused("a node's address is not host[:port]"))?;
        let node = node_settings(userinfo, 0).ok_or_else(|| refused("its user or password is not a URL's"))?;
        Ok(Some(ClusterUrl { seeds, node }))
    }

    /// A client of the node at `host`:`port`, with the URL's user and password.
    pub(crate) fn client(&self, host: &str, port: u16) -> Result<Client, String> {
        (host, port)
            .into_connection_info()
            .map(|info| info.set_redis_settings(self.node.clone()))
            .and_then(Client::open)
            .map_err(|e| format!("the node {host}:{port}: {e}"))
    }
}

/// The hash slot of the Redis key `key`: CRC-16 (XMODEM) of its hash tag, the bytes between its
/// first `{` and the first `}` after it when they are not empty, else of the whole key, modulo
/// 16384; as Redis computes it.
pub(crate) fn slot(key: &[u8]) -> u16 {
    const CRC: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    CRC.checksum(hash_tag(key)) % SLOTS
}

/// The part of `key` that decides its slot.
fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|b| *b == b'{') else { return key };
    let after = &key[open + 1..];
    match after.iter().position(|b| *b == b'}') {
        Some(close) if close > 0 => &after[..close],
        _ => key,
    }
}

/// Which primary serves each slot, as one node answered `CLUSTER SLOTS`.
#[derive(Debug)]
pub(crate) struct SlotMap {
    /// The first and last slot of each range, and its primary's host and port.
    ranges: Vec<(u16, u16, String, u16)>,
}

impl SlotMap {
    /// The map a node's answer to `CLUSTER SLOTS` gives: for each range, its first and last slot
    /// then its primary's address (`[host, port, id, …]`), then its replicas'. A primary whose
    /// host is empty (a node that does not know its own address) is the node asked, `asked`.
    /// Anything else is refused, saying what.
    pub(crate) fn parse(answer: Value, asked: &str) -> Result<SlotMap, String> {
        let ranges: Vec<Vec<Value>> =
            redis::from_redis_value(answer).map_err(|e| format!("`CLUSTER SLOTS` answered {e}"))?;
        if ranges.len() > MOST_RANGES {
            return Err(format!("`CLUSTER SLOTS` answered {} ranges, more than there are slots", ranges.len()));
        }
        let mut map = Vec::with_capacity(ranges.len());
        for range in ranges {
            let mut fields = range.into_iter();
            let mut next = || fields.next().ok_or("a slot range of fewer than three fields");
            let (first, last): (u16, u16) = (
                redis::from_redis_value(next()?).map_err(|e| format!("a range's first slot: {e}"))?,
                redis::from_redis_value(next()?).map_err(|e| format!("a range's last slot: {e}"))?,
            );
            let primary: Vec<Value> =
                redis::from_redis_value(next()?).map_err(|e| format!("a range's primary: {e}"))?;
            let mut primary = primary.into_iter();
            let (host, port): (String, u16) = match (primary.next(), primary.next()) {
                (Some(host), Some(port)) => (
                    redis::from_redis_value(host).map_err(|e| format!("a primary's host: {e}"))?,
                    redis::from_redis_value(port).map_err(|e| format!("a primary's port: {e}"))?,
                ),
                _ => return Err("a range's primary of fewer than two fields".to_owned()),
            };
            if first > last || last >= SLOTS {
                return Err(format!("a slot range {first}-{last}, not within 0-{}", SLOTS - 1));
            }
            let host = if host.is_empty() { asked.to_owned() } else { host };
            map.push((first, last, host, port));
        }
        Ok(SlotMap { ranges: map })
    }

    /// The host and port of the primary that serves `slot`, if any does.
    pub(crate) fn primary(&self, slot: u16) -> Option<(&str, u16)> {
        self.ranges
            .iter()
            .find(|(first, last, ..)| (*first..=*last).contains(&slot))
            .map(|(_, _, host, port)| (host.as_str(), *port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slots Redis's own documentation and its `CLUSTER KEYSLOT` give: a key without a tag
    /// hashed whole, a tag hashed alone, an empty tag (`{}`) or one never closed not a tag.
    #[test]
    fn the_slot_is_the_one_redis_computes() {
        // CRC-16/XMODEM's check value: "123456789" sums to 0x31C3.
        assert_eq!(slot(b"123456789"), 0x31C3);
        assert_eq!(slot(b"foo"), 12182);
        assert_eq!(slot(b"{user1000}.following"), slot(b"{user1000}.followers"));
        assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
        // The first `{` and the first `}` after it: `{bar` is the tag of `foo{{bar}}zap`.
        assert_eq!(slot(b"foo{{bar}}zap"), slot(b"{bar"));
        assert_eq!(slot(b"foo{bar}{zap}"), slot(b"bar"));
        // An empty tag, and a `{` never closed, are no tag: the whole key is hashed.
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{bar"), b"foo{bar");
        assert_eq!(hash_tag(b"}foo{bar}"), b"bar");
        assert!((0..10_000).all(|n| slot(format!("key{n}").as_bytes()) < SLOTS));
    }

    #[test]
    fn a_slot_map_is_read_from_cluster_slots_and_refused_when_malformed() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![Value::BulkString(host.into()), Value::Int(port), Value::BulkString(b"id".to_vec())])
        };
        let range =
            |first: i64, last: i64, primary: Value| Value::Array(vec![Value::Int(first), Value::Int(last), primary]);
        let answer = Value::Array(vec![range(0, 5460, node("10.0.0.1", 7000)), range(5461, 16383, node("", 7001))]);
        let map = SlotMap::parse(answer, "asked.example").expect("a map");
        assert_eq!(map.primary(0), Some(("10.0.0.1", 7000)));
        assert_eq!(map.primary(5460), Some(("10.0.0.1", 7000)));
        assert_eq!(map.primary(5461), Some(("asked.example", 7001)));
        assert_eq!(map.primary(16383), Some(("asked.example", 7001)));
        assert_eq!(map.primary(16384), None);
        // A range of one slot, and as many ranges as there are slots, are a cluster's to answer.
        let one = SlotMap::parse(Value::Array(vec![range(7, 7, node("h", 1))]), "x").expect("a map");
        assert_eq!((one.primary(6), one.primary(7), one.primary(8)), (None, Some(("h", 1)), None));
        let every: Vec<Value> = (0..MOST_RANGES).map(|s| range(s as i64, s as i64, node("h", 1))).collect();
        let every = SlotMap::parse(Value::Array(every), "x").expect("a range per slot");
        assert_eq!(every.primary(16383), Some(("h", 1)));
        let gap = SlotMap::parse(Value::Array(vec![range(1, 2, node("h", 1))]), "x").expect("a map");
        assert_eq!(gap.primary(0), None);
        assert_eq!(gap.primary(3), None);
        let refused = [
            (Value::Int(1), "`CLUSTER SLOTS` answered"),
            (Value::Array(vec![range(5, 4, node("h", 1))]), "not within"),
            (Value::Array(vec![range(0, 16384, node("h", 1))]), "not within"),
            (Value::Array(vec![Value::Array(vec![Value::Int(0), Value::Int(1)])]), "fewer than three"),
            (Value::Array(vec![range(0, 1, Value::Array(vec![Value::BulkString(b"h".to_vec())]))]), "fewer than two"),
            (Value::Array(vec![range(0, 1, node("h", 70_000))]), "a primary's port"),
            (Value::Array((0..=MOST_RANGES).map(|_| range(0, 0, node("h", 1))).collect()), "more than there are slots"),
        ];
        for (answer, why) in refused {
            let said = SlotMap::parse(answer, "x").expect_err(why);
            assert!(said.contains(why), "{why}: {said}");
        }
    }
}
