//! The conformance suite for `ReservationStore` implementations.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod checks;
pub mod differential;
mod failure;
mod harness;
pub mod linearizability;
pub mod oracle;
mod report;
mod session;

pub use failure::{Details, Failure};
pub use harness::{Capabilities, Harness, MemoryHarness, START, Settings, unique_namespace};
pub use report::{CheckResult, Report, run_all};

/// Calls `$callback!` with the list of every check: `test_name => check_function`.
#[doc(hidden)]
#[macro_export]
macro_rules! __for_each_check {
    ($callback:ident { $($args:tt)* }) => {
        $crate::$callback! { $($args)* ;
            r1_reserve_takes_a_free_key => r1,
            r2_reserve_takes_an_expired_key_afresh => r2,
            r3_reserve_joins_with_a_new_hold => r3,
            r4_reserve_joins_with_a_hold_it_has => r4,
            r5_reserve_conflicts_with_another_live_pending => r5,
            r6_reserve_of_own_confirmed_is_already_confirmed => r6,
            r7_reserve_conflicts_with_another_confirmed => r7,
            c1_confirm_takes_a_free_key => c1,
            c2_confirm_of_own_live_pending_clears_holds => c2,
            c3_confirm_of_own_expired_pending_confirms => c3,
            c4_confirm_over_another_expired_pending => c4,
            c5_confirm_conflicts_with_another_live_pending => c5,
            c6_confirm_at_a_greater_version_raises_it => c6,
            c7_confirm_at_or_below_is_already_confirmed => c7,
            c8_confirm_conflicts_with_another_confirmed => c8,
            l1_release_of_free_or_expired_is_not_held => l1,
            l2_release_of_own_live_pending_frees => l2,
            l3_release_of_another_live_pending_is_not_held => l3,
            l4_release_at_any_or_at_or_above_frees => l4,
            l5_release_below_the_version_is_kept => l5,
            l6_release_of_another_confirmed_is_not_held => l6,
            a1_abandon_of_free_or_expired_is_not_held => a1,
            a2_abandon_of_the_last_hold_frees => a2,
            a3_abandon_of_one_hold_keeps_the_others => a3,
            a4_abandon_of_a_hold_it_lacks_is_not_held => a4,
            a5_abandon_of_another_owner_is_not_held => a5,
            a6_abandon_of_own_confirmed_is_already_confirmed => a6,
            d1_expiry_boundary_and_saturation => d1,
            d2_ttl_zero_is_invalid => d2,
            d3_versions_order_unversioned_first => d3,
            d4_any_version_is_for_release_only => d4,
            d5_owners_keys_holds_compared_exactly => d5,
            d6_invalid_arguments_are_typed_and_change_nothing => d6,
            d7_expired_pending_is_a_free_key => d7,
            scope_aggregate_types_are_independent => scope_aggregate_type,
            scope_tenants_are_independent => scope_tenant,
            scope_namespaces_are_independent => scope_namespace,
            scope_system_tenant_spans_tenants => scope_system_tenant,
            owner_differing_only_in_id_is_another => owner_id,
            owner_differing_only_in_tenant_is_another => owner_tenant,
            lengths_at_the_maximum_are_stored_exactly => lengths,
            volume_thousands_of_keys_survive_sweeps => volume,
            durable_reopen_keeps_every_reservation => durable,
            differential_against_the_specification => differential,
            linearizability_under_threads => linearizability,
        }
    };
}

/// Expands to one `#[test]` per check, in a module, running against the harness that
/// `$harness` builds (it is evaluated once per test):
///
/// ```ignore
/// reservation_conformance::tests!(my_store_conformance, MyHarness::new());
/// ```
///
/// With a single argument the module is named `reservation_conformance`. A failing test panics
/// with the check's [`Failure`]: the rule, its text, and the operations with expected and actual
/// outcomes. Filter by rule with `cargo test r3_` or by family with `cargo test scope_`.
#[macro_export]
macro_rules! tests {
    ($harness:expr $(,)?) => {
        $crate::tests!(reservation_conformance, $harness);
    };
    ($module:ident, $harness:expr $(,)?) => {
        $crate::__for_each_check!(__tests_module { $module, $harness });
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __tests_module {
    ($module:ident, $harness:expr ; $($name:ident => $check:ident),* $(,)?) => {
        #[allow(non_snake_case)]
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[test]
                fn $name() {
                    let harness = $harness;
                    if let ::core::result::Result::Err(failure) = $crate::checks::$check(&harness) {
                        ::core::panic!("{failure}");
                    }
                }
            )*
        }
    };
}
