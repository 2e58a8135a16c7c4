//! `.cotal/space.<hex>/`: a space's local material: `lifecycle.json` (the protection last
//! applied, bound to the account it was applied to), later its $SYS creds and `membership.json`,
//! and the pidfiles of its local processes.
//!
//! Invariant: a space folder is reaped only when it belongs to the account being removed (its
//! `lifecycle.json` names that account), so a removal never deletes a re-added space's material.

use crate::error::{IoContext, Result};
use crate::model::SpaceName;
use crate::store::caches::signature_memo::SignatureMemo;
use crate::store::paths::SpaceFile;
use crate::store::record::{self, Layout, Record};
use crate::store::{Root, atomic};
use serde::{Deserialize, Serialize};

/// What the last apply recorded about a space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lifecycle {
    pub account: String,
    pub protect: bool,
    /// Set while the space is suspended (absent in records written before it was recorded,
    /// and for a space suspended before: the next apply records it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspension: Option<crate::model::Suspension>,
}

pub use crate::model::Suspension;

/// `membership.json`: the account the $SYS creds observe, and the inbox prefix their clients
/// must use (they may subscribe to no other inbox).
#[derive(Debug, Serialize, Deserialize)]
struct Membership {
    #[serde(rename = "accountId")]
    account_id: String,
    #[serde(
        rename = "inboxPrefix",
        default,
        skip_serializing_if = "String::is_empty"
    )]
    inbox_prefix: String,
}

/// The ledger of the $SYS users minted for a space (public keys, no secret), bound to its
/// account: every one not expired yet, so a suspension or removal can revoke them all, not
/// only those the creds files hold now.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SysLedger {
    account: String,
    users: Vec<LedgerEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LedgerEntry {
    key: String,
    role: crate::space::permissions::SysRole,
    issuer: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    account: String,
    #[serde(rename = "issuedAt")]
    issued_at: i64,
    #[serde(rename = "expiresAt")]
    expires_at: Option<i64>,
}

/// The files a write of the space's $SYS creds may touch, for undo.
pub fn sys_creds_files(root: &Root, space: &SpaceName) -> [std::path::PathBuf; 4] {
    [
        SpaceFile::SysUsers,
        SpaceFile::ObserverCreds,
        SpaceFile::EvictorCreds,
        SpaceFile::Membership,
    ]
    .map(|f| root.space_file(space, f))
}

/// The $SYS users ever minted for the space's `account` and not expired at `now` (from its
/// ledger; an unreadable ledger reads as empty: the creds files still name the current ones).
pub fn sys_issued(
    root: &Root,
    space: &SpaceName,
    account: &str,
    now: i64,
) -> Vec<crate::observed::SysUser> {
    issued_in(&root.space_file(space, SpaceFile::SysUsers), account, now)
}

/// [`sys_issued`] of the ledger a listing holds (none when it holds no ledger), and whether it
/// was read whole (not when reading it failed: a bad ledger, as one that parses, reads whole).
fn sys_issued_listed(
    listing: &Listing,
    account: &str,
    now: i64,
) -> (Vec<crate::observed::SysUser>, bool) {
    listing.listed(SpaceFile::SysUsers).map_or_else(
        || (Vec::new(), true),
        |path| issued_read(&path, account, now),
    )
}

/// The ledger at `path`'s users bound to `account` and not expired at `now`.
fn issued_in(path: &std::path::Path, account: &str, now: i64) -> Vec<crate::observed::SysUser> {
    issued_read(path, account, now).0
}

/// [`issued_in`], and whether the ledger was read (an unreadable one reads as empty).
fn issued_read(
    path: &std::path::Path,
    account: &str,
    now: i64,
) -> (Vec<crate::observed::SysUser>, bool) {
    match record::read::<SysLedger>(path) {
        Ok(Record::Valid(l)) if l.account == account => (
            l.users
                .into_iter()
                .filter(|u| u.expires_at.is_none_or(|e| e > now))
                .map(|u| crate::observed::SysUser {
                    role: u.role,
                    key: u.key,
                    issuer: u.issuer,
                    account: u.account,
                    issued_at: u.issued_at,
                    expires_at: u.expires_at,
                })
                .collect(),
            true,
        ),
        Ok(_) => (Vec::new(), true),
        Err(_) => (Vec::new(), false),
    }
}

