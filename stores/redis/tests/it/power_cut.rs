//! `RedisStore` on a `redis-server` whose directory is a disk that can lose power, through the
//! suite's power-cut check ([`reservation_conformance::crashes::power_cuts`]): with `appendfsync
//! always` every acknowledged write survives a cut that takes back unsynced data (`data`), but not
//! one that also takes back unsynced names (`names`): the server never syncs the directory that
//! holds its `appendonlydir`. With `everysec`, Redis's default, the last second of writes is lost
//! to a cut under `data`, which the check catches when the harness claims it; and while a sync of
//! the file is slow (the disk's trap holding it), Redis puts off its writes and answers meanwhile,
//! so that even a cut under `process` can lose what it acknowledged.

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
    assert_eq!(everysec.capabilities().power_cuts, None);
    assert!(everysec.capabilities().durable);
    let run = power_cuts(&Claims(everysec, Persistence::Data), &Settings::default().with_seed(1));
    if !mounts() {
        return;
    }
    let failure = run.verdict.expect_err("appendfsync everysec passed power cuts under `data`");
    let text = failure.to_string();
    eprintln!("Redis, appendfsync everysec claiming `data`: {}", text.lines().next().unwrap_or(""));
    assert_eq!(failure.rule, Some(Rule::P1), "{text}");
    // Its bytes taken back, or (a cut under `process`, a write of the file held) never written.
    let cause = text.contains("were written and never synced")
        || (text.contains("under the `process` model") && text.contains("was in progress"));
    assert!(cause, "{text}");
}

/// A row of [`power_cut_rates`]: its name, its harness, and the promise it claims (its own when
/// `None`).
type Row = (&'static str, fn() -> RedisHarness, Option<Persistence>);

/// The power-cut check on seeds 1 to 20: `appendfsync always` as it promises (`data`) and claiming
/// `names`, `everysec` claiming `data` and claiming a process crash only; prints the rows
/// RELIABILITY.md gives:
/// `cargo test --release -p reservation-redis --test it power_cut_rates -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement: 80 runs of the power-cut check, each on redis-servers of its own"]
fn power_cut_rates() {
    let Some(_) = durable_harness() else { return };
    assert!(mounts(), "FUSE does not mount here");
    let rows: [Row; 4] = [
        ("`appendfsync always`, as it promises (`data`)", || durable_harness().expect("redis-server"), None),
        (
            "`appendfsync always`, claiming `names`",
            || durable_harness().expect("redis-server"),
            Some(Persistence::Names),
        ),
        (
            "`appendfsync everysec`, claiming `data`",
            || RedisHarness::durable_everysec().expect("redis-server"),
            Some(Persistence::Data),
        ),
        (
            "`appendfsync everysec`, claiming a process crash (`process`)",
            || RedisHarness::durable_everysec().expect("redis-server"),
            Some(Persistence::Process),
        ),
    ];
    println!("| RedisStore on a redis-server of its own | power-cut check, seeds 1-20 | causes named |");
    println!("|---|---:|---|");
    for (name, harness, claim) in rows {
        let (mut failed, mut causes, mut cuts) = (0, std::collections::BTreeMap::new(), 0);
        for seed in 1..=20 {
            let settings = Settings::default().with_seed(seed);
            let run = match claim {
                None => power_cuts(&harness(), &settings),
                Some(model) => power_cuts(&Claims(harness(), model), &settings),
            };
            cuts += run.report.crashes.len();
            if let Err(f) = run.verdict {
                failed += 1;
                let text = f.to_string();
                let cause = if text.contains("appendonlydir in / was made and never made durable") {
                    "P1: the append-only directory's name taken back"
                } else if text.contains("were written and never synced") {
                    "P1: the append-only file's unsynced bytes taken back"
                } else if text.contains("under the `process` model") {
                    "P1: lost to a cut under `process`, nothing unsynced taken back"
                } else {
                    "another"
                };
                *causes.entry(cause).or_insert(0) += 1;
            }
        }
        let causes: Vec<String> = causes.iter().map(|(c, n)| format!("{c} ({n})")).collect();
        println!("| {name} | {failed}/20 failed ({cuts} cuts) | {} |", causes.join("; "));
    }
}
