//! Churn for the checks that reopen a store on a few keys (`durable`, `d10_restart`): a run of
//! changes on a key of its own, long enough to cross a compaction, before one of their reopens.
//!
//! A store that compacts its log into a snapshot, or checkpoints, every so many changes runs its
//! snapshot's recovery only after a reopen that follows one. These checks make a few changes
//! between reopens; without the churn they would never meet a compaction at all. Its length is
//! drawn from the run's seed between [`LEAST`] and twice that, so that every period up to
//! [`LEAST`] changes is crossed at least once, at a point within the period the seed moves.

use reservation_store::rules::Rule;
use reservation_store::{AggregateRef, HoldId, Key, ReleaseVersion, ReservationScope, Ttl, Version};

use crate::failure::Failure;
use crate::harness::Harness;
use crate::session::Session;

/// The fewest changes a churn makes: it crosses every compaction period up to this many.
pub(super) const LEAST: u64 = 512;

/// A churn's length, from `seed` and a `salt` of the check's: [`LEAST`] to `2 * LEAST - 1`.
pub(super) fn length(seed: u64, salt: u64) -> u64 {
    let mut x = seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    LEAST + x % LEAST
}

/// `n` changes on `key` of `scope` by `owner`, each decided by the specification as every step
/// is: round after round of a reserve with `hold` for `ttl` (R1), its confirmation (C2) and its
/// release at any version (L4). Each change looks up its own key only, and the transcript, on
/// failure, holds the churn in one line; every watched key is compared after it.
pub(super) fn churn<H: Harness>(
    s: &mut Session<'_, H>,
    (scope, key): (&ReservationScope, &Key),
    (owner, hold, ttl): (&AggregateRef, &HoldId, Ttl),
    n: u64,
) -> Result<(), Failure> {
    let recording = s.recording();
    s.note(|| format!("      {n} changes of {key:?} follow: reserve, confirm, release, over and over"));
    s.set_recording(false);
    s.set_lookup_all(false);
    let mut made = 0;
    while made < n {
        let (want, got) = match made % 3 {
            0 => (Rule::R1, s.reserve(scope, key, owner, hold, ttl)),
            1 => (Rule::C2, s.confirm(scope, key, owner, Version::from_u64(1))),
            _ => (Rule::L4, s.release(scope, key, owner, ReleaseVersion::Any)),
        };
        made += 1;
        if let Err(failure) = got.and_then(|got| s.expect(want, got)) {
            s.set_recording(recording);
            return Err(failure);
        }
    }
    s.set_recording(recording);
    s.set_lookup_all(true);
    s.check_lookups()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lengths stay between [`LEAST`] and twice it, spread over that range by the seed, differ
    /// between the two checks' salts, and are the same on every version for a seed (a replay line
    /// printed by one replays the same churn on the next).
    #[test]
    fn a_churns_length_is_the_seeds_between_least_and_twice_it() {
        let lengths: Vec<u64> = (0..256).map(|seed| length(seed, 1)).collect();
        assert!(lengths.iter().all(|n| (LEAST..2 * LEAST).contains(n)), "{lengths:?}");
        let mut distinct = lengths.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 150, "{distinct:?}");
        let mean = lengths.iter().sum::<u64>() / 256;
        assert!((LEAST + LEAST / 3..LEAST + 2 * LEAST / 3).contains(&mean), "{mean}");
        assert!((0..64).filter(|seed| length(*seed, 1) != length(*seed, 2)).count() > 60);
        assert_eq!([length(0, 1), length(1, 1), length(1, 2)], [998, 783, 691]);
    }
}