/// Add `minted` to the space's ledger, dropping what expired by `now` (written before the
/// creds, so no creds exist that the ledger does not name).
fn record_sys_users(
    root: &Root,
    space: &SpaceName,
    account: &str,
    minted: &[crate::observed::SysUser],
    now: i64,
) -> Result<()> {
    let mut users: Vec<LedgerEntry> = sys_issued(root, space, account, now)
        .into_iter()
        .chain(minted.iter().cloned())
        .map(|u| LedgerEntry {
            key: u.key,
            role: u.role,
            issuer: u.issuer,
            account: u.account,
            issued_at: u.issued_at,
            expires_at: u.expires_at,
        })
        .collect();
    users.dedup_by(|a, b| a.key == b.key);
    record::write(
        &root.space_file(space, SpaceFile::SysUsers),
        &SysLedger {
            account: account.to_string(),
            users,
        },
        Layout::Pretty,
        atomic::SECRET,
    )
}

/// The $SYS user a creds text holds, as its JWT says.
fn sys_user_of(
    role: crate::space::permissions::SysRole,
    creds: &str,
    memo: &SignatureMemo,
) -> Option<crate::observed::SysUser> {
    let token = crate::trust::jwt::creds_jwt(creds)?;
    let claims = memo
        .decode_verified::<crate::trust::jwt::UserNats>(token)
        .ok()?;
    Some(crate::observed::SysUser {
        role,
        key: claims.sub,
        account: if claims.nats.issuer_account.is_empty() {
            claims.iss.clone()
        } else {
            claims.nats.issuer_account
        },
        issuer: claims.iss,
        issued_at: claims.iat,
        expires_at: claims.exp,
    })
}

/// Write the space's $SYS creds (0600): the observer's, the evictor's when minted (else any old
/// evictor creds are removed), then `membership.json` last: its presence says the set is
/// complete.
pub fn save_sys_creds(
    root: &Root,
    space: &SpaceName,
    account: &str,
    observer: &str,
    evictor: Option<&str>,
) -> Result<()> {
    use crate::space::permissions::SysRole;
    atomic::ensure_dir(&root.space_dir(space), atomic::PRIVATE_DIR)?;
    let minted: Vec<_> = [
        (SysRole::Observer, Some(observer)),
        (SysRole::Evictor, evictor),
    ]
    .into_iter()
    .filter_map(|(role, creds)| sys_user_of(role, creds?, &SignatureMemo::none()))
    .collect();
    record_sys_users(root, space, account, &minted, crate::clock::now())?;
    let file = |f: SpaceFile| root.space_file(space, f);
    atomic::write(
        &file(SpaceFile::ObserverCreds),
        observer.as_bytes(),
        atomic::SECRET,
    )?;
    match evictor {
        Some(creds) => atomic::write(
            &file(SpaceFile::EvictorCreds),
            creds.as_bytes(),
            atomic::SECRET,
        )?,
        None => {
            atomic::remove_file(&file(SpaceFile::EvictorCreds))?;
        }
    }
    record::write(
        &file(SpaceFile::Membership),
        &Membership {
            account_id: account.to_string(),
            inbox_prefix: crate::space::permissions::inbox_prefix(account),
        },
        Layout::Compact,
        atomic::SECRET,
    )
}

/// Whether the space's $SYS creds exist for `account` (its `membership.json` names that
/// account and its observer's creds are a regular file; the evictor's are optional), and the
/// $SYS users its creds files hold, as their JWTs say. Opens only the files `listing` holds,
/// and each once: a creds file that is a link, or does not decode, holds no user (the planner
/// re-mints what it does not see); an observer's creds file that is there but cannot be read
/// still counts as present, as a regular file does. `memo` spares the signature arithmetic of
/// a JWT verified before.
pub fn sys_creds(
    listing: &Listing,
    account: &str,
    memo: &SignatureMemo,
) -> (bool, Vec<crate::observed::SysUser>) {
    let (present, users, _) = sys_creds_read(listing, account, memo);
    (present, users)
}

