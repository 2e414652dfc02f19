//! One check per rule id, and checks of scopes, owners, keys and durability.
//!
//! Each check runs a short script on a fresh store, in a namespace of its own, beside the
//! specification: every outcome is compared with the spec function's, and after every step every
//! key the check touched is looked up and compared too. The script's steps are also checked to
//! reach the rule the check is named after, so that a check cannot silently test something else.

use reservation_store::rules::Rule;
use reservation_store::{
    AggregateRef, HoldId, Instant, InvalidArgument, Key, MAX_HOLD_ID_LEN, MAX_KEY_LEN, MAX_NAME_LEN, Namespace,
    ReleaseVersion, ReservationScope, Tenant, Ttl, Version,
};

use crate::erased::{DynHarness, Erased};
use crate::failure::Failure;
use crate::harness::{Harness, Requirement, unique_namespace};
use crate::session::Session;
use crate::settings::Settings;

mod churn;

/// The ttl of the checks' reservations, in milliseconds.
const TTL_MS: u64 = 1_000;

/// The names the checks use: a tenant scope and a `SYSTEM_TENANT` scope of one namespace, and
/// owners of the scopes' aggregate type.
struct Fx {
    /// `rc-user / acme / <unique>`.
    scope: ReservationScope,
    /// `rc-user / SYSTEM_TENANT / <same namespace>`.
    system: ReservationScope,
    alice: AggregateRef,
    bob: AggregateRef,
    /// `alice`'s id in tenant `globex`.
    alice_globex: AggregateRef,
    k: Key,
    k2: Key,
    h1: HoldId,
    h2: HoldId,
    ttl: Ttl,
}

const TYPE: &str = "rc-user";

fn ns(label: &str) -> Namespace {
    unique_namespace(label)
}

fn key(k: &str) -> Key {
    Key::new(k).expect("the checks' keys are valid")
}

fn hold(h: &str) -> HoldId {
    HoldId::new(h).expect("the checks' holds are valid")
}

fn owner(tenant: Option<&str>, id: &str) -> AggregateRef {
    AggregateRef::parse(TYPE, tenant, id).expect("the checks' owners are valid")
}

fn ttl(ms: u64) -> Ttl {
    Ttl::from_millis(ms).expect("the checks' ttls are not zero")
}

fn v(n: u64) -> Version {
    Version::from_u64(n)
}

fn at(n: u64) -> ReleaseVersion {
    ReleaseVersion::At(Version::from_u64(n))
}

impl Fx {
    fn new(label: &str) -> Self {
        let namespace = ns(label);
        let ty = || reservation_store::AggregateType::new(TYPE).expect("valid");
        Fx {
            scope: ReservationScope::new(ty(), Tenant::id("acme").expect("valid"), namespace.clone()),
            system: ReservationScope::new(ty(), Tenant::System, namespace),
            alice: owner(Some("acme"), "alice"),
            bob: owner(Some("acme"), "bob"),
            alice_globex: owner(Some("globex"), "alice"),
            k: key("alice"),
            k2: key("bob"),
            h1: hold("attempt-1"),
            h2: hold("attempt-2"),
            ttl: ttl(TTL_MS),
        }
    }
}

/// Starts a check of `rule` named `name`.
fn start<'h, H: Harness>(h: &'h H, name: &str, rule: impl Into<Option<Rule>>) -> (Session<'h, H>, Fx) {
    (Session::new(h, name, rule.into()), Fx::new(name))
}

/// Runs one step and checks that the specification decided it by `rule`.
macro_rules! step {
    ($s:ident, $rule:expr, $call:ident($($arg:expr),* $(,)?)) => {{
        let got = $s.$call($($arg),*)?;
        $s.expect($rule, got)?;
    }};
}

/// R1: reserve of a free key takes it, pending, with the attempt's hold, until now+ttl; so does a
/// reserve after the key was released or abandoned.
pub fn r1(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "r1", Rule::R1);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R1, reserve(&f.scope, &f.k2, &f.bob, &f.h2, ttl(1)));
    step!(s, Rule::L2, release(&f.scope, &f.k, &f.alice, at(0)));
    s.advance(1);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.bob, &f.h2, f.ttl));
    step!(s, Rule::A2, abandon(&f.scope, &f.k, &f.bob, &f.h2));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, ttl(7)));
    Ok(())
}

/// R2: reserve of a key whose pending reservation expired, anyone's, takes it afresh: the old
/// holds are dropped and the expiry is now+ttl.
pub fn r2(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "r2", Rule::R2);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R3, reserve(&f.scope, &f.k, &f.alice, &f.h2, f.ttl));
    s.advance(TTL_MS);
    step!(s, Rule::R2, reserve(&f.scope, &f.k, &f.bob, &f.h1, ttl(5)));
    s.advance(5);
    // The owner's own expired reservation: a fresh one, with only the new hold.
    step!(s, Rule::R2, reserve(&f.scope, &f.k, &f.bob, &f.h2, f.ttl));
    s.advance(TTL_MS + 1);
    step!(s, Rule::R2, reserve(&f.scope, &f.k, &f.alice, &f.h2, ttl(3)));
    step!(s, Rule::R4, reserve(&f.scope, &f.k, &f.alice, &f.h2, ttl(2)));
    Ok(())
}

/// R3: reserve with a new hold by the owner of a live pending reservation joins it: both holds,
/// and the later of the two expiries.
pub fn r3(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "r3", Rule::R3);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    s.advance(100);
    // A shorter ttl keeps the current expiry.
    step!(s, Rule::R3, reserve(&f.scope, &f.k, &f.alice, &f.h2, ttl(10)));
    // A longer one extends it.
    let h3 = hold("attempt-3");
    step!(s, Rule::R3, reserve(&f.scope, &f.k, &f.alice, &h3, f.ttl));
    s.advance(TTL_MS - 1);
    s.lookup(&f.scope, &f.k)?;
    let h4 = hold("attempt-4");
    step!(s, Rule::R3, reserve(&f.scope, &f.k, &f.alice, &h4, ttl(1)));
    Ok(())
}

/// R4: reserve again with a hold already held keeps the holds and the later expiry.
pub fn r4(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "r4", Rule::R4);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    s.advance(10);
    step!(s, Rule::R4, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R3, reserve(&f.scope, &f.k, &f.alice, &f.h2, ttl(1)));
    s.advance(10);
    step!(s, Rule::R4, reserve(&f.scope, &f.k, &f.alice, &f.h2, ttl(2)));
    step!(s, Rule::R4, reserve(&f.scope, &f.k, &f.alice, &f.h1, ttl(5_000)));
    // The hold was not added twice: one abandon of each frees the key.
    step!(s, Rule::A3, abandon(&f.scope, &f.k, &f.alice, &f.h1));
    step!(s, Rule::A2, abandon(&f.scope, &f.k, &f.alice, &f.h2));
    Ok(())
}

/// R5: reserve of a key another owner holds pending and live changes nothing, up to the last
/// live instant.
pub fn r5(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "r5", Rule::R5);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R5, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    s.advance(TTL_MS - 1);
    step!(s, Rule::R5, reserve(&f.scope, &f.k, &f.bob, &f.h2, ttl(5_000)));
    step!(s, Rule::R4, reserve(&f.scope, &f.k, &f.alice, &f.h1, ttl(1)));
    Ok(())
}

/// R6: reserve of a key the owner holds confirmed changes nothing: AlreadyConfirmed.
pub fn r6(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "r6", Rule::R6);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::C2, confirm(&f.scope, &f.k, &f.alice, v(1)));
    step!(s, Rule::R6, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    s.advance(TTL_MS * 10);
    step!(s, Rule::R6, reserve(&f.scope, &f.k, &f.alice, &f.h2, f.ttl));
    step!(s, Rule::C1, confirm(&f.scope, &f.k2, &f.alice, Version::UNVERSIONED));
    step!(s, Rule::R6, reserve(&f.scope, &f.k2, &f.alice, &f.h2, f.ttl));
    Ok(())
}

/// R7: reserve of a key another owner holds confirmed changes nothing: Conflict.
pub fn r7(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "r7", Rule::R7);
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(3)));
    step!(s, Rule::R7, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    s.advance(TTL_MS * 10);
    step!(s, Rule::R7, reserve(&f.scope, &f.k, &f.bob, &f.h2, f.ttl));
    Ok(())
}

/// C1: confirm of a free key takes it confirmed at the version, UNVERSIONED included.
pub fn c1(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "c1", Rule::C1);
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(4)));
    step!(s, Rule::C1, confirm(&f.scope, &f.k2, &f.bob, Version::UNVERSIONED));
    step!(s, Rule::L4, release(&f.scope, &f.k, &f.alice, at(4)));
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.bob, v(1)));
    Ok(())
}

