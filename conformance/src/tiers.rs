//! The two tiers of the repository's tests. The README's test command, `cargo test --workspace
//! --release`, runs the fast tier: every rule's check on every store, the suite against stores
//! broken on purpose, the fault check with simulated faults, the model's pinned counts, the
//! driver against the in-repo adapters. The long tier is the runs that take real servers through
//! crashes and failovers, the measurements (catch rates, coverage) and the long model runs: each
//! such test sits in a module named `long` and starts with [`long_tier`], and
//! [`LONG_TIER_COMMAND`] runs them all. CI runs both.
//!
//! A long-tier test that the fast tier reaches returns at once and says so, one line on standard
//! error written past the test harness's capture, so that nothing is left out silently.

use std::io::Write;

/// The environment variable that runs the long tier's tests: `1`.
pub const LONG_TIER: &str = "RESERVATION_LONG_TIER";

/// The command that runs the long tier (and only it): its tests are the ones in a module named
/// `long`.
pub const LONG_TIER_COMMAND: &str = "RESERVATION_LONG_TIER=1 cargo test --workspace --release -- ::long::";

/// Whether the long tier runs: [`LONG_TIER`] is `1`.
pub fn long_tier_runs() -> bool {
    std::env::var(LONG_TIER).is_ok_and(|v| v.trim() == "1")
}

/// Whether the long-tier test `test` runs. When the long tier does not run, says on standard
/// error that `test` was left to it, with the command that runs it, and returns `false`: the
/// test then returns without checking anything.
pub fn long_tier(test: &str) -> bool {
    if long_tier_runs() {
        return true;
    }
    // The test harness captures `eprintln!`, not the standard error handle itself.
    let _ = writeln!(std::io::stderr(), "left to the long tier: {test} (run it with `{LONG_TIER_COMMAND}`)");
    false
}
