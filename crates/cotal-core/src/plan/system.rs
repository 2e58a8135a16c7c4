//! The system account's stage of the planner: whether its JWT is re-issued (a rotation, the
//! legacy `sys.seed`'s replacement by scoped keys, the evictor opt-in, outdated templates, the
//! revocation of the $SYS users of suspended and removed spaces) and, per space, why its $SYS
//! creds are (re)minted.
//!
//! Invariants: pure; expiry is judged against `observed.now`; a second plan after an apply of
//! this one finds nothing to do (every reason below is one the apply removes).

use super::Intent;
use crate::desired::Desired;
use crate::model::{SpaceName, SpaceState};
use crate::observed::{Observed, ObservedSpace, SysKeysState};
use crate::space::permissions::{SYS_CREDS_RENEW_WITHIN, SysRole};
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
    /// Revocations of users `cotal creds --system` handed out, recorded and not yet in the
    /// JWT.
    pub handed_out: crate::trust::jwt::Revocations,
    /// Revocations the monitoring account's JWT holds that it no longer needs: the ledger
    /// records each user's expiry, passed (with a day's slack) at the plan's time. Only a plan
    /// drops a revocation, and it says so; an apply never prunes by its own clock.
    pub pruned: Vec<String>,
    /// Why, for people. Invariant: it ends with one line per entry of `revoke`, in name order
    /// ([`crate::plan::Plan::only`] narrows both together).
    pub changes: Vec<String>,
}

