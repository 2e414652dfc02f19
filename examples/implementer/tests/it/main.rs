//! The snippets of docs/implementing.md, compiled and run: the conformance suite against a
//! synchronous and an asynchronous store written outside the repository, and a test that the
//! guide still quotes them exactly; and a test that every relative link of the repository's
//! documents resolves; and README.md's own snippet, compiled, run and compared with its quote.

mod async_store;
mod clock;
mod faults;
mod guide;
mod links;
mod settings;
mod sync_store;
mod using_a_store;
