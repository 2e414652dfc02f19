//! The conformance suite that any [`ReservationStore`](reservation_store::ReservationStore)
//! implementation runs to show that it behaves as the specification ([`reservation_store::rules`])
//! says.
//!
//! # The lines an implementer writes
//!
//! Add this crate as a dev-dependency, write a [`Harness`] that builds your store around the
//! suite's clock, and expand [`tests!`] in a test file:
//!
//! ```ignore
//! use reservation_conformance::{Capabilities, Harness};
//! use reservation_store::ManualClock;
//!
//! struct MyHarness { runtime: tokio::runtime::Runtime, url: String }
//!
//! impl Harness for MyHarness {
//!     type Store = MyStore;
//!     fn store(&self, clock: ManualClock) -> MyStore { self.runtime.block_on(MyStore::connect(&self.url, clock)) }
//!     fn block_on<F: std::future::Future>(&self, f: F) -> F::Output { self.runtime.block_on(f) }
//!     fn capabilities(&self) -> Capabilities { Capabilities::default().with_durable(true) }
//! }
//!
//! reservation_conformance::tests!(my_store, MyHarness::new(), durable); // `durable`: durable stores only
//! ```
//!
//! A synchronous store leaves `block_on` out (the default drives ready futures without a
//! runtime); a store that is not durable leaves `capabilities` out, and its durable tests are
//! `#[ignore]`d, saying why. A durable store's restart is, by default, the store dropped and a new
//! one opened on the same storage ([`Harness::reopen`]); a harness whose stores do not share
//! storage overrides it. Every check works in a namespace of its own, so the stores may share
//! one database. `cargo test my_store` then runs one test per check; `cargo test r3_` or
//! `cargo test s1_` picks some.
//!
//! How much the randomized checks do is the run's business, not the harness's: `tests!(my_store,
//! MyHarness::new(), durable, settings = Settings::default().with_cases(600))`, or
//! [`run_all`]`(&harness, &settings)` for a [`Report`] without the macro ([`Settings`]; one seed
//! replays every randomized check). A harness that wraps another passes each optional part
//! through; [`dropped_parts`] tells which a wrapper drops.
//!
//! # What is checked
//!
//! - One check per rule id, in [`checks`]: `r1` … `r7`, `c1` … `c8`, `l1` … `l6`, `a1` … `a6`,
//!   `d1` … `d11`. Each runs a short script on a fresh store and on the spec functions
//!   side by side, compares every outcome, looks up every key it touched after every step, and
//!   asserts that its script reached the rule it is named after. D8: versions above `2^63` and
//!   the clock's last instant; D9: every field at its maximum length in UTF-8 bytes; D11: the
//!   lookup's shapes. D10: an operation is held between its reading of the clock and its write
//!   ([`reservation_store::ManualClock::hold_next_reading`]) while the clock passes an expiry
//!   and a lookup runs; the answers must have an order (a clock read outside the lock has none).
//!   It first runs the same operations one at a time, so that a plain expiry bug is named by its
//!   own rule (D1), not as the clock; through the driver, the held reading is the store's own
//!   (the request says `"now": "ask"`, `PROTOCOL.md`).
//!   D10 across a restart (every durable store): reopened with the suite's clock set back, the
//!   store keeps deciding
//!   at its latest instant, and a reservation it saw expire stays expired.
//! - D6 through the protocol's requests ([`Harness::send_raw`]): every invalid argument of SPEC.md's
//!   table of errors, alone (each field empty, one byte over its maximum in one- and two-byte
//!   characters, not Unicode; zero, negative, fractional, oversized and string numbers; `ANY`
//!   given to confirm; owners a scope does not admit), on a key in each of seven states, is
//!   answered with the error of its name and changes nothing; every field at its maximum acts as
//!   the spec says. A harness that speaks only the typed API runs the requests its types hold.
//! - S1, scopes: a key is independent across aggregate types, tenants and namespaces (also when
//!   a store could join them into one string with a separator), and a `SYSTEM_TENANT` scope spans
//!   the type's tenants (and is not a tenant whose id spells `SYSTEM_TENANT`); owners of the
//!   system tenant are admitted by a system scope only.
//! - D5, owners: owners that differ only in id, or only in tenant, are different owners for
//!   every operation. Thousands of keys with expiries that set off a sweeper.
//! - The worked examples of SPEC.md, run as written ([`checks::examples`]).
//! - P1, `durable` (a declared [`Capabilities`]): the store is reopened after every operation;
//!   no confirmed reservation is lost, no released or abandoned one comes back, pending ones
//!   keep owner, holds and exact expiry, and expired ones stay expired.
//! - [`differential`]: random scripts of [`ops::Op`] biased to where bugs live
//!   (few keys and holds, the same key in scopes that differ in one part: tenant,
//!   `SYSTEM_TENANT` or a tenant spelled so, namespace, aggregate type; owners of several
//!   tenants, `SYSTEM_TENANT`'s included, and some a scope must refuse (D6); versions at and
//!   around the stored one, `UNVERSIONED`, `ANY_VERSION`, clock moves to exactly `expires_at - 1`, `expires_at`, `expires_at + 1`),
//!   compared step by step with the spec functions through [`oracle::ops`]. A failure shrinks to
//!   a minimal script, printed as a transcript and as Rust to paste, with the seed to replay the
//!   run (`RESERVATION_CONFORMANCE_SEED`, `RESERVATION_CONFORMANCE_CASES`). While its run has
//!   reached fewer than all of R1–A6 (as the spec functions report them), it draws more scripts,
//!   up to eight more batches; then it fails on coverage ([`differential::COVERAGE`]).
//!   The seed of a failing script is appended to a regression file,
//!   `proptest-regressions/reservation-conformance.txt` in the root of the crate under test
//!   (`cargo test` runs there); every later run replays its seeds first, before new scripts.
//!   Commit that file, so that a bug once found stays tested. [`Settings::regressions`] moves
//!   it, or turns it off with `None`. This crate commits one with three seeds, found against
//!   broken stores, that its own suites replay against `MemoryStore` and the async store.
//! - [`linearizability`]: six threads run operations on three keys while the clock moves (by a
//!   random step between rounds, and a millisecond at a time during them); every operation is
//!   stamped at call and return, with the clock just before and just after. The history is
//!   decided key by key by a Wing–Gong–Lowe search with a memo of (linearized set, state, last
//!   instant), the spec functions as the sequential model: each operation acts at one instant of
//!   its clock window, never earlier than an operation placed before it (so a store that reads
//!   its clock before taking its lock fails). The recorders keep each key's history within
//!   [`Ceilings`] (at most four operations in flight on a key, a quiet point at least every 32
//!   operations and every 8 unknown outcomes, clock moves that widen no window beyond 4 ms), and
//!   the search judges a key one segment between quiet points at a time, each within a budget of
//!   steps: where a history beyond the ceilings exhausts it, the check fails *undecided*
//!   ([`Undecided`]), the suite's limitation and no rule, writes the history where its replay line
//!   says, and its next run records narrower histories ([`histories`]). Histories are recorded, each on a fresh store,
//!   until a second has passed ([`Settings`]), since a race shows in some histories only. A
//!   failure prints each thread's timeline of the shortest prefix that no order explains, and
//!   says whether one thread alone already breaks the rule. [`linearizability::check_history_with`]
//!   with [`linearizability::StorageErrors::Tolerated`] decides histories of runs that inject faults:
//!   an indeterminate storage error may or may not have taken effect.
//! - [`faults`], P1 under faults (`p1_faults_…`): for two seconds, four threads run random
//!   operations on three hot keys while two more take fresh key after fresh key (owner A
//!   reserves and confirms it, then owner B tries to reserve it, which must conflict), and a
//!   nemesis fires faults on a seeded schedule: those the harness offers
//!   ([`Harness::faults`]: cut connections, a crash, a pause, a failover, a partition, a long pause), a clock
//!   jump past every expiry, and for a durable store a restart ([`Harness::reopen`]). After each
//!   fault it probes the store until it answers, and after every crash, failover, partition, long
//!   pause and restart it looks up every
//!   confirmation acknowledged so far. The history is judged as the linearizability check's, with
//!   faults tolerated; an acknowledged confirmation that disappears, or a key that two owners
//!   were each told they hold, breaks P1. The failure lists every fault fired, with the seed that
//!   replays the schedule (`RESERVATION_CONFORMANCE_SEED`, or `reservation conform --seed`: the one seed of every randomized check). A store with no server to cut or pause gets
//!   simulated ones from [`faults::Simulated`].
//!
//! Expected outcomes always come from the spec functions; no check restates a rule. The checks
//! send their operations through [`ReservationStore::execute`](reservation_store::ReservationStore::execute)
//! and through the typed methods (`reserve`, `confirm`, `release`, `abandon`) in turn, the
//! same way on every run, so that a store that overrides a typed method is checked through it.
//!
//! # A failure
//!
//! The headline names the rule by which the specification decided the step that went wrong,
//! and the check's own rule, when it differs, as context; the transcript says which method of
//! the store answered each step (`execute(…)`, or the typed method: `reserve(…)`, …). An adapter
//! that breaks the driver's protocol is headlined "the adapter broke the protocol", once.
//!
//! ```text
//! conformance check `d1_expiry_boundary_and_saturation` failed: rule R2 broken (in the check of D1)
//!   R2: reserve on `P` expired, anyone's (the owner's own included): `P{o,{h},now+ttl}`; the old holds are dropped, Taken
//!   the check is about D1: A pending reservation reserved at `t` for `ttl` is live on `[t, t+ttl)`: ...
//! problem: step 3 (ReservationStore::execute) returned Conflict; the specification says Taken (rule R2)
//!   scope s0 = "rc-user"/"acme"/"d1.03022b49b7fca14e.26417"
//!   clock started at t=1000000ms and reads t=1001000ms now
//!   operations go to the store through `execute` (shown `execute(…)`) and through their typed method (`reserve(…)`, `confirm(…)`, …) in turn
//! operations (expected = the specification, actual = the store):
//!     1   t=1000000ms s0 execute(reserve("alice", rc-user/"acme"/"alice", hold "attempt-1", ttl 1000ms)) = Taken [R1]; key now pending(...)
//!       clock set to t=1000999ms
//!     2   t=1000999ms s0 reserve("alice", rc-user/"acme"/"bob", hold "attempt-1", ttl 1000ms) = Conflict [R5]; key now pending(...)
//!       clock set to t=1001000ms
//!     3 ✗ t=1001000ms s0 execute(reserve("alice", rc-user/"acme"/"bob", hold "attempt-1", ttl 1ms)): expected Taken [R2], actual Conflict   <-- differs
//! ```
//!
//! # The suite's teeth
//!
//! `tests/it/broken_stores.rs` runs the whole suite against stores with one deliberate bug each
//! (built on the spec functions) and asserts that the named checks fail with a message naming
//! the broken rule; the correct one passes everything. `tests/it/linearizability.rs` feeds the
//! linearizability checker histories written by hand. `tests/it/faults.rs` runs the fault check
//! against stores that lose acknowledged confirmations on a restart, or lie about a cut
//! operation, and names a lost confirmation's key in a history written by hand.
//!
//! | family | broken store | caught by (message names) |
//! |---|---|---|
//! | reserve | a join sets the expiry to now+ttl, shortening it | `r3_…` (R3), differential |
//! | confirm | a confirm at or below the owner's version overwrites it | `c7_…` (C7), differential (C7) |
//! | release | a release below the confirmed version frees the key | `l5_…` (L5), differential (L5) |
//! | abandon | abandoning one hold drops them all | `a3_…` (A3), differential (A3) |
//! | expiry boundary | live at `now <= expires_at` instead of `<` | `d1_…` (D1), differential (D1) |
//! | versions | a release at `UNVERSIONED` is taken as `ANY_VERSION` | `d3_…` (D3), `l5_…` (L5), differential (L5) |
//! | holds | hold ids compared ignoring ASCII case | `d5_…` (D5), `a4_…` (D5, in the check of A4), differential; the suite's first failure (D5) |
//! | owner comparison | only the owner's id is compared | `d5_owner_differing_only_in_tenant_…` (D5), differential |
//! | tenant checks | the scope's tenant never checked against the owner's | `d6_…` (D6), differential (D6) |
//! | argument checks | whether the scope admits the owner checked on the reserve path only, or after the write | `d6_every_invalid_argument_…` (D6) |
//! | keys | trailing spaces trimmed, as a padded SQL column does | `d5_…` (D5), differential |
//! | scopes | the aggregate type left out of the row's key | `s1_scope_aggregate_types_…` (S1) |
//! | lookup | an expired pending reservation still shown | `d7_…` (D7), differential; the suite's first failure (D7) |
//! | abandon | the abandon of the last hold answers Abandoned and leaves the key held | the suite's first failure (A2) |
//! | versions | a version of 0 read as no version, so that `UNVERSIONED` is refused | the suite's first failure (D3) |
//! | versions | decoded as 64-bit floats, exact only up to 2^53 | the suite's first failure (D8) |
//! | lookup | served from a copy of each row one write behind (a stale read) | most checks, the report leading with the cause they share |
//! | atomicity under threads | read, then write, without the lock in between (with a yield, and without) | `linearizability_…`, `p1_faults_…` (atomicity, H1) |
//! | durability | confirmed reservations lost on reopen | `p1_durable_…` (P1), `p1_faults_…` (P1) |
//! | durability | one write in seven acknowledged but never persisted | `p1_durable_…` (P1) |
//! | durability | a restart loses the last confirmations it acknowledged | `p1_faults_…` (P1: lost, two owners) |
//! | faults | a cut connection reports an applied operation as one that did not happen | `p1_faults_…` (atomicity, H1) |
//! | time | the clock read before the lock is taken | `d10_…` (D10), `linearizability_…` (atomicity, H1) |
//! | time | a reopened store's clock starts again from an earlier one | `d10_the_clock_never_goes_back_across_a_restart` (D10) |
//! | robustness | a panic on a key with a NUL byte | `d5_…` (D5; the step, its rule and the panic message) |
//! | typed methods | a `reserve` override that takes the owner's own confirmed key back to pending | `r6_…` (R6, through `ReservationStore::reserve`), differential (R6) |
//!
//! A store call that panics is reported as that step's failure, with the panic's message; the
//! remaining checks still run.
//!
//! # Speed
//!
//! `cargo bench -p reservation-conformance --bench figures` prints the whole suite's time against
//! `MemoryStore`, the differential check's operations per second, and the time to decide
//! histories of 1,000 to 10,000 operations.
//!
//! # The public items, and who needs which
//!
//! - Every store's tests (an implementer's, this repository's stores, `examples/implementer`):
//!   [`Harness`], [`Capabilities`], [`Settings`], the [`tests!`] macro. A harness on the suite's
//!   clock starts it at [`START`]; a test of its own names its scope's namespace with
//!   [`unique_namespace`], so that stores may share one database.
//! - Running the suite without the macro (the `reservation` program, the benches):
//!   [`run_all`], [`run_matching`], [`run_all_with`], [`run_matching_with`], each giving a
//!   [`Report`] of [`CheckResult`]s; a check that needs a capability it was not declared is
//!   skipped for its [`Requirement`]. One check alone: the functions of [`checks`]. These, and
//!   every other entry point that runs a harness, take `&dyn` [`DynHarness`], which every
//!   [`Harness`] is: the suite is compiled once, in this crate, not again for each harness in
//!   each test binary (`&harness` is passed as it is).
//! - A failure: [`Failure`], whose fields are [`Details`] (its [`Protocol`] when the adapter
//!   behind the driver broke the protocol).
//! - Requests the typed API cannot make, for a harness whose store speaks the protocol:
//!   [`RawRequest`] and [`RawAnswer`] ([`Harness::send_raw`]).
//! - `MemoryStore`'s harness, for comparisons and the suite's own tests: [`MemoryHarness`].
//! - A store in another language (the `reservation` program): [`driver::CommandHarness`] runs an
//!   adapter program (and, with [`driver::CommandHarness::with_fault`], the shell commands that
//!   cause the faults of its world), [`driver::serve`] puts `MemoryStore` behind the protocol;
//!   [`driver::SCHEMA`], [`driver::PROTOCOL`] and [`driver::MAX_LINE`] are the protocol's; the
//!   errors of an adapter that broke it carry a [`driver::ProtocolError`].
//! - Test vectors, for an implementation that replays them in its own framework, and the
//!   `reservation vectors` command: [`vectors::generate`], [`vectors::write`],
//!   [`vectors::check`], [`vectors::replay`], [`vectors::FILES`].
//! - Stores whose server tests are skipped when no server answers: [`services::service`],
//!   [`services::services_required`].
//! - Faults a harness offers and the check that fires them (every store's fault tests):
//!   [`faults::Fault`], [`Harness::faults`] and [`Harness::inject`]; [`faults::run`] with
//!   [`faults::FaultSettings`], giving a [`faults::FaultRun`] (a [`faults::FaultReport`] of
//!   [`faults::Fired`] faults, and a verdict); [`faults::Simulated`] for cuts and pauses in front
//!   of any store; [`faults::lost_confirmations`] for a history recorded by hand.
//! - Histories recorded under faults (the networked stores' tests, their shared test kit):
//!   [`linearizability::record`], [`linearizability::check_history_with`] with
//!   [`linearizability::StorageErrors::Tolerated`], and the history's types.
//! - Fuzzing (`fuzz/`) and the benches: the operation scripts as plain data, [`ops`] (with the
//!   feature `arbitrary`, each derives `arbitrary::Arbitrary`); [`oracle::ops`] and
//!   [`oracle::inputs`] (with [`oracle::RawInput`]), [`differential::run`] and its
//!   [`differential::script`]s.
//!
//! Items hidden from this documentation (the modules `worked_examples` and `search`, `driver::check_answer`,
//! `driver::error_names` and the `__`-named items the macros expand to) are public only for the
//! macros and this crate's own tests; they are not part of its interface.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod arguments;
mod catalogue;
pub mod checks;
pub mod crashes;
pub mod differential;
mod drawing;
pub mod driver;
mod entry;
mod erased;
mod expected;
mod failure;
pub mod faults;
mod gate;
mod harm;
mod harness;
pub mod histories;
mod history;
pub mod judge_times;
pub mod junit;
pub mod linearizability;
pub mod ops;
pub mod oracle;
pub mod page;
mod protocol;
mod record;
mod report;
mod said;
#[doc(hidden)]
pub mod search;
pub mod services;
mod session;
mod settings;
mod show;
pub mod tiers;
pub mod vectors;
mod verdict;
#[doc(hidden)]
pub mod worked_examples;

