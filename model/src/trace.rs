//! Readable traces: numbered steps with the owner, attempt, operation, outcome, rule and clocks.

use std::fmt::Write as _;

use reservation_store::{Operation, ReleaseVersion};

use crate::action::{Action, OpReport, Reports};
use crate::state::*;

/// One action in a few words, without its outcome (for the Explorer).
pub fn action_text(action: &Action) -> String {
    match *action {
        Action::Tick => "the store clock ticks".into(),
        Action::Reserve { owner, attempt, key } => {
            format!("owner {owner} attempt {attempt}: reserve {}", key_name(key))
        }
        Action::Retry { owner, attempt } => format!("owner {owner} attempt {attempt}: reserve again"),
        Action::Append { owner, attempt } => format!("owner {owner} attempt {attempt}: append its fact"),
        Action::Confirm { owner, attempt } => format!("owner {owner} attempt {attempt}: confirm"),
        Action::Abandon { owner, attempt } => format!("owner {owner} attempt {attempt}: abandon"),
        Action::Crash { owner, attempt } => format!("owner {owner} attempt {attempt}: crash"),
        Action::GiveUp { owner, delete: true } => format!("owner {owner}: append a deletion fact"),
        Action::GiveUp { owner, delete: false } => format!("owner {owner}: append a fact giving its key up"),
        Action::Apply { owner } => format!("subscription of owner {owner}: apply the next operation"),
        Action::Restart { owner, fact } => format!("subscription of owner {owner}: restart from fact v{}", fact + 1),
        Action::Replay { owner, fact, op } => {
            format!("subscription of owner {owner}: deliver operation {op} of fact v{} again", fact + 1)
        }
    }
}

fn op_text(r: &OpReport) -> String {
    let k = key_name(r.key);
    let op = match r.op {
        Operation::Reserve { hold, .. } => format!("reserve({k}, hold h{})", hold.get()),
        Operation::Confirm { version, .. } => format!("confirm({k}, v{})", version.as_u64()),
        Operation::Release { version: ReleaseVersion::Any, .. } => format!("release({k}, ANY_VERSION)"),
        Operation::Release { version: ReleaseVersion::At(v), .. } => format!("release({k}, v{})", v.as_u64()),
        Operation::Abandon { hold, .. } => format!("abandon({k}, hold h{})", hold.get()),
    };
    format!("{op} -> {} ({})", r.outcome, r.rule)
}

/// The store in a few words: `A=pending(o0 {h0,h1} until t=3) B=confirmed(o1 v2)`.
pub fn store_text(s: &State) -> String {
    let mut out = String::new();
    for (k, slot) in s.store.iter().enumerate().take(usize::from(s.keys)) {
        let name = key_name(k as u8);
        let _ = match slot.tag {
            PENDING => {
                let holds: Vec<String> =
                    (0..HOLD_BITS).filter(|&b| slot.has_hold(b)).map(|b| format!("h{b}")).collect();
                let until = if slot.is_live(s.now) { format!("until t={}", slot.at) } else { "expired".to_string() };
                write!(out, " {name}=pending(o{} {{{}}} {until})", slot.owner, holds.join(","))
            }
            CONFIRMED => write!(out, " {name}=confirmed(o{} v{})", slot.owner, slot.at),
            _ => write!(out, " {name}=free"),
        };
    }
    out.trim_start().to_string()
}

/// The latest fact of each owner: `o0: v2 holds B; o1: no fact`.
pub fn facts_text(s: &State) -> String {
    let parts: Vec<String> = s
        .owners
        .iter()
        .enumerate()
        .take(usize::from(s.owner_count))
        .map(|(i, o)| match o.log_len {
            0 => format!("o{i}: no fact"),
            v => match o.held_after(v) {
                NO_KEY => format!("o{i}: v{v} holds nothing"),
                DELETED => format!("o{i}: v{v} deleted"),
                k => format!("o{i}: v{v} holds {}", key_name(k)),
            },
        })
        .collect();
    parts.join("; ")
}