/// [`sys_creds`], and whether every file it opened was read (an error reading one is no fact
/// to remember: [`FolderFacts`]).
fn sys_creds_read(
    listing: &Listing,
    account: &str,
    memo: &SignatureMemo,
) -> (bool, Vec<crate::observed::SysUser>, bool) {
    use crate::space::permissions::SysRole;
    if !listing.has(SpaceFile::Membership) || !listing.has(SpaceFile::ObserverCreds) {
        return (false, Vec::new(), true);
    }
    let bound = match record::read::<Membership>(&listing.path(SpaceFile::Membership)) {
        Ok(Record::Valid(m)) => m.account_id == account,
        Ok(_) => false,
        Err(_) => return (false, Vec::new(), false),
    };
    if !bound {
        return (false, Vec::new(), true);
    }
    let user = |role, bytes: &[u8]| sys_user_of(role, &String::from_utf8_lossy(bytes), memo);
    let mut users = Vec::new();
    let mut whole = true;
    let observer = listing.path(SpaceFile::ObserverCreds);
    match atomic::read_no_follow(&observer) {
        Ok(atomic::Found::File(bytes)) => users.extend(user(SysRole::Observer, &bytes)),
        Ok(atomic::Found::Absent | atomic::Found::NotRegular(_)) => {
            return (false, Vec::new(), true);
        }
        // A regular file that could not be read is there.
        Err(_) => whole = false,
    }
    if let Some(path) = listing.listed(SpaceFile::EvictorCreds) {
        match atomic::read_optional(&path) {
            Ok(Some(bytes)) => users.extend(user(SysRole::Evictor, &bytes)),
            Ok(None) => {}
            Err(_) => whole = false,
        }
    }
    (true, users, whole)
}

/// What a space's folder says of its `$SYS` users and its protection, bound to one account:
/// what the observation reads of it besides pidfiles, member users and a move (a folder that
/// holds any of those is read whole every time). Public, no secret: cached by
/// `store::caches::folder_cache`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FolderFacts {
    /// Its `$SYS` creds are written and bound to the account ([`sys_creds`]).
    pub sys_creds_present: bool,
    /// The users its `$SYS` creds hold.
    pub sys_users: Vec<crate::observed::SysUser>,
    /// The `$SYS` users its ledger names, bound to the account, unexpired when read.
    pub sys_issued: Vec<crate::observed::SysUser>,
    /// Its protection record's: protected (an unreadable record counts as protected).
    pub protect_recorded: bool,
    pub suspension_recorded: Option<Suspension>,
}

/// The files [`folder_facts`] reads, and the only ones a folder whose facts are remembered
/// (`store::caches::folder_cache`) may hold.
pub const FACT_FILES: [SpaceFile; 5] = [
    SpaceFile::Lifecycle,
    SpaceFile::ObserverCreds,
    SpaceFile::EvictorCreds,
    SpaceFile::Membership,
    SpaceFile::SysUsers,
];

/// The [`FolderFacts`] `listing`'s files give for `account` at `now`, and whether every file
/// was read (false when reading one failed, or its protection record does not parse: what
/// fails closed then is no fact to remember).
pub fn folder_facts(
    listing: &Listing,
    account: &str,
    now: i64,
    memo: &SignatureMemo,
) -> (FolderFacts, bool) {
    let (sys_creds_present, sys_users, creds_whole) = sys_creds_read(listing, account, memo);
    let (sys_issued, issued_whole) = sys_issued_listed(listing, account, now);
    // Fail closed: an unreadable protection record counts as protected (and its suspension
    // as unrecorded: the next apply writes the record whole again).
    let ((protect_recorded, suspension_recorded), lifecycle_whole) =
        match load_lifecycle_listed(listing) {
            Ok(Some(l)) if l.account == account => ((l.protect, l.suspension), true),
            Ok(_) => ((false, None), true),
            Err(_) => ((true, None), false),
        };
    (
        FolderFacts {
            sys_creds_present,
            sys_users,
            sys_issued,
            protect_recorded,
            suspension_recorded,
        },
        creds_whole && issued_whole && lifecycle_whole,
    )
}

