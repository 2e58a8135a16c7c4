//! Per-space backup and restore of a preserved store (docs/design/lifecycle-model.md, "Backup and restore").
//!
//! The choice: a backup **copies the space's stream folders** out of the preserved JetStream
//! store while the broker is stopped (after the cut), and a restore copies them into the store of
//! the target account. Files are taken byte for byte, so messages, subjects, headers, timestamps
//! and sequence numbers come back exactly, with no snapshot protocol to drive (async-nats does not
//! wrap `$JS.API.STREAM.SNAPSHOT`/`RESTORE`). An isolated broker (loopback, free port, only that
//! space's trust) reads each stream's config, count and sequence range for the manifest, and after
//! a restore checks them again.
//!
//! Invariants: nothing is written to a store or an artifact before every check passed; an
//! artifact appears under its final name only when complete (`manifest.json` written last, the
//! folder renamed into place); a restore that fails its verification removes what it copied; an
//! artifact holds no trust material (no seeds, no JWTs).

use crate::broker::isolated::Isolated;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, IoContext, Result};
use crate::mint;
use crate::model::SpaceName;
use crate::observed::BrokerTrust;
use crate::space::permissions;
use crate::space::streams;
use crate::store::record::{self, Layout};
use crate::store::{Root, atomic, jetstream_dir, partial_copy};
use crate::trust::secret::Seed;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const MANIFEST: &str = "manifest.json";
/// The artifact format written and read: 2 carries a [`Commitment`]. Format 1 (before it) is
/// refused: stripping a commitment and writing format 1 would otherwise pass a rewritten
/// manifest.
pub const FORMAT: u32 = 2;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Manifest {
    pub format: u32,
    pub space: SpaceName,
    /// The account public key the data came from.
    pub account: String,
    pub tool: String,
    pub created_at: String,
    /// The operator public key the account was signed by (format 2): covered by the
    /// commitment's signature like every other field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    pub streams: Vec<StreamEntry>,
    /// The trust chain the artifact was taken under, and its signature over the rest of the
    /// manifest (seed 000 §2.3). Absent only in artifacts of format 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commitment: Option<Commitment>,
}

/// An artifact's chain commitment: the account identity key's ed25519 signature over the
/// manifest's digest (the manifest without its commitment, which names the operator and the
/// account and holds every file's sha256). Only a holder of the account's identity seed (the
/// root the data came from) can make one, so a manifest rewritten to match tampered files, or
/// to name another account or operator, is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Commitment {
    /// `sha256:` of the manifest serialized without its commitment.
    pub digest: String,
    /// The signature of `digest`'s bytes by the account identity key, base64url.
    pub signature: String,
}

impl Manifest {
    /// The digest the commitment signs: the manifest as written, without its commitment.
    fn committed_digest(&self) -> String {
        let mut bare = self.clone();
        bare.commitment = None;
        crate::trust::digest::sha256(&serde_json::to_vec(&bare).expect("a manifest serializes"))
    }