/// Whether the system account's JWT is re-issued by this plan, and why.
pub fn reissue(desired: &Desired, observed: &Observed, intent: &Intent) -> Option<SystemReissue> {
    let system = &observed.system;
    let mut changes = Vec::new();
    let rotate = intent.rotate.sys;
    if rotate {
        changes.push(
            "rotate: new control, observer, monitor and evictor keys; users of the old keys (every space's $SYS creds, every monitoring user `cotal creds --system` handed out) are refused after the reload".into(),
        );
    }
    let evictor_kept = system.key(SysRole::Evictor).is_some();
    let mut evictor = None;
    match &system.keys {
        SysKeysState::Legacy if !rotate => {
            changes.push("the unscoped .cotal/auth/sys.seed is replaced by scoped keys (control, observer, monitor) in broker.json; $SYS creds it signed are refused after the reload".into());
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
        changes.push("the system account is brought up to date: it lists cotal's own control key only (a space's observer and evictor live in its side accounts, the monitoring users in the monitoring account, where no answer to them reaches the system account), and exports the events, KICK and monitoring requests those accounts import".into());
    }
    if matches!(system.keys, SysKeysState::Scoped(_))
        && system.key(SysRole::Monitor).is_none()
        && !rotate
    {
        changes.push("a monitor key is added: `cotal creds --system monitor` hands out read-only users of it".into());
    }
    // The monitoring account: its users are the monitoring users `cotal creds --system`
    // hands out. Revocations recorded for them that its JWT does not hold yet (a rotation
    // refuses every user of the old key anyway, and keeps none of them).
    let monitor_revocations = system
        .monitor
        .as_ref()
        .map(|(_, c)| c.revocations.clone())
        .unwrap_or_default();
    // A revocation is needed while its user may still connect: until the expiry the ledger
    // records for it (a day of slack for clocks), forever when it records none.
    let expired = |key: &str| {
        system
            .handed_out_expires
            .get(key)
            .is_some_and(|exp| exp + REVOCATION_SLACK < observed.now)
    };
    let handed_out: crate::trust::jwt::Revocations = system
        .handed_out_revoked
        .iter()
        .filter(|(key, _)| !expired(key))
        .filter(|(key, at)| monitor_revocations.get(*key).is_none_or(|ts| ts < *at))
        .map(|(k, at)| (k.clone(), *at))
        .collect();
    let pruned: Vec<String> = if rotate || !intent.prune_revocations {
        Vec::new()
    } else {
        prunable(observed)
    };
    if matches!(system.keys, SysKeysState::Scoped(_)) && !rotate {
        match (&system.monitor, system.key(SysRole::Monitor)) {
            (None, _) => {
                changes.push("a monitoring account is added: the users `cotal creds --system monitor` hands out live there, importing the read-only $SYS requests and nothing else".into());
                if system.legacy_monitor_users > 0 {
                    changes.push(format!(
                        "{} monitoring user(s) handed out as users of the system account are refused from the reload: mint new ones (`cotal creds --system monitor`)",
                        system.legacy_monitor_users
                    ));
                }
            }
            (Some((_, claims)), Some(key)) => {
                let mut want_revocations = monitor_revocations.clone();
                want_revocations.retain(|k, _| !pruned.contains(k));
                want_revocations.extend(handed_out.clone());
                let sys_pub = match &observed.broker {
                    crate::observed::BrokerRecordState::Valid(t) => t.sys_pub.as_str(),
                    _ => "",
                };
                let want =
                    crate::space::side_accounts::monitor_claims(sys_pub, key, &want_revocations);
                if want.signing_keys != claims.signing_keys || want.imports != claims.imports {
                    changes.push("the monitoring account is brought up to date".into());
                }
            }
            (Some(_), None) => {}
        }
    }
    if !handed_out.is_empty() {
        changes.push(format!(
            "revoke {} monitoring user key(s) handed out by `cotal creds --system`: closed at the reload, refused from then on",
            handed_out.len()
        ));
    }
    if !pruned.is_empty() {
        changes.push(format!(
            "drop {} revocation(s) of monitoring users whose recorded expiry has passed ({}): their creds are refused by their expiry from now on",
            pruned.len(),
            pruned.join(", ")
        ));
    }
    if system.previous_control && !rotate {
        changes.push("finish an interrupted change of the control key: the previous key is dropped once the broker runs the new JWT".into());
    }
    // The $SYS users of suspended and removed spaces are users of those spaces' side
    // accounts, which the suspension closes and the removal drops: nothing is revoked here.
    let revoke = BTreeMap::new();
    (!changes.is_empty()).then_some(SystemReissue {
        rotate,
        evictor,
        revoke,
        handed_out,
        pruned,
        changes,
    })
}

/// The revocations the monitoring account's JWT holds whose user's recorded expiry has passed
/// (a day of slack): what `--prune-revocations` drops; without it a plan only warns of them.
pub fn prunable(observed: &Observed) -> Vec<String> {
    let system = &observed.system;
    system
        .monitor
        .as_ref()
        .map(|(_, c)| {
            c.revocations
                .keys()
                .filter(|k| {
                    system
                        .handed_out_expires
                        .get(*k)
                        .is_some_and(|exp| exp + REVOCATION_SLACK < observed.now)
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// A day of slack past a user's recorded expiry before its revocation is dropped: a broker
/// whose clock is behind the host's still refuses it meanwhile.
pub const REVOCATION_SLACK: i64 = 24 * 3600;

/// Why an existing space's $SYS creds are (re)minted by this plan, or `None`. Only active
/// spaces the plan keeps get creds; `reissue` is this plan's re-issue of the system account.
pub fn creds_reason(
    desired: &Desired,
    observed: &Observed,
    name: &SpaceName,
    space: &ObservedSpace,
    reissue: Option<&SystemReissue>,
) -> Option<String> {
    if desired.spec(name)?.state != SpaceState::Active {
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
        // Its users live in the space's side account of its role, where no answer to what
        // they may ask reaches another tenant or cotal.
        let side = match user.role {
            SysRole::Evictor => crate::space::side_accounts::SideRole::Evictor,
            _ => crate::space::side_accounts::SideRole::Observer,
        };
        match space.sides.get(&side) {
            Some(s) if s.account_pub == user.account => {}
            _ => {
                return Some(format!(
                    "the {} moves to the space's {side} account",
                    user.role.name()
                ));
            }
        }
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
                    crate::model::stamp(exp)
                ));
            }
            Some(_) => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SpaceSpec;
    use crate::observed::SysUser;
    use crate::testing::{name, observed, space};

    const NOW: i64 = 1_800_000_000;
    const DAY: i64 = 24 * 3600;

    /// A root whose scoped keys are `CTL` (control), `OBS` (observer), `MON` (monitor) and,
    /// with `evictor`, `EVI`.
    fn scoped(o: &mut Observed, evictor: bool) {
        let mut keys = BTreeMap::from([
            (SysRole::Control, "CTL".to_string()),
            (SysRole::Observer, "OBS".to_string()),
            (SysRole::Monitor, "MON".to_string()),
        ]);
        if evictor {
            keys.insert(SysRole::Evictor, "EVI".into());
        }
        o.system.keys = SysKeysState::Scoped(keys);
        // Its monitoring account lists the monitor key above, current.
        let sys_pub = match &o.broker {
            crate::observed::BrokerRecordState::Valid(t) => t.sys_pub.clone(),
            _ => String::new(),
        };
        if let Some((public, _)) = &o.system.monitor {
            o.system.monitor = Some((
                public.clone(),
                crate::space::side_accounts::monitor_claims(&sys_pub, "MON", &Default::default()),
            ));
        }
        o.now = NOW;
    }

    fn observer(key: &str, expires_at: i64) -> SysUser {
        SysUser {
            role: SysRole::Observer,
            key: key.into(),
            issuer: "OBS".into(),
            account: "AWATCH".into(),
            issued_at: expires_at - 30 * DAY,
            expires_at: Some(expires_at),
        }
    }

    fn desired(text: &str) -> Desired {
        crate::desired::parse(&format!("version = 1\n{text}"), "cotal.toml").unwrap()
    }

    fn with_observer(user: SysUser) -> Observed {
        let mut s = space("AD", &SpaceSpec::default());
        for (role, key) in [
            (crate::space::side_accounts::SideRole::Observer, "AWATCH"),
            (crate::space::side_accounts::SideRole::Evictor, "AKICK"),
        ] {
            s.sides.insert(
                role,
                crate::observed::ObservedSide {
                    account_pub: key.into(),
                    jwt: String::new(),
                    claims: crate::space::side_accounts::claims(
                        &crate::space::side_accounts::SideRole::Observer,
                        &crate::space::side_accounts::Space {
                            token: "design",
                            account: "AD",
                            signing_key: "AS",
                            system: "ASYS",
                            observer_key: Some("OBS"),
                            evictor_key: None,
                            suspended: false,
                            conn: -1,
                            payload: -1,
                        },
                        None,
                        &Default::default(),
                    ),
                },
            );
        }
        s.sys_users = vec![user];
        let mut o = observed(&[("design", s)]);
        scoped(&mut o, false);
        o
    }

    #[test]
    fn creds_are_renewed_within_ten_days_of_their_expiry_and_not_before() {
        let d = desired("[spaces.design]\n");
        let fresh = with_observer(observer("U1", NOW + 11 * DAY));
        let s = &fresh.inventory.spaces[&name("design")];
        assert_eq!(creds_reason(&d, &fresh, &name("design"), s, None), None);
        let due = with_observer(observer("U1", NOW + 9 * DAY));
        let s = &due.inventory.spaces[&name("design")];
        let why = creds_reason(&d, &due, &name("design"), s, None).unwrap();
        assert!(why.starts_with("the space-observer expires"), "{why}");
        assert_eq!(reissue(&d, &due, &Intent::default()), None, "no JWT change");
    }

    #[test]
    fn a_suspended_space_leaves_the_system_account_alone_and_gets_no_creds() {
        // Its $SYS users are users of its observer account, which its suspension closes
        // (`plan::sides`): nothing is revoked in the system account.
        let d = desired("[spaces.design]\nstate = \"suspended\"\n");
        let o = with_observer(observer("U2", NOW + 20 * DAY));
        assert_eq!(reissue(&d, &o, &Intent::default()), None);
        assert_eq!(
            creds_reason(
                &d,
                &o,
                &name("design"),
                &o.inventory.spaces[&name("design")],
                None
            ),
            None,
            "a suspended space gets no creds"
        );
    }

    #[test]
    fn creds_of_the_system_account_move_to_the_spaces_observer_account() {
        let d = desired("[spaces.design]\n");
        let o = with_observer(SysUser {
            account: "ASYS".into(),
            ..observer("U1", NOW + 20 * DAY)
        });
        let s = &o.inventory.spaces[&name("design")];
        assert_eq!(
            creds_reason(&d, &o, &name("design"), s, None).as_deref(),
            Some("the space-observer moves to the space's observer account")
        );
    }

    #[test]
    fn the_evictor_opt_in_and_out_re_issue_once_and_re_mint_the_creds() {
        let on = desired("[broker]\nevictor_creds = true\n[spaces.design]\n");
        let mut o = with_observer(observer("U1", NOW + 20 * DAY));
        let r = reissue(&on, &o, &Intent::default()).unwrap();
        assert_eq!(r.evictor, Some(true));
        let s = &o.inventory.spaces[&name("design")];
        assert_eq!(
            creds_reason(&on, &o, &name("design"), s, Some(&r)).as_deref(),
            Some("no evictor yet")
        );
        // Applied: the key is kept and the space has its evictor.
        scoped(&mut o, true);
        let s = o.inventory.spaces.get_mut(&name("design")).unwrap();
        s.sys_users.push(SysUser {
            role: SysRole::Evictor,
            issuer: "EVI".into(),
            account: "AKICK".into(),
            ..observer("E1", NOW + 20 * DAY)
        });
        assert_eq!(reissue(&on, &o, &Intent::default()), None);
        let s = &o.inventory.spaces[&name("design")];
        assert_eq!(creds_reason(&on, &o, &name("design"), s, None), None);
        // Opted out again.
        let off = desired("[spaces.design]\n");
        let r = reissue(&off, &o, &Intent::default()).unwrap();
        assert_eq!(r.evictor, Some(false));
        assert_eq!(
            creds_reason(&off, &o, &name("design"), s, Some(&r)).as_deref(),
            Some("its evictor goes")
        );
    }

    #[test]
    fn a_rotation_re_mints_every_active_space_and_a_keyless_root_only_with_one() {
        let d = desired("[spaces.design]\n");
        let mut intent = Intent::default();
        let mut o = with_observer(observer("U1", NOW + 20 * DAY));
        o.system.keys = SysKeysState::None;
        assert_eq!(reissue(&d, &o, &intent), None);
        let s = &o.inventory.spaces[&name("design")];
        assert_eq!(creds_reason(&d, &o, &name("design"), s, None), None);
        intent.rotate.sys = true;
        let r = reissue(&d, &o, &intent).unwrap();
        assert!(r.rotate && r.revoke.is_empty());
        assert_eq!(
            creds_reason(&d, &o, &name("design"), s, Some(&r)).as_deref(),
            Some("signed by a key this plan replaces")
        );
    }

    #[test]
    fn a_root_made_before_the_monitor_key_gets_one_and_recorded_revocations_are_put_in_force() {
        let d = desired("[spaces.design]\n");
        let mut o = observed(&[("design", space("AD", &SpaceSpec::default()))]);
        scoped(&mut o, false);
        let intent = Intent::default();
        assert_eq!(reissue(&d, &o, &intent), None, "nothing to do");

        let mut old = o.clone();
        if let SysKeysState::Scoped(keys) = &mut old.system.keys {
            keys.remove(&SysRole::Monitor);
        }
        let r = reissue(&d, &old, &intent).expect("a re-issue");
        assert!(!r.rotate);
        assert_eq!(
            r.changes,
            [
                "a monitor key is added: `cotal creds --system monitor` hands out read-only users of it"
            ]
        );

        let mut revoking = o.clone();
        revoking
            .system
            .handed_out_revoked
            .insert("UMON".into(), NOW - 10);
        let r = reissue(&d, &revoking, &intent).expect("a re-issue");
        assert_eq!(r.handed_out.get("UMON"), Some(&(NOW - 10)));
        // Once the monitoring account's JWT holds it, nothing is left to do.
        let (_, claims) = revoking
            .system
            .monitor
            .as_mut()
            .expect("a monitoring account");
        claims.revocations.insert("UMON".into(), NOW - 10);
        assert_eq!(reissue(&d, &revoking, &intent), None);
    }

    #[test]
    fn a_revocation_is_dropped_only_by_a_plan_line_once_the_ledger_says_its_user_expired() {
        let d = desired("[spaces.design]\n");
        let mut o = observed(&[("design", space("AD", &SpaceSpec::default()))]);
        scoped(&mut o, false);
        let intent = Intent::default();
        // Revoked long ago (older than any lifetime), its user recorded to live on: kept.
        let old = NOW - 400 * 86_400;
        o.system.handed_out_revoked.insert("UOLD".into(), old);
        o.system.handed_out_revoked.insert("UNEVER".into(), old);
        o.system
            .handed_out_expires
            .insert("UOLD".into(), NOW + 86_400);
        o.system.monitor.as_mut().unwrap().1.revocations =
            [("UOLD".to_string(), old), ("UNEVER".to_string(), old)].into();
        assert_eq!(
            reissue(&d, &o, &intent),
            None,
            "an unexpired user's revocation and one never expiring are kept"
        );
        // Its recorded expiry passed (more than a day ago): kept unless the operator asks (a
        // clock that jumped ahead says the same); asked, the plan drops it and says so; and a
        // revocation the JWT lacks is not put back in for an expired user.
        o.system
            .handed_out_expires
            .insert("UOLD".into(), NOW - 2 * 86_400);
        assert_eq!(
            reissue(&d, &o, &intent),
            None,
            "not without --prune-revocations"
        );
        assert_eq!(prunable(&o), ["UOLD"]);
        let intent = Intent {
            prune_revocations: true,
            ..Intent::default()
        };
        let r = reissue(&d, &o, &intent).expect("a re-issue");
        assert_eq!(r.pruned, ["UOLD"]);
        assert!(r.handed_out.is_empty());
        assert_eq!(
            r.changes,
            [
                "drop 1 revocation(s) of monitoring users whose recorded expiry has passed (UOLD): their creds are refused by their expiry from now on"
            ]
        );
        o.system
            .monitor
            .as_mut()
            .unwrap()
            .1
            .revocations
            .remove("UOLD");
        assert_eq!(reissue(&d, &o, &intent), None, "a second plan is a no-op");
        // Within the day of slack: kept.
        o.system
            .monitor
            .as_mut()
            .unwrap()
            .1
            .revocations
            .insert("UOLD".into(), old);
        o.system
            .handed_out_expires
            .insert("UOLD".into(), NOW - 3600);
        assert_eq!(reissue(&d, &o, &intent), None);
    }
}
