//! `RedisStore` on a `redis-server` whose directory is a disk that can lose power, through the
//! suite's power-cut check ([`reservation_conformance::crashes::power_cuts`]): with `appendfsync
//! always` every acknowledged write survives a cut that takes back unsynced data (`data`), but not
//! one that also takes back unsynced names (`names`): the server never syncs the directory that
//! holds its `appendonlydir`. With `everysec`, Redis's default, the last second of writes is lost
//! to a cut under `data`, which the check catches when the harness claims more than a process
//! crash.

use reservation_conformance::crashes::power_cuts;
use reservation_conformance::services::service;
use reservation_conformance::{Capabilities, Harness, Persistence, Settings};
use reservation_redis::{RedisHarness, RedisStore};
use reservation_store::ManualClock;
use reservation_store::rules::Rule;

use crate::durable_harness;

/// Whether FUSE mounts here (said once where it does not; a failure under
/// `RESERVATION_REQUIRE_SERVICES=1`): a run with no cut is then a check that did not run.
fn mounts() -> bool {
    let dir = tempfile::tempdir().expect("a temporary directory");
    service("FUSE (a mount of /dev/fuse)", reservation_disk::Disk::mount(dir.path())).is_some()
}

#[test]
fn p1_the_power_cut_check_passes_redis_with_appendfsync_always() {
    let Some(h) = durable_harness() else { return };
    assert_eq!(h.capabilities().power_cuts, Some(Persistence::Data));
    let run = power_cuts(&h, &Settings::default().with_seed(1));
    eprintln!("Redis, appendfsync always: {}", run.report);
    if let Err(failure) = run.verdict {
        panic!("{failure}");
    }
    assert_eq!(run.report.crashes.len(), if mounts() { 8 } else { 0 }, "{}", run.report);
}

/// `appendfsync always` claiming `names`: `redis-server` makes its `appendonlydir` without a sync
/// of the directory that holds it, and a cut that takes back unsynced names takes the whole
/// append-only file.
#[test]
fn p1_redis_loses_its_append_only_directory_to_a_cut_that_takes_back_unsynced_names() {
    let Some(h) = durable_harness() else { return };
    let run = power_cuts(&Claims(h, Persistence::Names), &Settings::default().with_seed(1));
    if !mounts() {
        return;
    }
    let failure = run.verdict.expect_err("Redis kept its append-only directory through a cut under `names`");
    let text = failure.to_string();
    assert_eq!(failure.rule, Some(Rule::P1), "{text}");
    assert!(text.contains("appendonlydir in / was made and never made durable"), "{text}");
}

/// A harness that claims `model`: the broken promise lives here, in a test.
struct Claims(RedisHarness, Persistence);

impl Harness for Claims {
    type Store = RedisStore<ManualClock>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        self.0.store(clock)
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.0.block_on(future)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_power_cuts(self.1)
    }

    fn store_in(&self, dir: &std::path::Path, clock: ManualClock) -> Option<Self::Store> {
        self.0.store_in(dir, clock)
    }
}

#[test]
fn p1_the_power_cut_check_catches_appendfsync_everysec_claiming_a_power_cut() {
    let everysec = service("redis-server (for the power-cut check)", RedisHarness::durable_everysec());
    let Some(everysec) = everysec else { return };
    assert_eq!(everysec.capabilities().power_cuts, Some(Persistence::Process));
    let run = power_cuts(&Claims(everysec, Persistence::Data), &Settings::default().with_seed(1));
    if !mounts() {
        return;
    }
    let failure = run.verdict.expect_err("appendfsync everysec passed power cuts under `data`");
    let text = failure.to_string();
    eprintln!("Redis, appendfsync everysec claiming `data`: {}", text.lines().next().unwrap_or(""));
    assert_eq!(failure.rule, Some(Rule::P1), "{text}");
    assert!(text.contains("were written and never synced"), "{text}");
}
