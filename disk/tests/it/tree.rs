//! The durability model ([`Tree::cut`]) against a reference written apart from it: random scripts
//! of file operations in two directories, applied to both; after each script, every cut under
//! every model must leave what the reference says that model keeps. Under `data` and `names`
//! that is exactly the bytes as of each file's last sync (synced data always survives, unsynced
//! data never does); under `names` the names as of each directory's last sync; `torn` and
//! `reorder` must leave one of the states the reference enumerates.

use std::collections::BTreeMap;
use std::ffi::OsStr;

use proptest::prelude::*;
use reservation_disk::tree::{Ino, Kind, ROOT, SECTOR};
use reservation_disk::{Persistence, Tree};

/// A place for a name: directory 0 (the root) or 1 (`/d`), and one of three names.
pub type Place = (u8, u8);

/// One file operation, as plain data.
#[derive(Clone, Debug)]
pub enum Op {
    /// Make an empty file.
    Create(Place),
    /// Write `len` copies of `byte` at `offset`.
    Write(Place, u16, u16, u8),
    /// Set the size.
    SetLen(Place, u16),
    /// Rename, replacing a file at the target.
    Rename(Place, Place),
    /// Remove a name.
    Unlink(Place),
    /// Give a file a second name.
    Link(Place, Place),
    /// Sync a file.
    SyncFile(Place),
    /// Sync a directory.
    SyncDir(u8),
}

fn place() -> impl Strategy<Value = Place> {
    (0u8..2, 0u8..3)
}

/// Scripts that touch few names often, so that files are written, synced, renamed and lost.
pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => place().prop_map(Op::Create),
        5 => (place(), 0u16..3000, 1u16..1400, any::<u8>()).prop_map(|(p, o, l, b)| Op::Write(p, o, l, b)),
        1 => (place(), 0u16..3000).prop_map(|(p, l)| Op::SetLen(p, l)),
        2 => (place(), place()).prop_map(|(a, b)| Op::Rename(a, b)),
        1 => place().prop_map(Op::Unlink),
        1 => (place(), place()).prop_map(|(a, b)| Op::Link(a, b)),
        3 => place().prop_map(Op::SyncFile),
        2 => (0u8..2).prop_map(Op::SyncDir),
    ]
}

/// A change of a file's bytes, as the reference keeps it.
#[derive(Clone, Debug)]
enum Change {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

fn apply(bytes: &mut Vec<u8>, change: &Change) {
    match change {
        Change::Write(offset, data) => {
            let start = *offset as usize;
            if bytes.len() < start + data.len() {
                bytes.resize(start + data.len(), 0);
            }
            bytes[start..start + data.len()].copy_from_slice(data);
        }
        Change::SetLen(len) => bytes.resize(*len as usize, 0),
    }
}

/// The reference: files by number, each directory's names now and as of its last sync.
#[derive(Default)]
pub struct Reference {
    next: u32,
    names: [BTreeMap<u8, u32>; 2],
    durable_names: [BTreeMap<u8, u32>; 2],
    synced: BTreeMap<u32, Vec<u8>>,
    unsynced: BTreeMap<u32, Vec<Change>>,
}

impl Reference {
    fn live(&self, file: u32) -> Vec<u8> {
        let mut bytes = self.synced[&file].clone();
        for change in &self.unsynced[&file] {
            apply(&mut bytes, change);
        }
        bytes
    }

