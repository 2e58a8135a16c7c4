//! `.cotal/space.<hex>/`: a space's local material: `lifecycle.json` (the protection last
//! applied, bound to the account it was applied to), later its $SYS creds and `membership.json`,
//! and the pidfiles of its local processes.
//!
//! Invariant: a space folder is reaped only when it belongs to the account being removed (its
//! `lifecycle.json` names that account), so a removal never deletes a re-added space's material.

use crate::error::{IoContext, Result};
use crate::model::SpaceName;
use crate::store::{Root, atomic};
use serde::{Deserialize, Serialize};

/// What the last apply recorded about a space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lifecycle {
    pub account: String,
    pub protect: bool,
}

const LIFECYCLE: &str = "lifecycle.json";
/// The space's $SYS creds and the account they observe.
pub const OBSERVER_CREDS: &str = "membership-observer.creds";
pub const EVICTOR_CREDS: &str = "connection-evictor.creds";
const MEMBERSHIP: &str = "membership.json";

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
    let dir = root.space_dir(space);
    atomic::ensure_dir(&dir, atomic::PRIVATE_DIR)?;
    atomic::write(
        &dir.join(OBSERVER_CREDS),
        observer.as_bytes(),
        atomic::SECRET,
    )?;
    atomic::write(&dir.join(EVICTOR_CREDS), evictor.as_bytes(), atomic::SECRET)?;
    let mut json = serde_json::to_vec(&Membership {
        account_id: account.to_string(),
    })
    .expect("membership serializes");
    json.push(b'\n');
    atomic::write(&dir.join(MEMBERSHIP), &json, atomic::SECRET)
}

/// Whether the space's $SYS creds exist for `account`.
pub fn sys_creds_present(root: &Root, space: &SpaceName, account: &str) -> bool {
    let dir = root.space_dir(space);
    let regular = |name: &str| {
        std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.file_type().is_file())
    };
    let bound = atomic::read_optional(&dir.join(MEMBERSHIP))
        .ok()
        .flatten()
        .and_then(|b| serde_json::from_slice::<Membership>(&b).ok())
        .is_some_and(|m| m.account_id == account);
    bound && regular(OBSERVER_CREDS) && regular(EVICTOR_CREDS)
}

/// The space's membership-observer creds, if written (secret). A link is never followed.
pub fn observer_creds(root: &Root, space: &SpaceName) -> Option<String> {
    atomic::read_optional(&root.space_dir(space).join(OBSERVER_CREDS))
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Where a space's `lifecycle.json` lives.
pub fn lifecycle_path(root: &Root, space: &SpaceName) -> std::path::PathBuf {
    root.space_dir(space).join(LIFECYCLE)
}

pub fn load_lifecycle(root: &Root, space: &SpaceName) -> Result<Option<Lifecycle>> {
    let path = lifecycle_path(root, space);
    match atomic::read_optional(&path)? {
        None => Ok(None),
        Some(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            crate::error::Error::Other(format!("{}: does not parse: {e}", path.display()))
        }),
    }
}

pub fn save_lifecycle(root: &Root, space: &SpaceName, lifecycle: &Lifecycle) -> Result<()> {
    let dir = root.space_dir(space);
    atomic::ensure_dir(&dir, atomic::PRIVATE_DIR)?;
    let mut json = serde_json::to_vec(lifecycle).expect("lifecycle serializes");
    json.push(b'\n');
    atomic::write(&dir.join(LIFECYCLE), &json, atomic::SECRET)
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
