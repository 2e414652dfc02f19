//! Prints the driver's throughput: the differential check through the pipe, against
//! `reservation serve` (`MemoryStore` behind the protocol), beside the same check
//! run in-process against `MemoryStore` (the baseline of the same run), and against the Python
//! store when python3 is installed:
//! `cargo bench -p reservation-cli --bench driver`.

use std::time::Duration;

use reservation_conformance::differential::{self, Stats};
use reservation_conformance::driver::CommandHarness;
use reservation_conformance::{MemoryHarness, Settings};

const CASES: u32 = 2_000;

fn settings() -> Settings {
    Settings::default().with_seed(1).with_cases(CASES).with_regressions(None).with_differential_threads(8)
}

fn line(label: &str, stats: &Stats, requests: Option<u64>) {
    let secs = stats.elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    let requests = requests.map_or(String::new(), |r| {
        format!(", {r} requests (operations, lookups, opens): {:.0} requests/s", r as f64 / secs)
    });
    println!(
        "  {label}: {} scripts, {} operations in {:.2?}: {:.0} operations/s{requests}",
        stats.cases,
        stats.ops,
        stats.elapsed,
        stats.ops_per_second()
    );
}

fn through(command: &str) -> Option<(Stats, u64)> {
    let h = match CommandHarness::start(command) {
        Ok(h) => h,
        Err(e) => {
            println!("  {command}: not run: {e}");
            return None;
        }
    };
    let before = h.requests();
    let stats = differential::run(&h, &settings()).unwrap_or_else(|f| panic!("{f}"));
    Some((stats, h.requests() - before))
}

fn main() {
    println!("the differential check, seed 1, {CASES} scripts:");
    let serve = format!("{} serve", env!("CARGO_BIN_EXE_reservation"));
    let mut runs: Vec<(Duration, Duration)> = Vec::new();
    for round in 1..=3 {
        println!(" round {round}");
        let base = differential::run(&MemoryHarness, &settings()).unwrap_or_else(|f| panic!("{f}"));
        line("in-process MemoryStore (baseline)", &base, None);
        let Some((piped, requests)) = through(&serve) else { return };
        line("through the pipe, reservation serve", &piped, Some(requests));
        runs.push((piped.elapsed, base.elapsed));
    }
    let ratios: Vec<String> = runs
        .iter()
        .map(|(piped, base)| format!("{:.1}", piped.as_secs_f64() / base.as_secs_f64().max(f64::MIN_POSITIVE)))
        .collect();
    println!(" time through the pipe / in-process, per round: {}", ratios.join(", "));
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/../adapters/python/store.py");
    if std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success()) {
        if let Some((stats, requests)) = through(&format!("python3 {python}")) {
            line("through the pipe, the Python store", &stats, Some(requests));
        }
    } else {
        println!("  the Python store: not run: python3 is not installed");
    }
}
