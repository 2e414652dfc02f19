//! The linearizability checker on histories written by hand: it accepts a history that only a
//! reordering of overlapping calls explains, and rejects ones no order explains, reporting the
//! shortest failing prefix as a per-thread timeline.

use reservation_conformance::START;
use reservation_conformance::linearizability::{ATOMICITY, Call, Event, Names, Return, check_history};
use reservation_store::{Operation, Outcome, ReleaseVersion, Ttl, Version};

fn event(thread: usize, called: u64, returned: u64, call: Call, ret: Return) -> Event {
    Event { thread, round: 0, now: START, key: 0, call, ret, called, returned }
}

const ALICE: u8 = 0;
const BOB: u8 = 2;

fn reserve(owner: u8) -> Call {
    Call::Op(Operation::Reserve { owner, hold: 0, ttl: Ttl::from_millis(10).unwrap() })
}

#[test]
fn overlapping_calls_may_take_effect_in_either_order() {
    let names = Names::new();
    // Alice's call starts first, but Bob's takes effect first: allowed, the calls overlap.
    let history = [
        event(0, 0, 3, reserve(ALICE), Return::Outcome(Outcome::Conflict)),
        event(1, 1, 2, reserve(BOB), Return::Outcome(Outcome::Taken)),
    ];
    check_history(&names, &history).unwrap_or_else(|f| panic!("{f}"));
}

#[test]
fn two_owners_both_taking_one_key_is_not_linearizable() {
    let names = Names::new();
    let history = [
        event(0, 0, 3, reserve(ALICE), Return::Outcome(Outcome::Taken)),
        event(1, 1, 2, reserve(BOB), Return::Outcome(Outcome::Taken)),
    ];
    let failure = check_history(&names, &history).expect_err("both took the key");
    let message = failure.to_string();
    assert!(message.contains(ATOMICITY), "{message}");
    assert!(message.contains("thread 0:") && message.contains("thread 1:"), "{message}");
    assert!(message.contains("first 2 operations"), "{message}");
}

#[test]
fn an_effect_must_be_seen_by_every_later_call() {
    let names = Names::new();
    // The reserve returned before the lookup was called, so the lookup must see it.
    let history = [
        event(0, 0, 1, reserve(ALICE), Return::Outcome(Outcome::Taken)),
        event(1, 2, 3, Call::Lookup, Return::Lookup(None)),
    ];
    assert!(check_history(&names, &history).is_err());
    // Overlapping, the lookup may have run first.
    let history = [
        event(0, 0, 2, reserve(ALICE), Return::Outcome(Outcome::Taken)),
        event(1, 1, 3, Call::Lookup, Return::Lookup(None)),
    ];
    check_history(&names, &history).unwrap_or_else(|f| panic!("{f}"));
}

#[test]
fn the_report_shows_the_shortest_failing_prefix() {
    let names = Names::new();
    let confirm = Call::Op(Operation::Confirm { owner: ALICE, version: Version::from_u64(1) });
    let release = Call::Op(Operation::Release { owner: ALICE, version: ReleaseVersion::Any });
    let history = [
        event(0, 0, 1, reserve(ALICE), Return::Outcome(Outcome::Taken)),
        event(1, 2, 3, reserve(BOB), Return::Outcome(Outcome::Conflict)),
        // Bob takes a key Alice holds live: the first operation no order explains.
        event(1, 4, 5, reserve(BOB), Return::Outcome(Outcome::Taken)),
        event(0, 6, 7, confirm, Return::Outcome(Outcome::Conflict)),
        event(0, 8, 9, release, Return::Outcome(Outcome::NotHeld)),
    ];
    let failure = check_history(&names, &history).expect_err("Bob took a held key");
    let message = failure.to_string();
    assert!(message.contains("first 3 operations"), "{message}");
    assert!(!message.contains("confirm(k0"), "the prefix stops at the failing call:\n{message}");
    assert_eq!(failure.rule, Some(reservation_store::Rule::R5), "{message}");
}

/// Names without owners (or holds) are a failure that says so, not a panic.
#[test]
fn names_without_owners_fail_instead_of_panicking() {
    let mut names = Names::new();
    names.owners.clear();
    let history = vec![event(0, 0, 1, reserve(ALICE), Return::Outcome(Outcome::Taken))];
    let failure = check_history(&names, &history).unwrap_err().to_string();
    assert!(failure.contains("no owners or no holds"), "{failure}");
}

/// A long multi-byte label still gives a valid namespace.
#[test]
fn unique_namespace_takes_any_label() {
    for label in ["", "é".repeat(300).as_str(), "🦀".repeat(100).as_str(), "x".repeat(1000).as_str()] {
        let ns = reservation_conformance::unique_namespace(label);
        assert!(ns.as_str().len() <= reservation_store::MAX_NAME_LEN, "{label:?}");
    }
}
