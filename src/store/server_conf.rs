//! A node's `server.conf` and its `.next` / `.prev` companions: the three files of a promotion
//! (docs/design/architecture.md, "Rendering server.conf"). A single server's are in `.cotal/auth/`; a cluster node's beside the
//! config it reads.
//!
//! Invariant: `server.conf` is only ever replaced by a rename, so a reader (or nats-server on
//! reload) sees one whole config or the other.

use crate::error::Result;
use crate::store::{NodeFiles, atomic};
use std::path::PathBuf;

pub fn read(node: &NodeFiles) -> Result<Option<String>> {
    Ok(atomic::read_optional(&node.conf)?.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// Write the candidate config beside the live one.
pub fn write_next(node: &NodeFiles, text: &str) -> Result<PathBuf> {
    atomic::ensure_dir(&node.dir, atomic::PRIVATE_DIR)?;
    atomic::write(&node.conf_next, text.as_bytes(), atomic::SECRET)?;
    Ok(node.conf_next.clone())
}

/// Write a cluster node's route include file (0600) beside its config, when its text differs.
/// Its text changes only with the route credential or the node list, neither of which changes
/// while the cluster runs, so a rollback of the config never needs the old text back.
pub fn write_routes_include(node: &NodeFiles, text: &str) -> Result<()> {
    let path = node.routes_include();
    if atomic::read_optional(&path)?.as_deref() == Some(text.as_bytes()) {
        return Ok(());
    }
    atomic::ensure_dir(&node.dir, atomic::PRIVATE_DIR)?;
    atomic::write(&path, text.as_bytes(), atomic::SECRET)
}

/// Keep the live config as `.prev` and rename `.next` over it.
pub fn promote_next(node: &NodeFiles) -> Result<()> {
    match atomic::read_optional(&node.conf)? {
        Some(bytes) => atomic::write(&node.conf_prev, &bytes, atomic::SECRET)?,
        None => {
            atomic::remove_file(&node.conf_prev)?;
        }
    }
    atomic::rename(&node.conf_next, &node.conf)
}

/// Put `.prev` back (or remove the live config when there was none before).
pub fn restore_prev(node: &NodeFiles) -> Result<()> {
    match atomic::read_optional(&node.conf_prev)? {
        Some(bytes) => atomic::write(&node.conf, &bytes, atomic::SECRET),
        None => atomic::remove_file(&node.conf).map(|_| ()),
    }
}

/// Drop a leftover candidate.
pub fn discard_next(node: &NodeFiles) -> Result<()> {
    atomic::remove_file(&node.conf_next).map(|_| ())
}
