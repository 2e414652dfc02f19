//! What an implementer supplies: a [`Harness`] that builds stores around the suite's clock.

use std::future::Future;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

pub use reservation_disk::Persistence;

use reservation_store::{
    Instant, Key, ManualClock, MemoryStore, Namespace, ReservationScope, ReservationStore, StorageError, StoreResult,
    StoredReservation,
};
use serde_json::Value;

/// Builds the stores under test and runs their futures.
///
/// The suite calls [`Harness::store`] once per check (and per differential case) with a fresh
/// [`ManualClock`] that it alone moves; the store must judge expiry by that clock. Every check
/// works in its own namespace ([`unique_namespace`]), so stores built by one harness may share
/// one database: a check never sees another's keys.
///
/// [`Harness::block_on`] drives the store's futures. Its default, [`reservation_store::block_on`],
/// suits synchronous stores whose futures are ready at once; an asynchronous store overrides it
/// with its runtime's, for example `self.runtime.block_on(future)` on tokio. The linearizability
/// check calls it from several threads at once.
pub trait Harness: Sync {
    /// The store under test.
    type Store: ReservationStore + Sync;

    /// A store whose clock is `clock`. It may share storage with earlier stores of this harness.
    fn store(&self, clock: ManualClock) -> Self::Store;

    /// Runs `future` to completion.
    fn block_on<F: Future>(&self, future: F) -> F::Output {
        reservation_store::block_on(future)
    }

    /// The optional capabilities the store declares; the checks of the others are skipped.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    /// Closes `store` and opens a new store on the same storage, as a process restart would, or
    /// `None` when the store does not survive a restart. By default: for a harness that declares
    /// [`Capabilities::durable`], `store` dropped and then [`Harness::store`] with `clock`, which
    /// suits every harness whose stores share their storage (a database file, a server); `None`
    /// for the others. A durable harness whose stores do not share storage, or that must run its
    /// store's recovery otherwise, overrides it; the durable checks fail on `None`, since handing
    /// back the same store object would test nothing.
    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        if !self.capabilities().durable {
            return None;
        }
        drop(store);
        Some(self.store(clock))
    }

    /// A store whose clock is `clock` and whose storage lives under `dir`, for the power-cut check
    /// ([`crate::crashes::power_cuts`]): the suite mounts a disk that can lose power at `dir` (an
    /// empty directory of its own), opens the store there, and after each cut drops it and calls
    /// this again on what the cut left, as a machine that lost power would restart the store. The
    /// store keeps everything that must survive under `dir` (a server it starts puts its data
    /// directory there), and the first call finds `dir` empty.
    ///
    /// `None`, the default: the store keeps no storage in a directory the suite can mount, and
    /// the power-cut check is skipped. A harness that declares [`Capabilities::power_cuts`] must
    /// give a store.
    fn store_in(&self, dir: &Path, clock: ManualClock) -> Option<Self::Store> {
        let _ = (dir, clock);
        None
    }

    /// Looks up each of `keys` in `store`, as the suite does after every step, the answers in the
    /// order of `keys`. They run at the same instant and change nothing, so their order does not
    /// matter: by default [`LOOKUPS_AT_ONCE`] [`ReservationStore::lookup`]s are awaited together
    /// in one [`Harness::block_on`], which a store behind a round trip (a pool of connections, a
    /// multiplexed one) answers in about the time of one, and a store that answers at once takes
    /// one after another. A harness may send more at once (the driver's sends them all before it
    /// waits for any answer).
    fn lookups(
        &self,
        store: &Self::Store,
        keys: &[(&ReservationScope, &Key)],
    ) -> Vec<StoreResult<Option<StoredReservation>>> {
        keys.chunks(LOOKUPS_AT_ONCE)
            .flat_map(|chunk| {
                self.block_on(futures_util::future::join_all(chunk.iter().map(|(scope, key)| store.lookup(scope, key))))
            })
            .collect()
    }

    /// Runs `requests` on `store` as written in the driver protocol's form (`PROTOCOL.md`),
    /// whatever values they hold (an empty key, a negative TTL, `"ANY"` given to confirm, text
    /// that is not Unicode), and returns each one's [`RawAnswer`], in the order of `requests`.
    /// They may run in any order, as requests in flight together do: the suite sends together
    /// only requests on different keys, or requests that must change nothing.
    ///
    /// `None`, the default: this harness speaks only the typed API, whose types cannot hold most
    /// such values; the suite then runs, through [`ReservationStore::execute`] and
    /// [`ReservationStore::lookup`], only the requests that parse into typed values. The driver's
    /// harness ([`crate::driver::CommandHarness`]) sends them to its adapter as they are. Asked
    /// with no requests, a harness that can send them answers `Some` of nothing.
    fn send_raw(&self, store: &Self::Store, requests: &[RawRequest]) -> Option<Vec<RawAnswer>> {
        let _ = (store, requests);
        None
    }

    /// The faults [`Harness::inject`] can cause now, in the store's world: none by default. The
    /// fault check ([`crate::faults`]) asks before each fault it fires, so a harness may stop
    /// offering one it can no longer cause (a second [`Fault::Failover`] with no replica left).
    /// [`Fault::Restart`] and [`Fault::ClockJump`] are the suite's own: listing them changes
    /// nothing.
    fn faults(&self) -> Vec<Fault> {
        Vec::new()
    }

    /// Causes `fault` and returns once it has ended: the server killed and started again and
    /// answering, the replica promoted and taking writes, the paused server let go on. The
    /// store's own operations, which other threads run meanwhile, must find their way back by
    /// themselves. An error when the fault could not be caused (by default:
    /// [`not_offered`]).
    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        Err(not_offered(fault))
    }

    /// Why no store of this harness can answer any more, if that is so: the adapter behind the
    /// driver broke the protocol (it exited, wrote what is not an answer, stopped answering). The
    /// suite then starts no other check: each is reported as failed on the broken adapter,
    /// pointing back to the first. `None`, the default: a harness whose stores can always be asked.
    fn broken(&self) -> Option<String> {
        None
    }
}

