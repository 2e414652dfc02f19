//! A judge that always ends: the recorders keep their histories within the ceilings (and
//! without them the same runs do not), the search of a history beyond them ends "undecided",
//! a verdict with its own headline that names no rule, and an undecided check writes its history
//! and notes the narrower ceilings its next run records with, which that run does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reservation_conformance::faults::{FaultSettings, Simulated, run as fault_run};
use reservation_conformance::linearizability::{
    Call, Event, History, Names, Return, StorageErrors, check_history_with, record_with,
};
use reservation_conformance::search::{BUDGET, segments};
use reservation_conformance::{Ceilings, Harness, MemoryHarness, START, Settings, checks};
use reservation_store::{
    Key, ManualClock, MemoryStore, Operation, Outcome, Request, ReservationScope, ReservationStore, StorageError,
    StoreResult, StoredReservation, Ttl,
};

/// `MemoryStore` that takes `pause` over every operation and fails one in `every` with an
/// indeterminate error, applied or not: a store whose outcomes are often unknown.
struct Unsure {
    pause: Duration,
    every: u64,
}

struct UnsureStore {
    inner: MemoryStore<ManualClock>,
    pause: Duration,
    every: u64,
    count: AtomicU64,
}

impl UnsureStore {
    /// Whether this operation fails, and whether it fails before it is applied.
    fn fails(&self) -> (bool, bool) {
        std::thread::sleep(self.pause);
        let n = self.count.fetch_add(1, Ordering::SeqCst);
        (n.is_multiple_of(self.every), n.is_multiple_of(2))
    }
}

fn cut() -> reservation_store::StoreError {
    StorageError::indeterminate("the connection was cut").into()
}

impl ReservationStore for UnsureStore {
    async fn execute(&self, request: Request<'_>) -> StoreResult<Outcome> {
        match self.fails() {
            (true, true) => Err(cut()),
            (true, false) => self.inner.execute(request).await.and(Err(cut())),
            (false, _) => self.inner.execute(request).await,
        }
    }

    async fn lookup(&self, scope: &ReservationScope, key: &Key) -> StoreResult<Option<StoredReservation>> {
        match self.fails() {
            (true, _) => Err(cut()),
            (false, _) => self.inner.lookup(scope, key).await,
        }
    }
}

impl Harness for Unsure {
    type Store = UnsureStore;

    fn store(&self, clock: ManualClock) -> UnsureStore {
        UnsureStore {
            inner: MemoryStore::with_clock(clock),
            pause: self.pause,
            every: self.every,
            count: AtomicU64::new(1),
        }
    }
}

/// The widest shape of `events`' keys: the most operations in flight at once on one key, the
/// longest segment, the most unknown outcomes in one segment, the widest clock window.
fn shape(events: &[Event]) -> (usize, usize, usize, u64) {
    let mut widest = (0, 0, 0, 0);
    let keys: std::collections::BTreeSet<usize> = events.iter().map(|e| e.key).collect();
    for key in keys {
        let ops: Vec<&Event> = events.iter().filter(|e| e.key == key).collect();
        for (i, e) in ops.iter().enumerate() {
            widest.0 = widest.0.max(1 + ops[..i].iter().filter(|o| o.returned > e.called).count());
            widest.3 = widest.3.max(e.clock_at_return.as_millis() - e.clock_at_call.as_millis());
        }
        for s in segments(&ops) {
            let unknown =
                ops[s.clone()].iter().filter(|e| matches!(e.ret, Return::Storage { indeterminate: true, .. }));
            widest.1 = widest.1.max(s.len());
            widest.2 = widest.2.max(unknown.count());
        }
    }
    widest
}

