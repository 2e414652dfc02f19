//! The tree served to the kernel: every operation applied to the [`Tree`] under one lock, the
//! operations counted, a trap that holds one of them, and a dead disk after a cut.

use std::ffi::OsStr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo, LockOwner, OpenFlags,
    RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::tree::{FsError, Ino, Kind, Tree};

/// How long the kernel may keep a name or an attribute it was given: one mount serves one
/// kernel, and every change passes through it, so nothing it caches goes stale before a cut,
/// after which the mount is new.
const TTL: Duration = Duration::from_secs(1);

/// Which operations a [`Trap`] counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TrapOn {
    /// Writes, size changes and changes of names included.
    Write,
    /// Syncs of a file or a directory.
    Sync,
    /// Writes and syncs, as `Write` and `Sync` count them.
    Any,
    /// Changes of names alone: a name made (a file or a directory), removed, renamed or linked,
    /// counted on its directory. Rare beside writes, they mark a store's compactions and
    /// checkpoints (a snapshot written under a new name and renamed over the old).
    Names,
    /// Syncs of a file that holds synced bytes and has an unsynced write across a sector boundary
    /// (a log's tail, [`Tree::can_tear`]): a cut that holds one, under
    /// [`Persistence::Torn`](crate::Persistence::Torn), tears that write. A `Sync` trap counts
    /// them too.
    Tear,
}

impl TrapOn {
    /// Whether a trap on `self` counts an operation of kind `op` (`Write`, `Sync`, `Names`, or
    /// `Tear` for a sync that a cut can tear a write of).
    pub fn counts(self, op: TrapOn) -> bool {
        match self {
            TrapOn::Any => true,
            TrapOn::Write => matches!(op, TrapOn::Write | TrapOn::Names),
            TrapOn::Sync => matches!(op, TrapOn::Sync | TrapOn::Tear),
            on => on == op,
        }
    }
}

/// Holds the `nth` operation of a kind (on `path`, when given) counted from when the trap is
/// set: the operation waits, not applied, until the disk is cut, and then fails as on a dead disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trap {
    /// What it counts.
    pub on: TrapOn,
    /// The file or directory it counts on (as [`Tree::path`] spells it); any when `None`.
    pub path: Option<String>,
    /// Which one it holds, from 1.
    pub nth: u64,
}

/// How many operations of each kind the disk served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Writes and size changes.
    pub writes: u64,
    /// Syncs of files.
    pub file_syncs: u64,
    /// Syncs of directories.
    pub dir_syncs: u64,
    /// Names made, removed, renamed or linked.
    pub names: u64,
}

/// What the mount and its owner share.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    pub(crate) changed: Condvar,
}

#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) tree: Tree,
    pub(crate) dead: bool,
    pub(crate) counts: Counts,
    pub(crate) trap: Option<(Trap, u64)>,
    /// The operation the trap holds, described.
    pub(crate) held: Option<String>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The filesystem given to `fuser`.
pub(crate) struct Fs {
    pub(crate) shared: Arc<Shared>,
    pub(crate) born: SystemTime,
}

fn errno(e: FsError) -> Errno {
    match e {
        FsError::NotFound => Errno::ENOENT,
        FsError::Exists => Errno::EEXIST,
        FsError::NotDir => Errno::ENOTDIR,
        FsError::IsDir => Errno::EISDIR,
        FsError::NotEmpty => Errno::ENOTEMPTY,
        FsError::Invalid => Errno::EINVAL,
        FsError::TooBig => Errno::EFBIG,
        FsError::Dead => Errno::EIO,
    }
}

