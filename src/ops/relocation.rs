//! A space's move to another broker, as a recorded procedure ([`crate::adopt::relocation`]): what
//! `cotal space backup` records on the source around the export of a fenced space, the receipt
//! `cotal space restore` writes on the destination, the receipts `--relocated` hands to a
//! removal, and `cotal space relocation NAME [--cancel]`. Every phase is audited before the
//! next one; each is resumable (a backup run again exports again; a removal run again finds
//! the receipt recorded).

use crate::adopt::relocation::{
    Artifact, Phase, RECEIPT_FORMAT, RECEIPT_KIND, Receipt, Relocation, StreamCount,
};
use crate::audit::Event;
use crate::backup::{Manifest, Verified};
use crate::credentials::audit;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::observed::ObservedSpace;
use crate::store::{Root, lock, relocation as record};
use std::path::Path;

/// Whether a space is fenced for a move: no client writes to it (suspended, or archived).
pub fn fenced(space: &ObservedSpace) -> bool {
    space.limits.is_suspended() || space.archived.is_some()
}

fn now() -> String {
    crate::model::stamp(crate::clock::now())
}

fn operator() -> String {
    let actor = crate::operator::actor();
    format!("{}@{}", actor.user, actor.host)
}

/// Record (or resume) the move of the fenced `space` before its export: `started`, then
/// `fenced`, each audited first (fail-closed).
pub fn begin(root: &Root, name: &SpaceName, space: &ObservedSpace) -> Result<Relocation> {
    let jwt = crate::adopt::relocation::jwt_digest(&space.jwt);
    // A record that cannot be read is started again (its phase is unknown).
    let resumed = record::load(root, name, &space.account_pub).unwrap_or(None);
    let mut moving = match resumed {
        Some(r) => r,
        None => {
            audit(
                root,
                Event::RelocationStarted,
                name,
                "a move of the space began: its export is recorded, and its removal needs the destination's receipt".into(),
            )?;
            let r = Relocation {
                account: space.account_pub.clone(),
                phase: Phase::Started,
                started_at: now(),
                by: operator(),
                fenced_jwt: jwt.clone(),
                artifact: None,
                receipt: None,
            };
            record::save(root, name, &r)?;
            r
        }
    };
    audit(
        root,
        Event::RelocationFenced,
        name,
        format!(
            "fenced: {} (its account JWT {jwt}), so nothing is written to it after the export",
            if space.archived.is_some() {
                "archived"
            } else {
                "suspended"
            }
        ),
    )?;
    // A move not exported yet reaches `fenced`; one exported already keeps its artifact until
    // a new export replaces it ([`exported`]): a backup refused or failed now loses nothing.
    if moving.artifact.is_none() {
        moving.phase = Phase::Fenced;
        moving.fenced_jwt = jwt;
        record::save(root, name, &moving)?;
    }
    Ok(moving)
}

/// The artifact of the move is written: its digest and counts recorded, audited.
pub fn exported(
    root: &Root,
    name: &SpaceName,
    mut moving: Relocation,
    dir: &Path,
    manifest: &Manifest,
) -> Result<Relocation> {
    let digest = crate::backup::manifest_digest(dir)?;
    // A new artifact: a receipt of an earlier one no longer counts.
    moving.phase = Phase::Exported;
    moving.fenced_jwt = crate::adopt::relocation::jwt_digest(
        &crate::store::account_record::load(root, name)?.account.jwt,
    );
    moving.receipt = None;
    moving.artifact = Some(Artifact {
        path: dir.display().to_string(),
        digest: digest.clone(),
        exported_at: now(),
        streams: manifest
            .streams
            .iter()
            .map(|s| StreamCount {
                name: s.name.clone(),
                messages: s.messages,
                last_seq: s.last_seq,
            })
            .collect(),
    });
    audit(
        root,
        Event::RelocationExported,
        name,
        format!(
            "exported to {} (artifact {digest}, {} streams): restore it on the destination, then remove the space here with the receipt it writes",
            dir.display(),
            manifest.streams.len()
        ),
    )?;
    record::save(root, name, &moving)?;
    Ok(moving)
}

/// The export of a move failed with `e`: audited (the record stays as it was, an earlier
/// export included, and a backup run again resumes it). A failure to audit it is the error then.
pub fn failed(root: &Root, name: &SpaceName, e: &Error) -> Result<()> {
    audit(
        root,
        Event::RelocationFailed,
        name,
        format!(
            "the export failed ({}); what was recorded of the move stands (an earlier export included); run `cotal space backup` again to export it anew",
            e.to_string().lines().next().unwrap_or_default()
        ),
    )
}

