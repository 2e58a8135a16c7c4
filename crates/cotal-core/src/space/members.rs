//! Declared members of a space and their channel ACLs: who may read and post where
//! (`[spaces.NAME.members."OWNER.ACTOR"]`, seed 003's `allowSubscribe` and `allowPublish`), the
//! `acl` bucket record the original's delivery daemon reads (`acls.ts`: one record per owner,
//! `{"allowSubscribe", "revision", "updatedAt"}`), and what a plan changes of them. Pure.
//!
//! Invariants: a principal is two subject tokens (`owner.actor`); a read entry is a channel or a
//! pattern under NATS's rules (`*` one token, `>` one or more, last), a post entry a concrete
//! channel, both of tokens `[A-Za-z0-9_-]` (what the wire layer never rewrites, so a grant
//! names exactly the channels the operator wrote); a grant is kept sorted and without
//! duplicates, and its [`Grant::digest`] names it in the users ledger, so a user minted under
//! another grant is found and revoked; cotal writes and deletes only the acl records it marks
//! as its own (`managedBy`), never a record the original's manager wrote.

use crate::space::channels::{Entry, Expect, Write};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The mark cotal puts in every acl record it writes (`"managedBy": "cotal"`): the original's
/// readers ignore it; cotal deletes a record of a member no longer declared only with it.
pub const MANAGED_BY: &str = "cotal";

/// A member: `owner.actor`, each a subject token.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "String")]
pub struct Principal {
    pub owner: String,
    pub actor: String,
}

impl From<Principal> for String {
    fn from(p: Principal) -> String {
        p.to_string()
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.owner, self.actor)
    }
}

fn token_ok(t: &str) -> bool {
    !t.is_empty()
        && t.len() <= 64
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

impl Principal {
    /// `OWNER.ACTOR`: exactly two tokens of `[A-Za-z0-9_-]`, each at most 64 characters.
    pub fn parse(raw: &str) -> Result<Self, String> {
        match raw.split_once('.') {
            Some((owner, actor)) if token_ok(owner) && token_ok(actor) => Ok(Principal {
                owner: owner.into(),
                actor: actor.into(),
            }),
            _ => Err(format!(
                "member {raw:?} must be OWNER.ACTOR: two names of letters, digits, '-' and '_' (at most 64 each) joined by one dot"
            )),
        }
    }

    /// The name its users carry (`OWNER_ACTOR`): their consumers' name and inbox prefix.
    /// Two principals with one user name are refused by the parser.
    pub fn user_name(&self) -> String {
        format!("{}_{}", self.owner, self.actor)
    }

    /// Its acl record's key.
    pub fn acl_key(&self) -> String {
        self.to_string()
    }
}

/// A read entry: a channel or a pattern (`team.*`, `team.>`).
pub fn valid_read(entry: &str) -> Result<(), String> {
    let tokens: Vec<&str> = entry.split('.').collect();
    for (i, t) in tokens.iter().enumerate() {
        let ok = match *t {
            "*" => true,
            ">" => i == tokens.len() - 1,
            _ => token_ok(t),
        };
        if !ok {
            return Err(format!(
                "read {entry:?}: each dotted part is a name of letters, digits, '-' and '_', `*` (one level) or `>` (one or more, last only)"
            ));
        }
    }
    Ok(())
}

/// A post entry: a concrete channel (publish targets are never patterns).
pub fn valid_post(entry: &str) -> Result<(), String> {
    if entry.split('.').all(token_ok) {
        Ok(())
    } else {
        Err(format!(
            "post {entry:?}: a post target is a concrete channel, dotted names of letters, digits, '-' and '_' (no `*` or `>`)"
        ))
    }
}

/// What a member may read and where it may post, sorted and without duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Grant {
    pub read: Vec<String>,
    pub post: Vec<String>,
}

impl Grant {
    /// A grant of `read` and `post`, validated, sorted and deduplicated.
    pub fn new(mut read: Vec<String>, mut post: Vec<String>) -> Result<Self, String> {
        read.iter().try_for_each(|r| valid_read(r))?;
        post.iter().try_for_each(|p| valid_post(p))?;
        read.sort();
        read.dedup();
        post.sort();
        post.dedup();
        Ok(Grant { read, post })
    }

