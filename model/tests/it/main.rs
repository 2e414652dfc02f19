//! The crate's one integration-test binary: a module per topic.

mod broken;
mod cli;
mod fuzz_corpus;
mod model;
mod reduction;
mod swarm;
mod walk;