/// Asserts that `events` keep `c`: the unknown outcomes of a segment up to the ceiling and those
/// in flight when it was reached.
fn assert_within(events: &[Event], c: Ceilings, what: &str) {
    let (in_flight, segment, unknown, window) = shape(events);
    eprintln!(
        "{what}: {} operations; in flight {in_flight}, segments {segment}, unknown {unknown}, windows {window} ms",
        events.len()
    );
    assert!(in_flight <= c.in_flight, "{what}: {in_flight} in flight on one key");
    assert!(segment <= c.segment, "{what}: a segment of {segment} operations");
    assert!(unknown < c.unknown + c.in_flight, "{what}: {unknown} unknown outcomes in a segment");
    assert!(window <= c.window, "{what}: a clock window of {window} ms");
}

#[test]
fn recorded_histories_keep_their_ceilings_and_ungated_ones_do_not() {
    let harness = Unsure { pause: Duration::from_micros(300), every: 3 };
    let ceilings = Ceilings::default();
    let (_, events) = record_with(&harness, 8, 1_500, 7, ceilings);
    assert_within(&events, ceilings, "eight threads, one operation in three unknown, gated");
    let (_, events) = record_with(&harness, 8, 1_500, 7, Ceilings::NONE);
    let (in_flight, segment, unknown, _) = shape(&events);
    assert!(
        in_flight > ceilings.in_flight
            && segment > ceilings.segment
            && unknown >= ceilings.unknown + ceilings.in_flight,
        "without gates the same run stays within the ceilings ({in_flight}, {segment}, {unknown}): the test shows nothing"
    );
}

#[test]
fn the_fault_check_records_within_its_ceilings() {
    let ceilings = Ceilings::default();
    let settings = Settings::from(FaultSettings::default().with_duration(Duration::from_millis(800))).with_seed(3);
    let run = fault_run(&Simulated::new(Unsure { pause: Duration::from_micros(200), every: 7 }), &settings);
    assert!(run.verdict.is_ok(), "{:?}", run.verdict);
    assert_eq!(run.report.ceilings, ceilings);
    assert_within(&run.history.events, ceilings, "the fault check under simulated faults");
}

/// `threads` threads each running `per_thread` operations on key 0 at once, every one of them
/// overlapping the others, every outcome unknown; then, alone, a lookup that shows the key
/// confirmed at a version no operation gives.
fn beyond(threads: u64, per_thread: u64) -> Vec<Event> {
    let mut events = Vec::new();
    for t in 0..threads {
        for i in 0..per_thread {
            let (owner, hold) = ((t % 3) as u8, (i % 2) as u8);
            let call = match i % 4 {
                0 | 1 => Call::Op(Operation::Reserve { owner, hold, ttl: Ttl::from_millis(2 + i % 9).unwrap() }),
                2 => Call::Op(Operation::Abandon { owner, hold }),
                _ => Call::Lookup,
            };
            let at = i * threads + t;
            events.push(Event {
                thread: t as usize,
                round: 0,
                clock_at_call: START.saturating_add_millis(at / 4),
                clock_at_return: START.saturating_add_millis(at / 4 + 3),
                key: 0,
                call,
                ret: Return::Storage { message: "cut".into(), indeterminate: true },
                called: 10 * at,
                returned: 10 * (at + threads) - 5,
            });
        }
    }
    let end = 10 * threads * (per_thread + 1);
    let names_owner = 0;
    let impossible = reservation_store::spec::Reservation::confirmed(
        Names::new().owners[names_owner].clone(),
        reservation_store::Version::from_u64(99),
    );
    events.push(Event {
        thread: 0,
        round: 0,
        clock_at_call: START.saturating_add_millis(end),
        clock_at_return: START.saturating_add_millis(end),
        key: 0,
        call: Call::Lookup,
        ret: Return::Lookup(Some(impossible)),
        called: end,
        returned: end + 1,
    });
    events.sort_by_key(|e| e.called);
    events
}