    /// Applies `op`; whether it was allowed.
    pub fn apply(&mut self, op: &Op) -> bool {
        let at = |p: &Place| self.names[p.0 as usize].get(&p.1).copied();
        match *op {
            Op::Create(p) => {
                if at(&p).is_some() {
                    return false;
                }
                self.next += 1;
                self.names[p.0 as usize].insert(p.1, self.next);
                self.synced.insert(self.next, Vec::new());
                self.unsynced.insert(self.next, Vec::new());
            }
            Op::Write(p, offset, len, byte) => {
                let Some(f) = at(&p) else { return false };
                self.unsynced.get_mut(&f).unwrap().push(Change::Write(offset.into(), vec![byte; len.into()]));
            }
            Op::SetLen(p, len) => {
                let Some(f) = at(&p) else { return false };
                self.unsynced.get_mut(&f).unwrap().push(Change::SetLen(len.into()));
            }
            Op::Rename(a, b) => {
                let Some(f) = at(&a) else { return false };
                // Two names of one file: nothing happens (POSIX).
                if at(&b) != Some(f) {
                    self.names[a.0 as usize].remove(&a.1);
                    self.names[b.0 as usize].insert(b.1, f);
                }
            }
            Op::Unlink(p) => {
                if self.names[p.0 as usize].remove(&p.1).is_none() {
                    return false;
                }
            }
            Op::Link(a, b) => {
                let Some(f) = at(&a) else { return false };
                if at(&b).is_some() {
                    return false;
                }
                self.names[b.0 as usize].insert(b.1, f);
            }
            Op::SyncFile(p) => {
                let Some(f) = at(&p) else { return false };
                let bytes = self.live(f);
                self.synced.insert(f, bytes);
                self.unsynced.insert(f, Vec::new());
            }
            Op::SyncDir(d) => self.durable_names[d as usize] = self.names[d as usize].clone(),
        }
        true
    }

    /// Whether anything is not durable.
    pub fn anything_unsynced(&self) -> bool {
        self.names != self.durable_names || self.unsynced.values().any(|c| !c.is_empty())
    }

    /// The disk a model keeps, by path, for the models that leave one state: names now or as
    /// synced, bytes now or as synced.
    pub fn view(&self, durable_names: bool, live_bytes: bool) -> BTreeMap<String, Vec<u8>> {
        let names = if durable_names { &self.durable_names } else { &self.names };
        let mut view = BTreeMap::from([("/".to_owned(), Vec::new()), ("/d/".to_owned(), Vec::new())]);
        for (d, dir) in names.iter().enumerate() {
            for (name, file) in dir {
                let bytes = if live_bytes { self.live(*file) } else { self.synced[file].clone() };
                view.insert(path((d as u8, *name)), bytes);
            }
        }
        view
    }

    /// Every state of file `file` that a tear can leave: a prefix of its unsynced changes whole,
    /// then the next one, if a write, up to a sector boundary of the file inside it.
    fn torn(&self, file: u32) -> Vec<Vec<u8>> {
        let changes = &self.unsynced[&file];
        let mut states = Vec::new();
        let mut base = self.synced[&file].clone();
        for change in changes {
            states.push(base.clone());
            if let Change::Write(offset, data) = change {
                let end = offset + data.len() as u64;
                let mut boundary = (offset / SECTOR + 1) * SECTOR;
                while boundary < end {
                    let mut torn = base.clone();
                    apply(&mut torn, &Change::Write(*offset, data[..(boundary - offset) as usize].to_vec()));
                    states.push(torn);
                    boundary += SECTOR;
                }
            }
            apply(&mut base, change);
        }
        states.push(base);
        states
    }

    /// Every state of file `file` that a reordering disk can leave: any subset of its unsynced
    /// changes, in order.
    fn reordered(&self, file: u32) -> Vec<Vec<u8>> {
        let changes = &self.unsynced[&file];
        (0u32..1 << changes.len())
            .map(|subset| {
                let mut bytes = self.synced[&file].clone();
                for (i, change) in changes.iter().enumerate() {
                    if subset >> i & 1 == 1 {
                        apply(&mut bytes, change);
                    }
                }
                bytes
            })
            .collect()
    }
}

/// The path of a place, as [`Tree::files`] spells it.
pub fn path((d, name): Place) -> String {
    let name = ["a", "b", "c"][name as usize];
    if d == 0 { format!("/{name}") } else { format!("/d/{name}") }
}

/// A tree with `/d`, durable.
pub fn start() -> Tree {
    let mut tree = Tree::new();
    tree.create(ROOT, OsStr::new("d"), Kind::Dir, 0o755, (0, 0)).unwrap();
    tree.sync(ROOT).unwrap();
    tree
}

fn dir(tree: &Tree, d: u8) -> Ino {
    if d == 0 { ROOT } else { tree.lookup(ROOT, OsStr::new("d")).unwrap() }
}

fn name(p: Place) -> &'static OsStr {
    OsStr::new(["a", "b", "c"][p.1 as usize])
}

