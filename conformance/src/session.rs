//! A session runs operations on a store and on the specification side by side, and compares
//! every outcome and, after every step, the lookup of every key it has touched.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap};
use std::fmt::{self, Debug};
use std::hash::BuildHasher;

use reservation_store::{
    AggregateRef, HoldId, Instant, InvalidArgument, Key, ManualClock, Monotonic, Operation, Outcome, ReleaseVersion,
    Request, Reservation, ReservationScope, ReservationStore, Rule, RuleSet, Step, StorageError, StoreError,
    StoreResult, StoredReservation, Tenant, Ttl, Version, spec,
};

use crate::failure::{Details, Failure};
use crate::harness::{Harness, START};

type SpecStep = Step<AggregateRef, BTreeSet<HoldId>, Outcome>;

/// Beyond this many keys, a session finds them by hash rather than by a linear search.
const INDEX_ABOVE: usize = 16;

/// One key the session touched.
struct SlotState {
    scope: ReservationScope,
    key: Key,
    state: Option<StoredReservation>,
    last_rule: Option<Rule>,
}

/// A store under test beside the specification's state of every key it touched.
pub(crate) struct Session<'h, H: Harness> {
    h: &'h H,
    store: Option<H::Store>,
    clock: ManualClock,
    /// The store's clock as the specification sees it: the suite's, never going back (D10), so
    /// that a check may set the suite's clock back and the specification still decides at the
    /// latest instant the store has read.
    store_clock: Monotonic<ManualClock>,
    check: String,
    rule: Option<Rule>,
    scopes: Vec<ReservationScope>,
    /// Every key touched so far, with the specification's state of it and the rule that last
    /// wrote it; a few keys per check, so a vector beats a map.
    slots: Vec<SlotState>,
    /// Positions in `slots` by hash of (scope, key), used once there are many.
    index: HashMap<u64, Vec<usize>>,
    hasher: RandomState,
    transcript: Vec<String>,
    record: bool,
    /// Whether every step looks up every watched key (else only its own).
    lookup_all: bool,
    steps: usize,
    reached: RuleSet,
}

impl<'h, H: Harness> Session<'h, H> {
    /// A session of `check` about `rule` (`None`: any rule, as in the differential check) on a
    /// fresh store whose clock reads [`START`].
    pub(crate) fn new(h: &'h H, check: &str, rule: Option<Rule>) -> Self {
        let clock = ManualClock::new(START);
        let store = h.store(clock.clone());
        Session {
            h,
            store: Some(store),
            store_clock: Monotonic::new(clock.clone()),
            clock,
            check: check.to_owned(),
            rule,
            scopes: Vec::new(),
            slots: Vec::new(),
            index: HashMap::new(),
            hasher: RandomState::new(),
            transcript: Vec::new(),
            record: true,
            lookup_all: true,
            steps: 0,
            reached: RuleSet::EMPTY,
        }
    }

    /// Stops (or resumes) writing the transcript, for speed; failures still say which step.
    pub(crate) fn set_recording(&mut self, on: bool) {
        self.record = on;
    }

    /// Makes each step look up only its own key, for checks of thousands of keys; they call
    /// [`Session::check_lookups`] themselves at chosen points.
    pub(crate) fn set_lookup_all(&mut self, on: bool) {
        self.lookup_all = on;
    }

    /// Counts `rule` as reached by a step that never got to a store (a constructor's error).
    pub(crate) fn reach(&mut self, rule: Rule) {
        self.reached.insert(rule);
    }

    /// The rules the specification reported so far.
    pub(crate) fn reached(&self) -> RuleSet {
        self.reached
    }

    /// The suite's clock.
    pub(crate) fn now(&self) -> Instant {
        use reservation_store::Clock;
        self.clock.now()
    }

    /// The instant the store decides its next call at, and the specification with it: the
    /// suite's clock, or the latest instant a call read if the clock was set back since (D10).
    fn decision_instant(&self) -> Instant {
        use reservation_store::Clock;
        self.store_clock.now()
    }

    /// The specification's current reservation of (scope, key), expired ones included.
    pub(crate) fn state(&self, scope: &ReservationScope, key: &Key) -> Option<&StoredReservation> {
        self.find(scope, key).and_then(|i| self.slots.get(i)).and_then(|s| s.state.as_ref())
    }

