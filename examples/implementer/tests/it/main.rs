//! The README's snippets, compiled and run: the conformance suite against a synchronous and an
//! asynchronous store written outside the repository, and a test that the README still quotes
//! them exactly.

mod async_store;
mod readme;
mod sync_store;
