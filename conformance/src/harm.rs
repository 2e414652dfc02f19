//! The one harm runner: what the fault check and the crash check share. A check records a history
//! on one store while it harms the store's world; each harm is a *strategy* over this runner (the
//! fault check's seeded schedule, [`crate::faults`]; the crash check's chosen points,
//! [`crate::crashes`]). The runner opens the store, records every operation through the gates
//! ([`crate::gate`]), causes each harm and waits, within a bound, for the store to answer again,
//! keeps the list of harms taken (the schedule a failure prints), labels each key with what the
//! strategy made of it, and judges the history ([`blame`]).
//!
//! # Before a harm
//!
//! A harm runs from the stamp of the history's counter at which it began (the fault was about to
//! be caused, the store about to be reopened) to the stamp at which the store answered again.
//! An operation is *before* a harm when it was called before the harm began; one of those still in
//! flight then may have taken effect before the harm or not at all, so the history before a harm
//! is the operations called before it began, those that had not returned by then taken as ones
//! whose outcome is unknown. A harm is blamed for a key's failure only when that history is
//! explained by the specification, and some state the harm could have left the key in explains
//! what the store answered after it: the harm changed that state (P1). When the history before it
//! already breaks a rule, that rule is named; when no state explains what came after, the store
//! broke a rule after the harm, not across it, and that rule is named.

mod blame;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant as WallInstant};

use reservation_store::rules::Rule;
use reservation_store::{Key, ManualClock, ReservationStore};

pub(crate) use blame::{Blamed, blame};

use crate::failure::Failure;
use crate::gate::{Ceilings, Gates};
use crate::harness::{Capabilities, Fault, Harness};
use crate::history::Names;
use crate::record::Recorder;
use crate::show::{panic_message, show_error};

/// How long the runner waits for the store to answer again after a harm.
pub(crate) const RECOVERY: Duration = Duration::from_secs(30);

/// A harm the runner caused.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Harm {
    /// Its number in the run, from 1.
    pub n: usize,
    /// What it was: a fault the harness caused, or the suite's own ([`Fault::Restart`],
    /// [`Fault::ClockJump`]).
    pub fault: Fault,
    /// Where the strategy caused it, such as `"on the schedule"` or `"quiet: right after an
    /// acknowledged change"`.
    pub point: &'static str,
    /// When it began, from the start of the run.
    pub at: Duration,
    /// How long causing it took.
    pub took: Duration,
    /// How long after it the store answered again; `None` if it did not within 30 seconds.
    pub recovered_after: Option<Duration>,
    /// The stamp of the history's counter when it began.
    pub began: u64,
    /// The stamp when the store answered again (or the runner gave up waiting).
    pub ended: u64,
}

impl Harm {
    /// Whether the harm may lose writes the store acknowledged: a crash, a failover, a partition,
    /// a long pause, a restart, a power cut.
    pub fn may_lose_writes(&self) -> bool {
        self.fault.may_lose_writes()
    }
}

impl fmt::Display for Harm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} at {:.2?} ({}), took {:.2?}, ", self.n, self.fault, self.at, self.point, self.took)?;
        match self.recovered_after {
            Some(d) => write!(f, "answering {d:.2?} after")?,
            None => write!(f, "no answer within {RECOVERY:.0?} after")?,
        }
        write!(f, "; stamps {} .. {}", self.began, self.ended)
    }
}

/// What a run owns and its recorder borrows: the names of its keys, the suite's clock, the
/// history's counter and the gates.
pub(crate) struct Parts {
    pub(crate) names: Names,
    pub(crate) clock: ManualClock,
    pub(crate) stamp: AtomicU64,
    pub(crate) gates: Gates,
}

impl Parts {
    pub(crate) fn new(names: Names, clock: ManualClock, ceilings: Ceilings) -> Self {
        Parts { names, clock, stamp: AtomicU64::new(0), gates: Gates::new(ceilings) }
    }
}

/// The runner of one check's run: the harness, the recorder, the harms taken and the keys'
/// labels.
pub(crate) struct Runner<'a, H: Harness> {
    pub(crate) harness: &'a H,
    pub(crate) recorder: Recorder<'a, H>,
    pub(crate) capabilities: Capabilities,
    pub(crate) started: WallInstant,
    harms: Mutex<Vec<Harm>>,
    /// What each key taken is, by index from the first key taken.
    labels: Mutex<Vec<&'static str>>,
    /// The index of the first key the runner hands out.
    first_key: usize,
}

/// Where a harm began ([`Runner::begin`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Began {
    /// From the start of the run.
    at: Duration,
    wall: WallInstant,
    /// The stamp of the history's counter.
    pub(crate) stamp: u64,
}

/// The harness's answer to being asked to cause a harm.
pub(crate) type Caused = Result<(), String>;

