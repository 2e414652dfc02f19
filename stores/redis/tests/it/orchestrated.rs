//! What the tests of the topologies an orchestrator fails over (Sentinel, Cluster) share: the
//! fault check with one fault, caught losing or losing nothing, and what a node answers to
//! `ROLE`.

use std::time::{Duration, Instant as WallInstant};

use reservation_conformance::faults::{Fault, FaultRun, FaultSettings};
use reservation_redis::RedisHarness;
use reservation_store::rules::Rule;

/// How long a fault check with a long pause goes on: past the moment the old primary is let go
/// on (the sentinels' promotion, 2 to 4 s after the stop; a cluster's election, 2 to 3 s), so that the workers write to it while
/// it still believes it leads. A run of the default 2 s ends during the stop, and then only the
/// writes in flight at the stop reach it: when both ledger workers were between a confirmation
/// and the next key's reservation, nothing acknowledged was lost (1 run of 4 here, and once in CI).
const OUTLASTS_THE_PAUSE: Duration = Duration::from_secs(8);

/// The fault check on `h` with `fault` alone, once; its report printed.
pub fn fault_run(h: &RedisHarness, fault: Fault, label: &str) -> FaultRun {
    let mut settings = FaultSettings::default().with_faults(&[fault]).with_max_faults(1);
    if fault == Fault::LongPause {
        settings = settings.with_duration(OUTLASTS_THE_PAUSE);
    }
    let started = WallInstant::now();
    let run = reservation_conformance::faults::run(h, &settings.into());
    eprintln!("redis, {label}: {} in {:.2?}", run.report, started.elapsed());
    for harm in &run.report.fired {
        eprintln!("  {harm}");
    }
    let fired: Vec<Fault> = run.report.fired.iter().map(|f| f.fault).collect();
    assert_eq!(fired, [fault], "{label}: {}", run.report);
    assert!(run.report.fired.iter().all(|f| f.recovered_after.is_some()), "{label}: {}", run.report);
    run
}

/// What the server at `old` (a URL) answers to `ROLE`, when it answers as a replica: the port of
/// its primary and the state of its link.
pub fn replica_of(h: &RedisHarness, old: &str) -> Option<(u16, String)> {
    h.runtime().block_on(async {
        let client = redis::Client::open(old).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let role: (String, String, u16, String, i64) = redis::cmd("ROLE").query_async(&mut conn).await.ok()?;
        (role.0 == "slave").then_some((role.2, role.3))
    })
}

/// The port of a `redis://127.0.0.1:PORT/` URL.
pub fn port_of(url: &str) -> u16 {
    url.rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse().ok()).unwrap_or_else(|| panic!("{url}"))
}

/// The fault check with `fault` alone on `h`, whose store does not wait for the replicas: it must
/// fail P1, naming the fault, with acknowledged confirmations lost.
pub fn caught_losing(h: &RedisHarness, fault: Fault, label: &str) {
    let run = fault_run(h, fault, label);
    let failure = run.verdict.expect_err("the fault lost nothing");
    assert_eq!(failure.rule, Some(Rule::P1), "{failure}");
    assert!(run.report.lost > 0, "{}", run.report);
    let said = failure.to_string();
    assert!(said.contains("acknowledged confirmations lost") && said.contains(fault.name()), "{said}");
    eprintln!("{}", said.lines().take(12).collect::<Vec<_>>().join("\n"));
}

/// The fault check with `fault` alone on `h`, whose store waits for the replicas: it must pass,
/// having looked acknowledged confirmations up; the run, for more.
pub fn lost_nothing(h: &RedisHarness, fault: Fault, label: &str) -> FaultRun {
    let run = fault_run(h, fault, label);
    if let Err(failure) = &run.verdict {
        panic!("{failure}");
    }
    assert_eq!(run.report.lost, 0, "{}", run.report);
    assert!(run.report.confirmations_checked > 0, "no acknowledged confirmation was looked up: {}", run.report);
    run
}

/// Fault checks of the long tier on an orchestrated topology, one `#[test]` each, gated by the
/// tier under the name `{module}::long::{name}`: `name: harness => check(fault, label);`, where
/// the harness is an `Option` (`None`: a service is missing, said once) and the check
/// [`caught_losing`] or a function of the same shape.
macro_rules! long_fault_checks {
    ($module:literal; $($name:ident: $harness:expr => $check:ident($fault:expr, $label:literal);)*) => {$(
        #[test]
        fn $name() {
            if !reservation_conformance::tiers::long_tier(concat!($module, "::long::", stringify!($name))) {
                return;
            }
            let Some(h) = $harness else { return };
            $check(&h, $fault, $label);
        }
    )*};
}
pub(crate) use long_fault_checks;