    /// Sign the manifest (naming its operator already) with the account's identity key.
    fn commit(&mut self, account_seed: &Seed) -> Result<()> {
        use base64::Engine;
        let digest = self.committed_digest();
        let key = account_seed.key_pair().map_err(Error::other)?;
        let signature = key
            .sign(digest.as_bytes())
            .map_err(|e| Error::other(format!("signing the backup's manifest: {e}")))?;
        self.commitment = Some(Commitment {
            digest,
            signature: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signature),
        });
        Ok(())
    }

    /// Check the commitment: the manifest is the one signed, by the account it names. `Err`
    /// says why not, for people.
    fn check_commitment(&self) -> std::result::Result<(), String> {
        use base64::Engine;
        let (Some(c), Some(_)) = (&self.commitment, &self.operator) else {
            return Err(match self.format {
                1 => "an artifact of format 1 carries no chain commitment, so a manifest rewritten with it could not be told from it; restore it with the cotal that wrote it, or take a new backup".into(),
                _ => "the manifest carries no chain commitment (or names no operator)".into(),
            });
        };
        let digest = self.committed_digest();
        let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&c.signature)
            .map_err(|_| "its commitment's signature is not base64url".to_string())?;
        let key = nkeys::KeyPair::from_public_key(&self.account).map_err(|_| {
            format!(
                "it names account {:?}, which is no account key",
                self.account
            )
        })?;
        if c.digest != digest || key.verify(digest.as_bytes(), &signature).is_err() {
            return Err(format!(
                "the manifest does not match its chain commitment: it was changed after account {} signed it",
                self.account
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamEntry {
    pub name: String,
    pub config: serde_json::Value,
    pub messages: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    pub files: Vec<FileEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    /// Relative to the stream's folder.
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// What the space is on this root.
pub struct Target<'a> {
    pub trust: &'a BrokerTrust,
    pub space: &'a SpaceName,
    pub account: &'a str,
    pub jwt: &'a str,
    pub signing_seed: &'a Seed,
    /// The account's identity seed: it signs the artifact's chain commitment.
    pub account_seed: &'a Seed,
    pub store_dir: &'a Path,
}

/// The streams and buckets a backup leaves out for a space with token `t`, as the original's
/// backup classes do: the ephemeral buckets (presence, membership, delivery, manager), and the
/// artifact store with its two index buckets. Provisioning creates them empty on a restore.
pub fn not_carried(t: &str) -> Vec<String> {
    streams::expected(t, None)
        .into_iter()
        .filter(|e| !e.backed_up())
        .map(|e| e.stream_name())
        .collect()
}

/// The streams a backup carries for a space with token `t`.
pub fn backed_up(t: &str) -> Vec<String> {
    streams::expected(t, None)
        .into_iter()
        .filter(|e| e.backed_up())
        .map(|e| e.stream_name())
        .collect()
}

/// Partition the store's streams (account folder -> stream folders) across the tenants
/// (account -> space). Pure. Refuses any stream under an account that is no tenant.
pub fn partition(
    listing: &BTreeMap<String, Vec<String>>,
    tenants: &BTreeMap<String, SpaceName>,
) -> Result<BTreeMap<SpaceName, Vec<String>>, String> {
    let mut out = BTreeMap::new();
    let mut orphans = Vec::new();
    for (account, names) in listing {
        match tenants.get(account) {
            Some(space) => {
                out.insert(space.clone(), names.clone());
            }
            None if names.is_empty() => {}
            None => orphans.push(format!("{} (under account {account})", names.join(", "))),
        }
    }
    if orphans.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "the store holds streams that belong to no tenant of this root: {}; the store does not match the inventory, so no per-space artifact is consistent",
            orphans.join("; ")
        ))
    }
}

fn reader_creds(target: &Target) -> Result<String> {
    mint::user(
        target.account,
        target.signing_seed,
        "cotal-backup-reader",
        permissions::reader(),
        Some(permissions::EPHEMERAL),
        mint::issue_floor(target.jwt),
    )
    .map(|u| u.creds)
    .map_err(Error::other)
}

/// Ask an isolated broker for each stream's state.
fn read_states(
    root: &Root,
    target: &Target,
    names: &[String],
) -> Result<BTreeMap<String, Option<crate::broker::live::StreamState>>> {
    let isolated = Isolated::start(
        root,
        target.trust,
        target.space,
        target.account,
        target.jwt,
        target.store_dir,
    )?;
    let creds = reader_creds(target)?;
    let states = isolated.nats.stream_infos(&creds, names)?;
    drop(isolated);
    Ok(states.into_iter().collect())
}

