// docs/implementing.md snippet: sync
use my_crate::MyStore;
use reservation_conformance::Harness;
use reservation_store::ManualClock;

struct MyHarness;

impl Harness for MyHarness {
    type Store = MyStore;
    fn store(&self, clock: ManualClock) -> MyStore {
        MyStore::new(clock)
    }
}

reservation_conformance::tests!(my_crate, MyHarness);
// end of snippet
