//! File operations through the mount, as a store makes them (`std::fs`), against the same
//! operations applied to a [`Tree`] directly: the disk the mount served must be the model's, what
//! a reader sees through the mount must be the model's, and after a cut, what is mounted must be
//! what the served tree's cut leaves (the model's own, under `process`, `data` and `names`).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use reservation_disk::{Persistence, Trap, TrapOn};

use crate::tree::{Op, Place, apply_to_tree, op, path, start};
use crate::{mount, read_all};

/// Applies `op` through the filesystem mounted at `root`; whether it was allowed.
fn apply_through(root: &Path, op: &Op) -> bool {
    let at = |p: Place| root.join(path(p).trim_start_matches('/'));
    let done = match *op {
        Op::Create(p) => OpenOptions::new().write(true).create_new(true).open(at(p)).map(drop),
        Op::Write(p, offset, len, byte) => OpenOptions::new()
            .write(true)
            .open(at(p))
            .and_then(|f| f.write_all_at(&vec![byte; len.into()], offset.into())),
        Op::SetLen(p, len) => OpenOptions::new().write(true).open(at(p)).and_then(|f| f.set_len(len.into())),
        Op::Rename(a, b) => std::fs::rename(at(a), at(b)),
        Op::Unlink(p) => std::fs::remove_file(at(p)),
        Op::Link(a, b) => std::fs::hard_link(at(a), at(b)),
        Op::SyncFile(p) => File::open(at(p)).and_then(|f| f.sync_all()),
        Op::SyncDir(d) => {
            File::open(if d == 0 { root.to_path_buf() } else { root.join("d") }).and_then(|f| f.sync_all())
        }
    };
    done.is_ok()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn the_mount_serves_the_model_and_cuts_as_it_does(
        ops in prop::collection::vec(op(), 1..30),
        seed in any::<u64>(),
        model in prop::sample::select(Persistence::ALL.to_vec()),
    ) {
        let Some((dir, mut disk)) = mount(start()) else { return Ok(()) };
        let mut model_tree = start();
        for op in &ops {
            prop_assert_eq!(apply_through(dir.path(), op), apply_to_tree(&mut model_tree, op), "{:?}", op);
        }
        let served = disk.tree().expect("the served tree");
        prop_assert_eq!(served.files(), model_tree.files());
        prop_assert_eq!(read_all(dir.path()), model_tree.files());
        // The models that keep whole writes or none leave what the model's cut leaves. Torn and
        // reordered cuts choose among the writes the kernel sent, which may split one `write`
        // (at a page boundary, on a loaded machine): the tree's own tests check those models
        // against the reference; here the served tree's cut must be the one the mount makes.
        for m in [Persistence::Process, Persistence::Data, Persistence::Names] {
            prop_assert_eq!(served.cut(m, seed).0.files(), model_tree.cut(m, seed).0.files(), "{}", m);
        }
        let report = disk.cut(model, seed).expect("the mount after the cut");
        let (expected, taken) = served.cut(model, seed);
        prop_assert_eq!(read_all(dir.path()), expected.files());
        prop_assert_eq!(report.taken_back, taken);
        prop_assert_eq!(report.model, model);
    }
}

#[test]
fn a_cut_disk_fails_every_later_operation_and_the_new_mount_keeps_only_what_was_synced() {
    let Some((dir, mut disk)) = mount(start()) else { return };
    let path = dir.path().join("log");
    let file = OpenOptions::new().create_new(true).write(true).open(&path).unwrap();
    File::open(dir.path()).unwrap().sync_all().unwrap();
    file.write_all_at(b"synced", 0).unwrap();
    file.sync_data().unwrap();
    file.write_all_at(b" and not", 6).unwrap();
    let report = disk.cut(Persistence::Data, 1).unwrap();
    assert_eq!(report.taken_back.len(), 1, "{report}");
    assert_eq!(report.counts.file_syncs, 1);
    assert_eq!(report.counts.dir_syncs, 1);
    let dead = file.write_all_at(b"late", 0).unwrap_err();
    assert_eq!(dead.raw_os_error(), Some(libc_eio()), "{dead}");
    assert_eq!(std::fs::read(&path).unwrap(), b"synced");
}

