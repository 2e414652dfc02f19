//! The model's state: the store's reservations, each owner's log, attempts and subscription, the
//! store clock, and the step properties the last step broke. Every field is a small integer in a fixed-size array,
//! so a state is cheap to copy and to hash.

use reservation_store::spec::{BitHolds, HoldBit, HoldSet, Reservation};
use reservation_store::{Instant, Version};

use crate::config::{MAX_ATTEMPTS, MAX_KEYS, MAX_OWNERS};

/// Most facts in one owner's log: a configuration's owners append at most one fact more than they
/// have attempts (a give-up), so that an owner can take a key, give it up and take it again. An
/// attempt may still reserve when the log is full, and then can only abandon or crash (its
/// decision failed after reserving).
pub const MAX_FACTS: usize = MAX_ATTEMPTS + 1;

/// A log entry or attempt field that names no key.
pub const NO_KEY: u8 = u8::MAX;
/// A log entry for a fact that gives the owner's key up for good (a deletion).
pub const DELETED: u8 = u8::MAX - 1;

/// A key's name in traces: `A`, `B`, `C`.
pub fn key_name(key: u8) -> char {
    char::from(b'A'.saturating_add(key))
}

/// The reservation of one key, packed: free, pending (owner, holds, expiry) or confirmed (owner,
/// version). It is converted to and from the specification's [`Reservation`] around each
/// operation.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
pub struct Slot {
    /// 0 free, 1 pending, 2 confirmed.
    pub tag: u8,
    /// The owner, when not free.
    pub owner: u8,
    /// The holds of a pending reservation: bit `owner * MAX_ATTEMPTS + attempt`.
    pub holds: u16,
    /// The expiry of a pending reservation, or the version of a confirmed one.
    pub at: u8,
}

/// The packed tag of a free key.
pub const FREE: u8 = 0;
/// The packed tag of a pending reservation.
pub const PENDING: u8 = 1;
/// The packed tag of a confirmed reservation.
pub const CONFIRMED: u8 = 2;

/// The hold id of attempt `attempt` of `owner`: unique per attempt (assumption H6).
pub fn hold_bit(owner: u8, attempt: u8) -> u8 {
    // Saturating: an owner beyond the configuration's gets no valid hold (HoldBit is below 64).
    owner.saturating_mul(MAX_ATTEMPTS as u8).saturating_add(attempt)
}

/// The owner whose attempt has the hold id `bit`.
pub fn hold_owner(bit: u8) -> u8 {
    bit / MAX_ATTEMPTS as u8
}

/// The packed bits of `owner`'s hold ids: symmetry reduction renames owners and attempts by
/// moving these bits, a renaming of hold ids that no rule looks at.
pub(crate) fn owner_holds(owner: u8) -> u16 {
    let width = MAX_ATTEMPTS as u32;
    ((1u32 << width) - 1).checked_shl(u32::from(owner) * width).unwrap_or(0) as u16
}

/// Hold ids a packed [`Slot`] can carry.
pub const HOLD_BITS: u8 = 16;

impl Slot {
    /// The reservation the specification's functions take.
    pub fn to_reservation(self) -> Option<Reservation<u8, BitHolds>> {
        match self.tag {
            PENDING => Reservation::pending(self.owner, self.hold_set(), instant(self.at)),
            CONFIRMED => Some(Reservation::confirmed(self.owner, Version::from_u64(u64::from(self.at)))),
            _ => None,
        }
    }

    /// The holds of a pending reservation, as the specification's hold set.
    pub fn hold_set(self) -> BitHolds {
        BitHolds::from_bits(u64::from(self.holds))
    }

    /// Whether the pending reservation has a hold of another owner's attempt.
    pub fn has_foreign_hold(self) -> bool {
        // The hold bits of every owner but this one, at once (the property is checked at every
        // state).
        let own = u64::from(owner_holds(self.owner));
        self.tag == PENDING && self.hold_set().bits() & !own != 0
    }

    /// Whether the pending reservation has the hold `bit`, asked of the specification's hold set.
    pub fn has_hold(self, bit: u8) -> bool {
        self.tag == PENDING && HoldBit::new(bit).is_some_and(|h| self.hold_set().contains(&h))
    }

