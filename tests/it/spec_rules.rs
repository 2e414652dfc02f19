//! One test per rule id on the pure functions of `reservation_store::spec`.
//!
//! Each rule test asserts the whole [`Step`]: the next reservation (or `None`, a free key), the
//! outcome and the [`Rule`] reported. Most run twice, on the instantiation the stores use
//! (`AggregateRef` owners, `BTreeSet<HoldId>` holds) and on the one the model uses (small integer
//! owners, [`BitHolds`]). Times are milliseconds on the store's clock; a pending reservation
//! expiring at `e` is live at `e - 1` and expired at `e` (rule D1), and the tests sit on exactly
//! those two instants.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::time::Duration;

use reservation_store::rules::{Rule, RuleSet};
use reservation_store::spec::{self, BitHolds, Confirmed, HoldBit, HoldSet, Pending, Reservation, Step};
use reservation_store::*;

/// One instantiation of the spec functions: an owner type and a hold set.
trait World {
    type Owner: Clone + Eq + Debug;
    type Hold: Clone + Eq + Debug;
    type Holds: HoldSet<Hold = Self::Hold> + Debug;
    /// Owner number `i`.
    fn owner(i: u8) -> Self::Owner;
    /// Hold number `i` (below 64).
    fn hold(i: u8) -> Self::Hold;
}

/// The stores' instantiation.
struct Stores;

impl World for Stores {
    type Owner = AggregateRef;
    type Hold = HoldId;
    type Holds = BTreeSet<HoldId>;
    fn owner(i: u8) -> AggregateRef {
        AggregateRef::parse("user", Some("acme"), &format!("user-{i}")).unwrap()
    }
    fn hold(i: u8) -> HoldId {
        HoldId::new(format!("attempt-{i}")).unwrap()
    }
}

/// The model's instantiation.
struct Model;

impl World for Model {
    type Owner = u8;
    type Hold = HoldBit;
    type Holds = BitHolds;
    fn owner(i: u8) -> u8 {
        i
    }
    fn hold(i: u8) -> HoldBit {
        HoldBit::new(i).unwrap()
    }
}

type Res<W> = Reservation<<W as World>::Owner, <W as World>::Holds>;
type StepOf<W, Out> = Step<<W as World>::Owner, <W as World>::Holds, Out>;

/// The operation's owner, `S` in the rule table.
const S: u8 = 0;
/// Another owner, `O` in the rule table.
const O: u8 = 1;

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn ttl(ms: u64) -> Ttl {
    Ttl::from_millis(ms).unwrap()
}

fn v(n: u64) -> Version {
    Version::stream(n).unwrap()
}

fn holds<W: World>(ids: &[u8]) -> W::Holds {
    let (first, rest) = ids.split_first().expect("a pending reservation has a hold");
    let mut set = W::Holds::single(W::hold(*first));
    for id in rest {
        set.insert(W::hold(*id));
    }
    set
}

/// `P{owner, holds, expires_at}`.
fn pending<W: World>(owner: u8, hold_ids: &[u8], expires_at: u64) -> Res<W> {
    Reservation::pending(W::owner(owner), holds::<W>(hold_ids), at(expires_at)).unwrap()
}

/// `C{owner, version}`.
fn confirmed<W: World>(owner: u8, version: Version) -> Res<W> {
    Reservation::confirmed(W::owner(owner), version)
}

/// The typed function's step, after asserting that [`spec::apply`] decides `operation` the same
/// way: every rule test below also proves the one dispatcher.
#[track_caller]
fn via_apply<W: World, Out>(
    typed: StepOf<W, Out>,
    current: Option<Res<W>>,
    now: u64,
    operation: Operation<&W::Owner, &W::Hold>,
) -> StepOf<W, Out>
where
    Out: Copy + Into<Outcome> + Debug,
{
    let applied = spec::apply(current, at(now), operation);
    assert_eq!(applied, typed.clone().map_outcome(Into::into), "spec::apply disagrees with the typed function");
    typed
}

fn reserve<W: World>(current: Option<Res<W>>, now: u64, owner: u8, hold: u8, ttl_ms: u64) -> StepOf<W, ReserveOutcome> {
    let (o, h) = (W::owner(owner), W::hold(hold));
    let typed = spec::reserve(current.clone(), at(now), &o, &h, ttl(ttl_ms));
    via_apply::<W, _>(typed, current, now, Operation::Reserve { owner: &o, hold: &h, ttl: ttl(ttl_ms) })
}

fn confirm<W: World>(current: Option<Res<W>>, now: u64, owner: u8, version: Version) -> StepOf<W, ConfirmOutcome> {
    let o = W::owner(owner);
    let typed = spec::confirm(current.clone(), at(now), &o, version);
    via_apply::<W, _>(typed, current, now, Operation::Confirm { owner: &o, version })
}

fn release<W: World>(
    current: Option<Res<W>>,
    now: u64,
    owner: u8,
    version: ReleaseVersion,
) -> StepOf<W, ReleaseOutcome> {
    let o = W::owner(owner);
    let typed = spec::release(current.clone(), at(now), &o, version);
    via_apply::<W, _>(typed, current, now, Operation::Release { owner: &o, version })
}

fn abandon<W: World>(current: Option<Res<W>>, now: u64, owner: u8, hold: u8) -> StepOf<W, AbandonOutcome> {
    let (o, h) = (W::owner(owner), W::hold(hold));
    let typed = spec::abandon(current.clone(), at(now), &o, &h);
    via_apply::<W, _>(typed, current, now, Operation::Abandon { owner: &o, hold: &h })
}

/// Asserts the whole step: next state, outcome and rule.
#[track_caller]
fn expect<W: World, Out: PartialEq + Debug>(got: StepOf<W, Out>, next: Option<Res<W>>, outcome: Out, rule: Rule) {
    assert_eq!(got, Step { next, outcome, rule }, "expected {rule}: {}", rule.text());
}

// ---------------------------------------------------------------------------------------------
// reserve: R1-R7

/// R1: a free key is taken, pending, with the attempt's hold only, expiring at now + ttl.
fn r1_free_key_is_taken_pending_until_now_plus_ttl<W: World>() {
    expect::<W, _>(
        reserve::<W>(None, 1_000, S, 1, 50),
        Some(pending::<W>(S, &[1], 1_050)),
        ReserveOutcome::Taken,
        Rule::R1,
    );
    expect::<W, _>(reserve::<W>(None, 0, O, 7, 1), Some(pending::<W>(O, &[7], 1)), ReserveOutcome::Taken, Rule::R1);
}

/// R2: an expired pending reservation, another owner's or the owner's own, is taken afresh at
/// exactly its expiry; the old holds are dropped and the new expiry is now + ttl.
fn r2_expired_pending_of_anyone_is_taken_afresh<W: World>() {
    let others = Some(pending::<W>(O, &[1, 2], 100));
    expect::<W, _>(
        reserve::<W>(others, 100, S, 3, 50),
        Some(pending::<W>(S, &[3], 150)),
        ReserveOutcome::Taken,
        Rule::R2,
    );
    let own = Some(pending::<W>(S, &[1, 2], 100));
    expect::<W, _>(
        reserve::<W>(own.clone(), 100, S, 3, 50),
        Some(pending::<W>(S, &[3], 150)),
        ReserveOutcome::Taken,
        Rule::R2,
    );
    // Even with a hold the old reservation had, the old set is gone.
    expect::<W, _>(
        reserve::<W>(own, 5_000, S, 2, 7),
        Some(pending::<W>(S, &[2], 5_007)),
        ReserveOutcome::Taken,
        Rule::R2,
    );
}

