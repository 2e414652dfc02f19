//! The oracle: runs operation scripts and raw inputs on a store and on the specification side by
//! side. The differential check and fuzz targets drive it.
//!
//! [`ops()`] runs a script of [`Op`]s on a fresh store, comparing every outcome and the lookups
//! of the keys it touched; [`inputs`] runs one operation built from raw strings and numbers,
//! checking that every invalid one is a typed error that changes nothing.

use std::fmt::Write as _;
use std::sync::LazyLock;

use reservation_store::rules::{Rule, RuleSet};
use reservation_store::{
    AggregateRef, HoldId, InvalidArgument, Key, MAX_NAME_LEN, Namespace, Operation, ReleaseVersion, ReservationScope,
    Tenant, Ttl, Version,
};

use crate::erased::{DynHarness, Erased};
use crate::failure::Failure;
use crate::harness::{Harness, unique_namespace};
use crate::ops::{self, ClockMove, Op, ReleasePick, VersionPick};
use crate::session::Session;

/// The aggregate type of a script's scopes and owners, but for one scope and one owner per slot.
pub(crate) const SCRIPT_TYPE: &str = "rc-user";

/// The other aggregate type: of one scope, and of one owner of each scope (rule D6's
/// `OwnerTypeMismatch` elsewhere).
pub(crate) const OTHER_TYPE: &str = "rc-order";

/// A tenant whose id spells the system tenant's name: an ordinary tenant, which a store must keep
/// apart from `SYSTEM_TENANT` (rule S1).
pub(crate) const MARKER_TENANT: &str = "SYSTEM_TENANT";

/// The suffix of a script's second namespace, after its own unique one.
const SECOND_NAMESPACE: &str = ".b";

/// One key slot of a script: a key in a scope, and the owners a script's owner indices name there.
#[derive(Clone, Debug)]
pub(crate) struct Slot {
    /// The slot's scope.
    pub scope: ReservationScope,
    /// The slot's key.
    pub key: Key,
    /// The owners of [`Domain::owner`] on this slot.
    owners: &'static [AggregateRef; OWNERS],
}

/// Owners per slot.
const OWNERS: usize = 6;

/// The owners a script's indices name on a slot whose scope is of type `ty` and whose tenant, or
/// `acme` for a `SYSTEM_TENANT` scope, is `home`: `alice` and `bob` of `home`, then `alice` of
/// `globex`, of `SYSTEM_TENANT`, of the other of `acme` and the tenant spelled `SYSTEM_TENANT`,
/// and `alice` of `home` with the other aggregate type. A `SYSTEM_TENANT` scope admits the first
/// five, all different owners (D5); a tenant scope only the first two (D6, `TenantMismatch`); no
/// scope the last (D6, `OwnerTypeMismatch`).
fn owners(ty: &str, home: &str) -> [AggregateRef; OWNERS] {
    let other_type = if ty == SCRIPT_TYPE { OTHER_TYPE } else { SCRIPT_TYPE };
    let other_tenant = if home == MARKER_TENANT { "acme" } else { MARKER_TENANT };
    let owner = |ty: &str, t: Option<&str>, id: &str| AggregateRef::parse(ty, t, id).expect("a valid constant");
    [
        owner(ty, Some(home), "alice"),
        owner(ty, Some(home), "bob"),
        owner(ty, Some("globex"), "alice"),
        owner(ty, None, "alice"),
        owner(ty, Some(other_tenant), "alice"),
        owner(other_type, Some(home), "alice"),
    ]
}

static USERS: LazyLock<[AggregateRef; OWNERS]> = LazyLock::new(|| owners(SCRIPT_TYPE, "acme"));
static MARKED: LazyLock<[AggregateRef; OWNERS]> = LazyLock::new(|| owners(SCRIPT_TYPE, MARKER_TENANT));
static ORDERS: LazyLock<[AggregateRef; OWNERS]> = LazyLock::new(|| owners(OTHER_TYPE, "acme"));

/// Key slots of a script.
pub(crate) const SLOTS: usize = 8;