    /// Adds a line to the transcript.
    pub(crate) fn note(&mut self, line: impl FnOnce() -> String) {
        if self.record {
            let line = line();
            self.transcript.push(format!("    {line}"));
        }
    }

    fn store(&self) -> Result<&H::Store, Failure> {
        self.store.as_ref().ok_or_else(|| self.fail(None, "the store was not reopened".into()))
    }

    fn scope_label(&mut self, scope: &ReservationScope) -> String {
        let i = match self.scopes.iter().position(|s| s == scope) {
            Some(i) => i,
            None => {
                self.scopes.push(scope.clone());
                self.scopes.len() - 1
            }
        };
        format!("s{i}")
    }

    fn find(&self, scope: &ReservationScope, key: &Key) -> Option<usize> {
        let same = |s: &SlotState| s.key == *key && s.scope == *scope;
        if self.slots.len() <= INDEX_ABOVE {
            return self.slots.iter().position(same);
        }
        let positions = self.index.get(&self.hasher.hash_one((scope, key)))?;
        positions.iter().copied().find(|&i| self.slots.get(i).is_some_and(same))
    }

    /// The index of (scope, key) among the watched keys, added if new.
    fn watch(&mut self, scope: &ReservationScope, key: &Key) -> usize {
        self.find(scope, key).unwrap_or_else(|| {
            let i = self.slots.len();
            self.slots.push(SlotState { scope: scope.clone(), key: key.clone(), state: None, last_rule: None });
            if i == INDEX_ABOVE {
                // From now on, keys are found by hash.
                for (j, slot) in self.slots.iter().enumerate() {
                    self.index.entry(self.hasher.hash_one((&slot.scope, &slot.key))).or_default().push(j);
                }
            } else if i > INDEX_ABOVE {
                self.index.entry(self.hasher.hash_one((scope, key))).or_default().push(i);
            }
            i
        })
    }

    /// A failure of this session's check at `step_rule` because of `problem`.
    pub(crate) fn fail(&self, step_rule: Option<Rule>, problem: String) -> Failure {
        // The headline names the rule that decided the failing step, unless the check is about a
        // value rule (D1-D11, S1, P1: how expiries, versions, owners, keys and scopes compare, what
        // survives a restart), which is then the
        // rule broken whatever step shows it; the check's own rule, when it differs, is context.
        let rule = match self.rule {
            Some(r) if !Rule::TRANSITIONS.contains(&r) => Some(r),
            _ => step_rule.or(self.rule),
        };
        let mut context: Vec<String> =
            self.scopes.iter().enumerate().map(|(i, s)| format!("scope s{i} = {}", ShowScope(s))).collect();
        if let Some(check_rule) = self.rule.filter(|r| Some(*r) != rule) {
            context.push(format!("the check is about {check_rule}: {}", check_rule.text()));
        }
        context.push(format!("clock started at {START} and reads {} now", self.now()));
        let store_clock = self.store_clock.latest();
        if store_clock > self.now() {
            context.push(format!("the clock was set back: the store's must still read {store_clock} (D10)"));
        }
        Failure::from(Details {
            check: self.check.clone(),
            rule,
            property: None,
            step_rule,
            problem,
            context,
            transcript: self.transcript.clone(),
            replay: None,
        })
    }

    /// Sets the clock to `at` (it may go backwards only in checks that say so: the store's clock
    /// then stays where it was, rule D10).
    pub(crate) fn set_clock(&mut self, at: Instant) {
        let store = self.store_clock.latest();
        self.clock.set(at);
        if at < store {
            self.note(|| format!("clock set back to {at}; the store's clock must stay at {store} (D10)"));
        } else {
            self.note(|| format!("clock set to {at}"));
        }
    }

    /// Moves the clock forward by `millis`.
    pub(crate) fn advance(&mut self, millis: u64) {
        let at = self.now().saturating_add_millis(millis);
        self.set_clock(at);
    }

