//! The optimistic transaction, proven by the linearizability check under eight connections, and
//! the planted bug of a store that does not watch its key, caught by it.

use reservation_conformance::linearizability::{self, ATOMICITY};
use reservation_conformance::{Harness, START};
use reservation_redis::{RedisOptions, Time};
use std::sync::{Mutex, mpsc};

use reservation_conformance::unique_namespace;
use reservation_store::{
    AggregateRef, Clock, HoldId, Instant, Key, ManualClock, ReservationScope, ReservationStore, ReserveOutcome,
    StoredReservation, Ttl,
};

use crate::{harness, harness_with};

#[test]
fn watch_multi_exec_is_linearizable_under_eight_connections() {
    let Some(h) = harness() else { return };
    let stats = linearizability::run(&h).unwrap_or_else(|f| panic!("{f}"));
    assert!(stats.ops >= 3_000, "one history at least: {stats:?}");
    let connections = h.store_with(Time::Local(ManualClock::new(START))).connections();
    assert!(connections >= 8, "the check ran on {connections} connections");
    assert_eq!(h.settings().threads, 8);
}

#[test]
fn without_watch_two_writers_both_win_and_atomicity_fails() {
    let mut options = RedisOptions::default();
    options.watch = false;
    let Some(h) = harness_with(options) else { return };
    let failure = linearizability::run(&h).expect_err("a store without WATCH passed the check");
    assert_eq!(failure.property, Some(ATOMICITY), "{failure}");
}

/// A clock that, at its first reading, says so and waits for a go before it answers: it holds
/// an operation between its reading of the clock and its write.
struct Gate {
    clock: ManualClock,
    reached: Mutex<Option<mpsc::Sender<()>>>,
    go: Mutex<mpsc::Receiver<()>>,
}

impl Clock for Gate {
    fn now(&self) -> Instant {
        let now = self.clock.now();
        if let Some(reached) = self.reached.lock().expect("not poisoned").take() {
            reached.send(()).expect("the test waits");
            self.go.lock().expect("not poisoned").recv().expect("the test says go");
        }
        now
    }
}

/// A owns a pending key that expires at START+10. At START+9 A reserves it again with a second
/// hold (a join, by the clock it reads), but is held between its clock reading and its write;
/// the clock moves to START+10, a lookup finds the key expired, and only then is A let go. What
/// did A's reserve return?
fn reserve_held_across_an_expiry(touch: bool) -> Option<(ReserveOutcome, Option<StoredReservation>)> {
    let mut options = RedisOptions::default();
    options.touch = touch;
    let h = harness_with(options)?;
    let clock = ManualClock::new(START);
    let store = h.store_with(Time::Local(clock.clone()));
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace("held").as_str()).expect("scope");
    let key = Key::new("k").expect("key");
    let a = AggregateRef::parse("user", Some("acme"), "a").expect("owner");
    let (h1, h2) = (HoldId::new("h1").expect("hold"), HoldId::new("h2").expect("hold"));
    let ttl = Ttl::from_millis(10).expect("non-zero");
    h.runtime().block_on(store.reserve(&scope, &key, &a, &h1, ttl)).expect("reserved");
    clock.set(START.saturating_add_millis(9));
    let (reached_tx, reached) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    let gate = Gate { clock: clock.clone(), reached: Mutex::new(Some(reached_tx)), go: Mutex::new(go_rx) };
    let held = h.store_with(Time::Local(gate));
    let outcome = std::thread::scope(|s| {
        let writer = s.spawn(|| h.runtime().block_on(held.reserve(&scope, &key, &a, &h2, ttl)));
        reached.recv().expect("the writer read the clock");
        clock.set(START.saturating_add_millis(10));
        let seen = h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up");
        assert_eq!(seen, None, "at START+10 the pending reservation has expired (D1, D7)");
        go.send(()).expect("the writer waits");
        writer.join().expect("no panic").expect("reserved")
    });
    let after = h.runtime().block_on(store.lookup(&scope, &key)).expect("looked up");
    Some((outcome, after))
}

#[test]
fn a_read_between_a_writers_clock_and_its_exec_makes_it_decide_again() {
    let Some((outcome, after)) = reserve_held_across_an_expiry(true) else { return };
    // The lookup wrote the key back, so A's EXEC failed; A read the clock again (START+10) and
    // took the expired key afresh (R2): only its new hold.
    assert_eq!(outcome, ReserveOutcome::Taken);
    let pending = after.expect("reserved").as_pending().cloned().expect("pending");
    assert_eq!(pending.holds().iter().map(|h| h.as_str()).collect::<Vec<_>>(), ["h2"]);
}

#[test]
fn without_writing_back_what_changed_nothing_a_stale_clock_decision_lands_late() {
    let Some((outcome, _)) = reserve_held_across_an_expiry(false) else { return };
    // The planted bug: A's join, decided at START+9, lands after a lookup saw the key expired at
    // START+10. No order of the three operations explains it: the reason every operation writes.
    assert_eq!(outcome, ReserveOutcome::Joined);
}