    /// A short name of the grant (16 hex digits of its SHA-256), recorded with each user
    /// minted under it.
    pub fn digest(&self) -> String {
        use sha2::Digest as _;
        let bytes = serde_json::to_vec(self).expect("a grant serializes");
        hex::encode(&sha2::Sha256::digest(bytes)[..8])
    }

    /// The grant in words: `reads a, b; posts c` (`nothing` for an empty list).
    pub fn describe(&self) -> String {
        let list = |l: &[String]| {
            if l.is_empty() {
                "nothing".to_string()
            } else {
                l.join(", ")
            }
        };
        format!("reads {}; posts {}", list(&self.read), list(&self.post))
    }

    /// What `next` grants or takes away compared with this grant, in words.
    pub fn change_to(&self, next: &Grant) -> String {
        let delta = |what: &str, a: &[String], b: &[String]| -> Option<String> {
            let added: Vec<&String> = b.iter().filter(|x| !a.contains(x)).collect();
            let gone: Vec<&String> = a.iter().filter(|x| !b.contains(x)).collect();
            if added.is_empty() && gone.is_empty() {
                return None;
            }
            let mut parts = Vec::new();
            if !added.is_empty() {
                parts.push(format!(
                    "+{}",
                    added
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(" +")
                ));
            }
            if !gone.is_empty() {
                parts.push(format!(
                    "-{}",
                    gone.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(" -")
                ));
            }
            Some(format!("{what} {}", parts.join(" ")))
        };
        [
            delta("reads", &self.read, &next.read),
            delta("posts", &self.post, &next.post),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("; ")
    }
}

/// An acl record as the original reads it, with cotal's mark.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclRecord {
    #[serde(rename = "allowSubscribe")]
    pub allow_subscribe: Vec<String>,
    pub revision: u64,
    #[serde(rename = "updatedAt")]
    pub updated_at: i64,
    #[serde(rename = "managedBy", skip_serializing_if = "Option::is_none", default)]
    pub managed_by: Option<String>,
}

/// What the users ledger records of a user minted for a member: who, under which grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberMark {
    pub principal: String,
    /// [`Grant::digest`] of the grant its JWT carries.
    pub grant: String,
    /// That grant (what a plan says a change grants or takes away).
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub post: Vec<String>,
}

/// A user minted for a member (from the ledger, not revoked): its key and the grant it carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberUser {
    pub principal: String,
    pub key: String,
    pub grant: String,
    /// When it was issued: the time its revocation names (nats-server refuses a user whose
    /// JWT was issued at or before it), so a plan is the same whenever it is computed.
    pub issued_at: i64,
    /// The grant it carries.
    pub read: Vec<String>,
    pub post: Vec<String>,
    /// The side account it is a user of (`None`: the space's own account, where members' users
    /// were minted before side accounts; such a user is revoked by the next plan).
    #[serde(default)]
    pub account: Option<String>,
}

/// What a plan does to one member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added {
        grant: Grant,
    },
    /// Its grant changed (`from`: what its acl record reads, or its users carry).
    Changed {
        /// The grant its newest user carries, when one was minted.
        from: Option<Grant>,
        /// Its acl record's read list, in words.
        found: String,
        grant: Grant,
    },
    /// Its acl record was changed by hand (or lost): put back.
    Drift {
        found: String,
        grant: Grant,
    },
    /// No longer declared: its users revoked, its acl record deleted.
    Removed,
    /// Its users minted under another grant are revoked (its record is not touched: it says
    /// the new grant already, or the broker is stopped and a later apply writes it).
    Revoke {
        from: Option<Grant>,
        grant: Grant,
    },
}

/// A user a plan revokes: its key and the time its revocation names (its issue time).
pub type Revoked = (String, i64);