pub use catalogue::{CHECKS, Check, Part, Run};
pub use erased::DynHarness;
pub use failure::{Band, Details, Drawing, Failure, Finding, Protocol, Undecided};
pub use gate::Ceilings;
pub use harness::unique_namespace;
pub use harness::{
    Capabilities, Harness, LOOKUPS_AT_ONCE, MemoryHarness, PARTS, Persistence, Probe, RawAnswer, RawRequest,
    Requirement, START, dropped_parts,
};
pub use report::{CheckResult, Report, run_all, run_all_with, run_matching, run_matching_with};
pub use settings::{REPORTS, Settings};

/// Calls `$callback!` with the list of every check, in the suite's order:
/// `test_name => check_function in Part`, and `[requirement]` after a check that needs a
/// capability (a [`Requirement`] variant; none means [`Requirement::Nothing`]). The one place the
/// list is written: [`tests!`] expands it for the tests' names, and [`CHECKS`] holds it as data
/// for everything else.
#[doc(hidden)]
#[macro_export]
macro_rules! __for_each_check {
    ($callback:ident { $($args:tt)* }) => {
        $crate::$callback! { $($args)* ;
            r1_reserve_takes_a_free_key => r1 in Rules,
            r2_reserve_takes_an_expired_key_afresh => r2 in Rules,
            r3_reserve_joins_with_a_new_hold => r3 in Rules,
            r4_reserve_joins_with_a_hold_it_has => r4 in Rules,
            r5_reserve_conflicts_with_another_live_pending => r5 in Rules,
            r6_reserve_of_own_confirmed_is_already_confirmed => r6 in Rules,
            r7_reserve_conflicts_with_another_confirmed => r7 in Rules,
            c1_confirm_takes_a_free_key => c1 in Rules,
            c2_confirm_of_own_live_pending_clears_holds => c2 in Rules,
            c3_confirm_of_own_expired_pending_confirms => c3 in Rules,
            c4_confirm_over_another_expired_pending => c4 in Rules,
            c5_confirm_conflicts_with_another_live_pending => c5 in Rules,
            c6_confirm_at_a_greater_version_raises_it => c6 in Rules,
            c7_confirm_at_or_below_is_already_confirmed => c7 in Rules,
            c8_confirm_conflicts_with_another_confirmed => c8 in Rules,
            l1_release_of_free_or_expired_is_not_held => l1 in Rules,
            l2_release_of_own_live_pending_frees => l2 in Rules,
            l3_release_of_another_live_pending_is_not_held => l3 in Rules,
            l4_release_at_any_or_at_or_above_frees => l4 in Rules,
            l5_release_below_the_version_is_kept => l5 in Rules,
            l6_release_of_another_confirmed_is_not_held => l6 in Rules,
            a1_abandon_of_free_or_expired_is_not_held => a1 in Rules,
            a2_abandon_of_the_last_hold_frees => a2 in Rules,
            a3_abandon_of_one_hold_keeps_the_others => a3 in Rules,
            a4_abandon_of_a_hold_it_lacks_is_not_held => a4 in Rules,
            a5_abandon_of_another_owner_is_not_held => a5 in Rules,
            a6_abandon_of_own_confirmed_is_already_confirmed => a6 in Rules,
            d1_expiry_boundary_and_saturation => d1 in Rules,
            d2_ttl_zero_is_invalid => d2 in Rules,
            d3_versions_order_unversioned_first => d3 in Rules,
            d4_any_version_is_for_release_only => d4 in Rules,
            d5_owners_keys_holds_compared_exactly => d5 in Rules,
            d6_invalid_arguments_are_typed_and_change_nothing => d6 in Rules,
            d6_every_invalid_argument_in_every_state_changes_nothing => arguments in Arguments,
            d7_expired_pending_is_a_free_key => d7 in Rules,
            d8_unsigned_versions_and_the_last_instant => d8 in Rules,
            d10_the_clock_is_read_inside_the_critical_section => d10 in Rules,
            d10_the_clock_never_goes_back_across_a_restart => d10_restart in Durability [Durable],
            d9_every_field_at_its_maximum_in_utf8_bytes => lengths in Rules,
            d11_lookup_shapes_and_absolute_expiry => d11 in Rules,
            s1_scope_aggregate_types_are_independent => scope_aggregate_type in Rules,
            s1_scope_tenants_are_independent => scope_tenant in Rules,
            s1_scope_namespaces_are_independent => scope_namespace in Rules,
            s1_system_tenant_spans_tenants_and_admits_its_owners => scope_system_tenant in Rules,
            d5_owner_differing_only_in_id_is_another => owner_id in Rules,
            d5_owner_differing_only_in_tenant_is_another => owner_tenant in Rules,
            examples_of_the_specification_run_as_written => examples in Examples,
            volume_thousands_of_keys_survive_sweeps => volume in Volume,
            sweeper_keeps_confirmed_keys_across_long_clock_jumps => sweeper in Volume,
            differential_against_the_specification => differential in Differential,
            linearizability_under_threads => linearizability in Linearizability,
            p1_faults_on_a_seeded_schedule_lose_no_acknowledged_confirmation => faults in Faults,
            p1_durable_reopen_keeps_every_reservation => durable in Durability [Durable],
            p1_restarts_keep_every_spelling_of_the_differentials_scripts => differential_restarts in Durability [Durable],
            p1_crashes_at_chosen_points_keep_every_state => crashes in Crashes [Durable],
            p1_power_cuts_take_back_nothing_the_store_promised => power_cuts in PowerCuts [PowerCuts],
        }
    };
}

