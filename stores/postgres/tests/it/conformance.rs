//! The whole conformance suite, durable included, against PostgreSQL.

use crate::harness;

reservation_conformance::tests!(postgres, ?harness(), durable);