/// What a plan does to the members of one space.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Each member changed, in principal order, with its change and the users it revokes
    /// (key, issue time).
    pub changes: Vec<(String, Change, Vec<Revoked>)>,
    /// The acl writes (after the reload that revokes).
    pub writes: Vec<Write>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The user keys revoked.
    pub fn revoked(&self) -> Vec<Revoked> {
        self.changes
            .iter()
            .flat_map(|(_, _, k)| k.clone())
            .collect()
    }

    /// One line per member, for people, without the live connections (the broker stopped).
    pub fn lines(&self) -> Vec<String> {
        self.lines_closing(&Default::default(), &[])
    }

    /// One line per member, for people. `live`: each member's live connections, by principal
    /// (empty: not known); `users`: the users minted for the members that stay unrevoked
    /// decide whether a revocation closes all of its member's connections or up to them.
    pub fn lines_closing(
        &self,
        live: &std::collections::BTreeMap<String, u64>,
        users: &[MemberUser],
    ) -> Vec<String> {
        self.changes
            .iter()
            .map(|(p, c, keys)| {
                let closes = match live.get(p) {
                    Some(n) if !keys.is_empty() => {
                        let kept = users.iter().any(|u| {
                            u.principal == *p && !keys.iter().any(|(k, _)| *k == u.key)
                        });
                        format!(
                            "; closes {}{n} live connection{}",
                            if kept && *n > 0 { "up to " } else { "" },
                            if *n == 1 { "" } else { "s" }
                        )
                    }
                    _ => String::new(),
                };
                let revoked = if keys.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; {} user(s) minted under the old grant revoked{closes}",
                        keys.len()
                    )
                };
                match c {
                    Change::Added { grant } => format!("+ member {p}: {}", grant.describe()),
                    Change::Changed {
                        from: Some(old),
                        grant,
                        ..
                    } => format!("~ member {p}: {}{revoked}", old.change_to(grant)),
                    Change::Changed {
                        from: None,
                        found,
                        grant,
                    } => format!("~ member {p}: {found} -> {}{revoked}", grant.describe()),
                    Change::Drift { found, grant } => format!(
                        "~ member {p}: its acl record reads {found} (changed outside cotal), put back to {}",
                        grant.describe()
                    ),
                    Change::Removed => format!(
                        "- member {p}: {} user(s) revoked{closes}, then its acl record deleted",
                        keys.len()
                    ),
                    Change::Revoke { from, grant } => format!(
                        "~ member {p}: {}; {} user(s) minted under an older grant revoked{closes}",
                        from.as_ref()
                            .map_or_else(|| grant.describe(), |old| old.change_to(grant)),
                        keys.len()
                    ),
                }
            })
            .collect()
    }
}

/// The acl record's read list as found, in words (`None`: absent).
fn found_text(e: Option<&Entry>) -> String {
    match e.map(|e| serde_json::from_value::<AclRecord>(e.value.clone())) {
        None => "nothing (no record)".into(),
        Some(Ok(r)) => format!("[{}]", r.allow_subscribe.join(", ")),
        Some(Err(_)) => "a record that is not an acl record".into(),
    }
}

/// What `declared` changes of a space whose acl bucket holds `acl` (`None`: not read: the broker
/// is stopped, so only revocations are planned) and whose ledger holds `users` (not revoked).
/// The records' `updatedAt` is stamped when they are written.
pub fn plan(
    declared: &BTreeMap<Principal, Grant>,
    acl: Option<&BTreeMap<String, Entry>>,
    users: &[MemberUser],
) -> Plan {
    let mut out = Plan::default();
    let mut principals: std::collections::BTreeSet<String> =
        declared.keys().map(Principal::to_string).collect();
    principals.extend(users.iter().map(|u| u.principal.clone()));
    if let Some(acl) = acl {
        principals.extend(
            acl.iter()
                .filter(|(_, e)| managed(e))
                .map(|(k, _)| k.clone()),
        );
    }
    for p in principals {
        let grant = declared
            .iter()
            .find(|(k, _)| k.to_string() == p)
            .map(|(_, g)| g);
        let stale_users: Vec<&MemberUser> = users
            .iter()
            .filter(|u| u.principal == p && grant.is_none_or(|g| g.digest() != u.grant))
            .collect();
        let stale: Vec<(String, i64)> = stale_users
            .iter()
            .map(|u| (u.key.clone(), u.issued_at))
            .collect();
        // The grant the newest stale user carries: what the change takes away from it.
        let from = stale_users
            .iter()
            .max_by_key(|u| u.issued_at)
            .map(|u| Grant {
                read: u.read.clone(),
                post: u.post.clone(),
            });
        let entry = acl.and_then(|a| a.get(&p));
        let record = entry.and_then(|e| serde_json::from_value::<AclRecord>(e.value.clone()).ok());
        let expect = |e: Option<&Entry>| match (acl, e) {
            (None, _) => Expect::Any,
            (Some(_), None) => Expect::Absent,
            (Some(_), Some(e)) => Expect::Revision(e.revision),
        };
        match grant {
            Some(g) => {
                let holds = record.as_ref().is_some_and(|r| {
                    r.allow_subscribe == g.read && r.managed_by.as_deref() == Some(MANAGED_BY)
                });
                if acl.is_some() && !holds {
                    let value = AclRecord {
                        allow_subscribe: g.read.clone(),
                        revision: record.as_ref().map_or(0, |r| r.revision) + 1,
                        // Stamped when written: a saved plan stays the same plan.
                        updated_at: 0,
                        managed_by: Some(MANAGED_BY.into()),
                    };
                    out.writes.push(Write {
                        key: p.clone(),
                        value: Some(serde_json::to_string(&value).expect("serializes")),
                        expect: expect(entry),
                        sets: BTreeMap::new(),
                    });
                    let change = match entry {
                        None if stale.is_empty() => Change::Added { grant: g.clone() },
                        Some(e) if managed(e) || !stale.is_empty() => Change::Changed {
                            from: from.clone(),
                            found: found_text(entry),
                            grant: g.clone(),
                        },
                        _ => Change::Drift {
                            found: found_text(entry),
                            grant: g.clone(),
                        },
                    };
                    out.changes.push((p, change, stale));
                } else if !stale.is_empty() {
                    out.changes.push((
                        p,
                        Change::Revoke {
                            from,
                            grant: g.clone(),
                        },
                        stale,
                    ));
                }
            }
            None => {
                let ours = entry.filter(|e| managed(e));
                if let Some(e) = ours {
                    out.writes.push(Write {
                        key: p.clone(),
                        value: None,
                        expect: Expect::Revision(e.revision),
                        sets: BTreeMap::new(),
                    });
                }
                if ours.is_some() || !stale.is_empty() {
                    out.changes.push((p, Change::Removed, stale));
                }
            }
        }
    }
    out
}

