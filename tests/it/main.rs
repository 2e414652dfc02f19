//! The crate's one integration-test binary: a module per topic.

mod async_store;
mod concurrency;
mod errors;
mod memory_store;
mod operations;
mod serialization;
mod spec_rules;
