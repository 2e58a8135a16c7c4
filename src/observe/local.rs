//! What the root's files say of each space: its folder, its users' ledger, its stored streams
//! (`jetstream_dir`), read through the folder cache; and a store laid out by another tool.

use super::*;

/// A node's JetStream store on this machine.
pub(super) struct LocalStore {
    pub(super) dir: std::path::PathBuf,
    /// The account folders it holds, when listed.
    pub(super) accounts: Option<std::collections::BTreeSet<String>>,
}

/// What [`local_files`] may rely on: what the folders said last, and (for a caller that saves
/// what is read) the reference their stamps are taken against.
#[derive(Clone, Copy)]
pub(super) struct Folders<'a> {
    pub(super) cache: Option<&'a folder_cache::Loaded>,
    pub(super) reference: Option<&'a folder_cache::Reference>,
}

/// What [`local_files`] did with a space's folder: whether the cache vouched for it, and its
/// entry for the next observation's cache (when stamped and read whole, or vouched for).
pub(super) struct FolderRead {
    pub(super) vouched: bool,
    pub(super) entry: Option<folder_cache::Entry>,
}

/// What the root's own files say of one space: its $SYS creds and ledger, its protection
/// record, its live processes, its revoked users (its streams on disk: [`stored_streams`]);
/// the folder's facts from the cache when it vouches for them, else read. Reads only, and
/// nothing the live figures bring: safe to run for many spaces at once, and while the broker
/// is asked for them.
pub(super) fn local_files(
    root: &Root,
    name: &SpaceName,
    space: &mut crate::observed::ObservedSpace,
    now: i64,
    memo: &SignatureMemo,
    folders: Folders,
) -> Result<FolderRead> {
    use crate::store::paths::SpaceFile;
    let dir = root.space_dir(name);
    if let Some(entry) = folders
        .cache
        .and_then(|c| c.vouched(&dir, name, &space.account_pub))
    {
        // A cached folder holds no pidfile, no member users and no move.
        set_folder_facts(space, entry.facts_at(now));
        space.live_processes = Vec::new();
        space.relocation = None;
        set_ledger(space, users::Ledger::empty(&space.account_pub));
        return Ok(FolderRead {
            vouched: true,
            entry: folders.reference.map(|_| entry),
        });
    }
    // Stamped before it is listed and its files read (for a caller that saves what it read).
    let dir_stamp = folders
        .reference
        .and_then(|r| folder_cache::stamp_dir(&dir, r));
    // One listing of the folder; only the files it holds are opened.
    let listing = space_dir::listing_of(dir)?;
    let stamps = dir_stamp.and_then(|d| folder_cache::stamp_files(d, &listing));
    let (facts, whole) = space_dir::folder_facts(&listing, &space.account_pub, now, memo);
    set_folder_facts(space, facts.clone());
    space.live_processes = space_dir::live_pids_listed(&listing)?;
    // Fail closed: a record that cannot be read is a move whose state is unknown.
    if listing.has(SpaceFile::Relocation) {
        space.relocation = match crate::store::relocation::load(root, name, &space.account_pub) {
            Ok(r) => r,
            Err(e) => Some(crate::adopt::relocation::Relocation::unreadable(
                &space.account_pub,
                &e.to_string(),
            )),
        };
    }
    let ledger = if listing.has(SpaceFile::Users) {
        users::load(root, name, &space.account_pub)?
    } else {
        users::Ledger::empty(&space.account_pub)
    };
    set_ledger(space, ledger);
    Ok(FolderRead {
        vouched: false,
        entry: stamps.filter(|_| whole).map(|stamps| folder_cache::Entry {
            space: name.clone(),
            account: space.account_pub.clone(),
            stamps,
            facts,
        }),
    })
}

/// What a space's folder says of its `$SYS` users and its protection, on the space.
pub(super) fn set_folder_facts(
    space: &mut crate::observed::ObservedSpace,
    facts: space_dir::FolderFacts,
) {
    space.sys_creds_present = facts.sys_creds_present;
    space.sys_users = facts.sys_users;
    space.sys_issued = facts.sys_issued;
    space.protect_recorded = facts.protect_recorded;
    space.suspension_recorded = facts.suspension_recorded;
}