#[test]
fn a_history_beyond_the_ceilings_is_undecided_a_verdict_of_its_own() {
    let names = Names::new();
    let events = beyond(8, 100);
    let failure = check_history_with(&names, &events, StorageErrors::Tolerated).expect_err("not a pass");
    let u = failure.undecided.expect("undecided, not a rule broken");
    assert_eq!(failure.rule, None);
    assert_eq!((u.key, u.first, u.ops, u.in_flight, u.unknown), (0, 0, 800, 8, 800));
    assert!(u.steps > BUDGET, "{u:?}");
    let text = failure.to_string();
    let headline = text.lines().next().unwrap_or_default();
    assert!(headline.contains("undecided") && headline.contains("not a rule the store broke"), "{text}");
    assert!(!text.contains("atomicity") && !text.contains("broken"), "{text}");
    assert!(text.contains("key k0") && text.contains("800 operations") && text.contains("8 in flight"), "{text}");
    // Fewer, and the same kind of history is decided.
    let events = beyond(3, 3);
    let failure = check_history_with(&names, &events, StorageErrors::Tolerated).expect_err("the lookup is refuted");
    assert!(failure.undecided.is_none(), "{failure}");
}

#[test]
fn an_undecided_check_writes_its_history_and_its_next_run_records_narrower() {
    let dir = tempfile::tempdir().expect("a directory");
    // No fault fired: the workload alone, every outcome unknown, each operation sleeping long
    // enough that the four contended workers overlap however busy the machine is.
    // A run that a loaded machine leaves too few operations to be beyond the budget (one second
    // beside four spinning threads once was) is run again, longer.
    let harness = Unsure { pause: Duration::from_millis(2), every: 1 };
    let settings_for = |secs| {
        let faults = FaultSettings::default()
            .with_faults(&[])
            .with_duration(Duration::from_secs(secs))
            .with_ops(40_000)
            .with_ceilings(Ceilings::NONE);
        Settings::default().with_seed(11).with_faults(faults).with_history_dir(dir.path())
    };
    let (settings, failure) = [1, 3, 9]
        .into_iter()
        .find_map(|secs| checks::faults(&harness, &settings_for(secs)).err().map(|f| (settings_for(secs), f)))
        .expect("every outcome unknown, no ceilings: undecided");
    eprintln!("{failure}");
    let u = failure.undecided.unwrap_or_else(|| panic!("undecided: {failure}"));
    let replay = failure.replay.clone().unwrap_or_default();
    let written = dir.path().join("faults-seed-11.json");
    assert!(replay.contains(&written.display().to_string()), "{replay}");
    let history: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&written).expect("the history")).expect("JSON");
    assert!(history["events"].as_array().is_some_and(|e| e.len() > u.ops), "{history}");
    let narrowed = std::fs::read_to_string(dir.path().join("narrowed.txt")).expect("the narrowed ceilings");
    assert!(narrowed.starts_with("faults "), "{narrowed}");
    // The next run records narrower, and decides.
    let next = checks::faults(&harness, &settings);
    assert!(next.is_ok(), "{:?}", next.err().map(|f| f.to_string()));
    let line: Vec<u64> = narrowed.split_whitespace().skip(1).map(|w| w.parse().expect("a number")).collect();
    assert!(line[0] as usize <= u.in_flight / 2 && line[1] as usize <= u.ops / 2, "{narrowed} after {u:?}");
}

#[test]
fn the_written_history_is_the_history() {
    let names = Names::new();
    let (_, events) = record_with(&MemoryHarness, 2, 64, 5, Ceilings::default());
    let json =
        reservation_conformance::histories::history_json(&History { names: names.clone(), events: events.clone() });
    let written = json["events"].as_array().expect("events");
    assert_eq!(written.len(), events.len());
    for (w, e) in written.iter().zip(&events) {
        assert_eq!((w["called"].as_u64(), w["returned"].as_u64()), (Some(e.called), Some(e.returned)));
        assert_eq!(w["clock_at_call"].as_u64(), Some(e.clock_at_call.as_millis()));
        let op = w["request"]["op"].as_str().expect("an op");
        match e.call {
            Call::Lookup => assert_eq!(op, "lookup"),
            Call::Op(o) => assert_eq!(op, o.kind().name()),
        }
    }
    assert_eq!(json["names"]["keys"].as_array().map(Vec::len), Some(names.keys.len()));
}
