//! [`run_all`]: every check, without the macro, in one [`Report`].

use std::fmt;
use std::time::Duration;

use crate::catalogue::CHECKS;
use crate::erased::{DynHarness, Erased};
use crate::failure::{Failure, Finding, Protocol};
use crate::harness::Harness;
use crate::settings::Settings;

/// The result of one check.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum CheckResult {
    /// The store did what the specification says.
    Passed,
    /// The check was not run: the store did not declare the capability it needs.
    Skipped(&'static str),
    /// The store broke a rule.
    Failed(Failure),
}

/// What [`run_all`] found: each check's name, result and time.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// `(check name, result, time taken)`, in the suite's order.
    pub checks: Vec<(&'static str, CheckResult, Duration)>,
    /// What the checks could not know and the reader should: such as that durability was checked
    /// only through the harness's reopen, which may not reach the store's recovery; and what the
    /// checks that harm the store did, passing or not (`check: what it did`: the faults fired, the
    /// crashes, restarts and power cuts made, and after how many acknowledged writes each came).
    pub notes: Vec<String>,
}

impl Report {
    /// Whether no check failed.
    pub fn is_ok(&self) -> bool {
        self.failures().next().is_none()
    }

    /// The failures.
    pub fn failures(&self) -> impl Iterator<Item = &Failure> {
        self.checks.iter().filter_map(|(_, r, _)| match r {
            CheckResult::Failed(f) => Some(f),
            _ => None,
        })
    }

    /// The one cause that most failures share, when more than half of the checks that ran failed
    /// and more than half of those failures went wrong the same way: one line that says how many
    /// and what they share, which the report leads with. Failures are grouped by their cause (a
    /// misread value), else by lookups that show their key as it was before the last step on it,
    /// else by the kind of step and the rule their headline names; failing that, by the kind of
    /// step alone. `None` when fewer checks failed, or only one, or no way is shared by most
    /// failures.
    pub fn shared_cause(&self) -> Option<String> {
        let ran = self.checks.iter().filter(|(_, r, _)| !matches!(r, CheckResult::Skipped(_))).count();
        let failures: Vec<&Failure> = self.failures().collect();
        let failed = failures.len();
        // One failure shares nothing: a run of one check leads with no cause.
        if failed < 2 || failed * 2 <= ran {
            return None;
        }
        let most = |key: &dyn Fn(&Failure) -> Option<String>| {
            let mut groups: Vec<(String, usize)> = Vec::new();
            for label in failures.iter().filter_map(|f| key(f)) {
                match groups.iter_mut().find(|(l, _)| *l == label) {
                    Some((_, n)) => *n += 1,
                    None => groups.push((label, 1)),
                }
            }
            // The largest group, the first of equals.
            groups.into_iter().rev().max_by_key(|(_, n)| *n).filter(|(_, n)| n * 2 > failed)
        };
        let (label, n) = most(&|f| shared_label(f)).or_else(|| most(&|f| kind_label(f)))?;
        Some(format!(
            "{n} of the {failed} failures share one cause ({failed} of {ran} checks that ran failed): {label}"
        ))
    }

