//! The settings of a store: [`SqliteOptions`], with [`Synchronous`] and [`OpenCheck`].

use std::time::Duration;

/// When a commit is synced to disk (SQLite's `PRAGMA synchronous`, in WAL mode).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum Synchronous {
    /// Synced at checkpoints only: an acknowledged operation survives a process kill, but the
    /// last ones may be lost to a power loss or an operating-system crash.
    Normal,
    /// Synced at every commit: an acknowledged operation survives a process kill and a power
    /// loss. The default.
    #[default]
    Full,
}

impl Synchronous {
    /// The value `PRAGMA synchronous` is set to.
    pub(crate) fn pragma(self) -> &'static str {
        match self {
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        }
    }

    /// The number `PRAGMA synchronous` reads back once set.
    pub(crate) fn level(self) -> i64 {
        match self {
            Synchronous::Normal => 1,
            Synchronous::Full => 2,
        }
    }
}

/// The longest [`SqliteOptions::busy_timeout`] SQLite can take, about 24.8 days (`i32::MAX`
/// milliseconds); a longer one is clamped to it.
pub const MAX_BUSY_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// Which SQLite consistency check [`SqliteStore::open_with`](crate::SqliteStore::open_with) runs before it returns a store.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub enum OpenCheck {
    /// None: opening costs nothing more. The default.
    #[default]
    None,
    /// `PRAGMA quick_check`: the structure of every page, in time linear in the file's size.
    Quick,
    /// `PRAGMA integrity_check`: the quick check, and that the expiry index agrees with the table.
    /// As [`SqliteStore::check_integrity`](crate::SqliteStore::check_integrity).
    Full,
}

/// How a [`SqliteStore`](crate::SqliteStore) uses its file. Start from [`SqliteOptions::default`] and set fields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// When commits are synced to disk; [`Synchronous::Full`] by default.
    pub synchronous: Synchronous,
    /// How long one transaction waits for another process's write lock; 5 s by default. Opening
    /// a file that another process is creating waits up to this long too. Clamped to
    /// [`MAX_BUSY_TIMEOUT`].
    pub busy_timeout: Duration,
    /// How many more times a transaction that found the database busy is tried before it
    /// becomes a [`StorageError`](reservation_store::StorageError); 2 by default.
    pub busy_retries: u32,
    /// Expired pending reservations are swept after this many new rows; 1024 by default
    /// (0 turns the automatic sweep off, leaving [`SqliteStore::sweep`](crate::SqliteStore::sweep)).
    pub sweep_every: u64,
    /// How many idle connections the store keeps open for later operations; 8 by default.
    pub max_idle_connections: usize,
    /// After how many pages the write-ahead log is checkpointed into the database file
    /// (`PRAGMA wal_autocheckpoint`); 1000 (about 4 MiB of 4 KiB pages), SQLite's default. A
    /// smaller value keeps the log, and the disk space it holds, smaller at the cost of more
    /// checkpoints; 0 turns automatic checkpoints off, leaving [`SqliteStore::checkpoint`](crate::SqliteStore::checkpoint).
    pub wal_autocheckpoint: u32,
    /// The consistency check run at open; [`OpenCheck::None`] by default.
    pub open_check: OpenCheck,
    /// Whether each change persists its instant and each operation reads it back (rule D10
    /// across a restart): always, but in a planted bug of the `broken-variants` feature.
    pub(crate) persist_clock: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
            busy_retries: 2,
            sweep_every: 1024,
            max_idle_connections: 8,
            wal_autocheckpoint: 1000,
            open_check: OpenCheck::None,
            persist_clock: true,
        }
    }
}

/// A planted bug, for the crate's own tests only (feature `broken-variants`, which nothing but the
/// crate's dev-dependency on itself enables): it makes the store wrong, so that a test can show
/// the conformance suite and the crate's tests catching it. Never enable the feature in a build
/// that stores anything.
#[cfg(feature = "broken-variants")]
impl SqliteOptions {
    /// BROKEN ON PURPOSE: the store neither persists the instant of its changes nor reads it back,
    /// so a store reopened on a clock set back decides at that earlier instant, and a pending
    /// reservation that had expired before the restart is live again (D10 across a restart, P1).
    pub fn broken_forgets_clock(mut self) -> Self {
        self.persist_clock = false;
        self
    }
}