    /// Packs a reservation. Instants and versions of a valid configuration fit in a byte.
    pub fn from_reservation(r: Option<&Reservation<u8, BitHolds>>) -> Slot {
        let byte = |n: u64| u8::try_from(n).unwrap_or(u8::MAX);
        match r {
            None => Slot::default(),
            Some(Reservation::Pending(p)) => Slot {
                tag: PENDING,
                owner: *p.owner(),
                holds: u16::try_from(p.holds().bits() & 0xFFFF).unwrap_or(0),
                at: byte(p.expires_at().as_millis()),
            },
            Some(Reservation::Confirmed(c)) => {
                Slot { tag: CONFIRMED, owner: c.owner, holds: 0, at: byte(c.version.as_u64()) }
            }
        }
    }

    /// Whether the key is held at `now`: confirmed, or pending and live, as the specification
    /// judges it (rule D7).
    pub fn is_live(self, now: u8) -> bool {
        self.to_reservation().is_some_and(|r| r.is_live(instant(now)))
    }
}

/// The store instant of a model clock reading.
pub fn instant(t: u8) -> Instant {
    Instant::from_millis(u64::from(t))
}

/// Where an attempt is.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
#[repr(u8)]
pub enum Phase {
    /// Not started.
    #[default]
    Idle,
    /// Reserved its key (Taken, Joined or AlreadyConfirmed); not appended yet.
    Reserved,
    /// Appended its fact; its confirm is due.
    Appended,
    /// Finished: confirmed, abandoned, or met a conflict.
    Done,
    /// Crashed before appending; once its hold is in no reservation, it is [`Phase::Done`].
    CrashedBefore,
    /// Crashed after appending, before confirming; once the subscription has applied its fact,
    /// it is [`Phase::Done`].
    CrashedAfter,
}

/// One attempt (a decision) of an owner. `repr(C)`: [`Owner::signature`] reads its bytes in this
/// order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
#[repr(C)]
pub struct Attempt {
    /// Where it is.
    pub phase: Phase,
    /// The key it takes.
    pub key: u8,
    /// While reserved, the store instant its reservation expires at by its own reckoning (its
    /// reserve's instant plus the TTL), or 0 once it can no longer append: too late, or another
    /// fact of the owner was appended since it read the log (its append would fail on the stream
    /// version).
    pub deadline: u8,
    /// Its fact's version, once appended.
    pub version: u8,
}

/// One owner: its log of facts, its attempts, and its subscription's position. `repr(C)`:
/// [`Owner::signature`] reads its bytes in this order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
#[repr(C)]
pub struct Owner {
    /// How many facts the log has; fact `v` (from 1) is `log[v - 1]`.
    pub log_len: u8,
    /// Per fact: the key the owner holds after it, `NO_KEY` (none) or `DELETED`.
    pub log: [u8; MAX_FACTS],
    /// The subscription's next fact, by index (its version less one).
    pub cursor: u8,
    /// The attempts.
    pub attempts: [Attempt; MAX_ATTEMPTS],
}

impl Owner {
    /// The key held after fact `v` (from 1); `NO_KEY` before the first fact.
    pub fn held_after(&self, v: u8) -> u8 {
        match v.checked_sub(1) {
            Some(i) => self.log.get(usize::from(i)).copied().unwrap_or(NO_KEY),
            None => NO_KEY,
        }
    }

    /// The key its latest fact holds, if any.
    pub fn latest_key(&self) -> Option<u8> {
        let k = self.held_after(self.log_len);
        (usize::from(k) < MAX_KEYS).then_some(k)
    }

    /// Whether its latest fact deleted it.
    pub fn deleted(&self) -> bool {
        self.held_after(self.log_len) == DELETED
    }

    /// Whether the subscription has applied every committed fact.
    pub fn caught_up(&self) -> bool {
        self.cursor >= self.log_len
    }
}

/// A state of the model. Its `Debug` form is the protocol's reading of it (keys with their
/// owner, holds, expiry or version; each owner's latest fact, attempts and subscription; the
/// clock), which stateright's Explorer shows.
#[derive(Clone, Copy, Eq, PartialOrd, Ord, Default)]
pub struct State {
    /// How many keys the configuration has (constant: symmetry reduction permutes only these).
    pub keys: u8,
    /// How many owners the configuration has (constant).
    pub owner_count: u8,
    /// The store's clock.
    pub now: u8,
    /// The store: one reservation per key.
    pub store: [Slot; MAX_KEYS],
    /// The owners.
    pub owners: [Owner; MAX_OWNERS],
    /// The step properties that the last step broke: the `STEP_*` bits (always 0 when they hold,
    /// so they split no states).
    pub flags: u8,
}

