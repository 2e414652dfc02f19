//! Rows: the Redis key of a (scope, key), and a reservation as the bytes of its value.

use std::collections::BTreeSet;

use reservation_store::spec::Reservation;
use reservation_store::{AggregateRef, HoldId, Instant, Key, ReservationScope, StoredReservation, Version};

/// The first byte of every row this build writes.
const FORMAT: u8 = 1;
const PENDING: u8 = 0;
const CONFIRMED: u8 = 1;

/// The Redis keys of one store: its prefix, and whether each scope's keys carry a hash tag.
///
/// On one server or a replicated set (`tagged` false): `{prefix}:r:` then the aggregate type,
/// the tenant (empty for the system tenant, which no tenant id can be), the namespace and the
/// key, each as its length in bytes, `:`, and its UTF-8 bytes, for a row; `{prefix}:c:` and the
/// scope's three parts for its clock; `{prefix}:x` for the one expiry index. Every part says
/// where it ends, so no two (scope, key)s share a Redis key, however their parts are spelled.
///
/// On Redis Cluster (`tagged`), a transaction's keys must share one hash slot: the scope's parts
/// are written between `{` and `}`, Redis's hash tag (`{prefix}:r:{…scope…}…key…`,
/// `{prefix}:c:{…scope…}`), and each scope has an expiry index of its own,
/// `{prefix}:x:{…scope…}`, listed in the set `{prefix}:s` for the sweep. A hash tag ends at the
/// first `}` after the first `{`: the prefix holds neither (the store refuses one that does),
/// and the tag starts with the scope's first length, so whatever a part holds, the tag is a piece
/// of the scope's own spelling, the same in each of its keys.
#[derive(Clone, Debug)]
pub(crate) struct Keys {
    prefix: String,
    tagged: bool,
}

/// The aggregate type, the tenant and the namespace of `scope`, each as its length, `:` and its
/// bytes.
fn scope_parts(out: &mut Vec<u8>, scope: &ReservationScope) {
    for part in [scope.aggregate_type.as_str().as_bytes(), scope.tenant.as_bytes(), scope.namespace.as_str().as_bytes()]
    {
        length_and_bytes(out, part);
    }
}

fn length_and_bytes(out: &mut Vec<u8>, part: &[u8]) {
    out.extend_from_slice(part.len().to_string().as_bytes());
    out.push(b':');
    out.extend_from_slice(part);
}

/// Reads one part ([`length_and_bytes`]) from the front of `rest`.
fn part<'a>(rest: &mut &'a [u8]) -> Option<&'a str> {
    let colon = rest.iter().position(|b| *b == b':')?;
    let len: usize = std::str::from_utf8(&rest[..colon]).ok()?.parse().ok()?;
    let (part, tail) = rest[colon + 1..].split_at_checked(len)?;
    *rest = tail;
    std::str::from_utf8(part).ok()
}

/// Where the sweep finds the expiry indexes ([`Keys::index`]).
pub(crate) enum Indexes {
    /// The store's one index.
    One(Vec<u8>),
    /// The set that lists every scope's index (on a cluster).
    Listed(Vec<u8>),
}

impl Keys {
    /// The keys under `prefix`, with hash tags when `tagged` (Redis Cluster).
    pub(crate) fn new(prefix: &str, tagged: bool) -> Keys {
        Keys { prefix: prefix.to_owned(), tagged }
    }

    /// `{prefix}{kind}` then the scope's parts, between `{` and `}` when tagged.
    fn scoped(&self, kind: &[u8], scope: &ReservationScope) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.prefix.len() + 24 + scope.namespace.as_str().len());
        out.extend_from_slice(self.prefix.as_bytes());
        out.extend_from_slice(kind);
        if self.tagged {
            out.push(b'{');
        }
        scope_parts(&mut out, scope);
        if self.tagged {
            out.push(b'}');
        }
        out
    }

    /// The Redis key of `key` in `scope`.
    pub(crate) fn row(&self, scope: &ReservationScope, key: &Key) -> Vec<u8> {
        let mut out = self.scoped(b":r:", scope);
        length_and_bytes(&mut out, key.as_str().as_bytes());
        out
    }

    /// The (scope, key) whose Redis key is `bytes`: the inverse of [`Keys::row`]; `None` for a
    /// key it would not have written.
    pub(crate) fn parse_row(&self, bytes: &[u8]) -> Option<(ReservationScope, Key)> {
        let mut rest = bytes.strip_prefix(self.prefix.as_bytes())?.strip_prefix(b":r:")?;
        if self.tagged {
            rest = rest.strip_prefix(b"{")?;
        }
        let (aggregate_type, tenant, namespace) = (part(&mut rest)?, part(&mut rest)?, part(&mut rest)?);
        if self.tagged {
            rest = rest.strip_prefix(b"}")?;
        }
        let key = part(&mut rest)?;
        if !rest.is_empty() {
            return None;
        }
        let tenant = match tenant {
            "" => reservation_store::Tenant::System,
            id => reservation_store::Tenant::id(id).ok()?,
        };
        let scope = ReservationScope::new(
            reservation_store::AggregateType::new(aggregate_type).ok()?,
            tenant,
            reservation_store::Namespace::new(namespace).ok()?,
        );
        Some((scope, Key::new(key).ok()?))
    }

    /// The Redis key of `scope`'s clock: a sorted set holding one member, the latest instant at
    /// which the store changed a reservation of the scope (rule D10 across a restart) as 8
    /// big-endian bytes, at score 0: members of one score sort by their bytes, so the greatest
    /// is the latest instant, exactly (a score, a double, is exact only up to 2⁵³).
    pub(crate) fn clock(&self, scope: &ReservationScope) -> Vec<u8> {
        self.scoped(b":c:", scope)
    }

    /// The sorted set of `scope`'s pending rows by expiry, for the sweep on a local clock: the
    /// store's one index, or, tagged, the scope's own.
    pub(crate) fn index(&self, scope: &ReservationScope) -> Vec<u8> {
        match self.indexes() {
            Indexes::One(index) => index,
            Indexes::Listed(_) => self.scoped(b":x:", scope),
        }
    }

    /// Where the sweep finds the expiry indexes.
    pub(crate) fn indexes(&self) -> Indexes {
        if self.tagged {
            Indexes::Listed(format!("{}:s", self.prefix).into_bytes())
        } else {
            Indexes::One(format!("{}:x", self.prefix).into_bytes())
        }
    }
}