    /// Runs one operation: `expected` from the specification (or the invalid arguments it may
    /// report), `actual` from the store; compares them, then looks up every watched key.
    fn exec(
        &mut self,
        what: fmt::Arguments<'_>,
        scope: &ReservationScope,
        key: &Key,
        expected: Result<SpecStep, Vec<InvalidArgument>>,
        actual: StoreResult<Outcome>,
    ) -> Result<Rule, Failure> {
        self.steps += 1;
        let now = self.decision_instant();
        let i = self.watch(scope, key);
        let (rule, ok, exp_text) = match &expected {
            Ok(step) => (step.rule, matches!(&actual, Ok(o) if *o == step.outcome), format!("{:?}", step.outcome)),
            Err(errs) => (
                Rule::D6,
                matches!(&actual, Err(StoreError::Invalid(e)) if errs.contains(e)),
                match errs.as_slice() {
                    [one] => format!("Invalid({one:?})"),
                    many => format!("Invalid(one of {many:?})"),
                },
            ),
        };
        self.reached.insert(rule);
        let label = if self.record { self.scope_label(scope) } else { String::new() };
        let act_text = show_result(&actual);
        if let (Ok(step), Some(slot)) = (expected, self.slots.get_mut(i)) {
            slot.state = step.next;
            slot.last_rule = Some(step.rule);
        }
        if self.record || !ok {
            let state = show_state(spec::lookup(self.state(scope, key), now));
            let n = self.steps;
            let line = if ok {
                format!("{n:>3}   {now} {label} {what} = {act_text} [{rule}]; key now {state}")
            } else {
                format!("{n:>3} ✗ {now} {label} {what}: expected {exp_text} [{rule}], actual {act_text}   <-- differs")
            };
            self.transcript.push(line);
        }
        if !ok {
            let problem = match &actual {
                Err(StoreError::Storage(e)) => format!("step {} failed in storage: {e}", self.steps),
                _ => {
                    format!("step {} returned {act_text}; the specification says {exp_text} (rule {rule})", self.steps)
                }
            };
            return Err(self.fail(Some(rule), problem));
        }
        if self.lookup_all {
            self.check_lookups()?
        } else {
            self.check_slots(i..i + 1)?
        }
        Ok(rule)
    }

    /// Looks up every watched key and compares it with the specification.
    pub(crate) fn check_lookups(&mut self) -> Result<(), Failure> {
        self.check_slots(0..self.slots.len())
    }