/// Applies `op` to the tree, as the mount's operations do; whether it was allowed.
pub fn apply_to_tree(tree: &mut Tree, op: &Op) -> bool {
    let file = |tree: &Tree, p: Place| tree.lookup(dir(tree, p.0), name(p));
    let done = match *op {
        Op::Create(p) => tree.create(dir(tree, p.0), name(p), Kind::File, 0o644, (0, 0)).map(|_| ()),
        Op::Write(p, offset, len, byte) => {
            file(tree, p).and_then(|f| tree.write(f, offset.into(), &vec![byte; len.into()]))
        }
        Op::SetLen(p, len) => file(tree, p).and_then(|f| tree.set_len(f, len.into())),
        Op::Rename(a, b) => tree.rename(dir(tree, a.0), name(a), dir(tree, b.0), name(b), false),
        Op::Unlink(p) => tree.unlink(dir(tree, p.0), name(p)),
        Op::Link(a, b) => file(tree, a).and_then(|f| tree.link(f, dir(tree, b.0), name(b))),
        Op::SyncFile(p) => file(tree, p).and_then(|f| tree.sync(f)),
        Op::SyncDir(d) => tree.sync(dir(tree, d)),
    };
    done.is_ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_cut_leaves_what_its_model_keeps(ops in prop::collection::vec(op(), 1..40), seed in any::<u64>()) {
        let (mut tree, mut reference) = (start(), Reference::default());
        for op in &ops {
            prop_assert_eq!(apply_to_tree(&mut tree, op), reference.apply(op), "{:?}", op);
        }
        prop_assert_eq!(tree.files(), reference.view(false, true));
        for model in Persistence::ALL {
            let (after, taken) = tree.cut(model, seed);
            let files = after.files();
            match model {
                Persistence::Process => prop_assert_eq!(&files, &reference.view(false, true)),
                Persistence::Data => prop_assert_eq!(&files, &reference.view(false, false)),
                Persistence::Names => prop_assert_eq!(&files, &reference.view(true, false)),
                Persistence::Torn | Persistence::Reorder => {
                    let names = reference.view(true, false);
                    prop_assert_eq!(files.keys().collect::<Vec<_>>(), names.keys().collect::<Vec<_>>());
                    for (d, dir) in reference.durable_names.iter().enumerate() {
                        for (n, f) in dir {
                            let states = if model == Persistence::Torn { reference.torn(*f) } else { reference.reordered(*f) };
                            let kept = &files[&path((d as u8, *n))];
                            prop_assert!(states.contains(kept), "{} kept a state of {} no {} cut leaves", model, path((d as u8, *n)), model);
                        }
                    }
                }
            }
            // A cut leaves everything durable: a second cut under the strictest model changes nothing.
            prop_assert_eq!(after.cut(Persistence::Names, seed).0.files(), files);
            if model == Persistence::Names {
                prop_assert_eq!(taken.is_empty(), !reference.anything_unsynced());
            }
            if model == Persistence::Process {
                prop_assert!(taken.is_empty());
            }
        }
    }
}

/// A disk holding `/wal`, its name and its first `len` bytes (all 1) synced.
fn synced_wal(len: usize) -> (Tree, Ino) {
    let mut tree = start();
    let wal = tree.create(ROOT, OsStr::new("wal"), Kind::File, 0o644, (0, 0)).unwrap();
    tree.sync(ROOT).unwrap();
    tree.write(wal, 0, &vec![1; len]).unwrap();
    tree.sync(wal).unwrap();
    (tree, wal)
}

#[test]
fn a_report_names_the_unsynced_write_and_the_unsynced_name() {
    let (mut tree, wal) = synced_wal(4096);
    tree.write(wal, 4096, &[2; 64]).unwrap();
    let tmp = tree.create(ROOT, OsStr::new("snapshot.tmp"), Kind::File, 0o644, (0, 0)).unwrap();
    tree.write(tmp, 0, b"rows").unwrap();
    tree.sync(tmp).unwrap();
    tree.rename(ROOT, OsStr::new("snapshot.tmp"), ROOT, OsStr::new("snapshot"), false).unwrap();
    let (after, taken) = tree.cut(Persistence::Names, 7);
    let said: Vec<String> = taken.iter().map(ToString::to_string).collect();
    assert_eq!(
        said,
        [
            "snapshot in / was made and never made durable: no sync of / since",
            "bytes 4096-4160 of /wal were written and never synced",
        ]
    );
    assert_eq!(after.files().get("/wal").map(Vec::len), Some(4096));
    assert!(!after.files().contains_key("/snapshot"));
    // Under `data` the names stay: the renamed snapshot, synced, survives whole.
    let (after, _) = tree.cut(Persistence::Data, 7);
    assert_eq!(after.files().get("/snapshot").map(Vec::as_slice), Some(&b"rows"[..]));
}