/// C2: confirm of the owner's live pending reservation confirms it and clears its holds.
pub fn c2(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "c2", Rule::C2);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R3, reserve(&f.scope, &f.k, &f.alice, &f.h2, f.ttl));
    s.advance(TTL_MS - 1);
    step!(s, Rule::C2, confirm(&f.scope, &f.k, &f.alice, v(2)));
    // The holds are gone: abandoning one is refused, the key stays confirmed.
    step!(s, Rule::A6, abandon(&f.scope, &f.k, &f.alice, &f.h1));
    s.advance(TTL_MS * 10);
    s.lookup(&f.scope, &f.k)?;
    Ok(())
}

/// C3: confirm of the owner's expired pending reservation still confirms it.
pub fn c3(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "c3", Rule::C3);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    s.advance(TTL_MS);
    step!(s, Rule::C3, confirm(&f.scope, &f.k, &f.alice, v(1)));
    step!(s, Rule::R7, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    Ok(())
}

/// C4: confirm of a key held only by another owner's expired pending reservation takes it.
pub fn c4(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "c4", Rule::C4);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    s.advance(TTL_MS);
    step!(s, Rule::C4, confirm(&f.scope, &f.k, &f.alice, v(1)));
    step!(s, Rule::A5, abandon(&f.scope, &f.k, &f.bob, &f.h1));
    Ok(())
}

/// C5: confirm of a key another owner holds pending and live changes nothing, up to the last
/// live instant.
pub fn c5(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "c5", Rule::C5);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    step!(s, Rule::C5, confirm(&f.scope, &f.k, &f.alice, v(1)));
    s.advance(TTL_MS - 1);
    step!(s, Rule::C5, confirm(&f.scope, &f.k, &f.alice, v(9)));
    Ok(())
}

/// C6: confirm by the owner at a greater version raises the version (UNVERSIONED below v1).
pub fn c6(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "c6", Rule::C6);
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, Version::UNVERSIONED));
    step!(s, Rule::C6, confirm(&f.scope, &f.k, &f.alice, v(1)));
    step!(s, Rule::C6, confirm(&f.scope, &f.k, &f.alice, v(2)));
    step!(s, Rule::C6, confirm(&f.scope, &f.k, &f.alice, v(10)));
    step!(s, Rule::L5, release(&f.scope, &f.k, &f.alice, at(9)));
    Ok(())
}

/// C7: confirm by the owner at the confirmed version or below changes nothing: AlreadyConfirmed.
pub fn c7(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "c7", Rule::C7);
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(5)));
    step!(s, Rule::C7, confirm(&f.scope, &f.k, &f.alice, v(5)));
    step!(s, Rule::C7, confirm(&f.scope, &f.k, &f.alice, v(4)));
    step!(s, Rule::C7, confirm(&f.scope, &f.k, &f.alice, Version::UNVERSIONED));
    step!(s, Rule::L5, release(&f.scope, &f.k, &f.alice, at(4)));
    step!(s, Rule::C1, confirm(&f.scope, &f.k2, &f.alice, Version::UNVERSIONED));
    step!(s, Rule::C7, confirm(&f.scope, &f.k2, &f.alice, Version::UNVERSIONED));
    Ok(())
}

/// C8: confirm of a key another owner holds confirmed changes nothing: Conflict.
pub fn c8(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "c8", Rule::C8);
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(2)));
    step!(s, Rule::C8, confirm(&f.scope, &f.k, &f.bob, v(3)));
    step!(s, Rule::C8, confirm(&f.scope, &f.k, &f.bob, v(1)));
    step!(s, Rule::C8, confirm(&f.scope, &f.k, &f.bob, v(2)));
    Ok(())
}

/// L1: release of a free key, or of an expired pending reservation (own or not), is NotHeld.
pub fn l1(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "l1", Rule::L1);
    step!(s, Rule::L1, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R1, reserve(&f.scope, &f.k2, &f.bob, &f.h1, f.ttl));
    s.advance(TTL_MS);
    step!(s, Rule::L1, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
    step!(s, Rule::L1, release(&f.scope, &f.k2, &f.alice, at(1)));
    step!(s, Rule::R1, reserve(&f.scope, &f.k2, &f.alice, &f.h2, f.ttl));
    Ok(())
}

/// L2: release by the owner of a live pending reservation frees it, whatever its holds and the
/// version.
pub fn l2(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "l2", Rule::L2);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R3, reserve(&f.scope, &f.k, &f.alice, &f.h2, f.ttl));
    step!(s, Rule::L2, release(&f.scope, &f.k, &f.alice, at(7)));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    s.advance(TTL_MS - 1);
    step!(s, Rule::L2, release(&f.scope, &f.k, &f.bob, ReleaseVersion::Any));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::L2, release(&f.scope, &f.k, &f.alice, at(0)));
    Ok(())
}

/// L3: release of a key another owner holds pending and live is NotHeld and changes nothing.
pub fn l3(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "l3", Rule::L3);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    step!(s, Rule::L3, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
    s.advance(TTL_MS - 1);
    step!(s, Rule::L3, release(&f.scope, &f.k, &f.alice, at(3)));
    Ok(())
}

/// L4: release by the owner at ANY_VERSION, or at or above the confirmed version, frees the key.
pub fn l4(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "l4", Rule::L4);
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(2)));
    step!(s, Rule::L4, release(&f.scope, &f.k, &f.alice, at(2)));
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(2)));
    step!(s, Rule::L4, release(&f.scope, &f.k, &f.alice, at(3)));
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(8)));
    step!(s, Rule::L4, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, Version::UNVERSIONED));
    step!(s, Rule::L4, release(&f.scope, &f.k, &f.alice, at(0)));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    Ok(())
}

/// L5: release by the owner below the confirmed version keeps the key: Kept.
pub fn l5(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "l5", Rule::L5);
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(3)));
    step!(s, Rule::L5, release(&f.scope, &f.k, &f.alice, at(2)));
    step!(s, Rule::L5, release(&f.scope, &f.k, &f.alice, at(0)));
    step!(s, Rule::R7, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    Ok(())
}

/// L6: release of a key another owner holds confirmed is NotHeld and changes nothing.
pub fn l6(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "l6", Rule::L6);
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(3)));
    step!(s, Rule::L6, release(&f.scope, &f.k, &f.bob, ReleaseVersion::Any));
    step!(s, Rule::L6, release(&f.scope, &f.k, &f.bob, at(3)));
    step!(s, Rule::L6, release(&f.scope, &f.k, &f.bob, at(u64::MAX)));
    Ok(())
}

/// A1: abandon of a free key, or of an expired pending reservation, is NotHeld.
pub fn a1(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "a1", Rule::A1);
    step!(s, Rule::A1, abandon(&f.scope, &f.k, &f.alice, &f.h1));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    s.advance(TTL_MS);
    step!(s, Rule::A1, abandon(&f.scope, &f.k, &f.alice, &f.h1));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.bob, &f.h2, f.ttl));
    Ok(())
}

/// A2: abandon of the owner's last hold of a live pending reservation frees the key.
pub fn a2(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "a2", Rule::A2);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    s.advance(TTL_MS - 1);
    step!(s, Rule::A2, abandon(&f.scope, &f.k, &f.alice, &f.h1));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    Ok(())
}

/// A3: abandon of one of several holds removes only that hold and keeps the expiry.
pub fn a3(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "a3", Rule::A3);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    s.advance(10);
    step!(s, Rule::R3, reserve(&f.scope, &f.k, &f.alice, &f.h2, f.ttl));
    let h3 = hold("attempt-3");
    step!(s, Rule::R3, reserve(&f.scope, &f.k, &f.alice, &h3, ttl(1)));
    step!(s, Rule::A3, abandon(&f.scope, &f.k, &f.alice, &f.h2));
    step!(s, Rule::A3, abandon(&f.scope, &f.k, &f.alice, &f.h1));
    step!(s, Rule::A4, abandon(&f.scope, &f.k, &f.alice, &f.h1));
    step!(s, Rule::A2, abandon(&f.scope, &f.k, &f.alice, &h3));
    Ok(())
}

/// A4: abandon of a hold the owner's live pending reservation does not have changes nothing.
pub fn a4(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "a4", Rule::A4);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::A4, abandon(&f.scope, &f.k, &f.alice, &f.h2));
    step!(s, Rule::A4, abandon(&f.scope, &f.k, &f.alice, &hold("ATTEMPT-1")));
    s.advance(TTL_MS - 1);
    step!(s, Rule::A4, abandon(&f.scope, &f.k, &f.alice, &hold("attempt-1 ")));
    Ok(())
}