/// The names a script's indices stand for: scopes, keys, owners and holds that differ in one
/// field or one byte, so that a store comparing loosely, or joining scopes that differ, fails.
#[derive(Clone, Debug)]
pub(crate) struct Domain {
    /// Key slots. Slots 0–2: keys `"k"`, `"K"` and `"k "` of a `SYSTEM_TENANT` scope (type
    /// `rc-user`, the script's namespace); the others hold key `"k"` each, in a scope that differs
    /// from slot 0's in one part: 3, tenant `acme`; 4, the tenant spelled `SYSTEM_TENANT`; 5, the
    /// script's second namespace (its own followed by `.b`); 6, tenant `acme` there; 7, type
    /// `rc-order`.
    pub slots: [Slot; SLOTS],
    /// Holds: `"h1"`, `"H1"`, `"h1 "`.
    pub holds: [HoldId; 3],
}

impl Domain {
    /// The domain of a script whose own namespace is `namespace` (and `namespace` followed by
    /// `.b`, its second).
    pub fn new(namespace: Namespace) -> Self {
        let second = Namespace::new(format!("{namespace}{SECOND_NAMESPACE}"))
            .unwrap_or_else(|_| unique_namespace("rc-script-b"));
        let ty = |t: &str| reservation_store::AggregateType::new(t).expect("a valid constant");
        let tenant = |t: &str| Tenant::id(t).expect("a valid constant");
        let scope = |t: &str, tenant: Tenant, ns: &Namespace| ReservationScope::new(ty(t), tenant, ns.clone());
        let system = scope(SCRIPT_TYPE, Tenant::System, &namespace);
        let key = |k: &str| Key::new(k).expect("a valid constant");
        let slot = |scope: &ReservationScope, k: &str, owners| Slot { scope: scope.clone(), key: key(k), owners };
        let hold = |h: &str| HoldId::new(h).expect("a valid constant");
        let users = &*USERS;
        Domain {
            slots: [
                slot(&system, "k", users),
                slot(&system, "K", users),
                slot(&system, "k ", users),
                slot(&scope(SCRIPT_TYPE, tenant("acme"), &namespace), "k", users),
                slot(&scope(SCRIPT_TYPE, tenant(MARKER_TENANT), &namespace), "k", &*MARKED),
                slot(&scope(SCRIPT_TYPE, Tenant::System, &second), "k", users),
                slot(&scope(SCRIPT_TYPE, tenant("acme"), &second), "k", users),
                slot(&scope(OTHER_TYPE, Tenant::System, &namespace), "k", &*ORDERS),
            ],
            holds: [hold("h1"), hold("H1"), hold("h1 ")],
        }
    }

    fn slot(&self, raw: u8) -> &Slot {
        &self.slots[ops::index(raw, self.slots.len())]
    }

    /// Owner `raw` on slot `slot`.
    fn owner(&self, slot: u8, raw: u8) -> &AggregateRef {
        let owners = self.slot(slot).owners;
        &owners[ops::index(raw, owners.len())]
    }

    fn hold(&self, raw: u8) -> &HoldId {
        &self.holds[ops::index(raw, self.holds.len())]
    }
}

/// Runs `script` on a fresh store of `harness` and on the specification, comparing every outcome
/// and lookups: after each operation, of the key it worked on; after each clock move, each lookup
/// step and the last step, of every key the script touched. A script that fails is run again,
/// looking up every key after every step, so that its transcript stops at the first step after
/// which any key differs. Returns the rules the specification reported.
///
/// Indices name keys, scopes, owners and holds that differ in one field or one byte, so that a
/// store comparing loosely, or joining scopes that differ, fails. A key index names one of 8
/// slots (taken mod 8), each a key in a scope: keys `k`, `K` and `k ` in a `SYSTEM_TENANT` scope of
/// type `rc-user` in the script's namespace (slots 0–2), then `k` again in scopes that differ from
/// that one in one part: tenant `acme` (3), the tenant whose id spells `SYSTEM_TENANT`, which is
/// not the system tenant (4), a second namespace, the script's own followed by `.b` (5), tenant
/// `acme` there (6), and type `rc-order` (7). Every script has namespaces of its own
/// ([`unique_namespace`]), so that stores sharing a database never meet. An owner index names one
/// of 6 owners of the slot's type (mod 6): `alice` and `bob` of the scope's tenant (`acme` for a
/// `SYSTEM_TENANT` scope), `alice` of `globex`, of `SYSTEM_TENANT`, and of the tenant spelled
/// `SYSTEM_TENANT` (of `acme` on slot 4), and `alice` of the other aggregate type: a
/// `SYSTEM_TENANT` scope admits the first five, as five different owners; a tenant scope the
/// first two; the others are D6 errors that change nothing. Holds are `h1`, `H1` and `h1 `.
/// Versions and clock moves are resolved against the specification's state of the key. A
/// reserve with a zero ttl is the constructor's [`InvalidArgument::TtlZero`] (rule D2) and
/// reaches no store. A failure carries the transcript, whose legend names each scope (`s0`,
/// `s1`, …), and the script as Rust, to replay it.
pub fn ops(harness: &dyn DynHarness, script: &[Op]) -> Result<RuleSet, Failure> {
    let steps: Vec<(Op, bool)> = script.iter().map(|op| (*op, false)).collect();
    twice(harness, &steps, "differential").map_err(|mut failure| {
        failure.replay = Some(replay(script));
        failure
    })
}

