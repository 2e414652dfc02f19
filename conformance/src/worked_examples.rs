//! The worked examples of SPEC.md, read from the document itself and run as written.
//!
//! An example is a fenced `text` block whose lines read
//! `at T <op> <key> by <owner> [hold H] [ttl MS] [version N|ANY|UNVERSIONED] -> <Outcome> <rule>`
//! or `at T lookup <key> -> free | pending by <owner> holds <h1,h2> until <instant> | confirmed
//! by <owner> at <version>`; text after `#` is a comment. Owners are aggregate ids of tenant
//! `acme`, in a scope of type `user` and tenant `acme`.

use std::collections::BTreeSet;

use reservation_store::rules::Rule;
use reservation_store::spec::Reservation;
use reservation_store::{
    AggregateRef, AggregateType, HoldId, Instant, Key, Operation, OperationKind, Outcome, ReleaseVersion,
    ReservationScope, StoredReservation, Tenant, Ttl, Version, spec,
};

use crate::erased::{DynHarness, Erased};
use crate::failure::Failure;
use crate::harness::{Harness, unique_namespace};
use crate::session::Session;

/// The aggregate type of the examples' scope and owners.
pub const TYPE: &str = "user";
/// The tenant of the examples' scope and owners.
pub const TENANT: &str = "acme";

/// One worked example: its title and its lines.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Example {
    /// The bold title that precedes the block, without its final period.
    pub title: String,
    /// The script.
    pub lines: Vec<Line>,
}

/// One line of an example.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Line {
    /// The line as SPEC.md writes it, without its comment.
    pub text: String,
    /// The clock's instant.
    pub at: Instant,
    /// The key.
    pub key: String,
    /// What the line does and expects.
    pub action: Action,
}

/// An operation with its expected outcome and rule, or a lookup with its expected answer.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Action {
    /// An operation; owner and hold by name.
    Op {
        /// The operation.
        operation: Operation<String, String>,
        /// The outcome it must give (`Taken`, `Conflict`, … in the text).
        outcome: Outcome,
        /// The rule that must decide it (by its id in the text).
        rule: Rule,
    },
    /// A lookup and its answer.
    Lookup(Answer),
}

/// A lookup's expected answer (rule D11).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Answer {
    /// Nothing: free, or pending and expired.
    Free,
    /// A live pending reservation.
    Pending {
        /// Its owner's id.
        owner: String,
        /// Its holds.
        holds: BTreeSet<String>,
        /// Its expiry.
        until: Instant,
    },
    /// A confirmed reservation.
    Confirmed {
        /// Its owner's id.
        owner: String,
        /// Its version.
        version: Version,
    },
}

/// The examples of SPEC.md as this build compiled it in.
pub fn from_spec() -> Result<Vec<Example>, String> {
    parse(reservation_store::rules::SPEC_MD)
}

/// The examples of a document written as SPEC.md is.
pub fn parse(document: &str) -> Result<Vec<Example>, String> {
    let mut examples = Vec::new();
    let mut title = String::new();
    let mut block: Option<Vec<Line>> = None;
    for (n, raw) in document.lines().enumerate() {
        let trimmed = raw.trim();
        if let Some(lines) = block.as_mut() {
            if trimmed == "```" {
                let lines = block.take().unwrap_or_default();
                if !lines.is_empty() {
                    examples.push(Example { title: title.clone(), lines });
                }
                continue;
            }
            let text = trimmed.split('#').next().unwrap_or("").trim();
            if text.starts_with("at ") {
                lines.push(parse_line(text).map_err(|e| format!("line {}: {e}: {text:?}", n + 1))?);
            }
            continue;
        }
        if trimmed == "```text" {
            block = Some(Vec::new());
        } else if let Some(rest) = trimmed.strip_prefix("**")
            && let Some((t, _)) = rest.split_once("**")
        {
            title = t.trim_end_matches('.').to_owned();
        }
    }
    Ok(examples)
}

fn number(word: Option<&str>, what: &str) -> Result<u64, String> {
    word.ok_or(format!("{what} is missing"))?.parse().map_err(|_| format!("{what} is not an unsigned 64-bit integer"))
}

