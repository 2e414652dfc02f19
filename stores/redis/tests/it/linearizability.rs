//! The optimistic transaction, proven by the linearizability check under eight connections, and
//! the planted bug of a store that does not watch its key, caught by it.

use reservation_conformance::linearizability::{self, ATOMICITY};
use reservation_conformance::{Harness, START};
use reservation_redis::{RedisOptions, Time};
use reservation_store::ManualClock;

use crate::{harness, harness_with};

#[test]
fn watch_multi_exec_is_linearizable_under_eight_connections() {
    let Some(h) = harness() else { return };
    let idle = h.store_with(Time::Local(ManualClock::new(START))).connections();
    assert_eq!(idle, 1, "connecting leaves the one connection it made in the pool");
    let stats = linearizability::run(&h).unwrap_or_else(|f| panic!("{f}"));
    assert!(stats.ops >= 3_000, "one history at least: {stats:?}");
    let connections = h.store_with(Time::Local(ManualClock::new(START))).connections();
    assert!((8..=16).contains(&connections), "the check ran on {connections} connections, of at most 16");
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

#[test]
fn without_writing_back_what_changed_nothing_a_stale_clock_decision_lands_late() {
    // The planted bug: an operation that changes nothing does not write its key, so a reserve
    // that read t+9 can commit its join after a lookup saw the key expire at t+10. The suite's
    // D10 check holds the reserve between its clock reading and its EXEC to show it; the store
    // itself passes that check (the conformance tests run it).
    let mut options = RedisOptions::default();
    options.touch = false;
    let Some(h) = harness_with(options) else { return };
    let failure = reservation_conformance::checks::d10(&h).expect_err("a store whose reads do not write passed D10");
    assert_eq!(failure.rule, Some(reservation_store::Rule::D10), "{failure}");
    assert!(failure.to_string().contains("Joined"), "{failure}");
}
