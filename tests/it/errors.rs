//! Errors print once: each level's `Display` is that level alone, and its cause is reached through
//! `source()`, so that a chain printed cause by cause (`error_chain`) names each cause once.

use std::error::Error;
use std::fmt;

use reservation_store::*;

/// A cause with a cause of its own, as a driver's error wraps an I/O error.
#[derive(Debug)]
struct Wrapped(std::io::Error);

impl fmt::Display for Wrapped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the connection failed")
    }
}

impl Error for Wrapped {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.0)
    }
}

/// Each level of `error`'s chain, as its own `Display` shows it.
fn levels(error: &(dyn Error + 'static)) -> Vec<String> {
    let mut out = vec![error.to_string()];
    let mut cause = error.source();
    while let Some(e) = cause {
        out.push(e.to_string());
        cause = e.source();
    }
    out
}

/// Every level of the chain shows only itself: no level's text holds a later level's, and the
/// joined chain names each once.
fn assert_each_cause_once(error: &(dyn Error + 'static), expected: &[&str]) {
    let levels = levels(error);
    assert_eq!(levels, expected);
    for (i, level) in levels.iter().enumerate() {
        for later in &levels[i + 1..] {
            assert!(!level.contains(later.as_str()), "level {i} ({level:?}) repeats its cause {later:?}");
        }
    }
    let chain = error_chain(error);
    assert_eq!(chain, expected.join(": "));
    for level in expected {
        assert_eq!(chain.matches(level).count(), 1, "{level:?} in {chain:?}");
    }
}

fn reset() -> std::io::Error {
    std::io::Error::other("connection reset by peer")
}

#[test]
fn a_storage_error_shows_its_message_and_its_causes_once_each() {
    let error = StorageError::with_source("SQLite store: write the row", Wrapped(reset()));
    assert_each_cause_once(
        &error,
        &["SQLite store: write the row", "the connection failed", "connection reset by peer"],
    );
    assert_eq!(error.message(), "SQLite store: write the row");
}

#[test]
fn an_indeterminate_storage_error_says_so_at_its_own_level_only() {
    let error = StorageError::with_source("write the row", reset()).with_indeterminate(true);
    assert_each_cause_once(
        &error,
        &["indeterminate (the operation may have taken effect): write the row", "connection reset by peer"],
    );
    assert!(error.is_indeterminate());
}

#[test]
fn a_store_error_adds_no_level_of_its_own() {
    let storage = StoreError::from(StorageError::with_source("write the row", Wrapped(reset())));
    assert_each_cause_once(&storage, &["write the row", "the connection failed", "connection reset by peer"]);
    assert!(!storage.is_indeterminate());
    let invalid = StoreError::from(InvalidArgument::EmptyKey);
    assert_each_cause_once(&invalid, &["D6: the key is empty"]);
    assert_eq!(invalid.invalid(), Some(InvalidArgument::EmptyKey));
    assert_eq!(InvalidArgument::EmptyKey.name(), "EmptyKey");
    assert!(!invalid.is_indeterminate());
    let indeterminate = StoreError::from(StorageError::indeterminate("timed out"));
    assert!(indeterminate.is_indeterminate());
    assert_eq!(indeterminate.invalid(), None);
}

#[test]
fn an_error_without_a_cause_is_its_own_chain() {
    assert_each_cause_once(&StorageError::new("no connection"), &["no connection"]);
    assert_each_cause_once(
        &StoreError::from(StorageError::indeterminate("timed out")),
        &["indeterminate (the operation may have taken effect): timed out"],
    );
    let unexpected = UnexpectedOutcome { kind: OperationKind::Reserve, outcome: Outcome::Released };
    assert_each_cause_once(&unexpected, &["a reserve cannot report Released"]);
}