    /// Ok if no check failed, otherwise the report itself as the error.
    pub fn into_result(self) -> Result<(), Report> {
        if self.is_ok() { Ok(()) } else { Err(self) }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let failed = self.failures().count();
        let undecided = self.failures().filter(|f| f.undecided.is_some()).count();
        let skipped = self.checks.iter().filter(|(_, r, _)| matches!(r, CheckResult::Skipped(_))).count();
        let total: Duration = self.checks.iter().map(|(_, _, d)| *d).sum();
        write!(f, "{} checks: {} passed, {failed} failed", self.checks.len(), self.checks.len() - failed - skipped)?;
        if undecided > 0 {
            write!(f, " ({undecided} undecided: the judge ran out of its budget)")?;
        }
        writeln!(f, ", {skipped} skipped, in {total:.2?}")?;
        if let Some(cause) = self.shared_cause() {
            writeln!(f, "{cause}")?;
        }
        for (name, result, took) in &self.checks {
            match result {
                CheckResult::Passed => writeln!(f, "  ok      {name} ({took:.2?})")?,
                CheckResult::Skipped(why) => writeln!(f, "  skipped {name}: {why}")?,
                CheckResult::Failed(failure) if failure.undecided.is_some() => writeln!(f, "  UNDECIDED {name}")?,
                CheckResult::Failed(_) => writeln!(f, "  FAILED  {name}")?,
            }
        }
        for note in &self.notes {
            writeln!(f, "note: {note}")?;
        }
        for failure in self.failures() {
            writeln!(f)?;
            write!(f, "{failure}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Report {}

/// How a failure went wrong, in words that failures sharing a cause share.
fn shared_label(f: &Failure) -> Option<String> {
    if f.is_protocol() {
        return Some("the adapter broke the protocol".to_owned());
    }
    if let Some(cause) = f.cause {
        return Some(cause.to_owned());
    }
    let Some(finding) = f.finding else { return f.property.map(str::to_owned) };
    match (finding, f.rule) {
        (Finding::LookupBeforeLastStep, _) => Some(
            "lookups show states that the store's own answers contradict: a lookup lags the writes it follows (a \
             stale read); each shows its key as it was before the last operation on it, whose answer was right"
                .to_owned(),
        ),
        (Finding::Lookup, Some(rule)) => Some(format!("rule {rule} broken at a lookup")),
        (Finding::Outcome, Some(rule)) => Some(format!("rule {rule} broken by an operation's answer")),
        _ => None,
    }
}

/// The kind of step a failure went wrong at, in words.
fn kind_label(f: &Failure) -> Option<String> {
    match f.finding? {
        Finding::Lookup | Finding::LookupBeforeLastStep => {
            Some("lookups show states the specification does not give, after operations answered right".to_owned())
        }
        Finding::Outcome => Some("operations answer otherwise than the specification".to_owned()),
    }
}

/// Runs every check against `harness` with `settings`, one after another, and reports each. A
/// check that panics (a harness that cannot build a store, say) is reported as failed, and the
/// others still run. The environment's overrides are not read here: pass
/// [`Settings::from_env`] for them.
pub fn run_all(harness: &dyn DynHarness, settings: &Settings) -> Report {
    run_matching(harness, settings, |_| true)
}

/// As [`run_all`], with only the checks whose test name (`r3_reserve_joins_with_a_new_hold`,
/// `p1_durable_reopen_keeps_every_reservation`, …) `filter` accepts.
pub fn run_matching(harness: &dyn DynHarness, settings: &Settings, filter: impl Fn(&str) -> bool) -> Report {
    run_matching_with(harness, settings, filter, |_, _, _| {})
}

/// As [`run_all`], calling `on_check` with each check's name, result and time as soon as the
/// check ends, before the next one starts: a caller shows progress while a slow store runs.
pub fn run_all_with(
    harness: &dyn DynHarness,
    settings: &Settings,
    on_check: impl FnMut(&'static str, &CheckResult, Duration),
) -> Report {
    run_matching_with(harness, settings, |_| true, on_check)
}

/// As [`run_matching`], calling `on_check` as [`run_all_with`] does.
pub fn run_matching_with(
    harness: &dyn DynHarness,
    settings: &Settings,
    filter: impl Fn(&str) -> bool,
    mut on_check: impl FnMut(&'static str, &CheckResult, Duration),
) -> Report {
    run_checks(harness, settings, &filter, &mut on_check)
}

/// [`run_matching_with`], compiled once.
fn run_checks(
    harness: &dyn DynHarness,
    settings: &Settings,
    filter: &dyn Fn(&str) -> bool,
    on_check: &mut dyn FnMut(&'static str, &CheckResult, Duration),
) -> Report {
    let erased = &Erased::new(harness);
    let mut report = Report::default();
    // An adapter that broke the protocol is reported once, by the first check it failed.
    let mut once = ProtocolOnce::default();
    for check in CHECKS.iter().filter(|c| filter(c.name)) {
        let _ = crate::said::said();
        let started = std::time::Instant::now();
        let mut result = if let Some(why) = check.needs.skipped(Harness::capabilities(erased)) {
            CheckResult::Skipped(why)
        } else if let Some(why) = Harness::broken(erased) {
            // A broken adapter answers nothing more: the check is not started.
            CheckResult::Failed(Failure::protocol(check.name, why))
        } else {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (check.run)(harness, settings))) {
                Ok(Ok(())) => CheckResult::Passed,
                // The failure is the check's, by its name in the list: whatever it called itself.
                Ok(Err(mut f)) => {
                    check.name.clone_into(&mut f.check);
                    CheckResult::Failed(f)
                }
                Err(panic) => CheckResult::Failed(Failure::panicked(check.name, &*panic)),
            }
        };
        let took = started.elapsed();
        report.notes.extend(crate::said::said().into_iter().map(|s| format!("{}: {s}", check.name)));
        once.see(check.name, &mut result);
        on_check(check.name, &result, took);
        report.checks.push((check.name, result, took));
    }
    report.notes.extend(durability_note(erased, &report));
    if let Some(dir) = settings.report_dir.as_ref().filter(|_| !report.is_ok()) {
        report.notes.push(match crate::page::write_pages(dir, report.failures()) {
            Ok(pages) => format!("the pages of the {} failed checks are in {}", pages.len(), dir.display()),
            Err(e) => format!("the pages of the failed checks could not be written to {}: {e}", dir.display()),
        });
    }
    report
}

/// How the durability checks that ran reached the store: through real crashes, or only through
/// the harness's reopen, which may not run the store's recovery. `None` when none ran.
fn durability_note(harness: &Erased<'_>, report: &Report) -> Option<String> {
    let ran = |name: &str| report.checks.iter().any(|(n, r, _)| *n == name && !matches!(r, CheckResult::Skipped(_)));
    if !ran("p1_crashes_at_chosen_points_keep_every_state") {
        return None;
    }
    let crashes = harness.faults().contains(&crate::faults::Fault::Crash);
    let cut = harness.capabilities().power_cuts.filter(|_| ran("p1_power_cuts_take_back_nothing_the_store_promised"));
    if let Some(model) = cut {
        let caused = if crashes { ", through crashes the harness caused (Fault::Crash)" } else { "" };
        return Some(format!(
            "durability (P1, and D10 across a restart) was checked through power cuts (the store's storage on a disk \
             that lost power under `{model}` and every milder model, the store ended and opened again on what the cut \
             left){caused} and through the harness's reopen"
        ));
    }
    Some(if crashes {
        "durability (P1, and D10 across a restart) was checked through crashes the harness caused \
         (Fault::Crash) and through its reopen"
            .to_owned()
    } else {
        "durability (P1, and D10 across a restart) was checked only through the harness's reopen: it causes no \
         crash (Harness::faults lists no Fault::Crash; through the driver, give --fault crash=COMMAND). A reopen \
         that does not reach the store's storage (a server that keeps its rows in memory and only renames the \
         store) passes these checks without running the store's recovery"
            .to_owned()
    })
}

/// Reports an adapter that broke the protocol once: the first check it failed keeps the whole
/// failure, each later one that failed for a protocol failure only points back to it.
#[derive(Default)]
pub(crate) struct ProtocolOnce {
    first: Option<&'static str>,
}

impl ProtocolOnce {
    /// Sees the result of check `name`, as the checks end one after another.
    pub(crate) fn see(&mut self, name: &'static str, result: &mut CheckResult) {
        let CheckResult::Failed(failure) = result else { return };
        if !failure.is_protocol() {
            return;
        }
        match self.first {
            None => self.first = Some(name),
            Some(earlier) => {
                let mut brief = Failure::without_rule(
                    failure.check.clone(),
                    format!("not run to its end: the adapter broke the protocol earlier (see check `{earlier}`)"),
                );
                brief.protocol = Some(Protocol::Earlier(earlier.to_owned()));
                *failure = brief;
            }
        }
    }
}
