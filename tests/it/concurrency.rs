//! [`MemoryStore`] under threads: per-key linearizability (exactly one winner of a race, no lost
//! join) and operations on disjoint keys all succeeding in parallel.

use std::collections::BTreeSet;
use std::sync::Barrier;
use std::thread;

use reservation_store::spec::Reservation;
use reservation_store::*;

const THREADS: usize = 8;
const ROUNDS: usize = 200;

const fn assert_send_sync<T: Send + Sync>() {}
const _: () = assert_send_sync::<MemoryStore<ManualClock>>();
const _: () = assert_send_sync::<MemoryStore<SystemClock>>();

fn owner(i: usize) -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), &format!("user-{i}")).unwrap()
}

fn hold(i: usize) -> HoldId {
    HoldId::new(format!("attempt-{i}")).unwrap()
}

fn setup() -> (MemoryStore<ManualClock>, ReservationScope, Ttl) {
    let store = MemoryStore::with_clock(ManualClock::new(Instant::from_millis(1_000)));
    let scope = ReservationScope::parse("user", Some("acme"), "user-name").unwrap();
    (store, scope, Ttl::from_millis(60_000).unwrap())
}

/// Runs `op(thread index)` on [`THREADS`] threads released together by a barrier; returns the
/// results in thread order.
fn race<T: Send>(op: impl Fn(usize) -> T + Sync) -> Vec<T> {
    let barrier = Barrier::new(THREADS);
    thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|i| {
                let (barrier, op) = (&barrier, &op);
                s.spawn(move || {
                    barrier.wait();
                    op(i)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn racing_owners_exactly_one_takes_the_key() {
    let (store, scope, ttl) = setup();
    for round in 0..ROUNDS {
        let key = Key::new(format!("name-{round}")).unwrap();
        let outcomes = race(|i| block_on(store.reserve(&scope, &key, &owner(i), &hold(i), ttl)).unwrap());
        let winners: Vec<usize> = (0..THREADS).filter(|i| outcomes[*i] == ReserveOutcome::Taken).collect();
        assert_eq!(winners.len(), 1, "round {round}: {outcomes:?}");
        let losers = outcomes.iter().filter(|o| **o == ReserveOutcome::Conflict).count();
        assert_eq!(losers, THREADS - 1, "round {round}: {outcomes:?}");
        let w = winners[0];
        let expected = Reservation::pending(owner(w), BTreeSet::from([hold(w)]), Instant::from_millis(61_000));
        assert_eq!(block_on(store.lookup(&scope, &key)).unwrap(), expected, "round {round}");
    }
    assert_eq!(store.len(), ROUNDS);
}

#[test]
fn racing_confirms_of_different_owners_exactly_one_wins() {
    let (store, scope, _) = setup();
    for round in 0..ROUNDS {
        let key = Key::new(format!("name-{round}")).unwrap();
        let version = Version::stream(1).unwrap();
        let outcomes = race(|i| block_on(store.confirm(&scope, &key, &owner(i), version)).unwrap());
        let winners: Vec<usize> = (0..THREADS).filter(|i| outcomes[*i] == ConfirmOutcome::Confirmed).collect();
        assert_eq!(winners.len(), 1, "round {round}: {outcomes:?}");
        assert!(outcomes.iter().filter(|o| **o != ConfirmOutcome::Confirmed).all(|o| *o == ConfirmOutcome::Conflict));
        let expected = Some(Reservation::confirmed(owner(winners[0]), version));
        assert_eq!(block_on(store.lookup(&scope, &key)).unwrap(), expected, "round {round}");
    }
}

#[test]
fn racing_attempts_of_one_owner_all_join_and_no_hold_is_lost() {
    let (store, scope, ttl) = setup();
    let alice = owner(0);
    for round in 0..ROUNDS {
        let key = Key::new(format!("name-{round}")).unwrap();
        let outcomes = race(|i| block_on(store.reserve(&scope, &key, &alice, &hold(i), ttl)).unwrap());
        assert_eq!(outcomes.iter().filter(|o| **o == ReserveOutcome::Taken).count(), 1, "round {round}");
        assert_eq!(outcomes.iter().filter(|o| **o == ReserveOutcome::Joined).count(), THREADS - 1, "round {round}");
        let holds: BTreeSet<HoldId> = (0..THREADS).map(hold).collect();
        let expected = Reservation::pending(alice.clone(), holds, Instant::from_millis(61_000));
        assert_eq!(block_on(store.lookup(&scope, &key)).unwrap(), expected, "round {round}");
        // And they all abandon: exactly the last one frees the key.
        let outcomes = race(|i| block_on(store.abandon(&scope, &key, &alice, &hold(i))).unwrap());
        assert_eq!(outcomes.iter().filter(|o| **o == AbandonOutcome::Abandoned).count(), 1, "round {round}");
        let still = outcomes.iter().filter(|o| **o == AbandonOutcome::StillReserved).count();
        assert_eq!(still, THREADS - 1, "round {round}");
        assert_eq!(block_on(store.lookup(&scope, &key)).unwrap(), None);
    }
    assert!(store.is_empty());
}

#[test]
fn threads_on_disjoint_keys_all_succeed() {
    let (store, scope, ttl) = setup();
    let per_thread = 1_000;
    let taken = race(|i| {
        let who = owner(i);
        (0..per_thread)
            .filter(|n| {
                let key = Key::new(format!("t{i}-k{n}")).unwrap();
                let outcome = block_on(store.reserve(&scope, &key, &who, &hold(0), ttl)).unwrap();
                outcome == ReserveOutcome::Taken
                    && block_on(store.confirm(&scope, &key, &who, Version::stream(1).unwrap())).unwrap()
                        == ConfirmOutcome::Confirmed
            })
            .count()
    });
    assert_eq!(taken, vec![per_thread; THREADS]);
    assert_eq!(store.len(), THREADS * per_thread);
    for i in 0..THREADS {
        let key = Key::new(format!("t{i}-k{}", per_thread - 1)).unwrap();
        let expected = Some(Reservation::confirmed(owner(i), Version::stream(1).unwrap()));
        assert_eq!(block_on(store.lookup(&scope, &key)).unwrap(), expected);
    }
}
