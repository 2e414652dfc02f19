//! The rules through [`MemoryStore`] on a [`ManualClock`], driven through the async trait with
//! [`block_on`]: every step checks the outcome and what a lookup sees afterwards. Then rule D6
//! through the store, scope independence, and the documented bound on rows under workloads that
//! reserve forever.

use std::collections::BTreeSet;
use std::sync::Arc;

use reservation_store::*;

/// The store's clock when a test starts, in milliseconds.
const START: u64 = 1_000;
/// The default time to live, in milliseconds.
const TTL: u64 = 100;

fn owner(tenant: &str, id: &str) -> AggregateRef {
    AggregateRef::parse("user", Some(tenant), id).unwrap()
}

fn alice() -> AggregateRef {
    owner("acme", "alice")
}

fn bob() -> AggregateRef {
    owner("acme", "bob")
}

fn hold(n: u8) -> HoldId {
    HoldId::new(format!("attempt-{n}")).unwrap()
}

fn v(n: u64) -> Version {
    Version::stream(n).unwrap()
}

fn ttl(ms: u64) -> Ttl {
    Ttl::from_millis(ms).unwrap()
}

fn key(name: &str) -> Key {
    Key::new(name).unwrap()
}

fn pending(owner: &AggregateRef, holds: &[u8], expires_at: u64) -> Option<StoredReservation> {
    let holds: BTreeSet<HoldId> = holds.iter().map(|h| hold(*h)).collect();
    Some(Reservation::pending(owner.clone(), holds, Instant::from_millis(expires_at)).unwrap())
}

fn confirmed(owner: &AggregateRef, version: Version) -> Option<StoredReservation> {
    Some(Reservation::confirmed(owner.clone(), version))
}

/// A store on a manual clock reading [`START`], and one scope and key to work on.
struct Fx {
    clock: ManualClock,
    store: MemoryStore<ManualClock>,
    scope: ReservationScope,
    key: Key,
}

impl Fx {
    fn new() -> Self {
        let clock = ManualClock::new(Instant::from_millis(START));
        Fx {
            store: MemoryStore::with_clock(clock.clone()),
            clock,
            scope: ReservationScope::parse("user", Some("acme"), "user-name").unwrap(),
            key: key("alice"),
        }
    }

    fn set(&self, millis: u64) {
        self.clock.set(Instant::from_millis(millis));
    }

    fn reserve(&self, owner: &AggregateRef, h: u8, ttl_ms: u64) -> ReserveOutcome {
        block_on(self.store.reserve(&self.scope, &self.key, owner, &hold(h), ttl(ttl_ms))).unwrap()
    }

    fn confirm(&self, owner: &AggregateRef, version: Version) -> ConfirmOutcome {
        block_on(self.store.confirm(&self.scope, &self.key, owner, version)).unwrap()
    }

    fn release(&self, owner: &AggregateRef, version: ReleaseVersion) -> ReleaseOutcome {
        block_on(self.store.release(&self.scope, &self.key, owner, version)).unwrap()
    }

    fn abandon(&self, owner: &AggregateRef, h: u8) -> AbandonOutcome {
        block_on(self.store.abandon(&self.scope, &self.key, owner, &hold(h))).unwrap()
    }

    fn lookup(&self) -> Option<StoredReservation> {
        block_on(self.store.lookup(&self.scope, &self.key)).unwrap()
    }

    /// Asserts what a lookup sees now.
    #[track_caller]
    fn sees(&self, expected: Option<StoredReservation>) {
        assert_eq!(self.lookup(), expected, "lookup at {}", self.clock.now());
    }
}

// ---------------------------------------------------------------------------------------------
// reserve: R1-R7

#[test]
fn r1_free_key_is_taken_pending_until_now_plus_ttl() {
    let fx = Fx::new();
    fx.sees(None);
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    fx.sees(pending(&alice(), &[1], START + TTL));
}

#[test]
fn r2_expired_pending_of_anyone_is_taken_afresh() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    assert_eq!(fx.reserve(&alice(), 2, TTL), ReserveOutcome::Joined);
    fx.sees(pending(&alice(), &[1, 2], START + TTL));
    fx.set(START + TTL);
    fx.sees(None);
    assert_eq!(fx.reserve(&bob(), 3, 50), ReserveOutcome::Taken);
    fx.sees(pending(&bob(), &[3], START + TTL + 50));
    // The owner's own expired reservation is taken afresh too; its old holds are dropped.
    fx.set(START + TTL + 50);
    assert_eq!(fx.reserve(&bob(), 4, 50), ReserveOutcome::Taken);
    fx.sees(pending(&bob(), &[4], START + TTL + 100));
}

