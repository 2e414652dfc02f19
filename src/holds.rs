//! Hold sets: the holds of a pending reservation, as the spec functions see them.

use std::collections::BTreeSet;

/// The holds of a pending reservation: a set of hold ids, never empty while the reservation is
/// pending. Implemented for `BTreeSet` (the stores) and [`BitHolds`] (the model).
pub trait HoldSet: Clone + Eq {
    /// The hold id.
    type Hold: Clone + Eq;
    /// The set holding only `hold`.
    fn single(hold: Self::Hold) -> Self;
    /// Whether `hold` is in the set.
    fn contains(&self, hold: &Self::Hold) -> bool;
    /// Adds `hold`.
    fn insert(&mut self, hold: Self::Hold);
    /// Removes `hold`; whether it was there.
    fn remove(&mut self, hold: &Self::Hold) -> bool;
    /// How many holds the set has.
    fn len(&self) -> usize;
    /// Whether the set is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<H: Ord + Clone> HoldSet for BTreeSet<H> {
    type Hold = H;
    fn single(hold: H) -> Self {
        BTreeSet::from([hold])
    }
    fn contains(&self, hold: &H) -> bool {
        BTreeSet::contains(self, hold)
    }
    fn insert(&mut self, hold: H) {
        BTreeSet::insert(self, hold);
    }
    fn remove(&mut self, hold: &H) -> bool {
        BTreeSet::remove(self, hold)
    }
    fn len(&self) -> usize {
        BTreeSet::len(self)
    }
}

/// A hold id for [`BitHolds`]: a number below 64.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct HoldBit(u8);

impl HoldBit {
    /// Hold number `n`, if it is below 64.
    pub const fn new(n: u8) -> Option<Self> {
        if n < 64 { Some(HoldBit(n)) } else { None }
    }

    /// The hold's number.
    pub const fn get(self) -> u8 {
        self.0
    }
}

/// A hold set of up to 64 small hold ids in one word: cheap to copy and hash, for the model.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct BitHolds(u64);

impl BitHolds {
    /// The set whose bit mask is `bits`: hold `n` for bit `n`.
    pub const fn from_bits(bits: u64) -> Self {
        BitHolds(bits)
    }

    /// The set as a bit mask: bit `n` for hold `n`.
    pub const fn bits(self) -> u64 {
        self.0
    }
}

impl HoldSet for BitHolds {
    type Hold = HoldBit;
    fn single(hold: HoldBit) -> Self {
        BitHolds(1 << hold.0)
    }
    fn contains(&self, hold: &HoldBit) -> bool {
        self.0 & (1 << hold.0) != 0
    }
    fn insert(&mut self, hold: HoldBit) {
        self.0 |= 1 << hold.0;
    }
    fn remove(&mut self, hold: &HoldBit) -> bool {
        let had = self.contains(hold);
        self.0 &= !(1 << hold.0);
        had
    }
    fn len(&self) -> usize {
        self.0.count_ones() as usize
    }
}
