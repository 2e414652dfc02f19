//! What the networked stores' tests and benchmarks share (`reservation-postgres`,
//! `reservation-redis`): the cycle benchmark, the sweep case, a first reserve through a cut or a
//! silent connection, a connect and a pool checkout through a silent one, the judge of a history recorded under
//! faults, and the check of the crate example a guide quotes.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant as WallInstant};

use reservation_conformance::linearizability::{self, Event, Names, Return, StorageErrors};
use reservation_conformance::{START, unique_namespace};
use reservation_store::spec::{self, Reservation};
use reservation_store::{
    AggregateRef, Clock, ConfirmOutcome, HoldId, Instant, Key, ManualClock, Operation, ReleaseVersion, Request,
    ReservationScope, ReservationStore, ReserveOutcome, StoreError, StoredReservation, SystemClock, Ttl, Version,
    error_chain,
};
use tokio::runtime::Runtime;

pub mod proxy;

use proxy::CuttingProxy;

/// The connection counts of the cycle benchmark.
pub const CONNECTIONS: [usize; 3] = [1, 4, 16];

/// One benchmark task's key and names.
#[derive(Clone, Debug)]
pub struct Cycle {
    /// The task's scope.
    pub scope: ReservationScope,
    /// The key of this cycle.
    pub key: Key,
    /// The task's owner.
    pub owner: AggregateRef,
    /// The hold.
    pub hold: HoldId,
}

const TTL: u64 = 60_000;

/// Reserve (Taken), confirm (Confirmed), release (Released) of `cycle`'s key.
pub async fn store_cycle<S: ReservationStore>(store: &S, cycle: &Cycle) {
    let ttl = Ttl::from_millis(TTL).expect("non-zero");
    let version = Version::stream(1).expect("a stream version");
    let (scope, key, owner) = (&cycle.scope, &cycle.key, &cycle.owner);
    store.reserve(scope, key, owner, &cycle.hold, ttl).await.expect("reserved");
    store.confirm(scope, key, owner, version).await.expect("confirmed");
    store.release(scope, key, owner, ReleaseVersion::At(version)).await.expect("released");
}

/// The rows a cycle writes, in order: pending, confirmed, none. The baseline writes them as they
/// are, with no spec function.
pub fn baseline_rows(cycle: &Cycle) -> [Option<StoredReservation>; 3] {
    let expires = SystemClock.now().saturating_add_millis(TTL);
    let pending = Reservation::pending(cycle.owner.clone(), BTreeSet::from([cycle.hold.clone()]), expires);
    [pending, Some(Reservation::confirmed(cycle.owner.clone(), Version::stream(1).expect("a stream version"))), None]
}

/// Cycles per second, and the p50 and p99 of one cycle's latency.
#[derive(Clone, Copy, Debug)]
pub struct Figures {
    /// Cycles per second, over all tasks.
    pub cycles_per_second: f64,
    /// The median cycle's latency.
    pub p50: Duration,
    /// The 99th percentile.
    pub p99: Duration,
}

