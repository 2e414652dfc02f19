//! Stores that need a server (PostgreSQL, Redis): their tests skip, saying so, when the server
//! does not answer, and fail instead when [`REQUIRE_SERVICES`] is set to `1`, as CI sets it.

use std::collections::BTreeSet;
use std::fmt::Display;
use std::io::Write;
use std::sync::Mutex;

/// The environment variable that turns a missing server from a skip into a failure: `1`.
pub const REQUIRE_SERVICES: &str = "RESERVATION_REQUIRE_SERVICES";

/// Whether a missing server fails the tests: [`REQUIRE_SERVICES`] is `1`.
pub fn services_required() -> bool {
    std::env::var(REQUIRE_SERVICES).is_ok_and(|v| v.trim() == "1")
}

/// The harness `connected` built, or `None` when its server did not answer.
///
/// On `Err`, prints one line to standard error, once per `service` and process, that names the
/// service and the reason (written past the test harness's capture, so that `cargo test` shows
/// it), and returns `None`, so that the test returns without checking anything. When
/// [`services_required`], it panics with the same line instead.
pub fn service<H, E: Display>(service: &str, connected: Result<H, E>) -> Option<H> {
    let error = match connected {
        Ok(harness) => return Some(harness),
        Err(error) => error,
    };
    let line = format!("{service} unavailable: {error}");
    if services_required() {
        panic!("{line} ({REQUIRE_SERVICES}=1 requires it)");
    }
    static SAID: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let first = SAID.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(service.to_owned());
    if first {
        // The test harness captures `eprintln!`, not the standard error handle itself.
        let _ = writeln!(
            std::io::stderr(),
            "skipped: {line}; its tests did not run (set {REQUIRE_SERVICES}=1 to fail instead)"
        );
    }
    None
}
