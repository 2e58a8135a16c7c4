//! `.cotal/auth/account.<hex>.json`: one space's account keys and JWT.
//!
//! Invariants: records are written 0600 and atomically; a record is read back only through
//! [`load`] (one space) or the inventory (all of them), both refusing links and naming the file
//! in every error; [`remove_if_account`]
//! deletes a record only when it still holds the account it was asked to remove, so a reap can
//! never delete a re-added space's new account.

use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::store::record::{self, Layout};
use crate::store::{Root, atomic};
use crate::trust::secret::Seed;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountKeys {
    #[serde(rename = "pub")]
    pub public: String,
    pub seed: Seed,
    pub jwt: String,
    #[serde(rename = "signingSeed")]
    pub signing_seed: Seed,
    #[serde(rename = "signingPub")]
    pub signing_pub: String,
}

/// An account record as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AccountRecord {
    pub space: String,
    pub account: AccountKeys,
    /// Set while the space is archived (`state = "archived"`): the render leaves the account
    /// out. A cotal older than the archived state refuses such a record as corrupt rather
    /// than load an archived account again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub archived: Option<crate::model::Archival>,
    /// The claims of an adopted account cotal does not model, kept as they are (`cotal adopt
    /// --nsc --keep-claims`), in words: every re-issue patches only what cotal models
    /// ([`crate::mint`]), and every plan says so.
    #[serde(rename = "keepClaims", default, skip_serializing_if = "Vec::is_empty")]
    pub keep_claims: Vec<String>,
    /// The accounts at the space's side ([`crate::space::side_accounts`]): its members', its
    /// observer's and its evictor's, each its public key and JWT (their users are signed by
    /// the space's signing key or the root's scoped system keys, so no seed of theirs is kept).
    /// Preloaded with the space's account, archived and removed with it.
    #[serde(
        rename = "sideAccounts",
        default,
        skip_serializing_if = "std::collections::BTreeMap::is_empty"
    )]
    pub side_accounts: SideAccounts,
}

/// A space's side accounts, by the principal each holds.
pub type SideAccounts =
    std::collections::BTreeMap<crate::space::side_accounts::SideRole, SideAccount>;

/// One side account as stored: its key and its JWT, signed by the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideAccount {
    #[serde(rename = "pub")]
    pub public: String,
    pub jwt: String,
}

/// Parse a record's bytes.
pub fn parse(bytes: &[u8]) -> Result<AccountRecord, String> {
    record::parse(bytes)
}

/// Read one space's record (regular file only). Absent is an IO "not found" error naming the
/// file; a link is refused.
pub fn load(root: &Root, space: &SpaceName) -> Result<AccountRecord> {
    let path = root.account_record(space);
    let record: AccountRecord = record::read_optional(&path)?
        .ok_or_else(|| Error::io(&path, std::io::Error::from(std::io::ErrorKind::NotFound)))?;
    if record.space != space.as_str() {
        return Err(Error::other(format!(
            "{}: names space {:?}, not {:?}",
            path.display(),
            record.space,
            space.as_str()
        )));
    }
    Ok(record)
}

/// Atomically write a space's record (0600).
pub fn save(root: &Root, account: &AccountRecord) -> Result<()> {
    let space = SpaceName::parse(&account.space).map_err(Error::input)?;
    atomic::ensure_dir(&root.auth_dir(), atomic::PRIVATE_DIR)?;
    record::write(
        &root.account_record(&space),
        account,
        Layout::Pretty,
        atomic::SECRET,
    )
}

/// Delete a space's record if it still holds `account`. Returns true when it was removed.
pub fn remove_if_account(root: &Root, space: &SpaceName, account: &str) -> Result<bool> {
    let path = root.account_record(space);
    match record::read_optional::<AccountRecord>(&path)? {
        Some(r) if r.account.public == account => atomic::remove_file(&path),
        _ => Ok(false),
    }
}