/// Runs `connections` tasks on `runtime` for `run`, each running `cycle` on keys of its own.
pub fn measure<F, Fut>(runtime: &Runtime, label: &str, connections: usize, run: Duration, cycle: F) -> Figures
where
    F: Fn(Arc<Cycle>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let started = WallInstant::now();
    let latencies: Vec<Duration> = runtime.block_on(async {
        let tasks: Vec<_> = (0..connections)
            .map(|task| {
                let cycle = cycle.clone();
                let namespace = format!("bench-{label}-{connections}-{task}");
                tokio::spawn(async move {
                    let scope = ReservationScope::parse("user", Some("acme"), &namespace).expect("scope");
                    let owner = AggregateRef::parse("user", Some("acme"), &format!("owner-{task}")).expect("owner");
                    let hold = HoldId::new("attempt").expect("hold");
                    let mut out = Vec::new();
                    let mut i = 0u64;
                    while started.elapsed() < run {
                        let key = Key::new(format!("k{}", i % 64)).expect("key");
                        let c = Arc::new(Cycle { scope: scope.clone(), key, owner: owner.clone(), hold: hold.clone() });
                        let t = WallInstant::now();
                        cycle(c).await;
                        out.push(t.elapsed());
                        i += 1;
                    }
                    out
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.expect("the task ran"));
        }
        all
    });
    let elapsed = started.elapsed();
    let mut sorted = latencies;
    sorted.sort();
    let at = |q: f64| sorted[((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1))];
    Figures { cycles_per_second: sorted.len() as f64 / elapsed.as_secs_f64(), p50: at(0.50), p99: at(0.99) }
}

/// The better of two runs of [`measure`].
pub fn best_of_two<F, Fut>(runtime: &Runtime, label: &str, connections: usize, run: Duration, cycle: F) -> Figures
where
    F: Fn(Arc<Cycle>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let a = measure(runtime, label, connections, run, cycle.clone());
    let b = measure(runtime, label, connections, run, cycle);
    if a.cycles_per_second >= b.cycles_per_second { a } else { b }
}

/// Prints the benchmark's table: for each connection count the store's and the baseline's
/// figures, their ratio, the store's operations per second, and the two ceiling figures
/// `ceiling` measures (`n/a` when it cannot).
pub fn print_table<S, B, SF, BF>(
    runtime: &Runtime,
    run: Duration,
    store: S,
    baseline: B,
    ceiling_names: [&str; 2],
    ceiling: impl Fn(usize) -> [Option<f64>; 2],
) where
    S: Fn(Arc<Cycle>) -> SF + Clone + Send + 'static,
    SF: Future<Output = ()> + Send,
    B: Fn(Arc<Cycle>) -> BF + Clone + Send + 'static,
    BF: Future<Output = ()> + Send,
{
    println!(
        "| connections | store cycles/s | p50 | p99 | baseline cycles/s | p50 | p99 | store/baseline time | store operations/s | {} | {} |",
        ceiling_names[0], ceiling_names[1]
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for connections in CONNECTIONS {
        let base = best_of_two(runtime, "baseline", connections, run, baseline.clone());
        let ours = best_of_two(runtime, "store", connections, run, store.clone());
        let show = |x: Option<f64>| x.map_or("n/a".to_owned(), |t| format!("{t:.0}"));
        let [c0, c1] = ceiling(connections);
        println!(
            "| {connections} | {:.0} | {:.2?} | {:.2?} | {:.0} | {:.2?} | {:.2?} | {:.2} | {:.0} | {} | {} |",
            ours.cycles_per_second,
            ours.p50,
            ours.p99,
            base.cycles_per_second,
            base.p50,
            base.p99,
            base.cycles_per_second / ours.cycles_per_second,
            ours.cycles_per_second * 3.0,
            show(c0),
            show(c1),
        );
    }
}

/// The rows the sweep case wrote, with the spec's state of each key.
pub type SweepCase = Vec<(Key, Option<StoredReservation>)>;

/// Writes 120 keys through `store` at instants from START to START+19, in the order of their
/// instants, with TTLs that end before, at and after START+20, some confirmed, some confirmed over an expired pending, some
/// joined; each outcome checked against the spec. Returns the keys with their states and the
/// instant the sweep is to run at (START+20, where the clock is left).
pub fn sweep_case<S: ReservationStore>(
    runtime: &Runtime,
    store: &S,
    clock: &ManualClock,
    scope: &ReservationScope,
) -> (SweepCase, Instant) {
    let hold = HoldId::new("attempt").expect("a valid hold");
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    // Each operation drawn as (instant, key, owner, confirm or reserve, version or TTL), then run in
    // the order of their instants (a stable sort keeps each key's own order): the store's clock
    // never goes back (D10), so the operations cannot run at instants drawn out of order.
    let mut plan = Vec::new();
    for i in 0..120_usize {
        for _ in 0..=next(3) {
            let at = next(20);
            let who = next(2);
            let confirm = next(4) == 0;
            let n = if confirm { next(3) } else { 1 + next(15) };
            plan.push((at, i, who, confirm, n));
        }
    }
    plan.sort_by_key(|(at, ..)| *at);
    let keys: Vec<Key> = (0..120).map(|i| Key::new(format!("k{i}")).expect("a valid key")).collect();
    let mut states: Vec<Option<StoredReservation>> = vec![None; keys.len()];
    for (at, i, who, confirm, n) in plan {
        clock.set(START.saturating_add_millis(at));
        let who = AggregateRef::parse("user", Some("acme"), &format!("owner-{who}")).expect("owner");
        let operation = if confirm {
            Operation::Confirm { owner: &who, version: Version::from_u64(n) }
        } else {
            Operation::Reserve { owner: &who, hold: &hold, ttl: Ttl::from_millis(n).expect("non-zero") }
        };
        let outcome =
            runtime.block_on(store.execute(Request::new(scope, &keys[i], operation))).expect("no storage error");
        let step = spec::apply(states[i].clone(), clock.now(), operation);
        assert_eq!(outcome, step.outcome);
        states[i] = step.next;
    }
    let expected: Vec<_> = keys.into_iter().zip(states).collect();
    let now = START.saturating_add_millis(20);
    clock.set(now);
    (expected, now)
}

/// Asserts that a sweep at `now` that deleted `swept` rows left exactly the keys `left`: those
/// [`spec::lookup`] calls not free, and that the case tells (rows on both sides, one expiring at
/// `now` exactly, D1's boundary).
pub fn assert_sweep(case: &SweepCase, now: Instant, left: &BTreeSet<String>, swept: u64) {
    let kept: BTreeSet<String> = case
        .iter()
        .filter(|(_, state)| spec::lookup(state.as_ref(), now).is_some())
        .map(|(key, _)| key.as_str().to_owned())
        .collect();
    let stored = case.iter().filter(|(_, s)| s.is_some()).count() as u64;
    assert_eq!(*left, kept, "the sweep at {now:?} kept other rows than spec::lookup");
    assert_eq!(swept, stored - kept.len() as u64);
    assert!(swept > 10 && !kept.is_empty(), "the case swept {swept} and kept {}: too few to tell", kept.len());
    let at_boundary = case.iter().any(|(_, s)| matches!(s, Some(Reservation::Pending(p)) if p.expires_at() == now));
    assert!(at_boundary, "no row expired exactly at the sweep's instant (D1's boundary)");
}

/// Arms `proxy` with `pattern` (forwarded or not), runs a first reserve of a free key through
/// `through` (a store connected via the proxy), and returns its error and whether `direct` (a
/// store on the same data, not via the proxy) then finds the reservation.
pub fn cut_first_reserve<S: ReservationStore>(
    runtime: &Runtime,
    proxy: &CuttingProxy,
    through: &S,
    direct: &S,
    label: &str,
    pattern: &[u8],
    forward: bool,
) -> (StoreError, bool) {
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace(label).as_str()).expect("scope");
    let (key, hold) = (Key::new("k").expect("key"), HoldId::new("h").expect("hold"));
    let alice = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let ttl = Ttl::from_millis(60_000).expect("non-zero");
    // A first operation through the proxy, so that the cut one sends only its own requests.
    let warm = Key::new("warm").expect("key");
    runtime.block_on(through.reserve(&scope, &warm, &alice, &hold, ttl)).expect("a first reserve through the proxy");
    proxy.arm(pattern, forward);
    let error =
        runtime.block_on(through.reserve(&scope, &key, &alice, &hold, ttl)).expect_err("the cut connection answered");
    assert!(proxy.was_cut(), "the proxy never saw {:?}", String::from_utf8_lossy(pattern));
    let exists = runtime.block_on(direct.lookup(&scope, &key)).expect("looked up directly").is_some();
    (error, exists)
}

/// The longest a store may take to fail through a silent connection before a test calls it a
/// hang: generous, far above the bounds the tests configure, so that a loaded machine never
/// reaches it.
pub const HANG: Duration = Duration::from_secs(30);

/// What an operation through a silent connection came to.
#[derive(Debug)]
pub struct Silent {
    /// Its error.
    pub error: StoreError,
    /// How long it took to fail (measured, for the reports; never asserted but against [`HANG`]).
    pub waited: Duration,
    /// Whether a store on the same data, not via the proxy, found the reservation while the
    /// proxy was still paused.
    pub exists: bool,
}

/// Runs `future` on `runtime`, failing the test if it takes longer than [`HANG`]; returns its
/// output and how long it took.
pub fn within_hang<T>(runtime: &Runtime, what: &str, future: impl Future<Output = T>) -> (T, Duration) {
    let started = WallInstant::now();
    // The timer is made inside the runtime, which it needs.
    match runtime.block_on(async { tokio::time::timeout(HANG, future).await }) {
        Ok(output) => (output, started.elapsed()),
        Err(_) => panic!("{what}: neither answered nor failed within {HANG:?}: a wait with no bound"),
    }
}

/// Pauses `proxy` at `pattern` (forwarding its chunk or holding it) during a first reserve of a
/// free key through `through` (a store connected via the proxy), which must fail, and not hang;
/// looks the key up through `direct` (a store on the same data, not via the proxy) while the
/// proxy is still paused; then resumes the proxy and checks that `through` works again (a
/// reserve of another key is taken). `connections` counts the connections `through` holds: the
/// one that went silent must have been closed (it may have an answer on its way), not kept.
pub fn silent_first_reserve<S: ReservationStore>(
    runtime: &Runtime,
    proxy: &CuttingProxy,
    (through, direct): (&S, &S),
    connections: impl Fn(&S) -> usize,
    label: &str,
    pattern: &[u8],
    forward: bool,
) -> Silent {
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace(label).as_str()).expect("scope");
    let (key, hold) = (Key::new("k").expect("key"), HoldId::new("h").expect("hold"));
    let alice = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let ttl = Ttl::from_millis(60_000).expect("non-zero");
    // A first operation through the proxy, so that the paused one sends only its own requests.
    let warm = Key::new("warm").expect("key");
    runtime.block_on(through.reserve(&scope, &warm, &alice, &hold, ttl)).expect("a first reserve through the proxy");
    proxy.pause_at(pattern, forward);
    let (result, waited) = within_hang(runtime, label, through.reserve(&scope, &key, &alice, &hold, ttl));
    let error = match result {
        Ok(outcome) => panic!("{label}: a silent connection answered {outcome:?}"),
        Err(error) => error,
    };
    assert!(proxy.is_paused(), "the proxy never saw {:?}", String::from_utf8_lossy(pattern));
    assert_eq!(connections(through), 0, "{label}: the connection that went silent was kept: {}", error_chain(&error));
    let (exists, _) = within_hang(runtime, "a lookup not via the proxy", direct.lookup(&scope, &key));
    let exists = exists.expect("looked up directly").is_some();
    proxy.resume();
    let after = Key::new("after").expect("key");
    let (outcome, _) =
        within_hang(runtime, "a reserve once resumed", through.reserve(&scope, &after, &alice, &hold, ttl));
    assert_eq!(outcome.expect("the store works again once the proxy resumed"), ReserveOutcome::Taken);
    eprintln!("{label}: a reserve through a silent connection failed after {waited:.2?}: {}", error_chain(&error));
    Silent { error, waited, exists }
}

/// With `through` (a store of one connection, via `proxy`) warmed by a first reserve, pauses
/// `proxy` and runs two reserves at once: the first takes the connection and waits for its
/// answer, the second (started 100 ms later) waits for a connection from the pool. Both must
/// fail, and not hang; returns their errors, the second's first. Then resumes the proxy and
/// checks that `through` works again.
pub fn silent_checkout<S: ReservationStore>(
    runtime: &Runtime,
    proxy: &CuttingProxy,
    through: &S,
    label: &str,
) -> (StoreError, StoreError) {
    let scope = ReservationScope::parse("user", Some("acme"), unique_namespace(label).as_str()).expect("scope");
    let hold = HoldId::new("h").expect("hold");
    let alice = AggregateRef::parse("user", Some("acme"), "alice").expect("owner");
    let ttl = Ttl::from_millis(60_000).expect("non-zero");
    let reserve = |key: &str| {
        let key = Key::new(key).expect("key");
        let (scope, alice, hold) = (&scope, &alice, &hold);
        async move { through.reserve(scope, &key, alice, hold, ttl).await }
    };
    runtime.block_on(reserve("warm")).expect("a first reserve through the proxy");
    proxy.pause();
    let ((first, second), _) = within_hang(runtime, label, async {
        tokio::join!(reserve("first"), async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            reserve("second").await
        })
    });
    let first = first.expect_err("a silent connection answered");
    let second = second.expect_err("a reserve got a connection through a silent proxy");
    proxy.resume();
    let (after, _) = within_hang(runtime, "a reserve once resumed", reserve("after"));
    assert_eq!(after.expect("the store works again once the proxy resumed"), ReserveOutcome::Taken);
    eprintln!("{label}: the reserve waiting for a connection failed: {}", error_chain(&second));
    (second, first)
}