/// One step of a trace, from state `s` by `action` to state `n`, whose store operations did
/// `reports`, as one or two lines (without the number); an append is judged by a node clock that
/// reads `node_clock`.
pub fn step_text(s: &State, action: Action, n: &State, reports: Reports, node_clock: i32) -> Option<String> {
    let [report, second] = reports;
    let then = second.map(|r| format!(", then {}", op_text(&r))).unwrap_or_default();
    let what = match (action, report) {
        (Action::Tick, _) => format!("the store clock ticks to t={}", n.now),
        (Action::Append { owner, attempt: a }, _) => {
            let at = attempt(s, owner, a)?;
            let v = n.owners.get(usize::from(owner))?.log_len;
            format!(
                "owner {owner} attempt {a}: its node clock reads t={} (store t={}), judges its reservation live until t={}, appends fact v{v} holding {}",
                node_clock,
                s.now,
                at.deadline,
                key_name(at.key)
            )
        }
        (Action::Crash { owner, attempt: a }, _) => {
            let when = match attempt(s, owner, a)?.phase {
                Phase::Reserved => "before appending",
                Phase::Appended => "after appending, before confirming",
                _ => "",
            };
            format!("owner {owner} attempt {a}: crashes {when}")
        }
        (Action::GiveUp { owner, delete }, _) => {
            let o = n.owners.get(usize::from(owner))?;
            let prev = o.held_after(o.log_len.saturating_sub(1));
            let kind = if delete { "deletes itself: fact" } else { "gives its key up: fact" };
            format!("owner {owner} {kind} v{} drops {}", o.log_len, key_name(prev))
        }
        (Action::Restart { owner, fact }, _) => {
            format!("subscription of owner {owner}: restarts from fact v{}", fact + 1)
        }
        (Action::Apply { owner }, Some(r)) => {
            let c = s.owners.get(usize::from(owner))?.cursor;
            format!("subscription of owner {owner}: applies fact v{}: {}{then}", c + 1, op_text(&r))
        }
        (Action::Replay { owner, fact, .. }, Some(r)) => {
            format!("subscription of owner {owner}: replays old fact v{} out of order: {}", fact + 1, op_text(&r))
        }
        (Action::Reserve { owner, attempt: a, .. }, Some(r))
        | (Action::Retry { owner, attempt: a }, Some(r))
        | (Action::Confirm { owner, attempt: a }, Some(r))
        | (Action::Abandon { owner, attempt: a }, Some(r)) => {
            let hold = format!("h{}", hold_bit(owner, a));
            format!("owner {owner} attempt {a} (hold {hold}): {}", op_text(&r))
        }
        (other, None) => action_text(&other),
    };
    Some(format!("[store t={}] {what}\n       store: {}; facts: {}", s.now, store_text(n), facts_text(n)))
}

/// A numbered trace of `actions` from `start`: `step` gives each step's next state and its lines
/// ([`step_text`]), or `None` where the step is not possible.
pub fn trace_text(
    start: &State,
    actions: &[Action],
    step: impl Fn(&State, Action) -> Option<(State, String)>,
) -> String {
    let mut out = String::new();
    let mut s = *start;
    for (i, a) in actions.iter().enumerate() {
        match step(&s, *a) {
            Some((n, line)) => {
                let _ = writeln!(out, "{:>3}. {line}", i + 1);
                s = n;
            }
            None => {
                let _ = writeln!(out, "{:>3}. {} (not possible here)", i + 1, action_text(a));
                break;
            }
        }
    }
    out
}

/// The attempts that have started and each subscription's position: `o0 a0 reserved A until
/// t=3; o0 subscription at v1 of 2`.
pub fn attempts_text(s: &State) -> String {
    let mut parts = Vec::new();
    for (i, o) in s.owners.iter().enumerate().take(usize::from(s.owner_count)) {
        for (a, at) in o.attempts.iter().enumerate() {
            let key = key_name(at.key);
            let what = match at.phase {
                Phase::Idle => continue,
                Phase::Reserved if at.deadline == 0 => format!("reserved {key}, too late to append"),
                Phase::Reserved => format!("reserved {key}, may append until t={}", at.deadline),
                Phase::Appended => format!("appended v{} holding {key}, confirm due", at.version),
                Phase::Done => "done".to_string(),
                Phase::CrashedBefore => "crashed before appending".to_string(),
                Phase::CrashedAfter => format!("crashed after appending v{}", at.version),
            };
            parts.push(format!("o{i} a{a} {what}"));
        }
        if o.log_len > 0 {
            parts.push(format!("o{i} subscription applied {} of {} facts", o.cursor.min(o.log_len), o.log_len));
        }
    }
    if parts.is_empty() { "none started".to_string() } else { parts.join("; ") }
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "store clock: t={}", self.now)?;
        writeln!(f, "store: {}", store_text(self))?;
        writeln!(f, "latest facts: {}", facts_text(self))?;
        write!(f, "attempts: {}", attempts_text(self))?;
        if self.flags != 0 {
            write!(f, "\nbroken by the last step: step properties {:#06b}", self.flags)?;
        }
        Ok(())
    }
}
