//! A session runs operations on a store and on the specification side by side, and compares
//! every outcome and, after every step, the lookup of every key it has touched.
//!
//! Every entry point a store can override is called: the operations of a session go to the store
//! through [`ReservationStore::execute`](reservation_store::ReservationStore::execute) and
//! through the typed methods (`reserve`, `confirm`, `release`, `abandon`) in turn ([`Entry`]), so
//! that a store whose typed method differs from its `execute` fails; the transcript and the
//! failure say which method answered.

use std::collections::hash_map::RandomState;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::hash::BuildHasher;

use reservation_store::rules::{Rule, RuleSet};
use reservation_store::spec::{Reservation, Step};
use reservation_store::{
    AggregateRef, HoldId, Instant, InvalidArgument, Key, ManualClock, Monotonic, Operation, Outcome, ReleaseVersion,
    ReservationScope, StorageError, StoreError, StoreResult, StoredReservation, Tenant, Ttl, Version, error_chain,
    spec,
};

use crate::entry::{Entry, call};
use crate::expected::{admission_errors, lookup_rule};
use crate::failure::{Details, Failure, Finding, check_name};
use crate::harness::{Harness, START};
use crate::protocol::{ProtocolError, ShapeError};
use crate::show::{ShowOperation, ShowScope, panic_message, show_error, show_result, show_state};

type SpecStep = Step<AggregateRef, BTreeSet<HoldId>, Outcome>;

/// Beyond this many keys, a session finds them by hash rather than by a linear search.
const INDEX_ABOVE: usize = 16;

/// One key the session touched.
struct SlotState {
    scope: ReservationScope,
    key: Key,
    state: Option<StoredReservation>,
    last_rule: Option<Rule>,
    last: Option<LastStep>,
}

/// The last operation on a key that the specification decided: the key's state before it, the
/// instant and the operation, so that a wrong lookup can be laid beside what that step would have
/// made on a misread value ([`MISREADINGS`]), or beside the key as it was before it.
struct LastStep {
    before: Option<StoredReservation>,
    at: Instant,
    operation: Operation<AggregateRef, HoldId>,
    step: usize,
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
    /// Operations sent to the store so far, which choose each one's [`Entry`].
    operations: usize,
    reached: RuleSet,
}

impl<'h, H: Harness> Session<'h, H> {
    /// A session of `check` about `rule` (`None`: any rule, as in the differential check) on a
    /// fresh store whose clock reads [`START`]. A check named by its function (`scope_tenant`) is
    /// reported by its test name (`s1_scope_tenants_are_independent`).
    pub(crate) fn new(h: &'h H, check: &str, rule: Option<Rule>) -> Self {
        Session::starting_at(h, check, rule, START)
    }

    /// As [`Session::new`], on a store whose clock reads `start`: the store is opened at the
    /// instant the session's first step runs at, and the clock only moves on from there.
    pub(crate) fn starting_at(h: &'h H, check: &str, rule: Option<Rule>, start: Instant) -> Self {
        let clock = ManualClock::new(start);
        let store = h.store(clock.clone());
        Session {
            h,
            store: Some(store),
            store_clock: Monotonic::new(clock.clone()),
            clock,
            check: check_name(check).map_or_else(|| check.to_owned(), str::to_owned),
            rule,
            scopes: Vec::new(),
            slots: Vec::new(),
            index: HashMap::new(),
            hasher: RandomState::new(),
            transcript: Vec::new(),
            record: true,
            lookup_all: true,
            steps: 0,
            operations: 0,
            reached: RuleSet::EMPTY,
        }
    }

    /// Stops (or resumes) writing the transcript, for speed; failures still say which step.
    pub(crate) fn set_recording(&mut self, on: bool) {
        self.record = on;
    }

