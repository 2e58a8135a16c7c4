//! `cotal.toml` on disk: the one module that reads and writes the desired-state file (its
//! parsing is the pure [`crate::desired`]).
//!
//! Unlike the state under `.cotal/`, `cotal.toml` may be a link (into a checkout of the
//! operator's repository, say): it is the operator's file, and the root's safety check refuses
//! it when it is another user's or writable by everyone. Writes replace it atomically (0644).

use crate::error::{Error, Result};
use crate::store::{Root, atomic};

/// The largest `cotal.toml` cotal reads (10,000 spaces with members and channels take a few MiB).
pub const MAX_BYTES: u64 = 64 << 20;

/// The file's text, `None` when there is no file.
pub fn read(root: &Root) -> Result<Option<String>> {
    let path = root.desired_file();
    match atomic::read_following_within(&path, MAX_BYTES) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| Error::input(format!("{}: not UTF-8", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(&path, e)),
    }
}

/// The file's text; its absence is bad input naming what to do.
pub fn read_required(root: &Root) -> Result<String> {
    read(root)?.ok_or_else(|| {
        Error::input(format!(
            "{} does not exist: run `cotal init` to create a root, or pass --root DIR",
            root.desired_file().display()
        ))
    })
}

/// The text of a `cotal.toml` at `path` (any path: `validate` and `fmt` take one), read as
/// [`read`] reads the root's; absent or not UTF-8 is bad input naming it.
pub fn read_at(path: &std::path::Path) -> Result<String> {
    match atomic::read_following_within(path, MAX_BYTES) {
        Ok(bytes) => String::from_utf8(bytes)
            .map_err(|_| Error::input(format!("{}: not UTF-8", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::input(
            crate::diagnostic::Diagnostic::new(format!("{}: no such file", path.display()))
                .next("pass the path of cotal.toml, or run it in a root"),
        )),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Replace the file with `text`.
pub fn write(root: &Root, text: &str) -> Result<()> {
    atomic::write(&root.desired_file(), text.as_bytes(), atomic::PUBLIC)
}