/// A5: abandon of another owner's reservation, pending and live or confirmed, is NotHeld, even
/// with the same hold id.
pub fn a5(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "a5", Rule::A5);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    step!(s, Rule::A5, abandon(&f.scope, &f.k, &f.alice, &f.h1));
    step!(s, Rule::C1, confirm(&f.scope, &f.k2, &f.bob, v(1)));
    step!(s, Rule::A5, abandon(&f.scope, &f.k2, &f.alice, &f.h1));
    Ok(())
}

/// A6: abandon of a key the owner holds confirmed changes nothing: AlreadyConfirmed.
pub fn a6(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "a6", Rule::A6);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::C2, confirm(&f.scope, &f.k, &f.alice, v(1)));
    step!(s, Rule::A6, abandon(&f.scope, &f.k, &f.alice, &f.h1));
    step!(s, Rule::A6, abandon(&f.scope, &f.k, &f.alice, &f.h2));
    Ok(())
}

/// D1: a pending reservation reserved at t for ttl is live on [t, t+ttl): live at t+ttl-1,
/// expired at t+ttl; now+ttl saturates at the clock's last instant.
pub fn d1(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "d1", Rule::D1);
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    s.advance(TTL_MS - 1);
    step!(s, Rule::R5, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    s.advance(1);
    step!(s, Rule::R2, reserve(&f.scope, &f.k, &f.bob, &f.h1, ttl(1)));
    step!(s, Rule::R5, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    s.advance(1);
    step!(s, Rule::C4, confirm(&f.scope, &f.k, &f.alice, v(1)));
    // Saturation: a ttl past the clock's end, and a clock near its end.
    step!(s, Rule::R1, reserve(&f.scope, &f.k2, &f.alice, &f.h1, ttl(u64::MAX)));
    step!(s, Rule::R4, reserve(&f.scope, &f.k2, &f.alice, &f.h1, ttl(u64::MAX - 1)));
    let far = key("far");
    s.set_clock(Instant::MAX.saturating_sub_millis(10));
    step!(s, Rule::R1, reserve(&f.scope, &far, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R5, reserve(&f.scope, &far, &f.bob, &f.h1, f.ttl));
    s.set_clock(Instant::MAX.saturating_sub_millis(1));
    s.lookup(&f.scope, &far)?;
    Ok(())
}

/// D2: a ttl of zero is an invalid argument; a ttl of one millisecond is live for exactly one.
pub fn d2(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "d2", Rule::D2);
    for (what, got) in [
        ("Ttl::from_millis(0)", Ttl::from_millis(0)),
        ("Ttl::from_duration(999µs)", Ttl::from_duration(std::time::Duration::from_micros(999))),
    ] {
        if got != Err(InvalidArgument::TtlZero) {
            return Err(s.fail(Some(Rule::D2), format!("{what} returned {got:?}, not Err(TtlZero)")));
        }
    }
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, ttl(1)));
    step!(s, Rule::R5, reserve(&f.scope, &f.k, &f.bob, &f.h1, ttl(1)));
    s.advance(1);
    step!(s, Rule::R2, reserve(&f.scope, &f.k, &f.bob, &f.h1, ttl(1)));
    Ok(())
}

/// D3: UNVERSIONED sorts below every stream version, stream versions start at 1, and versions
/// compare as unsigned 64-bit numbers all the way up.
pub fn d3(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "d3", Rule::D3);
    if Version::stream(0) != Err(InvalidArgument::ZeroStreamVersion) {
        return Err(s.fail(Some(Rule::D3), "Version::stream(0) is not Err(ZeroStreamVersion)".into()));
    }
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, Version::UNVERSIONED));
    step!(s, Rule::C6, confirm(&f.scope, &f.k, &f.alice, v(1)));
    step!(s, Rule::L5, release(&f.scope, &f.k, &f.alice, at(0)));
    step!(s, Rule::C6, confirm(&f.scope, &f.k, &f.alice, v(i64::MAX as u64)));
    step!(s, Rule::C6, confirm(&f.scope, &f.k, &f.alice, v(1 << 63)));
    step!(s, Rule::C7, confirm(&f.scope, &f.k, &f.alice, v(i64::MAX as u64)));
    step!(s, Rule::L5, release(&f.scope, &f.k, &f.alice, at(i64::MAX as u64)));
    step!(s, Rule::C6, confirm(&f.scope, &f.k, &f.alice, v(u64::MAX)));
    step!(s, Rule::C7, confirm(&f.scope, &f.k, &f.alice, v(u64::MAX)));
    step!(s, Rule::L4, release(&f.scope, &f.k, &f.alice, at(u64::MAX)));
    Ok(())
}

/// D4: ANY_VERSION exists only for release, where it frees the owner's reservation whatever its
/// version. (That a confirm cannot name it is checked by the compiler: confirm takes a `Version`.)
pub fn d4(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "d4", Rule::D4);
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(u64::MAX)));
    step!(s, Rule::L6, release(&f.scope, &f.k, &f.bob, ReleaseVersion::Any));
    step!(s, Rule::L4, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::L2, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
    step!(s, Rule::L1, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
    Ok(())
}

/// D5: owners are compared on every field, keys and hold ids as exact bytes: no case folding,
/// no trimming, no Unicode normalisation.
pub fn d5(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "d5", Rule::D5);
    let keys =
        ["alice", "Alice", "alice ", " alice", "ALICE", "e\u{301}", "\u{e9}", "alice\u{200b}", " ", "\u{0}", "%", "_"];
    for (i, k) in keys.iter().enumerate() {
        let o = owner(Some("acme"), &format!("owner-{i}"));
        step!(s, Rule::R1, reserve(&f.scope, &key(k), &o, &f.h1, f.ttl));
    }
    step!(s, Rule::C1, confirm(&f.scope, &key("bob"), &f.alice, v(1)));
    for id in ["Alice", "alice ", "ALICE"] {
        step!(s, Rule::R7, reserve(&f.scope, &key("bob"), &owner(Some("acme"), id), &f.h1, f.ttl));
    }
    let k3 = key("carol");
    step!(s, Rule::R1, reserve(&f.scope, &k3, &f.alice, &f.h1, f.ttl));
    for hd in ["Attempt-1", "attempt-1 ", "attempt-1\u{0}"] {
        step!(s, Rule::R3, reserve(&f.scope, &k3, &f.alice, &hold(hd), f.ttl));
    }
    step!(s, Rule::A3, abandon(&f.scope, &k3, &f.alice, &f.h1));
    // Holds that a store keeping them as one joined string would confuse.
    let k4 = key("dave");
    step!(s, Rule::R1, reserve(&f.scope, &k4, &f.alice, &hold("x,y"), f.ttl));
    for hd in ["x", "y", "x,", ",y", "[\"x\",\"y\"]"] {
        step!(s, Rule::A4, abandon(&f.scope, &k4, &f.alice, &hold(hd)));
    }
    step!(s, Rule::R3, reserve(&f.scope, &k4, &f.alice, &hold("x"), f.ttl));
    step!(s, Rule::R3, reserve(&f.scope, &k4, &f.alice, &hold("y"), f.ttl));
    step!(s, Rule::A3, abandon(&f.scope, &k4, &f.alice, &hold("x,y")));
    step!(s, Rule::A3, abandon(&f.scope, &k4, &f.alice, &hold("x")));
    step!(s, Rule::A2, abandon(&f.scope, &k4, &f.alice, &hold("y")));
    Ok(())
}

/// The prior states D6 and D7 put a key in before an operation.
fn prior_states<H: Harness>(s: &mut Session<'_, H>, f: &Fx, scope: &ReservationScope) -> Result<Vec<Key>, Failure> {
    let keys: Vec<Key> = ["free", "pending-own", "pending-other", "expired", "confirmed-own", "confirmed-other"]
        .into_iter()
        .map(key)
        .collect();
    let [_, pending_own, pending_other, expired, confirmed_own, confirmed_other] = keys.as_slice() else {
        return Ok(keys);
    };
    s.reserve(scope, expired, &f.alice, &f.h1, ttl(1))?;
    s.advance(1);
    s.reserve(scope, pending_own, &f.alice, &f.h1, f.ttl)?;
    s.reserve(scope, pending_other, &f.bob, &f.h1, f.ttl)?;
    s.confirm(scope, confirmed_own, &f.alice, v(2))?;
    s.confirm(scope, confirmed_other, &f.bob, v(2))?;
    Ok(keys)
}

