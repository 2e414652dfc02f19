//! The oracle's contract, on the in-memory store: scripts and raw inputs.

use reservation_conformance::MemoryHarness;
use reservation_conformance::ops::{ClockMove, Op, ReleasePick, VersionPick};
use reservation_conformance::oracle::{self, RawInput, RawOp, RawPrior};
use reservation_store::rules::Rule;

#[test]
fn a_script_reaches_the_rules_it_walks_through() {
    let script = [
        Op::Reserve { owner: 0, key: 0, hold: 0, ttl: 10 },
        Op::Reserve { owner: 0, key: 0, hold: 1, ttl: 10 },
        Op::Reserve { owner: 1, key: 0, hold: 0, ttl: 10 },
        Op::Abandon { owner: 0, key: 0, hold: 1 },
        Op::Clock(ClockMove::JustBeforeExpiry { key: 0 }),
        Op::Confirm { owner: 0, key: 0, version: VersionPick::Fixed(2) },
        Op::Release { owner: 0, key: 0, version: ReleasePick::At(VersionPick::Below) },
        Op::Reserve { owner: 2, key: 3, hold: 0, ttl: 0 },
        Op::Confirm { owner: 2, key: 3, version: VersionPick::At },
        Op::Lookup { key: 1 },
    ];
    let rules = oracle::ops(&MemoryHarness, &script).unwrap_or_else(|f| panic!("{f}"));
    let got: Vec<Rule> = rules.iter().collect();
    assert_eq!(got, [Rule::R1, Rule::R3, Rule::R5, Rule::C2, Rule::L5, Rule::A3, Rule::D2, Rule::D6]);
}

#[test]
fn bad_raw_inputs_are_typed_errors_and_good_ones_follow_the_specification() {
    let good = RawInput {
        scope_type: "user".into(),
        scope_tenant: Some("acme".into()),
        namespace: "name".into(),
        owner_type: "user".into(),
        owner_tenant: Some("acme".into()),
        owner_id: "alice".into(),
        key: "alice".into(),
        hold: "h".into(),
        ttl_millis: 5,
        version: 3,
        op: RawOp::Reserve,
        prior: RawPrior::PendingOther,
    };
    for op in [RawOp::Reserve, RawOp::Confirm, RawOp::Release, RawOp::ReleaseAnyVersion, RawOp::Abandon, RawOp::Lookup]
    {
        for prior in [
            RawPrior::Free,
            RawPrior::PendingOwn,
            RawPrior::PendingOther,
            RawPrior::PendingExpired,
            RawPrior::ConfirmedOwn,
            RawPrior::ConfirmedOther,
        ] {
            for bad in [
                RawInput { op, prior, ..good.clone() },
                RawInput { op, prior, owner_tenant: Some("globex".into()), ..good.clone() },
                RawInput { op, prior, owner_type: "order".into(), ..good.clone() },
                RawInput { op, prior, key: String::new(), ..good.clone() },
                RawInput { op, prior, hold: "x".repeat(129), ..good.clone() },
                RawInput { op, prior, ttl_millis: 0, ..good.clone() },
                RawInput { op, prior, namespace: String::new(), ..good.clone() },
                RawInput { op, prior, version: 0, ..good.clone() },
                RawInput { op, prior, scope_tenant: None, owner_tenant: Some("globex".into()), ..good.clone() },
            ] {
                oracle::inputs(&MemoryHarness, &bad).unwrap_or_else(|f| panic!("{f}"));
            }
        }
    }
}

/// The settings of a differential run of `cases` scripts from seed 11.
fn cases(cases: u32) -> reservation_conformance::Settings {
    reservation_conformance::Settings::default().with_cases(cases).with_seed(11)
}

#[test]
fn the_default_differential_run_reaches_every_transition_rule() {
    let stats =
        reservation_conformance::differential::run(&MemoryHarness, &reservation_conformance::Settings::default())
            .unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(stats.reached.missing_transitions(), [], "{stats:?}");
    assert!(stats.reached.contains(Rule::D2) && stats.reached.contains(Rule::D6), "{stats:?}");
    println!("{stats:?}: {:.0} operations/s", stats.ops_per_second());
}

