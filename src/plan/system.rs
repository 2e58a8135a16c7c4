//! The system account's stage of the planner: whether its JWT is re-issued (a rotation, the
//! legacy `sys.seed`'s replacement by scoped keys, the evictor opt-in, outdated templates, the
//! revocation of the $SYS users of suspended and removed spaces) and, per space, why its $SYS
//! creds are (re)minted.
//!
//! Invariants: pure; expiry is judged against `observed.now`; a second plan after an apply of
//! this one finds nothing to do (every reason below is one the apply removes).

use super::removals::Removals;
use crate::desired::Desired;
use crate::model::{SpaceName, SpaceState};
use crate::observed::{Observed, ObservedSpace, SysKeysState};
use crate::permissions::{SYS_CREDS_RENEW_WITHIN, SysRole};
use std::collections::BTreeMap;

/// A re-issue of the system account's JWT.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemReissue {
    /// New keys for every role (the old ones leave the JWT, so their users are refused).
    pub rotate: bool,
    /// Whether the JWT lists an evictor key afterwards; `None` keeps it as it is.
    pub evictor: Option<bool>,
    /// The $SYS user keys of suspended and removed spaces to revoke, per space.
    pub revoke: BTreeMap<SpaceName, Vec<String>>,
    /// Why, for people.
    pub changes: Vec<String>,
}

/// Whether the system account's JWT is re-issued by this plan, and why.
pub fn reissue(
    desired: &Desired,
    observed: &Observed,
    removals: &Removals,
) -> Option<SystemReissue> {
    let system = &observed.system;
    let mut changes = Vec::new();
    let rotate = desired.rotate.sys;
    if rotate {
        changes.push(
            "rotate: new control, observer and evictor keys; users of the old keys (every space's $SYS creds) are refused after the reload".into(),
        );
    }
    let evictor_kept = system.key(SysRole::Evictor).is_some();
    let mut evictor = None;
    match &system.keys {
        SysKeysState::Legacy if !rotate => {
            changes.push("the unscoped .cotal/auth/sys.seed is replaced by scoped keys (control, observer) in broker.json; $SYS creds it signed are refused after the reload".into());
            evictor = Some(desired.broker.evictor_creds);
        }
        SysKeysState::None if !rotate => return None,
        _ => {}
    }
    if rotate {
        evictor = Some(desired.broker.evictor_creds);
    } else if matches!(system.keys, SysKeysState::Scoped(_))
        && evictor_kept != desired.broker.evictor_creds
    {
        evictor = Some(desired.broker.evictor_creds);
        changes.push(if desired.broker.evictor_creds {
            "evictor_creds = true: an evictor key is added (its users may KICK any client of the broker)".into()
        } else {
            "evictor_creds = false: the evictor key is removed; every space's evictor creds are refused after the reload".into()
        });
    }
    if matches!(system.keys, SysKeysState::Scoped(_)) && !system.templates_current && !rotate {
        changes.push("the scoped keys' permission templates are brought up to date".into());
    }
    // Revocations: live $SYS users (issued by a key the JWT keeps, not expired, not revoked
    // yet) of spaces this plan leaves suspended or removes. A rotation refuses them all anyway.
    let mut revoke = BTreeMap::new();
    if !rotate && matches!(system.keys, SysKeysState::Scoped(_)) {
        for (name, space) in &observed.inventory.spaces {
            let leaving = removals.leaving(&observed.inventory, name);
            let suspended = desired
                .spaces
                .get(name)
                .is_some_and(|s| s.state == SpaceState::Suspended);
            if !leaving && !suspended {
                continue;
            }
            let keys: Vec<String> = space
                .sys_users
                .iter()
                .filter(|u| system.key(u.role) == Some(u.issuer.as_str()))
                .filter(|u| u.expires_at.is_none_or(|exp| exp > observed.now))
                .filter(|u| !system.revocations.contains_key(&u.key))
                .map(|u| u.key.clone())
                .collect();
            if !keys.is_empty() {
                changes.push(format!(
                    "revoke the $SYS creds of {} ({}): closed at the reload, refused from then on",
                    super::q(name),
                    if leaving { "removed" } else { "suspended" }
                ));
                revoke.insert(name.clone(), keys);
            }
        }
    }
    (!changes.is_empty()).then_some(SystemReissue {
        rotate,
        evictor,
        revoke,
        changes,
    })
}

/// Why an existing space's $SYS creds are (re)minted by this plan, or `None`. Only active
/// spaces the plan keeps get creds; `reissue` is this plan's re-issue of the system account.
pub fn creds_reason(
    desired: &Desired,
    observed: &Observed,
    name: &SpaceName,
    space: &ObservedSpace,
    reissue: Option<&SystemReissue>,
) -> Option<String> {
    if desired.spaces.get(name)?.state != SpaceState::Active {
        return None;
    }
    let system = &observed.system;
    let new_keys = reissue.is_some_and(|r| r.rotate)
        || (matches!(system.keys, SysKeysState::Legacy) && reissue.is_some());
    if matches!(system.keys, SysKeysState::None) && !new_keys {
        return None;
    }
    if !space.sys_creds_present {
        return Some("missing".into());
    }
    if new_keys {
        return Some("signed by a key this plan replaces".into());
    }
    let evictor_after = reissue
        .and_then(|r| r.evictor)
        .unwrap_or(system.key(SysRole::Evictor).is_some());
    let has_evictor = space.sys_users.iter().any(|u| u.role == SysRole::Evictor);
    if evictor_after != has_evictor {
        return Some(if evictor_after {
            "no evictor yet".into()
        } else {
            "its evictor goes".into()
        });
    }
    for user in &space.sys_users {
        if system.key(user.role) != Some(user.issuer.as_str()) {
            return Some(format!(
                "the {} was signed by a retired key",
                user.role.name()
            ));
        }
        if system.revocations.contains_key(&user.key) {
            return Some(format!("the {} was revoked", user.role.name()));
        }
        match user.expires_at {
            None => return Some(format!("the {} never expires", user.role.name())),
            Some(exp) if exp <= observed.now + SYS_CREDS_RENEW_WITHIN.as_secs() as i64 => {
                return Some(format!(
                    "the {} expires {}",
                    user.role.name(),
                    crate::credentials::stamp(exp)
                ));
            }
            Some(_) => {}
        }
    }
    None
}