    /// Looks up the watched keys in `range` and compares them with the specification.
    fn check_slots(&mut self, range: std::ops::Range<usize>) -> Result<(), Failure> {
        let now = self.decision_instant();
        let store = self.store()?;
        let slots = self.slots.get(range.clone()).unwrap_or_default();
        let keys: Vec<(&ReservationScope, &Key)> = slots.iter().map(|s| (&s.scope, &s.key)).collect();
        let mut found = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.h.lookups(store, &keys))) {
            Ok(found) => found,
            Err(panic) => {
                let why = panic_message(&*panic);
                keys.iter().map(|_| Err(StorageError::new(format!("the store panicked: {why}")).into())).collect()
            }
        }
        .into_iter();
        let mismatch = slots.iter().zip(range).find_map(|(slot, i)| {
            let actual = found.next().unwrap_or_else(|| {
                Err(StorageError::new("the harness answered fewer lookups than it was asked").into())
            });
            let expected = spec::lookup(slot.state.as_ref(), now);
            let same = matches!(&actual, Ok(a) if a.as_ref() == expected);
            (!same).then(|| (i, actual, expected.cloned()))
        });
        let Some((i, actual, expected)) = mismatch else { return Ok(()) };
        let Some(slot) = self.slots.get(i) else { return Ok(()) };
        let (scope, key) = (slot.scope.clone(), slot.key.clone());
        let rule = self.lookup_rule(slot, now);
        let label = self.scope_label(&scope);
        let act = match &actual {
            Ok(a) => show_state(a.as_ref()),
            Err(e) => show_error(e),
        };
        let exp = show_state(expected.as_ref());
        self.transcript.push(format!(
            "    ✗ {now} lookup({label}, {key:?}) after step {}: expected {exp}, actual {act}   <-- differs",
            self.steps
        ));
        let problem = format!(
            "after step {}, lookup of {key:?} in {label} returned {act}; the specification says {exp}",
            self.steps
        );
        Err(self.fail(Some(rule), problem))
    }

    /// The rule a wrong lookup of `slot` breaks: the expiry boundary or D7 for a pending
    /// reservation at or past its expiry, otherwise the rule that last wrote the key.
    fn lookup_rule(&self, slot: &SlotState, now: Instant) -> Rule {
        match slot.state.as_ref().and_then(Reservation::as_pending) {
            // Live a millisecond ago and not a millisecond on: the key is at its expiry boundary.
            Some(p) if p.is_live(now.saturating_sub_millis(1)) && !p.is_live(now.saturating_add_millis(1)) => Rule::D1,
            Some(p) if !p.is_live(now) => Rule::D7,
            _ => slot.last_rule.unwrap_or(Rule::D7),
        }
    }

    /// Fails unless the specification decided the last step by `want`: a guard on the check's
    /// own script.
    pub(crate) fn expect(&self, want: Rule, got: Rule) -> Result<(), Failure> {
        if want == got {
            Ok(())
        } else {
            Err(self.fail(Some(got), format!("the check's script meant to reach {want} but reached {got}")))
        }
    }

    /// One operation on (scope, key), on both sides: the specification decides it through
    /// [`spec::apply`] once the scope admits its owner, the store through
    /// [`ReservationStore::execute`]; the two outcomes must be equal.
    pub(crate) fn execute(
        &mut self,
        scope: &ReservationScope,
        key: &Key,
        operation: Operation<&AggregateRef, &HoldId>,
    ) -> Result<Rule, Failure> {
        let now = self.decision_instant();
        let expected =
            admitted(scope, operation.owner()).map(|()| spec::apply(self.state(scope, key).cloned(), now, operation));
        let store = self.store()?;
        let actual = guarded(|| self.h.block_on(store.execute(Request { scope, key, operation })));
        self.exec(format_args!("{}", ShowOperation(key, operation)), scope, key, expected, actual)
    }

    /// reserve, on both sides.
    pub(crate) fn reserve(
        &mut self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        hold: &HoldId,
        ttl: Ttl,
    ) -> Result<Rule, Failure> {
        self.execute(scope, key, Operation::Reserve { owner, hold, ttl })
    }

    /// confirm, on both sides.
    pub(crate) fn confirm(
        &mut self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        version: Version,
    ) -> Result<Rule, Failure> {
        self.execute(scope, key, Operation::Confirm { owner, version })
    }

    /// release, on both sides.
    pub(crate) fn release(
        &mut self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        version: ReleaseVersion,
    ) -> Result<Rule, Failure> {
        self.execute(scope, key, Operation::Release { owner, version })
    }

    /// abandon, on both sides.
    pub(crate) fn abandon(
        &mut self,
        scope: &ReservationScope,
        key: &Key,
        owner: &AggregateRef,
        hold: &HoldId,
    ) -> Result<Rule, Failure> {
        self.execute(scope, key, Operation::Abandon { owner, hold })
    }

    /// lookup, on both sides (and of every other watched key).
    pub(crate) fn lookup(&mut self, scope: &ReservationScope, key: &Key) -> Result<(), Failure> {
        self.steps += 1;
        self.watch(scope, key);
        if self.record {
            let now = self.decision_instant();
            let label = self.scope_label(scope);
            let state = show_state(spec::lookup(self.state(scope, key), now));
            let n = self.steps;
            self.transcript.push(format!("{n:>3}   {now} {label} lookup({key:?}) expecting {state}"));
        }
        self.check_lookups()
    }

    /// Closes the store and opens it again through [`Harness::reopen`], then looks up every key.
    pub(crate) fn reopen(&mut self) -> Result<(), Failure> {
        self.steps += 1;
        if let Some(store) = self.store.take() {
            match self.h.reopen(store, self.clock.clone()) {
                Some(store) => self.store = Some(store),
                None => {
                    return Err(self.fail(
                        None,
                        "the harness declares the durable capability, but Harness::reopen returned None: \
                         a durable store must be closed and opened again on the same storage"
                            .into(),
                    ));
                }
            }
        }
        let n = self.steps;
        self.note(|| format!("{n:>3}   store closed and reopened"));
        self.check_lookups()
    }
}

