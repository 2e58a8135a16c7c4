//! `cotal root backup DIR` and `cotal root restore DIR`: the root's trust material and records,
//! so a lost broker host is not every tenant's credentials lost with it.
//!
//! What is kept: `cotal.toml`, `.cotal/auth/` (the broker record with the operator, signing and
//! system seeds; every account record with its seeds; the promoted config and the generation),
//! every space folder (protection, users and $SYS ledgers, $SYS creds), the audit and the state.
//! Not kept: the JetStream store (data is backed up per space, `cotal space backup`), the lock,
//! the pidfile and the log. The artifact is a folder (0700, files 0600) with `manifest.json`
//! (format, time, tool, operator public key, generation, and the sha256 and size of every file),
//! assembled under a temporary name and renamed into place.
//!
//! Invariants: a backup is taken under the root's lock with no apply interrupted, into a path
//! that does not exist, below a folder no other user can write; a restore verifies every
//! checksum before it writes, writes only into a root that holds no `.cotal/` yet, and assembles
//! `.cotal/` under a temporary name before renaming it into place. The manifest is not signed
//! (see docs/guide/backup.md, "The root itself"): it catches damage, not a deliberate edit.

use crate::diagnostic::Diagnostic;
use crate::error::{Error, IoContext, Result};
use crate::store::{Root, atomic};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The artifact's format.
pub const FORMAT: u32 = 1;
const MANIFEST: &str = "manifest.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    pub created_at: String,
    pub tool: String,
    /// The operator's public key: which broker's trust this is.
    pub operator: String,
    pub generation: u64,
    pub files: Vec<Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Relative to the root (`cotal.toml`, `.cotal/auth/broker.json`, …).
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
    /// The mode it was backed up with, for people: a restore gives each file cotal's own mode
    /// (0600, 0644 for `cotal.toml` and state exports), never the archive's.
    pub mode: u32,
}

/// The files of the root a backup holds, relative to the root, in a stable order.
fn kept_files(root: &Root) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let base = root.dir();
    let rel = |p: &Path| {
        p.strip_prefix(base)
            .map(|r| r.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    for f in [root.desired_file(), root.audit_log(), root.state_file()] {
        if std::fs::symlink_metadata(&f).is_ok_and(|m| m.is_file()) {
            out.push(rel(&f));
        }
    }
    let mut dirs = vec![root.auth_dir()];
    for entry in std::fs::read_dir(root.state_dir())
        .at(root.state_dir())?
        .flatten()
    {
        if entry.file_name().to_string_lossy().starts_with("space.") {
            dirs.push(entry.path());
        }
    }
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let kind = entry.file_type().at(entry.path())?;
            // Temp files of an interrupted write and the previous config are not state.
            if name.starts_with(".cotal-tmp.") || name.ends_with(".next") || name.ends_with(".pid")
            {
                continue;
            }
            if kind.is_file() {
                out.push(rel(&entry.path()));
            } else {
                return Err(Error::refused(format!(
                    "{} is {}: a root backup holds regular files only",
                    entry.path().display(),
                    atomic::kind_of(&kind)
                )));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Refuse a destination another user could tamper with: its parent must not be writable by
/// group or others (unless sticky and ours), and nothing may exist at the path.
fn check_destination(dir: &Path) -> Result<()> {
    if std::fs::symlink_metadata(dir).is_ok() {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "{} already exists (or is a link); a root backup is written into a new folder only.",
                dir.display()
            ))
            .next("choose a new path"),
        ));
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let meta = std::fs::metadata(&parent).at(&parent)?;
    let mode = meta.permissions().mode();
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "{} is writable by other users (mode {:o}): the seeds of every tenant would be written where someone else can swap or read them.",
                parent.display(),
                mode & 0o7777
            ))
            .next("back up into a folder only you can write (for example a 0700 folder)"),
        ));
    }
    Ok(())
}

