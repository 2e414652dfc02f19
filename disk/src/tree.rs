//! The disk's files and directories as they are now and as far as they are durable, and what a
//! power cut leaves of them under each [`Persistence`] model.
//!
//! Every node keeps two states: the state every reader sees now, and the state as of its last
//! sync. A file's bytes and size become durable when the file is synced (`fsync`, `fdatasync`);
//! a directory's entries (created, removed, renamed and linked names) when the directory is
//! synced. Syncing a file does not make its name durable, nor does syncing a directory make its
//! files' bytes durable: that is the rule ALICE checks applications against, and the one
//! filesystems only partly relax (ext4 in its default mode persists a new file's name with its
//! first `fsync`, and btrfs does; XFS and ext4 with `nodelalloc` differ). A store that relies on
//! more than this rule relies on its filesystem's leniency.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::fmt;

/// A node's number, as the kernel sees it.
pub type Ino = u64;

/// The root directory's number.
pub const ROOT: Ino = 1;

/// The size of a sector: a torn write keeps its bytes up to a multiple of it.
pub const SECTOR: u64 = 512;

/// The largest file the disk holds (it keeps every file twice in memory): a write or a size
/// beyond it is refused (`EFBIG`).
pub const MAX_FILE: u64 = 1 << 30;

/// How much of what was never synced a power cut takes back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Persistence {
    /// Nothing: the process died, the kernel's page cache survived (what a process crash does).
    Process,
    /// Every file's unsynced bytes and size changes; every name is kept, synced or not (LazyFS's
    /// model).
    Data,
    /// As [`Persistence::Data`], and every directory's entries go back to its last sync: a name
    /// created, removed, renamed or linked since then is undone (ALICE's rule; the default of a
    /// power cut).
    Names,
    /// As [`Persistence::Names`], except that each file keeps a seeded prefix of its unsynced
    /// writes in order, the first write not kept whole kept in part, up to a sector boundary of
    /// the file (a write torn by the cut). Where a file has unsynced writes that cross a sector
    /// boundary, the cut tears one of them, drawn, at a boundary inside it, drawn: a torn cut
    /// tears whenever a write can be torn.
    Torn,
    /// As [`Persistence::Names`], except that each file keeps a seeded subset of its unsynced
    /// writes, in their order (a disk that reordered them).
    Reorder,
}

impl Persistence {
    /// Every model, the mildest first.
    pub const ALL: [Persistence; 5] =
        [Persistence::Process, Persistence::Data, Persistence::Names, Persistence::Torn, Persistence::Reorder];

    /// The model's name, as reports and settings spell it.
    pub fn name(self) -> &'static str {
        match self {
            Persistence::Process => "process",
            Persistence::Data => "data",
            Persistence::Names => "names",
            Persistence::Torn => "torn",
            Persistence::Reorder => "reorder",
        }
    }

    /// The model named `name`.
    pub fn from_name(name: &str) -> Option<Persistence> {
        Persistence::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Whether unsynced directory entries are undone.
    fn loses_names(self) -> bool {
        matches!(self, Persistence::Names | Persistence::Torn | Persistence::Reorder)
    }
}

impl fmt::Display for Persistence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why an operation on the tree was refused: each maps to the `errno` a filesystem returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsError {
    /// `ENOENT`.
    NotFound,
    /// `EEXIST`.
    Exists,
    /// `ENOTDIR`.
    NotDir,
    /// `EISDIR`.
    IsDir,
    /// `ENOTEMPTY`.
    NotEmpty,
    /// `EINVAL`.
    Invalid,
    /// `EFBIG`: beyond [`MAX_FILE`].
    TooBig,
    /// `EIO`: the disk is dead (after a cut).
    Dead,
}

/// An unsynced change of a file's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// `bytes` written at `offset`.
    Write {
        /// Where the write began.
        offset: u64,
        /// What it wrote.
        bytes: Vec<u8>,
    },
    /// The size set (a truncation or an extension with zeros).
    SetLen(u64),
}