/// A harness borrowed: a test binary keeps one harness (one pool, one runtime) in a static and
/// hands every test a reference.
impl<H: Harness> Harness for &H {
    type Store = H::Store;

    fn store(&self, clock: ManualClock) -> Self::Store {
        (**self).store(clock)
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        (**self).block_on(future)
    }

    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        (**self).reopen(store, clock)
    }

    fn store_in(&self, dir: &Path, clock: ManualClock) -> Option<Self::Store> {
        (**self).store_in(dir, clock)
    }

    fn lookups(
        &self,
        store: &Self::Store,
        keys: &[(&ReservationScope, &Key)],
    ) -> Vec<StoreResult<Option<StoredReservation>>> {
        (**self).lookups(store, keys)
    }

    fn send_raw(&self, store: &Self::Store, requests: &[RawRequest]) -> Option<Vec<RawAnswer>> {
        (**self).send_raw(store, requests)
    }

    fn broken(&self) -> Option<String> {
        (**self).broken()
    }

    fn faults(&self) -> Vec<Fault> {
        (**self).faults()
    }

    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        (**self).inject(fault)
    }
}

/// The answer to a [`RawRequest`]: `Ok(Ok(ok))` with the answer's `ok` value, `Ok(Err(error))`
/// with its `error` object, as the store wrote them; or `Err` when no answer came (the adapter
/// hung, died or wrote what the protocol does not allow).
pub type RawAnswer = Result<Result<Value, Value>, StorageError>;

/// A request in the driver protocol's form (`PROTOCOL.md`), without its `id` and `store`, which
/// the harness adds: a JSON object that may hold what the typed API cannot say, and, at one
/// place, raw JSON text that a [`serde_json::Value`] cannot hold either (a lone surrogate escape
/// `"\ud800"`, the integer `18446744073709551616`).
#[derive(Clone, PartialEq, Debug)]
pub struct RawRequest {
    request: Value,
    /// A JSON pointer into `request`, and the raw JSON text written there.
    raw: Option<(String, String)>,
}

/// What stands for the raw text in a request's fields until it is written out.
const RAW_MARK: &str = "\u{0}raw\u{0}";

