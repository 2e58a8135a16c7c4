//! Credentials handed to people: mint a user of a space, revoke users, list what was handed
//! out (see [`crate::credentials`]). Each reads the space's account from an observation that
//! fails closed on any untrusted record, and writes under the root's lock.

use crate::credentials::{self, Issued, IssuedSystem, Request, Revoked, Target};
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::observed::ObservedSpace;
use crate::space::permissions::SysRole;
use crate::store::{Root, lock, users};
use crate::{observe, plan};
use std::time::Duration;

/// Told, before anything else happens, why `cotal.toml` could not be read when it could not (the
/// spaces on disk are used): a warning for the caller to show.
pub type Unreadable<'a> = &'a dyn Fn(&str);

/// The space and what is observed of it (its validated account), from an observation that
/// fails closed on any untrusted record.
fn observed_space(root: &Root, space: &SpaceName, unreadable: Unreadable) -> Result<ObservedSpace> {
    observed_space_in(root, space, unreadable).map(|(s, _)| s)
}

/// [`observed_space`], with the whole observation it was read from.
fn observed_space_in(
    root: &Root,
    space: &SpaceName,
    unreadable: Unreadable,
) -> Result<(ObservedSpace, crate::observed::Observed)> {
    let (desired, digest, broken) = observe::desired_for_reading(root)?;
    if let Some(why) = &broken {
        unreadable(why);
    }
    let observed = observe::observe(root, &desired, digest)?;
    plan::guard_trust(&observed)?;
    match observed.inventory.spaces.get(space) {
        Some(s) => Ok((s.clone(), observed)),
        None => Err(Error::input(format!(
            "no space {} on this root (spaces: {})",
            space.quoted(),
            observed
                .inventory
                .spaces
                .keys()
                .map(SpaceName::quoted)
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The grant cotal.toml declares for `raw` in `space`, or why there is none. A mint reads it
/// again under the root's lock ([`mint`]): the grant a user gets is the one declared when it
/// is minted, never one an apply narrowed meanwhile.
pub fn declared_member(
    root: &Root,
    space: &SpaceName,
    raw: &str,
) -> Result<(
    crate::space::members::Principal,
    crate::space::members::Grant,
)> {
    let principal = crate::space::members::Principal::parse(raw).map_err(Error::input)?;
    let file = root.desired_file();
    let text = crate::store::desired_file::read(root)?
        .ok_or_else(|| Error::input(format!("{} is missing", file.display())))?;
    let desired =
        crate::desired::parse(&text, &file.display().to_string()).map_err(Error::input)?;
    desired
        .members_of(space)
        .and_then(|m| m.get(&principal))
        .map(|grant| (principal.clone(), grant.clone()))
        .ok_or_else(|| {
            Error::input(
                crate::diagnostic::Diagnostic::new(format!(
                    "cotal.toml declares no member {principal} in space {}; nothing was minted.",
                    space.quoted()
                ))
                .next(format!(
                    "declare it (`[spaces.{}.members.\"{principal}\"]` with `read` and `post`), `cotal apply`, then mint",
                    crate::adopt::toml_key(space.as_str())
                )),
            )
        })
}

/// Mint a user of `request.space`; returns its creds (secret) and what was recorded.
pub fn mint(
    root: &Root,
    request: &Request,
    lock_timeout: Duration,
    unreadable: Unreadable,
) -> Result<Issued> {
    crate::space::permissions::valid_user_name(&request.user).map_err(Error::input)?;
    let (space, observed) = observed_space_in(root, &request.space, unreadable)?;
    refuse_unless_in_service(&request.space, &space, &observed)?;
    let lock = lock::acquire(root, &crate::operator::holder(), lock_timeout)?;
    crate::fault::point(crate::fault::Point::AfterLock);
    // A member's grant as cotal.toml declares it now, under the lock: an apply narrowing it
    // cannot slip between this read and the mint.
    let request = match &request.member {
        Some((principal, _)) => Request {
            member: Some(declared_member(
                root,
                &request.space,
                &principal.to_string(),
            )?),
            ..request.clone()
        },
        None => request.clone(),
    };
    credentials::mint(root, &lock, &space.account_pub, &request)
}

/// A user is handed out only for a space in service (the seed admits no traffic to a tenant
/// that is still provisioning): refused, naming its state and what to run, for a space an
/// interrupted apply is removing, an archived one (not served; creds handed out before work
/// again once it is brought back), one whose account the broker's config does not load yet (an
/// apply not finished), and one whose streams are not all created while its broker runs. A
/// space whose streams wait only for `cotal up` (the broker stopped) and a suspended one (the
/// creds work once it is resumed) are served.
fn refuse_unless_in_service(
    name: &SpaceName,
    space: &ObservedSpace,
    observed: &crate::observed::Observed,
) -> Result<()> {
    use crate::space::lifecycle::LifecycleState;
    let view = crate::space::lifecycle::view(name, space, observed);
    let (why, next) = match view.state {
        LifecycleState::Removing => (
            "an interrupted apply is removing it",
            "run `cotal apply` to finish the removal; a space of that name added again gets a new account",
        ),
        LifecycleState::Archived => (
            "its account is left out of the broker's config (its data is kept on disk, unserved)",
            "`cotal space resume` (or state = \"active\" in cotal.toml and `cotal apply`) brings it back, then mint; creds handed out before connect again once it is back",
        ),
        _ if !view.loaded => (
            "the broker's config does not load its account yet (an apply is not finished)",
            "run `cotal apply`, then mint",
        ),
        LifecycleState::Provisioning if observed.is_running() => (
            "its streams are not all created",
            "run `cotal up` (or `cotal apply`) to provision them, then mint; `cotal status` says what is missing",
        ),
        _ => return Ok(()),
    };
    let state = match view.state {
        LifecycleState::Removing | LifecycleState::Archived => view.state.to_string(),
        _ => "provisioning".to_string(),
    };
    Err(Error::refused(
        crate::diagnostic::Diagnostic::new(format!(
            "space {} is {state}: {why}; no user of it is handed out until it is active, and nothing was minted.",
            name.quoted()
        ))
        .tenants([name.clone()])
        .next(next),
    ))
}

/// How a client reaches a broker that requires TLS (`[broker.tls]`): the `tls://` URL of each
/// listener, the CA to trust, and whether it must present a certificate. `None` without TLS.
pub fn connect_hint(root: &Root) -> Option<String> {
    let (desired, _, _) = observe::desired_for_reading(root).ok()?;
    let tls = desired.broker.tls.as_ref()?;
    let urls: Vec<String> = desired
        .topology
        .nodes
        .iter()
        .map(|n| format!("tls://{}:{}", tls.names.first().unwrap_or(&n.host), n.port))
        .collect();
    Some(format!(
        "The broker requires TLS: connect to {}{}{}.",
        urls.join(", "),
        match &tls.ca {
            Some(ca) => format!(" trusting the CA in {} (beside cotal.toml)", ca.path),
            None => String::new(),
        },
        if tls.verify {
            ", and present a client certificate that CA signed (verify = true)"
        } else {
            ""
        }
    ))
}

/// Record the revocation of `target`'s keys of `space` (the next apply puts it in force).
pub fn revoke(
    root: &Root,
    space: &SpaceName,
    target: &Target,
    lock_timeout: Duration,
    unreadable: Unreadable,
) -> Result<Revoked> {
    let observed = observed_space(root, space, unreadable)?;
    let lock = lock::acquire(root, &crate::operator::holder(), lock_timeout)?;
    credentials::revoke(root, &lock, space, &observed.account_pub, target)
}

pub use crate::report::creds::UserState;

/// The users handed out for a space.
pub struct Listing {
    pub account: String,
    pub ledger: users::Ledger,
    /// Each minted user with where it stands, in the ledger's order.
    pub users: Vec<(users::Minted, UserState)>,
}

/// The users of `space` and where each stands at `now`.
pub fn list(root: &Root, space: &SpaceName, now: i64, unreadable: Unreadable) -> Result<Listing> {
    let observed = observed_space(root, space, unreadable)?;
    let account = observed.account_pub.clone();
    let ledger = users::load(root, space, &account)?;
    let users = ledger
        .minted
        .iter()
        .map(|m| {
            // A user is refused by the JWT of the account it lives in: a member's side account
            // (every user of a side account the plan dropped is refused), else the space's.
            let loaded = match &m.account {
                None => Some(&observed.revocations),
                Some(side) => observed
                    .sides
                    .values()
                    .find(|s| &s.account_pub == side)
                    .map(|s| &s.claims.revocations),
            };
            let refused = loaded.is_none_or(|r| {
                [m.key.as_str(), "*"]
                    .iter()
                    .any(|k| r.get(*k).is_some_and(|ts| m.issued_at <= *ts))
            });
            let state = if refused {
                UserState::Revoked
            } else if ledger.is_revoked(&m.key, m.issued_at) {
                UserState::Revoking
            } else if m.expires_at.is_some_and(|e| e <= now) {
                UserState::Expired
            } else if m
                .signed_by
                .as_ref()
                .is_some_and(|k| k != &observed.signing_pub)
            {
                UserState::OldSigningKey
            } else {
                UserState::Valid
            };
            (m.clone(), state)
        })
        .collect();
    Ok(Listing {
        account,
        ledger,
        users,
    })
}

/// Hand out a user of the system account's `role` key (`cotal creds --system monitor`).
pub fn mint_system(
    root: &Root,
    role: SysRole,
    name: &str,
    expires: Option<Duration>,
    lock_timeout: Duration,
    unreadable: Unreadable,
) -> Result<IssuedSystem> {
    crate::space::permissions::valid_user_name(name).map_err(Error::input)?;
    let (desired, digest, broken) = observe::desired_for_reading(root)?;
    if let Some(why) = &broken {
        unreadable(why);
    }
    let observed = observe::observe(root, &desired, digest)?;
    plan::guard_trust(&observed)?;
    let lock = lock::acquire(root, &crate::operator::holder(), lock_timeout)?;
    crate::apply::refuse_if_journal_open(&crate::store::journal::load(root)?, "creds --system")?;
    credentials::mint_system(root, &lock, role, name, expires)
}

/// Record the revocation of system users handed out (the next apply puts it in force).
pub fn revoke_system(
    root: &Root,
    target: &Target,
    lock_timeout: Duration,
    unreadable: Unreadable,
) -> Result<Revoked> {
    let (desired, digest, broken) = observe::desired_for_reading(root)?;
    if let Some(why) = &broken {
        unreadable(why);
    }
    let observed = observe::observe(root, &desired, digest)?;
    let trust = plan::guard_trust(&observed)?;
    let lock = lock::acquire(root, &crate::operator::holder(), lock_timeout)?;
    crate::apply::refuse_if_journal_open(
        &crate::store::journal::load(root)?,
        "creds revoke --system",
    )?;
    credentials::revoke_system(root, &lock, &trust.sys_pub, target)
}

/// The system users handed out.
pub struct SystemListing {
    pub account: String,
    pub users: Vec<(users::Minted<SysRole>, UserState)>,
}

/// The system users `cotal creds --system` handed out and where each stands at `now`.
pub fn list_system(root: &Root, now: i64, unreadable: Unreadable) -> Result<SystemListing> {
    let (desired, digest, broken) = observe::desired_for_reading(root)?;
    if let Some(why) = &broken {
        unreadable(why);
    }
    let observed = observe::observe(root, &desired, digest)?;
    let trust = plan::guard_trust(&observed)?;
    let ledger = users::load_system(root, &trust.sys_pub)?;
    let system = &observed.system;
    let refused = |revocations: &crate::trust::jwt::Revocations, key: &str, issued_at: i64| {
        revocations.get(key).is_some_and(|ts| issued_at <= *ts)
    };
    let users = ledger
        .minted
        .iter()
        .map(|m| {
            // A monitoring user is refused by the JWT of the account it lives in: the
            // monitoring account, or (handed out before it) the system account.
            let loaded = match &m.account {
                Some(_) => system
                    .monitor
                    .as_ref()
                    .map(|(_, claims)| &claims.revocations),
                None => Some(&system.revocations),
            };
            let state = if loaded.is_some_and(|r| refused(r, &m.key, m.issued_at)) {
                UserState::Revoked
            } else if refused(&ledger.revoked, &m.key, m.issued_at) {
                UserState::Revoking
            } else if m.expires_at.is_some_and(|e| e <= now) {
                UserState::Expired
            } else if m.signed_by.as_deref() != system.key(m.profile)
                || (m.account.is_none()
                    && !m.profile.in_system_account()
                    && system.monitor.is_some())
            {
                // Its key was replaced, or (a user handed out before the monitoring account)
                // the system account no longer lists it.
                UserState::OldSigningKey
            } else {
                UserState::Valid
            };
            (m.clone(), state)
        })
        .collect();
    Ok(SystemListing {
        account: trust.sys_pub.clone(),
        users,
    })
}
