//! Feature `serde`: every value type round-trips, an invalid value is refused with the error its
//! constructor gives, and the JSON forms are the driver protocol's.

use std::collections::BTreeSet;
use std::fmt::Debug;

use proptest::prelude::*;
use reservation_store::spec::{Confirmed, Pending, Reservation};
use reservation_store::*;
use serde::de::value::Error as ValueError;
use serde::de::{DeserializeOwned, IntoDeserializer};
use serde::{Deserialize, Serialize};

/// `value` written as JSON and read back.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T) {
    let json = serde_json::to_string(value).expect("every value can be written");
    let back: T = serde_json::from_str(&json).unwrap_or_else(|e| panic!("{json} does not read back: {e}"));
    assert_eq!(&back, value, "{json}");
}

/// The error of reading `json` as `T`, which must be refused.
fn refused<T: DeserializeOwned + Debug>(json: &str) -> String {
    match serde_json::from_str::<T>(json) {
        Ok(value) => panic!("{json} was read as {value:?}"),
        Err(e) => e.to_string(),
    }
}

/// Asserts that reading `json` as `T` is refused with an error that says `says`.
fn refused_saying<T: DeserializeOwned + Debug>(json: &str, says: &str) {
    let error = refused::<T>(json);
    assert!(error.contains(says), "{json}: {error:?} does not say {says:?}");
}

/// Text of 1 to `max_chars` characters of any kind, up to four bytes each.
fn text(max_chars: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(any::<char>(), 1..=max_chars).prop_map(String::from_iter)
}

fn tenant() -> impl Strategy<Value = Tenant> {
    proptest::option::of(text(64)).prop_map(|t| t.map_or(Tenant::System, |t| Tenant::id(t).unwrap()))
}

fn scope() -> impl Strategy<Value = ReservationScope> {
    (text(64), tenant(), text(64)).prop_map(|(t, tenant, n)| {
        ReservationScope::new(AggregateType::new(t).unwrap(), tenant, Namespace::new(n).unwrap())
    })
}

fn owner() -> impl Strategy<Value = AggregateRef> {
    (text(64), tenant(), text(64)).prop_map(|(t, tenant, id)| {
        AggregateRef::new(AggregateType::new(t).unwrap(), tenant, AggregateId::new(id).unwrap())
    })
}

fn key() -> impl Strategy<Value = Key> {
    text(128).prop_map(|k| Key::new(k).unwrap())
}

fn hold() -> impl Strategy<Value = HoldId> {
    text(32).prop_map(|h| HoldId::new(h).unwrap())
}

fn ttl() -> impl Strategy<Value = Ttl> {
    (1..=u64::MAX).prop_map(|t| Ttl::from_millis(t).unwrap())
}

fn release_version() -> impl Strategy<Value = ReleaseVersion> {
    prop_oneof![Just(ReleaseVersion::Any), any::<u64>().prop_map(|v| ReleaseVersion::At(Version::from_u64(v)))]
}

fn operation() -> impl Strategy<Value = Operation<AggregateRef, HoldId>> {
    prop_oneof![
        (owner(), hold(), ttl()).prop_map(|(owner, hold, ttl)| Operation::Reserve { owner, hold, ttl }),
        (owner(), any::<u64>()).prop_map(|(owner, v)| Operation::Confirm { owner, version: Version::from_u64(v) }),
        (owner(), release_version()).prop_map(|(owner, version)| Operation::Release { owner, version }),
        (owner(), hold()).prop_map(|(owner, hold)| Operation::Abandon { owner, hold }),
    ]
}

fn reservation() -> impl Strategy<Value = StoredReservation> {
    prop_oneof![
        (owner(), proptest::collection::btree_set(hold(), 1..4), any::<u64>()).prop_map(|(owner, holds, at)| {
            StoredReservation::pending(owner, holds, Instant::from_millis(at)).unwrap()
        }),
        (owner(), any::<u64>()).prop_map(|(owner, v)| StoredReservation::confirmed(owner, Version::from_u64(v))),
    ]
}

proptest! {
    #[test]
    fn every_value_type_round_trips(
        scope in scope(),
        owner in owner(),
        key in key(),
        hold in hold(),
        at in any::<u64>(),
        ttl in ttl(),
        version in any::<u64>(),
        release in release_version(),
        operation in operation(),
        reservation in reservation(),
    ) {
        round_trip(&scope);
        round_trip(&scope.tenant);
        round_trip(&scope.aggregate_type);
        round_trip(&scope.namespace);
        round_trip(&owner);
        round_trip(&owner.id);
        round_trip(&key);
        round_trip(&hold);
        round_trip(&Instant::from_millis(at));
        round_trip(&ttl);
        round_trip(&Version::from_u64(version));
        round_trip(&release);
        round_trip(&operation);
        round_trip(&reservation);
        match &reservation {
            Reservation::Pending(pending) => round_trip(pending),
            Reservation::Confirmed(confirmed) => round_trip(confirmed),
        }
    }
}