/// Pauses `proxy`, runs `connect` (a store's connect via the proxy), which must fail, and not
/// hang; then resumes the proxy and runs `connect` again, which must succeed. Returns the first
/// error and how long it took.
pub fn silent_connect<T, E: std::error::Error, F: Future<Output = Result<T, E>>>(
    runtime: &Runtime,
    proxy: &CuttingProxy,
    label: &str,
    connect: impl Fn() -> F,
) -> (E, Duration) {
    proxy.pause();
    let (result, waited) = within_hang(runtime, label, connect());
    let Err(error) = result else { panic!("{label}: connected through a silent proxy") };
    proxy.resume();
    let (again, _) = within_hang(runtime, "a connect once resumed", connect());
    if let Err(e) = again {
        panic!("{label}: no connection once the proxy resumed: {}", error_chain(&e));
    }
    eprintln!("{label}: a connect through a silent proxy failed after {waited:.2?}: {}", error_chain(&error));
    (error, waited)
}

/// Runs `work` here while `beside` (a fault, a load) runs on another thread until its flag says
/// stop, and returns what `work` returned once `beside` has ended. The flag is set when `work`
/// ends however it ends: a panic of `work` is raised again after `beside` has stopped, never left
/// behind a thread that loops on (a test that hangs rather than fails).
pub fn while_running<T>(beside: impl FnOnce(&AtomicBool) + Send, work: impl FnOnce() -> T) -> T {
    /// Sets the flag when dropped: at the end of `work`, or while its panic unwinds.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| beside(&stop));
        let _stop = Stop(&stop);
        work()
    })
}

