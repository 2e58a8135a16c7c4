//! Users of a space that an operator hands out: minting them with a profile and an expiry,
//! recording them (without secrets) in the space's ledger and the audit, and recording their
//! revocation, which the next apply loads into the account's JWT.
//!
//! Invariants: everything runs under the root's lock; a user is recorded in the ledger and the
//! audit before its creds leave this module, so no user exists that `cotal creds list` cannot
//! name; revocations are only ever added.

use crate::audit::{Event, Generations, Record as AuditRecord};
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::observed::{GenerationState, JournalState};
use crate::space::permissions::{self, Profile, SysRole};
use crate::store::users::{self, Minted};
use crate::store::{Root, account_record, audit, generation, journal, lock::Lock};
use std::time::Duration;

/// How long a user lives when the operator does not say: long enough for a working month,
/// short enough that a forgotten laptop's creds die on their own.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(30 * 24 * 3600);

/// What to mint.
#[derive(Debug, Clone)]
pub struct Request {
    pub space: SpaceName,
    pub user: String,
    pub profile: Profile,
    /// `None`: never expires.
    pub expires: Option<Duration>,
    /// A declared member (`--member`): its user carries the member's grant, not `profile`'s.
    pub member: Option<(
        crate::space::members::Principal,
        crate::space::members::Grant,
    )>,
}

/// A minted user: the creds file (secret) and what the ledger recorded.
pub struct Issued {
    pub creds: crate::trust::secret::Secret,
    pub minted: Minted,
}

/// Which users to revoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every key minted under this name.
    User(String),
    /// One user public key (minted by cotal or not).
    Key(String),
    /// Every user of the account, whoever minted it (`*`).
    All,
}

/// What a revocation recorded.
#[derive(Debug, Clone)]
pub struct Revoked {
    pub keys: Vec<String>,
    pub at: i64,
}

/// Check, under the lock, that `space` still has `account` (the one the caller observed and
/// validated), refusing while an interrupted apply is removing it.
fn check_account(root: &Root, space: &SpaceName, account: &str) -> Result<()> {
    let journal = journal::load(root)?;
    if let JournalState::Valid(j) = &journal
        && j.removals.iter().any(|r| &r.space == space)
    {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "an interrupted apply is removing space {}.",
                space.quoted()
            ))
            .next("run `cotal apply` to finish it"),
        ));
    }
    // Any other interrupted apply blocks the root too (seed 000 §3): no user is handed out or
    // revoked between two states; `cotal apply` finishes it first.
    crate::apply::refuse_if_journal_open(&journal, "creds")?;
    let record = account_record::load(root, space)?;
    if record.account.public != account {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "the record of space {} changed while cotal waited for the lock (now account {}).",
                space.quoted(),
                record.account.public
            ))
            .next("run the command again"),
        ));
    }
    Ok(())
}

/// Append one event about `space` (outside an apply) to the audit.
pub fn audit(root: &Root, event: Event, space: &SpaceName, outcome: String) -> Result<()> {
    audit_event(root, event, Some(space), outcome)
}

/// Append one event about the broker as a whole (outside an apply) to the audit.
pub fn audit_root(root: &Root, event: Event, outcome: String) -> Result<()> {
    audit_event(root, event, None, outcome)
}

/// Append one event (about `space`, or the broker's when `None`) to the audit.
fn audit_event(
    root: &Root,
    event: Event,
    space: Option<&SpaceName>,
    outcome: String,
) -> Result<()> {
    let before = match generation::load(root)? {
        GenerationState::Valid(g) => g.generation,
        _ => 0,
    };
    audit::append(
        root,
        &AuditRecord {
            time: crate::clock::timestamp(),
            event,
            space: space.cloned(),
            actor: crate::operator::actor(),
            generation: Generations {
                before,
                after: None,
            },
            plan_digest: String::new(),
            outcome,
            counts: None,
        },
    )
}