impl RawRequest {
    /// The request `request`, a JSON object (anything else is written as it is, without `id`).
    pub fn new(request: Value) -> Self {
        RawRequest { request, raw: None }
    }

    /// The request `request` with the value at `pointer` (such as `/scope/tenant`; added to the
    /// object when absent) written as the raw JSON text `token`, unchecked.
    pub fn with_raw(mut request: Value, pointer: &str, token: &str) -> Self {
        put(&mut request, pointer, Value::from(RAW_MARK));
        RawRequest { request, raw: Some((pointer.to_owned(), token.to_owned())) }
    }

    /// The request as one JSON text, without `id` and `store`.
    pub fn text(&self) -> String {
        self.written(&self.request)
    }

    /// The request as a JSON value, or `None` when its text is not what serde_json reads (a
    /// lone surrogate). A number past `u64` reads as a float.
    pub fn value(&self) -> Option<Value> {
        match &self.raw {
            None => Some(self.request.clone()),
            Some(_) => serde_json::from_str(&self.text()).ok(),
        }
    }

    /// The request's `op`.
    pub fn op(&self) -> Option<&str> {
        self.request.get("op").and_then(Value::as_str)
    }

    /// The line to write for this request as request `id` on store `store`, without its
    /// newline.
    pub fn line(&self, id: u64, store: u64) -> String {
        let mut request = self.request.clone();
        if let Some(fields) = request.as_object_mut() {
            fields.insert("id".into(), id.into());
            fields.insert("store".into(), store.into());
        }
        self.written(&request)
    }

    /// `request` as JSON text, the raw text in place of its mark.
    fn written(&self, request: &Value) -> String {
        let text = request.to_string();
        match &self.raw {
            Some((_, token)) => text.replacen(&Value::from(RAW_MARK).to_string(), token, 1),
            None => text,
        }
    }
}

/// Sets the value at `pointer` in `request`, adding the last field to its object when absent.
fn put(request: &mut Value, pointer: &str, value: Value) {
    if let Some(slot) = request.pointer_mut(pointer) {
        *slot = value;
        return;
    }
    let (parent, field) = pointer.rsplit_once('/').unwrap_or(("", pointer));
    if let Some(fields) = request.pointer_mut(parent).and_then(Value::as_object_mut) {
        fields.insert(field.to_owned(), value);
    }
}

/// Optional capabilities a store declares, so that the suite checks them rather than guessing.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct Capabilities {
    /// Reservations survive [`Harness::reopen`] and crashes: no confirmed reservation is lost and
    /// no released one comes back (P1), and the store's clock never goes back across a restart
    /// (D10: it persists the instant of each change, and a reopened store never decides earlier).
    pub durable: bool,
    /// What the store promises to survive when the machine loses power: `Some(model)` when every
    /// change it acknowledged survives a power cut under `model` and under every milder model
    /// (those before it in [`Persistence::ALL`]; `reorder` includes `torn`). The power-cut check
    /// ([`crate::crashes::power_cuts`]) runs the store on a disk that can lose power, through
    /// [`Harness::store_in`], and cuts it under those models. `Some(Persistence::Process)`
    /// promises a process crash only (what SQLite's `synchronous = NORMAL` promises); `None`, the
    /// default, promises nothing and skips the check. A promise implies `durable`.
    pub power_cuts: Option<Persistence>,
}

impl Capabilities {
    /// These capabilities, with `durable` set to `on`.
    pub const fn with_durable(mut self, on: bool) -> Self {
        self.durable = on;
        self
    }

    /// These capabilities, durable, with the promise to survive power cuts under `model` and
    /// every milder model ([`Capabilities::power_cuts`]).
    pub const fn with_power_cuts(mut self, model: Persistence) -> Self {
        self.durable = true;
        self.power_cuts = Some(model);
        self
    }
}

