//! PostgreSQL under Patroni, of the tests' own (`PostgresHarness::on_patroni`: one etcd, two
//! Patroni nodes): the store connects as a production client does (both nodes,
//! `target_session_attrs=read-write`), follows Patroni's failover, and keeps what it
//! acknowledged in synchronous mode; without it, the fault check catches the confirmations the
//! failover loses. Without `patroni` and `etcd` (Debian's `patroni` and `etcd-server`) or root,
//! each test says so in one line and passes, unless `RESERVATION_REQUIRE_SERVICES=1`.

use std::time::{Duration, Instant};

use reservation_conformance::Harness;
use reservation_conformance::faults::Fault;
use reservation_conformance::services::{Partition, service};
use reservation_postgres::{PostgresHarness, Replication};

use crate::auto_failover::follows_the_failover_and_keeps_what_it_acknowledged;
use crate::fault_check::{fault_run_for, lost_and_caught, lost_nothing, options};

/// Held by each test while its topology runs: one orchestrated topology at a time (Patroni's five
/// processes, two of them Python; pg_auto_failover's three servers and their keepers), so that
/// the tests' own load does not stretch an orchestrator's loop past its timeouts on two cores.
pub(crate) static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A test's turn: the guard of [`ONE_AT_A_TIME`].
pub(crate) type Turn = std::sync::MutexGuard<'static, ()>;

/// A harness under Patroni of its own, synchronous mode as `replication` says, after the turn
/// it holds ([`ONE_AT_A_TIME`]; bound before the harness, so dropped after it); or `None` (said
/// once) without the means to make one.
fn patroni(replication: Replication) -> Option<(Turn, PostgresHarness)> {
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let started = Instant::now();
    let h = service("Patroni (patroni and etcd, as root)", PostgresHarness::on_patroni(replication, options()))?;
    eprintln!("Patroni ({replication:?}): etcd, a leader and a standby started in {:.2?}", started.elapsed());
    Some((turn, h))
}

/// A harness under Patroni that can cut its leader off, or `None` (said once) without the means
/// to make one or without nftables.
fn partitionable(replication: Replication) -> Option<(Turn, PostgresHarness)> {
    let available = if Partition::available() { Ok(()) } else { Err("nft (nftables), as root") };
    service("nftables", available)?;
    patroni(replication)
}

#[test]
fn under_patroni_the_store_follows_patronis_failover_and_keeps_what_it_acknowledged() {
    let Some((_turn, h)) = patroni(Replication::Synchronous) else { return };
    for fault in [Fault::Failover, Fault::LongPause, Fault::Partition] {
        assert!(
            h.faults().contains(&fault) || (fault == Fault::Partition && !Partition::available()),
            "{fault}: {:?}",
            h.faults()
        );
    }
    follows_the_failover_and_keeps_what_it_acknowledged(h, "Patroni's failover");
}

#[test]
fn patroni_needs_a_standby() {
    let Err(refused) = PostgresHarness::on_patroni(Replication::None, options()) else {
        panic!("a Patroni topology without a standby was made");
    };
    assert!(refused.to_string().contains("needs a standby"), "{refused}");
}

/// How long a fault check with a long pause or a partition goes on: past the moment the old
/// leader is let go on (8-9 s after the stop under Patroni, when it has promoted the standby;
/// about 6 s under pg_auto_failover), so that the store writes to it before its orchestrator
/// demotes it.
const OUTLASTS_THE_PAUSE: Duration = Duration::from_secs(14);

/// The fault check with `fault` alone, once, on a topology `made` with a synchronous standby
/// (`label` names it): it lost nothing, and commits waited in vain for the standby.
pub(crate) fn synchronous_loses_nothing(
    made: fn(Replication) -> Option<(Turn, PostgresHarness)>,
    fault: Fault,
    label: &str,
) {
    let Some((_turn, h)) = made(Replication::Synchronous) else { return };
    let run = fault_run_for(&h, &format!("{label}, synchronous, {fault}"), fault, 1, run_for(fault));
    lost_nothing(&run, fault);
    assert!(run.report.confirmations_checked > 0, "no acknowledged confirmation was looked up: {}", run.report);
    assert!(run.report.indeterminate > 0, "no commit waited in vain for the standby: {}", run.report);
}

