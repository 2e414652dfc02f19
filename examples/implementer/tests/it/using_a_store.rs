//! README.md's "Using a store" snippet, compiled and run here as a user's code, and a test that
//! the README still quotes it exactly: this file's `use` line, then the snippet's lines less the
//! function's indentation.

use reservation_store::*;

/// The snippet, as a user's function would hold it.
fn snippet() -> Result<ReservationStoreState, Box<dyn std::error::Error>> {
    // README.md snippet: using a store
    let store = MemoryStore::new(); // or reservation_sqlite::SqliteStore::open("reservations.db")?
    let scope = ReservationScope::parse("user", Some("acme"), "user-name")?;
    let alice = AggregateRef::parse("user", Some("acme"), "alice-id")?;
    let key = Key::new("alice")?;
    let hold = HoldId::new("decision-7f3a")?;

    match block_on(store.reserve(&scope, &key, &alice, &hold, Ttl::from_millis(5_000)?))? {
        ReserveOutcome::Taken | ReserveOutcome::Joined | ReserveOutcome::AlreadyConfirmed => {
            // append the events, at stream version 1, then:
            block_on(store.confirm(&scope, &key, &alice, Version::stream(1)?))?;
        }
        ReserveOutcome::Conflict => { /* the name is taken */ }
    }
    // end of snippet
    Ok(ReservationStoreState {
        confirmed: matches!(block_on(store.lookup(&scope, &key))?, Some(spec::Reservation::Confirmed(_))),
    })
}

/// What the snippet left in its store.
struct ReservationStoreState {
    confirmed: bool,
}

#[test]
fn the_readme_snippet_reserves_then_confirms() {
    let state = snippet().expect("the README's snippet runs");
    assert!(state.confirmed, "after the README's snippet the key is not confirmed");
}

#[test]
fn the_readme_quotes_the_snippet_exactly() {
    let this = include_str!("using_a_store.rs");
    let lines: Vec<&str> = this.lines().collect();
    let start =
        lines.iter().position(|l| l.trim() == "// README.md snippet: using a store").expect("a start marker") + 1;
    let end = lines.iter().position(|l| l.trim() == "// end of snippet").expect("an end marker");
    let code: Vec<&str> = lines[start..end].iter().map(|l| l.strip_prefix("    ").unwrap_or(l)).collect();
    let code = code.join("\n");
    let readme = std::fs::read_to_string(format!("{}/../../README.md", env!("CARGO_MANIFEST_DIR"))).expect("README.md");
    assert!(
        readme.contains(&format!("```rust\nuse reservation_store::*;\n\n{code}\n```")),
        "README.md does not quote the snippet:\n{code}"
    );
}