/// The filter subjects of a member's consumer on the chat stream of the space whose wire token
/// is `token`: its read patterns' chat subjects, without those another covers (JetStream refuses
/// overlapping filters; `team` and `team.>` do not overlap and are both kept).
pub fn consumer_filters(token: &str, read: &[String]) -> Vec<String> {
    uncovered(read)
        .iter()
        .map(|r| format!("cotal.{token}.chat.*.*.{r}"))
        .collect()
}

/// The read patterns of `read` that no other one covers, in `read`'s order.
pub fn uncovered(read: &[String]) -> Vec<&String> {
    read.iter()
        .filter(|x| !read.iter().any(|y| y != *x && subject_matches(y, x)))
        .collect()
}

/// Whether the NATS pattern `pattern` matches `subject` (a subject or, token by token, a
/// narrower pattern).
fn subject_matches(pattern: &str, subject: &str) -> bool {
    let p: Vec<&str> = pattern.split('.').collect();
    let s: Vec<&str> = subject.split('.').collect();
    for (i, t) in p.iter().enumerate() {
        if *t == ">" {
            return i < s.len();
        }
        match s.get(i) {
            None => return false,
            Some(_) if *t == "*" => {}
            Some(x) if x == t => {}
            Some(_) => return false,
        }
    }
    p.len() == s.len()
}

