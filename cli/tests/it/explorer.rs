//! `reservation explore`, stateright's Explorer on the model, in a real browser: headless
//! Chromium loads the page, follows an action, and the rendered text is the protocol's reading of
//! the states (keys with their owner, holds and expiry, latest facts, attempts) with the rule id
//! of each operation.
//! Without a Chromium when the test was built (Debian: `apt-get install chromium`), the test is
//! ignored, with the reason, and `cargo test` reports it so (`build.rs` probes for one).

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"].into_iter().find(|c| {
        Command::new(c).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
    })
}

/// Kills the Explorer when the test ends, however it ends.
struct Explorer(Child);

impl Drop for Explorer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn render(browser: &str, url: &str) -> String {
    let out = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000", "--dump-dom", url])
        .stderr(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {browser}: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[cfg_attr(
    not(chromium),
    ignore = "no Chromium was found when this test was built (apt-get install chromium, then touch cli/build.rs)"
)]
fn the_explorer_shows_states_as_the_protocol_reads_them_with_rule_ids() {
    // Run all the same (`cargo test -- --ignored`), it says what is missing.
    let browser = chromium().expect("no Chromium answers `--version` (apt-get install chromium)");
    // A port no other test of this process is handed, outside the range bind(0) draws from.
    let port = reservation_conformance::services::loopback_port().expect("a free port");
    let _explorer = Explorer(
        Command::new(env!("CARGO_BIN_EXE_reservation"))
            .args(["explore", "--port", &port.to_string(), "--owners", "2", "--attempts", "1", "--keys", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < Duration::from_secs(20), "the Explorer did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let base = format!("http://127.0.0.1:{port}/#/steps/0");
    let initial = render(browser, &base);
    assert!(initial.contains("store clock: t=0"), "no readable state on the page:\n{initial}");
    assert!(initial.contains("A=free") && initial.contains("o0: no fact"), "{initial}");
    assert!(!initial.contains("Slot {") && !initial.contains("holds: "), "packed values on the page:\n{initial}");
    // Follow the first owner's reserve: the page shows what the step did, with its rule id, and
    // the store after it.
    let reserve = (0..8)
        .map(|i| render(browser, &format!("{base}/{i}")))
        .find(|page| page.contains("owner 0 attempt 0 (hold h0): reserve(A, hold h0)"));
    let Some(after) = reserve else { panic!("no action of the first page was owner 0's reserve") };
    assert!(after.contains("Taken (R1)"), "no rule id on the step:\n{after}");
    assert!(after.contains("A=pending(o0 {h0} until t="), "{after}");
}
