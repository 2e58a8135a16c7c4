//! The side accounts' stage of the planner ([`crate::space::side_accounts`]): for each space kept in
//! service, which of its side accounts are minted, re-issued or dropped, and why.
//!
//! Invariants: pure; a side account is written when it is missing or its JWT's claims differ
//! from the ones its role, the space and this plan's keys call for, and dropped when its role
//! is no longer wanted; a second plan after an apply of this one writes none.

use super::system::SystemReissue;
use crate::observed::{Observed, ObservedSpace, SysKeysState};
use crate::space::members::{Grant, Principal};
use crate::space::permissions::SysRole;
use crate::space::side_accounts::{self, SideRole};
use crate::trust::jwt::Revocations;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A side account a plan writes: its role, what its claims are made from, and the users of
/// it the plan revokes (added to its ledger).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideWrite {
    pub role: SideRole,
    /// The member's grant (a member's account only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<Grant>,
    /// Every revocation its JWT carries.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub revocations: Revocations,
    /// Of those, the ones this plan adds (users of a changed grant), each at its issue time:
    /// recorded in the space's ledger too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revoking: Vec<(String, i64)>,
}

/// What a plan does to one space's side accounts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SideChanges {
    pub write: Vec<SideWrite>,
    pub drop: Vec<SideRole>,
    /// Users of the dropped members' accounts, each at its issue time: recorded revoked in the
    /// space's ledger (their account leaves the config, so nothing else refers to them).
    pub retired: Vec<(String, i64)>,
    /// One line per account, for people.
    pub lines: Vec<String>,
}

impl SideChanges {
    pub fn is_empty(&self) -> bool {
        self.write.is_empty() && self.drop.is_empty()
    }
}

/// A scoped system key as the side accounts list it after this plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAfter<'a> {
    /// The root keeps none: the space has no account of that role.
    None,
    /// Kept as it is.
    Kept(&'a str),
    /// Minted by this plan (a rotation, the legacy key's replacement, the evictor's opt-in):
    /// every account of the role is re-issued with it.
    New,
}

impl<'a> KeyAfter<'a> {
    fn key(self) -> Option<&'a str> {
        match self {
            KeyAfter::Kept(k) => Some(k),
            KeyAfter::None | KeyAfter::New => None,
        }
    }
}

/// The root's keys the side accounts list, after this plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys<'a> {
    pub system: &'a str,
    pub observer: KeyAfter<'a>,
    pub evictor: KeyAfter<'a>,
}

/// The observer and evictor keys after this plan's re-issue of the system account (`system`).
pub fn keys<'a>(
    observed: &'a Observed,
    system_pub: &'a str,
    system: Option<&SystemReissue>,
) -> Keys<'a> {
    let sys = &observed.system;
    let rotate = system.is_some_and(|r| r.rotate);
    let legacy = matches!(sys.keys, SysKeysState::Legacy) && system.is_some();
    let scoped_after = matches!(sys.keys, SysKeysState::Scoped(_)) || rotate || legacy;
    // A key kept stays (unless the plan mints every key anew); a key the plan adds (the
    // evictor's opt-in) is new; a root keeping no key of the role has no account of it.
    let after = |role: SysRole, wanted: bool, added: bool| match sys.key(role) {
        _ if !scoped_after || !wanted => KeyAfter::None,
        _ if rotate || legacy => KeyAfter::New,
        Some(k) => KeyAfter::Kept(k),
        None if added => KeyAfter::New,
        None => KeyAfter::None,
    };
    let evictor_added = system.and_then(|r| r.evictor) == Some(true);
    let evictor_wanted = system
        .and_then(|r| r.evictor)
        .unwrap_or(sys.key(SysRole::Evictor).is_some());
    Keys {
        system: system_pub,
        observer: after(SysRole::Observer, true, false),
        evictor: after(SysRole::Evictor, evictor_wanted, evictor_added),
    }
}

/// What one space needs of its side accounts.
pub struct Need<'a> {
    pub token: &'a str,
    pub space: &'a ObservedSpace,
    pub suspended: bool,
    /// The space's account limits as this plan leaves them: its side accounts carry its
    /// connection and payload limits.
    pub limits: &'a crate::trust::jwt::AccountLimits,
    pub members: &'a BTreeMap<Principal, Grant>,
    /// The space's signing key is replaced by this plan (`cotal rotate account`): its members'
    /// accounts list the new one.
    pub rotating: bool,
    /// Users of each member's account this plan revokes (their grant changed), with their
    /// issue times.
    pub revoking: &'a BTreeMap<String, Vec<(String, i64)>>,
}