#[test]
fn r3_live_own_pending_joins_hold() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + TTL - 1);
    assert_eq!(fx.reserve(&alice(), 2, TTL), ReserveOutcome::Joined);
    fx.sees(pending(&alice(), &[1, 2], START + 2 * TTL - 1));
    // A shorter ttl keeps the later expiry.
    assert_eq!(fx.reserve(&alice(), 3, 1), ReserveOutcome::Joined);
    fx.sees(pending(&alice(), &[1, 2, 3], START + 2 * TTL - 1));
}

#[test]
fn r4_live_own_pending_with_same_hold_keeps_holds_and_later_expiry() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + TTL - 1);
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Joined);
    fx.sees(pending(&alice(), &[1], START + 2 * TTL - 1));
    assert_eq!(fx.reserve(&alice(), 1, 1), ReserveOutcome::Joined);
    fx.sees(pending(&alice(), &[1], START + 2 * TTL - 1));
}

#[test]
fn r5_live_pending_of_other_owner_conflicts() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + TTL - 1);
    assert_eq!(fx.reserve(&bob(), 1, TTL), ReserveOutcome::Conflict);
    fx.sees(pending(&alice(), &[1], START + TTL));
}

#[test]
fn r6_own_confirmed_is_already_confirmed() {
    let fx = Fx::new();
    assert_eq!(fx.confirm(&alice(), v(1)), ConfirmOutcome::Confirmed);
    fx.set(u64::MAX);
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::AlreadyConfirmed);
    fx.sees(confirmed(&alice(), v(1)));
}

#[test]
fn r7_other_owners_confirmed_conflicts() {
    let fx = Fx::new();
    assert_eq!(fx.confirm(&alice(), v(1)), ConfirmOutcome::Confirmed);
    fx.set(u64::MAX);
    assert_eq!(fx.reserve(&bob(), 1, TTL), ReserveOutcome::Conflict);
    fx.sees(confirmed(&alice(), v(1)));
}

// ---------------------------------------------------------------------------------------------
// confirm: C1-C8

#[test]
fn c1_free_key_is_taken_confirmed() {
    let fx = Fx::new();
    assert_eq!(fx.confirm(&alice(), v(2)), ConfirmOutcome::Confirmed);
    fx.sees(confirmed(&alice(), v(2)));
    // Confirmed never expires.
    fx.set(u64::MAX);
    fx.sees(confirmed(&alice(), v(2)));
}

#[test]
fn c2_live_own_pending_is_confirmed_and_holds_cleared() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    assert_eq!(fx.reserve(&alice(), 2, TTL), ReserveOutcome::Joined);
    fx.set(START + TTL - 1);
    assert_eq!(fx.confirm(&alice(), v(1)), ConfirmOutcome::Confirmed);
    fx.sees(confirmed(&alice(), v(1)));
    fx.set(START + TTL);
    fx.sees(confirmed(&alice(), v(1)));
}

#[test]
fn c3_expired_own_pending_is_still_confirmed() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + TTL);
    fx.sees(None);
    assert_eq!(fx.confirm(&alice(), v(1)), ConfirmOutcome::Confirmed);
    fx.sees(confirmed(&alice(), v(1)));
}

#[test]
fn c4_expired_pending_of_other_owner_gives_way() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&bob(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + TTL);
    assert_eq!(fx.confirm(&alice(), v(1)), ConfirmOutcome::Confirmed);
    fx.sees(confirmed(&alice(), v(1)));
}

#[test]
fn c5_live_pending_of_other_owner_conflicts() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&bob(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + TTL - 1);
    assert_eq!(fx.confirm(&alice(), v(1)), ConfirmOutcome::Conflict);
    fx.sees(pending(&bob(), &[1], START + TTL));
}

#[test]
fn c6_greater_version_raises_confirmed_version() {
    let fx = Fx::new();
    assert_eq!(fx.confirm(&alice(), v(1)), ConfirmOutcome::Confirmed);
    assert_eq!(fx.confirm(&alice(), v(2)), ConfirmOutcome::Confirmed);
    fx.sees(confirmed(&alice(), v(2)));
}

#[test]
fn c7_same_or_older_version_is_already_confirmed() {
    let fx = Fx::new();
    assert_eq!(fx.confirm(&alice(), v(3)), ConfirmOutcome::Confirmed);
    for version in [v(3), v(2), Version::UNVERSIONED] {
        assert_eq!(fx.confirm(&alice(), version), ConfirmOutcome::AlreadyConfirmed);
        fx.sees(confirmed(&alice(), v(3)));
    }
}

