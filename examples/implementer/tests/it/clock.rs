//! D10 across a restart: the asynchronous store's database keeps the instant of every change, per
//! scope, through a kill and restart, so a store connected again on a clock set back keeps an
//! expired reservation expired; and the suite's check of it catches the planted bug that forgets
//! the instants.

use my_crate::{MyAsyncStore, Storage};
use reservation_conformance::{Capabilities, Harness, checks};
use reservation_store::rules::Rule;
use reservation_store::spec::Reservation;
use reservation_store::*;

/// Where the clock starts, and the TTL of bob's reservation.
const T0: u64 = 1_000_000;
const TTL: u64 = 10;

fn who(id: &str) -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), id).unwrap()
}

/// Bob reserves `bob` at `T0` for `TTL`; at `T0 + 2·TTL`, when bob's reservation has expired,
/// alice reserves `alice` (a change). Then the server is killed and restarted, and a new store
/// connects on a clock set back to `T0`. Returns what a lookup of bob's key shows there, the
/// outcome of carol's reserve of it, and what the key shows afterwards.
fn after_a_crash(storage: &Storage) -> (Option<StoredReservation>, ReserveOutcome, Option<StoredReservation>) {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let scope = ReservationScope::parse("user", Some("acme"), "user-name").unwrap();
    let (bob_key, ttl, hold) = (Key::new("bob").unwrap(), Ttl::from_millis(TTL).unwrap(), HoldId::new("h").unwrap());
    let clock = ManualClock::new(Instant::from_millis(T0));
    runtime.block_on(async {
        let first = MyAsyncStore::connect(storage, clock.clone()).await;
        assert_eq!(first.reserve(&scope, &bob_key, &who("bob-id"), &hold, ttl).await.unwrap(), ReserveOutcome::Taken);
        clock.set(Instant::from_millis(T0 + 2 * TTL));
        let alice_key = Key::new("alice").unwrap();
        assert_eq!(
            first.reserve(&scope, &alice_key, &who("alice-id"), &hold, ttl).await.unwrap(),
            ReserveOutcome::Taken
        );
    });
    storage.kill_and_restart().unwrap();
    runtime.block_on(async {
        let reopened = MyAsyncStore::connect(storage, ManualClock::new(Instant::from_millis(T0))).await;
        let shown = reopened.lookup(&scope, &bob_key).await.unwrap();
        let outcome = reopened.reserve(&scope, &bob_key, &who("carol-id"), &hold, ttl).await.unwrap();
        let after = reopened.lookup(&scope, &bob_key).await.unwrap();
        (shown, outcome, after)
    })
}

/// D10 across a restart (and P1): after the server's restart, on a clock set back to `T0`, the
/// store decides at `T0 + 2·TTL`, the instant of the scope's latest change: bob's reservation
/// stays expired, carol takes the key, and her reservation expires a TTL after `T0 + 2·TTL`. The
/// planted bug that forgets the instants shows bob's reservation live again and refuses carol.
#[test]
fn d10_clock_survives_a_crash() {
    let hold = HoldId::new("h").unwrap();
    let (shown, outcome, after) = after_a_crash(&Storage::default());
    assert_eq!(shown, None, "bob's reservation expired before the crash, and is live again after it");
    assert_eq!(outcome, ReserveOutcome::Taken);
    let expected = Reservation::pending(who("carol-id"), [hold.clone()].into(), Instant::from_millis(T0 + 3 * TTL));
    assert_eq!(after, expected, "carol's reservation was decided at an instant before the crash's");

    // The planted bug: what this test exists to catch.
    let (shown, outcome, _) = after_a_crash(&Storage::default().broken_forgets_clocks());
    let live = Reservation::pending(who("bob-id"), [hold].into(), Instant::from_millis(T0 + TTL));
    assert_eq!(shown, live, "the store that forgets its clock should show bob's reservation live again");
    assert_eq!(outcome, ReserveOutcome::Conflict);
}

/// The asynchronous store's harness on a database that keeps no instant: the planted bug.
struct ForgetfulHarness {
    runtime: tokio::runtime::Runtime,
    storage: Storage,
}

impl Harness for ForgetfulHarness {
    type Store = MyAsyncStore;
    fn store(&self, clock: ManualClock) -> MyAsyncStore {
        self.runtime.block_on(MyAsyncStore::connect(&self.storage, clock))
    }
    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }
    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(true)
    }
}

/// The suite's check of D10 across a restart has teeth here: on the planted bug, it fails on D10.
#[test]
fn d10_restart_catches_a_store_that_forgets_its_clock() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
    let h = ForgetfulHarness { runtime, storage: Storage::default().broken_forgets_clocks() };
    let failure = checks::d10_restart(&h, &reservation_conformance::Settings::default())
        .expect_err("a store that forgets its clock passed the check of D10 across a restart");
    assert_eq!(failure.rule, Some(Rule::D10), "{failure}");
}