/// D6: an invalid argument is a typed error, whatever the key's state, and changes nothing: an
/// owner of another aggregate type, an owner of another tenant in a tenant scope, and (at their
/// constructors) empty or over-long keys, hold ids and names, and a zero ttl.
pub fn d6(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "d6", Rule::D6);
    let constructors: [(&str, Result<(), InvalidArgument>, InvalidArgument); 7] = [
        ("Key::new(\"\")", Key::new("").map(drop), InvalidArgument::EmptyKey),
        (
            "Key::new(513 bytes)",
            Key::new("k".repeat(MAX_KEY_LEN + 1)).map(drop),
            InvalidArgument::KeyTooLong { len: MAX_KEY_LEN + 1, max: MAX_KEY_LEN },
        ),
        ("HoldId::new(\"\")", HoldId::new("").map(drop), InvalidArgument::EmptyHoldId),
        (
            "HoldId::new(129 bytes)",
            HoldId::new("h".repeat(MAX_HOLD_ID_LEN + 1)).map(drop),
            InvalidArgument::HoldIdTooLong { len: MAX_HOLD_ID_LEN + 1, max: MAX_HOLD_ID_LEN },
        ),
        ("Namespace::new(\"\")", Namespace::new("").map(drop), InvalidArgument::EmptyNamespace),
        (
            "AggregateRef::parse(\"\", ..)",
            AggregateRef::parse("", None, "x").map(drop),
            InvalidArgument::EmptyAggregateType,
        ),
        ("Ttl::from_millis(0)", Ttl::from_millis(0).map(drop), InvalidArgument::TtlZero),
    ];
    for (what, got, want) in constructors {
        if got != Err(want) {
            return Err(s.fail(Some(Rule::D6), format!("{what} returned {got:?}, not Err({want:?})")));
        }
    }
    let other_type = AggregateRef::parse("rc-order", Some("acme"), "alice").expect("valid");
    let both = AggregateRef::parse("rc-order", Some("globex"), "alice").expect("valid");
    // In the tenant scope: the wrong type, the wrong tenant, both. In the system scope: the wrong
    // type only (a system scope admits every tenant).
    let cases = [(&f.scope, &other_type), (&f.scope, &f.alice_globex), (&f.scope, &both), (&f.system, &other_type)];
    for scope in [&f.scope, &f.system] {
        let keys = prior_states(&mut s, &f, scope)?;
        for (case_scope, bad) in cases.iter().filter(|(cs, _)| *cs == scope) {
            for k in &keys {
                step!(s, Rule::D6, reserve(case_scope, k, bad, &f.h1, f.ttl));
                step!(s, Rule::D6, confirm(case_scope, k, bad, v(3)));
                step!(s, Rule::D6, release(case_scope, k, bad, ReleaseVersion::Any));
                step!(s, Rule::D6, release(case_scope, k, bad, at(3)));
                step!(s, Rule::D6, abandon(case_scope, k, bad, &f.h1));
            }
        }
    }
    Ok(())
}

/// D6, through the protocol's requests: every argument of SPEC.md's table of errors, each
/// alone, in every state a key can be in (free; pending, the caller's or another owner's, live
/// or expired; confirmed, the caller's or another's), is answered with the error of its name and
/// changes nothing; every text field at its maximum length, in one-byte and in two-byte
/// characters, acts as the specification says. Each field empty, one byte over its maximum, over
/// it in two-byte characters, and not valid Unicode (a lone surrogate); a zero TTL (D2); numbers
/// that are negative, over `2^64-1`, fractional, strings or null (D8); `"ANY"` given to confirm
/// and `"any"` to release (D4); owners the scope does not admit (D6). A failure names the rule
/// and the field.
///
/// Through the driver ([`Harness::send_raw`]) every request is sent as written; a harness that
/// speaks only the typed API runs those whose values its types can hold: the owners a scope does
/// not admit and the fields at their maximum.
pub fn arguments(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    crate::arguments::check(h)
}

/// D7: an expired pending reservation behaves exactly like a free key, for every operation and
/// for lookup.
pub fn d7(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "d7", Rule::D7);
    let expire = |s: &mut Session<'_, Erased<'_>>, k: &Key, o: &AggregateRef| -> Result<(), Failure> {
        s.reserve(&f.scope, k, o, &f.h1, ttl(1))?;
        s.reserve(&f.scope, k, o, &f.h2, ttl(1))?;
        s.advance(1);
        s.lookup(&f.scope, k)
    };
    for o in [&f.alice, &f.bob] {
        expire(&mut s, &f.k, o)?;
        step!(s, Rule::L1, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
        expire(&mut s, &f.k, o)?;
        step!(s, Rule::A1, abandon(&f.scope, &f.k, &f.alice, &f.h1));
        expire(&mut s, &f.k, o)?;
        step!(s, Rule::A1, abandon(&f.scope, &f.k, &f.alice, &f.h2));
        expire(&mut s, &f.k, o)?;
        step!(s, Rule::R2, reserve(&f.scope, &f.k, &f.alice, &f.h2, f.ttl));
        step!(s, Rule::L2, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
        expire(&mut s, &f.k, o)?;
        let rule = if o == &f.alice { Rule::C3 } else { Rule::C4 };
        step!(s, rule, confirm(&f.scope, &f.k, &f.alice, v(1)));
        step!(s, Rule::L4, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
    }
    Ok(())
}

/// Scopes: a key is independent across aggregate types of one tenant and namespace.
pub fn scope_aggregate_type(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "scope_aggregate_type", Rule::S1);
    let orders = ReservationScope::new(
        reservation_store::AggregateType::new("rc-order").expect("valid"),
        f.scope.tenant.clone(),
        f.scope.namespace.clone(),
    );
    let order = AggregateRef::parse("rc-order", Some("acme"), "alice").expect("valid");
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R1, reserve(&orders, &f.k, &order, &f.h1, f.ttl));
    step!(s, Rule::C2, confirm(&orders, &f.k, &order, v(1)));
    step!(s, Rule::L2, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.bob, v(1)));
    step!(s, Rule::L4, release(&orders, &f.k, &order, ReleaseVersion::Any));
    Ok(())
}

/// Scopes: a key is independent across tenants of one aggregate type and namespace.
pub fn scope_tenant(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "scope_tenant", Rule::S1);
    let globex = ReservationScope { tenant: Tenant::id("globex").expect("valid"), ..f.scope.clone() };
    let bob_globex = owner(Some("globex"), "bob");
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(1)));
    step!(s, Rule::R1, reserve(&globex, &f.k, &bob_globex, &f.h1, f.ttl));
    step!(s, Rule::C2, confirm(&globex, &f.k, &bob_globex, v(1)));
    step!(s, Rule::L4, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.bob, v(2)));
    // Parts that a store joining type, tenant and namespace with a separator would confuse.
    let ns = f.scope.namespace.as_str();
    for sep in ["/", ":", "|", ".", " ", "\u{0}"] {
        let part =
            |scope_ty: &str, tenant: &str, namespace: &str| -> Result<(ReservationScope, AggregateRef), Failure> {
                let scope = ReservationScope::parse(scope_ty, Some(tenant), namespace)
                    .map_err(|e| s.fail(None, format!("a scope of the check is invalid: {e}")))?;
                let o = AggregateRef::parse(scope_ty, Some(tenant), "alice")
                    .map_err(|e| s.fail(None, format!("an owner of the check is invalid: {e}")))?;
                Ok((scope, o))
            };
        let pairs = [
            part(TYPE, "t", &format!("{ns}{sep}x"))?,
            part(TYPE, &format!("t{sep}{ns}"), "x")?,
            part(&format!("{TYPE}{sep}t"), ns, "x")?,
            part(TYPE, &format!("t{sep}{ns}{sep}x"), "k")?,
        ];
        for (scope, o) in &pairs {
            step!(s, Rule::R1, reserve(scope, &f.k, o, &f.h1, f.ttl));
        }
        step!(s, Rule::R1, reserve(&pairs[0].0, &key(&format!("x{sep}alice")), &pairs[0].1, &f.h1, f.ttl));
    }
    Ok(())
}

/// Scopes: a key is independent across namespaces, even when a namespace and a key could be
/// joined into the same string with a separator.
pub fn scope_namespace(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "scope_namespace", Rule::S1);
    let other = ReservationScope { namespace: ns("scope_namespace_other"), ..f.scope.clone() };
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(1)));
    step!(s, Rule::C1, confirm(&other, &f.k, &f.bob, v(1)));
    step!(s, Rule::L4, release(&f.scope, &f.k, &f.alice, ReleaseVersion::Any));
    for sep in ["/", ":", "|", ".", " ", "\t", "\\"] {
        let base = f.scope.namespace.as_str();
        let longer = Namespace::new(format!("{base}{sep}a")).expect("valid");
        let wide = ReservationScope { namespace: longer, ..f.scope.clone() };
        step!(s, Rule::R1, reserve(&wide, &key("b"), &f.alice, &f.h1, f.ttl));
        step!(s, Rule::R1, reserve(&f.scope, &key(&format!("a{sep}b")), &f.bob, &f.h1, f.ttl));
    }
    Ok(())
}

