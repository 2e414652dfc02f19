//! One row per (scope, key): its primary key, and the reservation encoded into and decoded from
//! its columns. Instants and versions are stored offset by 2⁶³ ([`sortable`]), hold ids as
//! length-prefixed bytes ([`encode_holds`]).

use std::collections::BTreeSet;

use reservation_store::spec::Reservation;
use reservation_store::{AggregateRef, HoldId, Instant, Key, ReservationScope, StoredReservation, Version};
use rusqlite::{Connection, Row, params};

use crate::Fail;

const SELECT_ROW: &str = "SELECT owner_tenant, owner_id, state, holds, expires_at, version FROM reservation
    WHERE aggregate_type = ?1 AND tenant = ?2 AND namespace = ?3 AND key = ?4";
const UPSERT_ROW: &str = "INSERT OR REPLACE INTO reservation
    (aggregate_type, tenant, namespace, key, owner_tenant, owner_id, state, holds, expires_at, version)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
const DELETE_ROW: &str =
    "DELETE FROM reservation WHERE aggregate_type = ?1 AND tenant = ?2 AND namespace = ?3 AND key = ?4";
const DELETE_EXPIRED: &str =
    "DELETE FROM reservation WHERE state = 0 AND expires_at <= ?1 RETURNING aggregate_type, tenant, namespace";
const SELECT_LATEST: &str =
    "SELECT latest FROM reservation_clock WHERE aggregate_type = ?1 AND tenant = ?2 AND namespace = ?3";
/// Keeps the later of the persisted instant and the new one: the one computation on instants
/// that SQL does here, a maximum.
const ADVANCE_LATEST: &str = "INSERT INTO reservation_clock (aggregate_type, tenant, namespace, latest)
    VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (aggregate_type, tenant, namespace) DO UPDATE SET latest = max(latest, excluded.latest)";

const PENDING: i64 = 0;
const CONFIRMED: i64 = 1;

/// `x - 2⁶³` as an `i64`: a bijection from `u64` that keeps the order, so SQL compares stored
/// instants as the store does.
fn sortable(x: u64) -> i64 {
    i64::from_be_bytes((x ^ (1 << 63)).to_be_bytes())
}

/// The inverse of [`sortable`].
fn unsortable(x: i64) -> u64 {
    u64::from_be_bytes(x.to_be_bytes()) ^ (1 << 63)
}

/// The primary key of a row, as the bytes it is stored as.
pub(crate) struct RowKey<'a> {
    aggregate_type: &'a [u8],
    tenant: &'a [u8],
    namespace: &'a [u8],
    key: &'a [u8],
}

impl<'a> RowKey<'a> {
    pub(crate) fn new(scope: &'a ReservationScope, key: &'a Key) -> Self {
        Self {
            aggregate_type: scope.aggregate_type.as_str().as_bytes(),
            tenant: scope.tenant.as_bytes(),
            namespace: scope.namespace.as_str().as_bytes(),
            key: key.as_str().as_bytes(),
        }
    }

    fn params(&self) -> [&'a [u8]; 4] {
        [self.aggregate_type, self.tenant, self.namespace, self.key]
    }

    /// The scope's part of the key: the primary key of its row in `reservation_clock`.
    fn scope_params(&self) -> [&'a [u8]; 3] {
        [self.aggregate_type, self.tenant, self.namespace]
    }
}

/// The latest instant at which the store changed a reservation of `pk`'s scope, as persisted;
/// `None` for a scope with no change since the clock table was created.
pub(crate) fn read_latest(conn: &Connection, pk: &RowKey<'_>) -> Result<Option<Instant>, Fail> {
    let mut select = conn.prepare_cached(SELECT_LATEST)?;
    let mut rows = select.query(pk.scope_params())?;
    match rows.next()? {
        None => Ok(None),
        Some(row) => Ok(Some(Instant::from_millis(unsortable(row.get(0)?)))),
    }
}

/// Persists `at` as the latest instant of `pk`'s scope, unless a later one is persisted already.
pub(crate) fn advance_latest(conn: &Connection, pk: &RowKey<'_>, at: Instant) -> Result<(), Fail> {
    let [aggregate_type, tenant, namespace] = pk.scope_params();
    conn.prepare_cached(ADVANCE_LATEST)?.execute(params![
        aggregate_type,
        tenant,
        namespace,
        sortable(at.as_millis())
    ])?;
    Ok(())
}

pub(crate) fn read_row(
    conn: &Connection,
    scope: &ReservationScope,
    pk: &RowKey<'_>,
) -> Result<Option<StoredReservation>, Fail> {
    let mut select = conn.prepare_cached(SELECT_ROW)?;
    let mut rows = select.query(pk.params())?;
    match rows.next()? {
        None => Ok(None),
        Some(row) => decode_row(row, scope).map(Some),
    }
}

