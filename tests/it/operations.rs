//! Operation kinds by name: how the driver protocol and the vectors spell them, and back.

use reservation_store::OperationKind;

#[test]
fn every_kind_is_found_by_its_own_name_and_no_other() {
    let names: Vec<&str> = OperationKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names, ["reserve", "confirm", "release", "abandon"]);
    for kind in OperationKind::ALL {
        assert_eq!(OperationKind::from_name(kind.name()), Some(kind));
    }
}

#[test]
fn a_name_spelled_otherwise_is_no_kind() {
    for name in ["", "Reserve", "RESERVE", "reserve ", "lookup", "open", "reserved", "abandons"] {
        assert_eq!(OperationKind::from_name(name), None, "{name:?}");
    }
}