/// Runs `script` as [`ops()`] does, on one store that is closed and reopened through
/// [`Harness::reopen`] after every step marked `true`, every key the script touched looked up and
/// compared after each reopen: what a reopen loses or makes up fails P1 (D10 where the store's
/// clock is ahead of the suite's). The differential check across restarts
/// ([`crate::differential::restarts`]) draws these scripts. A failure's replay is this call.
pub fn ops_across_restarts(harness: &dyn DynHarness, script: &[(Op, bool)]) -> Result<RuleSet, Failure> {
    twice(harness, script, RESTARTS).map_err(|mut failure| {
        failure.replay = Some(replay_across_restarts(script));
        failure
    })
}

/// [`ops_across_restarts`] without the second run that writes the transcript: whether `script`
/// passes, for a search that runs many scripts (shrinking) and explains only the last.
pub(crate) fn quietly_across_restarts(harness: &dyn DynHarness, script: &[(Op, bool)]) -> Result<RuleSet, Failure> {
    run(&Erased::new(harness), script, false, RESTARTS)
}

/// [`quietly_across_restarts`] on any harness: the one whose reopen is a power cut, for one.
pub(crate) fn quietly_on<H: Harness>(harness: &H, script: &[(Op, bool)]) -> Result<RuleSet, Failure> {
    run(harness, script, false, RESTARTS)
}

/// [`ops_across_restarts`] on any harness.
pub(crate) fn across_restarts_on<H: Harness>(harness: &H, script: &[(Op, bool)]) -> Result<RuleSet, Failure> {
    twice_on(harness, script, RESTARTS).map_err(|mut failure| {
        failure.replay = Some(replay_across_restarts(script));
        failure
    })
}

/// The check [`ops_across_restarts`] runs for: its failures name it.
const RESTARTS: &str = "differential_restarts";

/// Runs `steps` quietly and, when that fails, again with the transcript on.
fn twice(harness: &dyn DynHarness, steps: &[(Op, bool)], check: &'static str) -> Result<RuleSet, Failure> {
    twice_on(&Erased::new(harness), steps, check)
}

/// [`twice`] on any harness.
fn twice_on<H: Harness>(harness: &H, steps: &[(Op, bool)], check: &'static str) -> Result<RuleSet, Failure> {
    run(harness, steps, false, check).map_err(|quiet| {
        // Run again with the transcript on; a store that does not fail twice is flaky.
        run(harness, steps, true, check).err().unwrap_or_else(|| {
            let mut f = quiet;
            f.problem.push_str(" (a second run of the same script passed: the store is not deterministic)");
            f
        })
    })
}

/// One run of `script`. The quiet run (`record` off) looks up, after each operation, the key it
/// worked on, and every key the script touched after each clock move, each lookup step and the
/// last step: a key that a step on another key changed differs there at the latest. The run
/// that records a transcript, made once the quiet one failed, looks up every key after every
/// step, so that it stops at the first step after which any key differs.
/// A step marked `true` is followed by a reopen; failures name `check`.
fn run<H: Harness>(harness: &H, script: &[(Op, bool)], record: bool, check: &'static str) -> Result<RuleSet, Failure> {
    let d = Domain::new(unique_namespace("rc-script"));
    let mut s = Session::new(harness, check, None);
    s.set_recording(record);
    s.set_lookup_all(record);
    for (op, reopen) in script {
        apply(&mut s, &d, *op)?;
        if *reopen {
            s.reopen()?;
        }
    }
    s.check_lookups()?;
    Ok(s.reached())
}