#[test]
fn c8_other_owners_confirmed_conflicts_at_any_version() {
    let fx = Fx::new();
    assert_eq!(fx.confirm(&bob(), v(1)), ConfirmOutcome::Confirmed);
    for version in [v(5), v(1), Version::UNVERSIONED] {
        assert_eq!(fx.confirm(&alice(), version), ConfirmOutcome::Conflict);
        fx.sees(confirmed(&bob(), v(1)));
    }
}

// ---------------------------------------------------------------------------------------------
// release: L1-L6

#[test]
fn l1_free_or_expired_pending_is_not_held() {
    let fx = Fx::new();
    assert_eq!(fx.release(&alice(), ReleaseVersion::Any), ReleaseOutcome::NotHeld);
    fx.sees(None);
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + TTL);
    assert_eq!(fx.release(&alice(), ReleaseVersion::Any), ReleaseOutcome::NotHeld);
    fx.sees(None);
    // The expired row is gone, not merely hidden.
    assert_eq!(fx.store.len(), 0);
}

#[test]
fn l2_live_own_pending_is_released_at_any_version() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    assert_eq!(fx.reserve(&alice(), 2, TTL), ReserveOutcome::Joined);
    fx.set(START + TTL - 1);
    assert_eq!(fx.release(&alice(), ReleaseVersion::At(Version::UNVERSIONED)), ReleaseOutcome::Released);
    fx.sees(None);
    assert!(fx.store.is_empty());
}

#[test]
fn l3_live_pending_of_other_owner_is_not_held() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&bob(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + TTL - 1);
    assert_eq!(fx.release(&alice(), ReleaseVersion::Any), ReleaseOutcome::NotHeld);
    fx.sees(pending(&bob(), &[1], START + TTL));
}

#[test]
fn l4_release_at_or_above_confirmed_version_or_any_frees() {
    let fx = Fx::new();
    for version in [ReleaseVersion::At(v(3)), ReleaseVersion::At(v(4)), ReleaseVersion::Any] {
        assert_eq!(fx.confirm(&alice(), v(3)), ConfirmOutcome::Confirmed);
        fx.sees(confirmed(&alice(), v(3)));
        assert_eq!(fx.release(&alice(), version), ReleaseOutcome::Released);
        fx.sees(None);
    }
}

#[test]
fn l5_release_of_older_fact_is_kept() {
    let fx = Fx::new();
    assert_eq!(fx.confirm(&alice(), v(3)), ConfirmOutcome::Confirmed);
    for older in [v(2), Version::UNVERSIONED] {
        assert_eq!(fx.release(&alice(), ReleaseVersion::At(older)), ReleaseOutcome::Kept);
        fx.sees(confirmed(&alice(), v(3)));
    }
}

#[test]
fn l6_other_owners_confirmed_is_not_held() {
    let fx = Fx::new();
    assert_eq!(fx.confirm(&bob(), v(1)), ConfirmOutcome::Confirmed);
    for version in [ReleaseVersion::Any, ReleaseVersion::At(v(9))] {
        assert_eq!(fx.release(&alice(), version), ReleaseOutcome::NotHeld);
        fx.sees(confirmed(&bob(), v(1)));
    }
}

// ---------------------------------------------------------------------------------------------
// abandon: A1-A6

#[test]
fn a1_free_or_expired_pending_is_not_held() {
    let fx = Fx::new();
    assert_eq!(fx.abandon(&alice(), 1), AbandonOutcome::NotHeld);
    fx.sees(None);
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + TTL);
    assert_eq!(fx.abandon(&alice(), 1), AbandonOutcome::NotHeld);
    fx.sees(None);
    assert_eq!(fx.store.len(), 0);
}

#[test]
fn a2_last_hold_abandoned_frees_key() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + TTL - 1);
    assert_eq!(fx.abandon(&alice(), 1), AbandonOutcome::Abandoned);
    fx.sees(None);
    assert!(fx.store.is_empty());
    // Free again: anyone may take it.
    assert_eq!(fx.reserve(&bob(), 2, TTL), ReserveOutcome::Taken);
    fx.sees(pending(&bob(), &[2], START + 2 * TTL - 1));
}

#[test]
fn a3_one_of_several_holds_abandoned_keeps_key_and_expiry() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + 50);
    assert_eq!(fx.reserve(&alice(), 2, TTL), ReserveOutcome::Joined);
    fx.sees(pending(&alice(), &[1, 2], START + 50 + TTL));
    assert_eq!(fx.abandon(&alice(), 1), AbandonOutcome::StillReserved);
    fx.sees(pending(&alice(), &[2], START + 50 + TTL));
}

