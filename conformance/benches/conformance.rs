//! The conformance differential run: `oracle::ops` on a fixed script of operations, applied to a
//! fresh `MemoryStore` and to the spec functions side by side, every outcome and every key's
//! lookup compared after each step. Throughput is in script operations per second.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use reservation_conformance::ops::{ClockMove, Op, ReleasePick, VersionPick};
use reservation_conformance::{MemoryHarness, oracle};

/// Operations in the fixed script.
const SCRIPT_LEN: usize = 256;

/// A fixed script, the same on every run: a xorshift generator over the whole `Op` space, with
/// small ttls so that the clock moves meet expiries.
fn script() -> Vec<Op> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x.to_le_bytes()
    };
    let version = |b: u8| match b % 5 {
        0 => VersionPick::Unversioned,
        1 => VersionPick::Below,
        2 => VersionPick::At,
        3 => VersionPick::Above,
        _ => VersionPick::Fixed(b / 5),
    };
    (0..SCRIPT_LEN)
        .map(|_| {
            let [kind, owner, key, hold, a, ..] = next();
            match kind % 6 {
                0 => Op::Reserve { owner, key, hold, ttl: a % 8 },
                1 => Op::Confirm { owner, key, version: version(a) },
                2 => Op::Release {
                    owner,
                    key,
                    version: if a % 4 == 0 { ReleasePick::Any } else { ReleasePick::At(version(a / 4)) },
                },
                3 => Op::Abandon { owner, key, hold },
                4 => Op::Lookup { key },
                _ => Op::Clock(match a % 4 {
                    0 => ClockMove::JustBeforeExpiry { key },
                    1 => ClockMove::AtExpiry { key },
                    2 => ClockMove::JustAfterExpiry { key },
                    _ => ClockMove::By(hold % 8),
                }),
            }
        })
        .collect()
}

fn bench_differential(c: &mut Criterion) {
    let script = script();
    // The script must run clean and reach a good part of the rule table, or the figure means little.
    match oracle::ops(&MemoryHarness, &script) {
        Ok(rules) if rules.len() >= 15 => {}
        Ok(rules) => {
            panic!("the bench script reaches only {} rules: {:?}", rules.len(), rules.iter().collect::<Vec<_>>())
        }
        Err(failure) => panic!("the bench script fails on MemoryStore:\n{failure}"),
    }
    let mut g = c.benchmark_group("conformance");
    g.throughput(Throughput::Elements(SCRIPT_LEN as u64));
    g.bench_function("differential/memory-256-ops", |b| {
        b.iter(|| oracle::ops(&MemoryHarness, black_box(&script)).map(|r| r.len()))
    });
    g.finish();
}

criterion_group!(benches, bench_differential);
criterion_main!(benches);