/// What a check needs the store to declare ([`Capabilities`]) before it can run; each check is
/// listed with its requirement. A check whose requirement is not met is skipped, saying why
/// ([`CheckResult::Skipped`](crate::CheckResult::Skipped)), and its test from [`tests!`](crate::tests)
/// is `#[ignore]`d unless the macro is told the capabilities.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Requirement {
    /// Every store runs the check.
    Nothing,
    /// The store declares [`Capabilities::durable`] (`p1_durable_…`).
    Durable,
    /// The store declares [`Capabilities::power_cuts`] (`p1_power_cuts_…`).
    PowerCuts,
}

impl Requirement {
    /// Whether `capabilities` meet the requirement.
    pub const fn met_by(self, capabilities: Capabilities) -> bool {
        match self {
            Requirement::Nothing => true,
            Requirement::Durable => capabilities.durable,
            Requirement::PowerCuts => capabilities.power_cuts.is_some(),
        }
    }

    /// Why a check of this requirement is skipped on a store with `capabilities`; `None` when it
    /// runs.
    pub const fn skipped(self, capabilities: Capabilities) -> Option<&'static str> {
        if self.met_by(capabilities) {
            return None;
        }
        Some(match self {
            Requirement::Nothing => "",
            Requirement::Durable => "the store does not declare the `durable` capability",
            Requirement::PowerCuts => {
                "the store declares no promise to survive power cuts (`Capabilities::power_cuts`)"
            }
        })
    }
}

/// A fault in the store's world. A harness offers the ones it can cause
/// ([`Harness::faults`]) and causes them on the suite's call
/// ([`Harness::inject`]); the suite causes [`Fault::Restart`] and
/// [`Fault::ClockJump`] itself.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[non_exhaustive]
pub enum Fault {
    /// Every connection between the store and its server is cut; the server keeps running and the
    /// store must connect again by itself. Operations in flight fail.
    CutConnections,
    /// The server is killed (SIGKILL: nothing is flushed) and started again on the same storage;
    /// the store must connect again by itself.
    Crash,
    /// The server is stopped (SIGSTOP) for a while, then let go on (SIGCONT): it neither answers
    /// nor closes its connections meanwhile.
    Pause,
    /// The primary is killed and a replica promoted in its place; the store must follow it.
    Failover,
    /// The primary is cut off from the nodes that watch it (Redis's sentinels, a PostgreSQL
    /// orchestrator's monitor) and from its replicas, while the store still reaches it and may
    /// go on writing to it, until a replica is promoted in its place by those nodes; then the
    /// network heals, and the old primary is demoted (made a replica of the new one by those
    /// nodes, or by its own orchestrator, as Patroni demotes a leader out of reach of etcd). What
    /// it acknowledged meanwhile is on no other node; the store must follow the new primary.
    Partition,
    /// The primary is stopped (SIGSTOP) past the failure detector's timeout of the nodes that
    /// watch it, until they promote a replica in its place, then let go on (SIGCONT): it comes
    /// back believing it leads, answers what was sent to it meanwhile and takes writes until it
    /// is demoted (made a replica of the new primary, or stopped by its own orchestrator, as
    /// Patroni does once it finds its key another's). The store must follow the new primary.
    LongPause,
    /// The suite's own, for a durable harness: the store is closed and a new one opened on the
    /// same storage ([`Harness::reopen`]), as a restarting process.
    Restart,
    /// The suite's own: the store's clock jumps ahead, past every reservation's expiry.
    ClockJump,
    /// The suite's own, for a harness that declares [`Capabilities::power_cuts`]: the disk under
    /// the store loses power (every operation on it fails from then on), takes back what was
    /// never synced under a [`Persistence`] model, and the store is opened again on what is left
    /// ([`Harness::store_in`]).
    PowerCut,
}

impl Fault {
    /// Every fault.
    pub const ALL: [Fault; 9] = [
        Fault::CutConnections,
        Fault::Crash,
        Fault::Pause,
        Fault::Failover,
        Fault::Partition,
        Fault::LongPause,
        Fault::Restart,
        Fault::ClockJump,
        Fault::PowerCut,
    ];

