//! Churn: changes made over and over on a few keys of their own, so that a crash lands after a
//! number of changes the seed draws, not one the recipes fix.
//!
//! A store that compacts its log into a snapshot, or checkpoints, every so many changes has
//! recovery code that runs only when a crash meets that period: after a compaction, or in the
//! middle of one. Rounds of recipes make the same number of changes on every seed, so whether a
//! crash meets a compaction would be decided by the store's period. Before each quiet crash the
//! run therefore makes a number of changes drawn from the seed over every magnitude from none to
//! thousands ([`length`]); and a power cut's burst goes on changing until its trap holds an
//! operation ([`BURST_MOST`] changes at most), so that a trap on a change of names (a snapshot
//! renamed into place) meets the store's next compaction, whatever its period.

use std::sync::atomic::{AtomicU64, Ordering};

use super::recipes::{A, Step};
use super::{LONG, Run};
use crate::harness::Harness;
use crate::history::{Call, Event};
use crate::record::XorShift;

/// Keys churned, taken once per run.
pub(super) const KEYS: usize = 2;
/// A churn's length is drawn below a power of two of at most this many bits: up to 2,047 changes.
const BITS: u64 = 11;
/// The most changes a power-cut burst's churn makes while it waits for its trap.
pub(super) const BURST_MOST: u64 = 4_096;

/// How many changes the churn before a quiet crash makes, drawn from `r`: a number of bits from
/// 0 to [`BITS`], then a number below two to that power, so that each magnitude, from none to
/// thousands, is as likely as the next (the periods of stores' compactions and checkpoints span
/// them all).
pub(super) fn length(r: &mut XorShift) -> u64 {
    let bits = r.below(BITS + 1);
    r.below(1 << bits)
}

/// The churn of a run: its keys, and how many steps it has made.
pub(super) struct Churn {
    first: usize,
    steps: AtomicU64,
}

impl Churn {
    /// A churn over the [`KEYS`] keys from `first`.
    pub(super) fn new(first: usize) -> Self {
        Churn { first, steps: AtomicU64::new(0) }
    }

    /// The next step: its key, and its call. Key after key, each goes round reserved (pending),
    /// confirmed (at a version that goes round 1, 2, 3) and released with `ANY`: three changes.
    fn next(&self) -> (usize, Call) {
        let n = self.steps.fetch_add(1, Ordering::SeqCst);
        let keys = KEYS as u64;
        let key = self.first + (n % keys) as usize;
        let turn = n / keys;
        let step = match turn % 3 {
            0 => Step::Reserve(A, 0, LONG),
            1 => Step::Confirm(A, 1 + (turn / 3) % 3),
            _ => Step::Release(A, None),
        };
        (key, step.call())
    }
}

impl<H: Harness> Run<'_, H> {
    /// At most `n` churn steps on `store` from `thread`, one after another, until `stop` says so:
    /// their events.
    pub(super) fn churn(
        &self,
        store: &H::Store,
        (thread, round): (usize, usize),
        n: u64,
        stop: &dyn Fn() -> bool,
    ) -> Vec<Event> {
        let mut out = Vec::new();
        for _ in 0..n {
            if stop() {
                break;
            }
            let (key, call) = self.churn.next();
            out.push(self.op(store, thread, round, key, call));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{BITS, Churn, KEYS, length};
    use crate::crashes::LONG;
    use crate::crashes::recipes::{A, Step};
    use crate::record::XorShift;

    /// The lengths span every magnitude up to 2^BITS: none at times, and some in each power of two.
    #[test]
    fn a_churns_length_spans_every_magnitude_from_none_to_thousands() {
        let mut r = XorShift(0x5eed | 1);
        let lengths: Vec<u64> = (0..20_000).map(|_| length(&mut r)).collect();
        assert!(lengths.contains(&0));
        assert!(lengths.iter().all(|n| *n < 1 << BITS));
        for bits in 0..BITS {
            let (low, high) = (1u64 << bits, 1u64 << (bits + 1));
            assert!(lengths.iter().any(|n| (low..high).contains(n)), "none in {low}..{high}");
        }
    }

    /// Key after key from the first, each reserved, confirmed at 1, 2, 3 in turn, released.
    #[test]
    fn the_churn_goes_round_its_keys_reserving_confirming_and_releasing() {
        let (reserve, release) = (Step::Reserve(A, 0, LONG), Step::Release(A, None));
        let turns = [reserve, Step::Confirm(A, 1), release, reserve, Step::Confirm(A, 2), release];
        let turns = turns.into_iter().chain([reserve, Step::Confirm(A, 3), release, reserve, Step::Confirm(A, 1)]);
        let churn = Churn::new(5);
        for (turn, step) in turns.enumerate() {
            for key in 5..5 + KEYS {
                assert_eq!(churn.next(), (key, step.call()), "turn {turn}");
            }
        }
    }
}
