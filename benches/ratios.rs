//! The two ratios `MemoryStore` is held to, measured with their runs interleaved, so that a
//! machine whose speed drifts (a shared or virtual one) moves both sides of each ratio alike.
//!
//! Each round runs four timed spans: the store and the baseline (`common::Baseline`) on one
//! thread, and each on two threads with disjoint keys, in an order that rotates from round to
//! round. Each round gives:
//! - the single-thread cost: store time per cycle / baseline time per cycle (target ≤ 1.5);
//! - the store's two-thread scaling: its throughput on two threads / on one (target ≥ 1.6);
//! - the baseline's two-thread scaling, which shows what the machine allowed in that round.
//!
//! It prints the quartiles of each over the rounds and whether the medians meet the targets.
//!
//! ```sh
//! cargo bench --bench ratios                         # 40 rounds of 4 × 100 ms: about 16 s
//! cargo bench --bench ratios -- --rounds 80 --span-ms 200
//! cargo bench --bench ratios -- --quick              # 10 rounds of 4 × 50 ms
//! ```
//!
//! Other arguments (criterion's, such as `--noplot`) are ignored, so `cargo bench -- --quick
//! --noplot` runs it beside the criterion benches.

mod common;

use std::time::Duration;

use common::{Baseline, Fixture, fixture, manual_store, throughput};

struct Args {
    rounds: usize,
    span: Duration,
}

fn args() -> Args {
    let mut args = Args { rounds: 40, span: Duration::from_millis(100) };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args = Args { rounds: 10, span: Duration::from_millis(50) },
            "--rounds" => args.rounds = it.next().and_then(|v| v.parse().ok()).unwrap_or(args.rounds).max(1),
            "--span-ms" => {
                let ms = it.next().and_then(|v| v.parse().ok()).unwrap_or(100).max(1);
                args.span = Duration::from_millis(ms);
            }
            _ => {}
        }
    }
    args
}

/// The 25th, 50th and 75th percentiles of `xs`.
fn quartiles(mut xs: Vec<f64>) -> [f64; 3] {
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| xs.get(((xs.len().saturating_sub(1)) as f64 * q).round() as usize).copied().unwrap_or(f64::NAN);
    [at(0.25), at(0.5), at(0.75)]
}

fn main() {
    let Args { rounds, span } = args();
    let f = fixture();
    let store = manual_store();
    let baseline = Baseline::new();
    // Warm both up: tables grown, pages touched, threads' arenas made.
    for threads in [1, 2] {
        throughput(&store, &f, threads, span);
        throughput(&baseline, &f, threads, span);
    }

    type Run<'a> = (&'a dyn Fn(&Fixture) -> f64, usize);
    let one_store = |f: &Fixture| throughput(&store, f, 1, span);
    let one_base = |f: &Fixture| throughput(&baseline, f, 1, span);
    let two_store = |f: &Fixture| throughput(&store, f, 2, span);
    let two_base = |f: &Fixture| throughput(&baseline, f, 2, span);
    let runs: [Run; 4] = [(&one_store, 0), (&one_base, 1), (&two_store, 2), (&two_base, 3)];

    let (mut cost, mut scaling, mut base_scaling) = (Vec::new(), Vec::new(), Vec::new());
    let mut one_thread = Vec::new();
    for round in 0..rounds {
        let mut per_sec = [0.0; 4];
        for i in 0..runs.len() {
            let (run, slot) = runs[(i + round) % runs.len()];
            per_sec[slot] = run(&f);
        }
        let [s1, b1, s2, b2] = per_sec;
        cost.push(b1 / s1);
        scaling.push(s2 / s1);
        base_scaling.push(b2 / b1);
        one_thread.push(s1);
    }

    println!("MemoryStore against its baseline: {rounds} interleaved rounds of 4 × {} ms", span.as_millis());
    let [q1, median, q3] = quartiles(one_thread);
    println!(
        "  store, one thread             {:>6.2} M cycles/s (quartiles {:.2}–{:.2})",
        median / 1e6,
        q1 / 1e6,
        q3 / 1e6
    );
    let report = |what: &str, xs: Vec<f64>, target: Option<(&str, f64, bool)>| {
        let [q1, median, q3] = quartiles(xs);
        let verdict = match target {
            Some((sign, bound, low_is_good)) => {
                let met = if low_is_good { median <= bound } else { median >= bound };
                format!("  target {sign} {bound}: {}", if met { "met" } else { "NOT MET" })
            }
            None => String::new(),
        };
        println!("  {what:<32}{median:>6.2}   (quartiles {q1:.2}–{q3:.2}){verdict}");
    };
    report("store / baseline time, 1 thread", cost, Some(("≤", 1.5, true)));
    report("store, 2 threads / 1 thread", scaling, Some(("≥", 1.6, false)));
    report("baseline, 2 threads / 1 thread", base_scaling, None);
}