/// Scopes: a `SYSTEM_TENANT` scope is one space for all the type's tenants, and independent of
/// each tenant's own scope of the same namespace.
pub fn scope_system_tenant(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "scope_system_tenant", Rule::S1);
    let carol_globex = owner(Some("globex"), "carol");
    let sys_owner = owner(None, "root");
    step!(s, Rule::R1, reserve(&f.system, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R5, reserve(&f.system, &f.k, &carol_globex, &f.h1, f.ttl));
    step!(s, Rule::R5, reserve(&f.system, &f.k, &sys_owner, &f.h1, f.ttl));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    step!(s, Rule::C2, confirm(&f.system, &f.k, &f.alice, v(1)));
    step!(s, Rule::C8, confirm(&f.system, &f.k, &carol_globex, v(2)));
    step!(s, Rule::C1, confirm(&f.system, &f.k2, &sys_owner, v(1)));
    step!(s, Rule::R7, reserve(&f.system, &f.k2, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::D6, reserve(&f.scope, &f.k2, &carol_globex, &f.h1, f.ttl));
    step!(s, Rule::D6, reserve(&f.scope, &f.k2, &sys_owner, &f.h1, f.ttl));
    // A tenant whose id spells the system tenant's name is still just a tenant.
    let k3 = key("named");
    step!(s, Rule::R1, reserve(&f.system, &k3, &f.bob, &f.h1, f.ttl));
    for name in ["SYSTEM_TENANT", "SYSTEM", "system", "*", "-", "_", "null", "NULL"] {
        let named = owner(Some(name), "alice");
        let scope = ReservationScope { tenant: named.tenant.clone(), ..f.system.clone() };
        step!(s, Rule::R1, reserve(&scope, &k3, &named, &f.h1, f.ttl));
        step!(s, Rule::R5, reserve(&f.system, &k3, &named, &f.h1, f.ttl));
    }
    Ok(())
}

/// Owners: owners that differ only in their id are different owners for every operation.
pub fn owner_id(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "owner_id", Rule::D5);
    let twins = [owner(Some("acme"), "Alice"), owner(Some("acme"), "alice "), owner(Some("acme"), "alic")];
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::C1, confirm(&f.scope, &f.k2, &f.alice, v(2)));
    for t in &twins {
        step!(s, Rule::R5, reserve(&f.scope, &f.k, t, &f.h1, f.ttl));
        step!(s, Rule::C5, confirm(&f.scope, &f.k, t, v(1)));
        step!(s, Rule::L3, release(&f.scope, &f.k, t, ReleaseVersion::Any));
        step!(s, Rule::A5, abandon(&f.scope, &f.k, t, &f.h1));
        step!(s, Rule::R7, reserve(&f.scope, &f.k2, t, &f.h1, f.ttl));
        step!(s, Rule::C8, confirm(&f.scope, &f.k2, t, v(3)));
        step!(s, Rule::L6, release(&f.scope, &f.k2, t, ReleaseVersion::Any));
        step!(s, Rule::A5, abandon(&f.scope, &f.k2, t, &f.h1));
    }
    Ok(())
}

/// Owners: in a `SYSTEM_TENANT` scope, owners that differ only in their tenant (another
/// tenant's id, or `SYSTEM_TENANT` itself) are different owners for every operation.
pub fn owner_tenant(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "owner_tenant", Rule::D5);
    let twins = [
        f.alice_globex.clone(),
        owner(None, "alice"),
        owner(Some("Acme"), "alice"),
        owner(Some("SYSTEM_TENANT"), "alice"),
        owner(Some("acme/alice"), "alice"),
    ];
    step!(s, Rule::R1, reserve(&f.system, &f.k, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::C1, confirm(&f.system, &f.k2, &f.alice, v(2)));
    for t in &twins {
        step!(s, Rule::R5, reserve(&f.system, &f.k, t, &f.h1, f.ttl));
        step!(s, Rule::C5, confirm(&f.system, &f.k, t, v(1)));
        step!(s, Rule::L3, release(&f.system, &f.k, t, ReleaseVersion::Any));
        step!(s, Rule::A5, abandon(&f.system, &f.k, t, &f.h1));
        step!(s, Rule::R7, reserve(&f.system, &f.k2, t, &f.h1, f.ttl));
        step!(s, Rule::C8, confirm(&f.system, &f.k2, t, v(3)));
        step!(s, Rule::L6, release(&f.system, &f.k2, t, ReleaseVersion::Any));
        step!(s, Rule::A5, abandon(&f.system, &f.k2, t, &f.h1));
    }
    Ok(())
}

/// D7 at volume: thousands of keys, confirmed, pending and expired, and enough insertions after
/// the expiries to set off any sweeper; every key is then looked up. No answer may depend on
/// whether a sweeper has deleted a row yet, and a sweeper must never delete a live one.
pub fn volume(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "volume", Rule::D7);
    s.set_recording(false);
    s.set_lookup_all(false);
    const N: usize = 1_000;
    let keys = |prefix: &str| (0..N).map(|i| key(&format!("{prefix}-{i}"))).collect::<Vec<_>>();
    let (confirmed, live, short, late) = (keys("confirmed"), keys("live"), keys("short"), keys("late"));
    for i in 0..N {
        let o = if i % 2 == 0 { &f.alice } else { &f.bob };
        s.confirm(&f.scope, &confirmed[i], o, v(i as u64))?;
        s.reserve(&f.scope, &live[i], o, &f.h1, ttl(100 * TTL_MS))?;
        s.reserve(&f.scope, &short[i], o, &f.h1, ttl(1 + (i as u64 % 3)))?;
    }
    s.advance(2);
    for (i, k) in late.iter().enumerate() {
        s.reserve(&f.scope, k, &f.alice, &f.h2, f.ttl)?;
        if i % 250 == 0 {
            s.check_lookups()?;
        }
    }
    s.advance(1);
    for (i, k) in short.iter().enumerate().step_by(2) {
        s.reserve(&f.scope, k, if i % 4 == 0 { &f.bob } else { &f.alice }, &f.h2, f.ttl)?;
    }
    s.check_lookups()
}

/// A sweeper never takes a confirmed key, however long ago the key was pending: keys confirmed
/// from every kind of earlier state (the owner's live pending reservation, C2; its expired one,
/// C3; another owner's expired one, C4; a free key, C1), then the clock moved by days and
/// thousands of new keys reserved, enough to set off any sweeper; every confirmed key must still
/// be confirmed, and after a reopen too when the store is durable.
pub fn sweeper(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "sweeper", None);
    s.set_recording(false);
    s.set_lookup_all(false);
    const K: usize = 16;
    const DAYS_MS: u64 = 3 * 24 * 3_600_000;
    let keys = |prefix: &str| (0..K).map(|i| key(&format!("{prefix}-{i}"))).collect::<Vec<_>>();
    let (live, own_expired, other_expired, free) = (keys("live"), keys("own"), keys("other"), keys("free"));
    for i in 0..K {
        step!(s, Rule::R1, reserve(&f.scope, &own_expired[i], &f.alice, &f.h1, f.ttl));
        step!(s, Rule::R1, reserve(&f.scope, &other_expired[i], &f.bob, &f.h1, f.ttl));
    }
    s.advance(TTL_MS);
    for i in 0..K {
        step!(s, Rule::R1, reserve(&f.scope, &live[i], &f.alice, &f.h1, f.ttl));
        step!(s, Rule::C2, confirm(&f.scope, &live[i], &f.alice, v(1)));
        step!(s, Rule::C3, confirm(&f.scope, &own_expired[i], &f.alice, v(1)));
        step!(s, Rule::C4, confirm(&f.scope, &other_expired[i], &f.alice, v(1)));
        step!(s, Rule::C1, confirm(&f.scope, &free[i], &f.alice, v(1)));
    }
    s.advance(DAYS_MS);
    for i in 0..3_000 {
        s.reserve(&f.scope, &key(&format!("new-{i}")), &f.bob, &f.h2, ttl(1 + i as u64 % 5))?;
        if i % 500 == 499 {
            s.advance(10);
        }
    }
    s.check_lookups()?;
    if h.capabilities().durable {
        s.reopen()?;
    }
    Ok(())
}