impl Change {
    /// Whether a cut can tear it: a write that crosses a sector boundary of its file.
    fn can_tear(&self) -> bool {
        match self {
            Change::Write { offset, bytes } => (offset / SECTOR + 1) * SECTOR < offset + bytes.len() as u64,
            Change::SetLen(_) => false,
        }
    }

    fn apply(&self, data: &mut Vec<u8>) {
        match self {
            Change::Write { offset, bytes } => write_at(data, *offset, bytes),
            Change::SetLen(len) => data.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
        }
    }
}

fn write_at(data: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let end = start.saturating_add(bytes.len());
    if data.len() < end {
        data.resize(end, 0);
    }
    data[start..end].copy_from_slice(bytes);
}

/// Whether a node is a file or a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
}

/// A file or a directory, now and as of its last sync.
#[derive(Clone, Debug)]
pub struct Node {
    /// File or directory.
    pub kind: Kind,
    /// Its permission bits.
    pub mode: u32,
    /// Its owner and group.
    pub owner: (u32, u32),
    /// A file's bytes now.
    pub data: Vec<u8>,
    /// A file's bytes as of its last sync.
    pub synced: Vec<u8>,
    /// A file's changes since its last sync, in order.
    pub unsynced: Vec<Change>,
    /// A directory's entries now.
    pub entries: BTreeMap<OsString, Ino>,
    /// A directory's entries as of its last sync.
    pub synced_entries: BTreeMap<OsString, Ino>,
}

impl Node {
    fn new(kind: Kind, mode: u32, owner: (u32, u32)) -> Node {
        Node {
            kind,
            mode,
            owner,
            data: Vec::new(),
            synced: Vec::new(),
            unsynced: Vec::new(),
            entries: BTreeMap::new(),
            synced_entries: BTreeMap::new(),
        }
    }
}

/// What a cut took back: an effect that was never made durable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TakenBack {
    /// A file's bytes written and never synced (a half-open range of the file).
    Bytes {
        /// The file's path (its first name now, or "an unlinked file").
        path: String,
        /// The bytes lost.
        range: (u64, u64),
        /// How many of them were kept (a torn write keeps a prefix).
        kept: u64,
    },
    /// A size change never synced.
    Size {
        /// The file's path.
        path: String,
        /// The size it was set to.
        len: u64,
    },
    /// A name made, removed or pointed elsewhere, whose directory was never synced since.
    Name {
        /// The directory's path.
        dir: String,
        /// The name.
        name: String,
        /// What happened to it and was undone.
        undone: &'static str,
    },
}

impl fmt::Display for TakenBack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TakenBack::Bytes { path, range: (a, b), kept: 0 } => {
                write!(f, "bytes {a}-{b} of {path} were written and never synced")
            }
            TakenBack::Bytes { path, range: (a, b), kept } => {
                write!(f, "bytes {a}-{b} of {path} were written and never synced (torn: {kept} kept)")
            }
            TakenBack::Size { path, len } => write!(f, "{path} was resized to {len} bytes and never synced"),
            TakenBack::Name { dir, name, undone } => {
                write!(f, "{name} in {dir} was {undone} and never made durable: no sync of {dir} since")
            }
        }
    }
}

/// The disk: every node by number.
#[derive(Clone, Debug)]
pub struct Tree {
    pub(crate) nodes: BTreeMap<Ino, Node>,
    pub(crate) next: Ino,
}

impl Default for Tree {
    fn default() -> Self {
        Tree::new()
    }
}

/// A seeded choice: splitmix64, one word per call.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..=n`.
    fn upto(&mut self, n: u64) -> u64 {
        self.next() % n.saturating_add(1).max(1)
    }
}

