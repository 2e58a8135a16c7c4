//! One account's folder in the JetStream store, `<store_dir>/jetstream/<account pub>/`, read and
//! removed while the broker is stopped.
//!
//! Invariant: only the named account's folder is ever touched; the account key is checked to be
//! a bare public key so it can never name a path outside the store.

use crate::error::{IoContext, Result};
use crate::observed::StreamUsage;
use crate::store::atomic;
use std::path::{Path, PathBuf};

fn account_dir(store_dir: &Path, account: &str) -> Option<PathBuf> {
    let safe = account.len() == 56
        && account.starts_with('A')
        && account.bytes().all(|b| b.is_ascii_alphanumeric());
    safe.then(|| store_dir.join("jetstream").join(account))
}

/// The account's streams (folder names) and their bytes on disk, in name order.
pub fn streams(store_dir: &Path, account: &str) -> Result<Vec<StreamUsage>> {
    let Some(dir) = account_dir(store_dir, account) else {
        return Ok(Vec::new());
    };
    let streams_dir = dir.join("streams");
    let entries = match std::fs::read_dir(&streams_dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        other => other.at(&streams_dir)?,
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.at(&streams_dir)?;
        if !entry.file_type().at(entry.path())?.is_dir() {
            continue;
        }
        out.push(StreamUsage {
            name: entry.file_name().to_string_lossy().into_owned(),
            messages: None,
            bytes: tree_bytes(&entry.path()),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

/// Delete the account's folder: its streams one by one in name order, then the rest. Idempotent;
/// true when something was removed. A failure part-way leaves the streams after the failing one
/// in place (the caller's journal says the removal is committed, so a re-run finishes it).
pub fn remove(store_dir: &Path, account: &str) -> Result<bool> {
    let Some(dir) = account_dir(store_dir, account) else {
        return Ok(false);
    };
    for stream in streams(store_dir, account)? {
        atomic::remove_tree(&dir.join("streams").join(&stream.name))?;
    }
    atomic::remove_tree(&dir)
}
