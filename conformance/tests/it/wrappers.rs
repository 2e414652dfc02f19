//! Every wrapper of a harness in the repository passes each optional part through
//! (`dropped_parts`), and the probe catches a wrapper that forgets some, as the command line's
//! old settings wrapper forgot `send_raw`, `faults` and `inject`.

use std::future::Future;

use reservation_conformance::faults::{Fault, Simulated};
use reservation_conformance::{Harness, PARTS, Probe, dropped_parts};
use reservation_store::ManualClock;

#[test]
fn a_borrowed_harness_passes_every_part_through() {
    assert_eq!(dropped_parts(|probe| &*Box::leak(Box::new(probe))), Vec::<&str>::new());
}

#[test]
fn simulated_faults_pass_every_part_through() {
    assert_eq!(dropped_parts(Simulated::new), Vec::<&str>::new());
    let simulated = Simulated::new(Probe::default());
    // Its own faults beside the wrapped harness's.
    assert!(simulated.faults().contains(&Fault::CutConnections) && simulated.faults().contains(&Fault::Crash));
}

/// A wrapper that forwards only what it must: the store, and how its futures run.
struct Careless<H>(H);

impl<H: Harness> Harness for Careless<H> {
    type Store = H::Store;

    fn store(&self, clock: ManualClock) -> Self::Store {
        self.0.store(clock)
    }

    fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.0.block_on(future)
    }
}

#[test]
fn a_wrapper_that_forgets_parts_is_named_with_each_part_it_forgets() {
    let dropped = dropped_parts(Careless);
    let expected: Vec<&str> = PARTS.into_iter().filter(|part| *part != "block_on").collect();
    assert_eq!(dropped, expected);
}
