//! D10 across a restart: the instant of every change survives a crash of the server (killed,
//! restarted on its append-only file), per scope, so a store reconnected on a clock set back
//! keeps an expired reservation expired; and the suite's check of it catches the planted bug that
//! forgets the instant.

use reservation_conformance::{START, checks};
use reservation_redis::{RedisHarness, RedisOptions, RedisStore, Time};
use reservation_store::rules::Rule;
use reservation_store::spec::Reservation;
use reservation_store::*;

use crate::durable_harness;

/// The TTL of bob's reservation.
const TTL: u64 = 10;

fn who(id: &str) -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), id).unwrap()
}

/// On the harness's server of its own, with `options` under the harness's prefix: bob reserves
/// `bob` at `START` for `TTL`; at `START + 2·TTL`, when bob's reservation has expired, alice
/// reserves `alice` (a change, whose instant the store persists). Then the server is killed and
/// restarted on its append-only file, and a new store connects on a clock set back to `START`.
/// Returns what a lookup of bob's key shows there, the outcome of carol's reserve of it, and what
/// the key shows afterwards.
fn after_a_crash(
    h: &RedisHarness,
    options: RedisOptions,
) -> (Option<StoredReservation>, ReserveOutcome, Option<StoredReservation>) {
    let options = options.with_prefix(h.options().prefix.clone());
    let scope = ReservationScope::new(
        AggregateType::new("user").unwrap(),
        Tenant::id("acme").unwrap(),
        reservation_conformance::unique_namespace("d10-crash"),
    );
    let (bob_key, ttl, hold) = (Key::new("bob").unwrap(), Ttl::from_millis(TTL).unwrap(), HoldId::new("h").unwrap());
    let clock = ManualClock::new(START);
    h.runtime().block_on(async {
        let first = RedisStore::connect(h.url(), Time::Local(clock.clone()), options.clone()).await.unwrap();
        assert_eq!(first.reserve(&scope, &bob_key, &who("bob-id"), &hold, ttl).await.unwrap(), ReserveOutcome::Taken);
        clock.set(START.saturating_add_millis(2 * TTL));
        let alice_key = Key::new("alice").unwrap();
        assert_eq!(
            first.reserve(&scope, &alice_key, &who("alice-id"), &hold, ttl).await.unwrap(),
            ReserveOutcome::Taken
        );
    });
    h.server().expect("a server of the harness's own").restart().expect("the server restarted");
    h.runtime().block_on(async {
        let reopened = RedisStore::connect(h.url(), Time::Local(ManualClock::new(START)), options).await.unwrap();
        let shown = reopened.lookup(&scope, &bob_key).await.unwrap();
        let outcome = reopened.reserve(&scope, &bob_key, &who("carol-id"), &hold, ttl).await.unwrap();
        let after = reopened.lookup(&scope, &bob_key).await.unwrap();
        (shown, outcome, after)
    })
}

/// D10 across a restart (and P1): after the server's crash, on a clock set back to `START`, the
/// store decides at `START + 2·TTL`, the instant of the scope's latest change, all the same:
/// bob's reservation stays expired, carol takes the key, and her reservation expires a TTL after
/// `START + 2·TTL`. The planted bug that forgets the instant shows bob's reservation live again
/// and refuses carol: the test catches it.
#[test]
fn d10_clock_survives_a_server_crash() {
    let Some(h) = durable_harness() else { return };
    let hold = HoldId::new("h").unwrap();
    let (shown, outcome, after) = after_a_crash(&h, RedisOptions::default());
    assert_eq!(shown, None, "bob's reservation expired before the crash, and is live again after it");
    assert_eq!(outcome, ReserveOutcome::Taken);
    let expected = Reservation::pending(who("carol-id"), [hold.clone()].into(), START.saturating_add_millis(3 * TTL));
    assert_eq!(after, expected, "carol's reservation was decided at an instant before the crash's");

    // The planted bug: what this test exists to catch.
    let (shown, outcome, _) = after_a_crash(&h, RedisOptions::default().broken_forgets_clock());
    let live = Reservation::pending(who("bob-id"), [hold].into(), START.saturating_add_millis(TTL));
    assert_eq!(shown, live, "the store that forgets its clock should show bob's reservation live again");
    assert_eq!(outcome, ReserveOutcome::Conflict);
}

/// The suite's check of D10 across a restart has teeth here: on the planted bug, on a server
/// killed at every reopen, it fails on D10.
#[test]
fn d10_restart_catches_a_store_that_forgets_its_clock() {
    let Some(h) = reservation_conformance::services::service(
        "redis-server (for the append-only server of the durable tests)",
        RedisHarness::durable_with(RedisOptions::default().broken_forgets_clock()),
    ) else {
        return;
    };
    let failure = checks::d10_restart(&h, &reservation_conformance::Settings::default())
        .expect_err("a store that forgets its clock passed the check of D10 across a restart");
    assert_eq!(failure.rule, Some(Rule::D10), "{failure}");
}