/// Whether an acl entry is one cotal wrote.
fn managed(e: &Entry) -> bool {
    e.value.get("managedBy").and_then(|v| v.as_str()) == Some(MANAGED_BY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(read: &[&str], post: &[&str]) -> Grant {
        Grant::new(
            read.iter().map(|s| s.to_string()).collect(),
            post.iter().map(|s| s.to_string()).collect(),
        )
        .unwrap()
    }

    fn entry(read: &[&str], managed: bool, revision: u64) -> Entry {
        let mut v = serde_json::json!({"allowSubscribe": read, "revision": 1, "updatedAt": 5});
        if managed {
            v["managedBy"] = MANAGED_BY.into();
        }
        Entry { value: v, revision }
    }

    #[test]
    fn names_and_patterns_follow_the_seeds_rules() {
        assert!(Principal::parse("acme.alice").is_ok());
        for bad in [
            "acme",
            "acme.alice.x",
            ".alice",
            "acme.",
            "ac me.alice",
            "a*.b",
        ] {
            assert!(Principal::parse(bad).is_err(), "{bad}");
        }
        for ok in ["team", "team.*", "team.>", "*.backend", "team.backend-2"] {
            valid_read(ok).unwrap();
        }
        for bad in ["", "team.", "team.>.x", "te am", "team..x", "foo/bar"] {
            assert!(valid_read(bad).is_err(), "{bad}");
        }
        valid_post("team.backend").unwrap();
        assert!(valid_post("team.*").is_err() && valid_post("team.>").is_err());
        let g = grant(&["team.>", "random", "team.>"], &["team.backend"]);
        assert_eq!(g.read, ["random", "team.>"]);
        assert_eq!(
            g.digest(),
            grant(&["random", "team.>"], &["team.backend"]).digest()
        );
        assert_ne!(g.digest(), grant(&["team.>"], &["team.backend"]).digest());
    }

    #[test]
    fn a_members_consumer_filters_drop_what_another_covers() {
        let read: Vec<String> = ["team", "team.>", "team.api", "random"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            consumer_filters("t", &read),
            [
                "cotal.t.chat.*.*.team",
                "cotal.t.chat.*.*.team.>",
                "cotal.t.chat.*.*.random"
            ]
        );
    }

    #[test]
    fn the_plan_writes_records_revokes_stale_users_and_leaves_foreign_records() {
        let alice = Principal::parse("acme.alice").unwrap();
        let narrow = grant(&["team.>"], &["team.backend"]);
        let wide = grant(&["team.>", "random"], &["team.backend"]);
        let declared = BTreeMap::from([(alice.clone(), narrow.clone())]);
        // Added: a create, no revocation.
        let empty = BTreeMap::new();
        let p = plan(&declared, Some(&empty), &[]);
        assert_eq!(p.writes.len(), 1);
        assert_eq!(p.writes[0].expect, Expect::Absent);
        let written: AclRecord = serde_json::from_str(p.writes[0].value.as_ref().unwrap()).unwrap();
        assert_eq!(written.allow_subscribe, ["team.>"]);
        assert!(matches!(p.changes[0].1, Change::Added { .. }));
        // Narrowed: the record rewritten on its revision, the older users revoked.
        let acl = BTreeMap::from([(
            "acme.alice".to_string(),
            entry(&["random", "team.>"], true, 9),
        )]);
        let users = vec![MemberUser {
            principal: "acme.alice".into(),
            key: "UOLD".into(),
            grant: wide.digest(),
            issued_at: 40,
            read: wide.read.clone(),
            post: wide.post.clone(),
            account: Some("AMEMBER".into()),
        }];
        let p = plan(&declared, Some(&acl), &users);
        assert_eq!(p.writes[0].expect, Expect::Revision(9));
        assert_eq!(p.revoked(), [("UOLD".to_string(), 40)]);
        assert!(
            p.lines()[0].contains(
                "member acme.alice: reads -random; 1 user(s) minted under the old grant revoked"
            ),
            "{:?}",
            p.lines()
        );
        // Applied: nothing left.
        let acl = BTreeMap::from([("acme.alice".to_string(), entry(&["team.>"], true, 10))]);
        let current = vec![MemberUser {
            grant: narrow.digest(),
            ..users[0].clone()
        }];
        assert!(plan(&declared, Some(&acl), &current).is_empty());
        // Drift: changed by hand (its mark lost): put back.
        let acl = BTreeMap::from([("acme.alice".to_string(), entry(&["everything"], false, 11))]);
        let p = plan(&declared, Some(&acl), &current);
        assert!(
            matches!(p.changes[0].1, Change::Drift { .. }),
            "{:?}",
            p.changes
        );
        // Removed: users revoked and cotal's record deleted; a foreign record is left alone.
        let acl = BTreeMap::from([
            ("acme.alice".to_string(), entry(&["team.>"], true, 10)),
            ("BOBNKEY".to_string(), entry(&["x"], false, 3)),
        ]);
        let p = plan(&BTreeMap::new(), Some(&acl), &current);
        assert_eq!(p.changes.len(), 1);
        assert_eq!(p.revoked(), [("UOLD".to_string(), 40)]);
        assert_eq!(
            p.writes,
            [Write {
                key: "acme.alice".into(),
                value: None,
                expect: Expect::Revision(10),
                sets: BTreeMap::new()
            }]
        );
        // Broker stopped: revocations only.
        let p = plan(&declared, None, &users);
        assert!(p.writes.is_empty() && p.revoked() == [("UOLD".to_string(), 40)]);
    }
}