/// The member users `ledger` records (unrevoked, unexpired), and its revocations, on the space.
pub(super) fn set_ledger(space: &mut crate::observed::ObservedSpace, ledger: users::Ledger) {
    space.member_users = ledger
        .minted
        .iter()
        .filter(|m| !ledger.is_revoked(&m.key, m.issued_at))
        .filter(|m| m.expires_at.is_none_or(|t| t > crate::clock::now()))
        .filter_map(|m| {
            m.member
                .as_ref()
                .map(|mark| crate::space::members::MemberUser {
                    principal: mark.principal.clone(),
                    key: m.key.clone(),
                    grant: mark.grant.clone(),
                    issued_at: m.issued_at,
                    read: mark.read.clone(),
                    post: mark.post.clone(),
                    account: m.account.clone(),
                })
        })
        .collect();
    // The users the ledger records that still connect (not revoked, not expired) and match.
    let in_force = |matches: &dyn Fn(&users::Minted) -> bool| -> Vec<crate::observed::LedgerUser> {
        ledger
            .minted
            .iter()
            .filter(|m| matches(m))
            .filter(|m| !ledger.is_revoked(&m.key, m.issued_at))
            .filter(|m| m.expires_at.is_none_or(|t| t > crate::clock::now()))
            .map(|m| crate::observed::LedgerUser {
                name: m.name.clone(),
                key: m.key.clone(),
                issued_at: m.issued_at,
            })
            .collect()
    };
    space.retired_users = in_force(&|m| {
        m.profile == crate::space::permissions::Profile::Member
            && m.member.is_none()
            && m.account.is_none()
    });
    space.unguarded_owners =
        in_force(&|m| m.profile == crate::space::permissions::Profile::Admin && !m.owner_guard);
    // Each revocation goes to the account its user lives in: a side account's users' to it
    // (with `*`, every user of the space), the others' to the space's account.
    let in_side: std::collections::BTreeMap<&str, &str> = ledger
        .minted
        .iter()
        .filter_map(|m| m.account.as_deref().map(|a| (m.key.as_str(), a)))
        .collect();
    space.side_revoked = Default::default();
    for (key, at) in &ledger.revoked {
        match in_side.get(key.as_str()) {
            Some(side) => {
                space
                    .side_revoked
                    .entry(side.to_string())
                    .or_default()
                    .insert(key.clone(), *at);
            }
            None if key == "*" => {
                for side in in_side.values() {
                    space
                        .side_revoked
                        .entry(side.to_string())
                        .or_default()
                        .insert(key.clone(), *at);
                }
            }
            None => {}
        }
    }
    space.revoked = ledger
        .revoked
        .into_iter()
        .filter(|(key, _)| !in_side.contains_key(key.as_str()))
        .collect();
    if !space.kept_claims.is_empty() {
        // Revocations an adopted account kept are not cotal's: only its own ledger's count,
        // each as the ledger records it once the JWT refuses at least that much.
        let jwt = std::mem::take(&mut space.revocations);
        space.revocations = space
            .revoked
            .iter()
            .filter(|(key, at)| jwt.get(*key).is_some_and(|t| t >= *at))
            .map(|(k, t)| (k.clone(), *t))
            .collect();
    }
}

/// The streams a space's store folders hold, when the broker does not report them: it is
/// stopped, or the space is not in use. Runs after the live figures (which say whether the
/// broker reported the space's streams).
pub(super) fn stored_streams(
    space: &mut crate::observed::ObservedSpace,
    stopped: bool,
    stores: &[LocalStore],
) -> Result<()> {
    // An archived space is not loaded, so the broker does not report it (unless a return
    // rolled back left its streams running), and a suspended one brought back by a reload is
    // loaded but not in use (nats-server recovers an account's streams when a client first
    // uses it): their data is what their store folders hold.
    let unused = (space.archived.is_some() || space.limits.is_suspended())
        && (space.usage.source != UsageSource::Live || space.usage.streams.is_empty());
    if stopped || unused {
        space.usage.source = UsageSource::Store;
        // Every node's store: a stream of one replica lives on one node only.
        for store in stores {
            if store
                .accounts
                .as_ref()
                .is_some_and(|a| !a.contains(&space.account_pub))
            {
                continue;
            }
            for s in jetstream_dir::streams(&store.dir, &space.account_pub)? {
                if !space.usage.streams.iter().any(|k| k.name == s.name) {
                    space.usage.streams.push(s);
                }
            }
        }
    }
    Ok(())
}

/// The promoted config of the other layout, if the root holds one: a single server's
/// `.cotal/auth/server.conf` while `cotal.toml` declares a cluster, or a cluster node's config
/// while it does not.
pub(super) fn layout_conflict(root: &Root, desired: &Desired) -> Result<Option<String>> {
    if desired.topology.is_cluster() {
        let single = &root.lone_node_files();
        return Ok(server_conf::read(single)?.map(|_| {
            format!(
                "cotal.toml declares a [cluster], but this root runs as one server: its config is {} and its streams are in its store",
                single.conf.display()
            )
        }));
    }
    for name in root.node_folders() {
        let node = root.node_files(&name, None);
        if server_conf::read(&node)?.is_some() {
            return Ok(Some(format!(
                "cotal.toml declares no [cluster], but this root runs as a cluster: node {name}'s config is {} (every node's is in .cotal/node.NAME/)",
                node.conf.display()
            )));
        }
    }
    Ok(None)
}
