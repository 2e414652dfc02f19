//! Prints the figures of a failure's page ([`reservation_conformance::page`]) over a history of
//! 50,000 operations: its weight, and, in headless Chromium where one is installed, how long the
//! page takes from the start of its navigation until it has drawn, opened around the failing
//! operation and opened on the whole history of every key (every bar drawn):
//! `cargo bench -p reservation-conformance --bench pages`.

use std::process::{Command, Stdio};
use std::time::Instant;

use reservation_conformance::{Drawing, Failure, MemoryHarness, linearizability, page};

/// Operations of the history: the figure.
const OPS: usize = 50_000;

fn main() {
    let (names, events) = linearizability::record(&MemoryHarness, 8, OPS, 42);
    let ops = events.len();
    let middle = &events[ops / 2];
    let (key, failing) = (middle.key, middle.called);
    let placed: Vec<u64> =
        events.iter().filter(|e| e.key == key && e.called < failing).rev().take(24).map(|e| e.called).collect();
    let mut drawing = Drawing::new(linearizability::History { names, events });
    drawing.key = Some(key);
    drawing.failing = Some(failing);
    drawing.placed = placed;
    let mut failure = Failure::without_rule("linearizability_under_threads", "a history of the figures");
    failure.drawing = Some(Box::new(drawing));
    let started = Instant::now();
    let html = page::page(&failure);
    let built = started.elapsed();
    let dir = std::env::temp_dir().join(format!("reservation-page-figures-{}", std::process::id()));
    let path = page::write_page(&dir, &failure).unwrap_or_else(|e| panic!("writing the page: {e}"));
    println!(
        "a page of {ops} operations: {:.2} MB, built in {built:.2?}; its history beside it: {:.2} MB",
        html.len() as f64 / 1e6,
        std::fs::metadata(path.with_extension("json")).map_or(0.0, |m| m.len() as f64 / 1e6)
    );
    let Some(browser) = ["chromium", "chromium-browser", "google-chrome"].into_iter().find(|c| {
        Command::new(c).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    }) else {
        println!("no Chromium on the path (apt-get install chromium): the time to draw is not measured");
        return;
    };
    for (what, fragment) in
        [("around the failing operation", ""), ("the whole history, every key", "key=all&view=whole")]
    {
        let mut drawn = Vec::new();
        for _ in 0..3 {
            let out = Command::new(browser)
                .args(["--headless", "--no-sandbox", "--disable-gpu", "--dump-dom"])
                .arg(format!("file://{}#{fragment}", path.display()))
                .stderr(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("running {browser}: {e}"));
            let dom = String::from_utf8_lossy(&out.stdout);
            assert!(!dom.contains("data-errors="), "the page could not draw");
            let ms = dom
                .split("data-drawn=\"")
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .and_then(|ms| ms.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("the page did not say when it had drawn"));
            let bars = dom
                .match_indices(" data-i=\"")
                .filter(|(i, m)| dom[i + m.len()..].starts_with(|c: char| c.is_ascii_digit()))
                .count();
            drawn.push((ms, bars));
        }
        drawn.sort_unstable();
        let (ms, bars) = drawn[drawn.len() / 2];
        println!("  opened {what}: drawn {ms} ms after its navigation began (median of 3), {bars} bars");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
