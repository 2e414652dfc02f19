//! The whole suite against the in-memory reference store, through the macro.

use reservation_conformance::MemoryHarness;

reservation_conformance::tests!(memory_store, MemoryHarness);