/// The [`Requirement`] a check is listed with: [`Requirement::Nothing`] when none is written.
#[doc(hidden)]
#[macro_export]
macro_rules! __requirement {
    () => {
        $crate::Requirement::Nothing
    };
    ($needs:ident) => {
        $crate::Requirement::$needs
    };
}

/// Expands to one `#[test]` per check, in a module, running against the harness that
/// `$harness` builds (it is evaluated once per test):
///
/// ```ignore
/// reservation_conformance::tests!(my_store_conformance, MyHarness::new());
/// ```
///
/// With a single argument the module is named `reservation_conformance`. The module may carry
/// any name, the tested crate's included: it is made inside a module of the macro's own,
/// `__conformance`, so that the tests are `__conformance::my_store::r1_…` and so on, and the
/// caller's module gains no item that an import of the same name (`use my_store::MyStore`) would
/// collide with. For the same reason, two `tests!` go in two modules of the caller's. A failing
/// test panics
/// with the check's [`Failure`]: the rule, its text, and the operations with expected and actual
/// outcomes. Filter by rule with `cargo test r3_` or by family with `cargo test s1_`.
///
/// After the harness, two optional arguments, in this order:
///
/// - `durable`, for a harness that declares [`Capabilities::durable`]: the checks that need it
///   (`p1_durable_…`, `p1_crashes_…`, D10 across a restart) run. Without the word they are
///   `#[ignore]`d with the reason, which `cargo test` prints, instead of passing without running;
///   a harness that declares the capability without the word fails `durable_capability_is_tested`,
///   and the word on a harness that does not declare it fails the tests it runs.
/// - or `power_cuts`, for a harness that declares [`Capabilities::power_cuts`] (and so is
///   durable): the durable checks and the power-cut check (`p1_power_cuts_…`, the store on a disk
///   that can lose power, [`crashes::power_cuts`]) run. A harness that declares the promise
///   told only `durable` fails `power_cuts_capability_is_tested`.
/// - `settings = EXPR`, the run's [`Settings`] (by default [`Settings::default`]), evaluated once
///   per test; the environment's overrides ([`Settings::with_env`]) apply on top, so that the
///   replay line of a failure works: `tests!(my_store, MyHarness::new(), durable,
///   settings = Settings::default().with_cases(600))`.
///
/// A store that needs a server writes `?` before an expression of type `Option<harness>`,
/// usually [`services::service`]: `tests!(my_store, ?service("PostgreSQL", MyHarness::connect()))`.
/// Each test then returns at once when it is `None` (the server did not answer, which
/// `service` says in one line, or fails on under [`services::REQUIRE_SERVICES`]).
#[macro_export]
macro_rules! tests {
    ($module:ident, ? $harness:expr $(, $($rest:tt)*)?) => {
        $crate::__tests!($module, $harness, [$($($rest)*)?]);
    };
    ($harness:expr $(,)?) => {
        $crate::tests!(reservation_conformance, $harness);
    };
    ($module:ident, $harness:expr $(, $($rest:tt)*)?) => {
        $crate::__tests!($module, ::core::option::Option::Some($harness), [$($($rest)*)?]);
    };
}

