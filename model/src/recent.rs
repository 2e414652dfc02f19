//! Successors a depth-first search generated recently, remembered per thread, so that the model
//! does not hand the checker the same state twice in a short while.
//!
//! A depth-first search reaches the same concrete state again soon after it first generated it
//! (steps that commute, taken in both orders, and siblings' successors alike): at the default
//! configuration about half the states the checker generates are such repeats. The checker would
//! compute each one's representative, hash it and look it up in its visited set (a miss in the
//! processor's caches, the most expensive part of a generated state), only to find it there. A
//! state this thread generated before during the same search was handed to the checker then, and
//! the checker put its representative in the visited set before asking for the next successor: the
//! model's `next_state` says "no successor" for it instead, and counts it
//! ([`Recent::generated_again`]), so the report's generated states are unchanged.
//!
//! Skipping a successor that the visited set already holds changes nothing in the search but its
//! bookkeeping of terminal states, which only `eventually` properties read (the model has none).
//! Path reconstruction replays `next_state` after the search: the table is switched off first
//! ([`Recent::finish`]).

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::state::State;

/// States remembered per thread: a direct-mapped table of this many, about 385 KB, which stays
/// in a core's cache.
const SLOTS: usize = 1 << 12;

/// Repeats counted on a thread before they are added to the search's count.
const FLUSH_EVERY: u64 = 1 << 10;

/// One search's table switch and count of repeats: shared by the model's clones.
#[derive(Debug)]
pub(crate) struct Recent {
    /// Tells the threads' tables apart from an earlier search's.
    search: u64,
    /// Whether `next_state` consults the tables (during the search only).
    on: AtomicBool,
    /// Repeats found, as far as the threads have added theirs.
    repeats: AtomicU64,
}

/// The searches started so far in this process.
static SEARCHES: AtomicU64 = AtomicU64::new(0);

impl Recent {
    /// A new search's switch, on.
    pub(crate) fn new() -> Arc<Recent> {
        Arc::new(Recent {
            search: SEARCHES.fetch_add(1, Ordering::Relaxed) + 1,
            on: AtomicBool::new(true),
            repeats: AtomicU64::new(0),
        })
    }

    /// Whether `n`, a successor this thread is about to hand the checker, was handed to it before
    /// by this thread in this search (it is then counted); if not, it is remembered.
    pub(crate) fn generated_again(self: &Arc<Recent>, n: &State) -> bool {
        if !self.on.load(Ordering::Relaxed) {
            return false;
        }
        TABLE.with(|table| table.borrow_mut().generated_again(self, n))
    }

    /// The repeats the threads have added so far (they add them in batches).
    pub(crate) fn so_far(&self) -> u64 {
        self.repeats.load(Ordering::Relaxed)
    }

    /// Ends the search: the tables are no longer consulted. Returns the repeats found, once the
    /// search's threads have ended (each adds the rest of its count when it ends).
    pub(crate) fn finish(&self) -> u64 {
        self.on.store(false, Ordering::Relaxed);
        self.repeats.load(Ordering::Relaxed)
    }
}

/// A thread's table, for one search at a time.
struct Table {
    /// The search whose states the table holds, and where its count goes.
    search: Option<Arc<Recent>>,
    /// Repeats found on this thread and not yet added to the search's count.
    repeats: u64,
    /// The states, by [`slot`]; the default state (no owners: no state of a search) marks an
    /// empty slot.
    states: Box<[State]>,
}

impl Table {
    fn generated_again(&mut self, recent: &Arc<Recent>, n: &State) -> bool {
        if self.search.as_ref().is_none_or(|s| s.search != recent.search) {
            self.flush();
            self.search = Some(Arc::clone(recent));
            self.states.fill(State::default());
        }
        let Some(entry) = self.states.get_mut(slot(n)) else { return false };
        if entry == n {
            self.repeats += 1;
            if self.repeats >= FLUSH_EVERY {
                self.flush();
            }
            return true;
        }
        *entry = *n;
        false
    }

    fn flush(&mut self) {
        if let Some(s) = &self.search {
            s.repeats.fetch_add(self.repeats, Ordering::Relaxed);
        }
        self.repeats = 0;
    }
}

impl Drop for Table {
    /// A search's thread ends: its last repeats are added before the search is joined.
    fn drop(&mut self) {
        self.flush();
    }
}

thread_local! {
    static TABLE: RefCell<Table> =
        RefCell::new(Table { search: None, repeats: 0, states: vec![State::default(); SLOTS].into_boxed_slice() });
}

/// Where `s` goes in the table: a multiplicative hash of its words.
fn slot(s: &State) -> usize {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let (head, owners) = s.words();
    let mut h = ((head as u64) ^ ((head >> 64) as u64).rotate_left(29)).wrapping_mul(K);
    for (lo, hi, last) in owners.into_iter().take(usize::from(s.owner_count)) {
        h = (h.rotate_left(23) ^ lo).wrapping_mul(K);
        h = (h.rotate_left(23) ^ hi ^ u64::from(last) << 48).wrapping_mul(K);
    }
    (h >> 40) as usize % SLOTS
}