fn confirmed_version<H: Harness>(s: &Session<'_, H>, slot: &Slot) -> Option<Version> {
    s.state(&slot.scope, &slot.key).and_then(|r| r.as_confirmed()).map(|c| c.version)
}

fn apply<H: Harness>(s: &mut Session<'_, H>, d: &Domain, op: Op) -> Result<(), Failure> {
    // The script's indices and relative picks resolve to one `Operation`, which the session
    // decides through `spec::apply`: the script has no dispatcher of its own.
    let (key, operation) = match op {
        Op::Reserve { owner, key, hold, ttl } => match Ttl::from_millis(u64::from(ttl)) {
            Ok(ttl) => (key, Operation::Reserve { owner: d.owner(key, owner), hold: d.hold(hold), ttl }),
            Err(e) => {
                let key = &d.slot(key).key;
                s.note(|| format!("reserve({key:?}) with ttl 0: the constructor says {e:?} (D2); nothing sent"));
                return if e == InvalidArgument::TtlZero {
                    s.reach(Rule::D2);
                    Ok(())
                } else {
                    Err(s.fail(Some(Rule::D2), format!("Ttl::from_millis(0) returned {e:?}, not TtlZero")))
                };
            }
        },
        Op::Confirm { owner, key, version } => {
            let version = version.resolve(confirmed_version(s, d.slot(key)));
            (key, Operation::Confirm { owner: d.owner(key, owner), version })
        }
        Op::Release { owner, key, version } => {
            let version = version.resolve(confirmed_version(s, d.slot(key)));
            (key, Operation::Release { owner: d.owner(key, owner), version })
        }
        Op::Abandon { owner, key, hold } => {
            (key, Operation::Abandon { owner: d.owner(key, owner), hold: d.hold(hold) })
        }
        Op::Lookup { key } => {
            let slot = d.slot(key);
            return s.lookup(&slot.scope, &slot.key);
        }
        Op::Clock(m) => {
            let expires = m.key().and_then(|k| {
                let slot = d.slot(k);
                s.state(&slot.scope, &slot.key).and_then(|r| r.as_pending()).map(|p| p.expires_at())
            });
            let at = m.resolve(s.now(), expires);
            s.set_clock(at);
            return s.check_lookups();
        }
    };
    let slot = d.slot(key);
    s.execute(&slot.scope, &slot.key, operation).map(drop)
}

/// `script` as Rust, ready to paste into a test: it imports only the types it names, so that it
/// compiles without a warning.
pub(crate) fn replay(script: &[Op]) -> String {
    let lines: Vec<String> = script.iter().map(rust).collect();
    pasted("ops", &lines)
}

/// `script` with its reopens as Rust, as [`replay`] writes a script.
pub(crate) fn replay_across_restarts(script: &[(Op, bool)]) -> String {
    let lines: Vec<String> = script.iter().map(|(op, reopen)| format!("({}, {reopen})", rust(op))).collect();
    pasted("ops_across_restarts", &lines)
}

/// A call of `function` of this module on the steps `lines`, importing only the types they name.
fn pasted(function: &str, lines: &[String]) -> String {
    let mut ops = String::new();
    for line in lines {
        let _ = writeln!(ops, "    {line},");
    }
    let used: Vec<&str> = ["ClockMove", "Op", "ReleasePick", "VersionPick"]
        .into_iter()
        .filter(|t| ops.contains(&format!("{t}::")))
        .collect();
    let names = match used.as_slice() {
        [one] => (*one).to_owned(),
        many => format!("{{{}}}", many.join(", ")),
    };
    format!(
        "use reservation_conformance::ops::{names};\n\
         reservation_conformance::oracle::{function}(&harness, &[\n{ops}]).unwrap();"
    )
}

fn rust_version(v: VersionPick) -> String {
    match v {
        VersionPick::Fixed(n) => format!("VersionPick::Fixed({n})"),
        other => format!("VersionPick::{other:?}"),
    }
}

