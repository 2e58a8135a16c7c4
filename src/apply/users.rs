//! The users an apply mints: an ephemeral user of a space (provisioner, verifier), in memory
//! with a short expiry, and the space's long-lived $SYS creds written beside its material.

use crate::error::{Error, Result};
use crate::mint;
use crate::model::SpaceName;
use crate::permissions;
use crate::store::broker_record::{self, BrokerRecord};
use crate::store::{Root, account_record, space_dir};

/// An ephemeral user of a space (in memory, short expiry), signed by its signing key. `None`
/// when the space's record no longer holds `account`.
pub fn space_user(
    root: &Root,
    space: &SpaceName,
    account: &str,
    name: &str,
    permissions: crate::jwt::Permissions,
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
    )
    .map_err(Error::Other)?;
    Ok(Some(user.creds))
}

/// Mint and write the space's $SYS pair (needs the retained system signing seed).
pub fn write_sys_creds(
    root: &Root,
    record: &BrokerRecord,
    space: &SpaceName,
    account: &str,
) -> Result<()> {
    let Some(sys_seed) = broker_record::load_sys_seed(root)? else {
        return Ok(());
    };
    let sys = &record.sys.public;
    let observer = mint::user(
        sys,
        &sys_seed,
        "membership-observer",
        permissions::membership_observer(account),
        None,
    )
    .map_err(Error::Other)?;
    let evictor = mint::user(
        sys,
        &sys_seed,
        "connection-evictor",
        permissions::connection_evictor(),
        None,
    )
    .map_err(Error::Other)?;
    space_dir::save_sys_creds(root, space, account, &observer.creds, &evictor.creds)
}
