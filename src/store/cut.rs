//! `.cotal/maintenance/cut.json`: the cut `cotal down --preserve-state` records, with its
//! evidence. Backup and restore require it; `cotal up` clears it.
//!
//! Invariant: a cut is written only after the broker was seen stopped and its listener seen
//! unreachable.

use crate::error::Result;
use crate::store::record::{self, Layout};
use crate::store::{Root, atomic};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    pub broker_stopped: bool,
    pub listener_unreachable: bool,
    /// The pid that was stopped, if one ran.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stopped_pid: Option<u32>,
    pub listener: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cut {
    pub op: String,
    pub at: String,
    pub generation: u64,
    pub evidence: Evidence,
}

pub fn load(root: &Root) -> Result<Option<Cut>> {
    record::read_optional(&root.cut())
}

pub fn save(root: &Root, cut: &Cut) -> Result<()> {
    atomic::ensure_dir(&root.maintenance_dir(), atomic::PRIVATE_DIR)?;
    record::write(&root.cut(), cut, Layout::Pretty, atomic::SECRET)
}

pub fn clear(root: &Root) -> Result<bool> {
    atomic::remove_file(&root.cut())
}
