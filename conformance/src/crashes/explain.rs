//! What a crash run's failure says: the key, what the run made of it, the field that differs,
//! the crash, and the key's operations around it.

use reservation_store::rules::Rule;
use reservation_store::{Instant, StoredReservation, spec};

use super::{CHECK, CrashKind};
use crate::drawing::Drawing;
use crate::failure::Failure;
use crate::harm::{Blamed, Harm};
use crate::harness::START;
use crate::history::{Call, Names, Return};
use crate::show::show_state;

/// The fields in which `shown` differs from `allowed`, both as lookups show them.
fn differing(shown: Option<&StoredReservation>, allowed: Option<&StoredReservation>) -> &'static str {
    use reservation_store::spec::Reservation as R;
    match (shown, allowed) {
        (None, Some(_)) => "the reservation is gone: the key is free",
        (Some(_), None) => "a reservation is there where the key must be free (or expired)",
        (Some(R::Pending(_)), Some(R::Confirmed(_))) => "the confirmation is gone: the key is pending",
        (Some(R::Confirmed(_)), Some(R::Pending(_))) => "the key is confirmed where it must be pending",
        (Some(R::Pending(s)), Some(R::Pending(a))) if s.owner() != a.owner() => "the owner changed",
        (Some(R::Pending(s)), Some(R::Pending(a))) if s.holds() != a.holds() => "the holds changed",
        (Some(R::Pending(_)), Some(R::Pending(_))) => "the expiry changed",
        (Some(R::Confirmed(s)), Some(R::Confirmed(a))) if s.owner != a.owner => "the owner changed",
        (Some(R::Confirmed(_)), Some(R::Confirmed(_))) => "the version changed",
        (None, None) => "nothing differs",
    }
}

/// The failure of the key `b.key` (`label`: what the run made of it), whose operations `b.ops`
/// (ending with the one that went wrong) no order explains once the crash `b.harm` has happened,
/// while those before it are explained, leaving the key in one of the states `b.allowed`;
/// `set_back` is the instant the suite's clock was set back to when the wrong lookup ran.
pub(super) fn crash_failure(names: &Names, b: &Blamed<'_>, label: &str, set_back: Option<Instant>) -> Failure {
    let (key, ops, allowed, crash) = (b.key, b.ops, &b.allowed, b.harm);
    let wrong = ops[ops.len() - 1];
    let at = wrong.clock_at_return;
    let shown_at = |now: Instant| {
        let mut v: Vec<Option<StoredReservation>> = Vec::new();
        for s in allowed {
            let seen = spec::lookup(s.as_ref(), now).cloned();
            if !v.contains(&seen) {
                v.push(seen);
            }
        }
        v
    };
    let expected = shown_at(at);
    let allowed_text = expected.iter().map(|s| show_state(s.as_ref())).collect::<Vec<_>>().join(", or ");
    let shown = match &wrong.ret {
        Return::Lookup(shown) => Some(shown.clone()),
        _ => None,
    };
    let (what, field) = match &shown {
        Some(shown) => (
            format!("a lookup shows {}", show_state(shown.as_ref())),
            expected.first().map_or("", |a| differing(shown.as_ref(), a.as_ref())),
        ),
        None => (format!("the store answered {}", names.show(wrong)), "an operation's outcome differs"),
    };
    // With the clock set back: the clock's fault when the store shows what it would have shown
    // at the earlier instant.
    let clock_went_back = match (set_back, &shown) {
        (Some(back), Some(shown)) => shown_at(back).contains(shown) && !expected.contains(shown),
        _ => false,
    };
    let recipe = format!(" ({label})");
    let last_ack = ops
        .iter()
        .filter(|e| e.called < crash.began)
        .rev()
        .find(|e| matches!(e.call, Call::Op(_)) && matches!(e.ret, Return::Outcome(_)))
        .map(|e| names.show(e));
    let rule = if clock_went_back { Rule::D10 } else { Rule::P1 };
    let problem = match set_back {
        Some(back) if clock_went_back => format!(
            "k{key}{recipe}: after crash {} ({}), the suite's clock set back to {back}, {what}, as at {back}; the \
             store must decide at {at}, the latest instant at which it acknowledged a change before the crash, where \
             the key shows {allowed_text}: the store's clock went back across the crash",
            crash.n,
            kind_of(crash)
        ),
        _ => format!(
            "k{key}{recipe}: after crash {} ({}, {}), {what} at {at}; what the store acknowledged before the crash \
             allows only {allowed_text}: {field}",
            crash.n,
            kind_of(crash),
            crash.point
        ),
    };
    let mut f = Failure::new(CHECK, rule, problem).with_drawing({
        let events: Vec<_> = ops.iter().map(|e| (*e).clone()).collect();
        let mut d = Drawing::at(names, &events, wrong);
        d.placed = ops[..ops.len() - 1].iter().map(|e| e.called).collect();
        d.differs = Some(format!("{what}; what was acknowledged before the crash allows only {allowed_text}: {field}"));
        d
    });
    f.check_rule = Some(Rule::P1);
    if let Some(ack) = last_ack {
        f.context.push(format!("the last change of k{key} acknowledged before the crash: {ack}"));
    }
    f.context.push(format!(
        "crash {}: {} at stamps {} .. {} ({})",
        crash.n,
        kind_of(crash),
        crash.began,
        crash.ended,
        crash.point
    ));
    f.context.push(format!("scope s0 = {}; the clock started at {START}", names.scope));
    // The key's operations around the crash: a few before it, then up to the one that went wrong.
    let first_after = ops.iter().position(|e| e.called >= crash.began).unwrap_or(ops.len());
    let from = first_after.saturating_sub(6);
    let mut lines = String::new();
    if from > 0 {
        lines.push_str(&format!("\n      ({from} earlier operations of k{key} not shown)"));
    }
    for (i, e) in ops.iter().enumerate().skip(from) {
        if i == first_after {
            lines.push_str(&format!("\n      --- crash {}: {} ---", crash.n, kind_of(crash)));
        }
        lines.push_str(&format!("\n      {}", names.show(e)));
    }
    if first_after == ops.len() {
        lines.push_str(&format!("\n      --- crash {}: {} ---", crash.n, kind_of(crash)));
    }
    f.transcript.push(format!("k{key}:{lines}"));
    f
}

/// How `harm`, a crash of the run, was caused.
fn kind_of(harm: &Harm) -> CrashKind {
    CrashKind::of(harm.fault)
}
