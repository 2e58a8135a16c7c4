//! `.cotal/auth/server.conf` and its `.next` / `.prev` companions: the three files of a
//! promotion (DESIGN.md section 4).
//!
//! Invariant: `server.conf` is only ever replaced by a rename, so a reader (or nats-server on
//! reload) sees one whole config or the other.

use crate::error::Result;
use crate::store::{Root, atomic};
use std::path::PathBuf;

pub fn read(root: &Root) -> Result<Option<String>> {
    Ok(atomic::read_optional(&root.server_conf())?
        .map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// Write the candidate config beside the live one.
pub fn write_next(root: &Root, text: &str) -> Result<PathBuf> {
    atomic::ensure_dir(&root.auth_dir(), atomic::PRIVATE_DIR)?;
    let path = root.server_conf_next();
    atomic::write(&path, text.as_bytes(), atomic::SECRET)?;
    Ok(path)
}

/// Keep the live config as `.prev` and rename `.next` over it.
pub fn promote_next(root: &Root) -> Result<()> {
    let live = root.server_conf();
    match atomic::read_optional(&live)? {
        Some(bytes) => atomic::write(&root.server_conf_prev(), &bytes, atomic::SECRET)?,
        None => {
            atomic::remove_file(&root.server_conf_prev())?;
        }
    }
    atomic::rename(&root.server_conf_next(), &live)
}

/// Put `.prev` back (or remove the live config when there was none before).
pub fn restore_prev(root: &Root) -> Result<()> {
    let prev = root.server_conf_prev();
    match atomic::read_optional(&prev)? {
        Some(bytes) => atomic::write(&root.server_conf(), &bytes, atomic::SECRET),
        None => atomic::remove_file(&root.server_conf()).map(|_| ()),
    }
}

/// Drop a leftover candidate.
pub fn discard_next(root: &Root) -> Result<()> {
    atomic::remove_file(&root.server_conf_next()).map(|_| ())
}