/// The side accounts of an existing space: what is written, what is dropped.
pub fn changes(need: &Need, keys: &Keys) -> SideChanges {
    let space = need.space;
    let ctx = side_accounts::Space {
        token: need.token,
        account: &space.account_pub,
        signing_key: &space.signing_pub,
        system: keys.system,
        observer_key: keys.observer.key(),
        evictor_key: keys.evictor.key(),
        suspended: need.suspended,
        conn: need.limits.conn,
        payload: need.limits.payload,
    };
    let wanted = wanted_roles(need.members, keys);
    let mut out = SideChanges::default();
    for role in &wanted {
        let grant = match role {
            SideRole::Member(p) => need.members.get(p).cloned(),
            _ => None,
        };
        let recorded = space.sides.get(role);
        let revoking: Vec<(String, i64)> = match role {
            SideRole::Member(p) => need
                .revoking
                .get(&p.to_string())
                .cloned()
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let mut revocations = recorded
            .and_then(|s| space.side_revoked.get(&s.account_pub))
            .cloned()
            .unwrap_or_default();
        for (key, at) in &revoking {
            revocations.entry(key.clone()).or_insert(*at);
        }
        let rekeyed = match role {
            SideRole::Observer => keys.observer == KeyAfter::New,
            SideRole::Evictor => keys.evictor == KeyAfter::New,
            SideRole::Member(_) => need.rotating,
        };
        let want = side_accounts::claims(role, &ctx, grant.as_ref(), &revocations);
        let why = match recorded {
            None => Some(added_line(role, need.suspended)),
            Some(r) if rekeyed || r.claims != want => Some(changed_line(
                role,
                &r.claims,
                &want,
                rekeyed,
                revoking.len(),
            )),
            Some(_) => None,
        };
        if let Some(line) = why {
            out.lines.push(line);
            out.write.push(SideWrite {
                role: role.clone(),
                grant,
                revocations,
                revoking,
            });
        }
    }
    for role in space.sides.keys() {
        if !wanted.contains(role) {
            out.lines.push(dropped_line(role));
            out.drop.push(role.clone());
            if let SideRole::Member(p) = role {
                out.retired.extend(
                    need.revoking
                        .get(&p.to_string())
                        .cloned()
                        .unwrap_or_default(),
                );
            }
        }
    }
    out
}

/// The roles a space has side accounts for after this plan: the observer and the evictor
/// where the root keeps (or this plan mints) their key, and one per declared member.
fn wanted_roles(members: &BTreeMap<Principal, Grant>, keys: &Keys) -> Vec<SideRole> {
    let mut roles = Vec::new();
    if keys.observer != KeyAfter::None {
        roles.push(SideRole::Observer);
    }
    if keys.evictor != KeyAfter::None {
        roles.push(SideRole::Evictor);
    }
    roles.extend(members.keys().cloned().map(SideRole::Member));
    roles
}

/// The side accounts of a space this plan adds: every wanted role, new. No line of their own:
/// they are part of the space added (its steps say how many).
pub fn added(members: &BTreeMap<Principal, Grant>, keys: &Keys) -> SideChanges {
    let mut out = SideChanges::default();
    for role in wanted_roles(members, keys) {
        out.write.push(SideWrite {
            grant: match &role {
                SideRole::Member(p) => members.get(p).cloned(),
                _ => None,
            },
            role,
            revocations: Revocations::new(),
            revoking: Vec::new(),
        });
    }
    out
}

fn added_line(role: &SideRole, suspended: bool) -> String {
    let what = match role {
        SideRole::Member(_) => {
            "its users live there, importing only its grant from the space; their connections are that account's, so the space's connection list (which the original's membership feed reads) no longer shows them"
        }
        SideRole::Observer => {
            "the membership observer's creds live there (a new creds file: restart the original's membership feed with it): the space's connect and disconnect events and its connections, imported, nothing else"
        }
        SideRole::Evictor => {
            "the connection evictor's creds live there: KICK and the space's connections, imported, nothing else"
        }
    };
    format!(
        "+ {} account: {what}{}",
        role,
        if suspended {
            " (suspended with the space)"
        } else {
            ""
        }
    )
}

fn changed_line(
    role: &SideRole,
    had: &crate::trust::jwt::AccountNats,
    want: &crate::trust::jwt::AccountNats,
    rekeyed: bool,
    revoking: usize,
) -> String {
    let mut what = Vec::new();
    if had.limits.is_suspended() != want.limits.is_suspended() {
        what.push(if want.limits.is_suspended() {
            "suspended with the space (its connections closed)".to_string()
        } else {
            "resumed with the space".to_string()
        });
    } else if had.limits != want.limits {
        what.push("its connection and payload limits follow the space's".into());
    }
    if had.imports != want.imports || had.mappings != want.mappings {
        what.push(match role {
            SideRole::Member(_) => "its imports follow the grant".into(),
            _ => "its imports brought up to date".into(),
        });
    }
    if rekeyed || had.signing_keys != want.signing_keys {
        what.push(match role {
            SideRole::Member(_) => {
                "its signing key follows the space's (users signed by the old one are refused)"
                    .into()
            }
            _ => "its scoped key is replaced (creds signed by the old one are refused)".into(),
        });
    }
    if revoking > 0 {
        what.push(format!(
            "{revoking} user(s) minted under an older grant revoked"
        ));
    } else if had.revocations != want.revocations {
        what.push("the revocations recorded for it loaded".into());
    }
    if what.is_empty() {
        what.push("its claims brought up to date".into());
    }
    format!("~ {role} account: {}", what.join("; "))
}

fn dropped_line(role: &SideRole) -> String {
    match role {
        SideRole::Member(_) => format!(
            "- {role} account: it leaves the config; its users' connections close at the reload and are refused from then on"
        ),
        _ => {
            format!("- {role} account: it leaves the config; its creds are refused from the reload")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SpaceSpec;
    use crate::testing::space;

    fn grant(read: &[&str], post: &[&str]) -> Grant {
        Grant::new(
            read.iter().map(|s| s.to_string()).collect(),
            post.iter().map(|s| s.to_string()).collect(),
        )
        .unwrap()
    }

    fn keys() -> Keys<'static> {
        Keys {
            system: "ASYS",
            observer: KeyAfter::Kept("AOBS"),
            evictor: KeyAfter::None,
        }
    }

    /// The space with `changes` applied as the executor applies them.
    fn applied(
        token: &str,
        mut s: ObservedSpace,
        c: &SideChanges,
        keys: &Keys,
        suspended: bool,
    ) -> ObservedSpace {
        for role in &c.drop {
            s.sides.remove(role);
        }
        for w in &c.write {
            let ctx = side_accounts::Space {
                token,
                account: &s.account_pub.clone(),
                signing_key: &s.signing_pub.clone(),
                system: keys.system,
                observer_key: keys.observer.key(),
                evictor_key: keys.evictor.key(),
                suspended,
                conn: crate::trust::jwt::AccountLimits::for_space(&SpaceSpec::default()).conn,
                payload: crate::trust::jwt::AccountLimits::for_space(&SpaceSpec::default()).payload,
            };
            let claims = side_accounts::claims(&w.role, &ctx, w.grant.as_ref(), &w.revocations);
            let pub_ = s
                .sides
                .get(&w.role)
                .map(|x| x.account_pub.clone())
                .unwrap_or_else(|| format!("A{}", w.role));
            s.sides.insert(
                w.role.clone(),
                crate::observed::ObservedSide {
                    account_pub: pub_,
                    jwt: String::new(),
                    claims,
                },
            );
        }
        s
    }

    #[test]
    fn sides_are_minted_changed_and_dropped_then_nothing_is_left() {
        let alice = Principal::parse("acme.alice").unwrap();
        let members = BTreeMap::from([(alice.clone(), grant(&["general"], &["general"]))]);
        let nobody = BTreeMap::new();
        fn plan(
            s: &ObservedSpace,
            members: &BTreeMap<Principal, Grant>,
            suspended: bool,
            keys: &Keys,
        ) -> SideChanges {
            changes(
                &Need {
                    token: "alpha",
                    space: s,
                    suspended,
                    limits: &crate::trust::jwt::AccountLimits::for_space(&SpaceSpec::default()),
                    members,
                    rotating: false,
                    revoking: &BTreeMap::new(),
                },
                keys,
            )
        }
        let s = space("AALPHA", &SpaceSpec::default());
        let c = plan(&s, &members, false, &keys());
        assert_eq!(c.write.len(), 2, "{c:?}");
        assert!(
            c.lines[0].starts_with("+ observer account"),
            "{:?}",
            c.lines
        );
        let s = applied("alpha", s, &c, &keys(), false);
        assert!(plan(&s, &members, false, &keys()).is_empty());
        // Narrowed: its member account's imports follow.
        let narrow = BTreeMap::from([(alice.clone(), grant(&["general"], &[]))]);
        let c = plan(&s, &narrow, false, &keys());
        assert_eq!(
            c.lines,
            ["~ member acme.alice account: its imports follow the grant"]
        );
        // Suspended: every side account refuses connections.
        let c = plan(&s, &members, true, &keys());
        assert_eq!(c.write.len(), 2);
        assert!(c.lines.iter().all(|l| l.contains("suspended")), "{c:?}");
        // No longer declared: dropped.
        let c = plan(&s, &nobody, false, &keys());
        assert_eq!(c.drop, [SideRole::Member(alice)]);
        assert!(c.write.is_empty());
        // A new observer key re-issues the observer's.
        let rotated = Keys {
            observer: KeyAfter::New,
            ..keys()
        };
        let c = plan(&s, &members, false, &rotated);
        assert_eq!(c.write.len(), 1);
        assert!(c.lines[0].contains("scoped key is replaced"), "{c:?}");
    }
}
