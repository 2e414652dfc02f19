//! The driver: the suite against a store in any language, through an adapter process that speaks
//! JSON lines on its standard input and output (`PROTOCOL.md` in the repository).
//!
//! [`CommandHarness`] starts the adapter and is a [`Harness`](crate::Harness) like any other, so
//! every named check, the differential test and the linearizability check run unchanged: each
//! store the suite asks for is a store id in the adapter, each operation one request that carries
//! the suite's clock, and requests from several threads are in flight at once (the adapter may
//! answer them in any order). [`serve()`] is the other side for `MemoryStore`
//! (`reservation serve`), so that the driver is tested against a store that decides through `spec`.
//!
//! An adapter that hangs, dies, writes a line that is not JSON, answers an id nobody asked or
//! writes an answer whose fields are not exactly those the protocol's schema gives it is a
//! [`StorageError`](reservation_store::StorageError) (indeterminate: the request may have run)
//! marked as a [`ProtocolError`], naming the request and quoting the adapter's last lines of
//! standard error; every wait ends after [`CommandHarness::TIMEOUT`] (or the timeout given to
//! [`CommandHarness::start_with`]). Once the adapter has broken the protocol in any of these ways,
//! it is broken: every request in flight and every later one fails at once, and the suite starts
//! no other check ([`Harness::broken`](crate::Harness::broken)). `hello` negotiates the
//! protocol's version ([`PROTOCOL`], [`VERSIONS`]): an adapter that does not speak this one is
//! refused, told what changed since its own. A line is read up to
//! [`MAX_LINE`] bytes and no further, the adapter's text is quoted by its first 200 bytes, and
//! requests are written without blocking, so that neither a hang nor the memory a peer costs
//! grows with what it does.
//!
//! The module is in three parts: the client (`client`: the adapter process and
//! [`CommandHarness`]), [`serve()`], and the bounded pipes both sides read and write through
//! (`pipe`). The wire format they speak (requests and answers encoded and decoded, the names of
//! requests and errors, the rules numbers follow, the bound on a line, the marks of a protocol
//! failure) is the crate's `protocol` module, which the rest of the suite speaks too; its public
//! items are re-exported here.

use std::sync::{Mutex, MutexGuard, PoisonError};

mod client;
mod pipe;
mod serve;

pub use crate::protocol::ProtocolError;
pub use crate::protocol::{Hello, MAX_LINE, PROTOCOL, SCHEMA, VERSIONS, VERSIONS_SECTION};
#[doc(hidden)]
pub use crate::protocol::{check_answer, error_names};
pub(crate) use client::unopened;
pub use client::{CommandHarness, CommandStore};
pub use serve::serve;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