/// The space's membership-observer creds, if written (secret). A link is never followed.
pub fn observer_creds(root: &Root, space: &SpaceName) -> Option<String> {
    atomic::read_optional(&root.space_file(space, SpaceFile::ObserverCreds))
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The protection last applied to the space, if recorded.
pub fn load_lifecycle(root: &Root, space: &SpaceName) -> Result<Option<Lifecycle>> {
    record::read_optional(&root.space_file(space, SpaceFile::Lifecycle))
}

/// [`load_lifecycle`] of the record a listing holds (none when it holds none).
pub fn load_lifecycle_listed(listing: &Listing) -> Result<Option<Lifecycle>> {
    listing
        .listed(SpaceFile::Lifecycle)
        .map_or(Ok(None), |path| record::read_optional(&path))
}

pub fn save_lifecycle(root: &Root, space: &SpaceName, lifecycle: &Lifecycle) -> Result<()> {
    atomic::ensure_dir(&root.space_dir(space), atomic::PRIVATE_DIR)?;
    record::write(
        &root.space_file(space, SpaceFile::Lifecycle),
        lifecycle,
        Layout::Compact,
        atomic::SECRET,
    )
}

/// The names in a space's folder, read once, so an observation opens only the files that are
/// there (at thousands of spaces, the opens of absent files were a large part of a plan).
/// Invariant: a name is listed whatever its type: a link or folder where a record is expected
/// still reaches the reader that refuses it.
#[derive(Debug)]
pub struct Listing {
    /// The space's folder (its path made once: at thousands of spaces, making it for every
    /// file counted).
    dir: std::path::PathBuf,
    names: std::collections::BTreeSet<std::ffi::OsString>,
}

impl Listing {
    /// Whether the folder held an entry named as `file`.
    pub fn has(&self, file: SpaceFile) -> bool {
        self.names.contains(std::ffi::OsStr::new(file.name()))
    }

    /// The path of `file` in the space's folder.
    pub fn path(&self, file: SpaceFile) -> std::path::PathBuf {
        self.dir.join(file.name())
    }

    /// The path of `file` when the folder held an entry of its name.
    pub fn listed(&self, file: SpaceFile) -> Option<std::path::PathBuf> {
        self.has(file).then(|| self.path(file))
    }

    /// The space's folder.
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Every name the folder held, in order.
    pub fn names(&self) -> impl Iterator<Item = &std::ffi::OsStr> {
        self.names.iter().map(|n| n.as_os_str())
    }
}

/// The names in the space's folder (empty when it has none).
pub fn listing(root: &Root, space: &SpaceName) -> Result<Listing> {
    listing_of(root.space_dir(space))
}

/// The names in the space's folder `dir` (empty when there is none).
pub fn listing_of(dir: std::path::PathBuf) -> Result<Listing> {
    let mut names = std::collections::BTreeSet::new();
    let entries = match std::fs::read_dir(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Listing { dir, names }),
        other => other.at(&dir)?,
    };
    for entry in entries {
        names.insert(entry.at(&dir)?.file_name());
    }
    Ok(Listing { dir, names })
}

/// Pids recorded in `*.pid` files of the space's folder that are alive.
pub fn live_pids(root: &Root, space: &SpaceName) -> Result<Vec<u32>> {
    live_pids_listed(&listing(root, space)?)
}