/// D9: every field at its maximum length in UTF-8 bytes (multi-byte characters), stored and
/// compared exactly: key, hold id, aggregate type, tenant id, namespace and aggregate id; and
/// text compared as bytes, never normalised (`é` against `e` and a combining accent).
pub fn lengths(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "lengths", Rule::D9);
    let long_key = key(&"é".repeat(MAX_KEY_LEN / 2));
    let almost = key(&format!("{}x", "é".repeat(MAX_KEY_LEN / 2 - 1)));
    let long_hold = hold(&"ü".repeat(MAX_HOLD_ID_LEN / 2));
    let long_owner = owner(Some(&"t".repeat(MAX_NAME_LEN)), &"i".repeat(MAX_NAME_LEN));
    let long_scope = ReservationScope { tenant: long_owner.tenant.clone(), ..f.scope.clone() };
    step!(s, Rule::R1, reserve(&f.scope, &long_key, &f.alice, &long_hold, f.ttl));
    step!(s, Rule::R1, reserve(&f.scope, &almost, &f.bob, &long_hold, f.ttl));
    step!(s, Rule::R4, reserve(&f.scope, &long_key, &f.alice, &long_hold, f.ttl));
    step!(s, Rule::R1, reserve(&long_scope, &long_key, &long_owner, &long_hold, f.ttl));
    step!(s, Rule::C2, confirm(&long_scope, &long_key, &long_owner, v(1)));
    step!(s, Rule::A2, abandon(&f.scope, &long_key, &f.alice, &long_hold));
    // A 256-byte aggregate type and a 256-byte namespace (this check's own, padded).
    let crab = "🦀".repeat(MAX_NAME_LEN / 4);
    let mut padded = f.scope.namespace.as_str().to_owned();
    while padded.len() + 2 <= MAX_NAME_LEN {
        padded.push('ñ');
    }
    if padded.len() < MAX_NAME_LEN {
        padded.push('x');
    }
    let invalid = |e: InvalidArgument| s.fail(None, format!("a field at its maximum length was refused: {e}"));
    let namespace = Namespace::new(&padded).map_err(invalid)?;
    let ty = reservation_store::AggregateType::new(&crab).map_err(invalid)?;
    let crab_owner = AggregateRef::new(
        ty.clone(),
        long_owner.tenant.clone(),
        reservation_store::AggregateId::new(&crab).map_err(invalid)?,
    );
    let widest = ReservationScope::new(ty, long_owner.tenant.clone(), namespace);
    step!(s, Rule::R1, reserve(&widest, &long_key, &crab_owner, &long_hold, f.ttl));
    step!(s, Rule::R1, reserve(&widest, &almost, &crab_owner, &long_hold, f.ttl));
    step!(s, Rule::C2, confirm(&widest, &long_key, &crab_owner, v(u64::MAX)));
    // Two spellings of one letter are two keys.
    let composed = key("caf\u{e9}");
    let decomposed = key("cafe\u{301}");
    step!(s, Rule::R1, reserve(&f.scope, &composed, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R1, reserve(&f.scope, &decomposed, &f.bob, &f.h1, f.ttl));
    step!(s, Rule::C5, confirm(&f.scope, &decomposed, &f.alice, v(1)));
    step!(s, Rule::C2, confirm(&f.scope, &composed, &f.alice, v(1)));
    Ok(())
}

/// D8: versions are unsigned 64-bit integers compared as unsigned (a version above `2^63` is
/// greater than every one below it), and the clock ends at its last instant: an expiry saturates
/// there, and a reserve at the last instant writes a reservation that is expired at once.
pub fn d8(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "d8", Rule::D8);
    let high = 1u64 << 63;
    step!(s, Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(high + 1)));
    step!(s, Rule::C7, confirm(&f.scope, &f.k, &f.alice, v(high - 1)));
    step!(s, Rule::C7, confirm(&f.scope, &f.k, &f.alice, v(high)));
    step!(s, Rule::L5, release(&f.scope, &f.k, &f.alice, at(high - 1)));
    step!(s, Rule::L5, release(&f.scope, &f.k, &f.alice, at(1)));
    step!(s, Rule::C6, confirm(&f.scope, &f.k, &f.alice, v(u64::MAX)));
    step!(s, Rule::L5, release(&f.scope, &f.k, &f.alice, at(u64::MAX - 1)));
    step!(s, Rule::L4, release(&f.scope, &f.k, &f.alice, at(u64::MAX)));
    // The longest TTL saturates at the last instant.
    step!(s, Rule::R1, reserve(&f.scope, &f.k2, &f.bob, &f.h1, ttl(u64::MAX)));
    s.lookup(&f.scope, &f.k2)?;
    s.set_clock(Instant::MAX.saturating_sub_millis(1));
    step!(s, Rule::R5, reserve(&f.scope, &f.k2, &f.alice, &f.h1, f.ttl));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &f.h1, ttl(1)));
    s.lookup(&f.scope, &f.k)?;
    // At the last instant both have expired; a reserve there takes the key, expired at once.
    s.set_clock(Instant::MAX);
    step!(s, Rule::R2, reserve(&f.scope, &f.k2, &f.alice, &f.h2, f.ttl));
    step!(s, Rule::R2, reserve(&f.scope, &f.k2, &f.bob, &f.h1, ttl(u64::MAX)));
    step!(s, Rule::C4, confirm(&f.scope, &f.k2, &f.alice, v(high)));
    Ok(())
}

/// D11: a lookup's shapes: nothing for a free or expired key; owner, every hold and the absolute
/// expiry (not the time left, however the clock moves) for a live pending reservation; owner and
/// version for a confirmed one. Holds listed in ascending order of their UTF-8 bytes: among them
/// U+E000 and U+FFFD beside U+1F600, the one kind of pair whose order by UTF-16 code units differs
/// (outside the Basic Multilingual Plane a character is a surrogate pair, below U+E000).
pub fn d11(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let (mut s, f) = start(h, "d11", Rule::D11);
    let h3 = hold("attempt-3");
    s.lookup(&f.scope, &f.k)?;
    let k3 = key("carol");
    step!(s, Rule::R1, reserve(&f.scope, &k3, &f.alice, &hold("\u{1F600}"), f.ttl));
    step!(s, Rule::R3, reserve(&f.scope, &k3, &f.alice, &hold("\u{FFFD}"), f.ttl));
    step!(s, Rule::R3, reserve(&f.scope, &k3, &f.alice, &hold("\u{E000}"), f.ttl));
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.alice, &h3, f.ttl));
    step!(s, Rule::R3, reserve(&f.scope, &f.k, &f.alice, &f.h1, f.ttl));
    s.advance(7);
    s.lookup(&f.scope, &f.k)?;
    step!(s, Rule::R3, reserve(&f.scope, &f.k, &f.alice, &f.h2, ttl(1)));
    s.advance(TTL_MS - 8);
    s.lookup(&f.scope, &f.k)?;
    step!(s, Rule::C2, confirm(&f.scope, &f.k, &f.alice, v(4)));
    s.advance(TTL_MS * 10);
    s.lookup(&f.scope, &f.k)?;
    step!(s, Rule::R1, reserve(&f.scope, &f.k2, &f.bob, &f.h1, f.ttl));
    s.advance(TTL_MS);
    s.lookup(&f.scope, &f.k2)?;
    Ok(())
}

/// The worked examples of SPEC.md, run as written ([`crate::worked_examples`]): each on a fresh store,
/// the clock set to each line's instant; the store must agree with the spec functions at every
/// step, and the spec functions with the example's stated outcome, rule and lookups.
pub fn examples(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    let examples = crate::worked_examples::from_spec()
        .map_err(|e| Failure::without_rule("examples", format!("SPEC.md's worked examples do not parse: {e}")))?;
    for example in &examples {
        crate::worked_examples::run(h.inner(), example)?;
    }
    Ok(())
}