/// An instant as the member of a clock's sorted set ([`Keys::clock`]).
pub(crate) fn clock_member(at: Instant) -> [u8; 8] {
    at.as_millis().to_be_bytes()
}

/// The instant a clock's member holds; refuses anything [`clock_member`] would not have written.
pub(crate) fn clock_instant(member: &[u8]) -> Result<Instant, String> {
    let bytes: [u8; 8] = member.try_into().map_err(|_| format!("a clock member of {} bytes, not 8", member.len()))?;
    Ok(Instant::from_millis(u64::from_be_bytes(bytes)))
}

fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    // Every field is at most MAX_KEY_LEN (512) bytes, which the types enforce.
    out.extend_from_slice(&u16::try_from(bytes.len()).unwrap_or(u16::MAX).to_be_bytes());
    out.extend_from_slice(bytes);
}

/// `reservation` as the bytes of its row: the format, the state, the owner's tenant and id, then
/// a pending row's expiry and holds (ascending) or a confirmed row's version; numbers big-endian,
/// each text as a 2-byte length and its bytes. A free key is the empty value (a tombstone).
pub(crate) fn encode(reservation: &StoredReservation) -> Vec<u8> {
    let mut out = vec![FORMAT];
    let owner = reservation.owner();
    match reservation {
        Reservation::Pending(p) => {
            out.push(PENDING);
            put(&mut out, owner.tenant.as_bytes());
            put(&mut out, owner.id.as_str().as_bytes());
            out.extend_from_slice(&p.expires_at().as_millis().to_be_bytes());
            out.extend_from_slice(&u16::try_from(p.holds().len()).unwrap_or(u16::MAX).to_be_bytes());
            for hold in p.holds() {
                put(&mut out, hold.as_str().as_bytes());
            }
        }
        Reservation::Confirmed(c) => {
            out.push(CONFIRMED);
            put(&mut out, owner.tenant.as_bytes());
            put(&mut out, owner.id.as_str().as_bytes());
            out.extend_from_slice(&c.version.as_u64().to_be_bytes());
        }
    }
    out
}

/// Reads a row's bytes from the front.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let (head, rest) = self.0.split_at_checked(n).ok_or("a truncated row")?;
        self.0 = rest;
        Ok(head)
    }

    fn u16(&mut self) -> Result<usize, String> {
        let bytes = self.take(2)?;
        Ok(usize::from(u16::from_be_bytes([bytes[0], bytes[1]])))
    }

    fn u64(&mut self) -> Result<u64, String> {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(self.take(8)?);
        Ok(u64::from_be_bytes(bytes))
    }

    fn text(&mut self) -> Result<&'a [u8], String> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// The reservation a row of `scope` holds (`None` for a tombstone); refuses anything [`encode`]
/// would not have written.
pub(crate) fn decode(bytes: &[u8], scope: &ReservationScope) -> Result<Option<StoredReservation>, String> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let mut r = Reader(bytes);
    if r.take(1)? != [FORMAT] {
        return Err(format!("a row of format {}, this build reads {FORMAT}", bytes[0]));
    }
    let state = r.take(1)?[0];
    let (tenant, id) = (r.text()?, r.text()?);
    let owner = AggregateRef::from_stored(scope.aggregate_type.clone(), tenant, id)?;
    let reservation = match state {
        PENDING => {
            let expires_at = Instant::from_millis(r.u64()?);
            let mut holds = BTreeSet::new();
            for _ in 0..r.u16()? {
                let hold = std::str::from_utf8(r.text()?).map_err(|_| "a hold id that is not UTF-8".to_owned())?;
                let hold = HoldId::new(hold).map_err(|e| format!("holds: {e}"))?;
                if holds.last().is_some_and(|last| *last >= hold) {
                    return Err("holds out of order".into());
                }
                holds.insert(hold);
            }
            Reservation::pending(owner, holds, expires_at).ok_or("a pending row with no hold")?
        }
        CONFIRMED => Reservation::confirmed(owner, Version::from_u64(r.u64()?)),
        other => return Err(format!("state {other}")),
    };
    if !r.0.is_empty() {
        return Err("bytes after the row".into());
    }
    Ok(Some(reservation))
}