/// Judges a history recorded under faults: only storage errors (at least one), unseen by no
/// check (the history fails with faults forbidden), and linearizable once they are tolerated.
/// Returns the storage errors and the indeterminate ones among them.
pub fn judge_faults(names: &Names, events: &[Event], what: &str) -> (usize, usize) {
    let errors = events.iter().filter(|e| matches!(e.ret, Return::Storage { .. })).count();
    let indeterminate = events.iter().filter(|e| matches!(e.ret, Return::Storage { indeterminate: true, .. })).count();
    eprintln!("{what}: {} operations, {errors} storage errors ({indeterminate} indeterminate)", events.len());
    if let Some(other) = events.iter().find(|e| matches!(e.ret, Return::Error(_))) {
        panic!("{what} gave something else than a StorageError: {other:?}");
    }
    assert!(errors > 0, "{what}: no operation failed");
    assert!(linearizability::check_history(names, events).is_err(), "{what}: the storage errors went unseen");
    if let Err(failure) = linearizability::check_history_with(names, events, StorageErrors::Tolerated) {
        panic!("{what}: {failure}");
    }
    (errors, indeterminate)
}

/// Checks that `guide`, the text of the document `guide_name`, quotes the crate example of
/// `lib_rs` (its first ```` ```no_run ```` block, hidden `# ` lines left out) exactly, in a
/// ```` ```rust ```` block.
pub fn assert_guide_quotes_example(lib_rs: &str, guide: &str, guide_name: &str, crate_name: &str) {
    let start = lib_rs.find("//! ```no_run\n").expect("the example") + "//! ```no_run\n".len();
    let end = start + lib_rs[start..].find("//! ```\n").expect("its end");
    let code: Vec<&str> = lib_rs[start..end]
        .lines()
        .map(|l| l.strip_prefix("//! ").unwrap_or(l.trim_start_matches("//!")))
        .filter(|l| !l.starts_with("# "))
        .collect();
    let quoted = format!("```rust\n{}\n```", code.join("\n"));
    assert!(guide.contains(&quoted), "{guide_name} does not quote the example of {crate_name}:\n{quoted}");
}

