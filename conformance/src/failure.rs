//! What a failed check reports: the rule, the rule's text, and the operations it ran.

use std::fmt;

use reservation_store::rules::Rule;

pub use crate::drawing::{Band, Drawing};
use crate::history::History;
pub use crate::search::Undecided;

/// A failed check: the rule it found broken, what went wrong, and every operation it ran with the
/// outcome the specification expects and the one the store gave. Its [`Details`] are reached
/// through it (`failure.rule`, `failure.transcript`); it is one pointer wide, so that results
/// carrying it stay small.
///
/// Its headline names the rule by which the specification decided the step that went wrong,
/// whatever check ran it; the rule the check is about, when it differs, follows as context
/// ("rule L4 broken (in the check of S1)"). Where the specification, deciding that step on a value
/// read as a store may misread it (a hold id ignoring case, a version through a float, UNVERSIONED
/// as no version), gives the store's answer, the headline names the rule of that value (D5, D8,
/// D3) and a `cause:` line says the misreading. A wrong lookup is headlined by the rule of the
/// last step on its key, the step that made the state it shows; by D7 when it still shows an
/// expired reservation a millisecond past its expiry (D1 when it does not); by D11 only when its
/// answer has no shape D11 gives and the key is not free. A failure of the adapter behind the
/// driver to speak its protocol names no rule: it is headlined "the adapter broke the protocol".
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Failure(Box<Details>);

/// What a [`Failure`] says.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Details {
    /// The check that failed, by the name the report and the test list give it, such as
    /// `r3_reserve_joins_with_a_new_hold`.
    pub check: String,
    /// The rule found broken: the one by which the specification decided the step that went
    /// wrong (for a lookup, the rule of the step that last wrote the key, or D1, D7, D11, P1 where
    /// those decide what it must show), the rule of a value the store misread (see
    /// [`Details::cause`]), or, for a failure only the check's own rule covers, that
    /// rule; `None` when no rule is to blame, as when a check panicked outside a store call, a run
    /// stopped, or the adapter broke the protocol.
    pub rule: Option<Rule>,
    /// The rule the check is about, when it has one; context for the headline when it differs
    /// from [`Details::rule`].
    pub check_rule: Option<Rule>,
    /// A property beyond one rule that the check found broken, such as `"H1 atomicity: ..."`.
    pub property: Option<&'static str>,
    /// For a property: the rule by which the specification decided the step that could not be
    /// placed.
    pub step_rule: Option<Rule>,
    /// Set when the adapter behind the driver broke its protocol ([`crate::driver::ProtocolError`]):
    /// the failure is the adapter's, not a rule's.
    pub protocol: Option<Protocol>,
    /// What went wrong, in one sentence.
    pub problem: String,
    /// Which kind of step went wrong, when a step of a session did: an operation's answer or a
    /// lookup; the report finds the cause that most failures share by it.
    pub finding: Option<Finding>,
    /// What explains the wrong answer, when the specification, deciding the step on values read
    /// the way a store may misread them, gives that answer: such as `"hold ids compared ignoring
    /// case"`. The headline then names the rule the misreading breaks.
    pub cause: Option<&'static str>,
    /// Who and where: the scopes, owners and clock the operations name.
    pub context: Vec<String>,
    /// The operations run, one line each, the one that went wrong marked.
    pub transcript: Vec<String>,
    /// How to run the failing case again, when it came from a random search.
    pub replay: Option<String>,
    /// Set when the check could not decide its history within the judge's budget: the suite's
    /// limitation, not a rule the store broke. [`Details::rule`] is then `None`.
    pub undecided: Option<Undecided>,
    /// The history behind the failure, when the check recorded one (the linearizability, fault
    /// and crash checks), with where in it the failure is: what its page draws
    /// ([`crate::page`]).
    pub drawing: Option<Box<Drawing>>,
}

/// The kind of step a failure went wrong at.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Finding {
    /// An operation answered otherwise than the specification.
    Outcome,
    /// A lookup showed a state the specification does not give.
    Lookup,
    /// A lookup showed its key as it was before the last operation on it, whose answer was right
    /// and changed the key: what the lookup shows lags the write the store acknowledged (a stale
    /// read), or the write never happened.
    LookupBeforeLastStep,
}

/// How a failure involves an adapter that broke the driver's protocol (`PROTOCOL.md`).
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Protocol {
    /// The adapter broke the protocol in this check; [`Details::problem`] says how.
    Broken,
    /// The check failed on an adapter that had broken the protocol earlier, in the check named
    /// here, whose failure says how: the report tells it once.
    Earlier(String),
}

impl Failure {
    /// A failure of `check` against `rule` because of `problem`, with no transcript.
    pub fn new(check: impl Into<String>, rule: Rule, problem: impl Into<String>) -> Self {
        Failure::without_rule(check, problem).with_rule(Some(rule))
    }

    /// A failure of `check` that no rule is to blame for (a panic outside a store call, a run
    /// that stopped), because of `problem`. A check given by its function's name (`r3`) is named
    /// by its test name (`r3_reserve_joins_with_a_new_hold`), as the report lists it.
    pub fn without_rule(check: impl Into<String>, problem: impl Into<String>) -> Self {
        let check = check.into();
        Failure::from(Details {
            check: check_name(&check).map_or(check, str::to_owned),
            rule: None,
            check_rule: None,
            property: None,
            step_rule: None,
            protocol: None,
            problem: problem.into(),
            finding: None,
            cause: None,
            context: Vec::new(),
            transcript: Vec::new(),
            replay: None,
            undecided: None,
            drawing: None,
        })
    }