#[test]
fn a_run_too_short_to_reach_every_rule_draws_more_scripts_until_it_does() {
    // One script cannot reach 27 rules: the run draws more batches until it has.
    let stats = reservation_conformance::differential::run(&MemoryHarness, &cases(1)).unwrap_or_else(|f| panic!("{f}"));
    assert_eq!(stats.reached.missing_transitions(), [], "{stats:?}");
    assert!(stats.ops > 48, "no more scripts were drawn: {stats:?}");
}

#[test]
fn a_run_of_no_new_scripts_fails_on_coverage_and_names_the_missing_ones() {
    let failure =
        reservation_conformance::differential::run(&MemoryHarness, &cases(0)).expect_err("no script reaches a rule");
    let message = failure.to_string();
    assert!(message.contains("never reached"), "{message}");
    assert!(message.contains("RESERVATION_CONFORMANCE_SEED=11"), "{message}");
}

#[test]
fn the_default_regression_file_is_the_committed_one_so_the_suites_here_replay_it() {
    // `cargo test` runs in the crate root, where the default relative path points.
    let path = reservation_conformance::Settings::default().regressions.expect("on by default");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(text.lines().any(|l| l.starts_with("cc ")), "{path} holds no seed:\n{text}");
}

/// Differential scripts of `max_ops` operations, `cases` of them, from seed `seed`.
fn short(max_ops: usize, cases: u32, seed: u64) -> reservation_conformance::Settings {
    let mut s = reservation_conformance::Settings::default().with_cases(cases).with_seed(seed).with_regressions(None);
    s.max_ops = max_ops;
    s
}

/// The differential check draws scripts until every rule is reached: a seed whose 300 scripts
/// miss A3 passes once more are drawn; scripts that can never reach a rule (one operation each)
/// fail on coverage after the cap, naming the rules missed and no rule as broken.
#[test]
fn the_differential_draws_until_every_rule_is_reached_or_fails_on_coverage() {
    use reservation_conformance::differential::{COVERAGE, run};
    let stats = run(&MemoryHarness, &short(48, 300, 12611642212081916392)).expect("every rule reached");
    assert!(stats.reached.missing_transitions().is_empty());
    let failure = run(&MemoryHarness, &short(1, 20, 7)).expect_err("one operation reached every rule");
    assert_eq!((failure.rule, failure.property), (None, Some(COVERAGE)), "{failure}");
    assert!(failure.to_string().contains("never reached") && failure.to_string().contains("A3"), "{failure}");
}

/// A store whose first answer to a reserve is `Conflict`, and every later one right: the first
/// run of a script fails, and the run made again to record it passes.
struct ConflictsOnce {
    inner: reservation_store::MemoryStore<reservation_store::ManualClock>,
    once: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl reservation_store::ReservationStore for ConflictsOnce {
    async fn execute(
        &self,
        request: reservation_store::Request<'_>,
    ) -> reservation_store::StoreResult<reservation_store::Outcome> {
        let reserve = matches!(request.operation, reservation_store::Operation::Reserve { .. });
        if reserve && !self.once.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return Ok(reservation_store::Outcome::Conflict);
        }
        self.inner.execute(request).await
    }

    async fn lookup(
        &self,
        scope: &reservation_store::ReservationScope,
        key: &reservation_store::Key,
    ) -> reservation_store::StoreResult<Option<reservation_store::StoredReservation>> {
        self.inner.lookup(scope, key).await
    }
}

/// Stores sharing one [`ConflictsOnce`] flag: only the first reserve of all is answered wrong.
#[derive(Default)]
struct ConflictsOnceHarness(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl reservation_conformance::Harness for ConflictsOnceHarness {
    type Store = ConflictsOnce;

    fn store(&self, clock: reservation_store::ManualClock) -> ConflictsOnce {
        ConflictsOnce { inner: reservation_store::MemoryStore::with_clock(clock), once: self.0.clone() }
    }
}

/// A script that fails once and passes when it is run again to be recorded: the failure is the
/// first run's, says the store is not deterministic, and still shows both answers.
#[test]
fn a_failure_that_does_not_happen_again_is_reported_with_both_answers() {
    let script = [Op::Reserve { owner: 0, key: 0, hold: 0, ttl: 10 }];
    let failure = oracle::ops(&ConflictsOnceHarness::default(), &script).expect_err("the first run failed");
    let text = failure.to_string();
    assert!(text.contains("the store is not deterministic"), "{text}");
    assert!(text.contains("returned Conflict; the specification says Taken (rule R1)"), "{text}");
    assert_eq!(failure.rule, Some(Rule::R1), "{text}");
}