/// The fault check with `fault` alone, once, on a topology `made` with an asynchronous standby
/// (`label` names it): it failed on P1, having found acknowledged confirmations lost. Whether a
/// fault loses anything is the orchestrator's timing as much as the fault's: on a loaded machine
/// Patroni's standby may let the leader's key lapse and hand the lead back to the paused leader,
/// which keeps everything. A run that lost nothing, and was found to have lost nothing, is run
/// once more on a fresh topology; two such runs fail.
pub(crate) fn asynchronous_caught(made: fn(Replication) -> Option<(Turn, PostgresHarness)>, fault: Fault, label: &str) {
    for attempt in 1..=2 {
        let Some((_turn, h)) = made(Replication::Asynchronous) else { return };
        let run = fault_run_for(&h, &format!("{label}, asynchronous, {fault}"), fault, 1, run_for(fault));
        if attempt == 1 && run.verdict.is_ok() && run.report.lost == 0 {
            eprintln!("{label}, asynchronous, {fault}: this run lost nothing; once more, on a fresh topology");
            continue;
        }
        lost_and_caught(&run);
        return;
    }
}

/// How long a fault check of `fault` goes on: 6 s for a failover, [`OUTLASTS_THE_PAUSE`] for a
/// fault that brings the old leader back.
fn run_for(fault: Fault) -> Duration {
    if fault == Fault::Failover { Duration::from_secs(6) } else { OUTLASTS_THE_PAUSE }
}

/// The long tier (`reservation_conformance::tiers`): run by its own command, and by CI.
mod long {
    use super::*;

    #[test]
    fn in_synchronous_mode_patronis_failover_loses_nothing() {
        if reservation_conformance::tiers::long_tier(
            "patroni::long::in_synchronous_mode_patronis_failover_loses_nothing",
        ) {
            synchronous_loses_nothing(patroni, Fault::Failover, "Patroni");
        }
    }

    #[test]
    fn the_fault_check_catches_patronis_failover_without_synchronous_mode_losing_acknowledged_confirmations() {
        if reservation_conformance::tiers::long_tier(
            "patroni::long::the_fault_check_catches_patronis_failover_without_synchronous_mode_losing_acknowledged_confirmations",
        ) {
            asynchronous_caught(patroni, Fault::Failover, "Patroni");
        }
    }

    #[test]
    fn in_synchronous_mode_a_patroni_leader_cut_off_from_etcd_and_its_standby_loses_nothing() {
        if reservation_conformance::tiers::long_tier(
            "patroni::long::in_synchronous_mode_a_patroni_leader_cut_off_from_etcd_and_its_standby_loses_nothing",
        ) {
            synchronous_loses_nothing(partitionable, Fault::Partition, "Patroni");
        }
    }

    #[test]
    fn the_fault_check_catches_a_patroni_leader_cut_off_from_etcd_and_its_standby_without_synchronous_mode() {
        if reservation_conformance::tiers::long_tier(
            "patroni::long::the_fault_check_catches_a_patroni_leader_cut_off_from_etcd_and_its_standby_without_synchronous_mode",
        ) {
            asynchronous_caught(partitionable, Fault::Partition, "Patroni");
        }
    }

    #[test]
    fn in_synchronous_mode_a_patroni_leader_paused_past_its_keys_life_loses_nothing() {
        if reservation_conformance::tiers::long_tier(
            "patroni::long::in_synchronous_mode_a_patroni_leader_paused_past_its_keys_life_loses_nothing",
        ) {
            synchronous_loses_nothing(patroni, Fault::LongPause, "Patroni");
        }
    }

    #[test]
    fn the_fault_check_catches_a_patroni_leader_paused_past_its_keys_life_without_synchronous_mode() {
        if reservation_conformance::tiers::long_tier(
            "patroni::long::the_fault_check_catches_a_patroni_leader_paused_past_its_keys_life_without_synchronous_mode",
        ) {
            asynchronous_caught(patroni, Fault::LongPause, "Patroni");
        }
    }

    #[test]
    fn the_whole_suite_passes_under_patroni_in_synchronous_mode() {
        if !reservation_conformance::tiers::long_tier(
            "patroni::long::the_whole_suite_passes_under_patroni_in_synchronous_mode",
        ) {
            return;
        }
        let Some((_turn, h)) = patroni(Replication::Synchronous) else { return };
        let started = Instant::now();
        let report = reservation_conformance::run_all(&h, &PostgresHarness::settings());
        eprintln!("the suite under Patroni, in {:.2?}", started.elapsed());
        if let Err(report) = report.into_result() {
            panic!("{report}");
        }
    }
}