#[test]
fn with_its_power_off_the_disk_fails_even_a_path_and_comes_back_as_a_new_device() {
    use std::os::unix::fs::MetadataExt;
    let Some((dir, mut disk)) = mount(start()) else { return };
    let path = dir.path().join("log");
    let file = OpenOptions::new().create_new(true).write(true).open(&path).unwrap();
    File::open(dir.path()).unwrap().sync_all().unwrap();
    file.write_all_at(b"never synced", 0).unwrap();
    let device = std::fs::metadata(&path).unwrap().dev();
    let report = disk.power_off(Persistence::Data, 1).unwrap();
    assert_eq!(report.taken_back.len(), 1, "{report}");
    // Off: the old descriptor, a path and a new name all fail; the mount is still there.
    assert_eq!(file.write_all_at(b"late", 0).unwrap_err().raw_os_error(), Some(libc_eio()));
    assert_eq!(std::fs::read(&path).unwrap_err().raw_os_error(), Some(libc_eio()));
    assert_eq!(File::create(dir.path().join("new")).unwrap_err().raw_os_error(), Some(libc_eio()));
    assert!(disk.power_off(Persistence::Data, 2).is_err(), "a second cut while the power is off");
    disk.power_on().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"", "the name kept, its unsynced bytes taken back");
    assert_ne!(std::fs::metadata(&path).unwrap().dev(), device, "the disk that came back is a new device");
    assert!(disk.power_on().is_err(), "the power is on already");
    let again = disk.cut(Persistence::Process, 3).unwrap();
    assert!(again.taken_back.is_empty(), "{again}");
    assert_eq!(std::fs::read(&path).unwrap(), b"");
}

/// `EIO`, without a dependency for one constant.
fn libc_eio() -> i32 {
    5
}

/// A thread that makes `wal` under `root`, syncs `root`, then appends ten records of 100 bytes,
/// syncing each: how many were acknowledged (synced) before a sync failed.
fn log_writer(root: std::path::PathBuf) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let file = OpenOptions::new().create_new(true).write(true).open(root.join("wal")).unwrap();
        File::open(&root).unwrap().sync_all().unwrap();
        let mut acknowledged = 0u64;
        for i in 0..10u64 {
            file.write_all_at(&[i as u8 + 1; 100], i * 100).unwrap();
            if file.sync_data().is_err() {
                return acknowledged;
            }
            acknowledged = i + 1;
        }
        acknowledged
    })
}

#[test]
fn a_trap_holds_the_chosen_sync_until_the_cut_and_the_cut_lands_inside_it() {
    let Some((dir, mut disk)) = mount(start()) else { return };
    let root = dir.path().to_path_buf();
    disk.set_trap(Some(Trap { on: TrapOn::Sync, path: Some("/wal".to_owned()), nth: 3 })).unwrap();
    let writer = log_writer(root);
    assert_eq!(disk.held(Duration::from_secs(10)).unwrap().as_deref(), Some("a sync of /wal"));
    let report = disk.cut(Persistence::Names, 3).unwrap();
    assert_eq!(writer.join().unwrap(), 2, "the third sync failed, two acknowledged");
    assert_eq!(report.held.as_deref(), Some("a sync of /wal"));
    assert_eq!(std::fs::read(dir.path().join("wal")).unwrap().len(), 200, "{report}");
    assert!(report.to_string().contains("bytes 200-300 of /wal were written and never synced"), "{report}");
}