/// Durability (capability `durable`): after the store is closed and reopened, no confirmed
/// reservation is lost, no released or abandoned one comes back, pending ones keep their owner,
/// holds and exact expiry, and an expired one stays expired. The store is reopened after every
/// operation, and every key is looked up after each reopen, so that an operation acknowledged
/// but not persisted (a write that failed, or one still in a buffer) shows, whatever the
/// operations after it do to the same row. Once, between two reopens, a churn of 512 to 1,023
/// changes (the length drawn from [`Settings::seed`]) on a key of its own crosses a compaction
/// while pending, confirmed and expired reservations are there. A harness that declares the
/// capability but whose [`Harness::reopen`] returns `None` fails it.
pub fn durable(h: &dyn DynHarness, settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    if !Requirement::Durable.met_by(h.capabilities()) {
        return Ok(());
    }
    let (mut s, f) = start(h, "durable", Rule::P1);
    let k3 = key("carol");
    let k4 = key("dave");
    let k5 = key("erin");
    let churned = key("churn");
    let changes = churn::length(settings.seed_or(0), 1);
    // Each step, then a reopen and a lookup of every key.
    macro_rules! durable_step {
        ($rule:expr, $call:ident($($arg:expr),* $(,)?)) => {
            step!(s, $rule, $call($($arg),*));
            s.reopen()?;
        };
    }
    // A pending reservation that has expired before the restart must stay expired after it.
    durable_step!(Rule::R1, reserve(&f.scope, &k5, &f.bob, &f.h1, f.ttl));
    s.advance(f.ttl.as_millis());
    s.reopen()?;
    durable_step!(Rule::C1, confirm(&f.scope, &f.k, &f.alice, v(2)));
    durable_step!(Rule::R1, reserve(&f.scope, &f.k2, &f.bob, &f.h1, f.ttl));
    durable_step!(Rule::R3, reserve(&f.scope, &f.k2, &f.bob, &f.h2, f.ttl));
    // Enough changes on a key of their own to cross a compaction while a pending reservation
    // with two holds, a confirmed one and an expired one are there.
    churn::churn(&mut s, (&f.scope, &churned), (&f.alice, &f.h1, f.ttl), changes)?;
    s.reopen()?;
    durable_step!(Rule::C1, confirm(&f.scope, &k3, &f.alice, v(1)));
    durable_step!(Rule::L4, release(&f.scope, &k3, &f.alice, at(1)));
    durable_step!(Rule::R1, reserve(&f.scope, &k4, &f.alice, &f.h1, f.ttl));
    durable_step!(Rule::A2, abandon(&f.scope, &k4, &f.alice, &f.h1));
    durable_step!(Rule::L5, release(&f.scope, &f.k, &f.alice, at(1)));
    durable_step!(Rule::A3, abandon(&f.scope, &f.k2, &f.bob, &f.h1));
    durable_step!(Rule::C1, confirm(&f.scope, &k3, &f.bob, v(5)));
    durable_step!(Rule::C8, confirm(&f.scope, &k3, &f.alice, v(7)));
    durable_step!(Rule::C6, confirm(&f.scope, &k3, &f.bob, v(6)));
    durable_step!(Rule::R2, reserve(&f.scope, &k5, &f.alice, &f.h1, f.ttl));
    durable_step!(Rule::C2, confirm(&f.scope, &k5, &f.alice, v(3)));
    durable_step!(Rule::L4, release(&f.scope, &k5, &f.alice, at(3)));
    Ok(())
}

/// D10 across a restart (a durable store): the store's clock
/// never goes back, also when it is reopened with the suite's clock set back. Bob's reservation
/// expires; the store decides a reserve at that instant; then the suite's clock is set back to
/// when bob's reservation was live and the store is reopened. Bob's reservation must stay expired
/// (P1), and the store must decide at its latest instant (a reserve of bob's key by alice takes
/// it, a new reservation expires a ttl after that instant), across a second reopen too, until the
/// suite's clock passes it. Before the first reopen with the clock set back, a churn of 512 to
/// 1,023 changes (drawn from [`Settings::seed`]) on a key of its own crosses a compaction, which
/// must keep the latest instant. Passes without running on a store that is not durable.
pub fn d10_restart(h: &dyn DynHarness, settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    if !Requirement::Durable.met_by(h.capabilities()) {
        return Ok(());
    }
    let (mut s, f) = start(h, "d10_restart", Rule::D10);
    let k3 = key("carol");
    let before = s.now();
    step!(s, Rule::R1, reserve(&f.scope, &f.k, &f.bob, &f.h1, f.ttl));
    s.reopen()?;
    s.advance(f.ttl.as_millis());
    step!(s, Rule::R1, reserve(&f.scope, &f.k2, &f.alice, &f.h1, f.ttl));
    // The latest instant decided, the churn crosses a compaction, which must keep it.
    churn::churn(&mut s, (&f.scope, &key("churn")), (&f.bob, &f.h2, f.ttl), churn::length(settings.seed_or(0), 2))?;
    let latest = s.now();
    s.set_clock(before);
    s.reopen()?;
    step!(s, Rule::R2, reserve(&f.scope, &f.k, &f.alice, &f.h2, f.ttl));
    step!(s, Rule::R1, reserve(&f.scope, &k3, &f.bob, &f.h1, f.ttl));
    s.set_clock(before.saturating_add_millis(1));
    s.reopen()?;
    step!(s, Rule::C5, confirm(&f.scope, &f.k, &f.bob, v(1)));
    step!(s, Rule::L3, release(&f.scope, &f.k, &f.bob, ReleaseVersion::Any));
    s.set_clock(latest.saturating_add_millis(5));
    step!(s, Rule::R4, reserve(&f.scope, &k3, &f.bob, &f.h1, f.ttl));
    s.reopen()
}

/// The differential check ([`crate::differential::run`]): random scripts compared step by step
/// with the specification, shrunk on failure; draws more scripts while any of R1–A6 is
/// unreached, and fails on coverage when a cap of them still misses one.
pub fn differential(h: &dyn DynHarness, settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    crate::differential::run(h.inner(), settings).map(drop)
}

/// The differential check across restarts ([`crate::differential::restarts::run`]), of a
/// durable store: the differential's scripts over every spelling, the store closed and reopened
/// at seeded steps (for a store that promises to survive power cuts, every other script's
/// restarts power cuts under that promise), every key compared after each reopen.
pub fn differential_restarts(h: &dyn DynHarness, settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    if !Requirement::Durable.met_by(h.capabilities()) {
        return Ok(());
    }
    crate::differential::restarts::run(h.inner(), settings).map(drop)
}

/// The linearizability check ([`crate::linearizability::run`]): concurrent operations on a few
/// keys, decided against the specification.
pub fn linearizability(h: &dyn DynHarness, settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    crate::linearizability::run(h.inner(), settings).map(drop)
}

/// The fault check ([`crate::faults::run`]) with [`Settings::faults`], seeded by [`Settings::seed`]
/// unless those set a seed of their own:
/// concurrent operations while the harness's faults and the suite's own (a clock jump, and a
/// restart of a durable store) fire on a seeded schedule; no acknowledged confirmation may be
/// lost, no key held by two owners (P1), and the history must be linearizable with faults
/// tolerated.
pub fn faults(h: &dyn DynHarness, settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    judged(settings, "faults", settings.faults.ceilings(), |ceilings| {
        let faults = settings.faults.clone().with_ceilings(ceilings);
        let run = crate::faults::run(h.inner(), &settings.clone().with_faults(faults));
        crate::said::say(run.report.to_string());
        (run.report.seed, run.verdict, run.history)
    })
}

/// Runs `check`, whose histories keep `ceilings` unless an undecided run narrowed them
/// ([`crate::histories`]), through `run` (given the ceilings, it returns the seed, the verdict and
/// the history); an undecided verdict with its history written and the next run's ceilings noted.
fn judged(
    settings: &Settings,
    check: &str,
    ceilings: crate::Ceilings,
    run: impl FnOnce(crate::Ceilings) -> (u64, Result<(), Failure>, crate::linearizability::History),
) -> Result<(), Failure> {
    let dir = settings.history_dir_or_default();
    let ceilings = crate::histories::effective(&dir, check, ceilings);
    let (seed, verdict, history) = run(ceilings);
    verdict.map_err(|f| crate::verdict::with_undecided(f, &dir, (check, seed), ceilings, &history))
}

/// Durability under crashes at points the suite chooses ([`crate::crashes::run`] with
/// [`Settings::crashes`], seeded by [`Settings::seed`] unless those set a seed of their own): keys driven through every state a row can hold, the store
/// crashed right after an acknowledged change and in the middle of bursts (through the harness's
/// [`crate::faults::Fault::Crash`] when it offers one, and its reopen), every key's whole state
/// judged after each crash (P1), and again with the suite's clock set back (D10 across a restart).
pub fn crashes(h: &dyn DynHarness, settings: &Settings) -> Result<(), Failure> {
    crash_rounds(h, settings, (Requirement::Durable, "crashes"), crate::crashes::run)
}

/// A check of the crash check's rounds, `run` (its crashes or its power cuts), named `check`, on
/// a harness that meets `requirement` (passing without running on one that does not), its
/// history within the ceilings an undecided run narrowed.
fn crash_rounds(
    h: &dyn DynHarness,
    settings: &Settings,
    (requirement, check): (Requirement, &str),
    run: fn(&dyn DynHarness, &Settings) -> crate::crashes::CrashRun,
) -> Result<(), Failure> {
    if !requirement.met_by(Erased::new(h).capabilities()) {
        return Ok(());
    }
    judged(settings, check, settings.crashes.ceilings(), |ceilings| {
        let crashes = settings.crashes.clone().with_ceilings(ceilings);
        let run = run(h, &settings.clone().with_crashes(crashes));
        if !run.report.crashes.is_empty() {
            crate::said::say(run.report.to_string());
        }
        (run.report.seed, run.verdict, run.history)
    })
}

