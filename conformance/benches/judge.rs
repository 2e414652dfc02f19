//! The judge's worst cases, printed: `cargo bench -p reservation-conformance --bench judge`.
//!
//! - A history built to be worst at the recorders' ceilings ([`Ceilings::default`]): one key, every
//!   segment as long as the ceiling allows, as many operations in flight at every moment as the
//!   ceiling allows (a staircase of overlapping calls), the widest clock windows, as many unknown
//!   outcomes as a segment can end with, and the operations that make the most states (reserves
//!   by three owners with two holds and several times to live, confirms, releases and abandons).
//! - Random segments at the ceilings, the slowest of them, and the worst found by climbing from it.
//! - Beyond the ceilings: eight operations in flight on one key, every outcome unknown, which the
//!   judge must call undecided within its budget rather than search for ever.

use std::time::{Duration, Instant as WallInstant};

use reservation_conformance::linearizability::{Call, Event, Names, Return, StorageErrors, check_history_with};
use reservation_conformance::search::{self, BUDGET};
use reservation_conformance::{Ceilings, START};
use reservation_store::{Operation, ReleaseVersion, StoredReservation, Ttl, Version, spec};

/// A tiny deterministic generator.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x % n.max(1)
    }
}

/// The `i`th call of the worst mix, or a random one.
fn call(i: u64) -> Call {
    let (owner, hold) = ((i % 3) as u8, (i / 3 % 2) as u8);
    match i % 8 {
        0..=3 => Call::Op(Operation::Reserve { owner, hold, ttl: Ttl::from_millis(2 + i % 7).expect("non-zero") }),
        4 => Call::Op(Operation::Confirm { owner, version: Version::from_u64(i % 4) }),
        5 => Call::Op(Operation::Release { owner, version: ReleaseVersion::Any }),
        6 => Call::Op(Operation::Abandon { owner, hold }),
        _ => Call::Lookup,
    }
}

/// A history of `segments` segments on one key: each of `len` operations, `in_flight` of them
/// overlapping at every moment, windows of `window` ms, the `unknown` last of each segment ending
/// unknown; the others answer as the order of their calls, each at its window's start, gives.
/// `pick` draws the `i`th call.
fn history(
    names: &Names,
    segments: u64,
    ceilings: Ceilings,
    unknown: usize,
    mut pick: impl FnMut(u64) -> Call,
) -> Vec<Event> {
    let (len, in_flight, window) = (ceilings.segment as u64, ceilings.in_flight as u64, ceilings.window);
    let mut events = Vec::new();
    let mut state: Option<StoredReservation> = None;
    let owner = |i: u8| &names.owners[usize::from(i) % names.owners.len()];
    let hold = |i: u8| &names.holds[usize::from(i) % names.holds.len()];
    for s in 0..segments {
        let base = s * (len + in_flight + 2);
        for i in 0..len {
            let at = base + i;
            let call = pick(s * len + i);
            let clock_at_call = START.saturating_add_millis(at);
            let ret = match call {
                Call::Op(op) => {
                    let step = spec::apply(state.clone(), clock_at_call, op.map(owner, hold));
                    state = step.next;
                    Return::Outcome(step.outcome)
                }
                Call::Lookup => Return::Lookup(spec::lookup(state.as_ref(), clock_at_call).cloned()),
            };
            let ret = if i as usize >= len as usize - unknown.min(len as usize) {
                Return::Storage { message: "cut".into(), indeterminate: true }
            } else {
                ret
            };
            events.push(Event {
                thread: (i % in_flight) as usize,
                round: s as usize,
                clock_at_call,
                clock_at_return: clock_at_call.saturating_add_millis(window),
                key: 0,
                call,
                ret,
                // Calls one apart, each returning after the next `in_flight - 1` were called.
                called: 10 * at,
                returned: 10 * (at + in_flight - 1) + 5,
            });
        }
    }
    events
}

/// `events` and then, in a segment of its own, a lookup that shows the key confirmed to its first
/// owner at a version no operation gives: no order explains it, so the judge must search every
/// segment before it whole.
fn refuted(names: &Names, mut events: Vec<Event>) -> Vec<Event> {
    let last = events.iter().map(|e| e.returned.max(e.clock_at_return.as_millis())).max().unwrap_or(0);
    let at = START.saturating_add_millis(last);
    let impossible = spec::Reservation::confirmed(names.owners[0].clone(), Version::from_u64(99));
    events.push(Event {
        thread: 0,
        round: 0,
        clock_at_call: at,
        clock_at_return: at,
        key: 0,
        call: Call::Lookup,
        ret: Return::Lookup(Some(impossible)),
        called: last + 1,
        returned: last + 2,
    });
    events
}