/// Back up a space's streams into `dir`, which must not exist.
pub fn backup(
    root: &Root,
    target: &Target,
    tenants: &BTreeMap<String, SpaceName>,
    dir: &Path,
) -> Result<Manifest> {
    // Anything at the path, a dangling link included, is refused: the artifact is renamed into
    // place, never written through a link.
    if std::fs::symlink_metadata(dir).is_ok() {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "{} already exists (or is a link); a backup never writes into an existing path.",
                dir.display()
            ))
            .next("choose a new folder, or move the old one aside"),
        ));
    }
    let listing = jetstream_dir::list_store(target.store_dir)?;
    partition(&listing, tenants).map_err(|e| {
        Error::refused(
            Diagnostic::new(format!("{e}."))
                .next("find where those streams came from before taking a per-space backup"),
        )
    })?;
    let present = listing.get(target.account).cloned().unwrap_or_default();
    let wanted = backed_up(&target.space.token());
    // The space's folder holds its stream list and nothing else (seed 000 §2.3): a stream
    // outside it would be left out of the artifact without a word.
    let known: Vec<String> = streams::expected(&target.space.token(), None)
        .iter()
        .map(streams::Expected::stream_name)
        .collect();
    let foreign: Vec<&String> = present.iter().filter(|n| !known.contains(n)).collect();
    if !foreign.is_empty() {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "{}'s store folder holds stream(s) outside its stream list: {}; a space backup carries only the space's own streams, so the artifact would not hold them.",
                target.space.quoted(),
                foreign.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ))
            .blast("none, nothing was written.")
            .next("back those streams up with a NATS client (`nats stream backup`, the broker running): a space backup does not carry a tenant's own streams, and refuses rather than leave them out"),
        ));
    }
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|n| {
            !present.contains(n)
                || !jetstream_dir::stream_dir(target.store_dir, target.account, n)
                    .join("meta.inf")
                    .is_file()
        })
        .collect();
    if !missing.is_empty() {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "{} is not complete in the store: missing {}.",
                target.space.quoted(),
                missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
            ))
            .next("start the broker (`cotal up`) so provisioning completes it, then take the cut again"),
        ));
    }
    let states = read_states(root, target, &wanted)?;

    // Everything is checked: write the artifact under a temporary name, then rename it.
    let partial = partial_copy::beside(dir, "backup");
    partial_copy::sweep(root)?;
    let _ = atomic::remove_tree(&partial);
    partial_copy::begin(root, &partial)?;
    let result = (|| -> Result<Manifest> {
        atomic::ensure_dir(&partial.join("streams"), atomic::PRIVATE_DIR)?;
        let mut entries = Vec::new();
        for name in &wanted {
            let state = states.get(name).cloned().flatten().ok_or_else(|| {
                Error::refused(
                    Diagnostic::new(format!(
                        "the isolated broker does not load stream {name}; the store may be damaged."
                    ))
                    .next("look at .cotal/maintenance/isolated.log"),
                )
            })?;
            let files = copy_tree(
                &jetstream_dir::stream_dir(target.store_dir, target.account, name),
                &partial.join("streams").join(name),
            )?;
            crate::fault::point(crate::fault::Point::MidBackupCopy);
            entries.push(StreamEntry {
                name: name.clone(),
                config: state.config,
                messages: state.messages,
                first_seq: state.first_seq,
                last_seq: state.last_seq,
                files,
            });
        }
        let mut manifest = Manifest {
            format: FORMAT,
            space: target.space.clone(),
            account: target.account.to_string(),
            tool: format!("cotal {}", env!("CARGO_PKG_VERSION")),
            created_at: crate::clock::timestamp(),
            operator: Some(target.trust.operator_pub.clone()),
            streams: entries,
            commitment: None,
        };
        manifest.commit(target.account_seed)?;
        record::write(
            &partial.join(MANIFEST),
            &manifest,
            Layout::Pretty,
            atomic::SECRET,
        )?;
        Ok(manifest)
    })();
    let result = match result.and_then(|manifest| atomic::rename(&partial, dir).map(|_| manifest)) {
        Ok(manifest) => Ok(manifest),
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

/// Copy a folder's regular files (recursively), returning their checksums. Links are refused.
fn copy_tree(from: &Path, to: &Path) -> Result<Vec<FileEntry>> {
    let mut out = Vec::new();
    copy_into(from, to, "", &mut out)?;
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}

fn copy_into(from: &Path, to: &Path, rel: &str, out: &mut Vec<FileEntry>) -> Result<()> {
    atomic::ensure_dir(to, atomic::PRIVATE_DIR)?;
    for entry in std::fs::read_dir(from).at(from)? {
        let entry = entry.at(from)?;
        let kind = entry.file_type().at(entry.path())?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let child_rel = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        if kind.is_dir() {
            copy_into(&entry.path(), &to.join(&name), &child_rel, out)?;
        } else if kind.is_file() {
            // Streamed: a stream file of any size is copied and hashed in bounded memory.
            let (sha256, bytes) =
                atomic::copy_file(&entry.path(), &to.join(&name), atomic::SECRET)?;
            out.push(FileEntry {
                path: child_rel,
                sha256,
                bytes,
            });
        } else {
            return Err(Error::refused(format!(
                "{} is not a regular file or folder",
                entry.path().display()
            )));
        }
    }
    Ok(())
}

/// `sha256:` of an artifact's `manifest.json` (which holds the sha256 of every file): the
/// artifact's identity, as a relocation records it and its receipt names it.
pub fn manifest_digest(dir: &Path) -> Result<String> {
    manifest_bytes(&dir.join(MANIFEST))
        .map(|bytes| crate::trust::digest::sha256(&bytes))
        .map_err(|why| Error::refused(format!("{why}: the artifact is not complete")))
}

/// An artifact's manifest, parsed (not verified: [`verify_artifact`] does that).
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let path = dir.join(MANIFEST);
    let bytes = manifest_bytes(&path)
        .map_err(|why| Error::refused(format!("{why}: the artifact is not complete")))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        Error::refused(format!(
            "{}: not a cotal space manifest: {e}",
            path.display()
        ))
    })
}

