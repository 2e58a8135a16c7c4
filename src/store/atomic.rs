//! Atomic, durable file writes and removals.
//!
//! A write creates a temp file in the target's directory with the final mode, writes, fsyncs,
//! renames it over the target and fsyncs the directory: a reader sees the old file or the new
//! one, never a torn one, and a power cut after return keeps the new one.

use crate::error::{IoContext, Result};
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// Mode of secret files.
pub const SECRET: u32 = 0o600;
/// Mode of public files.
pub const PUBLIC: u32 = 0o644;
/// Mode of private directories.
pub const PRIVATE_DIR: u32 = 0o700;

/// The directory holding `path` (`.` for a bare file name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Atomically replace `path` with `bytes`, created with `mode`.
pub fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let dir = parent_of(path);
    let mut tmp = tempfile::Builder::new()
        .prefix(".cotal-tmp.")
        .permissions(fs::Permissions::from_mode(mode))
        .tempfile_in(dir)
        .at(dir)?;
    // The umask may have narrowed the mode at creation; set it exactly.
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(mode)).at(tmp.path())?;
    tmp.write_all(bytes).at(path)?;
    tmp.as_file().sync_all().at(path)?;
    tmp.persist(path).map_err(|e| e.error).at(path)?;
    sync_dir(dir)
}

/// fsync a directory so a rename or unlink in it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir).and_then(|f| f.sync_all()).at(dir)
}

/// Create `dir` (and parents) with `mode` on every directory it creates.
pub fn ensure_dir(dir: &Path, mode: u32) -> Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .at(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(mode)).at(dir)?;
    if let Some(parent) = dir.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Rename durably (both names in one directory, or the target's directory fsynced).
pub fn rename(from: &Path, to: &Path) -> Result<()> {
    fs::rename(from, to).at(from)?;
    sync_dir(parent_of(to))
}

/// Remove a file if it exists; true when something was removed.
pub fn remove_file(path: &Path) -> Result<bool> {
    match fs::remove_file(path) {
        Ok(()) => {
            sync_dir(parent_of(path))?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(crate::error::Error::io(path, e)),
    }
}

/// Remove a directory tree if it exists; true when something was removed. Never follows a
/// symlink at `path` itself (a link is unlinked, not traversed).
pub fn remove_tree(path: &Path) -> Result<bool> {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(crate::error::Error::io(path, e)),
        Ok(meta) => {
            if meta.is_dir() {
                fs::remove_dir_all(path).at(path)?;
            } else {
                fs::remove_file(path).at(path)?;
            }
            sync_dir(parent_of(path))?;
            Ok(true)
        }
    }
}

/// Read a file that may be absent.
pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(crate::error::Error::io(path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn writes_replace_whole_files_with_the_exact_mode() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret.json");
        write(&path, b"one", SECRET).unwrap();
        write(&path, b"two", SECRET).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        write(&path, b"three", PUBLIC).unwrap();
        assert_eq!(fs::metadata(&path).unwrap().mode() & 0o777, 0o644);
        let leftovers: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file is left behind");
    }

    #[test]
    fn removals_are_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("t");
        ensure_dir(&tree.join("a/b"), PRIVATE_DIR).unwrap();
        assert!(remove_tree(&tree).unwrap());
        assert!(!remove_tree(&tree).unwrap());
        assert!(!remove_file(&dir.path().join("nope")).unwrap());
    }
}
