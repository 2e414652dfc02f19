//! A stateright model of the reservation protocol around a `ReservationStore`.
#![deny(missing_docs)]