/// Mint a user of the space whose validated account is `account`. `_lock` proves the caller
/// holds the root.
pub fn mint(root: &Root, _lock: &Lock, account: &str, request: &Request) -> Result<Issued> {
    permissions::valid_user_name(&request.user).map_err(Error::input)?;
    if request.expires == Some(Duration::ZERO) {
        return Err(Error::input(
            "--expires 0 would mint creds that are already expired: give a duration (1h, 30d) or `never`",
        ));
    }
    check_account(root, &request.space, account)?;
    let record = account_record::load(root, &request.space)?;
    let mut ledger = users::load(root, &request.space, account)?;
    // nats-server refuses a JWT issued at or before a `*` revocation: the user is issued after
    // it whatever the clock says (nothing waits for the clock under the lock).
    let floor = ledger.issue_floor();
    // A member's user lives in its side account (signed by the space's signing key, which
    // that account lists); any other user in the space's account.
    let issuer_account = match &request.member {
        Some((principal, _)) => member_account(&record, &request.space, principal)?,
        None => {
            refuse_retired_profile(request.profile, &request.space)?;
            account.to_string()
        }
    };
    let user = crate::mint::user(
        &issuer_account,
        &record.account.signing_seed,
        &request.user,
        match &request.member {
            Some((principal, grant)) => {
                permissions::member_grant(&request.space.token(), principal, grant)
            }
            None => permissions::admin(&request.space.token()),
        },
        request.expires,
        floor,
    )
    .map_err(Error::other)?;
    let minted = Minted {
        name: request.user.clone(),
        key: user.key.clone(),
        profile: request.profile,
        issued_at: user.issued_at,
        expires_at: user.expires_at,
        signed_by: Some(record.account.signing_pub.clone()),
        member: request.member.as_ref().map(|(principal, grant)| {
            crate::space::members::MemberMark {
                principal: principal.to_string(),
                grant: grant.digest(),
                read: grant.read.clone(),
                post: grant.post.clone(),
            }
        }),
        owner_guard: request.member.is_none() && request.profile == Profile::Admin,
        account: (issuer_account != account).then_some(issuer_account),
    };
    ledger.minted.push(minted.clone());
    users::save(root, &request.space, &ledger)?;
    audit(
        root,
        Event::CredsMinted,
        &request.space,
        format!(
            "user {:?} ({}), profile {}, expires {}",
            minted.name,
            minted.key,
            minted.profile,
            minted
                .expires_at
                .map_or("never".into(), crate::model::stamp)
        ),
    )?;
    Ok(Issued {
        creds: crate::trust::secret::Secret::new(user.creds),
        minted,
    })
}

/// The side account of `principal` in `record` (its public key), or a refusal saying to apply
/// first: a member's users live only in its own account.
fn member_account(
    record: &account_record::AccountRecord,
    space: &SpaceName,
    principal: &crate::space::members::Principal,
) -> Result<String> {
    match record
        .side_accounts
        .get(&crate::space::side_accounts::SideRole::Member(principal.clone()))
    {
        Some(side) => Ok(side.public.clone()),
        None => Err(Error::refused(
            Diagnostic::new(format!(
                "member {principal} of space {} has no account of its own yet: its users live there, importing only its grant.",
                space.quoted()
            ))
            .blast("none, nothing was minted.")
            .next("run `cotal apply` (it makes the member's account), then mint again"),
        )),
    }
}

/// The `member` profile is retired: refused, with what to use instead.
fn refuse_retired_profile(profile: Profile, space: &SpaceName) -> Result<()> {
    if profile != Profile::Member {
        return Ok(());
    }
    Err(Error::input(
        Diagnostic::new(format!(
            "the `member` profile is retired: its users lived in the space's own account, where the broker's answers to them (a stream's acknowledgement, a direct get, a pull) could be aimed at the JetStream API or another member's channel (space {}).",
            space.quoted()
        ))
        .next(format!(
            "declare the member in cotal.toml ([spaces.{}.members.\"OWNER.ACTOR\"] with its read and post channels), run `cotal apply`, then `cotal creds {} --member OWNER.ACTOR`: its users get an account of their own",
            crate::adopt::toml_key(space.as_str()),
            space.as_str()
        ))
        .next("for the space's owner, mint `--profile admin`"),
    ))
}