/// Runs one call of the store, turning a panic into a storage error that names it, so that the
/// failure still shows the step and the rule.
pub(crate) fn guarded<T>(call: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).unwrap_or_else(|panic| {
        Err(StoreError::Storage(StorageError::new(format!("the store panicked: {}", panic_message(&*panic)))))
    })
}

/// The message of a panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// Whether `scope` admits `owner`; if not, every invalid-argument error a store may report for
/// it (D6 lets a store report any one of several).
pub(crate) fn admitted(scope: &ReservationScope, owner: &AggregateRef) -> Result<(), Vec<InvalidArgument>> {
    let Err(first) = scope.admits(owner) else { return Ok(()) };
    let mut errors = vec![first];
    // Each mismatch on its own, found by curing the other one, as the core's validation says.
    let same_type = AggregateRef { aggregate_type: scope.aggregate_type.clone(), ..owner.clone() };
    let tenant = if scope.tenant == Tenant::System { owner.tenant.clone() } else { scope.tenant.clone() };
    let same_tenant = AggregateRef { tenant, ..owner.clone() };
    for alone in [scope.admits(&same_type), scope.admits(&same_tenant)] {
        if let Err(e) = alone
            && !errors.contains(&e)
        {
            errors.push(e);
        }
    }
    Err(errors)
}

/// An operation on a key in one short line, as transcripts show it.
pub(crate) struct ShowOperation<'a>(pub(crate) &'a Key, pub(crate) Operation<&'a AggregateRef, &'a HoldId>);

impl fmt::Display for ShowOperation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.0;
        match self.1 {
            Operation::Reserve { owner, hold, ttl } => {
                write!(f, "reserve({key:?}, {}, hold {hold:?}, ttl {}ms)", ShowOwner(owner), ttl.as_millis())
            }
            Operation::Confirm { owner, version } => write!(f, "confirm({key:?}, {}, {version})", ShowOwner(owner)),
            Operation::Release { owner, version } => write!(f, "release({key:?}, {}, {version})", ShowOwner(owner)),
            Operation::Abandon { owner, hold } => write!(f, "abandon({key:?}, {}, hold {hold:?})", ShowOwner(owner)),
        }
    }
}

/// An owner in one short line, its id quoted so that a trailing space shows.
pub(crate) struct ShowOwner<'a>(pub(crate) &'a AggregateRef);

impl fmt::Display for ShowOwner<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        match &o.tenant {
            Tenant::System => write!(f, "{}/SYSTEM_TENANT/{:?}", o.aggregate_type, o.id.as_str()),
            Tenant::Id(t) => write!(f, "{}/{:?}/{:?}", o.aggregate_type, t.as_str(), o.id.as_str()),
        }
    }
}

/// A scope in one short line, its parts quoted so that `SYSTEM_TENANT` stands out from a tenant
/// of that name.
pub(crate) struct ShowScope<'a>(pub(crate) &'a ReservationScope);

impl fmt::Display for ShowScope<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        match &s.tenant {
            Tenant::System => write!(f, "{:?}/SYSTEM_TENANT/{:?}", s.aggregate_type.as_str(), s.namespace.as_str()),
            Tenant::Id(t) => {
                write!(f, "{:?}/{:?}/{:?}", s.aggregate_type.as_str(), t.as_str(), s.namespace.as_str())
            }
        }
    }
}

/// A reservation in one short line.
pub(crate) fn show_state(r: Option<&StoredReservation>) -> String {
    match r {
        None => "free".into(),
        Some(Reservation::Pending(p)) => {
            let holds: Vec<String> = p.holds().iter().map(|h| format!("{:?}", h.as_str())).collect();
            format!("pending({}, holds [{}], expires {})", ShowOwner(p.owner()), holds.join(", "), p.expires_at())
        }
        Some(Reservation::Confirmed(c)) => format!("confirmed({}, {})", ShowOwner(&c.owner), c.version),
    }
}

/// A store error in one short line.
pub(crate) fn show_error(e: &StoreError) -> String {
    match e {
        StoreError::Invalid(i) => format!("Invalid({i:?})"),
        StoreError::Storage(s) => format!("StorageError({s})"),
    }
}

/// A store result in one short line.
pub(crate) fn show_result<T: Debug>(r: &StoreResult<T>) -> String {
    match r {
        Ok(v) => format!("{v:?}"),
        Err(e) => show_error(e),
    }
}
