//! `.cotal/audit.jsonl`: append-only, one JSON object per line, each append fsynced (0600).
//!
//! Invariant: a record is either wholly appended and durable when [`append`] returns `Ok`, or
//! `append` fails; a link at the path is refused, not followed.

use crate::audit::Record;
use crate::error::{Error, Result};
use crate::store::{Root, atomic};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

/// Append one record durably.
pub fn append(root: &Root, record: &Record) -> Result<()> {
    let path = root.audit_log();
    atomic::ensure_dir(&root.state_dir(), atomic::PRIVATE_DIR)?;
    let mut line = serde_json::to_vec(record).expect("audit record serializes");
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(atomic::SECRET)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(&path)
        .map_err(|e| {
            Error::Other(format!(
                "cannot write the audit log {}: {e}",
                path.display()
            ))
        })?;
    let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
    if !meta.is_file() {
        return Err(atomic::not_regular(
            &path,
            atomic::kind_of(&meta.file_type()),
        ));
    }
    file.write_all(&line)
        .and_then(|_| file.sync_all())
        .map_err(|e| {
            Error::Other(format!(
                "cannot write the audit log {}: {e}",
                path.display()
            ))
        })
}

/// Every record, oldest first. A line that does not parse is an error naming its number.
pub fn read(root: &Root) -> Result<Vec<Record>> {
    let path = root.audit_log();
    let Some(bytes) = atomic::read_optional(&path)? else {
        return Ok(Vec::new());
    };
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                Error::Other(format!(
                    "{}:{}: not an audit record: {e}",
                    path.display(),
                    i + 1
                ))
            })
        })
        .collect()
}