/// R3: at exactly expires_at - 1 the owner's pending reservation is live; a new hold joins it
/// and the later expiry wins, whichever of the two it is.
fn r3_live_own_pending_joins_hold<W: World>() {
    let live = Some(pending::<W>(S, &[1], 100));
    expect::<W, _>(
        reserve::<W>(live, 99, S, 2, 50),
        Some(pending::<W>(S, &[1, 2], 149)),
        ReserveOutcome::Joined,
        Rule::R3,
    );
    let long = Some(pending::<W>(S, &[1], 1_000));
    expect::<W, _>(
        reserve::<W>(long, 99, S, 2, 50),
        Some(pending::<W>(S, &[1, 2], 1_000)),
        ReserveOutcome::Joined,
        Rule::R3,
    );
}

/// R4: reserving again with a hold already held keeps the holds and the later expiry.
fn r4_live_own_pending_with_same_hold_keeps_holds_and_later_expiry<W: World>() {
    let live = Some(pending::<W>(S, &[1, 2], 100));
    expect::<W, _>(
        reserve::<W>(live.clone(), 99, S, 2, 50),
        Some(pending::<W>(S, &[1, 2], 149)),
        ReserveOutcome::Joined,
        Rule::R4,
    );
    let long = Some(pending::<W>(S, &[1, 2], 1_000));
    expect::<W, _>(reserve::<W>(long.clone(), 99, S, 1, 50), long, ReserveOutcome::Joined, Rule::R4);
    // A ttl that ends exactly at the old expiry changes nothing either.
    expect::<W, _>(reserve::<W>(live.clone(), 50, S, 1, 50), live, ReserveOutcome::Joined, Rule::R4);
}

/// R5: another owner's live pending reservation, even at expires_at - 1 and even under the
/// same hold id, is a conflict and changes nothing.
fn r5_live_pending_of_other_owner_conflicts<W: World>() {
    let theirs = Some(pending::<W>(O, &[1], 100));
    expect::<W, _>(reserve::<W>(theirs.clone(), 99, S, 1, 500), theirs.clone(), ReserveOutcome::Conflict, Rule::R5);
    expect::<W, _>(reserve::<W>(theirs.clone(), 0, S, 2, 1), theirs, ReserveOutcome::Conflict, Rule::R5);
}

/// R6: the owner's confirmed reservation stays as it is, however late.
fn r6_own_confirmed_is_already_confirmed<W: World>() {
    let mine = Some(confirmed::<W>(S, v(3)));
    expect::<W, _>(reserve::<W>(mine.clone(), 0, S, 1, 50), mine.clone(), ReserveOutcome::AlreadyConfirmed, Rule::R6);
    expect::<W, _>(reserve::<W>(mine.clone(), u64::MAX, S, 1, 50), mine, ReserveOutcome::AlreadyConfirmed, Rule::R6);
}

/// R7: another owner's confirmed reservation is a conflict, however late.
fn r7_other_owners_confirmed_conflicts<W: World>() {
    let theirs = Some(confirmed::<W>(O, Version::UNVERSIONED));
    expect::<W, _>(reserve::<W>(theirs.clone(), 10, S, 1, 50), theirs.clone(), ReserveOutcome::Conflict, Rule::R7);
    expect::<W, _>(reserve::<W>(theirs.clone(), u64::MAX, S, 1, 50), theirs, ReserveOutcome::Conflict, Rule::R7);
}

// ---------------------------------------------------------------------------------------------
// confirm: C1-C8

/// C1: a free key is taken confirmed at the version, UNVERSIONED included.
fn c1_free_key_is_taken_confirmed<W: World>() {
    expect::<W, _>(confirm::<W>(None, 10, S, v(5)), Some(confirmed::<W>(S, v(5))), ConfirmOutcome::Confirmed, Rule::C1);
    expect::<W, _>(
        confirm::<W>(None, 10, S, Version::UNVERSIONED),
        Some(confirmed::<W>(S, Version::UNVERSIONED)),
        ConfirmOutcome::Confirmed,
        Rule::C1,
    );
}

/// C2: the owner's live pending reservation (at expires_at - 1) is confirmed, holds cleared.
fn c2_live_own_pending_is_confirmed_and_holds_cleared<W: World>() {
    let live = Some(pending::<W>(S, &[1, 2], 100));
    expect::<W, _>(confirm::<W>(live, 99, S, v(1)), Some(confirmed::<W>(S, v(1))), ConfirmOutcome::Confirmed, Rule::C2);
}

/// C3: the owner's pending reservation is confirmed even once expired (at exactly its expiry
/// and long after).
fn c3_expired_own_pending_is_still_confirmed<W: World>() {
    let expired = Some(pending::<W>(S, &[1, 2], 100));
    expect::<W, _>(
        confirm::<W>(expired.clone(), 100, S, v(2)),
        Some(confirmed::<W>(S, v(2))),
        ConfirmOutcome::Confirmed,
        Rule::C3,
    );
    expect::<W, _>(
        confirm::<W>(expired, u64::MAX, S, v(2)),
        Some(confirmed::<W>(S, v(2))),
        ConfirmOutcome::Confirmed,
        Rule::C3,
    );
}

/// C4: another owner's expired pending reservation gives way to the committed fact.
fn c4_expired_pending_of_other_owner_gives_way<W: World>() {
    let expired = Some(pending::<W>(O, &[1], 100));
    expect::<W, _>(
        confirm::<W>(expired, 100, S, v(2)),
        Some(confirmed::<W>(S, v(2))),
        ConfirmOutcome::Confirmed,
        Rule::C4,
    );
}

/// C5: another owner's live pending reservation (at expires_at - 1) is a conflict.
fn c5_live_pending_of_other_owner_conflicts<W: World>() {
    let live = Some(pending::<W>(O, &[1], 100));
    expect::<W, _>(confirm::<W>(live.clone(), 99, S, v(2)), live, ConfirmOutcome::Conflict, Rule::C5);
}

/// C6: a later fact of the owner raises the confirmed version; any stream version is later
/// than UNVERSIONED (D3).
fn c6_greater_version_raises_confirmed_version<W: World>() {
    let at3 = Some(confirmed::<W>(S, v(3)));
    expect::<W, _>(confirm::<W>(at3, 10, S, v(4)), Some(confirmed::<W>(S, v(4))), ConfirmOutcome::Confirmed, Rule::C6);
    let unversioned = Some(confirmed::<W>(S, Version::UNVERSIONED));
    expect::<W, _>(
        confirm::<W>(unversioned, 10, S, v(1)),
        Some(confirmed::<W>(S, v(1))),
        ConfirmOutcome::Confirmed,
        Rule::C6,
    );
}

/// C7: confirming again at the same version, or replaying an older fact, changes nothing.
fn c7_same_or_older_version_is_already_confirmed<W: World>() {
    let at3 = Some(confirmed::<W>(S, v(3)));
    for older_or_same in [v(3), v(2), v(1), Version::UNVERSIONED] {
        expect::<W, _>(
            confirm::<W>(at3.clone(), 10, S, older_or_same),
            at3.clone(),
            ConfirmOutcome::AlreadyConfirmed,
            Rule::C7,
        );
    }
}