#[test]
fn outcomes_and_kinds_round_trip_by_name() {
    for outcome in Outcome::ALL {
        assert_eq!(serde_json::to_string(&outcome).unwrap(), format!("\"{}\"", outcome.name()));
        round_trip(&outcome);
        if let Ok(o) = ReserveOutcome::try_from(outcome) {
            round_trip(&o);
        }
        if let Ok(o) = ConfirmOutcome::try_from(outcome) {
            round_trip(&o);
        }
        if let Ok(o) = ReleaseOutcome::try_from(outcome) {
            round_trip(&o);
        }
        if let Ok(o) = AbandonOutcome::try_from(outcome) {
            round_trip(&o);
        }
    }
    for kind in OperationKind::ALL {
        assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{}\"", kind.name()));
        round_trip(&kind);
    }
}

#[test]
fn the_spec_states_round_trip_with_other_owners_and_hold_sets() {
    let holds: BTreeSet<u8> = [3, 1].into();
    let pending: Reservation<u32, BTreeSet<u8>> = Reservation::pending(7, holds, Instant::from_millis(9)).unwrap();
    assert_eq!(
        serde_json::to_string(&pending).unwrap(),
        r#"{"state":"pending","owner":7,"holds":[1,3],"expires_at":9}"#
    );
    round_trip(&pending);
    round_trip(&Reservation::<u32, BTreeSet<u8>>::confirmed(7, Version::UNVERSIONED));
    round_trip(&Operation::<u32, u8>::Abandon { owner: 7, hold: 3 });
}