// An owner's signature holds all of its bytes: 2 + MAX_FACTS + 4 * MAX_ATTEMPTS = 18 of them, in
// the order of its `repr(C)` layout, so that the words are built by a few wide loads.
const _: () = assert!(MAX_FACTS == 4 && MAX_ATTEMPTS == 3);

impl Owner {
    /// The owner's fields packed into two numbers and a half: equal owners, equal numbers, and the
    /// converse. The bytes are in the order of the fields, so that the compiler reads them with a
    /// few loads.
    pub(crate) fn signature(&self) -> (u64, u64, u16) {
        let [a, b, c] = &self.attempts;
        let lo = u64::from_le_bytes([
            self.log_len,
            self.log[0],
            self.log[1],
            self.log[2],
            self.log[3],
            self.cursor,
            a.phase as u8,
            a.key,
        ]);
        let hi = u64::from_le_bytes([
            a.deadline,
            a.version,
            b.phase as u8,
            b.key,
            b.deadline,
            b.version,
            c.phase as u8,
            c.key,
        ]);
        (lo, hi, u16::from_le_bytes([c.deadline, c.version]))
    }
}

/// A state as numbers ([`State::words`]).
pub(crate) type Words = (u128, [(u64, u64, u16); MAX_OWNERS]);

impl State {
    /// The state as numbers: the clock, flags and store, then each owner's signature. Equal
    /// states give equal words, and the converse holds for the fields' ranges.
    pub(crate) fn words(&self) -> Words {
        let mut head = u128::from(self.now) << 8 | u128::from(self.flags);
        for slot in &self.store {
            head = head << 32
                | u128::from(slot.tag & 0x0F) << 28
                | u128::from(slot.owner) << 20
                | u128::from(slot.holds & 0x0FFF) << 8
                | u128::from(slot.at);
        }
        (head, std::array::from_fn(|o| self.owners[o].signature()))
    }
}

impl Slot {
    /// Every field in one number: equal slots, equal numbers, and the converse.
    fn packed(self) -> u64 {
        u64::from(self.tag) << 40 | u64::from(self.owner) << 32 | u64::from(self.holds) << 8 | u64::from(self.at)
    }
}

impl PartialEq for State {
    /// Field by field, as the derived equality, but a slot and an owner at a time as numbers
    /// ([`Owner::signature`]): the model compares a successor with its state and with the ones it
    /// generated a moment ago, on the hot path, and the derived comparison went byte by byte.
    fn eq(&self, other: &State) -> bool {
        self.now == other.now
            && self.flags == other.flags
            && self.keys == other.keys
            && self.owner_count == other.owner_count
            && self.store.iter().zip(&other.store).all(|(a, b)| a.packed() == b.packed())
            && self.owners.iter().zip(&other.owners).all(|(a, b)| a.signature() == b.signature())
    }
}

impl std::hash::Hash for State {
    /// The words of [`State::words`], the owners' only as far as the configuration has owners
    /// (the others never change). The checker hashes every state it generates, so this is on the
    /// hot path.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        let (head, owners) = self.words();
        state.write_u128(head);
        for (lo, hi, last) in owners.into_iter().take(usize::from(self.owner_count)) {
            state.write_u64(lo);
            state.write_u64(hi);
            state.write_u16(last);
        }
    }
}

/// The last step changed or freed a confirmed reservation other than by its owner's release.
pub const STEP_CONFIRMED_MOVED: u8 = 1;
/// The last step, an operation of one owner, changed or created another owner's reservation.
pub const STEP_TOUCHED_OTHER: u8 = 1 << 1;
/// The last step abandoned a confirmed key.
pub const STEP_ABANDONED_CONFIRMED: u8 = 1 << 2;
/// The last step, a release of an older fact, freed or changed a key a later fact confirmed.
pub const STEP_OLD_RELEASE_FREED: u8 = 1 << 3;

pub(crate) fn version(v: u8) -> Version {
    Version::from_u64(u64::from(v))
}

pub(crate) fn attempt(s: &State, owner: u8, a: u8) -> Option<&Attempt> {
    s.owners.get(usize::from(owner))?.attempts.get(usize::from(a))
}

pub(crate) fn attempt_mut(s: &mut State, owner: u8, a: u8) -> Option<&mut Attempt> {
    s.owners.get_mut(usize::from(owner))?.attempts.get_mut(usize::from(a))
}