/// Why the store did not answer again after a harm.
pub(crate) enum Silence {
    /// The adapter behind the driver broke its protocol (it exited, for one): no use waiting.
    Broken(String),
    /// No answer within [`RECOVERY`]; the store's last answer.
    Last(String),
    /// The store was never opened: the adapter answered its `open` with this error.
    Unopened(String),
}

impl Silence {
    /// The failure of check `check` whose store fell silent after `what`.
    fn failure(self, check: &str, what: &str) -> Failure {
        match self {
            Silence::Broken(why) => Failure::protocol(check, why),
            Silence::Last(last) => Failure::new(
                check,
                Rule::P1,
                format!("the store did not answer within {RECOVERY:.0?} after {what}; its last answer: {last}"),
            ),
            Silence::Unopened(why) => Failure::new(
                check,
                Rule::P1,
                format!("the store could not be opened again on its own storage after {what}: {why}"),
            ),
        }
    }
}

impl<'a, H: Harness> Runner<'a, H> {
    /// The runner of a run on `harness` over `parts`; keys it hands out start at `first_key`.
    pub(crate) fn new(harness: &'a H, parts: &'a Parts, capabilities: Capabilities, first_key: usize) -> Self {
        Runner {
            harness,
            recorder: Recorder {
                harness,
                names: &parts.names,
                clock: &parts.clock,
                stamp: &parts.stamp,
                gates: &parts.gates,
            },
            capabilities,
            started: WallInstant::now(),
            harms: Mutex::new(Vec::new()),
            labels: Mutex::new(Vec::new()),
            first_key,
        }
    }

    /// The stamp of the history's counter now.
    pub(crate) fn stamp(&self) -> u64 {
        self.recorder.stamp.load(Ordering::SeqCst)
    }

    /// `n` fresh keys, each labelled `label`: their indices.
    pub(crate) fn take_keys(&self, n: usize, label: &'static str) -> std::ops::Range<usize> {
        let mut labels = self.labels.lock().unwrap_or_else(PoisonError::into_inner);
        let first = self.first_key + labels.len();
        labels.extend(std::iter::repeat_n(label, n));
        first..first + n
    }

    /// A fresh key labelled `label`, unless `most` have been handed out: its index.
    pub(crate) fn take_key_within(&self, most: usize, label: &'static str) -> Option<usize> {
        let mut labels = self.labels.lock().unwrap_or_else(PoisonError::into_inner);
        (labels.len() < most).then(|| {
            labels.push(label);
            self.first_key + labels.len() - 1
        })
    }