    /// The fault's name, as reports print it: `cut-connections`, `crash`, `pause`, `failover`,
    /// `partition`, `long-pause`, `restart`, `clock-jump`, `power-cut`.
    pub const fn name(self) -> &'static str {
        match self {
            Fault::CutConnections => "cut-connections",
            Fault::Crash => "crash",
            Fault::Pause => "pause",
            Fault::Failover => "failover",
            Fault::Partition => "partition",
            Fault::LongPause => "long-pause",
            Fault::Restart => "restart",
            Fault::ClockJump => "clock-jump",
            Fault::PowerCut => "power-cut",
        }
    }

    /// Whether the fault may lose writes that were acknowledged: a crash, a failover, a
    /// partition, a long pause, a restart or a power cut. The fault check looks up every
    /// acknowledged confirmation after each.
    pub const fn may_lose_writes(self) -> bool {
        matches!(
            self,
            Fault::Crash | Fault::Failover | Fault::Partition | Fault::LongPause | Fault::Restart | Fault::PowerCut
        )
    }

    /// The fault named `name` ([`Fault::name`]), if any.
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Whether the suite causes the fault itself, rather than the harness.
    pub const fn is_the_suites(self) -> bool {
        matches!(self, Fault::Restart | Fault::ClockJump | Fault::PowerCut)
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The error of [`Harness::inject`] for a fault the harness does not
/// offer.
pub fn not_offered(fault: Fault) -> StorageError {
    StorageError::new(format!("this harness cannot cause the fault `{fault}`"))
}

/// `MemoryStore` on the suite's clock: the harness of the suite's own tests, and
/// a template for implementers.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemoryHarness;

impl Harness for MemoryHarness {
    type Store = MemoryStore<ManualClock>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        MemoryStore::with_clock(clock)
    }
}

/// The methods of [`Harness`] with a default that a wrapper must pass through to the harness it
/// wraps: a wrapper that leaves one to the trait's default quietly weakens the checks that use
/// it (a lenient adapter passes the argument sweep when `send_raw` is dropped; the fault check
/// fires nothing when `faults` is). [`dropped_parts`] finds the ones a wrapper drops.
pub const PARTS: [&str; 9] =
    ["block_on", "capabilities", "reopen", "store_in", "lookups", "send_raw", "faults", "inject", "broken"];

/// The parts ([`PARTS`]) that the wrapper `wrap` builds around a harness of its own does not
/// pass through: each method of the wrapper is called once, and a part is dropped when the call
/// does not reach the wrapped harness or its answer does not come back. Empty for a wrapper
/// that passes every part through; test every wrapper with it:
///
/// ```
/// use reservation_conformance::{dropped_parts, faults::Simulated};
/// assert_eq!(dropped_parts(|probe| Simulated::new(probe)), Vec::<&str>::new());
/// ```
///
/// The wrapped harness is a `MemoryStore`'s that declares itself durable, offers
/// [`Fault::Crash`], answers raw requests and says it is broken; a wrapper that adds faults of its
/// own may offer more, and must still offer and cause [`Fault::Crash`] through the wrapped one.
pub fn dropped_parts<W: Harness>(wrap: impl FnOnce(Probe) -> W) -> Vec<&'static str> {
    let probe = Probe::default();
    let seen = probe.seen.clone();
    let wrapper = wrap(probe);
    let clock = ManualClock::new(START);
    let mut answered = std::collections::BTreeSet::new();
    let mut answer = |part: &'static str, ok: bool| {
        if ok {
            answered.insert(part);
        }
    };
    answer("block_on", wrapper.block_on(async { 7 }) == 7);
    answer("capabilities", wrapper.capabilities().durable);
    let store = wrapper.store(clock.clone());
    let aggregate_type = reservation_store::AggregateType::new("probe").expect("a valid aggregate type");
    let scope = ReservationScope::new(aggregate_type, reservation_store::SYSTEM_TENANT, unique_namespace("probe"));
    let key = Key::new("k").expect("a valid key");
    answer("lookups", wrapper.lookups(&store, &[(&scope, &key)]).len() == 1);
    answer("send_raw", wrapper.send_raw(&store, &[]).is_some());
    answer("faults", wrapper.faults().contains(&Fault::Crash));
    answer("inject", wrapper.inject(Fault::Crash).is_ok());
    answer("broken", wrapper.broken().is_some());
    answer("reopen", wrapper.reopen(store, clock.clone()).is_some());
    answer("store_in", wrapper.store_in(Path::new("/probe"), clock).is_some());
    let seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    PARTS.into_iter().filter(|part| !(seen.contains(part) && answered.contains(part))).collect()
}

