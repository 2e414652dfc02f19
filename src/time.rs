//! Time and versions: instants on the store's clock, times to live, clocks, stream versions.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::InvalidArgument;

/// A point on the store's clock, in milliseconds since the clock's epoch.
///
/// With feature `serde`, written as the number of milliseconds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(transparent))]
pub struct Instant(u64);

impl Instant {
    /// The clock's epoch.
    pub const ZERO: Instant = Instant(0);
    /// The last instant; `now + ttl` saturates here (rule D1).
    pub const MAX: Instant = Instant(u64::MAX);

    /// The instant `millis` milliseconds after the epoch.
    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis)
    }

    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// `self + ttl`, saturating at [`Instant::MAX`] instead of overflowing (rule D1).
    pub const fn saturating_add(self, ttl: Ttl) -> Instant {
        Instant(self.0.saturating_add(ttl.as_millis()))
    }

    /// `self + millis`, saturating at [`Instant::MAX`].
    pub const fn saturating_add_millis(self, millis: u64) -> Instant {
        Instant(self.0.saturating_add(millis))
    }

    /// `self - millis`, saturating at the epoch.
    pub const fn saturating_sub_millis(self, millis: u64) -> Instant {
        Instant(self.0.saturating_sub(millis))
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}ms", self.0)
    }
}

/// A time to live: a whole number of milliseconds, never zero (rule D2).
///
/// With feature `serde`, written as the number of milliseconds; reading 0 is the format's error
/// (rule D2).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct Ttl(std::num::NonZeroU64);

impl Ttl {
    /// A time to live of `millis` milliseconds; zero is [`InvalidArgument::TtlZero`] (rule D2).
    pub const fn from_millis(millis: u64) -> Result<Self, InvalidArgument> {
        match std::num::NonZeroU64::new(millis) {
            Some(n) => Ok(Ttl(n)),
            None => Err(InvalidArgument::TtlZero),
        }
    }

    /// A time to live from a duration, rounded down to whole milliseconds and saturating at
    /// `u64::MAX` of them; less than a millisecond is [`InvalidArgument::TtlZero`] (rule D2).
    pub fn from_duration(duration: Duration) -> Result<Self, InvalidArgument> {
        Self::from_millis(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
    }

    /// The time to live in milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0.get()
    }
}

impl TryFrom<Duration> for Ttl {
    type Error = InvalidArgument;
    fn try_from(duration: Duration) -> Result<Self, InvalidArgument> {
        Self::from_duration(duration)
    }
}

/// The stream version of an owner's fact. [`Version::UNVERSIONED`] (a key imported without one)
/// sorts strictly below every stream version, and stream versions start at 1 (rule D3).
///
/// With feature `serde`, written as [`Version::as_u64`] gives it: 0 for
/// [`Version::UNVERSIONED`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(transparent))]
pub struct Version(u64);

impl Version {
    /// No stream version: below every real one (rule D3).
    pub const UNVERSIONED: Version = Version(0);

    /// Stream version `n`; zero is [`InvalidArgument::ZeroStreamVersion`] (rule D3).
    pub const fn stream(n: u64) -> Result<Self, InvalidArgument> {
        if n == 0 { Err(InvalidArgument::ZeroStreamVersion) } else { Ok(Version(n)) }
    }

    /// The version as a number: 0 for [`Version::UNVERSIONED`], otherwise the stream version.
    pub const fn as_u64(self) -> u64 {
        self.0
    }

    /// The inverse of [`Version::as_u64`]: 0 is [`Version::UNVERSIONED`].
    pub const fn from_u64(n: u64) -> Self {
        Version(n)
    }

    /// Whether this is [`Version::UNVERSIONED`].
    pub const fn is_unversioned(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == 0 { f.write_str("UNVERSIONED") } else { write!(f, "v{}", self.0) }
    }
}

/// The version a release names: the fact that gave the key up, or [`ReleaseVersion::ANY_VERSION`].
/// Only a release can say "any version"; a confirm takes a [`Version`] (rule D4).
///
/// With feature `serde`, written as the version's number, or the string `"ANY"` for
/// [`ReleaseVersion::ANY_VERSION`]. Reading one takes a format that says which it holds (JSON,
/// CBOR, MessagePack, YAML, TOML), not one that must be told (bincode, postcard).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum ReleaseVersion {
    /// The version of the fact that gave the key up.
    At(Version),
    /// Frees the key whichever fact confirmed it (assumption H7: only when the owner can never
    /// take it again).
    Any,
}

impl ReleaseVersion {
    /// Frees the key whichever fact confirmed it.
    pub const ANY_VERSION: ReleaseVersion = ReleaseVersion::Any;
}

impl From<Version> for ReleaseVersion {
    fn from(v: Version) -> Self {
        ReleaseVersion::At(v)
    }
}

impl fmt::Display for ReleaseVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReleaseVersion::At(v) => fmt::Display::fmt(v, f),
            ReleaseVersion::Any => f.write_str("ANY_VERSION"),
        }
    }
}

/// The store's clock: expiry is judged by it alone.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Instant;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Instant {
        (**self).now()
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> Instant {
        (**self).now()
    }
}

/// The system's wall clock, in milliseconds since the Unix epoch (before it reads as the epoch).
/// It never goes back (rule D10): when the wall clock is set back, it keeps reading the latest
/// instant it has read in this process until the wall clock passes it again.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        static LATEST: AtomicU64 = AtomicU64::new(0);
        let millis = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
        let wall = u64::try_from(millis).unwrap_or(u64::MAX);
        Instant(LATEST.fetch_max(wall, Ordering::SeqCst).max(wall))
    }
}