/// Read and verify an artifact: the manifest parses, names `space`, and every file is there with
/// its checksum, and no stream folder is missing or extra.
pub fn verify_artifact(dir: &Path, space: &SpaceName) -> Result<Manifest> {
    check_artifact(dir, space).map_err(|e| match e {
        Error::Refused(why) => Error::refused(
            Diagnostic::new(format!(
                "{why}.\nnothing was written to the store."
            ))
            .next("use an intact artifact, or take a new backup on the source root (`cotal down --preserve-state`, `cotal space backup`)"),
        ),
        other => other,
    })
}

/// The most of an artifact's manifest cotal reads: one entry per file, far below this.
pub const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// An artifact's manifest as its bytes, read as cotal reads its state: a link or any file
/// that is not regular is refused, and so is one over [`MAX_MANIFEST_BYTES`] (a manifest that
/// is a link to `/dev/zero` is never read); the refusal names the file.
pub fn manifest_bytes(path: &Path) -> std::result::Result<Vec<u8>, String> {
    match atomic::read_no_follow_within(path, MAX_MANIFEST_BYTES) {
        Ok(atomic::Found::File(bytes)) => Ok(bytes),
        Ok(atomic::Found::Absent) => Err(format!("{} is missing", path.display())),
        Ok(atomic::Found::NotRegular(what)) => Err(format!(
            "{} is {what}, not a regular file (cotal never follows a link in an artifact)",
            path.display()
        )),
        Err(e) => Err(e.to_string()),
    }
}

