//! What a failure's page draws ([`crate::page`]): the history behind a failed check, the key and
//! the operation where it went wrong, what the search could still place before it, and the harms
//! (faults, crashes, power cuts) that ran through the run.

use crate::history::{Event, History};

/// A harm, drawn as a band across every lane: what fired, from the stamp of the history's counter
/// when it began to the stamp when the store answered again.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Band {
    /// What fired, as the failure's schedule names it, such as `crash 2 (kill, quiet: right after
    /// an acknowledged change)`.
    pub label: String,
    /// The stamp when it began.
    pub began: u64,
    /// The stamp when the store answered again (or the run gave up waiting).
    pub ended: u64,
}

/// The history behind a failure, and where in it the failure is.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Drawing {
    /// Every operation the check recorded, and the names their indices stand for.
    pub history: History,
    /// The key the failure is about, when it is about one.
    pub key: Option<usize>,
    /// The call stamps of that key's operations in the longest prefix (by call) that some order
    /// explains: the search placed them all.
    pub placed: Vec<u64>,
    /// The call stamp of the operation where the failure is: the one no order can place after
    /// those, or the one whose answer is wrong.
    pub failing: Option<u64>,
    /// For the last few of [`Drawing::placed`]: the states the key can be in once that operation
    /// and every one of the key's called before it are placed, as lookups show them.
    pub states: Vec<(u64, Vec<String>)>,
    /// The harms of the run.
    pub bands: Vec<Band>,
    /// What differs, when the failure is a value that differs (a field after a crash).
    pub differs: Option<String>,
}

impl Drawing {
    /// A drawing of `history` that marks nothing yet.
    pub fn new(history: History) -> Self {
        Drawing {
            history,
            key: None,
            placed: Vec::new(),
            failing: None,
            states: Vec::new(),
            bands: Vec::new(),
            differs: None,
        }
    }

    /// The drawing of `history` (its names, and the events `events`) whose failure is the
    /// operation `failing` on its key.
    pub(crate) fn at(names: &crate::history::Names, events: &[Event], failing: &Event) -> Self {
        let mut d = Drawing::new(History { names: names.clone(), events: events.to_vec() });
        d.key = Some(failing.key);
        d.failing = Some(failing.called);
        d
    }
}
