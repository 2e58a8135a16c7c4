//! `.cotal/maintenance/journal.json`: the open apply (DESIGN.md section 7).
//!
//! Invariants: the journal is written before the first step of an apply and removed only after
//! its last; while it exists every verb but `apply` refuses. It holds no secrets.

use crate::error::Result;
use crate::observed::{Journal, JournalState};
use crate::store::Root;
use crate::store::atomic::{self, Found};

pub fn load(root: &Root) -> Result<JournalState> {
    let path = root.journal();
    let bytes = match atomic::read_no_follow(&path)? {
        Found::Absent => return Ok(JournalState::Closed),
        Found::NotRegular(what) => {
            return Ok(JournalState::Corrupt {
                file: path,
                reason: format!("{what}, not a regular file (links are not followed)"),
            });
        }
        Found::File(bytes) => bytes,
    };
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