/// Record a revocation for the space whose validated account is `account`; the next apply
/// re-issues the account with it. `_lock` proves the caller holds the root.
pub fn revoke(
    root: &Root,
    _lock: &Lock,
    space: &SpaceName,
    account: &str,
    target: &Target,
) -> Result<Revoked> {
    check_account(root, space, account)?;
    let mut ledger = users::load(root, space, account)?;
    let keys: Vec<String> = match target {
        Target::User(name) => {
            let keys = ledger.keys_of(name);
            if keys.is_empty() {
                return Err(Error::input(
                    Diagnostic::new(format!(
                        "no user {name:?} was minted for space {} (minted: {}).",
                        space.quoted(),
                        ledger.names()
                    ))
                    .next("to revoke a key cotal did not mint, pass --key U…"),
                ));
            }
            keys.into_iter().map(String::from).collect()
        }
        Target::Key(key) => {
            if !key.starts_with('U') || nkeys::KeyPair::from_public_key(key).is_err() {
                return Err(Error::input(format!(
                    "{key:?} is not a user public key (U… , 56 characters)"
                )));
            }
            vec![key.clone()]
        }
        Target::All => vec!["*".into()],
    };
    // The time recorded: at least every named user's recorded issue time.
    let at = ledger.record_revocation(&keys, crate::clock::now());
    users::save(root, space, &ledger)?;
    let what = match target {
        Target::User(name) => format!(
            "user {name:?} ({} key{})",
            keys.len(),
            if keys.len() == 1 { "" } else { "s" }
        ),
        Target::Key(key) => format!("key {key}"),
        Target::All => "every user of the space".into(),
    };
    audit(
        root,
        Event::CredsRevoked,
        space,
        format!("{what} revoked; the next apply loads it"),
    )?;
    Ok(Revoked { keys, at })
}

/// A system user handed out by `cotal creds --system`: the creds (secret) and what the system
/// users' ledger recorded.
pub struct IssuedSystem {
    pub creds: crate::trust::secret::Secret,
    pub minted: Minted<SysRole>,
}

/// The roles `cotal creds --system` hands out.
pub const HANDED_OUT: [SysRole; 1] = [SysRole::Monitor];