/// The harness [`dropped_parts`] wraps: a `MemoryStore`'s, noting each part it is asked for.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    seen: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<&'static str>>>,
}

impl Probe {
    fn saw(&self, part: &'static str) {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(part);
    }
}

impl Harness for Probe {
    type Store = MemoryStore<ManualClock>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        MemoryStore::with_clock(clock)
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.saw("block_on");
        reservation_store::block_on(future)
    }

    fn capabilities(&self) -> Capabilities {
        self.saw("capabilities");
        Capabilities::default().with_durable(true)
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        self.saw("reopen");
        drop(store);
        Some(self.store(clock))
    }

    fn store_in(&self, _: &Path, clock: ManualClock) -> Option<Self::Store> {
        self.saw("store_in");
        Some(self.store(clock))
    }

    fn lookups(
        &self,
        store: &Self::Store,
        keys: &[(&ReservationScope, &Key)],
    ) -> Vec<StoreResult<Option<StoredReservation>>> {
        self.saw("lookups");
        keys.iter().map(|(scope, key)| reservation_store::block_on(store.lookup(scope, key))).collect()
    }

    fn send_raw(&self, _: &Self::Store, _: &[RawRequest]) -> Option<Vec<RawAnswer>> {
        self.saw("send_raw");
        Some(Vec::new())
    }

    fn faults(&self) -> Vec<Fault> {
        self.saw("faults");
        vec![Fault::Crash]
    }

    fn inject(&self, fault: Fault) -> Result<(), StorageError> {
        self.saw("inject");
        match fault {
            Fault::Crash => Ok(()),
            other => Err(not_offered(other)),
        }
    }

    fn broken(&self) -> Option<String> {
        self.saw("broken");
        Some("the probe says it is broken".into())
    }
}

/// How many lookups [`Harness::lookups`] awaits together by default: no more than the smallest
/// pool of connections among the built-in stores (PostgreSQL's 16) holds, so that none waits for
/// a connection.
pub const LOOKUPS_AT_ONCE: usize = 8;

/// Where every check's clock starts: far from both ends, so that `expires_at - 1` and large
/// moves stay meaningful.
pub const START: Instant = Instant::from_millis(1_000_000);

/// A namespace that no other check of any run uses: `label`, this process's run token and a
/// counter, so that checks can share one database, even across runs.
pub fn unique_namespace(label: &str) -> Namespace {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let (token, n) = match FIXED.get() {
        // The test vectors: the same namespaces on every run, of the same lengths.
        Some(n) => {
            FIXED.set(Some(n + 1));
            (0, n)
        }
        None => (run_token(), COUNTER.fetch_add(1, Ordering::Relaxed)),
    };
    // At most 200 bytes of the label (whole characters), so that with the token and counter the
    // namespace stays below MAX_NAME_LEN whatever the label.
    let mut label = label.to_owned();
    let mut end = label.len().min(200);
    while !label.is_char_boundary(end) {
        end -= 1;
    }
    label.truncate(end);
    Namespace::new(format!("{label}.{token:016x}.{n}")).expect("a short non-empty namespace is valid")
}

std::thread_local! {
    /// On this thread, `Some(n)` makes [`unique_namespace`] use the token 0 and count from `n`.
    static FIXED: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// Makes [`unique_namespace`] on this thread the same from run to run (token 0, counting from
/// 0), or unique again with `false`: the test vectors are recorded so.
pub(crate) fn fixed_namespaces(on: bool) {
    FIXED.set(on.then_some(0));
}

/// A token for this process's run: the time and process id, hashed.
fn run_token() -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    use std::sync::OnceLock;
    static TOKEN: OnceLock<u64> = OnceLock::new();
    *TOKEN.get_or_init(|| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        std::process::id().hash(&mut h);
        std::time::SystemTime::now().hash(&mut h);
        h.finish()
    })
}
