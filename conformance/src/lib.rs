//! The conformance suite for `ReservationStore` implementations.
#![deny(missing_docs)]