/// Back the root up into `dir`. The caller holds the lock and has checked that no apply is
/// interrupted.
pub fn backup(root: &Root, dir: &Path, operator: &str, generation: u64) -> Result<Manifest> {
    check_destination(dir)?;
    let files = kept_files(root)?;
    let partial = crate::store::partial_copy::beside(dir, "root-backup");
    crate::store::partial_copy::sweep(root)?;
    let _ = atomic::remove_tree(&partial);
    crate::store::partial_copy::begin(root, &partial)?;
    let result = (|| -> Result<Manifest> {
        atomic::ensure_dir(&partial, atomic::PRIVATE_DIR)?;
        let mut entries = Vec::new();
        for rel in &files {
            let to = partial.join("files").join(rel);
            atomic::ensure_dir(
                to.parent().expect("a file has a folder"),
                atomic::PRIVATE_DIR,
            )?;
            let (sha256, bytes) = atomic::copy_file(&root.dir().join(rel), &to, atomic::SECRET)?;
            crate::fault::point(crate::fault::Point::MidBackupCopy);
            entries.push(Entry {
                path: rel.clone(),
                sha256,
                bytes,
                mode: mode_of(rel),
            });
        }
        let manifest = Manifest {
            format: FORMAT,
            created_at: crate::clock::timestamp(),
            tool: format!("cotal {}", env!("CARGO_PKG_VERSION")),
            operator: operator.to_string(),
            generation,
            files: entries,
        };
        let mut bytes = serde_json::to_vec_pretty(&manifest).expect("the manifest serializes");
        bytes.push(b'\n');
        atomic::write(&partial.join(MANIFEST), &bytes, atomic::SECRET)?;
        Ok(manifest)
    })();
    let result = match result.and_then(|m| atomic::rename(&partial, dir).map(|_| m)) {
        Ok(m) => Ok(m),
        Err(e) => {
            let _ = atomic::remove_tree(&partial);
            Err(e)
        }
    };
    // A failure to forget the record never hides the backup's own error (the next backup
    // sweeps what the record names).
    let ended = crate::store::partial_copy::end(root);
    let manifest = result?;
    ended?;
    Ok(manifest)
}

/// Read and verify an artifact: the manifest parses, every path is safe, every file is there
/// (regular, not a link) with its size and checksum, and nothing else is.
pub fn verify(dir: &Path) -> Result<Manifest> {
    let refuse = |why: String| {
        Error::refused(
            Diagnostic::new(format!("{why}."))
                .blast("none, nothing was written.")
                .next("use an intact root backup"),
        )
    };
    let bytes = crate::backup::manifest_bytes(&dir.join(MANIFEST)).map_err(refuse)?;
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
        refuse(format!(
            "{}: not a cotal root backup manifest: {e}",
            dir.display()
        ))
    })?;
    if manifest.format != FORMAT {
        return Err(refuse(format!(
            "{}: format {} is not {FORMAT}",
            dir.display(),
            manifest.format
        )));
    }
    let mut listed = Vec::new();
    for f in &manifest.files {
        let safe = !f.path.is_empty()
            && !f.path.starts_with('/')
            && f.path
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != "..")
            && (f.path == "cotal.toml" || f.path.starts_with(".cotal/"));
        if !safe {
            return Err(refuse(format!("unsafe path {:?} in the manifest", f.path)));
        }
        let path = dir.join("files").join(&f.path);
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|_| refuse(format!("{} is missing", path.display())))?;
        if !meta.is_file() || meta.len() != f.bytes {
            return Err(refuse(format!(
                "{} is not the regular file of {} bytes the manifest lists",
                path.display(),
                f.bytes
            )));
        }
        let (sha256, _) = atomic::hash_file(&path)?;
        if sha256 != f.sha256 {
            return Err(refuse(format!(
                "{} does not match its checksum",
                path.display()
            )));
        }
        listed.push(f.path.clone());
    }
    let mut found = Vec::new();
    list(&dir.join("files"), "", &mut found).map_err(|e| refuse(e.to_string()))?;
    listed.sort();
    found.sort();
    if listed != found {
        return Err(refuse(format!(
            "{} holds files the manifest does not list, or lacks some",
            dir.display()
        )));
    }
    if !listed.iter().any(|p| p == ".cotal/auth/broker.json") {
        return Err(refuse(format!("{} holds no broker record", dir.display())));
    }
    Ok(manifest)
}

