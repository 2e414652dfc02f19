//! D10 across a restart: the instant of every change survives a reopen, per scope, so a store
//! reopened on a clock set back keeps an expired reservation expired; and the suite's check of
//! it catches the planted bug that forgets the instant.

use reservation_conformance::checks;
use reservation_conformance::services::service;
use reservation_postgres::{PostgresHarness, PostgresOptions, PostgresStore, Time};
use reservation_store::rules::Rule;
use reservation_store::spec::Reservation;
use reservation_store::*;

use crate::harness_with;

/// Where the clock starts, and the TTL of bob's reservation.
const T0: u64 = 1_000_000;
const TTL: u64 = 10;

fn who(id: &str) -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), id).unwrap()
}

/// On the harness's schema: bob reserves `bob` at `T0` for `TTL`; at `T0 + 2·TTL`, when bob's
/// reservation has expired, alice reserves `alice` (a change, whose instant the store persists).
/// Then the store's pool is closed, as a process that dies closes its connections, and a new store
/// connects to the same schema on a clock set back to `T0`. Returns what a lookup of bob's key
/// shows there, the outcome of carol's reserve of it, and what the key shows afterwards.
fn after_a_restart(h: &PostgresHarness) -> (Option<StoredReservation>, ReserveOutcome, Option<StoredReservation>) {
    let scope = ReservationScope::new(
        AggregateType::new("user").unwrap(),
        Tenant::id("acme").unwrap(),
        reservation_conformance::unique_namespace("d10-restart"),
    );
    let (bob_key, ttl, hold) = (Key::new("bob").unwrap(), Ttl::from_millis(TTL).unwrap(), HoldId::new("h").unwrap());
    let clock = ManualClock::new(Instant::from_millis(T0));
    let first = h.store_with(Time::Local(clock.clone()));
    h.runtime().block_on(async {
        assert_eq!(first.reserve(&scope, &bob_key, &who("bob-id"), &hold, ttl).await.unwrap(), ReserveOutcome::Taken);
        clock.set(Instant::from_millis(T0 + 2 * TTL));
        let alice_key = Key::new("alice").unwrap();
        assert_eq!(
            first.reserve(&scope, &alice_key, &who("alice-id"), &hold, ttl).await.unwrap(),
            ReserveOutcome::Taken
        );
    });
    drop(first);
    let back = ManualClock::new(Instant::from_millis(T0));
    h.runtime().block_on(async {
        let reopened = PostgresStore::connect(h.url(), Time::Local(back), h.options().clone()).await.unwrap();
        let shown = reopened.lookup(&scope, &bob_key).await.unwrap();
        let outcome = reopened.reserve(&scope, &bob_key, &who("carol-id"), &hold, ttl).await.unwrap();
        let after = reopened.lookup(&scope, &bob_key).await.unwrap();
        reopened.close();
        (shown, outcome, after)
    })
}

/// D10 across a restart (and P1): reopened on a clock set back to `T0`, the store decides at
/// `T0 + 2·TTL`, the instant of the scope's latest change, all the same: bob's reservation stays
/// expired, carol takes the key, and her reservation expires a TTL after `T0 + 2·TTL`. The planted
/// bug that forgets the instant shows bob's reservation live again and refuses carol: the test
/// catches it.
#[test]
fn d10_clock_survives_a_restart() {
    let Some(h) = harness_with(PostgresOptions::default()) else { return };
    let hold = HoldId::new("h").unwrap();
    let (shown, outcome, after) = after_a_restart(&h);
    assert_eq!(shown, None, "bob's reservation expired before the restart, and is live again after it");
    assert_eq!(outcome, ReserveOutcome::Taken);
    let expected = Reservation::pending(who("carol-id"), [hold.clone()].into(), Instant::from_millis(T0 + 3 * TTL));
    assert_eq!(after, expected, "carol's reservation was decided at an instant before the restart's");

    // The planted bug: what this test exists to catch.
    let Some(broken) = harness_with(PostgresOptions::default().broken_forgets_clock()) else { return };
    let (shown, outcome, _) = after_a_restart(&broken);
    let live = Reservation::pending(who("bob-id"), [hold].into(), Instant::from_millis(T0 + TTL));
    assert_eq!(shown, live, "the store that forgets its clock should show bob's reservation live again");
    assert_eq!(outcome, ReserveOutcome::Conflict);
}

/// The suite's check of D10 across a restart has teeth here: on the planted bug, it fails on D10.
#[test]
fn d10_restart_catches_a_store_that_forgets_its_clock() {
    let Some(h) = service(
        "PostgreSQL",
        PostgresHarness::connect(&reservation_postgres::pg_url(), PostgresOptions::default().broken_forgets_clock()),
    ) else {
        return;
    };
    let failure = checks::d10_restart(&h, &reservation_conformance::Settings::default())
        .expect_err("a store that forgets its clock passed the check of D10 across a restart");
    assert_eq!(failure.rule, Some(Rule::D10), "{failure}");
}