#[test]
fn a4_unknown_hold_is_not_held() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    assert_eq!(fx.abandon(&alice(), 2), AbandonOutcome::NotHeld);
    fx.sees(pending(&alice(), &[1], START + TTL));
}

#[test]
fn a5_other_owners_reservation_is_not_held() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&bob(), 1, TTL), ReserveOutcome::Taken);
    assert_eq!(fx.abandon(&alice(), 1), AbandonOutcome::NotHeld);
    fx.sees(pending(&bob(), &[1], START + TTL));
    assert_eq!(fx.confirm(&bob(), v(1)), ConfirmOutcome::Confirmed);
    assert_eq!(fx.abandon(&alice(), 1), AbandonOutcome::NotHeld);
    fx.sees(confirmed(&bob(), v(1)));
}

#[test]
fn a6_own_confirmed_is_never_abandoned() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    assert_eq!(fx.confirm(&alice(), v(1)), ConfirmOutcome::Confirmed);
    assert_eq!(fx.abandon(&alice(), 1), AbandonOutcome::AlreadyConfirmed);
    fx.sees(confirmed(&alice(), v(1)));
}

// ---------------------------------------------------------------------------------------------
// values: D1-D7

#[test]
fn d1_live_until_expires_at_minus_one_expired_at_expires_at() {
    let fx = Fx::new();
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    fx.set(START + TTL - 1);
    fx.sees(pending(&alice(), &[1], START + TTL));
    assert_eq!(fx.reserve(&bob(), 2, TTL), ReserveOutcome::Conflict);
    fx.set(START + TTL);
    fx.sees(None);
    assert_eq!(fx.reserve(&bob(), 2, TTL), ReserveOutcome::Taken);
    fx.sees(pending(&bob(), &[2], START + 2 * TTL));
}

#[test]
fn d1_now_plus_ttl_saturates_at_instant_max() {
    let fx = Fx::new();
    fx.set(u64::MAX - 5);
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    fx.sees(pending(&alice(), &[1], u64::MAX));
    fx.set(u64::MAX - 1);
    assert_eq!(fx.reserve(&alice(), 2, u64::MAX), ReserveOutcome::Joined);
    fx.sees(pending(&alice(), &[1, 2], u64::MAX));
    fx.set(u64::MAX);
    fx.sees(None);
}

#[test]
fn d3_unversioned_sorts_below_stream_versions() {
    let fx = Fx::new();
    assert_eq!(fx.confirm(&alice(), Version::UNVERSIONED), ConfirmOutcome::Confirmed);
    fx.sees(confirmed(&alice(), Version::UNVERSIONED));
    assert_eq!(fx.confirm(&alice(), v(1)), ConfirmOutcome::Confirmed);
    fx.sees(confirmed(&alice(), v(1)));
    assert_eq!(fx.release(&alice(), ReleaseVersion::At(Version::UNVERSIONED)), ReleaseOutcome::Kept);
    fx.sees(confirmed(&alice(), v(1)));
}

#[test]
fn d4_any_version_frees_whichever_fact_confirmed() {
    let fx = Fx::new();
    let top = Version::from_u64(u64::MAX);
    assert_eq!(fx.confirm(&alice(), top), ConfirmOutcome::Confirmed);
    assert_eq!(fx.release(&alice(), ReleaseVersion::At(v(1_000))), ReleaseOutcome::Kept);
    fx.sees(confirmed(&alice(), top));
    assert_eq!(fx.release(&alice(), ReleaseVersion::ANY_VERSION), ReleaseOutcome::Released);
    fx.sees(None);
}

#[test]
fn d5_owners_differing_in_tenant_or_id_are_different_owners() {
    let fx = Fx::new();
    // A SYSTEM_TENANT scope admits owners of every tenant, so the tenant field can differ.
    let system = ReservationScope::parse("user", None, "email").unwrap();
    let k = key("a@example.com");
    let first = owner("acme", "u1");
    let t = Ttl::from_millis(TTL).unwrap();
    assert_eq!(block_on(fx.store.reserve(&system, &k, &first, &hold(1), t)).unwrap(), ReserveOutcome::Taken);
    let others = [
        owner("globex", "u1"),
        owner("acme", "U1"),
        owner("acme", "u1 "),
        AggregateRef::parse("user", None, "u1").unwrap(),
    ];
    for other in &others {
        assert_eq!(block_on(fx.store.reserve(&system, &k, other, &hold(1), t)).unwrap(), ReserveOutcome::Conflict);
        assert_eq!(block_on(fx.store.confirm(&system, &k, other, v(9))).unwrap(), ConfirmOutcome::Conflict);
    }
    assert_eq!(block_on(fx.store.reserve(&system, &k, &first, &hold(1), t)).unwrap(), ReserveOutcome::Joined);
    assert_eq!(block_on(fx.store.lookup(&system, &k)).unwrap(), pending(&first, &[1], START + TTL));
}