/// [`live_pids`] of the `*.pid` files `listing` holds.
pub fn live_pids_listed(listing: &Listing) -> Result<Vec<u32>> {
    let mut pids = Vec::new();
    for name in &listing.names {
        let path = listing.dir.join(name);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A root with one space whose `membership.json` names `account`, and the path of its
    /// observer's creds (not written).
    fn space_bound_to(account: &str) -> (tempfile::TempDir, Root, SpaceName) {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path()).unwrap();
        let space = SpaceName::parse("alpha").unwrap();
        std::fs::create_dir_all(root.space_dir(&space)).unwrap();
        record::write(
            &root.space_file(&space, SpaceFile::Membership),
            &Membership {
                account_id: account.into(),
                inbox_prefix: String::new(),
            },
            Layout::Compact,
            atomic::SECRET,
        )
        .unwrap();
        (dir, root, space)
    }

    fn creds_of_a_sys_user() -> (String, String) {
        let sys = nkeys::KeyPair::new_account();
        let user = nkeys::KeyPair::new_user();
        let mut claims = crate::trust::jwt::user_claims(
            "observer",
            &user.public_key(),
            "",
            Default::default(),
            1,
            None,
        );
        let token = crate::trust::jwt::encode(&mut claims, &sys).unwrap();
        (
            crate::trust::jwt::creds_file(&token, &user.seed().unwrap()),
            user.public_key(),
        )
    }

    fn observed(root: &Root, space: &SpaceName, account: &str) -> (bool, Vec<String>) {
        let (present, users) = sys_creds(
            &listing(root, space).unwrap(),
            account,
            &SignatureMemo::none(),
        );
        (present, users.into_iter().map(|u| u.key).collect())
    }

    #[test]
    fn observer_creds_count_as_present_only_when_bound_and_a_regular_file() {
        let (_dir, root, space) = space_bound_to("ACCOUNT");
        let observer = root.space_file(&space, SpaceFile::ObserverCreds);
        assert_eq!(observed(&root, &space, "ACCOUNT"), (false, vec![]), "none");

        let (creds, key) = creds_of_a_sys_user();
        std::fs::write(&observer, &creds).unwrap();
        assert_eq!(
            observed(&root, &space, "ACCOUNT"),
            (true, vec![key.clone()])
        );
        // Bound to another account: not this account's creds.
        assert_eq!(observed(&root, &space, "OTHER"), (false, vec![]));
        // The evictor's, when listed, are read too; its garbage holds no user.
        let evictor = root.space_file(&space, SpaceFile::EvictorCreds);
        std::fs::write(&evictor, "not creds").unwrap();
        assert_eq!(observed(&root, &space, "ACCOUNT"), (true, vec![key]));
        std::fs::remove_file(&evictor).unwrap();

        // A regular file that does not decode is there (no user read from it).
        std::fs::write(&observer, "not creds").unwrap();
        assert_eq!(observed(&root, &space, "ACCOUNT"), (true, vec![]));

        // Nothing but a regular file counts: a link (never followed), a folder, a FIFO, a
        // socket (which cannot even be opened).
        std::fs::remove_file(&observer).unwrap();
        let elsewhere = root.space_dir(&space).join("elsewhere");
        std::fs::write(&elsewhere, &creds).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &observer).unwrap();
        assert_eq!(observed(&root, &space, "ACCOUNT"), (false, vec![]), "link");
        std::fs::remove_file(&observer).unwrap();
        std::fs::create_dir(&observer).unwrap();
        assert_eq!(
            observed(&root, &space, "ACCOUNT"),
            (false, vec![]),
            "folder"
        );
        std::fs::remove_dir(&observer).unwrap();
        nix::unistd::mkfifo(&observer, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert_eq!(observed(&root, &space, "ACCOUNT"), (false, vec![]), "FIFO");
        std::fs::remove_file(&observer).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(&observer).unwrap();
        assert!(
            std::fs::File::open(&observer).is_err(),
            "a socket cannot be opened: this reaches the path where the open failed"
        );
        assert_eq!(
            observed(&root, &space, "ACCOUNT"),
            (false, vec![]),
            "socket"
        );
    }
}
