//! `.cotal/maintenance/journal.json`: the open apply (docs/design/architecture.md, "Apply, lock and journal").
//!
//! Invariants: the journal is written before the first step of an apply and removed only after
//! its last; while it exists every verb but `apply` (and `up` starting a cluster's stopped nodes, `down`) refuses. It holds no secrets.

use crate::error::Result;
use crate::observed::{Journal, JournalState};
use crate::store::record::{self, Layout};
use crate::store::{Root, atomic};

pub fn load(root: &Root) -> Result<JournalState> {
    record::read_with(&root.journal(), parse)
}

pub fn parse(bytes: &[u8]) -> Result<Journal, String> {
    record::parse(bytes)
}

pub fn save(root: &Root, journal: &Journal) -> Result<()> {
    atomic::ensure_dir(&root.maintenance_dir(), atomic::PRIVATE_DIR)?;
    record::write(&root.journal(), journal, Layout::Pretty, atomic::SECRET)
}

/// Close the journal: the apply finished.
pub fn close(root: &Root) -> Result<()> {
    atomic::remove_file(&root.journal()).map(|_| ())
}