    /// Whether the transcript is on ([`Session::set_recording`]).
    pub(crate) fn recording(&self) -> bool {
        self.record
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
            self.slots.push(SlotState {
                scope: scope.clone(),
                key: key.clone(),
                state: None,
                last_rule: None,
                last: None,
            });
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

    /// A failure of this session's check because of `problem`, blaming `step_rule`: the rule by
    /// which the specification decided the step that went wrong, or (`None`) the check's own rule,
    /// for a failure that only it covers. The check's rule, when it differs, is context.
    pub(crate) fn fail(&self, step_rule: Option<Rule>, problem: String) -> Failure {
        let mut f = self.failure(problem);
        f.rule = step_rule.or(self.rule);
        f
    }

    /// A failure of this session's check because the adapter behind the driver broke the
    /// protocol at step `what`, as `e` says: no rule is to blame.
    fn protocol_fail(&self, what: &str, e: &ProtocolError) -> Failure {
        let mut f = self.failure(format!("at {what}: {e}"));
        f.protocol = Some(crate::failure::Protocol::Broken);
        f
    }

    fn failure(&self, problem: String) -> Failure {
        let mut context: Vec<String> =
            self.scopes.iter().enumerate().map(|(i, s)| format!("scope s{i} = {}", ShowScope(s))).collect();
        context.push(format!("clock started at {START} and reads {} now", self.now()));
        if self.operations > 1 {
            context.push(
                "operations go to the store through `execute` (shown `execute(…)`) and through their typed \
                 method (`reserve(…)`, `confirm(…)`, …) in turn"
                    .into(),
            );
        }
        let store_clock = self.store_clock.latest();
        if store_clock > self.now() {
            context.push(format!("the clock was set back: the store's must still read {store_clock} (D10)"));
        }
        Failure::from(Details {
            check: self.check.clone(),
            rule: None,
            check_rule: self.rule,
            property: None,
            step_rule: None,
            protocol: None,
            problem,
            finding: None,
            cause: None,
            context,
            transcript: self.transcript.clone(),
            replay: None,
            undecided: None,
            drawing: None,
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
    /// report), `actual` from the store's `method`; compares them, then looks up every watched
    /// key.
    #[expect(clippy::too_many_arguments, reason = "one step's every part, from the one caller")]
    fn exec(
        &mut self,
        what: fmt::Arguments<'_>,
        method: &str,
        scope: &ReservationScope,
        key: &Key,
        operation: Operation<&AggregateRef, &HoldId>,
        expected: Result<SpecStep, Vec<InvalidArgument>>,
        actual: StoreResult<Outcome>,
    ) -> Result<Rule, Failure> {
        self.steps += 1;
        let now = self.decision_instant();
        let i = self.watch(scope, key);
        let (rule, ok) = match &expected {
            Ok(step) => (step.rule, matches!(&actual, Ok(o) if *o == step.outcome)),
            Err(errs) => (Rule::D6, matches!(&actual, Err(StoreError::Invalid(e)) if errs.contains(e))),
        };
        // The key before the step, kept to explain a failure: a session that records keeps it
        // for the lookups that follow; one that does not (a quiet run, replayed recording when
        // it fails) needs it only for a wrong answer.
        let before = if self.record || !ok { self.slots.get(i).and_then(|s| s.state.clone()) } else { None };
        self.reached.insert(rule);
        // The step's text, written only when it is shown.
        let (exp_text, act_text) = if self.record || !ok {
            let exp_text = match &expected {
                Ok(step) => format!("{:?}", step.outcome),
                Err(errs) => match errs.as_slice() {
                    [one] => format!("Invalid({one:?})"),
                    many => format!("Invalid(one of {many:?})"),
                },
            };
            (exp_text, show_result(&actual))
        } else {
            (String::new(), String::new())
        };
        let label = if self.record { self.scope_label(scope) } else { String::new() };
        // A wrong answer that the specification gives on a misread value is that misreading's.
        let misread = if ok {
            None
        } else {
            let misread = expected.is_ok().then(|| explain_outcome(before.as_ref(), now, operation, &actual)).flatten();
            misread.map(|m| (m.rule, m.cause)).or_else(|| {
                self.decided_in_another_scope(i, now, operation, &actual, expected.is_ok()).then_some(SCOPES_JOINED)
            })
        };
        let record = self.record;
        if let (Ok(step), Some(slot)) = (expected, self.slots.get_mut(i)) {
            slot.state = step.next;
            slot.last_rule = Some(step.rule);
            slot.last = record.then(|| LastStep {
                before,
                at: now,
                operation: operation.map(AggregateRef::clone, HoldId::clone),
                step: self.steps,
            });
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
            let n = self.steps;
            if let Some(p) = actual.as_ref().err().and_then(ProtocolError::in_result_error) {
                return Err(self.protocol_fail(&format!("step {n} ({method})"), p));
            }
            let problem = match &actual {
                Err(StoreError::Storage(e)) => format!("step {n} ({method}) failed in storage: {}", error_chain(e)),
                _ => {
                    format!("step {n} ({method}) returned {act_text}; the specification says {exp_text} (rule {rule})")
                }
            };
            let mut f = self.fail(Some(misread.and_then(|(rule, _)| rule).unwrap_or(rule)), problem);
            f.finding = Some(Finding::Outcome);
            f.cause = misread.map(|(_, cause)| cause);
            return Err(f);
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
        self.check_slots_blaming(range, None)
    }

    /// As [`Session::check_slots`], blaming `rule` for a wrong lookup if given (P1, after a
    /// reopen), else the rule [`lookup_rule`] finds.
    fn check_slots_blaming(&mut self, range: std::ops::Range<usize>, rule: Option<Rule>) -> Result<(), Failure> {
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
        let shown = actual.as_ref().ok().and_then(Option::as_ref);
        let shape = actual.as_ref().err().and_then(ShapeError::in_result_error);
        let state = slot.state.as_ref();
        // What the last step on the key would have made on a misread value, or the key as it was
        // before that step, when either is what the lookup shows.
        let misread = slot
            .last
            .as_ref()
            .filter(|_| actual.is_ok())
            .and_then(|last| explain_lookup(last, now, shown))
            .map(|m| (m.rule, m.cause))
            .or_else(|| self.shown_in_another_scope(i, now, shown).then_some(SCOPES_JOINED));
        let before_last = slot
            .last
            .as_ref()
            .filter(|last| {
                actual.is_ok() && last.before.as_ref() != state && spec::lookup(last.before.as_ref(), now) == shown
            })
            .map(|last| last.step);
        let mut found = match (rule, shape) {
            (Some(rule), _) => Some(rule),
            // An answer of no shape where the key must show nothing: the step that should have
            // freed it (or the expiry that did) broke, not the answer's shape.
            (None, Some(_)) if expected.is_none() => lookup_rule(state, state, now, slot.last_rule),
            (None, Some(_)) => Some(Rule::D11),
            (None, None) => {
                misread.and_then(|(rule, _)| rule).or_else(|| lookup_rule(state, shown, now, slot.last_rule))
            }
        };
        let boundary_shown =
            rule.is_none() && shape.is_none() && found == Some(Rule::D1) && shown == state && shown.is_some();
        let written = slot.last_rule;
        if boundary_shown && self.shows_past_expiry(i, now) {
            // Still shown once past the boundary: the store shows expired reservations (D7), its
            // boundary is not merely a millisecond late (D1).
            found = Some(Rule::D7);
        }
        // After a reopen (the one caller that blames a rule), a write the lookup lacks was lost
        // there, not read stale.
        let reopened = rule.is_some();
        let rule = found.or(written).or(self.rule).unwrap_or(Rule::D7);
        let label = self.scope_label(&scope);
        let act = match (&actual, shape) {
            (Ok(a), _) => show_state(a.as_ref()),
            (Err(_), Some(shape)) => format!("a reservation of no shape D11 gives: {shape}"),
            (Err(e), None) => show_error(e),
        };
        let exp = show_state(expected.as_ref());
        self.transcript.push(format!(
            "    ✗ {now} lookup({label}, {key:?}) after step {}: expected {exp}, actual {act}   <-- differs",
            self.steps
        ));
        if let Some(p) = actual.as_ref().err().and_then(ProtocolError::in_result_error) {
            return Err(self.protocol_fail(&format!("the lookup of {key:?} in {label} after step {}", self.steps), p));
        }
        let mut problem = format!(
            "after step {}, lookup of {key:?} in {label} returned {act}; the specification says {exp}",
            self.steps
        );
        match before_last {
            Some(step) if reopened => problem.push_str(&format!(
                ", which is the key as it was before step {step}, whose answer was right: the store lost that \
                 step's write when it was closed and reopened (step {})",
                self.steps
            )),
            Some(step) => problem.push_str(&format!(
                ", which is the key as it was before step {step}, whose answer was right: the lookup does not show \
                 that step's write"
            )),
            None => {}
        }
        let mut f = self.fail(Some(rule), problem);
        f.finding =
            Some(if before_last.is_some() && !reopened { Finding::LookupBeforeLastStep } else { Finding::Lookup });
        f.cause = misread.map(|(_, cause)| cause);
        Err(f)
    }

    /// Whether `actual`, a store's answer to `operation` on the watched key `i` that differs from
    /// the specification's, is the specification's answer on the same key in another watched
    /// scope: the store took the two scopes for one. Where the key's own scope does not admit the
    /// owner (`admitted` false), the other scope must; or the key's scope has a tenant whose id
    /// spells `SYSTEM_TENANT`, taken for the system tenant, which admits every tenant's owners.
    fn decided_in_another_scope(
        &self,
        i: usize,
        now: Instant,
        operation: Operation<&AggregateRef, &HoldId>,
        actual: &StoreResult<Outcome>,
        admitted: bool,
    ) -> bool {
        let (Ok(actual), Some(this)) = (actual, self.slots.get(i)) else { return false };
        let gives = |state: &Option<StoredReservation>| spec::apply(state.clone(), now, operation).outcome == *actual;
        let admits = |scope: &ReservationScope| admitted || admission_errors(scope, operation.owner()).is_ok();
        let as_system = ReservationScope { tenant: Tenant::System, ..this.scope.clone() };
        let spelled = matches!(&this.scope.tenant, Tenant::Id(id) if id.as_str() == "SYSTEM_TENANT");
        (!admitted && spelled && admits(&as_system) && gives(&this.state))
            || self.other_scopes(i).any(|other| admits(&other.scope) && gives(&other.state))
    }

    /// Whether `shown`, what a lookup of the watched key `i` showed where the specification
    /// shows something else, is what the same key shows in another watched scope.
    fn shown_in_another_scope(&self, i: usize, now: Instant, shown: Option<&StoredReservation>) -> bool {
        shown.is_some() && self.other_scopes(i).any(|other| spec::lookup(other.state.as_ref(), now) == shown)
    }

    /// The watched keys that are the key `i` in another scope.
    fn other_scopes(&self, i: usize) -> impl Iterator<Item = &SlotState> {
        let this = self.slots.get(i);
        self.slots.iter().filter(move |other| this.is_some_and(|t| other.key == t.key && other.scope != t.scope))
    }

    /// Whether the store, looked up again a millisecond after `now`, still shows the watched key
    /// `i` as the specification's state of it (expired since `now`): a probe made only once the
    /// check has failed, noted in the transcript. The suite's clock is set back after it.
    fn shows_past_expiry(&mut self, i: usize, now: Instant) -> bool {
        let Some(slot) = self.slots.get(i) else { return false };
        let Ok(store) = self.store() else { return false };
        let suite = self.now();
        let later = now.saturating_add_millis(1);
        self.clock.set(later);
        let keys = [(&slot.scope, &slot.key)];
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.h.lookups(store, &keys)));
        self.clock.set(suite);
        let shown = match found.as_deref() {
            Ok([Ok(shown)]) => shown.clone(),
            _ => return false,
        };
        let still = shown.is_some() && shown == slot.state;
        let shows = show_state(shown.as_ref());
        self.transcript.push(format!("      (probe) {later} lookup again, a millisecond past the expiry: {shows}"));
        still
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
    /// [`ReservationStore::execute`] or the operation's typed method, in turn ([`Entry::nth`]);
    /// the two outcomes must be equal.
    pub(crate) fn execute(
        &mut self,
        scope: &ReservationScope,
        key: &Key,
        operation: Operation<&AggregateRef, &HoldId>,
    ) -> Result<Rule, Failure> {
        let now = self.decision_instant();
        let expected = admission_errors(scope, operation.owner())
            .map(|()| spec::apply(self.state(scope, key).cloned(), now, operation));
        let entry = Entry::nth(self.operations);
        self.operations += 1;
        let store = self.store()?;
        let actual = guarded(|| self.h.block_on(call(store, entry, scope, key, operation)));
        let shown = ShowOperation(key, operation);
        let method = entry.method(operation.kind());
        match entry {
            Entry::Execute => {
                self.exec(format_args!("execute({shown})"), method, scope, key, operation, expected, actual)
            }
            Entry::Typed => self.exec(format_args!("{shown}"), method, scope, key, operation, expected, actual),
        }
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
        // What the store shows now that it did not before the reopen, it lost or made up there;
        // with the suite's clock set back behind the store's, it decided at an earlier instant.
        let rule = if self.store_clock.latest() > self.now() { Rule::D10 } else { Rule::P1 };
        self.check_slots_blaming(0..self.slots.len(), Some(rule))
    }
}

/// A way a store may misread a value: it explains a wrong answer when the spec functions, deciding
/// the step on the value so misread, give the store's answer.
pub(crate) struct Misreading {
    /// The rule the misreading breaks, which the headline then names; `None` where SPEC.md names
    /// the rules of the steps it breaks as its symptoms (D8: a signed comparison breaks C6, C7, L4
    /// and L5), so that the step's rule stays the headline and the cause is said beside it.
    rule: Option<Rule>,
    /// The misreading, as the failure says it.
    cause: &'static str,
    /// The step as a store misreading so decides it.
    read: Read,
}

/// How a [`Misreading`] decides a step: on the key's state before it, the instant and the
/// operation; `None` where the misreading changes nothing.
type Read = fn(Option<&StoredReservation>, Instant, Operation<&AggregateRef, &HoldId>) -> Option<Misread>;

/// What a store that misreads a value does with a step.
pub(crate) enum Misread {
    /// It decides the step as the specification does on the misread value.
    Decided(SpecStep),
    /// It refuses the step with an invalid argument.
    Refused,
}

/// The misreadings a wrong answer is laid beside, first match first. Signed versions come before
/// versions through a float: where both explain an answer, the float is not shown to be the cause.
/// The rule and the cause of a failure whose wrong answer is what the same key gives in another
/// scope.
const SCOPES_JOINED: (Option<Rule>, &str) = (
    Some(Rule::S1),
    "the answer is the one the same key gives in another scope, as if the store took the two scopes \
     for one: S1 keeps scopes apart, whatever their parts",
);

pub(crate) const MISREADINGS: &[Misreading] = &[
    Misreading {
        rule: Some(Rule::D3),
        cause: "UNVERSIONED (version 0) refused, as if it were a stream version of 0 or no version at all: \
                D3 says it by name, below every stream version",
        read: |_, _, operation| match operation {
            Operation::Confirm { version, .. } | Operation::Release { version: ReleaseVersion::At(version), .. }
                if version.is_unversioned() =>
            {
                Some(Misread::Refused)
            }
            _ => None,
        },
    },
    Misreading {
        rule: Some(Rule::D5),
        cause: "hold ids compared ignoring case: D5 compares them as exact bytes",
        read: |before, now, operation| {
            let hold = *operation.hold()?;
            let holds = before?.as_pending()?.holds();
            let folded = hold.as_str().to_lowercase();
            let other = holds.iter().find(|h| *h != hold && h.as_str().to_lowercase() == folded)?;
            (!holds.contains(hold))
                .then(|| Misread::Decided(spec::apply(before.cloned(), now, operation.map(|o| o, |_| other))))
        },
    },
    Misreading {
        rule: None,
        cause: "versions compared as signed 64-bit integers: D8 compares them as unsigned",
        read: |before, now, operation| {
            let flip = |v: Version| Version::from_u64(v.as_u64() ^ (1 << 63));
            let mut step =
                spec::apply(before.cloned().map(|r| with_version(r, flip)), now, with_versions(operation, flip));
            step.next = step.next.map(|r| with_version(r, flip));
            Some(Misread::Decided(step))
        },
    },
    Misreading {
        rule: Some(Rule::D8),
        cause: "versions read through a 64-bit float, exact only up to 2^53: D8 makes them unsigned 64-bit integers",
        read: |before, now, operation| {
            let rounded = before.cloned().map(|r| with_version(r, through_f64));
            let misread = with_versions(operation, through_f64);
            (rounded.as_ref() != before || misread != operation)
                .then(|| Misread::Decided(spec::apply(rounded, now, misread)))
        },
    },
];

/// `version` as a 64-bit float reads it back: the nearest float, saturating at the last version.
fn through_f64(version: Version) -> Version {
    // The loss of precision is the misreading; `as` saturates at the last version.
    Version::from_u64(version.as_u64() as f64 as u64)
}

/// A reservation with its version, if confirmed, mapped by `f`.
fn with_version(r: StoredReservation, f: impl Fn(Version) -> Version) -> StoredReservation {
    match r {
        Reservation::Confirmed(c) => Reservation::confirmed(c.owner, f(c.version)),
        other => other,
    }
}

/// An operation with its version, if it names one, mapped by `f`.
fn with_versions<'a>(
    operation: Operation<&'a AggregateRef, &'a HoldId>,
    f: impl Fn(Version) -> Version,
) -> Operation<&'a AggregateRef, &'a HoldId> {
    match operation {
        Operation::Confirm { owner, version } => Operation::Confirm { owner, version: f(version) },
        Operation::Release { owner, version: ReleaseVersion::At(v) } => {
            Operation::Release { owner, version: ReleaseVersion::At(f(v)) }
        }
        other => other,
    }
}

/// The misreading that explains `actual`, a store's answer to `operation` on `before` at `now`
/// that differs from the specification's.
pub(crate) fn explain_outcome(
    before: Option<&StoredReservation>,
    now: Instant,
    operation: Operation<&AggregateRef, &HoldId>,
    actual: &StoreResult<Outcome>,
) -> Option<&'static Misreading> {
    MISREADINGS.iter().find(|m| match ((m.read)(before, now, operation), actual) {
        (Some(Misread::Refused), Err(StoreError::Invalid(_))) => true,
        (Some(Misread::Decided(step)), Ok(outcome)) => step.outcome == *outcome,
        _ => false,
    })
}

/// The misreading under which the `last` step on a key makes what a lookup at `now` `shown`.
fn explain_lookup(last: &LastStep, now: Instant, shown: Option<&StoredReservation>) -> Option<&'static Misreading> {
    MISREADINGS.iter().find(|m| match (m.read)(last.before.as_ref(), last.at, last.operation.as_ref()) {
        Some(Misread::Decided(step)) => spec::lookup(step.next.as_ref(), now) == shown,
        _ => false,
    })
}

/// Runs one call of the store, turning a panic into a storage error that names it, so that the
/// failure still shows the step and the rule.
pub(crate) fn guarded<T>(call: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).unwrap_or_else(|panic| {
        Err(StoreError::Storage(StorageError::new(format!("the store panicked: {}", panic_message(&*panic)))))
    })
}