impl Tree {
    /// An empty disk: the root directory alone, durable.
    pub fn new() -> Tree {
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT, Node::new(Kind::Dir, 0o755, (0, 0)));
        Tree { nodes, next: ROOT + 1 }
    }

    /// The node numbered `ino`.
    pub fn node(&self, ino: Ino) -> Result<&Node, FsError> {
        self.nodes.get(&ino).ok_or(FsError::NotFound)
    }

    fn node_mut(&mut self, ino: Ino) -> Result<&mut Node, FsError> {
        self.nodes.get_mut(&ino).ok_or(FsError::NotFound)
    }

    fn dir(&self, ino: Ino) -> Result<&Node, FsError> {
        let node = self.node(ino)?;
        if node.kind == Kind::Dir { Ok(node) } else { Err(FsError::NotDir) }
    }

    fn dir_mut(&mut self, ino: Ino) -> Result<&mut Node, FsError> {
        let node = self.node_mut(ino)?;
        if node.kind == Kind::Dir { Ok(node) } else { Err(FsError::NotDir) }
    }

    fn file_mut(&mut self, ino: Ino) -> Result<&mut Node, FsError> {
        let node = self.node_mut(ino)?;
        if node.kind == Kind::File { Ok(node) } else { Err(FsError::IsDir) }
    }

    /// The node `name` names in directory `parent`.
    pub fn lookup(&self, parent: Ino, name: &OsStr) -> Result<Ino, FsError> {
        self.dir(parent)?.entries.get(name).copied().ok_or(FsError::NotFound)
    }

    /// How many names point at `ino` now (a directory counts its own).
    pub fn links(&self, ino: Ino) -> u32 {
        let named = self.nodes.values().flat_map(|n| n.entries.values()).filter(|i| **i == ino).count();
        u32::try_from(named).unwrap_or(u32::MAX).saturating_add(u32::from(ino == ROOT))
    }

    /// Makes a new file or directory `name` in `parent`; its name is not durable until `parent`
    /// is synced.
    pub fn create(
        &mut self,
        parent: Ino,
        name: &OsStr,
        kind: Kind,
        mode: u32,
        owner: (u32, u32),
    ) -> Result<Ino, FsError> {
        check_name(name)?;
        if self.dir(parent)?.entries.contains_key(name) {
            return Err(FsError::Exists);
        }
        let ino = self.next;
        self.next += 1;
        self.nodes.insert(ino, Node::new(kind, mode, owner));
        self.dir_mut(parent)?.entries.insert(name.to_owned(), ino);
        Ok(ino)
    }

    /// Writes `bytes` at `offset` of file `ino` (zeros fill a gap).
    pub fn write(&mut self, ino: Ino, offset: u64, bytes: &[u8]) -> Result<(), FsError> {
        if offset.checked_add(bytes.len() as u64).is_none_or(|end| end > MAX_FILE) {
            return Err(FsError::TooBig);
        }
        let node = self.file_mut(ino)?;
        write_at(&mut node.data, offset, bytes);
        node.unsynced.push(Change::Write { offset, bytes: bytes.to_vec() });
        Ok(())
    }

    /// Sets file `ino`'s size.
    pub fn set_len(&mut self, ino: Ino, len: u64) -> Result<(), FsError> {
        if len > MAX_FILE {
            return Err(FsError::TooBig);
        }
        let node = self.file_mut(ino)?;
        let change = Change::SetLen(len);
        change.apply(&mut node.data);
        node.unsynced.push(change);
        Ok(())
    }

    /// Sets a node's permission bits and owner, where given (metadata the cut does not model:
    /// kept as they are).
    pub fn set_meta(&mut self, ino: Ino, mode: Option<u32>, uid: Option<u32>, gid: Option<u32>) -> Result<(), FsError> {
        let node = self.node_mut(ino)?;
        node.mode = mode.unwrap_or(node.mode);
        node.owner = (uid.unwrap_or(node.owner.0), gid.unwrap_or(node.owner.1));
        Ok(())
    }

    /// Up to `size` bytes of file `ino` from `offset`.
    pub fn read(&self, ino: Ino, offset: u64, size: usize) -> Result<&[u8], FsError> {
        let node = self.node(ino)?;
        if node.kind != Kind::File {
            return Err(FsError::IsDir);
        }
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(node.data.len());
        let end = start.saturating_add(size).min(node.data.len());
        Ok(&node.data[start..end])
    }

    /// Removes file `name` from `parent`.
    pub fn unlink(&mut self, parent: Ino, name: &OsStr) -> Result<(), FsError> {
        let ino = self.lookup(parent, name)?;
        if self.node(ino)?.kind == Kind::Dir {
            return Err(FsError::IsDir);
        }
        self.dir_mut(parent)?.entries.remove(name);
        Ok(())
    }

    /// Removes empty directory `name` from `parent`.
    pub fn rmdir(&mut self, parent: Ino, name: &OsStr) -> Result<(), FsError> {
        let ino = self.lookup(parent, name)?;
        let node = self.dir(ino)?;
        if !node.entries.is_empty() {
            return Err(FsError::NotEmpty);
        }
        self.dir_mut(parent)?.entries.remove(name);
        Ok(())
    }

    /// Gives file `ino` a further name `name` in `parent`.
    pub fn link(&mut self, ino: Ino, parent: Ino, name: &OsStr) -> Result<(), FsError> {
        check_name(name)?;
        if self.node(ino)?.kind == Kind::Dir {
            return Err(FsError::IsDir);
        }
        let dir = self.dir_mut(parent)?;
        if dir.entries.contains_key(name) {
            return Err(FsError::Exists);
        }
        dir.entries.insert(name.to_owned(), ino);
        Ok(())
    }

    /// Renames `name` in `parent` to `new_name` in `new_parent`, replacing a file or an empty
    /// directory there unless `no_replace`.
    pub fn rename(
        &mut self,
        parent: Ino,
        name: &OsStr,
        new_parent: Ino,
        new_name: &OsStr,
        no_replace: bool,
    ) -> Result<(), FsError> {
        check_name(new_name)?;
        let ino = self.lookup(parent, name)?;
        self.dir(new_parent)?;
        if let Ok(target) = self.lookup(new_parent, new_name) {
            if target == ino {
                return Ok(());
            }
            if no_replace {
                return Err(FsError::Exists);
            }
            let (moving, replaced) = (self.node(ino)?, self.node(target)?);
            match (moving.kind, replaced.kind) {
                (Kind::File, Kind::Dir) => return Err(FsError::IsDir),
                (Kind::Dir, Kind::File) => return Err(FsError::NotDir),
                (Kind::Dir, Kind::Dir) if !replaced.entries.is_empty() => return Err(FsError::NotEmpty),
                _ => {}
            }
        }
        if self.node(ino)?.kind == Kind::Dir && self.is_within(new_parent, ino) {
            return Err(FsError::Invalid);
        }
        self.dir_mut(parent)?.entries.remove(name);
        self.dir_mut(new_parent)?.entries.insert(new_name.to_owned(), ino);
        Ok(())
    }

    /// Whether `ino` is `ancestor` or lies below it now.
    fn is_within(&self, ino: Ino, ancestor: Ino) -> bool {
        let mut seen = BTreeSet::new();
        let mut at = vec![ancestor];
        while let Some(dir) = at.pop() {
            if dir == ino {
                return true;
            }
            if seen.insert(dir)
                && let Ok(node) = self.node(dir)
            {
                at.extend(node.entries.values().copied());
            }
        }
        false
    }

    /// Makes node `ino` durable: a file's bytes and size, a directory's entries.
    pub fn sync(&mut self, ino: Ino) -> Result<(), FsError> {
        let node = self.node_mut(ino)?;
        match node.kind {
            Kind::File => {
                // The synced bytes with every unsynced change applied are the bytes now: a sync
                // costs what was written since the last, not the whole file.
                for change in std::mem::take(&mut node.unsynced) {
                    change.apply(&mut node.synced);
                }
            }
            Kind::Dir => node.synced_entries.clone_from(&node.entries),
        }
        Ok(())
    }

    /// Whether file `ino` has a tail that a cut under [`Persistence::Torn`] can tear: it holds
    /// synced bytes (a log, not a file being written for the first time), and an unsynced write
    /// that crosses a sector boundary.
    pub fn can_tear(&self, ino: Ino) -> bool {
        self.nodes.get(&ino).is_some_and(|node| !node.synced.is_empty() && node.unsynced.iter().any(Change::can_tear))
    }

    /// The names of directory `ino` now, with their nodes.
    pub fn entries(&self, ino: Ino) -> Result<&BTreeMap<OsString, Ino>, FsError> {
        Ok(&self.dir(ino)?.entries)
    }

    /// A path of `ino` now, for reports: "/" joined names from the root, or "an unlinked file".
    pub fn path(&self, ino: Ino) -> String {
        self.path_in(ino, |n| &n.entries)
            .or_else(|| self.path_in(ino, |n| &n.synced_entries))
            .unwrap_or_else(|| "an unlinked file".to_owned())
    }

    fn path_in(&self, ino: Ino, entries: impl Fn(&Node) -> &BTreeMap<OsString, Ino>) -> Option<String> {
        if ino == ROOT {
            return Some("/".to_owned());
        }
        let mut queue = std::collections::VecDeque::from([(ROOT, String::new())]);
        let mut seen = BTreeSet::from([ROOT]);
        while let Some((dir, path)) = queue.pop_front() {
            let node = self.nodes.get(&dir)?;
            for (name, child) in entries(node) {
                let child_path = format!("{path}/{}", name.to_string_lossy());
                if *child == ino {
                    return Some(child_path);
                }
                if seen.insert(*child) {
                    queue.push_back((*child, child_path));
                }
            }
        }
        None
    }

    /// Every effect not yet durable, described as a cut under `Names` would take it back whole.
    pub fn unsynced(&self) -> Vec<TakenBack> {
        self.cut(Persistence::Names, 0).1
    }

    /// What a power cut under `model` leaves, its seeded choices drawn from `seed`: the disk
    /// after it (everything on it durable, nodes no name reaches dropped), and what it took back.
    pub fn cut(&self, model: Persistence, seed: u64) -> (Tree, Vec<TakenBack>) {
        let mut after = Tree { nodes: BTreeMap::new(), next: self.next };
        let mut taken = Vec::new();
        for (ino, node) in &self.nodes {
            let mut draws = Draws(seed ^ ino.wrapping_mul(0xa076_1d64_78bd_642f));
            let data = match model {
                Persistence::Process => node.data.clone(),
                _ => self.kept_bytes(*ino, node, model, &mut draws, &mut taken),
            };
            let entries = if model.loses_names() {
                self.note_names(*ino, node, &mut taken);
                node.synced_entries.clone()
            } else {
                node.entries.clone()
            };
            let kept = Node {
                kind: node.kind,
                mode: node.mode,
                owner: node.owner,
                synced: data.clone(),
                data,
                unsynced: Vec::new(),
                synced_entries: entries.clone(),
                entries,
            };
            after.nodes.insert(*ino, kept);
        }
        after.drop_unreachable();
        (after, taken)
    }

    /// A file's bytes after a cut under `model` (not `Process`), noting what was lost.
    fn kept_bytes(
        &self,
        ino: Ino,
        node: &Node,
        model: Persistence,
        draws: &mut Draws,
        taken: &mut Vec<TakenBack>,
    ) -> Vec<u8> {
        let mut data = node.synced.clone();
        let n = node.unsynced.len() as u64;
        // A torn cut tears a write where one can be torn (one drawn among them), keeping every
        // write before it whole; where none can, it keeps a drawn number of whole writes.
        let (whole, torn_at) = match model {
            Persistence::Torn => {
                let tearable: Vec<u64> =
                    (0..).zip(&node.unsynced).filter(|(_, c)| c.can_tear()).map(|(i, _)| i).collect();
                match tearable.len() as u64 {
                    0 => (draws.upto(n), true),
                    t => (tearable[usize::try_from(draws.next() % t).unwrap_or(0)], true),
                }
            }
            _ => (0, false),
        };
        for (i, change) in (0u64..).zip(&node.unsynced) {
            let keep = match model {
                Persistence::Torn => i < whole,
                Persistence::Reorder => draws.next() & 1 == 1,
                _ => false,
            };
            if keep {
                change.apply(&mut data);
                continue;
            }
            let path = || self.path(ino);
            match change {
                Change::Write { offset, bytes } => {
                    let end = offset + bytes.len() as u64;
                    let kept = if torn_at && i == whole { torn_prefix(*offset, end, draws) } else { 0 };
                    let kept_len = usize::try_from(kept).unwrap_or(0).min(bytes.len());
                    if kept_len > 0 {
                        write_at(&mut data, *offset, &bytes[..kept_len]);
                    }
                    taken.push(TakenBack::Bytes { path: path(), range: (*offset, end), kept });
                }
                Change::SetLen(len) => taken.push(TakenBack::Size { path: path(), len: *len }),
            }
        }
        data
    }

    /// Notes the names of directory `ino` that a cut losing names undoes.
    fn note_names(&self, ino: Ino, node: &Node, taken: &mut Vec<TakenBack>) {
        if node.entries == node.synced_entries {
            return;
        }
        let dir = self.path(ino);
        let names: BTreeSet<&OsString> = node.entries.keys().chain(node.synced_entries.keys()).collect();
        for name in names {
            let undone = match (node.synced_entries.get(name), node.entries.get(name)) {
                (None, Some(_)) => "made",
                (Some(_), None) => "removed",
                (Some(a), Some(b)) if a != b => "pointed at another file (a rename or a link over it)",
                _ => continue,
            };
            taken.push(TakenBack::Name { dir: dir.clone(), name: name.to_string_lossy().into_owned(), undone });
        }
    }

    fn drop_unreachable(&mut self) {
        let mut reached = BTreeSet::new();
        let mut at = vec![ROOT];
        while let Some(ino) = at.pop() {
            if reached.insert(ino)
                && let Some(node) = self.nodes.get(&ino)
            {
                at.extend(node.entries.values().copied());
            }
        }
        self.nodes.retain(|ino, _| reached.contains(ino));
    }

    /// Every file reachable by name now, by path, with its bytes (for comparing disks).
    pub fn files(&self) -> BTreeMap<String, Vec<u8>> {
        let mut files = BTreeMap::new();
        let mut at = vec![(ROOT, String::new())];
        let mut seen = BTreeSet::new();
        while let Some((ino, path)) = at.pop() {
            let Some(node) = self.nodes.get(&ino) else { continue };
            if !seen.insert((ino, path.clone())) {
                continue;
            }
            match node.kind {
                Kind::File => {
                    files.insert(path, node.data.clone());
                }
                Kind::Dir => {
                    files.insert(format!("{path}/"), Vec::new());
                    for (name, child) in &node.entries {
                        at.push((*child, format!("{path}/{}", name.to_string_lossy())));
                    }
                }
            }
        }
        files
    }
}

/// How many bytes of a write over `offset..end` a tear keeps: up to a sector boundary of the
/// file strictly inside the write (one drawn among them), or none where there is none.
fn torn_prefix(offset: u64, end: u64, draws: &mut Draws) -> u64 {
    let first = (offset / SECTOR + 1) * SECTOR;
    if first >= end {
        return 0;
    }
    let boundaries = (end - 1 - first) / SECTOR + 1;
    first + (draws.next() % boundaries) * SECTOR - offset
}

fn check_name(name: &OsStr) -> Result<(), FsError> {
    let bytes = name.as_encoded_bytes();
    if bytes.is_empty() || bytes == b"." || bytes == b".." || bytes.contains(&b'/') || bytes.len() > 255 {
        return Err(FsError::Invalid);
    }
    Ok(())
}