fn parse_line(text: &str) -> Result<Line, String> {
    let (call, expected) = text.split_once("->").ok_or("no `->`")?;
    let mut words = call.split_whitespace();
    words.next();
    let at = Instant::from_millis(number(words.next(), "the instant")?);
    let op = words.next().ok_or("no operation")?;
    let key = words.next().ok_or("no key")?.to_owned();
    let expected: Vec<&str> = expected.split_whitespace().collect();
    if op == "lookup" {
        let answer = match expected.as_slice() {
            ["free"] => Answer::Free,
            ["pending", "by", owner, "holds", holds, "until", until] => Answer::Pending {
                owner: (*owner).to_owned(),
                holds: holds.split(',').map(str::to_owned).collect(),
                until: Instant::from_millis(number(Some(until), "the expiry")?),
            },
            ["confirmed", "by", owner, "at", version] => Answer::Confirmed {
                owner: (*owner).to_owned(),
                version: Version::from_u64(number(Some(version), "the version")?),
            },
            _ => return Err("a lookup expects `free`, `pending by …` or `confirmed by …`".into()),
        };
        return Ok(Line { text: text.to_owned(), at, key, action: Action::Lookup(answer) });
    }
    let (mut owner, mut hold, mut ttl, mut version) = (None, None, None, None);
    while let Some(word) = words.next() {
        let value = words.next().ok_or(format!("`{word}` has no value"))?;
        match word {
            "by" => owner = Some(value.to_owned()),
            "hold" => hold = Some(value.to_owned()),
            "ttl" => ttl = Some(Ttl::from_millis(number(Some(value), "the ttl")?).map_err(|e| e.to_string())?),
            "version" => version = Some(value),
            other => return Err(format!("unknown word `{other}`")),
        }
    }
    let owner = owner.ok_or("no owner (`by`)")?;
    let version_of = |v: Option<&str>| -> Result<ReleaseVersion, String> {
        match v.ok_or("no version")? {
            "ANY" => Ok(ReleaseVersion::Any),
            "UNVERSIONED" => Ok(ReleaseVersion::At(Version::UNVERSIONED)),
            n => Ok(ReleaseVersion::At(Version::stream(number(Some(n), "the version")?).map_err(|e| e.to_string())?)),
        }
    };
    let kind = OperationKind::from_name(op).ok_or(format!("unknown operation `{op}`"))?;
    let operation = match kind {
        OperationKind::Reserve => Operation::Reserve { owner, hold: hold.ok_or("no hold")?, ttl: ttl.ok_or("no ttl")? },
        OperationKind::Confirm => match version_of(version)? {
            ReleaseVersion::At(version) => Operation::Confirm { owner, version },
            ReleaseVersion::Any => return Err("a confirm cannot name ANY (D4)".into()),
        },
        OperationKind::Release => Operation::Release { owner, version: version_of(version)? },
        OperationKind::Abandon => Operation::Abandon { owner, hold: hold.ok_or("no hold")? },
    };
    let [outcome, rule] = expected.as_slice() else {
        return Err("an operation expects `<Outcome> <rule>`".into());
    };
    let outcome = Outcome::from_name(outcome).ok_or(format!("`{outcome}` is no outcome's name"))?;
    let rule = Rule::ALL.into_iter().find(|r| r.id() == *rule).ok_or(format!("`{rule}` is no rule's id"))?;
    Ok(Line { text: text.to_owned(), at, key, action: Action::Op { operation, outcome, rule } })
}

/// An owner of the examples: `id` in tenant `acme` of type `user`.
pub fn owner(id: &str) -> Result<AggregateRef, String> {
    AggregateRef::parse(TYPE, Some(TENANT), id).map_err(|e| format!("owner {id:?}: {e}"))
}

/// What a lookup answering `answer` returns.
pub fn reservation(answer: &Answer) -> Result<Option<StoredReservation>, String> {
    Ok(match answer {
        Answer::Free => None,
        Answer::Pending { owner: o, holds, until } => {
            let holds: Result<BTreeSet<HoldId>, String> =
                holds.iter().map(|h| HoldId::new(h).map_err(|e| format!("hold {h:?}: {e}"))).collect();
            Some(Reservation::pending(owner(o)?, holds?, *until).ok_or("a pending reservation without holds")?)
        }
        Answer::Confirmed { owner: o, version } => Some(Reservation::confirmed(owner(o)?, *version)),
    })
}

/// Runs `example` on a fresh store of `h` and on the spec functions; fails where the store
/// differs from the specification, or where SPEC.md's text differs from the spec functions.
pub fn run(h: &dyn DynHarness, example: &Example) -> Result<(), Failure> {
    let h = &Erased::new(h);
    run_example(h, example).map_err(|mut f| {
        f.context.insert(0, format!("SPEC.md's worked example {:?}", example.title));
        f
    })
}

fn run_example<H: Harness>(h: &H, example: &Example) -> Result<(), Failure> {
    // The store is opened at the example's first instant, so that no request carries a `now`
    // earlier than its `open`'s (PROTOCOL.md).
    let start = example.lines.first().map_or(crate::START, |line| line.at);
    let mut s = Session::starting_at(h, "examples", None, start);
    let scope = ReservationScope::new(
        AggregateType::new(TYPE).map_err(|e| Failure::without_rule("examples", e.to_string()))?,
        Tenant::id(TENANT).map_err(|e| Failure::without_rule("examples", e.to_string()))?,
        unique_namespace("example"),
    );
    let wrong_text = |s: &Session<'_, H>, line: &Line, problem: String| {
        s.fail(None, format!("SPEC.md's worked example {:?}, line {:?}: {problem}", example.title, line.text))
    };
    for line in &example.lines {
        let key = Key::new(&line.key).map_err(|e| wrong_text(&s, line, e.to_string()))?;
        if s.now() != line.at {
            s.set_clock(line.at);
        }
        match &line.action {
            Action::Op { operation, outcome, rule } => {
                let o = owner(operation.owner()).map_err(|e| wrong_text(&s, line, e))?;
                // An operation without a hold never reads this one.
                let hold = HoldId::new(operation.hold().map_or("-", String::as_str))
                    .map_err(|e| wrong_text(&s, line, e.to_string()))?;
                let op = operation.clone().map(|_| &o, |_| &hold);
                let step = spec::apply(s.state(&scope, &key).cloned(), line.at, op);
                if step.outcome != *outcome || step.rule != *rule {
                    return Err(wrong_text(
                        &s,
                        line,
                        format!("the spec functions say {:?} by {}", step.outcome, step.rule),
                    ));
                }
                let got = s.execute(&scope, &key, op)?;
                s.expect(step.rule, got)?;
            }
            Action::Lookup(answer) => {
                let want = reservation(answer).map_err(|e| wrong_text(&s, line, e))?;
                let seen = spec::lookup(s.state(&scope, &key), line.at).cloned();
                if seen != want {
                    return Err(wrong_text(&s, line, format!("the spec functions' lookup gives {seen:?}")));
                }
                s.lookup(&scope, &key)?;
            }
        }
    }
    Ok(())
}
