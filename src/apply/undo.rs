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

impl Undo {
    fn path(&self) -> &std::path::Path {
        match self {
            Undo::Restore(p, _) | Undo::Remove(p) => p,
        }
    }
}

/// This apply's undo entries in the order written, with the set of paths they cover (a bulk
/// apply remembers thousands: looking one up must not scan them all).
#[derive(Default)]
pub struct UndoLog {
    entries: Vec<Undo>,
    seen: std::collections::HashSet<PathBuf>,
}

impl UndoLog {
    pub fn push(&mut self, undo: Undo) {
        self.seen.insert(undo.path().to_path_buf());
        self.entries.push(undo);
    }

    pub fn entries(&self) -> &[Undo] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.seen.clear();
    }
}

/// Note how to put `path` back as it is now (its bytes, or its absence), once per apply.
pub fn remember(undo: &mut UndoLog, path: &std::path::Path) -> Result<()> {
    if !undo.seen.contains(path) {
        undo.push(match crate::store::atomic::read_optional(path)? {
            Some(bytes) => Undo::Restore(path.to_path_buf(), bytes),
            None => Undo::Remove(path.to_path_buf()),
        });
    }
    Ok(())
}

/// Put back what this apply wrote before failing with `e`, and say so in the error.
pub fn put_back(e: Error, undo: &mut UndoLog) -> Error {
    if undo.is_empty() {
        return e;
    }
    let failures = undo_writes(undo.entries());
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
    let with = |d: crate::diagnostic::Diagnostic| d.note(note);
    match e {
        Error::Refused(m) => Error::refused(with(*m)),
        Error::Other(m) => Error::other(with(*m)),
        Error::Interrupted(m) => Error::interrupted(with(*m)),
        Error::Stopped(m) => Error::stopped(with(*m)),
        Error::Conflict(m) => Error::conflict(with(*m)),
        Error::Input(m) => Error::input(with(*m)),
        Error::Io { path, source } => {
            Error::other(with(format!("{}: {source}", path.display()).into()))
        }
        // A failure of the nats-server process keeps its kind; the others at the broker edge
        // say `what: why`, and become that text with the note.
        Error::Broker(crate::error::BrokerError::Process(d)) => Error::process(with(*d)),
        Error::Broker(crate::error::BrokerError::Unconfirmed(d)) => {
            crate::error::BrokerError::unconfirmed(with(*d)).into()
        }
        Error::Broker(b) => Error::other(with(b.to_string().into())),
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