/// A trap on tears lets by the syncs of writes that no cut can tear and holds the first sync of
/// one that crosses a sector boundary; the torn cut then tears it there.
#[test]
fn a_trap_on_tears_holds_the_sync_of_a_write_across_a_sector_and_the_cut_tears_it() {
    let Some((dir, mut disk)) = mount(start()) else { return };
    let root = dir.path().to_path_buf();
    disk.set_trap(Some(Trap { on: TrapOn::Tear, path: None, nth: 1 })).unwrap();
    // Records of 100 bytes: the sixth, over bytes 500-600, is the first to cross a sector.
    let writer = log_writer(root);
    assert_eq!(disk.held(Duration::from_secs(10)).unwrap().as_deref(), Some("a sync of /wal"));
    let report = disk.cut(Persistence::Torn, 11).unwrap();
    assert_eq!(writer.join().unwrap(), 5, "the sixth record's sync was held");
    assert_eq!(std::fs::read(dir.path().join("wal")).unwrap().len(), 512, "torn at the sector: {report}");
    assert!(
        report.to_string().contains("bytes 500-600 of /wal were written and never synced (torn: 12 kept)"),
        "{report}"
    );
    assert!(
        TrapOn::Sync.counts(TrapOn::Tear) && TrapOn::Any.counts(TrapOn::Tear) && !TrapOn::Write.counts(TrapOn::Tear)
    );
    assert!(!TrapOn::Tear.counts(TrapOn::Sync) && !TrapOn::Tear.counts(TrapOn::Write));
}

/// A trap on names lets writes and syncs by and holds the chosen change of names: a compaction
/// cut between its snapshot's sync and its rename.
#[test]
fn a_trap_on_names_holds_a_rename_and_lets_writes_and_syncs_by() {
    let Some((dir, mut disk)) = mount(start()) else { return };
    let root = dir.path().to_path_buf();
    disk.set_trap(Some(Trap { on: TrapOn::Names, path: None, nth: 2 })).unwrap();
    let compaction = std::thread::spawn(move || {
        let tmp = root.join("snapshot.tmp");
        let file = OpenOptions::new().create_new(true).write(true).open(&tmp).unwrap();
        for i in 0..4u64 {
            file.write_all_at(&[7; 64], i * 64).unwrap();
            file.sync_data().unwrap();
        }
        std::fs::rename(&tmp, root.join("snapshot")).map_err(|e| e.raw_os_error())
    });
    assert_eq!(disk.held(Duration::from_secs(10)).unwrap().as_deref(), Some("a change of names of /"));
    let report = disk.cut(Persistence::Names, 1).unwrap();
    assert_eq!(compaction.join().unwrap(), Err(Some(libc_eio())), "the held rename failed on the dead disk");
    assert_eq!(report.held.as_deref(), Some("a change of names of /"));
    assert!(!dir.path().join("snapshot").exists(), "the rename never happened: {report}");
    assert!(!TrapOn::Names.counts(TrapOn::Write) && !TrapOn::Names.counts(TrapOn::Sync));
    assert!(TrapOn::Write.counts(TrapOn::Names) && TrapOn::Any.counts(TrapOn::Names));
    assert!(!TrapOn::Sync.counts(TrapOn::Names));
}

#[test]
fn names_are_durable_only_when_their_directory_is_synced() {
    let Some((dir, mut disk)) = mount(start()) else { return };
    let tmp = dir.path().join("snapshot.tmp");
    std::fs::write(&tmp, b"rows").unwrap();
    File::open(&tmp).unwrap().sync_all().unwrap();
    std::fs::rename(&tmp, dir.path().join("snapshot")).unwrap();
    let report = disk.cut(Persistence::Names, 0).unwrap();
    assert!(!dir.path().join("snapshot").exists(), "{report}");
    assert!(report.to_string().contains("snapshot in / was made and never made durable"), "{report}");
    // The same steps with the directory synced after the rename survive.
    std::fs::write(&tmp, b"rows").unwrap();
    File::open(&tmp).unwrap().sync_all().unwrap();
    std::fs::rename(&tmp, dir.path().join("snapshot")).unwrap();
    File::open(dir.path()).unwrap().sync_all().unwrap();
    disk.cut(Persistence::Names, 0).unwrap();
    assert_eq!(std::fs::read(dir.path().join("snapshot")).unwrap(), b"rows");
}
