//! `SqliteStore` against a baseline of plain rusqlite statements on the same table.
//!
//! The baseline is the least a durable store of reservations can do per operation: one
//! `BEGIN IMMEDIATE` transaction holding one cached `INSERT OR REPLACE` (reserve, confirm) or
//! `DELETE` (release) of a precomputed row, on a file made by `SqliteStore::open` (so the same
//! table, index, WAL mode and `synchronous` setting). `SqliteStore` adds the read of the row, the
//! clock, the spec function, the encoding and its connection pool. The figure that matters is the
//! ratio of the two, for each `synchronous` setting.
//!
//! Groups: `cycle_normal` and `cycle_full` time one reserve → confirm → release cycle (three
//! transactions) over 256 keys; `lookup` times the lookup of a confirmed key among 256. After the
//! criterion groups, `cargo bench -p reservation-sqlite --bench sqlite` prints a summary with
//! cycles and operations per second and the ratio to the baseline, measured by interleaved timed
//! runs. With `FULL` every commit waits for the disk to sync, so those figures measure the disk
//! (and whatever else is writing to it) more than the code. The files live in a temporary
//! directory, which honours `TMPDIR`: `TMPDIR=/dev/shm` (a memory file system) takes the disk out
//! and leaves the cost of the code alone.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant as WallInstant};

use criterion::{Criterion, Throughput};
use reservation_sqlite::{SqliteOptions, SqliteStore, Synchronous};
use reservation_store::{
    AggregateRef, HoldId, Key, ReleaseVersion, ReservationScope, ReservationStore, SystemClock, Ttl, Version, block_on,
};
use rusqlite::{Connection, params};

const KEYS: usize = 256;

struct Fixture {
    scope: ReservationScope,
    owner: AggregateRef,
    hold: HoldId,
    keys: Vec<Key>,
    ttl: Ttl,
    version: Version,
}

fn fixture() -> Fixture {
    let built = (|| -> Result<Fixture, reservation_store::InvalidArgument> {
        Ok(Fixture {
            scope: ReservationScope::parse("user", Some("acme"), "user-name")?,
            owner: AggregateRef::parse("user", Some("acme"), "7f1c2a64-alice")?,
            hold: HoldId::new("attempt-7f1c2a64-0001")?,
            keys: (0..KEYS).map(|i| Key::new(format!("user-name-{i:04}"))).collect::<Result<_, _>>()?,
            ttl: Ttl::from_millis(5_000)?,
            version: Version::stream(3)?,
        })
    })();
    built.unwrap_or_else(|e| panic!("bench fixture: {e}"))
}

fn options(sync: Synchronous) -> SqliteOptions {
    let mut options = SqliteOptions::default();
    options.synchronous = sync;
    options
}

fn store(dir: &Path, sync: Synchronous) -> SqliteStore<SystemClock> {
    let path = dir.join(format!("store-{sync:?}.db"));
    SqliteStore::open_with(path, SystemClock, options(sync)).unwrap_or_else(|e| panic!("{e}"))
}