/// Mint a user of the system account's `role` key (only [`HANDED_OUT`] roles), named `name`,
/// recorded in the system users' ledger and the audit before its creds are returned. `_lock`
/// proves the caller holds the root. Refused when the root keeps no key of the role yet (a
/// root made before it: the next apply adds it).
pub fn mint_system(
    root: &Root,
    _lock: &Lock,
    role: SysRole,
    name: &str,
    expires: Option<Duration>,
) -> Result<IssuedSystem> {
    permissions::valid_user_name(name).map_err(Error::input)?;
    if !HANDED_OUT.contains(&role) {
        return Err(Error::input(format!(
            "cotal hands out system users of the monitor role only, not {}",
            role.name()
        )));
    }
    let limit = permissions::HANDED_OUT_MAX_LIFETIME;
    match expires {
        Some(Duration::ZERO) => {
            return Err(Error::input(
                "--expires 0 would mint creds that are already expired: give a duration (1h, 30d)",
            ));
        }
        Some(d) if d <= limit => {}
        _ => {
            return Err(Error::input(
                Diagnostic::new(format!(
                    "a monitoring user lives at most {} days (it sees every tenant's connections, and the system account keeps its revocations only that long).",
                    limit.as_secs() / 86_400
                ))
                .next("give --expires 90d or less, and mint a new one before it expires"),
            ));
        }
    }
    let record = crate::mint::record_for_system_users(root)?;
    let Some(seed) = record.sys.keys.as_ref().and_then(|k| k.get(role)) else {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "this root's system account has no {} key yet (it was made before cotal handed out monitoring users).",
                role.name()
            ))
            .blast("none, nothing was minted.")
            .next("run `cotal plan` and `cotal apply`: the apply adds the key (a hot reload), then mint again"),
        ));
    };
    // Its users live in the root's monitoring account, which lists the key scoped to its
    // template: no answer to what they may ask lands in the system account.
    let Some(monitor) = &record.sys.monitor_account else {
        return Err(Error::refused(
            Diagnostic::new(
                "this root has no monitoring account yet: its monitoring users live there, importing the read-only $SYS requests (no answer to them reaches the system account).",
            )
            .blast("none, nothing was minted.")
            .next("run `cotal plan` and `cotal apply`: the apply adds it (a hot reload), then mint again"),
        ));
    };
    let mut ledger = users::load_system(root, &record.sys.public)?;
    let user = crate::mint::scoped_user(&monitor.public, seed, name, expires, None)
        .map_err(Error::other)?;
    let minted = Minted {
        name: name.to_string(),
        key: user.key.clone(),
        profile: role,
        issued_at: user.issued_at,
        expires_at: user.expires_at,
        signed_by: Some(seed.key_pair().map_err(Error::other)?.public_key()),
        member: None,
        account: Some(monitor.public.clone()),
        owner_guard: false,
    };
    ledger.minted.push(minted.clone());
    users::save_system(root, &ledger)?;
    audit_event(
        root,
        Event::CredsMinted,
        None,
        format!(
            "system user {:?} ({}), role {}, expires {}",
            minted.name,
            minted.key,
            role.name(),
            minted
                .expires_at
                .map_or("never".into(), crate::model::stamp)
        ),
    )?;
    Ok(IssuedSystem {
        creds: crate::trust::secret::Secret::new(user.creds),
        minted,
    })
}

/// Record the revocation of system users `cotal creds --system` handed out; the next apply
/// re-issues the system account with it. `Target::All` is every key the ledger records (never
/// `*`, which would refuse cotal's own users and every space's); a `Target::Key` must be one
/// the ledger records. `_lock` proves the caller holds the root.
pub fn revoke_system(
    root: &Root,
    _lock: &Lock,
    sys_account: &str,
    target: &Target,
) -> Result<Revoked> {
    let mut ledger = users::load_system(root, sys_account)?;
    let recorded: Vec<String> = ledger.minted.iter().map(|m| m.key.clone()).collect();
    let keys: Vec<String> = match target {
        Target::User(name) => ledger.keys_of(name).into_iter().map(String::from).collect(),
        Target::Key(key) => recorded.iter().filter(|k| *k == key).cloned().collect(),
        Target::All => recorded.clone(),
    };
    if keys.is_empty() {
        return Err(Error::input(
            Diagnostic::new(format!(
                "no such system user was handed out by `cotal creds --system` (handed out: {}).",
                ledger.names()
            ))
            .next("`cotal creds list --system` lists them; cotal's own and the spaces' $SYS users are revoked by `cotal rotate sys`"),
        ));
    }
    // The time recorded: at least every named user's recorded issue time.
    let at = ledger.record_revocation(&keys, crate::clock::now());
    users::save_system(root, &ledger)?;
    let what = match target {
        Target::User(name) => format!("system user {name:?} ({} key(s))", keys.len()),
        Target::Key(key) => format!("system user key {key}"),
        Target::All => format!("every system user handed out ({} key(s))", keys.len()),
    };
    audit_event(
        root,
        Event::CredsRevoked,
        None,
        format!("{what} revoked; the next apply loads it"),
    )?;
    Ok(Revoked { keys, at })
}
