//! The key's lock, proven by the linearizability check under eight connections, and the planted
//! bug of a lock that misses absent rows, caught by it.

use reservation_conformance::linearizability::{self, ATOMICITY};
use reservation_conformance::{Harness, START};
use reservation_postgres::Time;
use reservation_store::ManualClock;

use crate::{broken_harness, harness};

#[test]
fn advisory_lock_is_linearizable_under_eight_connections() {
    let Some(h) = harness() else { return };
    let stats = linearizability::run(&h).unwrap_or_else(|f| panic!("{f}"));
    assert!(stats.ops >= 3_000, "one history at least: {stats:?}");
    let connections = h.store_with(Time::Local(ManualClock::new(START))).connections();
    assert!((8..=16).contains(&connections), "the check ran on {connections} connections, of at most 16");
    assert_eq!(h.settings().threads, 8);
}

#[test]
fn row_lock_alone_misses_the_absent_row_and_fails_atomicity() {
    let Some(h) = broken_harness() else { return };
    let failure =
        linearizability::run(&h).expect_err("two first reserves of a free key both won, and the check passed");
    assert_eq!(failure.property, Some(ATOMICITY), "{failure}");
}
