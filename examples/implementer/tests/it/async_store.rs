// docs/implementing.md snippet: async
use my_crate::{MyAsyncStore, Storage};
use reservation_conformance::{Capabilities, Harness};
use reservation_store::ManualClock;

struct MyAsyncHarness {
    runtime: tokio::runtime::Runtime,
    storage: Storage,
}

impl MyAsyncHarness {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("a runtime");
        MyAsyncHarness { runtime, storage: Storage::default() }
    }
}

impl Harness for MyAsyncHarness {
    type Store = MyAsyncStore;
    fn store(&self, clock: ManualClock) -> MyAsyncStore {
        self.runtime.block_on(MyAsyncStore::connect(&self.storage, clock))
    }
    fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }
    // Durable stores only: declare it and say `durable` below. The default reopen drops the store
    // and opens a new one on the same storage, as a restarted process does.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(true)
    }
}

reservation_conformance::tests!(my_async_store, MyAsyncHarness::new(), durable);
// end of snippet
