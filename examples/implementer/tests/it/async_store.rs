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
    // Durable stores only: declare it, reopen on the same storage, and say `durable` below; a
    // store that persists the instant of each change says `clock_survives_reopen` too.
    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(true).with_clock_survives_reopen(true)
    }
    fn reopen(&self, store: MyAsyncStore, clock: ManualClock) -> Option<MyAsyncStore> {
        drop(store);
        Some(self.store(clock))
    }
}

reservation_conformance::tests!(my_async_store, MyAsyncHarness::new(), durable, clock_survives_reopen);
// end of snippet
