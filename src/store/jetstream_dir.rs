//! The layout of the JetStream store, `<store_dir>/jetstream/<account pub>/streams/<STREAM>/`:
//! the only module that spells it. Accounts' folders are listed, measured and removed here while
//! the broker is stopped, and backup and restore find their streams through it.
//!
//! Invariant: only the named account's folder is ever removed; the account key is checked to be
//! a bare public key so it can never name a path outside the store.

use crate::error::{IoContext, Result};
use crate::observed::StreamUsage;
use crate::store::atomic;
use std::path::{Path, PathBuf};

fn account_dir(store_dir: &Path, account: &str) -> Option<PathBuf> {
    let safe = account.len() == 56
        && account.starts_with('A')
        && account.bytes().all(|b| b.is_ascii_alphanumeric());
    safe.then(|| jetstream(store_dir).join(account))
}

fn jetstream(store_dir: &Path) -> PathBuf {
    store_dir.join("jetstream")
}

/// `<store>/jetstream/<account>/streams/`.
pub fn streams_dir(store_dir: &Path, account: &str) -> PathBuf {
    jetstream(store_dir).join(account).join("streams")
}

/// `<store>/jetstream/<account>/streams/<stream>/`.
pub fn stream_dir(store_dir: &Path, account: &str, stream: &str) -> PathBuf {
    streams_dir(store_dir, account).join(stream)
}

/// Where a restore stages an account's streams before renaming them into place (beside its
/// `streams/`, so the renames stay on one filesystem).
pub fn staging_dir(store_dir: &Path, account: &str) -> PathBuf {
    jetstream(store_dir).join(account).join(".cotal-restore")
}

/// The names of the store's account folders (empty when it has none yet): an observation of
/// thousands of spaces looks for the streams of only the accounts listed.
pub fn account_names(store_dir: &Path) -> Result<std::collections::BTreeSet<String>> {
    let js = jetstream(store_dir);
    let entries = match std::fs::read_dir(&js) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        other => other.at(&js)?,
    };
    let mut names = std::collections::BTreeSet::new();
    for entry in entries {
        names.insert(entry.at(&js)?.file_name().to_string_lossy().into_owned());
    }
    Ok(names)
}

/// Every account folder of the store with its stream folders, in name order.
pub fn list_store(store_dir: &Path) -> Result<std::collections::BTreeMap<String, Vec<String>>> {
    let js = jetstream(store_dir);
    let mut out = std::collections::BTreeMap::new();
    let entries = match std::fs::read_dir(&js) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        other => other.at(&js)?,
    };
    for entry in entries.flatten() {
        if !entry.file_type().at(entry.path())?.is_dir() {
            continue;
        }
        let account = entry.file_name().to_string_lossy().into_owned();
        let streams = streams_dir(store_dir, &account);
        let mut names: Vec<String> = match std::fs::read_dir(&streams) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            other => other
                .at(&streams)?
                .flatten()
                .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect(),
        };
        names.sort();
        out.insert(account, names);
    }
    Ok(out)
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
    // nats-server may be deleting the folder while it is read (a purge on another node of the
    // cluster): what vanished under the walk is not there.
    let gone = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    for entry in entries {
        let entry = match entry {
            Err(e) if gone(&e) => break,
            other => other.at(&streams_dir)?,
        };
        match entry.file_type() {
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(crate::error::Error::io(entry.path(), e)),
            Ok(t) if !t.is_dir() => continue,
            Ok(_) => {}
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
