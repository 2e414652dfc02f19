//! What the specification expects beyond one spec call: the rule a lookup's answer is judged by,
//! and every error a store may report for an owner its scope does not admit.

use reservation_store::rules::Rule;
use reservation_store::spec::Reservation;
use reservation_store::{AggregateRef, Instant, InvalidArgument, ReservationScope, StoredReservation, Tenant};

/// The rule a wrong lookup breaks, given the specification's `state` of the key, what the store
/// `shown`, and `written`, the rule of the step that last wrote the key: D1 for a pending
/// reservation at its expiry boundary that the store shows as it is or as free, D7 for one past
/// it that the store still shows, D11 for a live one that the store showed as a pending
/// reservation that is not live (an answer no lookup may give: an expiry given as the time left,
/// say), otherwise `written`.
pub(crate) fn lookup_rule(
    state: Option<&StoredReservation>,
    shown: Option<&StoredReservation>,
    now: Instant,
    written: Option<Rule>,
) -> Option<Rule> {
    let Some(p) = state.and_then(Reservation::as_pending) else { return written };
    // Live a millisecond ago and not a millisecond on: the key is at its expiry boundary.
    let boundary = p.is_live(now.saturating_sub_millis(1)) && !p.is_live(now.saturating_add_millis(1));
    if boundary && (shown == state || shown.is_none()) {
        Some(Rule::D1)
    } else if !p.is_live(now) && shown == state {
        Some(Rule::D7)
    } else if p.is_live(now) && shown.and_then(Reservation::as_pending).is_some_and(|s| !s.is_live(now)) {
        Some(Rule::D11)
    } else {
        written
    }
}

/// Whether `scope` admits `owner`; if not, every invalid-argument error a store may report for
/// it (D6 lets a store report any one of several).
pub(crate) fn admission_errors(scope: &ReservationScope, owner: &AggregateRef) -> Result<(), Vec<InvalidArgument>> {
    let Err(first) = scope.admits(owner) else { return Ok(()) };
    let mut errors = vec![first];
    // Each mismatch on its own, found by curing the other one, as the core's validation says.
    let same_type = AggregateRef { aggregate_type: scope.aggregate_type.clone(), ..owner.clone() };
    let tenant = if scope.tenant == Tenant::System { owner.tenant.clone() } else { scope.tenant.clone() };
    let same_tenant = AggregateRef { tenant, ..owner.clone() };
    for alone in [scope.admits(&same_type), scope.admits(&same_tenant)] {
        if let Err(e) = alone
            && !errors.contains(&e)
        {
            errors.push(e);
        }
    }
    Err(errors)
}