/// The receipt of a restore on this (destination) root: what it verified, written to `out`
/// (default: `relocation-receipt.json` in the space's folder).
pub fn write_receipt(
    root: &Root,
    name: &SpaceName,
    dir: &Path,
    verified: &[Verified],
    out: Option<&Path>,
) -> Result<std::path::PathBuf> {
    let (manifest, digest) = (
        crate::backup::read_manifest(dir)?,
        crate::backup::manifest_digest(dir)?,
    );
    let destination = crate::store::account_record::load(root, name)?;
    let destination_operator = match crate::store::broker_record::load(root)? {
        crate::store::broker_record::Loaded::Valid((_, trust)) => trust.operator_pub,
        _ => {
            return Err(Error::other(
                "the broker record changed while cotal read it",
            ));
        }
    };
    let receipt = Receipt {
        kind: RECEIPT_KIND.into(),
        format_version: RECEIPT_FORMAT,
        space: name.to_string(),
        source_account: manifest.account.clone(),
        artifact_digest: digest,
        destination_operator,
        destination_account: destination.account.public,
        streams: verified
            .iter()
            .map(|v| StreamCount {
                name: v.stream.clone(),
                messages: v.messages,
                last_seq: v.last_seq,
            })
            .collect(),
        verified_at: now(),
        by: operator(),
    };
    // Always in the space's folder too: a receipt is never lost with a `--receipt` path.
    record::write_receipt(&root.space_dir(name).join(RECEIPT_FILE), &receipt)?;
    let path = match out {
        Some(p) => {
            record::write_receipt(p, &receipt)?;
            p.to_path_buf()
        }
        None => root.space_dir(name).join(RECEIPT_FILE),
    };
    Ok(path)
}

/// Where the destination keeps the receipt of a restore, in the space's folder.
pub const RECEIPT_FILE: &str = "relocation-receipt.json";

/// Refuse a `--receipt` path that exists (a receipt is never written over another file),
/// before the restore places anything.
pub fn refuse_existing_receipt(out: Option<&Path>) -> Result<()> {
    match out {
        Some(p) if std::fs::symlink_metadata(p).is_ok() => Err(Error::input(
            Diagnostic::new(format!(
                "--receipt {}: the path exists; a receipt is never written over another file, and nothing was restored.",
                p.display()
            ))
            .next("pass a path that does not exist yet"),
        )),
        _ => Ok(()),
    }
}

/// The receipts `--relocated` names, read (each refused by name when it is not one).
pub fn read_receipts(paths: &[std::path::PathBuf]) -> Result<Vec<(String, Receipt)>> {
    paths.iter().map(|p| record::read_receipt(p)).collect()
}

/// `cotal space relocation NAME [--cancel]`: the space's recorded move, or (`cancel`) its end
/// without a removal (audited `relocation.failed`, under the lock).
pub fn show_or_cancel(
    root: &Root,
    raw: &str,
    cancel: bool,
    lock_timeout: std::time::Duration,
) -> Result<Option<Relocation>> {
    let name = SpaceName::parse(raw).map_err(Error::input)?;
    let record_of = || -> Result<Option<Relocation>> {
        match crate::store::account_record::load(root, &name) {
            Ok(r) => record::load(root, &name, &r.account.public),
            Err(_) => Err(Error::input(
                Diagnostic::new(format!(
                    "this root has no space {}; nothing was changed.",
                    name.quoted()
                ))
                .next("`cotal space list` lists the spaces"),
            )),
        }
    };
    if !cancel {
        return record_of();
    }
    let _lock = lock::acquire(root, &crate::operator::holder(), lock_timeout)?;
    crate::apply::refuse_if_journal_open(
        &crate::store::journal::load(root)?,
        "space relocation --cancel",
    )?;
    // A record that cannot be read is cancelled too: it is what the refusal of its removal
    // names.
    let moving = match record_of() {
        Ok(None) => return Ok(None),
        Ok(Some(m)) => m,
        Err(e) if crate::store::account_record::load(root, &name).is_ok() => {
            let account = crate::store::account_record::load(root, &name)?
                .account
                .public;
            Relocation::unreadable(&account, &e.to_string())
        }
        Err(e) => return Err(e),
    };
    audit(
        root,
        Event::RelocationFailed,
        &name,
        format!(
            "cancelled by the operator at phase {}: the space is not moving; its removal needs no receipt",
            moving.phase
        ),
    )?;
    record::remove(root, &name)?;
    Ok(Some(moving))
}
