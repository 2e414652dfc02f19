//! The crate's one integration-test binary: a module per topic.

mod broken;
mod cli;
mod fuzz_corpus;
mod model;
mod reduction;
mod swarm;
mod walk;

/// Whether the long-tier test `test` runs: `RESERVATION_LONG_TIER=1`, as
/// `reservation_conformance::tiers` documents (this crate's tests do not link that one). When it
/// does not, says so on standard error, past the test harness's capture, and returns `false`.
fn long_tier(test: &str) -> bool {
    if std::env::var("RESERVATION_LONG_TIER").is_ok_and(|v| v.trim() == "1") {
        return true;
    }
    let command = "RESERVATION_LONG_TIER=1 cargo test --workspace --release -- ::long::";
    let _ = std::io::Write::write_fmt(
        &mut std::io::stderr(),
        format_args!("left to the long tier: {test} (run it with `{command}`)\n"),
    );
    false
}