#[test]
fn d5_keys_differing_in_case_or_a_trailing_space_are_different_keys() {
    let fx = Fx::new();
    let t = ttl(TTL);
    assert_eq!(fx.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    for (i, other) in ["Alice", "alice ", "ALICE", " alice"].into_iter().enumerate() {
        let k = key(other);
        assert_eq!(block_on(fx.store.reserve(&fx.scope, &k, &bob(), &hold(1), t)).unwrap(), ReserveOutcome::Taken);
        assert_eq!(block_on(fx.store.lookup(&fx.scope, &k)).unwrap(), pending(&bob(), &[1], START + TTL));
        assert_eq!(fx.store.len(), i + 2);
    }
    fx.sees(pending(&alice(), &[1], START + TTL));
}

/// Puts the fixture's key in one of its states: free, live pending, expired pending, confirmed.
fn key_states() -> Vec<(&'static str, Fx)> {
    let free = Fx::new();
    let live = Fx::new();
    assert_eq!(live.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    let expired = Fx::new();
    assert_eq!(expired.reserve(&alice(), 1, TTL), ReserveOutcome::Taken);
    expired.set(START + TTL);
    let confirmed = Fx::new();
    assert_eq!(confirmed.confirm(&alice(), v(1)), ConfirmOutcome::Confirmed);
    vec![("free", free), ("live pending", live), ("expired pending", expired), ("confirmed", confirmed)]
}

#[test]
fn d6_owner_outside_the_scope_is_invalid_whatever_the_key_state_and_changes_nothing() {
    let wrong_type = AggregateRef::parse("account", Some("acme"), "alice").unwrap();
    let wrong_tenant = owner("globex", "alice");
    let cases = [(wrong_type, InvalidArgument::OwnerTypeMismatch), (wrong_tenant, InvalidArgument::TenantMismatch)];
    for (state, fx) in key_states() {
        for (bad, expected) in &cases {
            let before = (fx.lookup(), fx.store.len());
            let errors = [
                block_on(fx.store.reserve(&fx.scope, &fx.key, bad, &hold(1), ttl(TTL))).err(),
                block_on(fx.store.confirm(&fx.scope, &fx.key, bad, v(5))).err(),
                block_on(fx.store.release(&fx.scope, &fx.key, bad, ReleaseVersion::Any)).err(),
                block_on(fx.store.abandon(&fx.scope, &fx.key, bad, &hold(1))).err(),
            ];
            for error in errors {
                let error = error.unwrap_or_else(|| panic!("{state}: {bad} was admitted"));
                assert!(matches!(error, StoreError::Invalid(_)), "{state}: {error}");
                assert_eq!(error.invalid(), Some(*expected), "{state}");
            }
            assert_eq!((fx.lookup(), fx.store.len()), before, "{state}: an invalid call changed the store");
        }
    }
}

/// Runs `op` on a fresh store, once on a free key and once on a key whose pending reservation by
/// `holder` expired at this very instant, and checks that the outcomes and what a lookup sees
/// afterwards are the same.
fn same_as_free<T: PartialEq + std::fmt::Debug>(holder: &AggregateRef, op: impl Fn(&Fx, &Key) -> T) {
    let fx = Fx::new();
    let (free, expired) = (key("free"), key("expired"));
    let t = ttl(TTL);
    assert_eq!(block_on(fx.store.reserve(&fx.scope, &expired, holder, &hold(1), t)).unwrap(), ReserveOutcome::Taken);
    assert_eq!(block_on(fx.store.reserve(&fx.scope, &expired, holder, &hold(2), t)).unwrap(), ReserveOutcome::Joined);
    fx.set(START + TTL);
    let (on_free, on_expired) = (op(&fx, &free), op(&fx, &expired));
    assert_eq!(on_expired, on_free, "held by {holder}");
    let seen = |k: &Key| block_on(fx.store.lookup(&fx.scope, k)).unwrap();
    assert_eq!(seen(&expired), seen(&free), "held by {holder}");
}

#[test]
fn d7_expired_pending_behaves_exactly_like_free_key() {
    for holder in [alice(), bob()] {
        same_as_free(&holder, |fx, k| block_on(fx.store.lookup(&fx.scope, k)).unwrap());
        for h in [1, 3] {
            same_as_free(&holder, |fx, k| {
                block_on(fx.store.reserve(&fx.scope, k, &alice(), &hold(h), ttl(7))).unwrap()
            });
            same_as_free(&holder, |fx, k| block_on(fx.store.abandon(&fx.scope, k, &alice(), &hold(h))).unwrap());
        }
        for version in [Version::UNVERSIONED, v(1), v(2)] {
            same_as_free(&holder, |fx, k| block_on(fx.store.confirm(&fx.scope, k, &alice(), version)).unwrap());
            let at = ReleaseVersion::At(version);
            same_as_free(&holder, |fx, k| block_on(fx.store.release(&fx.scope, k, &alice(), at)).unwrap());
        }
        same_as_free(&holder, |fx, k| block_on(fx.store.release(&fx.scope, k, &alice(), ReleaseVersion::Any)).unwrap());
    }
}

// ---------------------------------------------------------------------------------------------
// scopes

#[test]
fn same_key_in_other_type_tenant_or_namespace_does_not_conflict() {
    let fx = Fx::new();
    let k = key("alice");
    let t = ttl(TTL);
    let reserve =
        |scope: &ReservationScope, who: &AggregateRef| block_on(fx.store.reserve(scope, &k, who, &hold(1), t));
    let acme_names = ReservationScope::parse("user", Some("acme"), "user-name").unwrap();
    let acme_emails = ReservationScope::parse("user", Some("acme"), "email").unwrap();
    let globex_names = ReservationScope::parse("user", Some("globex"), "user-name").unwrap();
    let account_names = ReservationScope::parse("account", Some("acme"), "user-name").unwrap();
    let account = AggregateRef::parse("account", Some("acme"), "acc-1").unwrap();
    assert_eq!(reserve(&acme_names, &alice()).unwrap(), ReserveOutcome::Taken);
    assert_eq!(reserve(&acme_emails, &bob()).unwrap(), ReserveOutcome::Taken);
    assert_eq!(reserve(&globex_names, &owner("globex", "carol")).unwrap(), ReserveOutcome::Taken);
    assert_eq!(reserve(&account_names, &account).unwrap(), ReserveOutcome::Taken);
    assert_eq!(fx.store.len(), 4);
    let seen = |scope: &ReservationScope| block_on(fx.store.lookup(scope, &k)).unwrap();
    assert_eq!(seen(&acme_names), pending(&alice(), &[1], START + TTL));
    assert_eq!(seen(&acme_emails), pending(&bob(), &[1], START + TTL));
    assert_eq!(seen(&globex_names), pending(&owner("globex", "carol"), &[1], START + TTL));
    assert_eq!(seen(&account_names), pending(&account, &[1], START + TTL));
    // Within one scope the key still conflicts.
    assert_eq!(reserve(&acme_names, &bob()).unwrap(), ReserveOutcome::Conflict);
}

#[test]
fn system_tenant_scope_admits_owners_of_every_tenant_and_keeps_the_key_unique_across_them() {
    let fx = Fx::new();
    let system = ReservationScope::parse("user", None, "email").unwrap();
    let acme = ReservationScope::parse("user", Some("acme"), "email").unwrap();
    let k = key("a@example.com");
    let t = ttl(TTL);
    let reserve =
        |scope: &ReservationScope, who: &AggregateRef| block_on(fx.store.reserve(scope, &k, who, &hold(1), t));
    assert_eq!(reserve(&system, &owner("acme", "a1")).unwrap(), ReserveOutcome::Taken);
    assert_eq!(reserve(&system, &owner("globex", "g1")).unwrap(), ReserveOutcome::Conflict);
    let root = AggregateRef::parse("user", None, "root").unwrap();
    assert_eq!(reserve(&system, &root).unwrap(), ReserveOutcome::Conflict);
    assert_eq!(
        block_on(fx.store.confirm(&system, &k, &owner("globex", "g1"), v(1))).unwrap(),
        ConfirmOutcome::Conflict
    );
    assert_eq!(block_on(fx.store.lookup(&system, &k)).unwrap(), pending(&owner("acme", "a1"), &[1], START + TTL));
    // The tenant's own scope is another scope.
    assert_eq!(reserve(&acme, &owner("acme", "a2")).unwrap(), ReserveOutcome::Taken);
    // The system scope still checks the owner's type.
    let account = AggregateRef::parse("account", Some("acme"), "a1").unwrap();
    assert_eq!(reserve(&system, &account).unwrap_err().invalid(), Some(InvalidArgument::OwnerTypeMismatch));
}

// ---------------------------------------------------------------------------------------------
// sweeping: the bound on rows

/// The bound that [`MemoryStore`] documents on its rows, given the most live reservations it
/// ever held at once.
fn row_bound(peak_live: usize) -> usize {
    SHARDS * SWEEP_FLOOR + 2 * peak_live
}

const ITERATIONS: u64 = 200_000;

#[test]
fn rows_stay_bounded_when_reserved_keys_expire_forever() {
    // One fresh key per millisecond with a ttl of 10 ms: never more than 10 live at once.
    let fx = Fx::new();
    let peak_live = 10;
    let bound = row_bound(peak_live);
    // Without sweeping every key would stay: the bound must be far below the keys reserved.
    assert!(ITERATIONS as usize > 20 * bound);
    for i in 0..ITERATIONS {
        fx.set(START + i);
        let k = key(&format!("user-{i}"));
        let outcome = block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl(peak_live as u64)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
        if i % 1_000 == 999 {
            let len = fx.store.len();
            assert!(len <= bound, "{len} rows after {} reservations, over the bound {bound}", i + 1);
        }
    }
    // A full sweep leaves exactly the live ones.
    assert_eq!(fx.store.sweep(), peak_live);
    assert_eq!(fx.store.len(), peak_live);
}

#[test]
fn rows_stay_bounded_when_attempts_reserve_and_abandon_forever() {
    // Each key gets two attempts; one abandons at once, the other either abandons too (the key
    // is freed) or never comes back (the key expires 10 ms later).
    let fx = Fx::new();
    let peak_live = 10;
    let bound = row_bound(peak_live);
    let t = ttl(peak_live as u64);
    for i in 0..ITERATIONS {
        fx.set(START + i);
        let k = key(&format!("user-{i}"));
        let s = &fx.scope;
        assert_eq!(block_on(fx.store.reserve(s, &k, &alice(), &hold(1), t)).unwrap(), ReserveOutcome::Taken);
        assert_eq!(block_on(fx.store.reserve(s, &k, &alice(), &hold(2), t)).unwrap(), ReserveOutcome::Joined);
        assert_eq!(block_on(fx.store.abandon(s, &k, &alice(), &hold(1))).unwrap(), AbandonOutcome::StillReserved);
        if i % 2 == 0 {
            assert_eq!(block_on(fx.store.abandon(s, &k, &alice(), &hold(2))).unwrap(), AbandonOutcome::Abandoned);
        }
        if i % 1_000 == 999 {
            let len = fx.store.len();
            assert!(len <= bound, "{len} rows after {} attempts, over the bound {bound}", i + 1);
        }
    }
    assert_eq!(fx.store.sweep(), peak_live / 2);
}

#[test]
fn rows_return_to_the_floor_after_a_burst_of_live_reservations() {
    let fx = Fx::new();
    let burst = 5_000;
    for i in 0..burst {
        let k = key(&format!("burst-{i}"));
        let outcome = block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl(TTL)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
    }
    assert_eq!(fx.store.len(), burst);
    // The burst expires; a trickle of short-lived keys follows.
    for i in 0..ITERATIONS / 2 {
        fx.set(START + TTL + i);
        let k = key(&format!("user-{i}"));
        let outcome = block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl(10)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
        if i % 1_000 == 999 {
            assert!(fx.store.len() <= row_bound(burst));
        }
    }
    let len = fx.store.len();
    assert!(len <= row_bound(10), "{len} rows long after the burst expired, over {}", row_bound(10));
}

#[test]
fn sweeps_are_amortised_expired_rows_wait_for_the_threshold() {
    // A shard is swept only when an insertion takes it past max(SWEEP_FLOOR, 2 × the rows its
    // last sweep kept): with many live rows, expired ones pile up to about as many again before
    // a sweep drops them, so sweeping costs O(1) amortised per insertion, not O(live rows).
    let fx = Fx::new();
    let live = SHARDS * 100;
    for i in 0..live {
        let k = key(&format!("long-{i}"));
        let outcome = block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl(u64::MAX)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
    }
    // Short-lived keys, each expired by the time the next one comes: at most one is live.
    let mut most_expired_kept = 0;
    for i in 0..(SHARDS as u64 * 300) {
        fx.set(START + i);
        let k = key(&format!("short-{i}"));
        let outcome = block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl(1)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
        if i % 64 == 0 {
            let len = fx.store.len();
            assert!(len <= row_bound(live + 1), "{len} rows");
            most_expired_kept = most_expired_kept.max(len - live - 1);
        }
    }
    let floor = SHARDS * SWEEP_FLOOR / 2;
    assert!(most_expired_kept >= floor, "at most {most_expired_kept} expired rows waited: sweeping too eagerly");
}

#[test]
fn a_shard_below_its_threshold_is_not_swept() {
    // 20 rows in SHARDS shards: no shard reaches SWEEP_FLOOR, so nothing is swept; the expired rows
    // stay (invisible to lookups, rule D7) until a sweep or an operation on their key.
    let fx = Fx::new();
    for i in 0..20 {
        let outcome = block_on(fx.store.reserve(&fx.scope, &key(&format!("k{i}")), &alice(), &hold(1), ttl(1)));
        assert_eq!(outcome.unwrap(), ReserveOutcome::Taken);
    }
    fx.set(START + 1);
    assert_eq!(
        block_on(fx.store.reserve(&fx.scope, &key("new"), &alice(), &hold(1), ttl(1))).unwrap(),
        ReserveOutcome::Taken
    );
    assert_eq!(fx.store.len(), 21);
    assert_eq!(block_on(fx.store.lookup(&fx.scope, &key("k0"))).unwrap(), None);
    assert_eq!(fx.store.sweep(), 1);
}

#[test]
fn sweep_drops_only_expired_pending_reservations() {
    let fx = Fx::new();
    let t = ttl(TTL);
    for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
        let k = key(name);
        let ttl_i = ttl(TTL * (i as u64 + 1));
        assert_eq!(
            block_on(fx.store.reserve(&fx.scope, &k, &alice(), &hold(1), ttl_i)).unwrap(),
            ReserveOutcome::Taken
        );
    }
    assert_eq!(block_on(fx.store.confirm(&fx.scope, &key("a"), &alice(), v(1))).unwrap(), ConfirmOutcome::Confirmed);
    assert_eq!(block_on(fx.store.reserve(&fx.scope, &key("e"), &bob(), &hold(1), t)).unwrap(), ReserveOutcome::Taken);
    assert_eq!(fx.store.sweep(), 5);
    // At START + 2 TTL: "a" is confirmed, "b" and "e" expired, "c" and "d" live.
    fx.set(START + 2 * TTL);
    assert_eq!(fx.store.len(), 5);
    assert_eq!(fx.store.sweep(), 3);
    assert_eq!(fx.store.len(), 3);
    assert_eq!(block_on(fx.store.lookup(&fx.scope, &key("a"))).unwrap(), confirmed(&alice(), v(1)));
    assert_eq!(block_on(fx.store.lookup(&fx.scope, &key("c"))).unwrap(), pending(&alice(), &[1], START + 3 * TTL));
    fx.set(u64::MAX);
    assert_eq!(fx.store.sweep(), 1);
    assert!(!fx.store.is_empty());
}

// ---------------------------------------------------------------------------------------------
// clocks

#[test]
fn manual_clock_handles_share_one_time() {
    let clock = ManualClock::new(Instant::from_millis(5));
    let handle = clock.clone();
    handle.advance(10);
    assert_eq!(clock.now(), Instant::from_millis(15));
    handle.set(Instant::from_millis(3));
    assert_eq!(clock.now(), Instant::from_millis(3));
    handle.advance(u64::MAX);
    assert_eq!(clock.now(), Instant::MAX);
    assert_eq!(ManualClock::default().now(), Instant::ZERO);
    // A store reads its clock through a reference or an Arc as well.
    fn read<C: Clock>(clock: C) -> Instant {
        clock.now()
    }
    assert_eq!(read(&clock), Instant::MAX);
    assert_eq!(read(Arc::new(clock.clone())), Instant::MAX);
    let store = MemoryStore::with_clock(Arc::new(clock.clone()));
    assert_eq!(store.clock().now(), Instant::MAX);
}

#[test]
fn system_clock_reads_milliseconds_since_the_unix_epoch() {
    // 2020-01-01 and 2200-01-01, in milliseconds since the Unix epoch.
    let now = SystemClock.now().as_millis();
    assert!((1_577_836_800_000..7_258_118_400_000).contains(&now), "{now}");
    let store = MemoryStore::new();
    let scope = ReservationScope::parse("user", Some("acme"), "user-name").unwrap();
    let outcome = block_on(store.reserve(&scope, &key("k"), &alice(), &hold(1), ttl(60_000))).unwrap();
    assert_eq!(outcome, ReserveOutcome::Taken);
    let expires_at =
        block_on(store.lookup(&scope, &key("k"))).unwrap().and_then(|r| r.as_pending().map(Pending::expires_at));
    let expires_at = expires_at.unwrap().as_millis();
    assert!((now + 60_000..now + 60_000 + 3_600_000).contains(&expires_at), "{expires_at} vs {now}");
    assert!(MemoryStore::default().is_empty());
}