fn decode_row(row: &Row<'_>, scope: &ReservationScope) -> Result<StoredReservation, Fail> {
    let owner_tenant: Vec<u8> = row.get(0)?;
    let owner_id: Vec<u8> = row.get(1)?;
    let state: i64 = row.get(2)?;
    let owner =
        AggregateRef::from_stored(scope.aggregate_type.clone(), &owner_tenant, &owner_id).map_err(Fail::Corrupt)?;
    match state {
        PENDING => {
            let holds = decode_holds(&row.get::<_, Vec<u8>>(3)?)?;
            let expires_at = Instant::from_millis(unsortable(row.get(4)?));
            Reservation::pending(owner, holds, expires_at)
                .ok_or_else(|| Fail::Corrupt("a pending reservation with no hold".into()))
        }
        CONFIRMED => Ok(Reservation::confirmed(owner, Version::from_u64(unsortable(row.get(5)?)))),
        other => Err(Fail::Corrupt(format!("state {other}"))),
    }
}

pub(crate) fn write_row(conn: &Connection, pk: &RowKey<'_>, next: &StoredReservation) -> Result<(), Fail> {
    let owner = next.owner();
    let owner_tenant = owner.tenant.as_bytes();
    let owner_id = owner.id.as_str().as_bytes();
    let (state, holds, expires_at, version) = match next {
        Reservation::Pending(p) => {
            (PENDING, Some(encode_holds(p.holds())?), Some(sortable(p.expires_at().as_millis())), None)
        }
        Reservation::Confirmed(c) => (CONFIRMED, None, None, Some(sortable(c.version.as_u64()))),
    };
    let [aggregate_type, tenant, namespace, key] = pk.params();
    conn.prepare_cached(UPSERT_ROW)?.execute(params![
        aggregate_type,
        tenant,
        namespace,
        key,
        owner_tenant,
        owner_id,
        state,
        holds,
        expires_at,
        version
    ])?;
    Ok(())
}

/// Each hold as a 2-byte big-endian length and its bytes, in the set's (ascending) order.
fn encode_holds(holds: &BTreeSet<HoldId>) -> Result<Vec<u8>, Fail> {
    let mut out = Vec::with_capacity(holds.iter().map(|h| 2 + h.as_str().len()).sum());
    for hold in holds {
        let bytes = hold.as_str().as_bytes();
        let len = u16::try_from(bytes.len()).map_err(|_| Fail::Corrupt("a hold id too long to store".into()))?;
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(bytes);
    }
    Ok(out)
}

/// The inverse of [`encode_holds`]; refuses anything it would not have written.
fn decode_holds(mut bytes: &[u8]) -> Result<BTreeSet<HoldId>, Fail> {
    let corrupt = |what: &str| Fail::Corrupt(format!("holds: {what}"));
    let mut holds = BTreeSet::new();
    while !bytes.is_empty() {
        let (len, rest) = bytes.split_first_chunk::<2>().ok_or_else(|| corrupt("a truncated length"))?;
        let len = usize::from(u16::from_be_bytes(*len));
        let (hold, rest) = rest.split_at_checked(len).ok_or_else(|| corrupt("a truncated hold id"))?;
        let hold = std::str::from_utf8(hold).map_err(|_| corrupt("a hold id that is not UTF-8"))?;
        let hold = HoldId::new(hold).map_err(|e| corrupt(&e.to_string()))?;
        if holds.last().is_some_and(|last| *last >= hold) {
            return Err(corrupt("hold ids out of order"));
        }
        holds.insert(hold);
        bytes = rest;
    }
    Ok(holds)
}

/// Deletes the row of `pk`, if there is one.
pub(crate) fn delete_row(conn: &Connection, pk: &RowKey<'_>) -> Result<(), Fail> {
    conn.prepare_cached(DELETE_ROW)?.execute(pk.params())?;
    Ok(())
}

/// Deletes every pending row expired at `now`, and persists `now` as the latest instant of each
/// scope it deleted from (a deletion is a change: reopened on a clock set back, the store must not
/// find the key free at an instant when its reservation was live); returns how many it deleted.
pub(crate) fn delete_expired(conn: &Connection, now: Instant) -> Result<usize, Fail> {
    let scopes: Vec<[Vec<u8>; 3]> = conn
        .prepare_cached(DELETE_EXPIRED)?
        .query_map([sortable(now.as_millis())], |r| Ok([r.get(0)?, r.get(1)?, r.get(2)?]))?
        .collect::<Result<_, _>>()?;
    let deleted = scopes.len();
    let distinct: BTreeSet<&[Vec<u8>; 3]> = scopes.iter().collect();
    let mut advance = conn.prepare_cached(ADVANCE_LATEST)?;
    for [aggregate_type, tenant, namespace] in distinct {
        advance.execute(params![aggregate_type, tenant, namespace, sortable(now.as_millis())])?;
    }
    Ok(deleted)
}