/// A clock that never goes back (rule D10): `source`'s reading, or the latest instant this clock
/// has returned if `source` went back since. Wrap any clock whose source may be set back.
#[derive(Debug, Default)]
pub struct Monotonic<C> {
    source: C,
    latest: AtomicU64,
}

impl<C: Clock> Monotonic<C> {
    /// `source`, made monotonic.
    pub fn new(source: C) -> Self {
        Monotonic { source, latest: AtomicU64::new(0) }
    }

    /// `source`, made monotonic, and never reading earlier than `latest`: the clock of a store
    /// reopened after a restart, `latest` being the latest instant it decided at before it, which
    /// it persisted (rule D10 across a restart).
    pub fn starting_at(source: C, latest: Instant) -> Self {
        Monotonic { source, latest: AtomicU64::new(latest.0) }
    }

    /// The latest instant this clock has returned ([`Instant::ZERO`] before its first reading),
    /// without reading `source`: the instant it will not read earlier than.
    pub fn latest(&self) -> Instant {
        Instant(self.latest.load(Ordering::SeqCst))
    }
}

impl<C: Clock> Clock for Monotonic<C> {
    fn now(&self) -> Instant {
        let read = self.source.now().0;
        Instant(self.latest.fetch_max(read, Ordering::SeqCst).max(read))
    }
}

/// A clock that moves only when told: clones share one time, so a test keeps a handle and
/// advances the clock of the store it built. A test can also stop the next reading of it, to
/// hold an operation between its clock reading and its write ([`ManualClock::hold_next_reading`]).
#[derive(Clone, Default)]
pub struct ManualClock(Arc<ManualState>);

#[derive(Default)]
struct ManualState {
    millis: AtomicU64,
    /// Whether `hold` is set: the one check on the reading's path.
    held: AtomicBool,
    hold: Mutex<Option<Arc<HoldState>>>,
}

#[derive(Default)]
struct HoldState {
    /// (a reading arrived, the hold was released)
    flags: Mutex<(bool, bool)>,
    changed: Condvar,
}

impl HoldState {
    fn flags(&self) -> MutexGuard<'_, (bool, bool)> {
        // Two flags stay consistent across a panic.
        self.flags.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock").field(&self.0.millis.load(Ordering::SeqCst)).finish()
    }
}

impl ManualClock {
    /// A clock reading `start`.
    pub fn new(start: Instant) -> Self {
        let clock = ManualClock::default();
        clock.set(start);
        clock
    }

    /// Sets the time to `at` (it may go backwards: tests of skew need that).
    pub fn set(&self, at: Instant) {
        self.0.millis.store(at.0, Ordering::SeqCst);
    }

    /// Moves the time forward by `millis`, saturating.
    pub fn advance(&self, millis: u64) {
        let _ = self.0.millis.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| Some(t.saturating_add(millis)));
    }

    /// Makes the next reading of this clock (through any clone, on any thread) wait, once it has
    /// read its instant, until the returned [`ClockHold`] is released or dropped. A test holds an
    /// operation between its reading of the clock and its write this way, and sees what other
    /// operations do meanwhile.
    pub fn hold_next_reading(&self) -> ClockHold {
        let hold = Arc::new(HoldState::default());
        *self.0.hold.lock().unwrap_or_else(PoisonError::into_inner) = Some(hold.clone());
        self.0.held.store(true, Ordering::SeqCst);
        ClockHold(hold)
    }

    /// Whether a hold set by [`ManualClock::hold_next_reading`] still waits for its reading: the
    /// next reading of this clock will be held. A driver that reads the clock on a store's
    /// behalf asks the store to read it itself instead while this is true, so that the held
    /// reading is the store's own.
    pub fn hold_pending(&self) -> bool {
        self.0.held.load(Ordering::SeqCst)
    }

    /// The current instant, read without taking or waiting for a pending hold: a reading for
    /// the test itself, which is not the store's.
    pub fn peek(&self) -> Instant {
        Instant(self.0.millis.load(Ordering::SeqCst))
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        let now = Instant(self.0.millis.load(Ordering::SeqCst));
        if self.0.held.load(Ordering::SeqCst) {
            let hold = self.0.hold.lock().unwrap_or_else(PoisonError::into_inner).take();
            if let Some(hold) = hold {
                self.0.held.store(false, Ordering::SeqCst);
                let mut flags = hold.flags();
                flags.0 = true;
                hold.changed.notify_all();
                while !flags.1 {
                    flags = hold.changed.wait(flags).unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
        now
    }
}

/// A reading of a [`ManualClock`] held by [`ManualClock::hold_next_reading`]; released when
/// dropped.
#[derive(Debug)]
pub struct ClockHold(Arc<HoldState>);

impl fmt::Debug for HoldState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (reached, released) = *self.flags();
        f.debug_struct("ClockHold").field("reached", &reached).field("released", &released).finish()
    }
}

impl ClockHold {
    /// Waits until a reading is held, up to `timeout`; whether one is.
    pub fn wait_reached(&self, timeout: Duration) -> bool {
        let flags = self.0.flags();
        let (flags, _) =
            self.0.changed.wait_timeout_while(flags, timeout, |f| !f.0).unwrap_or_else(PoisonError::into_inner);
        flags.0
    }

    /// Lets the held reading return.
    pub fn release(self) {
        drop(self);
    }
}

impl Drop for ClockHold {
    fn drop(&mut self) {
        self.0.flags().1 = true;
        self.0.changed.notify_all();
    }
}
