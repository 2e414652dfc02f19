//! The whole conformance suite against Redis: on the shared server (which keeps nothing on disk,
//! so not durable), and the durable check and the check of D10 across a restart against a server
//! of the test's own with an append-only file, restarted (killed) at every reopen.

use crate::{durable_harness, harness};

reservation_conformance::tests!(redis, ?harness(), settings = reservation_redis::RedisHarness::settings());

#[test]
fn p1_durable_on_an_append_only_server_killed_at_every_reopen() {
    let Some(h) = durable_harness() else { return };
    assert!(reservation_conformance::Harness::capabilities(&h).durable);
    if let Err(failure) = reservation_conformance::checks::durable(&h, &reservation_conformance::Settings::default()) {
        panic!("{failure}");
    }
}

#[test]
fn d10_restart_on_an_append_only_server_killed_at_every_reopen() {
    let Some(h) = durable_harness() else { return };
    assert!(reservation_conformance::Harness::capabilities(&h).durable);
    if let Err(failure) =
        reservation_conformance::checks::d10_restart(&h, &reservation_conformance::Settings::default())
    {
        panic!("{failure}");
    }
}