#[test]
fn a_write_or_a_size_beyond_the_largest_file_is_refused_and_changes_nothing() {
    use reservation_disk::tree::{FsError, MAX_FILE};
    let mut tree = start();
    let file = tree.create(ROOT, OsStr::new("f"), Kind::File, 0o644, (0, 0)).unwrap();
    tree.write(file, 0, b"x").unwrap();
    let before = tree.files();
    assert_eq!(tree.write(file, MAX_FILE, b"x"), Err(FsError::TooBig));
    assert_eq!(tree.write(file, u64::MAX, b"x"), Err(FsError::TooBig));
    assert_eq!(tree.set_len(file, MAX_FILE + 1), Err(FsError::TooBig));
    assert_eq!(tree.files(), before);
    assert_eq!(tree.cut(Persistence::Names, 0).1.len(), 2, "the name and the first write, unsynced, and nothing else");
}

/// Where a file has an unsynced write across a sector boundary, every torn cut tears one such
/// write at a boundary inside it, keeping the writes before it whole and none after; where none
/// can tear, it keeps a prefix of whole writes.
#[test]
fn a_torn_cut_tears_a_write_whenever_one_can_be_torn() {
    let (mut tree, wal) = synced_wal(100);
    tree.write(wal, 100, &[2; 100]).unwrap();
    tree.write(wal, 200, &[3; 1000]).unwrap();
    tree.write(wal, 1200, &[4; 100]).unwrap();
    assert!(tree.can_tear(wal));
    for seed in 0..64 {
        let (after, _) = tree.cut(Persistence::Torn, seed);
        let kept = after.files()["/wal"].clone();
        assert!([512, 1024].contains(&kept.len()), "seed {seed}: {} bytes kept", kept.len());
        assert!(kept[100..200].iter().all(|b| *b == 2) && kept[200..].iter().all(|b| *b == 3), "seed {seed}");
    }
    let lens: std::collections::BTreeSet<usize> =
        (0..64).map(|seed| tree.cut(Persistence::Torn, seed).0.files()["/wal"].len()).collect();
    assert_eq!(lens.into_iter().collect::<Vec<_>>(), [512, 1024], "both boundaries are drawn");
    tree.sync(wal).unwrap();
    tree.write(wal, 1300, &[5; 50]).unwrap();
    tree.write(wal, 1350, &[6; 50]).unwrap();
    tree.write(wal, 1400, &[8; 136]).unwrap();
    assert!(!tree.can_tear(wal), "no write crosses the sector at 1536: the last ends there");
    let lens: std::collections::BTreeSet<usize> =
        (0..64).map(|seed| tree.cut(Persistence::Torn, seed).0.files()["/wal"].len()).collect();
    assert_eq!(lens.into_iter().collect::<Vec<_>>(), [1300, 1350, 1400, 1536], "a prefix of whole writes");
    let fresh = tree.create(ROOT, OsStr::new("snapshot.tmp"), Kind::File, 0o644, (0, 0)).unwrap();
    tree.sync(ROOT).unwrap();
    tree.write(fresh, 0, &[7; 1000]).unwrap();
    assert!(!tree.can_tear(fresh), "a file never synced has no tail to tear");
    assert!(tree.cut(Persistence::Torn, 3).0.files()["/snapshot.tmp"].len() == 512, "but a torn cut tears it");
}

/// A write that ends on a sector boundary is torn only at the boundaries strictly inside it:
/// never kept whole by a tear.
#[test]
fn a_write_that_ends_on_a_sector_is_torn_inside_it_only() {
    let (mut tree, wal) = synced_wal(100);
    tree.write(wal, 100, &[2; 924]).unwrap();
    let lens: std::collections::BTreeSet<usize> =
        (0..64).map(|seed| tree.cut(Persistence::Torn, seed).0.files()["/wal"].len()).collect();
    assert_eq!(lens.into_iter().collect::<Vec<_>>(), [512], "torn at 512, the one boundary inside 100..1024");
}