fn check_artifact(dir: &Path, space: &SpaceName) -> Result<Manifest> {
    let manifest_path = dir.join(MANIFEST);
    let bytes = manifest_bytes(&manifest_path).map_err(|why| {
        Error::refused(format!(
            "{why}: it is not a complete cotal space backup (a truncated or tampered artifact?)"
        ))
    })?;
    let manifest: Manifest = serde_json::from_slice(&bytes).map_err(|e| {
        Error::refused(format!(
            "{}: not a cotal space manifest: {e}",
            manifest_path.display()
        ))
    })?;
    if !(1..=FORMAT).contains(&manifest.format) {
        return Err(Error::refused(format!(
            "{}: artifact format {} is not one this cotal reads ({FORMAT})",
            manifest_path.display(),
            manifest.format
        )));
    }
    manifest
        .check_commitment()
        .map_err(|why| Error::refused(format!("{}: {why}", manifest_path.display())))?;
    if &manifest.space != space {
        return Err(Error::refused(format!(
            "{} is a backup of space {}, not {}; a backup restores only into the space it was taken from",
            dir.display(),
            manifest.space.quoted(),
            space.quoted()
        )));
    }
    let expected = backed_up(&space.token());
    let names: Vec<String> = manifest.streams.iter().map(|s| s.name.clone()).collect();
    if names != expected {
        return Err(Error::refused(format!(
            "{}: the manifest lists streams {names:?}, a backup of {} holds {expected:?}",
            manifest_path.display(),
            space.quoted()
        )));
    }
    // Folders are real folders: a link anywhere inside the artifact is refused, never followed.
    let real_dir = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_dir());
    if !real_dir(&dir.join("streams")) {
        return Err(Error::refused(format!(
            "{}: streams/ is missing or is not a folder (a link is refused)",
            dir.display()
        )));
    }
    // `streams/` holds the listed streams' folders and nothing else.
    let mut folders = Vec::new();
    let streams_dir = dir.join("streams");
    for entry in std::fs::read_dir(&streams_dir).at(&streams_dir)? {
        let entry = entry.at(&streams_dir)?;
        folders.push(entry.file_name().to_string_lossy().into_owned());
    }
    let extra: Vec<&String> = folders.iter().filter(|f| !names.contains(f)).collect();
    if !extra.is_empty() {
        return Err(Error::refused(format!(
            "{}: streams/ holds {}, which the manifest does not list: tampered",
            dir.display(),
            extra
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    for stream in &manifest.streams {
        let base = dir.join("streams").join(&stream.name);
        if !real_dir(&base) {
            return Err(Error::refused(format!(
                "{}: stream {} is missing from the artifact, or is a link",
                dir.display(),
                stream.name
            )));
        }
        for f in &stream.files {
            if f.path
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == "..")
            {
                return Err(Error::refused(format!(
                    "{}: unsafe path {:?} in the manifest",
                    manifest_path.display(),
                    f.path
                )));
            }
            let path = base.join(&f.path);
            let meta = std::fs::symlink_metadata(&path).map_err(|_| {
                Error::refused(format!(
                    "{} is missing from the artifact (truncated?)",
                    path.display()
                ))
            })?;
            if !meta.is_file() {
                return Err(Error::refused(format!(
                    "{} is not a regular file",
                    path.display()
                )));
            }
            // The size first (a sparse or grown file is refused unread), then the checksum,
            // streamed.
            if meta.len() != f.bytes {
                return Err(Error::refused(format!(
                    "{} is {} bytes, the manifest says {}: the artifact was truncated or tampered with",
                    path.display(),
                    meta.len(),
                    f.bytes
                )));
            }
            let (sha256, len) = atomic::hash_file(&path)?;
            if len != f.bytes || sha256 != f.sha256 {
                return Err(Error::refused(format!(
                    "{} does not match its checksum in the manifest: the artifact was truncated or tampered with",
                    path.display()
                )));
            }
        }
        let mut listed: Vec<String> = stream.files.iter().map(|f| f.path.clone()).collect();
        listed.sort();
        let mut found = Vec::new();
        list_files(&base, "", &mut found)?;
        found.sort();
        if listed != found {
            return Err(Error::refused(format!(
                "{}: the stream folder {} holds files the manifest does not list (or lacks some): tampered",
                dir.display(),
                stream.name
            )));
        }
    }
    Ok(manifest)
}

fn list_files(dir: &Path, rel: &str, out: &mut Vec<String>) -> Result<()> {
    for entry in std::fs::read_dir(dir).at(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let child = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let kind = entry.file_type().at(entry.path())?;
        if kind.is_dir() {
            list_files(&entry.path(), &child, out)?;
        } else if kind.is_file() {
            out.push(child);
        } else {
            return Err(Error::refused(format!(
                "{} is {}, not a regular file or folder: links are refused, never followed",
                entry.path().display(),
                atomic::kind_of(&kind)
            )));
        }
    }
    Ok(())
}

/// How a restored stream compares with its manifest entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verified {
    pub stream: String,
    pub messages: u64,
    pub first_seq: u64,
    pub last_seq: u64,
}

/// Restore a verified artifact into the target's empty namespace, then check it on an isolated
/// broker. `relocate` allows an artifact taken from another account.
pub fn restore(root: &Root, target: &Target, dir: &Path, relocate: bool) -> Result<Vec<Verified>> {
    let manifest = verify_artifact(dir, target.space)?;
    if manifest.account != target.account && !relocate {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "{} was backed up from account {}, but {} is now account {} on this broker.",
                dir.display(),
                manifest.account,
                target.space.quoted(),
                target.account
            ))
            .next("if you are deliberately moving the space here, pass --relocate"),
        ));
    }
    if let Some(operator) = &manifest.operator
        && *operator != target.trust.operator_pub
        && !relocate
    {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "{} was taken under operator {}, and this root's broker trusts operator {}.",
                dir.display(),
                operator,
                target.trust.operator_pub
            ))
            .next("if you are deliberately moving the space to this broker, pass --relocate"),
        ));
    }
    let existing: Vec<&str> = manifest
        .streams
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| jetstream_dir::stream_dir(target.store_dir, target.account, n).exists())
        .collect();
    if !existing.is_empty() {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "{} already has {} in the store; a restore fills an empty namespace and never merges.",
                target.space.quoted(),
                existing.join(", ")
            ))
            .next("restore into a space added while the broker is stopped (before `cotal up` provisions it)"),
        ));
    }
    let staging = jetstream_dir::staging_dir(target.store_dir, target.account);
    let _ = atomic::remove_tree(&staging);
    let mut placed: Vec<PathBuf> = Vec::new();
    let result = (|| -> Result<Vec<Verified>> {
        for stream in &manifest.streams {
            let copied = copy_tree(
                &dir.join("streams").join(&stream.name),
                &staging.join(&stream.name),
            )?;
            // What is placed is what was verified: the copy's own checksums must match.
            let same = copied.len() == stream.files.len()
                && copied
                    .iter()
                    .zip(&stream.files)
                    .all(|(c, m)| c.path == m.path && c.sha256 == m.sha256 && c.bytes == m.bytes);
            if !same {
                return Err(Error::refused(format!(
                    "{}: stream {} changed while it was being restored; nothing was placed",
                    dir.display(),
                    stream.name
                )));
            }
        }
        atomic::ensure_dir(
            &jetstream_dir::streams_dir(target.store_dir, target.account),
            atomic::PRIVATE_DIR,
        )?;
        for stream in &manifest.streams {
            let dest = jetstream_dir::stream_dir(target.store_dir, target.account, &stream.name);
            atomic::rename(&staging.join(&stream.name), &dest)?;
            placed.push(dest);
        }
        let _ = atomic::remove_tree(&staging);
        let names: Vec<String> = manifest.streams.iter().map(|s| s.name.clone()).collect();
        let states = read_states(root, target, &names)?;
        let mut report = Vec::new();
        for stream in &manifest.streams {
            let state = states.get(&stream.name).cloned().flatten().ok_or_else(|| {
                Error::other(format!(
                    "stream {} did not load after the restore",
                    stream.name
                ))
            })?;
            if (state.messages, state.first_seq, state.last_seq)
                != (stream.messages, stream.first_seq, stream.last_seq)
            {
                return Err(Error::other(format!(
                    "stream {} came back with {} messages, sequences {}..{}; the manifest says {}, {}..{}",
                    stream.name,
                    state.messages,
                    state.first_seq,
                    state.last_seq,
                    stream.messages,
                    stream.first_seq,
                    stream.last_seq
                )));
            }
            report.push(Verified {
                stream: stream.name.clone(),
                messages: state.messages,
                first_seq: state.first_seq,
                last_seq: state.last_seq,
            });
        }
        Ok(report)
    })();
    if result.is_err() {
        for p in &placed {
            let _ = atomic::remove_tree(p);
        }
        let _ = atomic::remove_tree(&staging);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_refuses_streams_of_no_tenant() {
        let design = SpaceName::parse("design").unwrap();
        let tenants = BTreeMap::from([("AD".to_string(), design.clone())]);
        let listing = BTreeMap::from([
            ("AD".to_string(), vec!["CHAT_design".to_string()]),
            ("AEMPTY".to_string(), vec![]),
        ]);
        assert_eq!(
            partition(&listing, &tenants).unwrap()[&design],
            vec!["CHAT_design"]
        );
        let mut bad = listing.clone();
        bad.insert("AX".into(), vec!["CHAT_x".into()]);
        assert!(
            partition(&bad, &tenants)
                .unwrap_err()
                .contains("CHAT_x (under account AX)")
        );
    }

    #[test]
    fn a_backup_holds_the_five_streams_and_three_buckets() {
        assert_eq!(
            backed_up("d"),
            [
                "CHAT_d",
                "DM_d",
                "TASK_d",
                "INBOX_d",
                "DLV_d",
                "KV_cotal_channels_d",
                "KV_cotal_members_d",
                "KV_cotal_acl_d"
            ]
        );
    }
}
