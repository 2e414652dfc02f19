// docs/implementing.md snippet: settings
use my_crate::MyStore;
use reservation_conformance::{Harness, Settings, run_all};
use reservation_store::ManualClock;

struct MyQuickHarness;

impl Harness for MyQuickHarness {
    type Store = MyStore;
    fn store(&self, clock: ManualClock) -> MyStore {
        MyStore::new(clock)
    }
}

// 600 differential scripts instead of 4,000; the environment's overrides apply on top.
reservation_conformance::tests!(my_quick_store, MyQuickHarness, settings = Settings::default().with_cases(600));

#[test]
fn the_whole_suite_without_the_macro() {
    // One seed replays every randomized check (the scripts, the histories, the faults), and the
    // environment's overrides apply last, so that a failure's replay line works.
    let settings = Settings::default().with_seed(7).with_cases(200).with_env();
    let report = run_all(&MyQuickHarness, &settings);
    assert!(report.is_ok(), "{report}");
}
// end of snippet
