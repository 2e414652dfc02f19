//! The crate's one integration-test binary: a module per topic.

mod broken_stores;
mod differential;
mod driver;
mod driver_bounds;
mod driver_versions;
mod faults;
mod fuzz_corpus;
mod linearizability;
mod memory;
mod oracle;
mod schema;
mod services;
mod shared_cause;
mod tiers;
mod tokio_store;
mod vectors;
mod wal;
mod worked_examples;
mod wrappers;