/// C8: another owner's confirmed reservation is a conflict whatever the version, later ones
/// included.
fn c8_other_owners_confirmed_conflicts_at_any_version<W: World>() {
    let theirs = Some(confirmed::<W>(O, v(3)));
    for version in [Version::UNVERSIONED, v(2), v(3), v(4), Version::from_u64(u64::MAX)] {
        expect::<W, _>(
            confirm::<W>(theirs.clone(), 10, S, version),
            theirs.clone(),
            ConfirmOutcome::Conflict,
            Rule::C8,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// release: L1-L6

fn all_release_versions() -> [ReleaseVersion; 5] {
    [
        ReleaseVersion::At(Version::UNVERSIONED),
        ReleaseVersion::At(v(1)),
        ReleaseVersion::At(v(3)),
        ReleaseVersion::At(v(9)),
        ReleaseVersion::Any,
    ]
}

/// L1: a free key, or an expired pending reservation (the owner's or another's, at exactly
/// its expiry), is not held; the key is free afterwards.
fn l1_free_or_expired_pending_is_not_held<W: World>() {
    for version in all_release_versions() {
        expect::<W, _>(release::<W>(None, 10, S, version), None, ReleaseOutcome::NotHeld, Rule::L1);
        expect::<W, _>(
            release::<W>(Some(pending::<W>(S, &[1], 100)), 100, S, version),
            None,
            ReleaseOutcome::NotHeld,
            Rule::L1,
        );
        expect::<W, _>(
            release::<W>(Some(pending::<W>(O, &[1], 100)), 100, S, version),
            None,
            ReleaseOutcome::NotHeld,
            Rule::L1,
        );
    }
}

/// L2: the owner's live pending reservation (at expires_at - 1) is freed, whatever its holds
/// and whatever the version.
fn l2_live_own_pending_is_released_at_any_version<W: World>() {
    for version in all_release_versions() {
        expect::<W, _>(
            release::<W>(Some(pending::<W>(S, &[1, 2], 100)), 99, S, version),
            None,
            ReleaseOutcome::Released,
            Rule::L2,
        );
        expect::<W, _>(
            release::<W>(Some(pending::<W>(S, &[3], 100)), 0, S, version),
            None,
            ReleaseOutcome::Released,
            Rule::L2,
        );
    }
}

/// L3: another owner's live pending reservation is not held and stays.
fn l3_live_pending_of_other_owner_is_not_held<W: World>() {
    let theirs = Some(pending::<W>(O, &[1], 100));
    for version in all_release_versions() {
        expect::<W, _>(release::<W>(theirs.clone(), 99, S, version), theirs.clone(), ReleaseOutcome::NotHeld, Rule::L3);
    }
}

/// L4: the owner's confirmed reservation is freed by ANY_VERSION or a version at or above the
/// confirmed one.
fn l4_release_at_or_above_confirmed_version_or_any_frees<W: World>() {
    for version in [ReleaseVersion::Any, ReleaseVersion::At(v(3)), ReleaseVersion::At(v(4))] {
        expect::<W, _>(
            release::<W>(Some(confirmed::<W>(S, v(3))), 10, S, version),
            None,
            ReleaseOutcome::Released,
            Rule::L4,
        );
    }
    let unversioned = Some(confirmed::<W>(S, Version::UNVERSIONED));
    expect::<W, _>(
        release::<W>(unversioned, 10, S, ReleaseVersion::At(Version::UNVERSIONED)),
        None,
        ReleaseOutcome::Released,
        Rule::L4,
    );
}

/// L5: a release by an older fact than the one that confirmed the key (a replay) keeps it.
fn l5_release_of_older_fact_is_kept<W: World>() {
    let at3 = Some(confirmed::<W>(S, v(3)));
    for older in [v(2), v(1), Version::UNVERSIONED] {
        expect::<W, _>(
            release::<W>(at3.clone(), 10, S, ReleaseVersion::At(older)),
            at3.clone(),
            ReleaseOutcome::Kept,
            Rule::L5,
        );
    }
}

/// L6: another owner's confirmed reservation is not held, whatever the version, ANY_VERSION
/// included.
fn l6_other_owners_confirmed_is_not_held<W: World>() {
    let theirs = Some(confirmed::<W>(O, v(3)));
    for version in all_release_versions() {
        expect::<W, _>(release::<W>(theirs.clone(), 10, S, version), theirs.clone(), ReleaseOutcome::NotHeld, Rule::L6);
    }
}

// ---------------------------------------------------------------------------------------------
// abandon: A1-A6

/// A1: a free key, or an expired pending reservation (even the owner's own, with this very
/// hold, at exactly its expiry), is not held; the key is free afterwards.
fn a1_free_or_expired_pending_is_not_held<W: World>() {
    expect::<W, _>(abandon::<W>(None, 10, S, 1), None, AbandonOutcome::NotHeld, Rule::A1);
    expect::<W, _>(abandon::<W>(Some(pending::<W>(S, &[1], 100)), 100, S, 1), None, AbandonOutcome::NotHeld, Rule::A1);
    expect::<W, _>(
        abandon::<W>(Some(pending::<W>(S, &[1, 2], 100)), 100, S, 1),
        None,
        AbandonOutcome::NotHeld,
        Rule::A1,
    );
    expect::<W, _>(abandon::<W>(Some(pending::<W>(O, &[1], 100)), 100, S, 1), None, AbandonOutcome::NotHeld, Rule::A1);
}

/// A2: abandoning the last hold of the owner's live pending reservation frees the key.
fn a2_last_hold_abandoned_frees_key<W: World>() {
    expect::<W, _>(abandon::<W>(Some(pending::<W>(S, &[1], 100)), 99, S, 1), None, AbandonOutcome::Abandoned, Rule::A2);
}

/// A3: abandoning one of several holds removes only that hold; the expiry is unchanged.
fn a3_one_of_several_holds_abandoned_keeps_key_and_expiry<W: World>() {
    let three = Some(pending::<W>(S, &[1, 2, 3], 100));
    expect::<W, _>(
        abandon::<W>(three, 99, S, 2),
        Some(pending::<W>(S, &[1, 3], 100)),
        AbandonOutcome::StillReserved,
        Rule::A3,
    );
    let two = Some(pending::<W>(S, &[1, 3], 100));
    expect::<W, _>(
        abandon::<W>(two, 0, S, 1),
        Some(pending::<W>(S, &[3], 100)),
        AbandonOutcome::StillReserved,
        Rule::A3,
    );
}

/// A4: a hold the owner's live pending reservation does not have changes nothing.
fn a4_unknown_hold_is_not_held<W: World>() {
    let one = Some(pending::<W>(S, &[1], 100));
    expect::<W, _>(abandon::<W>(one.clone(), 99, S, 2), one, AbandonOutcome::NotHeld, Rule::A4);
    let two = Some(pending::<W>(S, &[1, 3], 100));
    expect::<W, _>(abandon::<W>(two.clone(), 99, S, 2), two, AbandonOutcome::NotHeld, Rule::A4);
}

/// A5: another owner's reservation, live pending (even under the same hold id) or confirmed,
/// is not held and stays.
fn a5_other_owners_reservation_is_not_held<W: World>() {
    let pending_theirs = Some(pending::<W>(O, &[1], 100));
    expect::<W, _>(abandon::<W>(pending_theirs.clone(), 99, S, 1), pending_theirs, AbandonOutcome::NotHeld, Rule::A5);
    let confirmed_theirs = Some(confirmed::<W>(O, v(3)));
    expect::<W, _>(
        abandon::<W>(confirmed_theirs.clone(), 99, S, 1),
        confirmed_theirs,
        AbandonOutcome::NotHeld,
        Rule::A5,
    );
}

/// A6: a confirmed key is never abandoned.
fn a6_own_confirmed_is_never_abandoned<W: World>() {
    let mine = Some(confirmed::<W>(S, v(3)));
    expect::<W, _>(abandon::<W>(mine.clone(), 99, S, 1), mine, AbandonOutcome::AlreadyConfirmed, Rule::A6);
}

// ---------------------------------------------------------------------------------------------
// lookup

/// lookup: nothing for a free key or an expired pending reservation; a live pending one and a
/// confirmed one are seen whole.
fn lookup_sees_live_pending_and_confirmed_only<W: World>() {
    assert_eq!(spec::lookup::<W::Owner, W::Holds>(None, at(0)), None);
    let p = pending::<W>(S, &[1, 2], 100);
    assert_eq!(spec::lookup(Some(&p), at(99)), Some(&p));
    assert_eq!(spec::lookup(Some(&p), at(100)), None);
    let c = confirmed::<W>(O, v(1));
    assert_eq!(spec::lookup(Some(&c), at(u64::MAX)), Some(&c));
}

// ---------------------------------------------------------------------------------------------
// values: D1-D7

/// D1: reserved at t for ttl, live on [t, t + ttl): live at t + ttl - 1, expired at t + ttl,
/// for lookup and for every operation.
fn d1_live_until_expires_at_minus_one_expired_at_expires_at<W: World>() {
    let Step { next, .. } = reserve::<W>(None, 1_000, S, 1, 10);
    let p = next.unwrap();
    assert_eq!(p.as_pending().map(Pending::expires_at), Some(at(1_010)));
    assert!(p.is_live(at(1_000)) && p.is_live(at(1_009)) && !p.is_live(at(1_010)));
    assert_eq!(spec::lookup(Some(&p), at(1_009)), Some(&p));
    assert_eq!(spec::lookup(Some(&p), at(1_010)), None);
    let cur = Some(p);
    assert_eq!(reserve::<W>(cur.clone(), 1_009, O, 1, 5).rule, Rule::R5);
    assert_eq!(reserve::<W>(cur.clone(), 1_010, O, 1, 5).rule, Rule::R2);
    assert_eq!(confirm::<W>(cur.clone(), 1_009, O, v(1)).rule, Rule::C5);
    assert_eq!(confirm::<W>(cur.clone(), 1_010, O, v(1)).rule, Rule::C4);
    assert_eq!(confirm::<W>(cur.clone(), 1_009, S, v(1)).rule, Rule::C2);
    assert_eq!(confirm::<W>(cur.clone(), 1_010, S, v(1)).rule, Rule::C3);
    assert_eq!(release::<W>(cur.clone(), 1_009, S, ReleaseVersion::Any).rule, Rule::L2);
    assert_eq!(release::<W>(cur.clone(), 1_010, S, ReleaseVersion::Any).rule, Rule::L1);
    assert_eq!(abandon::<W>(cur.clone(), 1_009, S, 1).rule, Rule::A2);
    assert_eq!(abandon::<W>(cur, 1_010, S, 1).rule, Rule::A1);
}

/// D1: now + ttl saturates at Instant::MAX instead of overflowing, on a take and on a join.
fn d1_now_plus_ttl_saturates_at_instant_max<W: World>() {
    let max = u64::MAX;
    expect::<W, _>(
        reserve::<W>(None, max - 5, S, 1, 10),
        Some(pending::<W>(S, &[1], max)),
        ReserveOutcome::Taken,
        Rule::R1,
    );
    expect::<W, _>(
        reserve::<W>(None, max - 1, S, 1, max),
        Some(pending::<W>(S, &[1], max)),
        ReserveOutcome::Taken,
        Rule::R1,
    );
    let cur = Some(pending::<W>(S, &[1], max - 1));
    expect::<W, _>(
        reserve::<W>(cur, max - 2, S, 2, 10),
        Some(pending::<W>(S, &[1, 2], max)),
        ReserveOutcome::Joined,
        Rule::R3,
    );
    // Live on [MAX - 1, MAX): live at MAX - 1, expired at MAX.
    let p = pending::<W>(S, &[1], max);
    assert!(p.is_live(at(max - 1)) && !p.is_live(Instant::MAX));
}

#[test]
fn d1_instant_arithmetic_saturates() {
    assert_eq!(Instant::MAX, at(u64::MAX));
    assert_eq!(Instant::ZERO, at(0));
    assert_eq!(Instant::default(), Instant::ZERO);
    assert_eq!(at(7).as_millis(), 7);
    assert_eq!(at(10).saturating_add(ttl(5)), at(15));
    assert_eq!(at(u64::MAX - 1).saturating_add(ttl(5)), Instant::MAX);
    assert_eq!(at(10).saturating_add_millis(5), at(15));
    assert_eq!(at(u64::MAX - 1).saturating_add_millis(5), Instant::MAX);
    assert_eq!(at(10).saturating_sub_millis(4), at(6));
    assert_eq!(at(3).saturating_sub_millis(5), Instant::ZERO);
    assert_eq!(at(42).to_string(), "t=42ms");
}

#[test]
fn d2_ttl_zero_is_an_invalid_argument() {
    assert_eq!(Ttl::from_millis(0), Err(InvalidArgument::TtlZero));
    assert_eq!(Ttl::from_duration(Duration::ZERO), Err(InvalidArgument::TtlZero));
    assert_eq!(Ttl::from_duration(Duration::from_micros(999)), Err(InvalidArgument::TtlZero));
    assert_eq!(Ttl::try_from(Duration::from_nanos(1)), Err(InvalidArgument::TtlZero));
    // One millisecond is the smallest ttl; durations round down to whole milliseconds.
    assert_eq!(Ttl::from_millis(1).map(Ttl::as_millis), Ok(1));
    assert_eq!(Ttl::from_duration(Duration::from_micros(1_999)).map(Ttl::as_millis), Ok(1));
    assert_eq!(Ttl::try_from(Duration::from_secs(5)).map(Ttl::as_millis), Ok(5_000));
    assert_eq!(Ttl::from_duration(Duration::MAX).map(Ttl::as_millis), Ok(u64::MAX));
}

/// D3: UNVERSIONED sorts strictly below every stream version, which start at 1; the spec
/// functions order versions that way (C6, C7, L4, L5).
fn d3_unversioned_sorts_below_stream_versions<W: World>() {
    assert!(Version::UNVERSIONED < v(1));
    assert!(v(1) < v(2));
    assert_eq!(Version::stream(0), Err(InvalidArgument::ZeroStreamVersion));
    assert!(Version::UNVERSIONED.is_unversioned() && !v(1).is_unversioned());
    assert_eq!((Version::UNVERSIONED.as_u64(), v(7).as_u64()), (0, 7));
    assert_eq!((Version::from_u64(0), Version::from_u64(7)), (Version::UNVERSIONED, v(7)));
    assert_eq!((Version::UNVERSIONED.to_string(), v(7).to_string()), ("UNVERSIONED".to_owned(), "v7".to_owned()));
    // A key imported without a version is raised by the first stream version, never lowered.
    let imported = Some(confirmed::<W>(S, Version::UNVERSIONED));
    expect::<W, _>(
        confirm::<W>(imported.clone(), 0, S, v(1)),
        Some(confirmed::<W>(S, v(1))),
        ConfirmOutcome::Confirmed,
        Rule::C6,
    );
    let at1 = Some(confirmed::<W>(S, v(1)));
    expect::<W, _>(
        confirm::<W>(at1.clone(), 0, S, Version::UNVERSIONED),
        at1.clone(),
        ConfirmOutcome::AlreadyConfirmed,
        Rule::C7,
    );
    expect::<W, _>(
        release::<W>(at1, 0, S, ReleaseVersion::At(Version::UNVERSIONED)),
        Some(confirmed::<W>(S, v(1))),
        ReleaseOutcome::Kept,
        Rule::L5,
    );
    expect::<W, _>(release::<W>(imported, 0, S, ReleaseVersion::At(v(1))), None, ReleaseOutcome::Released, Rule::L4);
}

/// D4: ANY_VERSION is a `ReleaseVersion`, not a `Version`: confirm takes a `Version`, so it
/// cannot name it (a compile-time fact of the signatures). Even the greatest `Version` is an
/// ordinary version: it keeps the key against older releases, where ANY_VERSION frees it.
fn d4_any_version_exists_only_for_release<W: World>() {
    assert_eq!(ReleaseVersion::ANY_VERSION, ReleaseVersion::Any);
    assert_eq!(ReleaseVersion::from(v(3)), ReleaseVersion::At(v(3)));
    assert_ne!(ReleaseVersion::At(Version::from_u64(u64::MAX)), ReleaseVersion::ANY_VERSION);
    assert_eq!(
        (ReleaseVersion::Any.to_string(), ReleaseVersion::At(v(2)).to_string()),
        ("ANY_VERSION".to_owned(), "v2".to_owned())
    );
    let top = Version::from_u64(u64::MAX);
    let at_top = Some(confirmed::<W>(S, top));
    expect::<W, _>(confirm::<W>(None, 0, S, top), at_top.clone(), ConfirmOutcome::Confirmed, Rule::C1);
    expect::<W, _>(
        release::<W>(at_top.clone(), 0, S, ReleaseVersion::At(v(9))),
        at_top.clone(),
        ReleaseOutcome::Kept,
        Rule::L5,
    );
    expect::<W, _>(
        release::<W>(at_top.clone(), 0, S, ReleaseVersion::At(top)),
        None,
        ReleaseOutcome::Released,
        Rule::L4,
    );
    expect::<W, _>(release::<W>(at_top, 0, S, ReleaseVersion::ANY_VERSION), None, ReleaseOutcome::Released, Rule::L4);
}

#[test]
fn d5_owners_differing_in_any_one_field_are_different_owners() {
    let owner = AggregateRef::parse("user", Some("acme"), "alice").unwrap();
    let others = [
        AggregateRef::parse("users", Some("acme"), "alice").unwrap(),
        AggregateRef::parse("user", Some("globex"), "alice").unwrap(),
        AggregateRef::parse("user", None, "alice").unwrap(),
        AggregateRef::parse("user", Some("acme"), "Alice").unwrap(),
        AggregateRef::parse("user", Some("acme"), "alice ").unwrap(),
    ];
    let hold = HoldId::new("h").unwrap();
    let held = spec::reserve::<_, BTreeSet<HoldId>>(None, at(0), &owner, &hold, ttl(100)).next;
    assert_eq!(spec::reserve(held.clone(), at(1), &owner, &hold, ttl(100)).rule, Rule::R4);
    for other in &others {
        assert_ne!(&owner, other);
        let step = spec::reserve(held.clone(), at(1), other, &hold, ttl(100));
        assert_eq!((step.next, step.outcome, step.rule), (held.clone(), ReserveOutcome::Conflict, Rule::R5), "{other}");
        let confirmed = Some(Reservation::<_, BTreeSet<HoldId>>::confirmed(owner.clone(), v(1)));
        let step = spec::release(confirmed.clone(), at(1), other, ReleaseVersion::Any);
        assert_eq!((step.next, step.outcome, step.rule), (confirmed, ReleaseOutcome::NotHeld, Rule::L6), "{other}");
    }
    // The same fields built twice are the same owner.
    assert_eq!(owner, AggregateRef::parse("user", Some("acme"), "alice").unwrap());
}

#[test]
fn d5_keys_and_hold_ids_are_compared_as_exact_bytes() {
    let key = Key::new("alice").unwrap();
    for other in ["Alice", "alice ", " alice", "ALICE"] {
        assert_ne!(key, Key::new(other).unwrap());
    }
    // "é" precomposed and decomposed are different keys: no Unicode normalisation.
    assert_ne!(Key::new("caf\u{e9}").unwrap(), Key::new("cafe\u{301}").unwrap());
    assert_eq!(key, Key::new(String::from("alice")).unwrap());
    assert_eq!(key.as_str(), "alice");
    // A hold id differing in case or by a trailing space is another hold: R3 joins it, R4 would not.
    let owner = AggregateRef::parse("user", Some("acme"), "alice").unwrap();
    let h = HoldId::new("attempt").unwrap();
    let held = spec::reserve::<_, BTreeSet<HoldId>>(None, at(0), &owner, &h, ttl(100)).next;
    for other in ["Attempt", "attempt "] {
        let other = HoldId::new(other).unwrap();
        let step = spec::reserve(held.clone(), at(1), &owner, &other, ttl(100));
        let expected = Reservation::pending(owner.clone(), BTreeSet::from([h.clone(), other.clone()]), at(101));
        assert_eq!((step.next, step.outcome, step.rule), (expected, ReserveOutcome::Joined, Rule::R3));
    }
}

/// Checks one validated name type: empty and over-max rejected with its own variants, exactly
/// max accepted, lengths counted in bytes.
macro_rules! check_name {
    ($ty:ty, $max:expr, $empty:ident, $long:ident) => {{
        assert_eq!(<$ty>::new(""), Err(InvalidArgument::$empty));
        let exact = "x".repeat($max);
        assert_eq!(<$ty>::new(&exact).map(|n| n.as_str().to_owned()), Ok(exact.clone()));
        assert_eq!(<$ty>::try_from(exact.as_str()).map(|n| n.to_string()), Ok(exact.clone()));
        assert_eq!(<$ty>::new("x".repeat($max + 1)), Err(InvalidArgument::$long { len: $max + 1, max: $max }));
        // Bytes, not characters: "é" is two bytes.
        assert!(<$ty>::new("\u{e9}".repeat($max / 2)).is_ok());
        assert_eq!(<$ty>::new("\u{e9}".repeat($max / 2 + 1)), Err(InvalidArgument::$long { len: $max + 2, max: $max }));
    }};
}

#[test]
fn d6_every_validated_constructor_rejects_empty_and_over_max() {
    assert_eq!((MAX_KEY_LEN, MAX_HOLD_ID_LEN, MAX_NAME_LEN), (512, 128, 256));
    check_name!(Key, MAX_KEY_LEN, EmptyKey, KeyTooLong);
    check_name!(HoldId, MAX_HOLD_ID_LEN, EmptyHoldId, HoldIdTooLong);
    check_name!(Namespace, MAX_NAME_LEN, EmptyNamespace, NamespaceTooLong);
    check_name!(AggregateType, MAX_NAME_LEN, EmptyAggregateType, AggregateTypeTooLong);
    check_name!(TenantId, MAX_NAME_LEN, EmptyTenantId, TenantIdTooLong);
    check_name!(AggregateId, MAX_NAME_LEN, EmptyAggregateId, AggregateIdTooLong);
    assert_eq!(Tenant::id(""), Err(InvalidArgument::EmptyTenantId));
    assert_eq!(Tenant::id("acme"), Ok(Tenant::Id(TenantId::new("acme").unwrap())));
}

#[test]
fn d6_parse_reports_the_invalid_part() {
    let long = "x".repeat(MAX_NAME_LEN + 1);
    assert_eq!(ReservationScope::parse("", Some("acme"), "ns"), Err(InvalidArgument::EmptyAggregateType));
    assert_eq!(ReservationScope::parse("user", Some(""), "ns"), Err(InvalidArgument::EmptyTenantId));
    assert_eq!(ReservationScope::parse("user", Some("acme"), ""), Err(InvalidArgument::EmptyNamespace));
    assert_eq!(
        ReservationScope::parse("user", None, &long),
        Err(InvalidArgument::NamespaceTooLong { len: MAX_NAME_LEN + 1, max: MAX_NAME_LEN })
    );
    assert_eq!(AggregateRef::parse("", Some("acme"), "a"), Err(InvalidArgument::EmptyAggregateType));
    assert_eq!(AggregateRef::parse("user", Some(""), "a"), Err(InvalidArgument::EmptyTenantId));
    assert_eq!(AggregateRef::parse("user", Some("acme"), ""), Err(InvalidArgument::EmptyAggregateId));
    let scope = ReservationScope::parse("user", Some("acme"), "user-name").unwrap();
    let parts = ReservationScope::new(
        AggregateType::new("user").unwrap(),
        Tenant::id("acme").unwrap(),
        Namespace::new("user-name").unwrap(),
    );
    assert_eq!(scope, parts);
    assert_eq!(scope.to_string(), "user/acme/user-name");
    assert_eq!(ReservationScope::parse("user", None, "email").unwrap().to_string(), "user/SYSTEM_TENANT/email");
    let owner = AggregateRef::parse("user", None, "root").unwrap();
    let built =
        AggregateRef::new(AggregateType::new("user").unwrap(), SYSTEM_TENANT, AggregateId::new("root").unwrap());
    assert_eq!(owner, built);
    assert_eq!(owner.to_string(), "user/SYSTEM_TENANT/root");
    assert_eq!(AggregateRef::parse("user", Some("acme"), "a1").unwrap().to_string(), "user/acme/a1");
}

#[test]
fn d6_scope_admits_only_owners_of_its_type_and_tenant() {
    let owner = |ty: &str, tenant: Option<&str>| AggregateRef::parse(ty, tenant, "id-1").unwrap();
    let acme = ReservationScope::parse("user", Some("acme"), "user-name").unwrap();
    assert_eq!(acme.admits(&owner("user", Some("acme"))), Ok(()));
    assert_eq!(acme.admits(&owner("account", Some("acme"))), Err(InvalidArgument::OwnerTypeMismatch));
    assert_eq!(acme.admits(&owner("User", Some("acme"))), Err(InvalidArgument::OwnerTypeMismatch));
    assert_eq!(acme.admits(&owner("user", Some("globex"))), Err(InvalidArgument::TenantMismatch));
    assert_eq!(acme.admits(&owner("user", None)), Err(InvalidArgument::TenantMismatch));
    // Both wrong: either error may be reported.
    let both = acme.admits(&owner("account", Some("globex")));
    assert!(matches!(both, Err(InvalidArgument::OwnerTypeMismatch | InvalidArgument::TenantMismatch)), "{both:?}");
    // SYSTEM_TENANT spans the type's tenants; it still checks the type.
    let system = ReservationScope::parse("user", None, "email").unwrap();
    assert_eq!(system.tenant, SYSTEM_TENANT);
    for tenant in [Some("acme"), Some("globex"), None] {
        assert_eq!(system.admits(&owner("user", tenant)), Ok(()));
        assert_eq!(system.admits(&owner("account", tenant)), Err(InvalidArgument::OwnerTypeMismatch));
    }
}

/// Expired pending reservations to compare with a free key: both owners, with and without the
/// operation's hold, one and several holds.
fn expired_variants<W: World>() -> Vec<Res<W>> {
    let mut out = Vec::new();
    for owner in [S, O] {
        for hold_ids in [&[1][..], &[2], &[1, 2]] {
            out.push(pending::<W>(owner, hold_ids, 100));
        }
    }
    out
}

/// D7: for every operation, an expired pending reservation (at its expiry, just after, and at
/// the end of time) gives exactly the step of a free key, apart from the rule id where the
/// table gives the expired case its own row (R2 for R1, C3 or C4 for C1).
fn d7_expired_pending_behaves_exactly_like_free_key<W: World>() {
    for expired in expired_variants::<W>() {
        let own = *expired.owner() == W::owner(S);
        for now in [100, 101, u64::MAX] {
            let cur = Some(expired.clone());
            let (free, exp) = (reserve::<W>(None, now, S, 1, 10), reserve::<W>(cur.clone(), now, S, 1, 10));
            assert_eq!((&exp.next, exp.outcome, free.rule, exp.rule), (&free.next, free.outcome, Rule::R1, Rule::R2));
            for version in [Version::UNVERSIONED, v(1), v(5)] {
                let (free, exp) = (confirm::<W>(None, now, S, version), confirm::<W>(cur.clone(), now, S, version));
                let rule = if own { Rule::C3 } else { Rule::C4 };
                assert_eq!((&exp.next, exp.outcome, free.rule, exp.rule), (&free.next, free.outcome, Rule::C1, rule));
            }
            for version in all_release_versions() {
                assert_eq!(release::<W>(cur.clone(), now, S, version), release::<W>(None, now, S, version));
                assert_eq!(release::<W>(cur.clone(), now, S, version).rule, Rule::L1);
            }
            for hold in [1, 2, 3] {
                assert_eq!(abandon::<W>(cur.clone(), now, S, hold), abandon::<W>(None, now, S, hold));
                assert_eq!(abandon::<W>(cur.clone(), now, S, hold).rule, Rule::A1);
            }
            assert_eq!(spec::lookup(cur.as_ref(), at(now)), None);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the table as a whole, and the values the spec functions work on

/// Every state of one key over owners {S, O}, holds {1, 2} and versions {UNVERSIONED, 1, 2},
/// pending ones expiring at 100.
fn small_states<W: World>() -> Vec<Option<Res<W>>> {
    let mut out = vec![None];
    for owner in [S, O] {
        for hold_ids in [&[1][..], &[2], &[1, 2]] {
            out.push(Some(pending::<W>(owner, hold_ids, 100)));
        }
        for version in [Version::UNVERSIONED, v(1), v(2)] {
            out.push(Some(confirmed::<W>(owner, version)));
        }
    }
    out
}

/// Checks what holds of every step, whichever its row: the rule is of the operation's table,
/// and when the key is held live by another owner the step leaves it exactly as it was.
fn check_step<W: World, Out: Debug>(
    current: &Option<Res<W>>,
    now: u64,
    step: StepOf<W, Out>,
    rules: &[Rule],
    seen: &mut RuleSet,
) {
    assert!(rules.contains(&step.rule), "{:?} reported for {current:?}", step.rule);
    seen.insert(step.rule);
    let others_live = current.as_ref().filter(|r| r.is_live(at(now)) && *r.owner() != W::owner(S));
    if others_live.is_some() {
        assert_eq!(&step.next, current, "{} changed another owner's reservation", step.rule);
    }
}

/// Over every small state, time, and argument, every step reports a row of its own table,
/// never touches another owner's live reservation, and together the steps reach all 27 rows.
fn every_row_is_reached_and_no_step_touches_another_owners_live_reservation<W: World>() {
    use Rule::*;
    let mut seen = RuleSet::EMPTY;
    for current in small_states::<W>() {
        for now in [99, 100] {
            for hold in [1, 2, 3] {
                for ttl_ms in [1, 500] {
                    check_step::<W, _>(
                        &current,
                        now,
                        reserve::<W>(current.clone(), now, S, hold, ttl_ms),
                        &[R1, R2, R3, R4, R5, R6, R7],
                        &mut seen,
                    );
                }
                check_step::<W, _>(
                    &current,
                    now,
                    abandon::<W>(current.clone(), now, S, hold),
                    &[A1, A2, A3, A4, A5, A6],
                    &mut seen,
                );
            }
            for version in [Version::UNVERSIONED, v(1), v(2), v(3)] {
                check_step::<W, _>(
                    &current,
                    now,
                    confirm::<W>(current.clone(), now, S, version),
                    &[C1, C2, C3, C4, C5, C6, C7, C8],
                    &mut seen,
                );
                let release_step = release::<W>(current.clone(), now, S, ReleaseVersion::At(version));
                check_step::<W, _>(&current, now, release_step, &[L1, L2, L3, L4, L5, L6], &mut seen);
            }
            check_step::<W, _>(
                &current,
                now,
                release::<W>(current.clone(), now, S, ReleaseVersion::Any),
                &[L1, L2, L3, L4, L5, L6],
                &mut seen,
            );
        }
    }
    assert_eq!(seen.missing_transitions(), Vec::<Rule>::new());
}

/// Rule texts are read from SPEC.md, so they cannot disagree with it; this pins the other way:
/// every rule row of SPEC.md names a rule of `Rule::ALL`, once.
#[test]
fn spec_md_has_one_row_per_rule_and_no_other() {
    let spec = include_str!("../../SPEC.md");
    let ids: Vec<&str> = spec
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next())
        .filter(|id| {
            (2..=3).contains(&id.len())
                && id.as_bytes()[0].is_ascii_uppercase()
                && id.as_bytes()[1..].iter().all(u8::is_ascii_digit)
        })
        .collect();
    let mut all: Vec<&str> = Rule::ALL.iter().map(|r| r.id()).collect();
    let mut found = ids.clone();
    found.sort_unstable();
    all.sort_unstable();
    assert_eq!(found, all, "SPEC.md's rule rows (each once) against Rule::ALL");
}

#[test]
fn rule_ids_texts_and_sets() {
    assert_eq!(Rule::ALL.len(), 40);
    for (i, rule) in Rule::ALL.iter().enumerate() {
        assert_eq!(rule.id(), format!("{rule:?}"));
        assert_eq!(rule.to_string(), rule.id());
        assert!(rule.text().len() > 20, "{rule}");
        for other in &Rule::ALL[..i] {
            assert_ne!(rule.text(), other.text(), "{rule} and {other} share a text");
        }
    }
    assert!(Rule::R3.text().contains("Joined") && Rule::D1.text().contains("saturates"));
    assert_eq!(Rule::R1.text(), "reserve on `F`: `P{o,{h},now+ttl}`, Taken");
    assert_eq!(Rule::L1.text(), "release on `F`, or `P` expired: free, NotHeld");
    assert_eq!(&Rule::TRANSITIONS[..], &Rule::ALL[..27]);
    assert_eq!((Rule::TRANSITIONS[0], Rule::TRANSITIONS[26]), (Rule::R1, Rule::A6));

    let mut set = RuleSet::EMPTY;
    assert!(set.is_empty() && RuleSet::default() == set);
    assert_eq!(set.len(), 0);
    assert_eq!(set.missing_transitions(), Rule::TRANSITIONS.to_vec());
    set.insert(Rule::C7);
    set.insert(Rule::C7);
    assert!(set.contains(Rule::C7) && !set.contains(Rule::C6) && !set.contains(Rule::R1));
    assert!(!set.is_empty() && set.len() == 1);
    let more: RuleSet = [Rule::R1, Rule::C7, Rule::D7, Rule::A6].into_iter().collect();
    let union = set.union(more);
    assert_eq!(union.len(), 4);
    assert_eq!(union.iter().collect::<Vec<_>>(), vec![Rule::R1, Rule::C7, Rule::A6, Rule::D7]);
    assert_eq!(union.missing_transitions().len(), 27 - 3);
    assert!(!union.missing_transitions().contains(&Rule::A6));
    let all: RuleSet = Rule::ALL.into_iter().collect();
    assert_eq!((all.len(), all.iter().count()), (40, 40));
    assert!(all.missing_transitions().is_empty());
    let values: RuleSet = Rule::ALL[27..].iter().copied().collect();
    assert_eq!(values.missing_transitions(), Rule::TRANSITIONS.to_vec());
}

/// The hold sets behave as sets of hold ids.
fn hold_sets_behave_as_sets<W: World>() {
    let mut set = W::Holds::single(W::hold(5));
    assert!(set.contains(&W::hold(5)) && !set.contains(&W::hold(6)));
    assert_eq!((set.len(), set.is_empty()), (1, false));
    set.insert(W::hold(63));
    set.insert(W::hold(63));
    assert_eq!(set.len(), 2);
    assert!(set.contains(&W::hold(63)));
    assert!(!set.remove(&W::hold(6)));
    assert!(set.remove(&W::hold(5)));
    assert!(!set.contains(&W::hold(5)) && set.contains(&W::hold(63)));
    assert!(set.remove(&W::hold(63)));
    assert_eq!((set.len(), set.is_empty()), (0, true));
}

#[test]
fn hold_bits_are_below_64() {
    assert_eq!(HoldBit::new(0).map(HoldBit::get), Some(0));
    assert_eq!(HoldBit::new(63).map(HoldBit::get), Some(63));
    assert_eq!(HoldBit::new(64), None);
    assert_eq!(HoldBit::new(255), None);
    let mut set = BitHolds::single(HoldBit::new(0).unwrap());
    set.insert(HoldBit::new(63).unwrap());
    assert_eq!(set.bits(), 1 | 1 << 63);
    assert_eq!(BitHolds::default().bits(), 0);
}

/// A pending reservation always has a hold; the accessors give back what it was built from.
fn reservation_values_and_accessors<W: World>() {
    let mut empty = W::Holds::single(W::hold(1));
    empty.remove(&W::hold(1));
    assert!(Pending::new(W::owner(S), empty.clone(), at(5)).is_none());
    assert!(Reservation::pending(W::owner(S), empty, at(5)).is_none());

    let p = Pending::new(W::owner(O), holds::<W>(&[1, 2]), at(5)).unwrap();
    assert_eq!((p.owner(), p.holds(), p.expires_at()), (&W::owner(O), &holds::<W>(&[1, 2]), at(5)));
    assert!(p.is_live(at(4)) && !p.is_live(at(5)));
    assert_eq!(p.clone().into_parts(), (W::owner(O), holds::<W>(&[1, 2]), at(5)));

    let r = Reservation::Pending(p.clone());
    assert_eq!((r.owner(), r.as_pending(), r.as_confirmed()), (&W::owner(O), Some(&p), None));
    assert!(r.is_live(at(4)) && !r.is_live(at(5)));

    let c = confirmed::<W>(S, v(2));
    let expected = Confirmed { owner: W::owner(S), version: v(2) };
    assert_eq!((c.owner(), c.as_pending(), c.as_confirmed()), (&W::owner(S), None, Some(&expected)));
    assert!(c.is_live(Instant::MAX));
}

/// Runs each generic rule check as a `#[test]` of the same name, on both instantiations.
macro_rules! on_both {
    ($($name:ident),* $(,)?) => {
        mod on_both {
            $(
                #[test]
                fn $name() {
                    super::$name::<super::Stores>();
                    super::$name::<super::Model>();
                }
            )*
        }
    };
}

on_both!(
    r1_free_key_is_taken_pending_until_now_plus_ttl,
    r2_expired_pending_of_anyone_is_taken_afresh,
    r3_live_own_pending_joins_hold,
    r4_live_own_pending_with_same_hold_keeps_holds_and_later_expiry,
    r5_live_pending_of_other_owner_conflicts,
    r6_own_confirmed_is_already_confirmed,
    r7_other_owners_confirmed_conflicts,
    c1_free_key_is_taken_confirmed,
    c2_live_own_pending_is_confirmed_and_holds_cleared,
    c3_expired_own_pending_is_still_confirmed,
    c4_expired_pending_of_other_owner_gives_way,
    c5_live_pending_of_other_owner_conflicts,
    c6_greater_version_raises_confirmed_version,
    c7_same_or_older_version_is_already_confirmed,
    c8_other_owners_confirmed_conflicts_at_any_version,
    l1_free_or_expired_pending_is_not_held,
    l2_live_own_pending_is_released_at_any_version,
    l3_live_pending_of_other_owner_is_not_held,
    l4_release_at_or_above_confirmed_version_or_any_frees,
    l5_release_of_older_fact_is_kept,
    l6_other_owners_confirmed_is_not_held,
    a1_free_or_expired_pending_is_not_held,
    a2_last_hold_abandoned_frees_key,
    a3_one_of_several_holds_abandoned_keeps_key_and_expiry,
    a4_unknown_hold_is_not_held,
    a5_other_owners_reservation_is_not_held,
    a6_own_confirmed_is_never_abandoned,
    lookup_sees_live_pending_and_confirmed_only,
    d1_live_until_expires_at_minus_one_expired_at_expires_at,
    d1_now_plus_ttl_saturates_at_instant_max,
    d3_unversioned_sorts_below_stream_versions,
    d4_any_version_exists_only_for_release,
    d7_expired_pending_behaves_exactly_like_free_key,
    every_row_is_reached_and_no_step_touches_another_owners_live_reservation,
    hold_sets_behave_as_sets,
    reservation_values_and_accessors,
);

fn frank() -> AggregateRef {
    AggregateRef::parse("user", Some("acme"), "frank").unwrap()
}

/// D8: versions compare as unsigned 64-bit integers: one at or above 2^63 is greater than every
/// one below it (a signed comparison would put it below zero).
#[test]
fn d8_versions_compare_unsigned_above_two_to_the_63() {
    let high = 1u64 << 63;
    let at_high = Some(Reservation::<AggregateRef, BTreeSet<HoldId>>::confirmed(frank(), v(high)));
    for below in [high - 1, 1, 0] {
        let step = spec::confirm(at_high.clone(), at(0), &frank(), Version::from_u64(below));
        assert_eq!((step.outcome, step.rule), (ConfirmOutcome::AlreadyConfirmed, Rule::C7), "{below}");
        let step = spec::release(at_high.clone(), at(0), &frank(), ReleaseVersion::At(Version::from_u64(below)));
        assert_eq!((step.outcome, step.rule), (ReleaseOutcome::Kept, Rule::L5), "{below}");
    }
    let step = spec::confirm(at_high.clone(), at(0), &frank(), v(u64::MAX));
    assert_eq!((step.outcome, step.rule), (ConfirmOutcome::Confirmed, Rule::C6));
    assert!(Version::from_u64(high) > Version::from_u64(high - 1));
    assert_eq!(Version::UNVERSIONED.as_u64(), 0);
}

/// D8: a reserve at the clock's last instant takes a free key (R1) and writes a reservation that
/// is expired at once; the longest TTL saturates at that instant.
#[test]
fn d8_a_reserve_at_the_last_instant_is_taken_and_expired_at_once() {
    let h = HoldId::new("h1").unwrap();
    let step = spec::reserve::<_, BTreeSet<HoldId>>(None, Instant::MAX, &frank(), &h, ttl(1));
    assert_eq!((step.outcome, step.rule), (ReserveOutcome::Taken, Rule::R1));
    assert_eq!(step.next.as_ref().and_then(Reservation::as_pending).map(Pending::expires_at), Some(Instant::MAX));
    assert_eq!(spec::lookup(step.next.as_ref(), Instant::MAX), None);
    let step = spec::reserve::<_, BTreeSet<HoldId>>(None, at(5), &frank(), &h, ttl(u64::MAX));
    assert_eq!(step.next.as_ref().and_then(Reservation::as_pending).map(Pending::expires_at), Some(Instant::MAX));
    assert!(spec::lookup(step.next.as_ref(), Instant::MAX.saturating_sub_millis(1)).is_some());
}

/// D9: limits are inclusive and count UTF-8 bytes, whatever the characters' widths.
#[test]
fn d9_limits_are_inclusive_and_count_utf8_bytes() {
    let crabs = "\u{1f980}".repeat(MAX_KEY_LEN / 4);
    assert_eq!(Key::new(&crabs).map(|k| k.as_str().len()), Ok(512));
    assert_eq!(Key::new(format!("{crabs}x")), Err(InvalidArgument::KeyTooLong { len: 513, max: 512 }));
    let names = "\u{1f980}".repeat(MAX_NAME_LEN / 4);
    assert!(AggregateRef::parse(&names, Some(&names), &names).is_ok());
    assert!(ReservationScope::parse(&names, Some(&names), &names).is_ok());
    assert_eq!(
        AggregateId::new(format!("{names}\u{e9}")),
        Err(InvalidArgument::AggregateIdTooLong { len: 258, max: 256 })
    );
    assert_eq!(HoldId::new("\u{1f980}".repeat(33)), Err(InvalidArgument::HoldIdTooLong { len: 132, max: 128 }));
}

/// D10: a clock never goes back: `Monotonic` holds the latest instant while its source is set
/// back, and follows the source again once it passes; `SystemClock` never reads backwards.
#[test]
fn d10_the_clock_never_goes_back() {
    let source = ManualClock::new(at(1_000));
    let clock = Monotonic::new(source.clone());
    assert_eq!(clock.latest(), Instant::ZERO);
    assert_eq!(clock.now(), at(1_000));
    source.set(at(400));
    assert_eq!(clock.latest(), at(1_000));
    assert_eq!(clock.now(), at(1_000));
    source.set(at(1_001));
    assert_eq!(clock.now(), at(1_001));
    source.set(at(0));
    assert_eq!(clock.now(), at(1_001));
    // Reopened on the latest instant its first life read, it does not go back either.
    let reopened = Monotonic::starting_at(source.clone(), clock.latest());
    assert_eq!((reopened.latest(), reopened.now()), (at(1_001), at(1_001)));
    source.set(at(1_002));
    assert_eq!(reopened.now(), at(1_002));
    let wall = SystemClock;
    let mut last = wall.now();
    for _ in 0..1_000 {
        let now = wall.now();
        assert!(now >= last);
        last = now;
    }
}

/// D11: a live pending reservation is looked up with its absolute expiry and every hold, at any
/// instant before it; a confirmed one with its version only.
#[test]
fn d11_lookup_shows_the_absolute_expiry_and_every_hold() {
    let (h1, h2) = (HoldId::new("h1").unwrap(), HoldId::new("h2").unwrap());
    let first = spec::reserve::<_, BTreeSet<HoldId>>(None, at(100), &frank(), &h1, ttl(50)).next;
    let joined = spec::reserve(first, at(120), &frank(), &h2, ttl(10)).next;
    let want = Reservation::pending(frank(), BTreeSet::from([h1, h2]), at(150));
    for now in [120, 130, 149] {
        assert_eq!(spec::lookup(joined.as_ref(), at(now)), want.as_ref(), "{now}");
    }
    assert_eq!(spec::lookup(joined.as_ref(), at(150)), None);
    let confirmed = spec::confirm(joined, at(140), &frank(), v(3)).next;
    assert_eq!(spec::lookup(confirmed.as_ref(), at(10_000)), Some(&Reservation::confirmed(frank(), v(3))));
}

/// S1: two scopes are one only when every part is equal; parts are never joined, so no spelling
/// of one part can reach into another, and `SYSTEM_TENANT` is no tenant id.
#[test]
fn s1_scopes_are_equal_only_part_by_part() {
    let scope = |ty: &str, tenant: Option<&str>, ns: &str| ReservationScope::parse(ty, tenant, ns).unwrap();
    assert_ne!(scope("user", Some("a/b"), "c"), scope("user", Some("a"), "b/c"));
    assert_ne!(scope("user/a", Some("b"), "c"), scope("user", Some("a/b"), "c"));
    assert_ne!(scope("user", None, "email"), scope("user", Some("SYSTEM_TENANT"), "email"));
    assert_ne!(scope("user", Some("acme"), "email"), scope("User", Some("acme"), "email"));
    assert_eq!(scope("user", Some("acme"), "email"), scope("user", Some("acme"), "email"));
}

#[test]
fn d10_a_held_clock_reading_waits_for_its_release_and_reads_the_instant_before_it() {
    let clock = ManualClock::new(at(100));
    assert!(!clock.hold_pending());
    let hold = clock.hold_next_reading();
    assert!(clock.hold_pending(), "a hold waits for the next reading");
    // A peek is no reading: it neither takes the hold nor waits.
    assert_eq!(clock.peek(), at(100));
    assert!(clock.hold_pending() && !hold.wait_reached(std::time::Duration::from_millis(10)), "no reading yet");
    let reader = {
        let clock = clock.clone();
        std::thread::spawn(move || clock.now())
    };
    assert!(hold.wait_reached(std::time::Duration::from_secs(5)), "the reading arrived");
    assert!(!clock.hold_pending(), "the reading took the hold");
    clock.set(at(200));
    assert!(!reader.is_finished(), "a held reading waits");
    hold.release();
    assert_eq!(reader.join().expect("no panic"), at(100), "it read its instant before it was held");
    // Only the next reading is held.
    assert_eq!(clock.now(), at(200));
}
