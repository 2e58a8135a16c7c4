//! The record of a backup being written: where its partial copy (`.<dest>.cotal-partial/`,
//! 0700, holding tenant data or the root's trust) lies while it is written, so a copy a killed
//! `space backup` or `root backup` left behind is named by `status` and removed by the next
//! backup of the root, whatever destination that one has.
//!
//! Invariants: the record (`.cotal/maintenance/partial-copy`, 0600) exists exactly while a
//! backup writes, or after one was killed; a path it holds is removed only when its last
//! component ends in `.cotal-partial` (a record edited to name anything else removes nothing);
//! only a holder of the root's lock begins, ends or sweeps.

use super::{Root, atomic};
use crate::error::Result;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// The suffix of every partial copy's folder name.
pub const SUFFIX: &str = ".cotal-partial";

fn record(root: &Root) -> PathBuf {
    root.maintenance_dir().join("partial-copy")
}

/// The partial copy beside `dest` (`.<name>.cotal-partial`).
pub fn beside(dest: &Path, fallback: &str) -> PathBuf {
    dest.with_file_name(format!(
        ".{}{SUFFIX}",
        dest.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| fallback.into())
    ))
}

/// Record that `partial` is about to be written (durably, before its first byte).
pub fn begin(root: &Root, partial: &Path) -> Result<()> {
    atomic::ensure_dir(&root.maintenance_dir(), atomic::PRIVATE_DIR)?;
    let text = partial.as_os_str().as_encoded_bytes();
    atomic::write(&record(root), text, atomic::SECRET)
}

/// The copy is renamed into place or removed: forget it.
pub fn end(root: &Root) -> Result<()> {
    atomic::remove_file(&record(root)).map(|_| ())
}

/// The partial copy a killed backup left, if one is recorded and still there.
pub fn leftover(root: &Root) -> Option<PathBuf> {
    let Ok(atomic::Found::File(bytes)) = atomic::read_no_follow_within(&record(root), 64 << 10)
    else {
        return None;
    };
    let path = PathBuf::from(std::ffi::OsString::from_vec(bytes));
    let ours = path
        .file_name()
        .is_some_and(|n| n.as_encoded_bytes().ends_with(SUFFIX.as_bytes()));
    (ours && std::fs::symlink_metadata(&path).is_ok()).then_some(path)
}

/// Remove the partial copy a killed backup left (if any) and its record; the path removed.
pub fn sweep(root: &Root) -> Result<Option<PathBuf>> {
    let left = leftover(root);
    if let Some(path) = &left {
        atomic::remove_tree(path)?;
    }
    end(root)?;
    Ok(left)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_copy_is_swept_and_a_record_naming_anything_else_removes_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let root = Root::at(tmp.path()).unwrap();
        let dest = tmp.path().join("bk");
        let partial = beside(&dest, "backup");
        assert_eq!(partial, tmp.path().join(".bk.cotal-partial"));
        begin(&root, &partial).unwrap();
        std::fs::create_dir_all(partial.join("streams")).unwrap();
        assert_eq!(leftover(&root), Some(partial.clone()));
        assert_eq!(sweep(&root).unwrap(), Some(partial.clone()));
        assert!(!partial.exists());
        assert_eq!(leftover(&root), None);

        let precious = tmp.path().join("precious");
        std::fs::create_dir(&precious).unwrap();
        begin(&root, &precious).unwrap();
        assert_eq!(sweep(&root).unwrap(), None);
        assert!(precious.exists());
    }
}
