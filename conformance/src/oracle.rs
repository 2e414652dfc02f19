//! The oracle: runs operation scripts and raw inputs on a store and on the specification side by
//! side. The differential check and fuzz targets drive it.
//!
//! [`ops()`] runs a script of [`Op`]s on a fresh store, comparing every outcome and, after every
//! step, the lookup of every key; [`inputs`] runs one operation built from raw strings and numbers,
//! checking that every invalid one is a typed error that changes nothing.

use std::fmt::Write as _;

use reservation_store::rules::{Rule, RuleSet};
use reservation_store::{
    AggregateRef, HoldId, InvalidArgument, Key, MAX_NAME_LEN, Namespace, Operation, ReleaseVersion, ReservationScope,
    Tenant, Ttl, Version,
};

use crate::failure::Failure;
use crate::harness::{Harness, unique_namespace};
use crate::ops::{self, ClockMove, Op, ReleasePick, VersionPick};
use crate::session::Session;

/// The aggregate type of every scope and owner of a script.
pub(crate) const SCRIPT_TYPE: &str = "rc-user";

/// The names a script's indices stand for: owners, keys and holds that differ in one field or
/// one byte, so that a store comparing loosely fails.
#[derive(Clone, Debug)]
pub(crate) struct Domain {
    /// Key slots: `(scope, key)`. Slots 0–2 share a `SYSTEM_TENANT` scope and differ only in
    /// case or a trailing space; slot 3 is key `"k"` in the tenant scope `acme` of the same
    /// namespace.
    pub slots: [(ReservationScope, Key); 4],
    /// Owners: `acme/alice`, `acme/bob`, and `globex/alice` (the first's id in another tenant,
    /// which the tenant scope of slot 3 refuses: rule D6).
    pub owners: [AggregateRef; 3],
    /// Holds: `"h1"`, `"H1"`, `"h1 "`.
    pub holds: [HoldId; 3],
}

impl Domain {
    /// The domain of a script, in a namespace of its own.
    pub fn new(namespace: Namespace) -> Self {
        let ty = || reservation_store::AggregateType::new(SCRIPT_TYPE).expect("a valid constant");
        let system = ReservationScope::new(ty(), Tenant::System, namespace.clone());
        let acme = ReservationScope::new(ty(), Tenant::id("acme").expect("a valid constant"), namespace);
        let key = |k: &str| Key::new(k).expect("a valid constant");
        let owner = |t: &str, id: &str| AggregateRef::parse(SCRIPT_TYPE, Some(t), id).expect("a valid constant");
        let hold = |h: &str| HoldId::new(h).expect("a valid constant");
        Domain {
            slots: [(system.clone(), key("k")), (system.clone(), key("K")), (system, key("k ")), (acme, key("k"))],
            owners: [owner("acme", "alice"), owner("acme", "bob"), owner("globex", "alice")],
            holds: [hold("h1"), hold("H1"), hold("h1 ")],
        }
    }

    fn slot(&self, raw: u8) -> &(ReservationScope, Key) {
        &self.slots[ops::index(raw, self.slots.len())]
    }

    fn owner(&self, raw: u8) -> &AggregateRef {
        &self.owners[ops::index(raw, self.owners.len())]
    }

    fn hold(&self, raw: u8) -> &HoldId {
        &self.holds[ops::index(raw, self.holds.len())]
    }
}

/// Runs `script` on a fresh store of `harness` and on the specification, comparing every outcome
/// and the lookup of every key after every step; returns the rules the specification reported.
///
/// Indices name owners, keys and holds that differ in one field or one byte, so that a store
/// comparing loosely fails: owners `acme/alice`, `acme/bob` and `globex/alice`; keys `k`, `K` and
/// `k ` in a `SYSTEM_TENANT` scope and `k` in tenant `acme`'s; holds `h1`, `H1` and `h1 `,
/// every scope of type `rc-user` in a namespace of the run's own. Versions and clock moves are resolved
/// against the specification's state of the key. A reserve with a zero ttl is the constructor's
/// [`InvalidArgument::TtlZero`] (rule D2) and reaches no store. A failure carries the transcript
/// and the script as Rust, to replay it.
pub fn ops<H: Harness>(harness: &H, script: &[Op]) -> Result<RuleSet, Failure> {
    match run(harness, script, false) {
        Ok(rules) => Ok(rules),
        Err(quiet) => {
            // Run again with the transcript on; a store that does not fail twice is flaky.
            let mut failure = match run(harness, script, true) {
                Err(loud) => loud,
                Ok(_) => {
                    let mut f = quiet;
                    f.problem.push_str(" (a second run of the same script passed: the store is not deterministic)");
                    f
                }
            };
            failure.replay = Some(replay(script));
            Err(failure)
        }
    }
}

fn run<H: Harness>(harness: &H, script: &[Op], record: bool) -> Result<RuleSet, Failure> {
    let d = Domain::new(unique_namespace("rc-script"));
    let mut s = Session::new(harness, "differential", None);
    s.set_recording(record);
    for op in script {
        apply(&mut s, &d, *op)?;
    }
    Ok(s.reached())
}

fn confirmed_version<H: Harness>(s: &Session<'_, H>, slot: &(ReservationScope, Key)) -> Option<Version> {
    s.state(&slot.0, &slot.1).and_then(|r| r.as_confirmed()).map(|c| c.version)
}

fn apply<H: Harness>(s: &mut Session<'_, H>, d: &Domain, op: Op) -> Result<(), Failure> {
    // The script's indices and relative picks resolve to one `Operation`, which the session
    // decides through `spec::apply`: the script has no dispatcher of its own.
    let (key, operation) = match op {
        Op::Reserve { owner, key, hold, ttl } => match Ttl::from_millis(u64::from(ttl)) {
            Ok(ttl) => (key, Operation::Reserve { owner: d.owner(owner), hold: d.hold(hold), ttl }),
            Err(e) => {
                let (_, key) = d.slot(key);
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
            (key, Operation::Confirm { owner: d.owner(owner), version })
        }
        Op::Release { owner, key, version } => {
            let version = version.resolve(confirmed_version(s, d.slot(key)));
            (key, Operation::Release { owner: d.owner(owner), version })
        }
        Op::Abandon { owner, key, hold } => (key, Operation::Abandon { owner: d.owner(owner), hold: d.hold(hold) }),
        Op::Lookup { key } => {
            let (scope, key) = d.slot(key);
            return s.lookup(scope, key);
        }
        Op::Clock(m) => {
            let expires = m.key().and_then(|k| {
                let (scope, key) = d.slot(k);
                s.state(scope, key).and_then(|r| r.as_pending()).map(|p| p.expires_at())
            });
            let at = m.resolve(s.now(), expires);
            s.set_clock(at);
            return s.check_lookups();
        }
    };
    let (scope, key) = d.slot(key);
    s.execute(scope, key, operation).map(drop)
}

/// `script` as Rust, ready to paste into a test.
pub(crate) fn replay(script: &[Op]) -> String {
    let mut out = String::from(
        "use reservation_conformance::ops::{ClockMove, Op, ReleasePick, VersionPick};\n\
         reservation_conformance::oracle::ops(&harness, &[\n",
    );
    for op in script {
        let _ = writeln!(out, "    {},", rust(op));
    }
    out.push_str("]).unwrap();");
    out
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
pub fn inputs<H: Harness>(harness: &H, input: &RawInput) -> Result<(), Failure> {
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
