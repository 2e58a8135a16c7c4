//! `.cotal/space.<hex>/`: a space's local material: `lifecycle.json` (the protection last
//! applied, bound to the account it was applied to), later its $SYS creds and `membership.json`,
//! and the pidfiles of its local processes.
//!
//! Invariant: a space folder is reaped only when it belongs to the account being removed (its
//! `lifecycle.json` names that account), so a removal never deletes a re-added space's material.

use crate::error::{IoContext, Result};
use crate::model::SpaceName;
use crate::store::paths::SpaceFile;
use crate::store::record::{self, Layout, Record};
use crate::store::{Root, atomic};
use serde::{Deserialize, Serialize};

/// What the last apply recorded about a space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lifecycle {
    pub account: String,
    pub protect: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct Membership {
    #[serde(rename = "accountId")]
    account_id: String,
}

/// Write the space's $SYS creds (0600) and `membership.json`, the latter last: its presence
/// says the pair is complete.
pub fn save_sys_creds(
    root: &Root,
    space: &SpaceName,
    account: &str,
    observer: &str,
    evictor: &str,
) -> Result<()> {
    atomic::ensure_dir(&root.space_dir(space), atomic::PRIVATE_DIR)?;
    let file = |f: SpaceFile| root.space_file(space, f);
    atomic::write(
        &file(SpaceFile::ObserverCreds),
        observer.as_bytes(),
        atomic::SECRET,
    )?;
    atomic::write(
        &file(SpaceFile::EvictorCreds),
        evictor.as_bytes(),
        atomic::SECRET,
    )?;
    record::write(
        &file(SpaceFile::Membership),
        &Membership {
            account_id: account.to_string(),
        },
        Layout::Compact,
        atomic::SECRET,
    )
}

/// Whether the space's $SYS creds exist for `account`.
pub fn sys_creds_present(root: &Root, space: &SpaceName, account: &str) -> bool {
    let file = |f: SpaceFile| root.space_file(space, f);
    let regular =
        |f: SpaceFile| std::fs::symlink_metadata(file(f)).is_ok_and(|m| m.file_type().is_file());
    let bound = matches!(
        record::read::<Membership>(&file(SpaceFile::Membership)),
        Ok(Record::Valid(m)) if m.account_id == account
    );
    bound && regular(SpaceFile::ObserverCreds) && regular(SpaceFile::EvictorCreds)
}

/// The space's membership-observer creds, if written (secret). A link is never followed.
pub fn observer_creds(root: &Root, space: &SpaceName) -> Option<String> {
    atomic::read_optional(&root.space_file(space, SpaceFile::ObserverCreds))
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The protection last applied to the space, if recorded.
pub fn load_lifecycle(root: &Root, space: &SpaceName) -> Result<Option<Lifecycle>> {
    record::read_optional(&root.space_file(space, SpaceFile::Lifecycle))
}

pub fn save_lifecycle(root: &Root, space: &SpaceName, lifecycle: &Lifecycle) -> Result<()> {
    atomic::ensure_dir(&root.space_dir(space), atomic::PRIVATE_DIR)?;
    record::write(
        &root.space_file(space, SpaceFile::Lifecycle),
        lifecycle,
        Layout::Compact,
        atomic::SECRET,
    )
}

/// Pids recorded in `*.pid` files of the space's folder that are alive.
pub fn live_pids(root: &Root, space: &SpaceName) -> Result<Vec<u32>> {
    let dir = root.space_dir(space);
    let entries = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        other => other.at(&dir)?,
    };
    let mut pids = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("pid") {
            continue;
        }
        // A pidfile that is not a regular file is refused, not skipped: skipping it would
        // drop the live-process guard of a removal.
        let Some(bytes) = atomic::read_optional(&path)? else {
            continue;
        };
        if let Ok(pid) = String::from_utf8_lossy(&bytes).trim().parse::<u32>()
            && crate::store::process_alive(pid)
        {
            pids.push(pid);
        }
    }
    pids.sort_unstable();
    Ok(pids)
}

/// Remove the space's folder if it belongs to `account` (or records no account). Returns true
/// when it was removed.
pub fn reap(root: &Root, space: &SpaceName, account: &str) -> Result<bool> {
    let dir = root.space_dir(space);
    let owner = load_lifecycle(root, space)
        .ok()
        .flatten()
        .map(|l| l.account);
    match owner {
        Some(a) if a != account => Ok(false),
        _ => atomic::remove_tree(&dir),
    }
}
