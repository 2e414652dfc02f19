//! The disk's tests: its durability model against a reference, file operations through the mount
//! against the model, and a store on it.

mod mounted;
mod tree;

use std::path::Path;

use reservation_disk::{Disk, Tree};

/// A disk mounted in a fresh temporary directory, or `None` (said once on standard error) where
/// FUSE cannot mount; under `RESERVATION_REQUIRE_SERVICES=1`, as CI runs, a mount refused fails
/// the test instead.
pub fn mount(tree: Tree) -> Option<(tempfile::TempDir, Disk)> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let disk =
        reservation_conformance::services::service("FUSE (a mount of /dev/fuse)", Disk::mount_tree(dir.path(), tree))?;
    Some((dir, disk))
}

/// Every file and directory under `root`, by path from it ("/a", "/d/"), with a file's bytes,
/// read through the filesystem.
pub fn read_all(root: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut files = std::collections::BTreeMap::from([("/".to_owned(), Vec::new())]);
    let mut at = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = at.pop() {
        for entry in std::fs::read_dir(&dir).expect("a directory listing") {
            let entry = entry.expect("an entry");
            let path = format!("{prefix}/{}", entry.file_name().to_string_lossy());
            if entry.file_type().expect("a type").is_dir() {
                files.insert(format!("{path}/"), Vec::new());
                at.push((entry.path(), path));
            } else {
                files.insert(path, std::fs::read(entry.path()).expect("a file's bytes"));
            }
        }
    }
    files
}