fn ok<T>(r: reservation_store::StoreResult<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn store_cycle(store: &SqliteStore, f: &Fixture, key: &Key) {
    black_box(ok(block_on(store.reserve(&f.scope, key, &f.owner, &f.hold, f.ttl))));
    black_box(ok(block_on(store.confirm(&f.scope, key, &f.owner, f.version))));
    black_box(ok(block_on(store.release(&f.scope, key, &f.owner, ReleaseVersion::At(f.version)))));
}

/// Plain statements on the store's table: what the cycle costs without reading the row or any
/// rule.
struct Baseline {
    conn: Connection,
}

const UPSERT: &str = "INSERT OR REPLACE INTO reservation
    (aggregate_type, tenant, namespace, key, owner_tenant, owner_id, state, holds, expires_at, version)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
const DELETE: &str =
    "DELETE FROM reservation WHERE aggregate_type = ?1 AND tenant = ?2 AND namespace = ?3 AND key = ?4";

impl Baseline {
    fn open(dir: &Path, sync: Synchronous) -> Self {
        let path = dir.join(format!("baseline-{sync:?}.db"));
        // The store makes the file: the same table, index and WAL mode.
        drop(SqliteStore::open_with(&path, SystemClock, options(sync)).unwrap_or_else(|e| panic!("{e}")));
        let conn = Connection::open(&path).unwrap_or_else(|e| panic!("{e}"));
        let sync = if sync == Synchronous::Full { "FULL" } else { "NORMAL" };
        conn.pragma_update(None, "synchronous", sync).unwrap_or_else(|e| panic!("{e}"));
        Baseline { conn }
    }

    fn txn(&self, sql: &str, params: &[&dyn rusqlite::ToSql]) {
        let run = || -> rusqlite::Result<()> {
            self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
            self.conn.prepare_cached(sql)?.execute(params)?;
            self.conn.prepare_cached("COMMIT")?.execute([])?;
            Ok(())
        };
        run().unwrap_or_else(|e| panic!("{e}"));
    }

    fn cycle(&self, f: &Fixture, key: &Key) {
        let (t, ns, k) = (b"user".as_slice(), b"user-name".as_slice(), key.as_str().as_bytes());
        let (tenant, owner) = (b"acme".as_slice(), b"7f1c2a64-alice".as_slice());
        let hold = f.hold.as_str().as_bytes();
        let len = u16::try_from(hold.len()).unwrap_or(u16::MAX);
        let holds = [&len.to_be_bytes()[..], hold].concat();
        let none = None::<i64>;
        let pending: [&dyn rusqlite::ToSql; 10] = [&t, &tenant, &ns, &k, &tenant, &owner, &0, &holds, &1_i64, &none];
        self.txn(UPSERT, &pending);
        let confirmed: [&dyn rusqlite::ToSql; 10] =
            [&t, &tenant, &ns, &k, &tenant, &owner, &1, &None::<Vec<u8>>, &none, &3_i64];
        self.txn(UPSERT, &confirmed);
        self.txn(DELETE, params![t, tenant, ns, k]);
    }
}

fn cycles(c: &mut Criterion, dir: &Path, sync: Synchronous) {
    let f = fixture();
    let store = store(dir, sync);
    let baseline = Baseline::open(dir, sync);
    let mut group = c.benchmark_group(format!("cycle_{}", format!("{sync:?}").to_lowercase()));
    group.throughput(Throughput::Elements(1));
    let mut i = 0;
    group.bench_function("sqlite_store", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            store_cycle(&store, &f, &f.keys[i]);
        })
    });
    group.bench_function("baseline", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            baseline.cycle(&f, &f.keys[i]);
        })
    });
    group.finish();
}

fn lookups(c: &mut Criterion, dir: &Path) {
    let f = fixture();
    let store = store(dir, Synchronous::Normal);
    for key in &f.keys {
        block_on(store.confirm(&f.scope, key, &f.owner, f.version)).unwrap_or_else(|e| panic!("{e}"));
    }
    let mut group = c.benchmark_group("lookup");
    group.throughput(Throughput::Elements(1));
    let mut i = 0;
    group.bench_function("sqlite_store", |b| {
        b.iter(|| {
            i = (i + 1) % KEYS;
            black_box(block_on(store.lookup(&f.scope, &f.keys[i])).unwrap_or_else(|e| panic!("{e}")))
        })
    });
    group.finish();
}

/// Interleaved timed runs of both sides, for the summary's ratio.
fn summary(dir: &Path, sync: Synchronous, rounds: usize, cycles_per_round: usize) {
    let f = fixture();
    let store = store(dir, sync);
    let baseline = Baseline::open(dir, sync);
    let (mut store_time, mut baseline_time) = (Duration::ZERO, Duration::ZERO);
    // Short rounds, alternating which side goes first, so that drift in the machine's load (and,
    // with FULL, in the disk's sync latency) falls on both sides alike.
    for round in 0..rounds {
        for side in [round % 2, 1 - round % 2] {
            let start = WallInstant::now();
            for i in 0..cycles_per_round {
                let key = &f.keys[(round * cycles_per_round + i) % KEYS];
                if side == 0 { store_cycle(&store, &f, key) } else { baseline.cycle(&f, key) }
            }
            *(if side == 0 { &mut store_time } else { &mut baseline_time }) += start.elapsed();
        }
    }
    let n = (rounds * cycles_per_round) as f64;
    let per_sec = |d: Duration| n / d.as_secs_f64();
    println!(
        "summary {sync:?}: SqliteStore {:.0} cycles/s ({:.0} ops/s), baseline {:.0} cycles/s ({:.0} ops/s), \
         time ratio store/baseline {:.2}",
        per_sec(store_time),
        3.0 * per_sec(store_time),
        per_sec(baseline_time),
        3.0 * per_sec(baseline_time),
        store_time.as_secs_f64() / baseline_time.as_secs_f64()
    );
}

fn main() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    cycles(&mut c, dir.path(), Synchronous::Normal);
    cycles(&mut c, dir.path(), Synchronous::Full);
    lookups(&mut c, dir.path());
    c.final_summary();
    // `cargo bench` passes --bench; `cargo test --benches` runs each bench once and no summary.
    if std::env::args().any(|a| a == "--bench") {
        summary(dir.path(), Synchronous::Normal, 40, 250);
        summary(dir.path(), Synchronous::Full, 40, 10);
    }
}
