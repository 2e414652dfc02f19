//! How the suite shows a store's values in one short line: operations, owners, scopes,
//! reservations, errors and results, as transcripts and failures print them; and a panic's
//! message.

use std::fmt::{self, Debug};

use reservation_store::spec::Reservation;

use reservation_store::{
    AggregateRef, HoldId, Key, Operation, ReservationScope, StoreError, StoreResult, StoredReservation, Tenant,
    error_chain,
};

/// The message of a panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// An operation on a key in one short line, as transcripts show it.
pub(crate) struct ShowOperation<'a>(pub(crate) &'a Key, pub(crate) Operation<&'a AggregateRef, &'a HoldId>);

impl fmt::Display for ShowOperation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.0;
        match self.1 {
            Operation::Reserve { owner, hold, ttl } => {
                write!(f, "reserve({key:?}, {}, hold {hold:?}, ttl {}ms)", ShowOwner(owner), ttl.as_millis())
            }
            Operation::Confirm { owner, version } => write!(f, "confirm({key:?}, {}, {version})", ShowOwner(owner)),
            Operation::Release { owner, version } => write!(f, "release({key:?}, {}, {version})", ShowOwner(owner)),
            Operation::Abandon { owner, hold } => write!(f, "abandon({key:?}, {}, hold {hold:?})", ShowOwner(owner)),
        }
    }
}

/// An owner in one short line, its id quoted so that a trailing space shows.
pub(crate) struct ShowOwner<'a>(pub(crate) &'a AggregateRef);

impl fmt::Display for ShowOwner<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        match &o.tenant {
            Tenant::System => write!(f, "{}/SYSTEM_TENANT/{:?}", o.aggregate_type, o.id.as_str()),
            Tenant::Id(t) => write!(f, "{}/{:?}/{:?}", o.aggregate_type, t.as_str(), o.id.as_str()),
        }
    }
}

/// A scope in one short line, its parts quoted so that `SYSTEM_TENANT` stands out from a tenant
/// of that name.
pub(crate) struct ShowScope<'a>(pub(crate) &'a ReservationScope);

impl fmt::Display for ShowScope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        match &s.tenant {
            Tenant::System => write!(f, "{:?}/SYSTEM_TENANT/{:?}", s.aggregate_type.as_str(), s.namespace.as_str()),
            Tenant::Id(t) => {
                write!(f, "{:?}/{:?}/{:?}", s.aggregate_type.as_str(), t.as_str(), s.namespace.as_str())
            }
        }
    }
}

/// A reservation in one short line.
pub(crate) fn show_state(r: Option<&StoredReservation>) -> String {
    match r {
        None => "free".into(),
        Some(Reservation::Pending(p)) => {
            let holds: Vec<String> = p.holds().iter().map(|h| format!("{:?}", h.as_str())).collect();
            format!("pending({}, holds [{}], expires {})", ShowOwner(p.owner()), holds.join(", "), p.expires_at())
        }
        Some(Reservation::Confirmed(c)) => format!("confirmed({}, {})", ShowOwner(&c.owner), c.version),
    }
}

/// A store error in one short line.
pub(crate) fn show_error(e: &StoreError) -> String {
    match e {
        StoreError::Invalid(i) => format!("Invalid({i:?})"),
        StoreError::Storage(s) => format!("StorageError({})", error_chain(s)),
    }
}

/// A store result in one short line.
pub(crate) fn show_result<T: Debug>(r: &StoreResult<T>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => show_error(e),
    }
}
