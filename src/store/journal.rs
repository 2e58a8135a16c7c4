//! `.cotal/maintenance/journal.json`: the open apply (DESIGN.md section 7).
//!
//! Invariants: the journal is written before the first step of an apply and removed only after
//! its last; while it exists every verb but `apply` refuses. It holds no secrets.

use crate::error::{IoContext, Result};
use crate::observed::{Journal, JournalState};
use crate::store::{Root, atomic};

pub fn load(root: &Root) -> Result<JournalState> {
    let path = root.journal();
    let meta = match std::fs::symlink_metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(JournalState::Closed),
        other => other.at(&path)?,
    };
    if !meta.is_file() {
        return Ok(JournalState::Corrupt {
            file: path,
            reason: "not a regular file (links are not followed)".into(),
        });
    }
    let bytes = std::fs::read(&path).at(&path)?;
    Ok(match parse(&bytes) {
        Ok(j) => JournalState::Open(j),
        Err(reason) => JournalState::Corrupt { file: path, reason },
    })
}

pub fn parse(bytes: &[u8]) -> Result<Journal, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("does not parse: {e}"))
}

pub fn save(root: &Root, journal: &Journal) -> Result<()> {
    atomic::ensure_dir(&root.maintenance_dir(), atomic::PRIVATE_DIR)?;
    let mut json = serde_json::to_vec_pretty(journal).expect("journal serializes");
    json.push(b'\n');
    atomic::write(&root.journal(), &json, atomic::SECRET)
}

/// Close the journal: the apply finished.
pub fn close(root: &Root) -> Result<()> {
    atomic::remove_file(&root.journal()).map(|_| ())
}
