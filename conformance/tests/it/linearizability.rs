//! The linearizability checker on histories written by hand: it accepts a history that only a
//! reordering of overlapping calls explains, and rejects ones no order explains, reporting the
//! shortest failing prefix as a per-thread timeline.

use reservation_conformance::START;
use reservation_conformance::linearizability::{
    ATOMICITY, Call, Event, Names, Return, StorageErrors, check_history, check_history_with,
};
use reservation_store::spec::Reservation;
use reservation_store::{Instant, Operation, Outcome, ReleaseVersion, Ttl, Version};

fn event(thread: usize, called: u64, returned: u64, call: Call, ret: Return) -> Event {
    Event { thread, round: 0, clock_at_call: START, clock_at_return: START, key: 0, call, ret, called, returned }
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
    assert_eq!(failure.rule, Some(reservation_store::rules::Rule::R5), "{message}");
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

/// An event whose clock read `from` before its call and `to` after its return.
fn timed(thread: usize, called: u64, returned: u64, window: (u64, u64), call: Call, ret: Return) -> Event {
    let at = |ms: u64| Instant::from_millis(START.as_millis() + ms);
    Event { clock_at_call: at(window.0), clock_at_return: at(window.1), ..event(thread, called, returned, call, ret) }
}

/// Alice's reservation as a lookup shows it: pending with hold 0, expiring at `START + ms`.
fn alices_pending(names: &Names, ms: u64) -> Return {
    let expires = Instant::from_millis(START.as_millis() + ms);
    let holds = std::iter::once(names.holds[0].clone()).collect();
    Return::Lookup(Reservation::pending(names.owners[0].clone(), holds, expires))
}

/// An operation acts at an instant of its clock window: a reserve whose clock read 0 before and
/// 1 after may have acted at either, and a lookup shows which.
#[test]
fn an_operation_acts_at_an_instant_of_its_clock_window() {
    let names = Names::new();
    for acted in [0, 1] {
        let history = [
            timed(0, 0, 1, (0, 1), reserve(ALICE), Return::Outcome(Outcome::Taken)),
            timed(0, 2, 3, (1, 1), Call::Lookup, alices_pending(&names, 10 + acted)),
        ];
        check_history(&names, &history).unwrap_or_else(|f| panic!("acted at {acted}: {f}"));
    }
    // Outside the window: no instant explains an expiry of START + 12.
    let history = [
        timed(0, 0, 1, (0, 1), reserve(ALICE), Return::Outcome(Outcome::Taken)),
        timed(0, 2, 3, (1, 1), Call::Lookup, alices_pending(&names, 12)),
    ];
    assert!(check_history(&names, &history).is_err());
}

/// Hole 3 of the suite's review: a store that reads its clock before it takes its lock can act at
/// an instant earlier than an operation that took effect before it. Here Bob's reserve acted at
/// 10, when Alice's reservation (taken at 0 for 10 ms) had expired, and returned; Alice's join then
/// acted at 9, the instant her store read before it waited for the lock, and extended a
/// reservation Bob had already taken. Each result alone has an instant; no order has both.
#[test]
fn an_operation_never_acts_before_one_that_took_effect_earlier() {
    let names = Names::new();
    let alice_again = Call::Op(Operation::Reserve { owner: ALICE, hold: 1, ttl: Ttl::from_millis(10).unwrap() });
    let history = [
        timed(0, 0, 1, (0, 0), reserve(ALICE), Return::Outcome(Outcome::Taken)),
        // Alice's second attempt: called while the clock read 9, returned after 10.
        timed(0, 2, 7, (9, 10), alice_again, Return::Outcome(Outcome::Joined)),
        // Bob's reserve, wholly inside Alice's call, at 10: Alice's reservation had expired.
        timed(1, 3, 4, (10, 10), reserve(BOB), Return::Outcome(Outcome::Taken)),
    ];
    let failure = check_history(&names, &history).expect_err("Alice joined at 9 after Bob took the key at 10");
    assert!(failure.to_string().contains(ATOMICITY), "{failure}");
    // Had Alice's join acted at 9 before Bob's call, Bob would have met a live reservation.
    let history = [
        timed(0, 0, 1, (0, 0), reserve(ALICE), Return::Outcome(Outcome::Taken)),
        timed(0, 2, 7, (9, 10), alice_again, Return::Outcome(Outcome::Joined)),
        timed(1, 3, 4, (10, 10), reserve(BOB), Return::Outcome(Outcome::Conflict)),
    ];
    check_history(&names, &history).unwrap_or_else(|f| panic!("{f}"));
}

fn storage(indeterminate: bool) -> Return {
    Return::Storage { message: "connection lost".into(), indeterminate }
}

/// An indeterminate operation may have taken effect or not: a later lookup may show either; a
/// determinate storage error did not take effect, so a lookup that shows it fails.
#[test]
fn storage_errors_under_tolerated_faults() {
    let names = Names::new();
    for (indeterminate, seen, ok) in
        [(true, true, true), (true, false, true), (false, false, true), (false, true, false)]
    {
        let lookup = if seen { alices_pending(&names, 10) } else { Return::Lookup(None) };
        let history = [event(0, 0, 1, reserve(ALICE), storage(indeterminate)), event(0, 2, 3, Call::Lookup, lookup)];
        let result = check_history_with(&names, &history, StorageErrors::Tolerated);
        assert_eq!(result.is_ok(), ok, "indeterminate {indeterminate}, seen {seen}: {result:?}");
        // The suite's own run forbids them all.
        let forbidden = check_history(&names, &history).expect_err("a storage error fails the suite's own run");
        assert!(forbidden.to_string().contains("connection lost"), "{forbidden}");
    }
}

/// An indeterminate operation takes effect before its error returns, or never: a lookup that
/// returned before its call cannot see it.
#[test]
fn an_indeterminate_operation_takes_effect_within_its_call() {
    let names = Names::new();
    let history =
        [event(0, 0, 1, Call::Lookup, alices_pending(&names, 10)), event(1, 2, 3, reserve(ALICE), storage(true))];
    assert!(check_history_with(&names, &history, StorageErrors::Tolerated).is_err());
}

/// A history whose clock went back during an operation is refused, not searched.
#[test]
fn a_clock_that_went_back_is_reported() {
    let names = Names::new();
    let history = [timed(0, 0, 1, (5, 4), reserve(ALICE), Return::Outcome(Outcome::Taken))];
    let failure = check_history(&names, &history).unwrap_err().to_string();
    assert!(failure.contains("clock went back"), "{failure}");
}
