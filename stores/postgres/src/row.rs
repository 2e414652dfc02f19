//! Rows: how a reservation is stored, and the key's lock.

use std::collections::BTreeSet;

use reservation_store::spec::Reservation;
use reservation_store::{AggregateRef, HoldId, Instant, Key, ReservationScope, StoredReservation, Version};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// `state` of a pending row.
pub(crate) const PENDING: i16 = 0;
/// `state` of a confirmed row.
pub(crate) const CONFIRMED: i16 = 1;

/// The first key of the store's advisory locks (the bytes `RSRV`), so that they do not collide
/// with an application's own advisory locks on other first keys.
const LOCK_CLASS: i32 = 0x5253_5256;

/// `x - 2⁶³` as an `i64`: a bijection from `u64` that keeps the order, so that SQL compares
/// stored instants as the store does.
pub(crate) fn sortable(x: u64) -> i64 {
    i64::from_be_bytes((x ^ (1 << 63)).to_be_bytes())
}

/// The inverse of [`sortable`].
pub(crate) fn unsortable(x: i64) -> u64 {
    u64::from_be_bytes(x.to_be_bytes()) ^ (1 << 63)
}

/// A persisted instant (stored offset by 2⁶³, as [`sortable`] writes it).
pub(crate) fn instant_of(stored: i64) -> Instant {
    Instant::from_millis(unsortable(stored))
}

/// The database clock's reading in milliseconds as an instant; one before the Unix epoch is 0.
pub(crate) fn instant(millis: i64) -> Instant {
    Instant::from_millis(u64::try_from(millis).unwrap_or(0))
}

/// The primary key of a row, as the bytes it is stored as (UTF-8; the system tenant is empty,
/// which no tenant id can be).
pub(crate) struct RowKey<'a> {
    aggregate_type: &'a [u8],
    tenant: &'a [u8],
    namespace: &'a [u8],
    key: &'a [u8],
}

impl<'a> RowKey<'a> {
    pub(crate) fn new(scope: &'a ReservationScope, key: &'a Key) -> Self {
        RowKey {
            aggregate_type: scope.aggregate_type.as_str().as_bytes(),
            tenant: scope.tenant.as_bytes(),
            namespace: scope.namespace.as_str().as_bytes(),
            key: key.as_str().as_bytes(),
        }
    }

    pub(crate) fn params(&self) -> [&(dyn ToSql + Sync); 4] {
        [&self.aggregate_type, &self.tenant, &self.namespace, &self.key]
    }

    /// The advisory lock of this (scope, key): [`LOCK_CLASS`] and a 32-bit FNV-1a hash of the
    /// four parts, each preceded by its length, so that no two spellings of a scope share an
    /// input. Two keys whose hashes collide only wait for each other.
    pub(crate) fn lock_id(&self) -> (i32, i32) {
        let mut hash: u32 = 0x811c_9dc5;
        for part in [self.aggregate_type, self.tenant, self.namespace, self.key] {
            let len = u32::try_from(part.len()).unwrap_or(u32::MAX).to_be_bytes();
            for byte in len.iter().chain(part) {
                hash ^= u32::from(*byte);
                hash = hash.wrapping_mul(0x0100_0193);
            }
        }
        (LOCK_CLASS, i32::from_be_bytes(hash.to_be_bytes()))
    }
}

/// A reservation as the columns `owner_tenant` … `version`.
pub(crate) struct Encoded<'a> {
    pub(crate) owner_tenant: &'a [u8],
    pub(crate) owner_id: &'a [u8],
    pub(crate) state: i16,
    pub(crate) holds: Option<Vec<&'a [u8]>>,
    pub(crate) expires_at: Option<i64>,
    pub(crate) version: Option<i64>,
}

pub(crate) fn encode(reservation: &StoredReservation) -> Encoded<'_> {
    let owner = reservation.owner();
    let (state, holds, expires_at, version) = match reservation {
        Reservation::Pending(p) => (
            PENDING,
            Some(p.holds().iter().map(|h| h.as_str().as_bytes()).collect()),
            Some(sortable(p.expires_at().as_millis())),
            None,
        ),
        Reservation::Confirmed(c) => (CONFIRMED, None, None, Some(sortable(c.version.as_u64()))),
    };
    Encoded {
        owner_tenant: owner.tenant.as_bytes(),
        owner_id: owner.id.as_str().as_bytes(),
        state,
        holds,
        expires_at,
        version,
    }
}

/// The reservation a row of `scope` holds; refuses anything [`encode`] would not have written.
pub(crate) fn decode(row: &Row, scope: &ReservationScope) -> Result<StoredReservation, String> {
    let column = |e: tokio_postgres::Error| format!("a column of an unexpected type: {e}");
    let owner_tenant: &[u8] = row.try_get(0).map_err(column)?;
    let owner_id: &[u8] = row.try_get(1).map_err(column)?;
    let state: i16 = row.try_get(2).map_err(column)?;
    let owner = AggregateRef::from_stored(scope.aggregate_type.clone(), owner_tenant, owner_id)?;
    match state {
        PENDING => {
            let raw: Vec<Vec<u8>> =
                row.try_get::<_, Option<_>>(3).map_err(column)?.ok_or("a pending row without holds")?;
            let mut holds = BTreeSet::new();
            for hold in raw {
                let hold = String::from_utf8(hold).map_err(|_| "holds: a hold id that is not UTF-8".to_owned())?;
                let hold = HoldId::new(hold).map_err(|e| format!("holds: {e}"))?;
                if holds.last().is_some_and(|last| *last >= hold) {
                    return Err("holds out of order".into());
                }
                holds.insert(hold);
            }
            let expires_at: i64 =
                row.try_get::<_, Option<_>>(4).map_err(column)?.ok_or("a pending row without expiry")?;
            Reservation::pending(owner, holds, Instant::from_millis(unsortable(expires_at)))
                .ok_or_else(|| "a pending reservation with no hold".to_owned())
        }
        CONFIRMED => {
            let version: i64 =
                row.try_get::<_, Option<_>>(5).map_err(column)?.ok_or("a confirmed row without version")?;
            Ok(Reservation::confirmed(owner, Version::from_u64(unsortable(version))))
        }
        other => Err(format!("state {other}")),
    }
}