    /// The keys handed out so far.
    pub(crate) fn keys_taken(&self) -> usize {
        self.labels.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// The label of every key handed out, by index from the first.
    pub(crate) fn labels(&self) -> Vec<&'static str> {
        self.labels.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The harms taken so far, in order.
    pub(crate) fn harms(&self) -> Vec<Harm> {
        self.harms.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Looks up a key of no history until the store answers, for at most [`RECOVERY`]: how long
    /// that took, or why it did not.
    pub(crate) fn answer(&self, store: &H::Store) -> Result<Duration, Silence> {
        let began = WallInstant::now();
        let probe = Key::new("probe").expect("a valid key");
        let scope = &self.recorder.names.scope;
        let mut last = "no answer".to_owned();
        while began.elapsed() < RECOVERY {
            // An adapter that died or broke the protocol will not answer: no use waiting.
            if let Some(why) = self.harness.broken() {
                return Err(Silence::Broken(why));
            }
            let answered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.harness.block_on(store.lookup(scope, &probe))
            }));
            match answered {
                Ok(Ok(_)) => return Ok(began.elapsed()),
                // A store the adapter did not open will not answer: no use waiting either.
                Ok(Err(e)) => match crate::driver::unopened(&e) {
                    Some(why) => return Err(Silence::Unopened(why)),
                    None => last = show_error(&e),
                },
                Err(p) => last = format!("the store panicked: {}", panic_message(&*p)),
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Err(Silence::Last(last))
    }

    /// Asks the harness for `fault` ([`Harness::inject`]).
    pub(crate) fn inject(&self, fault: Fault) -> Caused {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.harness.inject(fault))) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(format!("the harness could not cause it: {}", reservation_store::error_chain(&e))),
            Err(p) => Err(format!("the harness's inject panicked: {}", panic_message(&*p))),
        }
    }

    /// Causes `fault` at `point` by `cause`, then waits for `store` (when there is one) to answer:
    /// the harm is recorded either way. The failure of check `check` when the harm could not be
    /// caused or the store did not answer again.
    pub(crate) fn cause(
        &self,
        check: &str,
        store: Option<&H::Store>,
        (fault, point): (Fault, &'static str),
        cause: impl FnOnce() -> Caused,
    ) -> Result<(), Failure> {
        let at = self.started.elapsed();
        let began_at = WallInstant::now();
        let began = self.stamp();
        let caused = cause();
        let took = began_at.elapsed();
        let answered = match (&caused, store) {
            (Ok(()), Some(store)) => Some(self.answer(store)),
            _ => None,
        };
        let recovered_after = answered.as_ref().and_then(|a| a.as_ref().ok().copied());
        self.note(Harm { n: 0, fault, point, at, took, recovered_after, began, ended: self.stamp() });
        match (caused, answered) {
            (Err(why), _) => Err(Failure::without_rule(check, format!("the fault {fault} could not be caused: {why}"))),
            (Ok(()), Some(Err(silence))) => Err(silence.failure(check, &format!("the fault {fault}"))),
            (Ok(()), _) => Ok(()),
        }
    }

    /// Where a harm begins: now. Its stamp is the counter's next one, so that an event stamped
    /// before the harm has a stamp below it, and one stamped at it or later came after.
    pub(crate) fn begin(&self) -> Began {
        Began { at: self.started.elapsed(), wall: WallInstant::now(), stamp: self.stamp() }
    }

    /// Restarts `store` at `point` through [`Harness::reopen`] on the suite's clock, and waits for
    /// the new store to answer: the harm is recorded either way. The failure of check `check`
    /// when the store could not be reopened (P1: a durable store must come back on its own
    /// storage) or did not answer.
    pub(crate) fn restart(&self, check: &str, store: H::Store, point: &'static str) -> Result<H::Store, Failure> {
        let began = self.begin();
        let harness = self.harness;
        self.reopen_after(check, began, (Fault::Restart, point), || {
            let clock = self.recorder.clock.clone();
            match harness.reopen(store, clock) {
                Some(store) => Ok(store),
                None => Err("the harness declares the durable capability, but its reopen gave no store".to_owned()),
            }
        })
    }

    /// Ends the harm `fault` that `began` at `point` (a restart, a power cut) by `reopen`, which
    /// opens the store again, and waits for the new store to answer: the harm is recorded either
    /// way. The failure of check `check` when `reopen` gave no store (its reason, no rule), panicked
    /// (P1: a durable store must come back on its own storage) or the store did not answer.
    pub(crate) fn reopen_after(
        &self,
        check: &str,
        began: Began,
        (fault, point): (Fault, &'static str),
        reopen: impl FnOnce() -> Result<H::Store, String>,
    ) -> Result<H::Store, Failure> {
        let reopened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(reopen));
        let took = began.wall.elapsed();
        let (store, problem) = match reopened {
            Ok(Ok(store)) => (Some(store), None),
            Ok(Err(why)) => (None, Some(Failure::without_rule(check, why))),
            Err(p) => (
                None,
                Some(Failure::new(
                    check,
                    Rule::P1,
                    format!(
                        "the store could not be opened again on its own storage after {}: the harness panicked: {}",
                        if fault == Fault::PowerCut { "a power cut" } else { "a restart" },
                        panic_message(&*p)
                    ),
                )),
            ),
        };
        let answered = store.as_ref().map(|s| self.answer(s));
        let recovered_after = answered.as_ref().and_then(|a| a.as_ref().ok().copied());
        let harm =
            Harm { n: 0, fault, point, at: began.at, took, recovered_after, began: began.stamp, ended: self.stamp() };
        self.note(harm);
        if let Some(problem) = problem {
            return Err(problem);
        }
        match (store, answered) {
            (Some(store), Some(Ok(_))) => Ok(store),
            (_, answered) => {
                let silence = answered.and_then(Result::err).unwrap_or(Silence::Last(String::new()));
                Err(silence.failure(check, if fault == Fault::PowerCut { "a power cut" } else { "a restart" }))
            }
        }
    }

    /// Records `harm`, numbering it.
    fn note(&self, mut harm: Harm) {
        let mut harms = self.harms.lock().unwrap_or_else(PoisonError::into_inner);
        harm.n = harms.len() + 1;
        harms.push(harm);
    }
}

/// `failure` with the harms a run took (its schedule, replayable from its seed) and its replay
/// lines; `summary` is the run's report in one line.
pub(crate) fn with_schedule(mut failure: Failure, summary: String, harms: &[Harm], seed: u64) -> Failure {
    failure.context.push(summary);
    if harms.is_empty() {
        failure.context.push("no harm was caused".to_owned());
    }
    for harm in harms {
        failure.context.push(format!("harm {harm}"));
    }
    let test = failure.check.clone();
    failure.replay = Some(crate::settings::replay(&test, seed));
    failure
}

impl From<&Harm> for crate::drawing::Band {
    fn from(harm: &Harm) -> Self {
        crate::drawing::Band {
            label: format!("{} {} ({})", harm.n, harm.fault, harm.point),
            began: harm.began,
            ended: harm.ended,
        }
    }
}
