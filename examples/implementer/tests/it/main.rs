//! The snippets of docs/implementing.md, compiled and run: the conformance suite against a
//! synchronous and an asynchronous store written outside the repository, and a test that the
//! guide still quotes them exactly.

mod async_store;
mod guide;
mod sync_store;
