//! The conformance suite for `ReservationStore` implementations.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod failure;
mod harness;
pub mod oracle;
mod session;

pub use failure::Failure;
pub use harness::{Capabilities, Harness, MemoryHarness, START, Settings, unique_namespace};