/// Durability under power cuts, for a store that declares what it survives
/// ([`crate::Capabilities::power_cuts`]; [`crate::crashes::power_cuts`] with [`Settings::crashes`]):
/// the crash check's rounds with the store on a disk that can lose power, each crash a cut under
/// the declared model or a milder one, quiet cuts right after an acknowledged change and, in
/// bursts, cuts while the disk holds one of the store's writes or syncs; every key's whole state
/// judged after each cut (P1, and D10 across it), a failure naming the unsynced effects the cut
/// took back. Skipped, saying so, where FUSE cannot mount.
pub fn power_cuts(h: &dyn DynHarness, settings: &Settings) -> Result<(), Failure> {
    crash_rounds(h, settings, (Requirement::PowerCuts, "power_cuts"), crate::crashes::power_cuts)
}

/// D10, the clock inside the critical section: an operation is held between its reading of the
/// clock and its write ([`reservation_store::ManualClock::hold_next_reading`]) while the clock
/// moves past an expiry and a lookup runs; then it is let go. Alice's pending reservation
/// expires at `t+10`; at `t+9` she reserves again with a second hold (a join, by that reading),
/// and a lookup at `t+10` runs meanwhile. A store that reads the clock inside its lock makes the
/// lookup wait (it then sees the join), or, optimistic, decides again at `t+10` after the lookup
/// (a fresh take, R2). A store that reads it outside answers the join after the lookup found the
/// key expired: no order of the two explains that. Deterministic, unlike the randomized
/// linearizability check, which finds this only when a race lands on an expiry.
///
/// The same scenario runs first one operation at a time, on a fresh store, so that a store
/// whose answers no order explains for another reason (an expiry boundary, a lookup that shows
/// expired rows) is reported by that reason's rule, not as a clock read outside the critical
/// section. Through the driver, the held reading is the store's own: the reserve says
/// `"now": "ask"` and the adapter asks for the clock when the store reads it.
pub fn d10(h: &dyn DynHarness, _settings: &Settings) -> Result<(), Failure> {
    let h = &Erased::new(h);
    use std::sync::mpsc;
    use std::time::Duration;

    use reservation_store::{ManualClock, Operation, Outcome, ReservationStore, StoredReservation, spec};

    const CHECK: &str = "d10_the_clock_is_read_inside_the_critical_section";
    d10_in_sequence(h, CHECK)?;
    // An answer the adapter behind the driver could not give is its failure, not D10's.
    let protocol = std::sync::OnceLock::new();
    let text = |e: reservation_store::StoreError| {
        if let Some(p) = crate::protocol::ProtocolError::in_result_error(&e) {
            let _ = protocol.set(p.to_string());
        }
        reservation_store::error_chain(&e)
    };
    let fail = |problem: String| match protocol.get() {
        Some(p) => Err(Failure::protocol(CHECK, p.clone())),
        None => Err(Failure::new(CHECK, Rule::D10, problem)),
    };
    let clock = ManualClock::new(crate::START);
    let store = h.store(clock.clone());
    let scope = ReservationScope::new(
        reservation_store::AggregateType::new(TYPE).expect("a valid type"),
        Tenant::id("acme").expect("a valid tenant"),
        ns("d10"),
    );
    let (k, alice, h1, h2, ttl) =
        (key("alice"), owner(Some("acme"), "alice"), hold("attempt-1"), hold("attempt-2"), ttl(10));
    let at = |n: u64| crate::START.saturating_add_millis(n);
    fn reserve_with<'a>(
        alice: &'a AggregateRef,
        hold: &'a HoldId,
        ttl: Ttl,
    ) -> Operation<&'a AggregateRef, &'a HoldId> {
        Operation::Reserve { owner: alice, hold, ttl }
    }
    let first = spec::apply::<_, std::collections::BTreeSet<HoldId>>(None, at(0), reserve_with(&alice, &h1, ttl));
    match h.block_on(store.execute(reservation_store::Request::new(&scope, &k, reserve_with(&alice, &h1, ttl)))) {
        Ok(outcome) if outcome == first.outcome => {}
        other => {
            let other = other.map_err(text);
            return fail(format!("the first reserve of a free key at t answered {other:?}, not {:?}", first.outcome));
        }
    }
    clock.set(at(9));
    let held = clock.hold_next_reading();
    type Answers = (Result<Outcome, String>, Result<Option<StoredReservation>, String>);
    let (written, seen): Answers = std::thread::scope(|s| {
        let (store, scope, k, alice, h2) = (&store, &scope, &k, &alice, &h2);
        let writer = s.spawn(move || {
            h.block_on(store.execute(reservation_store::Request::new(scope, k, reserve_with(alice, h2, ttl))))
        });
        if !held.wait_reached(Duration::from_secs(5)) {
            drop(held);
            let answer = writer.join().map_err(|_| "panicked".to_owned()).and_then(|r| r.map_err(text));
            return (answer, Err("the store did not read its clock while it reserved".to_owned()));
        }
        clock.set(at(10));
        let (done, finished) = mpsc::channel();
        let reader = s.spawn(move || {
            let answer = h.block_on(store.lookup(scope, k));
            let _ = done.send(());
            answer
        });
        // A store that serializes the two makes the lookup wait for the held reserve: give a
        // lookup that can finish the time to, then let the reserve go.
        let _ = finished.recv_timeout(Duration::from_millis(300));
        drop(held);
        let w = writer.join().map_err(|_| "the reserve panicked".to_owned()).and_then(|r| r.map_err(text));
        let l = reader.join().map_err(|_| "the lookup panicked".to_owned()).and_then(|r| r.map_err(text));
        (w, l)
    });
    let after = h.block_on(store.lookup(&scope, &k)).map_err(text);
    let (Ok(written), Ok(seen), Ok(after)) = (written.clone(), seen.clone(), after.clone()) else {
        return fail(format!("reserve {written:?}, lookup {seen:?}, lookup afterwards {after:?}: an error"));
    };
    // Every order the specification allows: the reserve at its reading (t+9) or a later one
    // (t+10) before the lookup, or after it at t+10.
    let base = first.next;
    let mut allowed = Vec::new();
    for reserve_at in [at(9), at(10)] {
        let step = spec::apply(base.clone(), reserve_at, reserve_with(&alice, &h2, ttl));
        let shown = spec::lookup(step.next.as_ref(), at(10)).cloned();
        allowed.push((step.outcome, shown.clone(), shown, "the reserve, then the lookup"));
    }
    let step = spec::apply(base.clone(), at(10), reserve_with(&alice, &h2, ttl));
    let shown = spec::lookup(step.next.as_ref(), at(10)).cloned();
    allowed.push((step.outcome, spec::lookup(base.as_ref(), at(10)).cloned(), shown, "the lookup, then the reserve"));
    if allowed.iter().any(|(o, s, a, _)| *o == written && *s == seen && *a == after) {
        return Ok(());
    }
    fail(format!(
        "alice's reservation expires at t+10; her second reserve read t+9, was held there while the clock moved to t+10 and a lookup ran, then let go: it answered {written:?}, the lookup {seen:?}, a lookup afterwards {after:?}. No order explains that: the reserve acted at an instant earlier than the lookup it followed, so the clock was read outside the critical section. Allowed: {}",
        allowed.iter().map(|(o, s, _, order)| format!("{order}: {o:?} and {s:?}")).collect::<Vec<_>>().join("; ")
    ))
}

/// D10's scenario one operation at a time, on a fresh store, each outcome and every lookup after
/// each step compared with the specification: on one key the reserve at `t+9`, then the lookup
/// at `t+10`; on another the lookup at `t+10`, then the reserve. Both orders the concurrent part
/// allows; a store that fails here has a bug of its own, headlined by the rule that decides the
/// failing step (D1 for a lookup that shows a key at its expiry instant).
fn d10_in_sequence<H: Harness>(h: &H, check: &str) -> Result<(), Failure> {
    let mut s = Session::new(h, check, None);
    s.note(|| "D10's scenario, one operation at a time, before it runs concurrently".into());
    let f = Fx::new("d10");
    let (first, second, ttl) = (key("alice"), key("alice-later"), ttl(10));
    step!(s, Rule::R1, reserve(&f.scope, &first, &f.alice, &f.h1, ttl));
    step!(s, Rule::R1, reserve(&f.scope, &second, &f.alice, &f.h1, ttl));
    s.set_clock(crate::START.saturating_add_millis(9));
    step!(s, Rule::R3, reserve(&f.scope, &first, &f.alice, &f.h2, ttl));
    s.set_clock(crate::START.saturating_add_millis(10));
    s.lookup(&f.scope, &second)?;
    step!(s, Rule::R2, reserve(&f.scope, &second, &f.alice, &f.h2, ttl));
    Ok(())
}
