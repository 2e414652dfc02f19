//! Whether a Chromium is installed, for the Explorer's browser test (`tests/it/explorer.rs`):
//! without one the test is `#[ignore]`d with the reason, so that `cargo test` reports it ignored
//! rather than passed. The probe runs again when a file of this package changes; after
//! installing Chromium, `touch cli/build.rs` (or `cargo clean -p reservation-cli`) makes the
//! next build see it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The names Chromium goes by.
const BROWSERS: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

/// Whether `browser --version` exits successfully within ten seconds.
fn answers(browser: &str) -> bool {
    let Ok(mut child) = Command::new(browser).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).spawn()
    else {
        return false;
    };
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

fn main() {
    println!("cargo::rustc-check-cfg=cfg(chromium)");
    if BROWSERS.into_iter().any(answers) {
        println!("cargo::rustc-cfg=chromium");
    }
}
