//! The inventory: every entry of the `account.*.json` namespace in `.cotal/auth/`, each either a
//! valid record of this broker or a corrupt one.
//!
//! A record is valid only when its file name decodes to a space name and re-encodes to the same
//! key, it is a regular file, it parses, its `space` equals the decoded name, and its account JWT
//! verifies and is issued by this broker's operator for the recorded account key. Anything else
//! is corrupt, and a corrupt record makes every verb refuse: it may be a real tenant.

use crate::error::{IoContext, Result};
use crate::model::SpaceName;
use crate::observed::{BrokerTrust, CorruptRecord, Inventory, ObservedSide, ObservedSpace};
use crate::store::Root;
use crate::store::account_record;
use crate::store::caches::signature_memo::SignatureMemo;
use crate::store::paths::{ACCOUNT_PREFIX, ACCOUNT_SUFFIX};
use crate::trust::jwt::{self, AccountNats};
use rayon::prelude::*;
use std::path::Path;

/// A valid record's public parts.
pub struct ValidRecord {
    pub space: SpaceName,
    pub account_pub: String,
    pub signing_pub: String,
    pub jwt: String,
    pub limits: jwt::AccountLimits,
    pub revocations: jwt::Revocations,
    pub archived: Option<crate::model::Archival>,
    /// The claims cotal does not model its record keeps (`keepClaims`); `limits` are then
    /// only what cotal models of the JWT's ([`crate::trust::jwt::AccountLimits::modeled`]).
    pub kept_claims: Vec<String>,
    pub exports: Vec<jwt::Export>,
    pub imports: Vec<jwt::Import>,
    pub sides: std::collections::BTreeMap<crate::space::side_accounts::SideRole, ObservedSide>,
}

/// Validate one namespace entry. Pure apart from its inputs (`memo` spares the signature
/// arithmetic of a JWT verified before; every other check runs).
pub fn validate(
    path: &Path,
    file_name: &str,
    is_regular_file: bool,
    bytes: Option<&[u8]>,
    trust: &BrokerTrust,
    memo: &SignatureMemo,
) -> Result<ValidRecord, CorruptRecord> {
    let corrupt = |reason: String, foreign_issuer: Option<String>| CorruptRecord {
        file: path.to_path_buf(),
        reason,
        foreign_issuer,
    };
    let key = &file_name[ACCOUNT_PREFIX.len()..file_name.len() - ACCOUNT_SUFFIX.len()];
    let Some(space) = SpaceName::from_hex(key) else {
        return Err(corrupt(
            "file name does not decode to a space name (expected account.<lowercase hex of the name>.json)".into(),
            None,
        ));
    };
    if !is_regular_file {
        return Err(corrupt(
            "not a regular file (links are not followed)".into(),
            None,
        ));
    }
    let Some(bytes) = bytes else {
        return Err(corrupt("unreadable".into(), None));
    };
    let record = account_record::parse(bytes).map_err(|e| corrupt(e, None))?;
    if record.space != space.as_str() {
        return Err(corrupt(
            format!(
                "its space field {:?} does not match the name its file is keyed by ({:?})",
                record.space,
                space.as_str()
            ),
            None,
        ));
    }
    let claims: jwt::Claims<AccountNats> = memo
        .decode_verified(&record.account.jwt)
        .map_err(|e| corrupt(format!("account JWT: {e}"), None))?;
    if !trust.signs_accounts(&claims.iss) {
        return Err(corrupt(
            format!(
                "account JWT is signed by another operator ({}), not this broker's ({})",
                claims.iss, trust.operator_pub
            ),
            Some(claims.iss),
        ));
    }
    if claims.sub != record.account.public {
        return Err(corrupt(
            "account JWT is for a different account key than the record holds".into(),
            None,
        ));
    }
    if !claims
        .nats
        .signing_keys
        .iter()
        .any(|k| k.key() == record.account.signing_pub)
    {
        return Err(corrupt(
            "account JWT does not list the record's signing key".into(),
            None,
        ));
    }
    // Every side account: a JWT of this operator's, for the key the record names.
    let mut sides = std::collections::BTreeMap::new();
    for (role, side) in record.side_accounts {
        let side_claims: jwt::Claims<AccountNats> = memo
            .decode_verified(&side.jwt)
            .map_err(|e| corrupt(format!("the {role} side account's JWT: {e}"), None))?;
        if !trust.signs_accounts(&side_claims.iss) {
            return Err(corrupt(
                format!(
                    "the {role} side account's JWT is signed by another operator ({}), not this broker's ({})",
                    side_claims.iss, trust.operator_pub
                ),
                Some(side_claims.iss),
            ));
        }
        if side_claims.sub != side.public {
            return Err(corrupt(
                format!(
                    "the {role} side account's JWT is for a different account key than the record holds"
                ),
                None,
            ));
        }
        sides.insert(
            role,
            ObservedSide {
                account_pub: side.public,
                jwt: side.jwt,
                claims: side_claims.nats,
            },
        );
    }
    Ok(ValidRecord {
        space,
        exports: claims.nats.exports,
        imports: claims.nats.imports,
        sides,
        account_pub: record.account.public,
        signing_pub: record.account.signing_pub,
        jwt: record.account.jwt,
        limits: if record.keep_claims.is_empty() {
            claims.nats.limits
        } else {
            claims.nats.limits.modeled()
        },
        revocations: claims.nats.revocations,
        archived: record.archived,
        kept_claims: record.keep_claims,
    })
}

