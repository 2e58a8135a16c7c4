//! Undoing this apply's own writes: each record a step writes is remembered as it was (its
//! bytes, or its absence), so a promotion that does not take effect leaves the inventory as the
//! plan found it.
//!
//! Invariant: a path is remembered once per apply, before its first write; undoing runs newest
//! first and reports what it could not put back instead of stopping.

use crate::error::{Error, Result};
use std::path::PathBuf;

/// How to put back one artifact this apply wrote, should its promotion not take effect.
pub enum Undo {
    /// Put these bytes back at the path.
    Restore(PathBuf, Vec<u8>),
    /// The path did not exist before: remove what this apply created there.
    Remove(PathBuf),
}

/// Note how to put `path` back as it is now (its bytes, or its absence), once per apply.
pub fn remember(undo: &mut Vec<Undo>, path: &std::path::Path) -> Result<()> {
    let known = undo.iter().any(|u| match u {
        Undo::Restore(p, _) | Undo::Remove(p) => p == path,
    });
    if !known {
        undo.push(match crate::store::atomic::read_optional(path)? {
            Some(bytes) => Undo::Restore(path.to_path_buf(), bytes),
            None => Undo::Remove(path.to_path_buf()),
        });
    }
    Ok(())
}

/// Put back what this apply wrote before failing with `e`, and say so in the error.
pub fn put_back(e: Error, undo: &mut Vec<Undo>) -> Error {
    if undo.is_empty() {
        return e;
    }
    let failures = undo_writes(undo);
    undo.clear();
    let note = if failures.is_empty() {
        "every record this apply wrote was put back".to_string()
    } else {
        format!(
            "some records this apply wrote could not be put back ({})",
            failures.join("; ")
        )
    };
    annotate(e, &note)
}

/// Add a note to an error's message, keeping its kind (and so its exit code).
pub fn annotate(e: Error, note: &str) -> Error {
    let with = |msg: String| format!("{msg}\n({note})");
    match e {
        Error::Refused(m) => Error::Refused(with(m)),
        Error::Other(m) => Error::Other(with(m)),
        Error::Interrupted(m) => Error::Interrupted(with(m)),
        Error::Conflict(m) => Error::Conflict(with(m)),
        Error::Input(m) => Error::Input(with(m)),
        Error::Io { path, source } => Error::Other(with(format!("{}: {source}", path.display()))),
        other => other,
    }
}

/// Put back everything this apply wrote, newest first. Returns what could not be put back.
pub fn undo_writes(undo: &[Undo]) -> Vec<String> {
    let mut failures = Vec::new();
    for u in undo.iter().rev() {
        let result = match u {
            Undo::Restore(path, bytes) => {
                crate::store::atomic::write(path, bytes, crate::store::atomic::SECRET)
            }
            Undo::Remove(path) => crate::store::atomic::remove_tree(path).map(|_| ()),
        };
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    }
    failures
}
