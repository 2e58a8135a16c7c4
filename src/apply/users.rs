//! The users an apply mints: an ephemeral user of a space (provisioner, verifier), in memory
//! with a short expiry, and the space's long-lived $SYS creds written beside its material.

use crate::error::{Error, Result};
use crate::mint;
use crate::model::SpaceName;
use crate::space::permissions;
use crate::store::broker_record::BrokerRecord;
use crate::store::{Root, account_record, space_dir};

/// An ephemeral user of a space (in memory, short expiry), signed by its signing key. `None`
/// when the space's record no longer holds `account`.
pub fn space_user(
    root: &Root,
    space: &SpaceName,
    account: &str,
    name: &str,
    permissions: crate::trust::jwt::Permissions,
) -> Result<Option<String>> {
    let record = match account_record::load(root, space) {
        Ok(r) if r.account.public == account => r,
        Ok(_) => return Ok(None),
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let user = mint::user(
        account,
        &record.account.signing_seed,
        name,
        permissions,
        Some(permissions::EPHEMERAL),
        mint::issue_floor(&record.account.jwt),
    )
    .map_err(Error::other)?;
    Ok(Some(user.creds))
}

/// Mint and write the space's $SYS creds with the system keys `record` keeps: the membership
/// observer, and the connection evictor when the root keeps an evictor key. Each is a user of
/// the space's side account of its role ([`crate::space::side_accounts`]), signed by the root's scoped
/// key of the role (the account's template is all it may do), named after the space's account
/// (the inbox prefix the original's services use), expiring after
/// [`permissions::SYS_CREDS_LIFETIME`]. Nothing is written when the record keeps no system key
/// (a single-space root). The caller remembers the files for undo.
pub fn write_sys_creds(
    root: &Root,
    record: &BrokerRecord,
    space: &SpaceName,
    account: &str,
) -> Result<()> {
    let Some(keys) = &record.sys.keys else {
        return Ok(());
    };
    let space_record = account_record::load(root, space)?;
    let side = |role: crate::space::side_accounts::SideRole| -> Result<(String, Option<i64>)> {
        space_record
            .side_accounts
            .get(&role)
            .map(|s| (s.public.clone(), mint::issue_floor(&s.jwt)))
            .ok_or_else(|| {
                Error::other(format!(
                    "the record of {} holds no {role} account, which its $SYS creds are users of: run `cotal apply`",
                    space.quoted()
                ))
            })
    };
    let lifetime = Some(permissions::SYS_CREDS_LIFETIME);
    let (observer_account, floor) = side(crate::space::side_accounts::SideRole::Observer)?;
    let observer = mint::scoped_user(&observer_account, &keys.observer, account, lifetime, floor)
        .map_err(Error::other)?;
    let evictor = match &keys.evictor {
        Some(seed) => {
            let (evictor_account, floor) = side(crate::space::side_accounts::SideRole::Evictor)?;
            Some(
                mint::scoped_user(&evictor_account, seed, account, lifetime, floor)
                    .map_err(Error::other)?,
            )
        }
        None => None,
    };
    space_dir::save_sys_creds(
        root,
        space,
        account,
        &observer.creds,
        evictor.as_ref().map(|e| e.creds.as_str()),
    )
}
