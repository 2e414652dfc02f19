//! What a failed check reports: the rule, the rule's text, and the operations it ran.

use std::fmt;

use reservation_store::Rule;

/// A failed check: the rule it found broken, what went wrong, and every operation it ran with the
/// outcome the specification expects and the one the store gave. Its [`Details`] are reached
/// through it (`failure.rule`, `failure.transcript`); it is one pointer wide, so that results
/// carrying it stay small.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Failure(Box<Details>);

/// What a [`Failure`] says.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Details {
    /// The check that failed, such as `r3_reserve_joins_with_a_new_hold`.
    pub check: String,
    /// The rule the check found broken (for a property beyond one rule, such as atomicity, the
    /// rule of the step that went wrong); `None` when no rule is to blame, as when a check
    /// panicked outside a store call or a run stopped.
    pub rule: Option<Rule>,
    /// A property beyond one rule that the check found broken, such as `"H1 atomicity: ..."`.
    pub property: Option<&'static str>,
    /// The rule by which the specification decided the step that went wrong, when it differs
    /// from [`Details::rule`].
    pub step_rule: Option<Rule>,
    /// What went wrong, in one sentence.
    pub problem: String,
    /// Who and where: the scopes, owners and clock the operations name.
    pub context: Vec<String>,
    /// The operations run, one line each, the one that went wrong marked.
    pub transcript: Vec<String>,
    /// How to run the failing case again, when it came from a random search.
    pub replay: Option<String>,
}

impl Failure {
    /// A failure of `check` against `rule` because of `problem`, with no transcript.
    pub fn new(check: impl Into<String>, rule: Rule, problem: impl Into<String>) -> Self {
        Failure::without_rule(check, problem).with_rule(Some(rule))
    }

    /// A failure of `check` that no rule is to blame for (a panic outside a store call, a run
    /// that stopped), because of `problem`.
    pub fn without_rule(check: impl Into<String>, problem: impl Into<String>) -> Self {
        Failure::from(Details {
            check: check.into(),
            rule: None,
            property: None,
            step_rule: None,
            problem: problem.into(),
            context: Vec::new(),
            transcript: Vec::new(),
            replay: None,
        })
    }
}

impl Failure {
    /// The same failure, blaming `rule`.
    pub fn with_rule(mut self, rule: Option<Rule>) -> Self {
        self.rule = rule;
        self
    }

    /// A failure of `check`, which panicked with `payload` outside any store call.
    pub fn panicked(check: &str, payload: &(dyn std::any::Any + Send)) -> Self {
        let message = crate::session::panic_message(payload);
        let mut f = Failure::without_rule(check, format!("the check panicked outside a store call: {message}"));
        f.property = Some("a check must run to its end; this one panicked");
        f
    }
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
        match self.property {
            Some(property) => {
                writeln!(f, "conformance check `{}` failed: {property}", self.check)?;
                if let Some(step) = self.step_rule {
                    writeln!(f, "  the step that could not be placed is decided by {step}: {}", step.text())?;
                }
            }
            None => match self.rule {
                Some(rule) => {
                    writeln!(f, "conformance check `{}` failed: rule {rule} broken", self.check)?;
                    writeln!(f, "  {rule}: {}", rule.text())?;
                }
                None => writeln!(f, "conformance check `{}` failed", self.check)?,
            },
        }
        if let Some(step) = self.step_rule.filter(|r| Some(*r) != self.rule && self.property.is_none()) {
            writeln!(f, "  the failing step is decided by {}: {}", step, step.text())?;
        }
        writeln!(f, "problem: {}", self.problem)?;
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
