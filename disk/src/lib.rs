//! A disk that can lose power.
//!
//! [`Disk`] mounts a filesystem (FUSE) at a directory where a store keeps its storage. It serves
//! every operation at once from a [`Tree`] in memory that keeps, beside each file's bytes and each
//! directory's names, the state they had at their last sync. [`Disk::cut`] ends the mount (every
//! operation in progress or to come fails, as on a dead disk), takes back what was never made
//! durable under a [`Persistence`] model, and mounts what is left in the same place: the store,
//! opened again, recovers from what a machine that lost power would have found.
//!
//! What counts as durable is one rule, stated in [`tree`]: a file's bytes and size when the file
//! is synced (`fsync`, `fdatasync`, a write through a descriptor opened `O_SYNC` or `O_DSYNC`); a
//! directory's names when the directory is synced. The models say how much of the rest a cut
//! takes back, from nothing ([`Persistence::Process`], a process crash) to every unsynced name
//! and byte ([`Persistence::Names`]), with torn and reordered writes beyond. A [`CutReport`]
//! names each effect taken back ("bytes 4096-4160 of /wal were written and never synced").
//!
//! A [`Trap`] holds one chosen operation (the k-th write or sync, on a path or anywhere) until
//! the cut, so that a cut lands inside a store's own sequence of writes and syncs, between
//! "written" and "synced", where recovery bugs are.
//!
//! The mount is served by a process of its own: a store that maps a file of the mount into
//! memory (SQLite's index of its log) would deadlock with a server in its own process. That
//! process is the caller's own executable, run again with `RESERVATION_DISK_SERVE` set: a
//! constructor of this crate, run before `main`, serves instead. So any executable that links
//! this crate (a test binary, a command line) can mount a disk, with nothing else to install.
//!
//! Mounting needs `/dev/fuse` and the right to mount (root, or `CAP_SYS_ADMIN`); no libfuse.
//!
//! ```no_run
//! use reservation_disk::{Disk, Persistence};
//!
//! let dir = tempfile::tempdir()?;
//! let mut disk = Disk::mount(dir.path())?;
//! // ... open the store with its storage under dir.path(), make changes, acknowledge them ...
//! let report = disk.cut(Persistence::Names, 7)?;
//! println!("{report}"); // which unsynced writes and names it took back
//! // ... drop the store, open it again on dir.path(), compare what it holds ...
//! # Ok::<(), std::io::Error>(())
//! ```
#![deny(missing_docs)]
#![deny(unsafe_code)]

mod fs;
mod mount;
mod server;
pub mod tree;
mod wire;

pub use fs::{Counts, Trap, TrapOn};
pub use mount::{CutReport, Disk};
pub use tree::{Persistence, TakenBack, Tree};