/// Read every entry of the namespace. IO errors on the directory itself are errors; anything
/// wrong with one entry makes that entry corrupt. Usage and process fields are left empty for
/// the observer to fill.
pub fn read(root: &Root, trust: &BrokerTrust, memo: &SignatureMemo) -> Result<Inventory> {
    let dir = root.auth_dir();
    let mut inventory = Inventory::default();
    let entries = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(inventory),
        other => other.at(&dir)?,
    };
    // List the namespace, then read and validate its records on every core: verifying
    // thousands of ed25519 signatures, and reading thousands of small files, is most of a plan's
    // time.
    let mut candidates: Vec<(std::path::PathBuf, String)> = Vec::new();
    for entry in entries {
        let entry = entry.at(&dir)?;
        let path = entry.path();
        let name = entry.file_name();
        let Some(file_name) = name.to_str() else {
            let lossy = name.to_string_lossy();
            if lossy.starts_with(ACCOUNT_PREFIX) {
                inventory.corrupt.push(CorruptRecord {
                    file: path,
                    reason: "file name is not UTF-8".into(),
                    foreign_issuer: None,
                });
            }
            continue;
        };
        if !(file_name.starts_with(ACCOUNT_PREFIX)
            && file_name.ends_with(ACCOUNT_SUFFIX)
            && file_name.len() >= ACCOUNT_PREFIX.len() + ACCOUNT_SUFFIX.len())
        {
            continue;
        }
        candidates.push((path, file_name.to_string()));
    }
    // In name order, which is the spaces' order (the hex of a name orders as the name), so the
    // records come out of the read already sorted.
    candidates.sort_unstable_by(|a, b| a.1.cmp(&b.1));
    // One result per candidate, each written in place (`None`: gone since it was listed).
    let results: Vec<Option<Result<ValidRecord, CorruptRecord>>> = candidates
        .par_iter()
        .map(|(path, name)| {
            let (is_file, bytes) = match crate::store::atomic::read_no_follow(path) {
                Ok(crate::store::atomic::Found::Absent) => return None,
                Ok(crate::store::atomic::Found::File(bytes)) => (true, Some(bytes)),
                Ok(crate::store::atomic::Found::NotRegular(_)) => (false, None),
                Err(e) => {
                    return Some(Err(CorruptRecord {
                        file: path.clone(),
                        reason: format!("unreadable: {e}"),
                        foreign_issuer: None,
                    }));
                }
            };
            Some(validate(path, name, is_file, bytes.as_deref(), trust, memo))
        })
        .collect();
    let mut valid = Vec::with_capacity(results.len());
    for result in results.into_iter().flatten() {
        match result {
            Ok(v) => valid.push(v),
            Err(c) => inventory.corrupt.push(c),
        }
    }
    // The map is built from the sorted records at once, node by node: inserted one by one in
    // the directory's order, a thousand large entries were shifted about within their nodes.
    valid.sort_by(|a, b| a.space.cmp(&b.space));
    inventory.spaces = valid
        .into_iter()
        .map(|v| {
            let mut space = ObservedSpace::recorded(
                v.account_pub,
                v.signing_pub,
                v.jwt,
                v.limits,
                v.revocations,
            );
            space.archived = v.archived;
            space.kept_claims = v.kept_claims;
            space.exports = v.exports;
            space.imports = v.imports;
            space.sides = v.sides;
            (v.space, space)
        })
        .collect();
    inventory.corrupt.sort_by(|a, b| a.file.cmp(&b.file));
    Ok(inventory)
}