/// One operation as a Rust expression.
pub(crate) fn rust(op: &Op) -> String {
    match *op {
        Op::Reserve { owner, key, hold, ttl } => {
            format!("Op::Reserve {{ owner: {owner}, key: {key}, hold: {hold}, ttl: {ttl} }}")
        }
        Op::Confirm { owner, key, version } => {
            format!("Op::Confirm {{ owner: {owner}, key: {key}, version: {} }}", rust_version(version))
        }
        Op::Release { owner, key, version } => {
            let v = match version {
                ReleasePick::Any => "ReleasePick::Any".to_owned(),
                ReleasePick::At(v) => format!("ReleasePick::At({})", rust_version(v)),
            };
            format!("Op::Release {{ owner: {owner}, key: {key}, version: {v} }}")
        }
        Op::Abandon { owner, key, hold } => format!("Op::Abandon {{ owner: {owner}, key: {key}, hold: {hold} }}"),
        Op::Lookup { key } => format!("Op::Lookup {{ key: {key} }}"),
        Op::Clock(m) => match m {
            ClockMove::JustBeforeExpiry { key } => format!("Op::Clock(ClockMove::JustBeforeExpiry {{ key: {key} }})"),
            ClockMove::AtExpiry { key } => format!("Op::Clock(ClockMove::AtExpiry {{ key: {key} }})"),
            ClockMove::JustAfterExpiry { key } => format!("Op::Clock(ClockMove::JustAfterExpiry {{ key: {key} }})"),
            ClockMove::By(ms) => format!("Op::Clock(ClockMove::By({ms}))"),
        },
    }
}

/// One operation from raw, possibly invalid, parts, on a key in a chosen prior state: the input
/// of [`inputs`] and of a fuzz target.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct RawInput {
    /// The scope's aggregate type.
    pub scope_type: String,
    /// The scope's tenant id; `None` is `SYSTEM_TENANT`.
    pub scope_tenant: Option<String>,
    /// The scope's namespace (a valid one is given a unique prefix, for isolation).
    pub namespace: String,
    /// The owner's aggregate type.
    pub owner_type: String,
    /// The owner's tenant id; `None` is `SYSTEM_TENANT`.
    pub owner_tenant: Option<String>,
    /// The owner's aggregate id.
    pub owner_id: String,
    /// The key.
    pub key: String,
    /// The hold id.
    pub hold: String,
    /// The ttl of a reserve, in milliseconds.
    pub ttl_millis: u64,
    /// The version of a confirm or release (0 is `UNVERSIONED`).
    pub version: u64,
    /// The operation.
    pub op: RawOp,
    /// The key's state before the operation.
    pub prior: RawPrior,
}

/// The operation of a [`RawInput`].
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum RawOp {
    /// reserve.
    #[default]
    Reserve,
    /// confirm at the raw version.
    Confirm,
    /// release at the raw version.
    Release,
    /// release at ANY_VERSION.
    ReleaseAnyVersion,
    /// abandon.
    Abandon,
    /// lookup.
    Lookup,
}

/// The key's state before a [`RawInput`]'s operation.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum RawPrior {
    /// Free.
    #[default]
    Free,
    /// Pending and live, held by the input's owner (when the scope admits it) with its hold.
    PendingOwn,
    /// Pending and live, held by another owner.
    PendingOther,
    /// Pending, expired.
    PendingExpired,
    /// Confirmed to the input's owner (when the scope admits it) at the raw version.
    ConfirmedOwn,
    /// Confirmed to another owner.
    ConfirmedOther,
}