    /// A failure of `check` because the adapter behind the driver broke its protocol, as
    /// `problem` says; no rule is to blame.
    pub fn protocol(check: impl Into<String>, problem: impl Into<String>) -> Self {
        let mut f = Failure::without_rule(check, problem);
        f.protocol = Some(Protocol::Broken);
        f
    }
}

impl Failure {
    /// This failure drawn with `drawing`.
    pub(crate) fn with_drawing(mut self, drawing: Drawing) -> Self {
        self.drawing = Some(Box::new(drawing));
        self
    }

    /// This failure with every operation of `history` in its drawing, whose history held only
    /// some; or, without a drawing, a drawing of `history` that marks nothing.
    pub(crate) fn with_whole_history(mut self, history: &History) -> Self {
        match &mut self.drawing {
            Some(d) => d.history.events.clone_from(&history.events),
            None => self.drawing = Some(Box::new(Drawing::new(history.clone()))),
        }
        self
    }

    /// This failure with `bands` (the harms of its run) in its drawing, when it has one.
    pub(crate) fn with_bands(mut self, bands: impl IntoIterator<Item = Band>) -> Self {
        if let Some(d) = &mut self.drawing {
            d.bands = bands.into_iter().collect();
        }
        self
    }

    /// The same failure, blaming `rule`.
    pub fn with_rule(mut self, rule: Option<Rule>) -> Self {
        self.rule = rule;
        self
    }

    /// A failure of `check`, which panicked with `payload` outside any store call.
    pub fn panicked(check: &str, payload: &(dyn std::any::Any + Send)) -> Self {
        let message = crate::show::panic_message(payload);
        let mut f = Failure::without_rule(check, format!("the check panicked outside a store call: {message}"));
        f.property = Some("a check must run to its end; this one panicked");
        f
    }

    /// Whether the adapter behind the driver broke its protocol, in this check or earlier.
    pub fn is_protocol(&self) -> bool {
        self.protocol.is_some()
    }
}

/// The check functions' names with their test names, from the one list of checks.
const CHECK_NAMES: &[(&str, &str)] = crate::__for_each_check!(__check_names {});

/// Builds [`CHECK_NAMES`] from the list of checks.
#[doc(hidden)]
#[macro_export]
macro_rules! __check_names {
    ( ; $($name:ident => $check:ident in $part:ident $([$needs:ident])?),* $(,)?) => {
        &[$((stringify!($check), stringify!($name))),*]
    };
}

/// The test name of the check whose function is `function` (`scope_tenant`:
/// `s1_scope_tenants_are_independent`); a test name is its own. `None` for a name of no check.
pub(crate) fn check_name(function: &str) -> Option<&'static str> {
    CHECK_NAMES.iter().find(|(f, t)| *f == function || *t == function).map(|(_, t)| *t)
}

impl From<Details> for Failure {
    fn from(details: Details) -> Self {
        Failure(Box::new(details))
    }
}

impl std::ops::Deref for Failure {
    type Target = Details;
    fn deref(&self) -> &Details {
        &self.0
    }
}

impl std::ops::DerefMut for Failure {
    fn deref_mut(&mut self) -> &mut Details {
        &mut self.0
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let check = &self.check;
        match (&self.protocol, self.property, self.rule) {
            _ if self.undecided.is_some() => {
                writeln!(
                    f,
                    "conformance check `{check}` undecided: the judge ran out of its budget before it could decide the \
                     history; a limit of the suite, not a rule the store broke"
                )?;
            }
            (Some(Protocol::Earlier(_)), ..) => {
                return writeln!(f, "conformance check `{check}` failed: {}", self.problem);
            }
            (Some(Protocol::Broken), ..) => {
                writeln!(f, "conformance check `{check}` failed: the adapter broke the protocol: {}", self.problem)?;
            }
            (None, Some(property), rule) => match (self.step_rule, rule) {
                (Some(step), _) => {
                    writeln!(f, "conformance check `{check}` failed: {property}")?;
                    writeln!(f, "  the step that could not be placed is decided by {step}: {}", step.text())?;
                }
                (None, Some(rule)) => {
                    writeln!(f, "conformance check `{check}` failed: rule {rule} broken ({property})")?;
                    writeln!(f, "  {rule}: {}", rule.text())?;
                }
                (None, None) => writeln!(f, "conformance check `{check}` failed: {property}")?,
            },
            (None, None, Some(rule)) => match self.check_rule.filter(|c| *c != rule) {
                Some(about) => {
                    writeln!(f, "conformance check `{check}` failed: rule {rule} broken (in the check of {about})")?;
                    writeln!(f, "  {rule}: {}", rule.text())?;
                    writeln!(f, "  the check is about {about}: {}", about.text())?;
                }
                None => {
                    writeln!(f, "conformance check `{check}` failed: rule {rule} broken")?;
                    writeln!(f, "  {rule}: {}", rule.text())?;
                }
            },
            (None, None, None) => writeln!(f, "conformance check `{check}` failed")?,
        }
        if self.protocol.is_none() {
            writeln!(f, "problem: {}", self.problem)?;
        }
        if let Some(cause) = self.cause {
            writeln!(f, "cause: {cause}")?;
        }
        for line in &self.context {
            writeln!(f, "  {line}")?;
        }
        if !self.transcript.is_empty() {
            writeln!(f, "operations (expected = the specification, actual = the store):")?;
            for line in &self.transcript {
                writeln!(f, "  {line}")?;
            }
        }
        if let Some(replay) = &self.replay {
            writeln!(f, "replay:")?;
            for line in replay.lines() {
                writeln!(f, "  {line}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Failure {}