fn list(dir: &Path, rel: &str, out: &mut Vec<String>) -> Result<()> {
    for entry in std::fs::read_dir(dir).at(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let child = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let kind = entry.file_type().at(entry.path())?;
        if kind.is_dir() {
            list(&entry.path(), &child, out)?;
        } else if kind.is_file() {
            out.push(child);
        } else {
            return Err(Error::refused(format!(
                "{} is {}: links are refused, never followed",
                entry.path().display(),
                atomic::kind_of(&kind)
            )));
        }
    }
    Ok(())
}

/// The mode cotal gives a file of a root (relative to it): `cotal.toml` and state exports
/// are readable, everything else of `.cotal/` is a secret (0600).
fn mode_of(rel: &str) -> u32 {
    if rel == "cotal.toml" || rel.ends_with("state.json") {
        atomic::PUBLIC
    } else {
        atomic::SECRET
    }
}

/// Restore a verified artifact into `root`, which holds no `.cotal/` yet. `cotal.toml` is
/// written when the root has none (an existing one is kept: it is the operator's).
pub fn restore(root: &Root, dir: &Path) -> Result<Manifest> {
    let manifest = verify(dir)?;
    if std::fs::symlink_metadata(root.state_dir()).is_ok() {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "{} already exists: a root backup is restored only into a root that holds nothing yet (it would replace the trust of the tenants there).",
                root.state_dir().display()
            ))
            .blast("none, nothing was written.")
            .next("restore into a new, empty folder (`cotal --root NEW root restore DIR`)"),
        ));
    }
    let staging = root.dir().join(".cotal.cotal-partial");
    let _ = atomic::remove_tree(&staging);
    let result = (|| -> Result<()> {
        atomic::ensure_dir(&staging, atomic::PRIVATE_DIR)?;
        for f in manifest.files.iter().filter(|f| f.path != "cotal.toml") {
            let rel = f.path.strip_prefix(".cotal/").expect("checked by verify");
            let to = staging.join(rel);
            atomic::ensure_dir(
                to.parent().expect("a file has a folder"),
                atomic::PRIVATE_DIR,
            )?;
            // The mode is cotal's for that file, never the archive's: an unsigned manifest
            // must not make a seed world-readable or setuid.
            let (sha256, _) =
                atomic::copy_file(&dir.join("files").join(&f.path), &to, mode_of(&f.path))?;
            if sha256 != f.sha256 {
                return Err(Error::refused(format!(
                    "{} changed while it was being restored; nothing was placed",
                    f.path
                )));
            }
        }
        // The store is not in the backup: no node's data lives anywhere yet, whatever the
        // restored configs name (the first `cotal up` records the store it starts on).
        // Written in the staging folder, so the root appears with it or not at all.
        crate::store::store_home::save_in(&staging, &Default::default())?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = atomic::remove_tree(&staging);
        return Err(e);
    }
    atomic::rename(&staging, &root.state_dir())?;
    if let Some(f) = manifest.files.iter().find(|f| f.path == "cotal.toml")
        && std::fs::symlink_metadata(root.desired_file()).is_err()
    {
        atomic::copy_file(
            &dir.join("files").join(&f.path),
            &root.desired_file(),
            atomic::PUBLIC,
        )?;
    }
    // The restored audit goes on with its restoration (a failure to write it fails the
    // command: the root is in place, its audit says nothing of how it came).
    crate::credentials::audit_root(
        root,
        crate::audit::Event::RootRestored,
        format!(
            "restored from {} (operator {}, generation {}, taken {})",
            dir.display(),
            manifest.operator,
            manifest.generation,
            manifest.created_at
        ),
    )
    .map_err(|e| {
        Error::other(format!(
            "the root was restored and is in place, but its `root.restored` audit record could not be written: {e}"
        ))
    })?;
    Ok(manifest)
}