/// Runs one operation built from `input` on a fresh store, with the key first put in the chosen
/// prior state. An invalid part is a typed error from its constructor, or
/// [`reservation_store::StoreError::Invalid`] from the store (an owner the scope does not admit),
/// and changes nothing (the key is looked up before and after); a valid input behaves as the
/// specification says. Never panics on any input.
pub fn inputs(harness: &dyn DynHarness, input: &RawInput) -> Result<(), Failure> {
    let harness = &Erased::new(harness);
    let fail = |rule: Rule, problem: String| {
        let mut f = Failure::new("inputs", rule, problem);
        f.replay = Some(format!("reservation_conformance::oracle::inputs(&harness, &{input:#?}).unwrap();"));
        f
    };
    let ttl = Ttl::from_millis(input.ttl_millis);
    if input.ttl_millis == 0 && ttl != Err(InvalidArgument::TtlZero) {
        return Err(fail(Rule::D2, format!("Ttl::from_millis(0) returned {ttl:?}, not Err(TtlZero)")));
    }
    // A valid namespace gets a unique prefix when it fits, so that runs sharing a database never
    // see each other's keys.
    let namespace = match Namespace::new(&input.namespace) {
        Err(e) => Err(e),
        Ok(_) => {
            let unique = unique_namespace("rc-input");
            let joined = format!("{unique}.{}", input.namespace);
            Ok(if joined.len() <= MAX_NAME_LEN { Namespace::new(joined).unwrap_or(unique) } else { unique })
        }
    };
    let scope = namespace.and_then(|ns| {
        let tenant = input.scope_tenant.as_deref().map(Tenant::id).transpose()?.unwrap_or(Tenant::System);
        let ty = reservation_store::AggregateType::new(&input.scope_type)?;
        Ok(ReservationScope::new(ty, tenant, ns))
    });
    let owner = AggregateRef::parse(&input.owner_type, input.owner_tenant.as_deref(), &input.owner_id);
    let key = Key::new(&input.key);
    let hold = HoldId::new(&input.hold);
    let version = Version::from_u64(input.version);
    // Without a valid scope and key there is nothing to send: the constructor's typed error was
    // the answer.
    let (Ok(scope), Ok(key)) = (scope, key) else { return Ok(()) };

    let mut s = Session::new(harness, "inputs", None);
    let other_tenant = match &scope.tenant {
        Tenant::System => Tenant::id("rc-other-tenant").map_err(|e| fail(Rule::D6, format!("{e}")))?,
        t => t.clone(),
    };
    let other = AggregateRef::new(
        scope.aggregate_type.clone(),
        other_tenant,
        reservation_store::AggregateId::new("rc-other-owner").map_err(|e| fail(Rule::D6, format!("{e}")))?,
    );
    let own = match &owner {
        Ok(o) if scope.admits(o).is_ok() => o.clone(),
        _ => other.clone(),
    };
    let prior_hold =
        hold.clone().or_else(|_| HoldId::new("rc-prior-hold")).map_err(|e| fail(Rule::D6, format!("{e}")))?;
    let prior_ttl = Ttl::from_millis(10_000).map_err(|e| fail(Rule::D2, format!("{e}")))?;
    let prior_version = if version.is_unversioned() { Version::from_u64(1) } else { version };
    match input.prior {
        RawPrior::Free => s.lookup(&scope, &key)?,
        RawPrior::PendingOwn => drop(s.reserve(&scope, &key, &own, &prior_hold, prior_ttl)?),
        RawPrior::PendingOther => drop(s.reserve(&scope, &key, &other, &prior_hold, prior_ttl)?),
        RawPrior::PendingExpired => {
            s.reserve(&scope, &key, &other, &prior_hold, prior_ttl)?;
            s.advance(prior_ttl.as_millis());
        }
        RawPrior::ConfirmedOwn => drop(s.confirm(&scope, &key, &own, prior_version)?),
        RawPrior::ConfirmedOther => drop(s.confirm(&scope, &key, &other, prior_version)?),
    }
    let operation = match (input.op, &owner, &hold, ttl) {
        (RawOp::Lookup, ..) => None,
        (RawOp::Reserve, Ok(owner), Ok(hold), Ok(ttl)) => Some(Operation::Reserve { owner, hold, ttl }),
        (RawOp::Confirm, Ok(owner), ..) => Some(Operation::Confirm { owner, version }),
        (RawOp::Release, Ok(owner), ..) => Some(Operation::Release { owner, version: ReleaseVersion::At(version) }),
        (RawOp::ReleaseAnyVersion, Ok(owner), ..) => Some(Operation::Release { owner, version: ReleaseVersion::Any }),
        (RawOp::Abandon, Ok(owner), Ok(hold), _) => Some(Operation::Abandon { owner, hold }),
        // An invalid owner, hold or ttl: its constructor's typed error was the answer.
        _ => None,
    };
    let result = match operation {
        Some(operation) => s.execute(&scope, &key, operation).map(drop),
        None => s.lookup(&scope, &key),
    };
    result.and_then(|()| s.lookup(&scope, &key)).map_err(|mut f| {
        f.replay = Some(format!("reservation_conformance::oracle::inputs(&harness, &{input:#?}).unwrap();"));
        f
    })
}