/// Judges `events` as the checks do, timing it: the time, the most steps one segment's search
/// took (the search alone, once more), and the verdict: the search nodes, or the failure's first
/// words.
fn judge(names: &Names, events: &[Event]) -> (Duration, u64, String) {
    let started = WallInstant::now();
    let verdict = check_history_with(names, events, StorageErrors::Tolerated);
    let took = started.elapsed();
    let ops: Vec<&Event> = events.iter().collect();
    let most = match search::linearizable(names, &ops) {
        Ok(decided) => decided.cost.most,
        Err(u) => u.steps,
    };
    let what = match verdict {
        Ok(nodes) => format!("linearizable, {nodes} search nodes"),
        Err(f) if f.undecided.is_some() => "undecided".to_owned(),
        Err(f) => format!("not linearizable ({})", f.problem.split(':').next().unwrap_or_default()),
    };
    (took, most, what)
}

fn main() {
    let names = Names::new();
    let ceilings = Ceilings::default();
    // At most `unknown` end unknown before the gate closes, and those in flight then may too.
    let unknown = ceilings.unknown + ceilings.in_flight - 1;
    println!("judge budget: {BUDGET} steps; ceilings: {ceilings}");

    let worst = history(&names, 40, ceilings, unknown, call);
    let (took, most, what) = judge(&names, &worst);
    println!(
        "built to be worst: {} operations in 40 segments of {}, {} in flight, {unknown} unknown each: {took:.2?}, \
         at most {most} steps a segment ({what})",
        worst.len(),
        ceilings.segment,
        ceilings.in_flight
    );
    let (took, _, what) = judge(&names, &refuted(&names, worst));
    println!("  and then a lookup no order explains: {took:.2?} ({what})");

    let mut r = XorShift(0x5eed_0123_4567_89ab);
    let mut slowest: Vec<(Duration, u64, String)> = Vec::new();
    let started = WallInstant::now();
    let tries = 2_000;
    let mut start: (u64, Vec<u64>, usize) = (0, Vec::new(), 0);
    for _ in 0..tries {
        let unknown = r.below(unknown as u64 + 1) as usize;
        let calls: Vec<u64> = (0..2 * ceilings.segment as u64).map(|_| r.below(1 << 20)).collect();
        let events = history(&names, 2, ceilings, unknown, |i| call(calls[i as usize]));
        let judged = judge(&names, &refuted(&names, events));
        if judged.1 > start.0 {
            start = (judged.1, calls, unknown);
        }
        slowest.push(judged);
    }
    let most = slowest.iter().map(|(_, m, _)| *m).max().unwrap_or(0);
    slowest.sort_by_key(|(t, _, _)| std::cmp::Reverse(*t));
    println!(
        "{tries} random pairs of segments at the ceilings, then a lookup no order explains, in {:.2?}: at most {most} \
         steps a segment; the slowest:",
        started.elapsed()
    );
    for (took, most, what) in slowest.iter().take(3) {
        println!("  {took:.2?}, {most} steps ({what})");
    }

    // Climbing from the slowest: one call or the count of unknown outcomes changed at a time,
    // kept when a segment's search takes no fewer steps.
    let (_, mut calls, mut unknowns) = start;
    let steps_of = |calls: &[u64], unknowns: usize| {
        let events = refuted(&names, history(&names, 2, ceilings, unknowns, |i| call(calls[i as usize])));
        judge(&names, &events).1
    };
    let mut best = steps_of(&calls, unknowns);
    let started = WallInstant::now();
    let climbs = 1_000;
    for _ in 0..climbs {
        let mut tried = calls.clone();
        let mut tried_unknowns = unknowns;
        match r.below(8) {
            0 => tried_unknowns = r.below(unknown as u64 + 1) as usize,
            _ => {
                let at = r.below(tried.len() as u64) as usize;
                tried[at] = r.below(1 << 20);
            }
        }
        let steps = steps_of(&tried, tried_unknowns);
        if steps >= best {
            (best, calls, unknowns) = (steps, tried, tried_unknowns);
        }
    }
    println!("climbing from the slowest, {climbs} tries in {:.2?}: at most {best} steps a segment", started.elapsed());

    let beyond = Ceilings { in_flight: 8, segment: 2_000, unknown: 2_000, window: ceilings.window };
    let events = refuted(&names, history(&names, 1, beyond, 2_000, call));
    let (took, steps, what) = judge(&names, &events);
    println!(
        "beyond the ceilings (2,000 operations, 8 in flight on one key, every outcome unknown): {took:.2?}, {steps} \
         steps: {what}"
    );
}
