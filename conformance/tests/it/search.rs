//! The judge's search ([`reservation_conformance::search`]): the segmented search against a reference that tries every order of every instant, on random
//! small histories: the same verdict, the same shortest failing prefix, the same final states.

use std::collections::BTreeSet;

use proptest::prelude::*;
use reservation_store::{Instant, Operation, Outcome, ReleaseVersion, StoredReservation, Ttl, Version, spec};

use reservation_conformance::START;
use reservation_conformance::linearizability::{Call, Event, Names, Return};
use reservation_conformance::search::{Undecided, final_states, linearizable, segments, shortest_failing_prefix};

fn owner(names: &Names, i: u8) -> &reservation_store::AggregateRef {
    &names.owners[usize::from(i) % names.owners.len()]
}

fn hold(names: &Names, i: u8) -> &reservation_store::HoldId {
    &names.holds[usize::from(i) % names.holds.len()]
}

/// Whether `ops[i]` may be placed next: every operation that returned before it was called is
/// placed.
fn minimal(ops: &[&Event], done: &[bool], i: usize) -> bool {
    !done[i] && (0..ops.len()).all(|j| done[j] || ops[j].returned > ops[i].called)
}

/// Every final state of every order of `ops` that respects real time, each operation at an
/// instant of its window never before the one placed before it, an unknown one placed or not.
fn reference(names: &Names, ops: &[&Event]) -> BTreeSet<Option<StoredReservation>> {
    fn go(
        names: &Names,
        ops: &[&Event],
        done: &mut Vec<bool>,
        state: Option<StoredReservation>,
        last: Instant,
        out: &mut BTreeSet<Option<StoredReservation>>,
    ) {
        if done.iter().all(|d| *d) {
            out.insert(state);
            return;
        }
        for i in 0..ops.len() {
            if !minimal(ops, done, i) {
                continue;
            }
            let e = ops[i];
            done[i] = true;
            let any = matches!(e.ret, Return::Storage { indeterminate: true, .. });
            if any {
                go(names, ops, done, state.clone(), last, out);
            }
            let mut now = e.clock_at_call.max(last);
            while now <= e.clock_at_return {
                let (next, ok) = match e.call {
                    Call::Op(op) => {
                        let s = spec::apply(state.clone(), now, op.map(|o| owner(names, o), |h| hold(names, h)));
                        (s.next, any || e.ret == Return::Outcome(s.outcome))
                    }
                    Call::Lookup => {
                        let seen = spec::lookup(state.as_ref(), now).cloned();
                        (state.clone(), any || e.ret == Return::Lookup(seen))
                    }
                };
                if ok {
                    go(names, ops, done, next, now, out);
                }
                now = now.saturating_add_millis(1);
            }
            done[i] = false;
        }
    }
    let mut out = BTreeSet::new();
    go(names, ops, &mut vec![false; ops.len()], None, Instant::ZERO, &mut out);
    out
}

/// One operation drawn: its start and length on a shared timeline, its call, and how its result
/// is made (true to the order drawn, perturbed, or unknown).
type Drawn = (u64, u64, u8, u8, u8, u8, u8);

fn call_of(kind: u8, owner: u8, hold: u8, n: u8) -> Call {
    let (owner, hold) = (owner % 3, hold % 2);
    match kind % 6 {
        0 | 1 => Call::Op(Operation::Reserve { owner, hold, ttl: Ttl::from_millis(1 + u64::from(n % 5)).unwrap() }),
        2 => Call::Op(Operation::Confirm { owner, version: Version::from_u64(u64::from(n % 3)) }),
        3 => Call::Op(Operation::Release {
            owner,
            version: if n.is_multiple_of(2) {
                ReleaseVersion::Any
            } else {
                ReleaseVersion::At(Version::from_u64(u64::from(n % 3)))
            },
        }),
        4 => Call::Op(Operation::Abandon { owner, hold }),
        _ => Call::Lookup,
    }
}