/// Reads the arguments of [`tests!`] after the harness (an `Option` of it by now): whether the
/// harness is `durable`, and the run's settings.
#[doc(hidden)]
#[macro_export]
macro_rules! __tests {
    ($module:ident, $harness:expr, [$(,)?]) => {
        $crate::__for_each_check!(__tests_module { $module, $harness, not_durable, $crate::Settings::default() });
    };
    ($module:ident, $harness:expr, [durable $(,)?]) => {
        $crate::__for_each_check!(__tests_module { $module, $harness, durable, $crate::Settings::default() });
    };
    ($module:ident, $harness:expr, [settings = $settings:expr $(,)?]) => {
        $crate::__for_each_check!(__tests_module { $module, $harness, not_durable, $settings });
    };
    ($module:ident, $harness:expr, [durable, settings = $settings:expr $(,)?]) => {
        $crate::__for_each_check!(__tests_module { $module, $harness, durable, $settings });
    };
    ($module:ident, $harness:expr, [power_cuts $(,)?]) => {
        $crate::__for_each_check!(__tests_module { $module, $harness, power_cuts, $crate::Settings::default() });
    };
    ($module:ident, $harness:expr, [power_cuts, settings = $settings:expr $(,)?]) => {
        $crate::__for_each_check!(__tests_module { $module, $harness, power_cuts, $settings });
    };
    ($module:ident, $harness:expr, [$($other:tt)*]) => {
        ::core::compile_error!(::core::concat!(
            "tests!: after the harness, `durable` or `power_cuts` and then `settings = EXPR`, each optional; found `",
            ::core::stringify!($($other)*), "`"
        ));
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __tests_module {
    ($module:ident, $harness:expr, $durable:ident, $settings:expr ;
        $($name:ident => $check:ident in $part:ident $([$needs:ident])?),* $(,)?) => {
        // The caller's module gets no item named `$module`: a test file that imports from the
        // crate it tests (`use my_store::MyStore`) may name the module after that crate, and an
        // item of that name beside the import would make the import ambiguous.
        #[doc(hidden)]
        mod __conformance {
            #[allow(non_snake_case, reason = "the module is named by the caller, in any case")]
            mod $module {
                #[allow(unused_imports, reason = "the harness expression may or may not name items of the caller's module")]
                use super::super::*;
                $(
                    $crate::__check_test!(($harness, $durable, $settings) $name => $check $([$needs])?);
                )*
                $crate::__check_test!(@capability $durable, $harness);
            }
        }
    };
}

/// The test of one check: run when its requirement is met by the words the macro was told
/// (and then failing on a harness that does not declare it), `#[ignore]`d with the reason when
/// not; and the test that a harness declaring `durable` told the macro so.
#[doc(hidden)]
#[macro_export]
macro_rules! __check_test {
    (($harness:expr, durable, $settings:expr) $name:ident => $check:ident [Durable]) => {
        $crate::__check_test!(@run $harness, $settings, $name => $check, Durable);
    };
    (($harness:expr, power_cuts, $settings:expr) $name:ident => $check:ident [Durable]) => {
        $crate::__check_test!(@run $harness, $settings, $name => $check, Durable);
    };
    (($harness:expr, $durable:ident, $settings:expr) $name:ident => $check:ident [Durable]) => {
        $crate::__check_test!(@run $harness, $settings, $name => $check, Nothing,
            #[ignore = "not run: the harness is not declared durable (tests!(module, harness, durable) runs it)"]);
    };
    (($harness:expr, power_cuts, $settings:expr) $name:ident => $check:ident [PowerCuts]) => {
        $crate::__check_test!(@run $harness, $settings, $name => $check, PowerCuts);
    };
    (($harness:expr, $durable:ident, $settings:expr) $name:ident => $check:ident [PowerCuts]) => {
        $crate::__check_test!(@run $harness, $settings, $name => $check, Nothing,
            #[ignore = "not run: the harness declares no promise to survive power cuts (tests!(module, harness, power_cuts) runs it)"]);
    };
    (($harness:expr, $durable:ident, $settings:expr) $name:ident => $check:ident) => {
        $crate::__check_test!(@run $harness, $settings, $name => $check, Nothing);
    };
    (@run $harness:expr, $settings:expr, $name:ident => $check:ident, $declared:ident $(, #[$attr:meta])?) => {
        #[test]
        $(#[$attr])?
        fn $name() {
            let ::core::option::Option::Some(harness) = $harness else { return };
            $crate::__assert_declared(&harness, $crate::Requirement::$declared);
            let settings: $crate::Settings = $crate::Settings::with_env($settings);
            if let ::core::result::Result::Err(failure) = $crate::checks::$check(&harness, &settings) {
                $crate::page::__fail(&failure, settings.report_dir.as_deref());
            }
        }
    };
    (@capability power_cuts, $harness:expr) => {};
    (@capability durable, $harness:expr) => {
        /// A harness that declares a promise to survive power cuts must say `power_cuts` to the
        /// macro, or its power-cut check would never run.
        #[test]
        fn power_cuts_capability_is_tested() {
            let ::core::option::Option::Some(harness) = $harness else { return };
            ::core::assert!(
                $crate::Harness::capabilities(&harness).power_cuts.is_none(),
                "the harness declares a promise to survive power cuts: write tests!(module, harness, power_cuts) so that its power-cut check runs"
            );
        }
    };
    (@capability $durable:ident, $harness:expr) => {
        /// A harness that declares the durable capability must say `durable` to the macro too,
        /// or its durable checks would never run.
        #[test]
        fn durable_capability_is_tested() {
            let ::core::option::Option::Some(harness) = $harness else { return };
            ::core::assert!(
                !$crate::Harness::capabilities(&harness).durable,
                "the harness declares the durable capability: write tests!(module, harness, durable) so that its durable checks run"
            );
        }
    };
}

/// Told the word of `requirement`, the checks that need it must run: on a harness that does not
/// declare the capability they would pass without running. Panics then, naming the mismatch.
#[doc(hidden)]
pub fn __assert_declared<H: Harness>(harness: &H, requirement: Requirement) {
    let met = requirement.met_by(harness.capabilities());
    assert!(
        met || requirement != Requirement::PowerCuts,
        "tests!(…, power_cuts) on a harness that declares no promise to survive power cuts: its power-cut check would not run"
    );
    assert!(
        met,
        "tests!(…, durable) on a harness that does not declare the durable capability: its durable checks would not run"
    );
}