#[test]
fn the_json_forms_are_the_protocols() {
    let scope = ReservationScope::parse("user", Some("acme"), "user-name").unwrap();
    let owner = AggregateRef::parse("user", Some("acme"), "a-1").unwrap();
    let system = AggregateRef::parse("user", None, "a-2").unwrap();
    let h1 = HoldId::new("h1").unwrap();
    let json = |value: &dyn erased::Json| value.json();
    assert_eq!(json(&scope), r#"{"aggregate_type":"user","tenant":"acme","namespace":"user-name"}"#);
    assert_eq!(json(&system), r#"{"aggregate_type":"user","tenant":null,"id":"a-2"}"#);
    assert_eq!(json(&Key::new("alice").unwrap()), r#""alice""#);
    assert_eq!(json(&Instant::from_millis(1_005_000)), "1005000");
    assert_eq!(json(&Ttl::from_millis(5_000).unwrap()), "5000");
    assert_eq!(json(&Version::UNVERSIONED), "0");
    assert_eq!(json(&Version::stream(u64::MAX).unwrap()), "18446744073709551615");
    assert_eq!(json(&ReleaseVersion::ANY_VERSION), r#""ANY""#);
    assert_eq!(json(&ReleaseVersion::from(Version::stream(2).unwrap())), "2");
    // PROTOCOL.md's lookup answer, and its reserve's arguments.
    let pending = StoredReservation::pending(owner.clone(), [h1.clone()].into(), Instant::from_millis(1_005_000));
    assert_eq!(
        json(&pending.unwrap()),
        r#"{"state":"pending","owner":{"aggregate_type":"user","tenant":"acme","id":"a-1"},"holds":["h1"],"expires_at":1005000}"#
    );
    let reserve = Operation::Reserve { owner: owner.clone(), hold: h1, ttl: Ttl::from_millis(5_000).unwrap() };
    assert_eq!(
        json(&reserve),
        r#"{"op":"reserve","owner":{"aggregate_type":"user","tenant":"acme","id":"a-1"},"hold":"h1","ttl":5000}"#
    );
    let release = Operation::<_, HoldId>::Release { owner: system.clone(), version: ReleaseVersion::ANY_VERSION };
    assert_eq!(
        json(&release),
        r#"{"op":"release","owner":{"aggregate_type":"user","tenant":null,"id":"a-2"},"version":"ANY"}"#
    );
    let confirmed = StoredReservation::confirmed(system, Version::stream(3).unwrap());
    assert_eq!(
        json(&confirmed),
        r#"{"state":"confirmed","owner":{"aggregate_type":"user","tenant":null,"id":"a-2"},"version":3}"#
    );
}

/// `serde_json::to_string` behind a trait object, so that one closure writes values of any type.
mod erased {
    pub trait Json {
        fn json(&self) -> String;
    }

    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> String {
            serde_json::to_string(self).expect("every value can be written")
        }
    }
}

#[test]
fn holds_read_in_any_order_are_one_set() {
    let pending: StoredReservation = serde_json::from_str(
        r#"{"state":"pending","owner":{"aggregate_type":"t","tenant":null,"id":"o"},"holds":["b","a","b"],"expires_at":1}"#,
    )
    .unwrap();
    let holds: Vec<&str> = pending.as_pending().unwrap().holds().iter().map(HoldId::as_str).collect();
    assert_eq!(holds, ["a", "b"]);
}

/// Each name type refuses the empty string, and one byte over its maximum, with its
/// constructor's error; its maximum itself, in two-byte characters, is read.
#[test]
fn names_are_validated_as_their_constructors_do() {
    fn check<T: DeserializeOwned + Debug + AsRef<str>>(max: usize, what: &str) {
        refused_saying::<T>(r#""""#, &format!("D6: the {what} is empty"));
        let over = format!("\"{}\"", "a".repeat(max + 1));
        refused_saying::<T>(&over, &format!("D6: the {what} is {} bytes long, over the maximum of {max}", max + 1));
        let longest = "é".repeat(max / 2);
        let read: T = serde_json::from_str(&format!("\"{longest}\"")).unwrap();
        assert_eq!(read.as_ref(), longest);
        refused_saying::<T>("7", "invalid type: integer `7`, expected");
        refused_saying::<T>("null", "invalid type: null, expected");
    }
    check::<Key>(MAX_KEY_LEN, "key");
    check::<HoldId>(MAX_HOLD_ID_LEN, "hold id");
    check::<AggregateType>(MAX_NAME_LEN, "aggregate type");
    check::<TenantId>(MAX_NAME_LEN, "tenant id");
    check::<Namespace>(MAX_NAME_LEN, "namespace");
    check::<AggregateId>(MAX_NAME_LEN, "aggregate id");
    refused_saying::<Key>("7", "expected a key: a string of 1 to 512 bytes");
    refused_saying::<HoldId>("7", "expected a hold id: a string of 1 to 128 bytes");
}

#[test]
fn a_tenant_is_an_id_or_null_and_a_scopes_or_owners_must_be_written() {
    assert_eq!(serde_json::from_str::<Tenant>("null").unwrap(), SYSTEM_TENANT);
    assert_eq!(serde_json::from_str::<Tenant>(r#""acme""#).unwrap(), Tenant::id("acme").unwrap());
    refused_saying::<Tenant>(r#""""#, "D6: the tenant id is empty");
    refused_saying::<ReservationScope>(r#"{"aggregate_type":"user","namespace":"n"}"#, "missing field `tenant`");
    refused_saying::<AggregateRef>(r#"{"aggregate_type":"user","id":"a"}"#, "missing field `tenant`");
    refused_saying::<AggregateRef>(r#"{"aggregate_type":"user","tenant":"","id":"a"}"#, "D6: the tenant id is empty");
    refused_saying::<AggregateRef>(
        r#"{"aggregate_type":"","tenant":null,"id":"a"}"#,
        "D6: the aggregate type is empty",
    );
    refused_saying::<ReservationScope>(
        r#"{"aggregate_type":"u","tenant":null,"namespace":""}"#,
        "D6: the namespace is empty",
    );
    let scope: ReservationScope =
        serde_json::from_str(r#"{"aggregate_type":"u","tenant":null,"namespace":"n"}"#).unwrap();
    assert_eq!(scope, ReservationScope::parse("u", None, "n").unwrap());
}

#[test]
fn times_and_versions_are_whole_numbers_and_a_ttl_is_never_zero() {
    refused_saying::<Ttl>("0", "D2: the time to live is zero");
    assert_eq!(serde_json::from_str::<Ttl>("1").unwrap(), Ttl::from_millis(1).unwrap());
    for json in ["-1", "1.5", "\"5\"", "18446744073709551616", "null"] {
        refused::<Ttl>(json);
        refused::<Instant>(json);
        refused::<Version>(json);
    }
    assert_eq!(serde_json::from_str::<Version>("0").unwrap(), Version::UNVERSIONED);
    assert_eq!(serde_json::from_str::<Instant>("18446744073709551615").unwrap(), Instant::MAX);
}

#[test]
fn a_release_version_is_a_number_or_any() {
    assert_eq!(serde_json::from_str::<ReleaseVersion>(r#""ANY""#).unwrap(), ReleaseVersion::Any);
    assert_eq!(serde_json::from_str::<ReleaseVersion>("0").unwrap(), ReleaseVersion::At(Version::UNVERSIONED));
    for json in [r#""any""#, r#""ANY_VERSION""#, r#""5""#, "-1", "1.5", "null", "18446744073709551616"] {
        refused_saying::<ReleaseVersion>(json, "expected a version (an integer from 0 to 2^64-1) or \"ANY\"");
    }
    // Formats that read every integer as signed (TOML) give a non-negative one as such.
    let signed = |n: i64| ReleaseVersion::deserialize(n.into_deserializer());
    assert_eq!(signed(7).unwrap(), ReleaseVersion::At(Version::stream(7).unwrap()));
    let negative: Result<ReleaseVersion, ValueError> = signed(-1);
    assert!(negative.unwrap_err().to_string().contains("invalid value: integer `-1`"));
}

#[test]
fn a_pending_reservation_without_a_hold_is_refused() {
    let owner = r#"{"aggregate_type":"t","tenant":null,"id":"o"}"#;
    let says = "a pending reservation has at least one hold (rule A2)";
    refused_saying::<StoredReservation>(
        &format!(r#"{{"state":"pending","owner":{owner},"holds":[],"expires_at":1}}"#),
        says,
    );
    refused_saying::<Pending<AggregateRef, BTreeSet<HoldId>>>(
        &format!(r#"{{"owner":{owner},"holds":[],"expires_at":1}}"#),
        says,
    );
    refused_saying::<StoredReservation>(
        &format!(r#"{{"state":"pending","owner":{owner},"holds":[""],"expires_at":1}}"#),
        "D6: the hold id is empty",
    );
    refused_saying::<StoredReservation>(
        &format!(r#"{{"state":"pending","owner":{owner},"expires_at":1}}"#),
        "missing field `holds`",
    );
    refused_saying::<StoredReservation>(
        &format!(r#"{{"state":"expired","owner":{owner}}}"#),
        "unknown variant `expired`",
    );
    refused_saying::<StoredReservation>(
        &format!(r#"{{"state":"confirmed","owner":{owner}}}"#),
        "missing field `version`",
    );
    refused_saying::<Confirmed<AggregateRef>>(&format!(r#"{{"owner":{owner},"version":-3}}"#), "invalid value");
}

#[test]
fn an_operation_is_validated_argument_by_argument() {
    let owner = r#"{"aggregate_type":"t","tenant":null,"id":"o"}"#;
    let read = |json: String| serde_json::from_str::<Operation<AggregateRef, HoldId>>(&json);
    let abandon = read(format!(r#"{{"op":"abandon","owner":{owner},"hold":"h"}}"#)).unwrap();
    assert_eq!(abandon.kind(), OperationKind::Abandon);
    let says = |json: String, says: &str| {
        let error = read(json.clone()).expect_err(&json).to_string();
        assert!(error.contains(says), "{json}: {error:?} does not say {says:?}");
    };
    says(format!(r#"{{"op":"reserve","owner":{owner},"hold":"h","ttl":0}}"#), "D2: the time to live is zero");
    says(format!(r#"{{"op":"reserve","owner":{owner},"hold":"","ttl":5}}"#), "D6: the hold id is empty");
    says(format!(r#"{{"op":"confirm","owner":{owner},"version":"ANY"}}"#), "invalid type: string \"ANY\"");
    says(format!(r#"{{"op":"release","owner":{owner},"version":"any"}}"#), "invalid value: string \"any\"");
    says(format!(r#"{{"op":"lookup","owner":{owner}}}"#), "unknown variant `lookup`");
    says(format!(r#"{{"op":"Reserve","owner":{owner},"hold":"h","ttl":5}}"#), "unknown variant `Reserve`");
}

#[test]
fn outcomes_and_kinds_are_read_by_their_exact_names() {
    refused_saying::<Outcome>(r#""taken""#, "unknown variant `taken`");
    refused_saying::<OperationKind>(r#""Reserve""#, "unknown variant `Reserve`");
    refused_saying::<ReserveOutcome>(r#""Released""#, "unknown variant `Released`");
    refused_saying::<AbandonOutcome>(r#""Kept""#, "unknown variant `Kept`");
}