/// A history of the drawn operations: results given by one order that respects real time (each
/// at the start of its window), then some perturbed or made unknown.
fn history(names: &Names, drawn: &[Drawn]) -> Vec<Event> {
    let mut events: Vec<Event> = drawn
        .iter()
        .enumerate()
        .map(|(i, &(start, len, kind, owner, hold, n, _))| {
            let i = i as u64;
            Event {
                thread: i as usize,
                round: 0,
                clock_at_call: START.saturating_add_millis(start),
                clock_at_return: START.saturating_add_millis(start + len / 3),
                key: 0,
                call: call_of(kind, owner, hold, n),
                ret: Return::Lookup(None),
                called: 100 * start + i,
                returned: 100 * (start + len) + 50 + i,
            }
        })
        .collect();
    events.sort_by_key(|e| e.called);
    // One order: by the instant each acts at, its call's start.
    let mut state: Option<StoredReservation> = None;
    for e in &mut events {
        let now = e.clock_at_call;
        e.ret = match e.call {
            Call::Op(op) => {
                let s = spec::apply(state.clone(), now, op.map(|o| owner(names, o), |h| hold(names, h)));
                state = s.next;
                Return::Outcome(s.outcome)
            }
            Call::Lookup => Return::Lookup(spec::lookup(state.as_ref(), now).cloned()),
        };
    }
    for (e, d) in events.iter_mut().zip(drawn) {
        match d.6 % 10 {
            0 => e.ret = Return::Storage { message: "cut".into(), indeterminate: true },
            1 => {
                e.ret = match &e.ret {
                    Return::Outcome(Outcome::Conflict) => Return::Outcome(Outcome::Taken),
                    Return::Outcome(_) => Return::Outcome(Outcome::Conflict),
                    Return::Lookup(Some(_)) => Return::Lookup(None),
                    other => other.clone(),
                }
            }
            _ => {}
        }
    }
    events
}

fn drawn() -> impl Strategy<Value = Vec<Drawn>> {
    proptest::collection::vec(
        (0u64..12, 0u64..9, any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()),
        1..7,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn the_segmented_search_agrees_with_every_order_tried(drawn in drawn()) {
        let names = Names::new();
        let events = history(&names, &drawn);
        let ops: Vec<&Event> = events.iter().collect();
        let ends = reference(&names, &ops);
        let verdict = linearizable(&names, &ops).map_err(|u: Undecided| u.steps).unwrap().verdict;
        prop_assert_eq!(verdict.is_ok(), !ends.is_empty(), "{:#?}", events);
        let finals: BTreeSet<_> = final_states(&names, &ops).unwrap().into_iter().collect();
        prop_assert_eq!(&finals, &ends);
        // The first segment whose end no order reaches (at quiet points a prefix fails for good),
        // then the shortest prefix within it that no order explains.
        let failing = segments(&ops).into_iter().find(|s| reference(&names, &ops[..s.end]).is_empty());
        let shortest = failing.map(|s| (s.start + 1..=s.end).find(|n| reference(&names, &ops[..*n]).is_empty()));
        let found = shortest_failing_prefix(&names, &ops).unwrap().map(|(n, _)| n);
        prop_assert_eq!(found, shortest.flatten());
    }
}

#[test]
fn segments_are_cut_where_nothing_is_in_flight() {
    let names = Names::new();
    let e = |called, returned| Event {
        thread: 0,
        round: 0,
        clock_at_call: START,
        clock_at_return: START,
        key: 0,
        call: Call::Lookup,
        ret: Return::Lookup(None),
        called,
        returned,
    };
    // [0..3] and [1..2] overlap; [4..7] overlaps [5..9], which overlaps [8..10]; [11..12] alone.
    let events = [e(0, 3), e(1, 2), e(4, 7), e(5, 9), e(8, 10), e(11, 12)];
    let ops: Vec<&Event> = events.iter().collect();
    assert_eq!(segments(&ops), [0..2, 2..5, 5..6]);
    assert!(linearizable(&names, &ops).unwrap().verdict.is_ok());
    assert_eq!(segments(&[]), Vec::<std::ops::Range<usize>>::new());
}