impl Fs {
    /// The state, unless the disk is dead.
    fn live(&self) -> Result<MutexGuard<'_, State>, Errno> {
        let state = self.shared.lock();
        if state.dead { Err(Errno::EIO) } else { Ok(state) }
    }

    /// Counts an operation on `ino`, and holds it while a trap that matches it waits for the cut.
    fn pass<'a>(
        &'a self,
        mut state: MutexGuard<'a, State>,
        ino: Ino,
        on: TrapOn,
        what: &str,
    ) -> Result<MutexGuard<'a, State>, Errno> {
        // A path is a walk of the tree: made only for a trap that names one, and for the report.
        let State { tree, trap, .. } = &mut *state;
        let hit = match trap {
            Some((trap, seen)) if trap.on.counts(on) && trap.path.as_ref().is_none_or(|p| *p == tree.path(ino)) => {
                *seen += 1;
                *seen == trap.nth
            }
            _ => false,
        };
        if !hit {
            return Ok(state);
        }
        let path = state.tree.path(ino);
        state.held = Some(format!("{what} of {path}"));
        self.shared.changed.notify_all();
        while !state.dead {
            state = self.shared.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        Err(Errno::EIO)
    }

    fn attr(&self, tree: &Tree, ino: Ino) -> Result<FileAttr, Errno> {
        let node = tree.node(ino).map_err(errno)?;
        let size = node.data.len() as u64;
        Ok(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: self.born,
            mtime: self.born,
            ctime: self.born,
            crtime: self.born,
            kind: match node.kind {
                Kind::File => FileType::RegularFile,
                Kind::Dir => FileType::Directory,
            },
            perm: u16::try_from(node.mode & 0o7777).unwrap_or(0o644),
            nlink: tree.links(ino),
            uid: node.owner.0,
            gid: node.owner.1,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    fn entry(&self, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self.live().and_then(|state| {
            let ino = state.tree.lookup(parent.0, name).map_err(errno)?;
            self.attr(&state.tree, ino)
        });
        match found {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn make(&self, req: &Request, parent: INodeNo, name: &OsStr, kind: Kind, mode: u32) -> Result<FileAttr, Errno> {
        let state = self.live()?;
        let mut state = self.pass(state, parent.0, TrapOn::Names, "a new name")?;
        state.counts.names += 1;
        let ino = state.tree.create(parent.0, name, kind, mode, (req.uid(), req.gid())).map_err(errno)?;
        self.attr(&state.tree, ino)
    }

    fn names(&self, parent: INodeNo, f: impl FnOnce(&mut Tree) -> Result<(), FsError>, reply: ReplyEmpty) {
        let done = self.live().and_then(|state| {
            let mut state = self.pass(state, parent.0, TrapOn::Names, "a change of names")?;
            state.counts.names += 1;
            f(&mut state.tree).map_err(errno)
        });
        match done {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn sync(&self, ino: INodeNo, reply: ReplyEmpty) {
        let done = self.live().and_then(|state| {
            let on = if state.tree.can_tear(ino.0) { TrapOn::Tear } else { TrapOn::Sync };
            let mut state = self.pass(state, ino.0, on, "a sync")?;
            match state.tree.node(ino.0).map_err(errno)?.kind {
                Kind::Dir => state.counts.dir_syncs += 1,
                Kind::File => state.counts.file_syncs += 1,
            }
            state.tree.sync(ino.0).map_err(errno)
        });
        match done {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

impl Filesystem for Fs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.entry(parent, name, reply);
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.live().and_then(|state| self.attr(&state.tree, ino.0)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        _req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        _atime: Option<TimeOrNow>,
        _mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<fuser::BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        let done = self.live().and_then(|mut state| {
            if let Some(len) = size {
                state = self.pass(state, ino.0, TrapOn::Write, "a size change")?;
                state.counts.writes += 1;
                state.tree.set_len(ino.0, len).map_err(errno)?;
            }
            state.tree.set_meta(ino.0, mode, uid, gid).map_err(errno)?;
            self.attr(&state.tree, ino.0)
        });
        match done {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(&self, req: &Request, parent: INodeNo, name: &OsStr, mode: u32, umask: u32, reply: ReplyEntry) {
        match self.make(req, parent, name, Kind::Dir, mode & !umask) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        match self.make(req, parent, name, Kind::File, mode & !umask) {
            Ok(attr) => reply.created(&TTL, &attr, Generation(0), FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        if mode & libc::S_IFMT != libc::S_IFREG {
            return reply.error(Errno::EPERM);
        }
        match self.make(req, parent, name, Kind::File, mode & !umask) {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.names(parent, |t| t.unlink(parent.0, name), reply);
    }

    fn rmdir(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        self.names(parent, |t| t.rmdir(parent.0, name), reply);
    }

    fn rename(
        &self,
        _req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        if flags.intersects(RenameFlags::RENAME_EXCHANGE | RenameFlags::RENAME_WHITEOUT) {
            return reply.error(Errno::EINVAL);
        }
        let no_replace = flags.contains(RenameFlags::RENAME_NOREPLACE);
        self.names(parent, |t| t.rename(parent.0, name, newparent.0, newname, no_replace), reply);
    }

    fn link(&self, _req: &Request, ino: INodeNo, newparent: INodeNo, newname: &OsStr, reply: ReplyEntry) {
        let done = self.live().and_then(|state| {
            let mut state = self.pass(state, newparent.0, TrapOn::Names, "a new link")?;
            state.counts.names += 1;
            state.tree.link(ino.0, newparent.0, newname).map_err(errno)?;
            self.attr(&state.tree, ino.0)
        });
        match done {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.live().and_then(|state| state.tree.node(ino.0).map(|_| ()).map_err(errno)) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let state = match self.live() {
            Ok(state) => state,
            Err(e) => return reply.error(e),
        };
        match state.tree.read(ino.0, offset, size as usize) {
            Ok(bytes) => reply.data(bytes),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        let done = self.live().and_then(|state| {
            let mut state = self.pass(state, ino.0, TrapOn::Write, "a write")?;
            state.counts.writes += 1;
            state.tree.write(ino.0, offset, data).map_err(errno)?;
            // A write through a descriptor opened `O_SYNC` or `O_DSYNC` is durable when it returns.
            if flags.0 & libc::O_DSYNC != 0 {
                state.tree.sync(ino.0).map_err(errno)?;
            }
            Ok(())
        });
        match done {
            Ok(()) => reply.written(u32::try_from(data.len()).unwrap_or(u32::MAX)),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _lock_owner: LockOwner, reply: ReplyEmpty) {
        reply.ok();
    }

    fn fsync(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.sync(ino, reply);
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.live().and_then(|state| state.tree.entries(ino.0).map(|_| ()).map_err(errno)) {
            Ok(()) => reply.opened(FileHandle(0), FopenFlags::empty()),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let state = match self.live() {
            Ok(state) => state,
            Err(e) => return reply.error(e),
        };
        let entries = match state.tree.entries(ino.0) {
            Ok(entries) => entries,
            Err(e) => return reply.error(errno(e)),
        };
        let dots = [(ino.0, FileType::Directory, OsStr::new(".")), (ino.0, FileType::Directory, OsStr::new(".."))];
        let named = entries.iter().map(|(name, child)| {
            let kind = match state.tree.node(*child).map(|n| n.kind) {
                Ok(Kind::Dir) => FileType::Directory,
                _ => FileType::RegularFile,
            };
            (*child, kind, name.as_os_str())
        });
        let skip = usize::try_from(offset).unwrap_or(usize::MAX);
        for (i, (child, kind, name)) in dots.into_iter().chain(named).enumerate().skip(skip) {
            if reply.add(INodeNo(child), i as u64 + 1, kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        self.sync(ino, reply);
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        if self.live().is_err() {
            return reply.error(Errno::EIO);
        }
        reply.statfs(1 << 24, 1 << 23, 1 << 23, 1 << 20, 1 << 19, 4096, 255, 4096);
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: fuser::AccessFlags, reply: ReplyEmpty) {
        match self.live().and_then(|state| state.tree.node(ino.0).map(|_| ()).map_err(errno)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fallocate(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if mode != 0 {
            return reply.error(Errno::EOPNOTSUPP);
        }
        let done = self.live().and_then(|state| {
            let mut state = self.pass(state, ino.0, TrapOn::Write, "an allocation")?;
            state.counts.writes += 1;
            let len = state.tree.node(ino.0).map_err(errno)?.data.len() as u64;
            let end = offset.checked_add(length).ok_or(Errno::EINVAL)?;
            if end > len {
                state.tree.set_len(ino.0, end).map_err(errno)?;
            }
            Ok(())
        });
        match done {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}
