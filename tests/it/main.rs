//! The crate's one integration-test binary: a module per topic.

mod async_store;
mod concurrency;
mod memory_store;
mod spec_rules;
mod sqlite_conformance;
mod sqlite_crash;
mod sqlite_processes;
mod sqlite_store;