/// Reserves five keys of `scope` for 1 ms each, moving `clock` 5 ms on after each, so that each
/// has expired before the next is reserved. On a store that sweeps only when told, its next
/// sweep then deletes all five; one that swept by itself after a new row deletes fewer.
pub fn five_rows_each_expired_before_the_next<S: ReservationStore>(
    runtime: &Runtime,
    store: &S,
    clock: &ManualClock,
    scope: &ReservationScope,
) {
    let hold = HoldId::new("attempt").expect("a valid hold");
    let owner = AggregateRef::parse("user", Some("acme"), "owner-0").expect("a valid owner");
    let one = Ttl::from_millis(1).expect("non-zero");
    for i in 0..5 {
        let key = Key::new(format!("k{i}")).expect("a valid key");
        runtime.block_on(store.reserve(scope, &key, &owner, &hold, one)).expect("reserved");
        clock.set(START.saturating_add_millis(5 * (i + 1)));
    }
}

/// The first confirmation after a failover, tried up to five times by `confirm` (which confirms
/// one key for one owner at one version): the connections the store held led to the old primary,
/// so the first tries may fail until one reaches the new one. A try that failed indeterminate
/// may have confirmed the key already, so the answer that counts is then `Confirmed` or
/// `AlreadyConfirmed`; otherwise `Confirmed` alone. Panics, saying so, when none succeeded or
/// the answer is another. The number of tries.
pub fn confirm_after_failover(mut confirm: impl FnMut() -> Result<ConfirmOutcome, StoreError>) -> u32 {
    let (mut tries, mut maybe) = (0, false);
    let after = loop {
        tries += 1;
        match confirm() {
            Ok(outcome) => break outcome,
            Err(e) if tries < 5 => {
                eprintln!("after the failover, try {tries}: {}", error_chain(&e));
                maybe |= e.is_indeterminate();
            }
            Err(e) => panic!("the store never reached the new primary: {}", error_chain(&e)),
        }
    };
    let expected: &[ConfirmOutcome] = if maybe {
        &[ConfirmOutcome::Confirmed, ConfirmOutcome::AlreadyConfirmed]
    } else {
        &[ConfirmOutcome::Confirmed]
    };
    assert!(expected.contains(&after), "after the failover: {after:?} (an earlier try indeterminate: {maybe})");
    tries
}
