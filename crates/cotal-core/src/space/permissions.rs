//! The permissions of every user cotal mints, in one place. Pure.
//!
//! Each ephemeral user gets what its one job needs and nothing more (a removal's streams are
//! deleted by the system account's account purge, so no user of a tenant account holds a
//! delete right); the system account's users get what the template of their scoped signing key
//! allows ([`SysRole`]): a space's $SYS pair reaches only that space's account, with its own
//! inbox prefix, except the evictor's KICK, which is broker-wide by NATS's design (docs/design/lifecycle-model.md,
//! "System keys for a later space") and minted only when the root opts in. The profiles of the users handed to people
//! ([`Profile`]) are here too.

use crate::trust::jwt::{Permission, Permissions};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long an ephemeral user (provisioner, teardown, verifier, monitor) lives.
pub const EPHEMERAL: Duration = Duration::from_secs(300);

fn allow(publish: &[&str], subscribe: &[&str]) -> Permissions {
    Permissions {
        publish: Permission {
            allow: publish.iter().map(|s| s.to_string()).collect(),
            deny: Vec::new(),
        },
        subscribe: Permission {
            allow: subscribe.iter().map(|s| s.to_string()).collect(),
            deny: Vec::new(),
        },
        resp: None,
    }
}

/// Creates and updates the space's streams and buckets, seeds the channel registry. Holds no
/// delete, purge or restore right: only the system account's purge (the teardown) deletes.
pub fn provisioner() -> Permissions {
    allow(
        &[
            "$JS.API.INFO",
            "$JS.API.STREAM.INFO.*",
            "$JS.API.STREAM.CREATE.*",
            "$JS.API.STREAM.UPDATE.*",
            "$JS.API.DIRECT.GET.>",
            "$JS.API.STREAM.MSG.GET.*",
            "$KV.>",
        ],
        &["_INBOX.>"],
    )
}

/// Empties a space's streams and buckets (`cotal space purge`): lists them, reads them and
/// purges them; it can create, change or delete none.
pub fn purger() -> Permissions {
    allow(
        &[
            "$JS.API.INFO",
            "$JS.API.STREAM.NAMES",
            "$JS.API.STREAM.INFO.*",
            "$JS.API.STREAM.PURGE.*",
        ],
        &["_INBOX.>"],
    )
}

/// Reads and writes one space's channel registry (`cotal_channels_<t>`), nothing else: the
/// stream info that lists its keys, direct gets of their latest values, and puts (with the
/// expected revision) and delete markers.
pub fn registry(token: &str) -> Permissions {
    bucket_keeper(&crate::space::streams::registry_bucket(token))
}

/// Reads and writes the keys of one bucket of a space (`cotal_<kind>_<token>`) and nothing
/// else: the channel registry, the members' acl records.
pub fn bucket_keeper(bucket: &str) -> Permissions {
    let stream = format!("KV_{bucket}");
    allow(
        &[
            "$JS.API.INFO",
            &format!("$JS.API.STREAM.INFO.{stream}"),
            &format!("$JS.API.DIRECT.GET.{stream}.>"),
            &format!("$JS.API.DIRECT.GET.{stream}"),
            &format!("$JS.API.STREAM.MSG.GET.{stream}"),
            &format!("$KV.{bucket}.>"),
        ],
        &["_INBOX.>"],
    )
}

/// Writes the members' acl records of the space whose wire token is `token`, and makes, updates
/// and deletes their consumers on its chat stream (cotal's, never the member's: a consumer's
/// config names where a push consumer delivers, which no subject permission checks).
pub fn acl_keeper(token: &str) -> Permissions {
    let mut p = bucket_keeper(&format!("cotal_acl_{token}"));
    let chat = format!("CHAT_{token}");
    p.publish.allow.extend([
        format!("$JS.API.STREAM.INFO.{chat}"),
        format!("$JS.API.CONSUMER.CREATE.{chat}.>"),
        format!("$JS.API.CONSUMER.DURABLE.CREATE.{chat}.*"),
        format!("$JS.API.CONSUMER.INFO.{chat}.*"),
        format!("$JS.API.CONSUMER.DELETE.{chat}.*"),
    ]);
    p
}

/// A declared member of the space whose wire token is `token` (`[spaces.NAME.members]`):
/// posts chat only as itself to its post channels (`cotal.<t>.chat.<owner>.<actor>.<channel>`),
/// subscribes only to its read channels' chat (`cotal.<t>.chat.*.*.<pattern>`), reads their
/// history only through the consumer cotal makes for it on the chat stream (named after it,
/// filtered to its read patterns; it may pull, ack and inspect it, never create or reconfigure
/// one: a consumer's config names where a push consumer delivers, past every publish
/// permission) and direct gets by subject inside them (never by sequence, which would reach
/// any channel); its own DM inbox (`cotal.<t>.inst.<owner>.<actor>.>`, and DMs sent as itself),
/// its presence key, and reads of the channel registry and the presence directory. Replies on
/// its own inbox prefix only, and no reply permission (`resp`): with one, a message it sent
/// itself with a chosen reply subject would let it publish anywhere once. Its users live in
/// the member's side account, which imports exactly these subjects from the space
/// ([`crate::space::side_accounts::member_imports`]): an answer the broker gives it, aimed anywhere,
/// does no more than this grant.
pub fn member_grant(
    token: &str,
    principal: &crate::space::members::Principal,
    grant: &crate::space::members::Grant,
) -> Permissions {
    let user = principal.user_name();
    let (owner, actor) = (&principal.owner, &principal.actor);
    let chat = format!("CHAT_{token}");
    let registry = crate::space::streams::registry_stream(token);
    let presence_bucket = format!("cotal_presence_{token}");
    let presence = format!("KV_{presence_bucket}");
    // A post is published to its wire subject; the member's account maps it to its post
    // subject before anything matches it (nats-server checks the mapped subject against the
    // permissions): both are granted, and only the post subject is imported.
    let mut publish: Vec<String> = grant
        .post
        .iter()
        .flat_map(|c| {
            [
                format!("cotal.{token}.chat.{owner}.{actor}.{c}"),
                format!(
                    "{}.{token}.chat.{owner}.{actor}.{c}",
                    crate::space::side_accounts::POST_PREFIX
                ),
            ]
        })
        .collect();
    for r in &grant.read {
        publish.push(format!(
            "$JS.API.DIRECT.GET.{chat}.cotal.{token}.chat.*.*.{r}"
        ));
    }
    publish.extend([
        format!("cotal.{token}.inst.*.*.{owner}.{actor}"),
        format!("$KV.{presence_bucket}.{owner}.{actor}"),
        "$JS.API.INFO".into(),
        format!("$JS.API.CONSUMER.MSG.NEXT.{chat}.{user}"),
        format!("$JS.API.CONSUMER.INFO.{chat}.{user}"),
        format!("$JS.ACK.{chat}.{user}.>"),
    ]);
    for stream in [&registry, &presence] {
        publish.extend([
            format!("$JS.API.STREAM.INFO.{stream}"),
            format!("$JS.API.DIRECT.GET.{stream}"),
            format!("$JS.API.DIRECT.GET.{stream}.>"),
        ]);
    }
    let mut subscribe: Vec<String> = grant
        .read
        .iter()
        .map(|r| format!("cotal.{token}.chat.*.*.{r}"))
        .collect();
    subscribe.push(format!("cotal.{token}.inst.{owner}.{actor}.>"));
    subscribe.push(format!("{}.>", member_inbox(&user)));
    Permissions {
        publish: Permission {
            allow: publish,
            deny: Vec::new(),
        },
        subscribe: Permission {
            allow: subscribe,
            deny: Vec::new(),
        },
        resp: None,
    }
}

/// Reads stream info: the backup and restore checks on an isolated broker.
pub fn reader() -> Permissions {
    allow(
        &[
            "$JS.API.INFO",
            "$JS.API.STREAM.INFO.>",
            "$JS.API.STREAM.NAMES",
        ],
        &["_INBOX.>"],
    )
}

/// Only connects: the data-plane check after a reload.
pub fn verifier() -> Permissions {
    Permissions {
        publish: Permission {
            allow: Vec::new(),
            deny: vec![">".into()],
        },
        subscribe: Permission {
            allow: Vec::new(),
            deny: vec![">".into()],
        },
        resp: None,
    }
}

/// System-account monitor: JSZ, VARZ and account STATZ for plan and status (the permissions of
/// a user of an unscoped system key, on roots made before the scoped keys).
pub fn monitor() -> Permissions {
    allow(
        &["$SYS.REQ.SERVER.PING.>", "$SYS.REQ.ACCOUNT.PING.STATZ"],
        &["_INBOX.>"],
    )
}

/// System-account controller: reload and confirm (`RELOAD`, `VARZ`), read which JWT an account
/// is loaded with (`ACCOUNTZ`), purge a removed account's JetStream, and evict one space's
/// clients (its account's `CONNZ`, then `KICK`): the permissions of a user of an unscoped
/// system key, on roots made before the scoped keys. The scoped control key's template is
/// [`SysRole::Control`]'s.
pub fn control() -> Permissions {
    allow(
        &[
            "$SYS.REQ.SERVER.*.RELOAD",
            "$SYS.REQ.SERVER.*.VARZ",
            "$SYS.REQ.SERVER.*.ACCOUNTZ",
            "$SYS.REQ.SERVER.*.KICK",
            "$SYS.REQ.ACCOUNT.*.CONNZ",
            "$JS.API.ACCOUNT.PURGE.*",
        ],
        &["_INBOX.>"],
    )
}

/// How long a space's $SYS creds live (renewed by the operator's rotation: docs/design/lifecycle-model.md, "Broker-wide system rotation").
pub const SYS_CREDS_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);
/// The longest a monitoring user `cotal creds --system` hands out lives (90 days; `never` is
/// refused): the system account's revocations are pruned past the longest lifetime of any of
/// its users, so every user must expire.
pub const HANDED_OUT_MAX_LIFETIME: Duration = Duration::from_secs(90 * 24 * 3600);

/// A revocation in the system account's JWT older than this refuses nothing that has not
/// expired anyway (the longest lifetime of any system user).
pub const SYS_REVOCATION_HORIZON: Duration =
    if SYS_CREDS_LIFETIME.as_secs() > HANDED_OUT_MAX_LIFETIME.as_secs() {
        SYS_CREDS_LIFETIME
    } else {
        HANDED_OUT_MAX_LIFETIME
    };

/// An apply re-mints a space's $SYS creds that expire within this window.
pub const SYS_CREDS_RENEW_WITHIN: Duration = Duration::from_secs(10 * 24 * 3600);

/// The roles of the system account's scoped signing keys. A user of a scoped key carries no
/// permission of its own: the key's template (in the system account's JWT) is all it may do,
/// so whoever holds a seed can mint only users of that role. Space users are named after
/// their space's account, which the template reads as `{{name()}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SysRole {
    /// cotal's own ephemeral users: reload and confirm, observe, purge, evict.
    Control,
    /// A space's membership observer: its own account's CONNZ and connect/disconnect events.
    Observer,
    /// A space's connection evictor (opt-in): KICK, which NATS makes broker-wide, and its own
    /// account's CONNZ.
    Evictor,
    /// Users an operator hands to monitoring (`cotal creds --system monitor`: nats-surveyor,
    /// an exporter): the read-only `$SYS` requests, never a reload, a kick, a purge or a
    /// claims update.
    Monitor,
}

impl SysRole {
    pub const ALL: [SysRole; 4] = [
        SysRole::Control,
        SysRole::Observer,
        SysRole::Evictor,
        SysRole::Monitor,
    ];

    /// Whether its users are users of the system account (its key listed there): cotal's own
    /// only. A space's observer and evictor are users of the space's side accounts of their
    /// role ([`crate::space::side_accounts`]), the monitoring users of the root's monitoring account,
    /// each of which lists the key instead: in the system account, an answer to any request
    /// they may send could be aimed at another tenant's events or at cotal's own inbox.
    pub fn in_system_account(self) -> bool {
        self == SysRole::Control
    }

    /// The role as the system account's JWT names it.
    pub fn name(self) -> &'static str {
        match self {
            SysRole::Control => "cotal-control",
            SysRole::Observer => "space-observer",
            SysRole::Evictor => "space-evictor",
            SysRole::Monitor => "broker-monitor",
        }
    }

    /// What every user of the role's key may do.
    pub fn template(self) -> Permissions {
        let own = "{{name()}}";
        match self {
            SysRole::Control => allow(
                &[
                    "$SYS.REQ.SERVER.PING.>",
                    "$SYS.REQ.ACCOUNT.PING.STATZ",
                    "$SYS.REQ.SERVER.*.RELOAD",
                    "$SYS.REQ.SERVER.*.VARZ",
                    "$SYS.REQ.SERVER.*.ACCOUNTZ",
                    "$SYS.REQ.SERVER.*.KICK",
                    "$SYS.REQ.ACCOUNT.*.CONNZ",
                    "$JS.API.ACCOUNT.PURGE.*",
                ],
                &["_INBOX.>"],
            ),
            SysRole::Observer => allow(
                &[&format!("$SYS.REQ.ACCOUNT.{own}.CONNZ")],
                &[
                    &format!("$SYS.ACCOUNT.{own}.CONNECT"),
                    &format!("$SYS.ACCOUNT.{own}.DISCONNECT"),
                    &format!("{}.>", inbox_prefix(own)),
                ],
            ),
            SysRole::Evictor => allow(
                &[
                    "$SYS.REQ.SERVER.*.KICK",
                    &format!("$SYS.REQ.ACCOUNT.{own}.CONNZ"),
                ],
                &[&format!("{}.>", inbox_prefix(own))],
            ),
            SysRole::Monitor => {
                let publish: Vec<String> = crate::space::side_accounts::monitor_subjects()
                    .into_iter()
                    .map(|(subject, _)| subject)
                    .collect();
                let publish: Vec<&str> = publish.iter().map(String::as_str).collect();
                allow(&publish, &["_INBOX.>"])
            }
        }
    }
}

/// The read-only requests of one server (or of every server, through `PING`) a monitor user may
/// make: nats-server's monitoring endpoints over `$SYS` (what nats-surveyor and `nats server`
/// use). `RELOAD`, `KICK`, `LDM` and `PROFILEZ` are not among them.
pub const MONITOR_SERVER_REQUESTS: [&str; 11] = [
    "STATSZ", "VARZ", "CONNZ", "SUBSZ", "ROUTEZ", "GATEWAYZ", "LEAFZ", "ACCOUNTZ", "JSZ",
    "HEALTHZ", "IDZ",
];

/// The read-only requests about one account a monitor user may make. Claims updates
/// (`$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE`) and JetStream's purge are not among them; one
/// account's `CONNZ` and `STATZ` are asked through `$SYS.REQ.ACCOUNT.PING.*` (see
/// [`crate::space::side_accounts::monitor_subjects`]).
pub const MONITOR_ACCOUNT_REQUESTS: [&str; 5] = ["SUBSZ", "JSZ", "INFO", "LEAFZ", "CONNS"];

/// Whether the system account's JWT (`nats`) is what this cotal writes for the kept keys: it
/// lists exactly the kept keys of the roles whose users live in the system account, each with
/// its role's template, and exports what the side accounts import (else the next apply
/// re-issues it).
pub fn sys_templates_current(
    kept: &std::collections::BTreeMap<SysRole, String>,
    nats: &crate::trust::jwt::AccountNats,
) -> bool {
    let want: Vec<crate::trust::jwt::SigningKey> = kept
        .iter()
        .filter(|(role, _)| role.in_system_account())
        .map(|(role, key)| {
            crate::trust::jwt::SigningKey::Scoped(crate::trust::jwt::UserScope::new(
                key,
                role.name(),
                role.template(),
            ))
        })
        .collect();
    nats.signing_keys.len() == want.len()
        && want.iter().all(|k| nats.signing_keys.contains(k))
        && nats.exports == crate::space::side_accounts::system_exports()
}

/// The inbox prefix a space's $SYS users must use (`_INBOX_<account>`): they may subscribe to
/// nothing else, so no space reads the replies of another's requests, nor cotal's.
pub fn inbox_prefix(account: &str) -> String {
    format!("_INBOX_{account}")
}

/// What a user minted by `cotal creds --user` may do in its space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// Retired: its users lived in the space's own account, where an answer the broker gives
    /// them (a stream's acknowledgement, a direct get, a pull) can be aimed at the JetStream
    /// API or another member's channel. A ledger still names the users minted with it (the
    /// next plan revokes them); minting one is refused. Declared members replace it.
    Member,
    /// The space's owner: everything inside the space's account but the JetStream API's
    /// delete and purge of the streams and buckets cotal provisions ([`admin`]).
    Admin,
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Profile::Member => "member",
            Profile::Admin => "admin",
        })
    }
}

/// The space's owner (`--profile admin`) of the space whose wire token is `token`: every
/// subject of its account, but no delete or purge of the streams and buckets cotal provisions
/// through the API (`cotal space purge` and removal do that, audited). Not a
/// boundary: an owner may create consumers, and a push consumer delivers stored messages to
/// any subject of the account, the API's included; it keeps a space's owner from deleting its
/// data by a slip (`nats stream rm`), and says what cotal expects of it.
pub fn admin(token: &str) -> Permissions {
    let mut deny = Vec::new();
    for s in crate::space::streams::expected(token, None) {
        let name = s.stream_name();
        for api in ["DELETE", "PURGE"] {
            deny.push(format!("$JS.API.STREAM.{api}.{name}"));
        }
    }
    Permissions {
        publish: Permission {
            allow: Vec::new(),
            deny,
        },
        subscribe: Permission::default(),
        resp: None,
    }
}

/// The inbox prefix a `member` named `user` must connect with (`_INBOX_<user>`): the only
/// inbox it may subscribe under.
pub fn member_inbox(user: &str) -> String {
    format!("_INBOX_{user}")
}

/// Whether `name` can name a user: it becomes a subject token of the user's consumers, so
/// only `[A-Za-z0-9_-]`, 1 to 64 characters.
pub fn valid_user_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err(format!(
            "user name {name:?} must be 1 to 64 characters long"
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        return Err(format!(
            "user name {name:?} contains {c:?}: use letters, digits, '_' and '-' only (it names the user's consumers, a subject token)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_members_grant_holds_no_right_that_changes_a_stream_or_another_consumer() {
        let alice = crate::space::members::Principal::parse("acme.alice").unwrap();
        let grant =
            crate::space::members::Grant::new(vec![">".into()], vec!["general".into()]).unwrap();
        let p = member_grant("design", &alice, &grant);
        for forbidden in [
            "STREAM.CREATE",
            "STREAM.UPDATE",
            "STREAM.DELETE",
            "STREAM.PURGE",
            "STREAM.MSG.DELETE",
            "STREAM.RESTORE",
            "STREAM.SNAPSHOT",
            "CONSUMER.CREATE",
            "CONSUMER.DURABLE",
            "CONSUMER.DELETE",
            "ACCOUNT.",
            "META.",
        ] {
            assert!(
                !p.publish.allow.iter().any(|s| s.contains(forbidden)),
                "{forbidden} granted: {:?}",
                p.publish.allow
            );
        }
        assert!(
            p.publish
                .allow
                .iter()
                .filter(|s| s.contains("CONSUMER.") || s.starts_with("$JS.ACK"))
                .all(|s| s.contains(".acme_alice")),
            "only its own consumer: {:?}",
            p.publish.allow
        );
        assert!(!p.publish.allow.iter().any(|s| s.starts_with("_INBOX")));
        assert_eq!(
            p.resp, None,
            "a reply permission would let it publish anywhere"
        );
    }

    #[test]
    fn an_admin_may_not_delete_or_purge_what_cotal_provisions() {
        let p = admin("design");
        assert!(p.publish.allow.is_empty() && p.subscribe == Permission::default());
        for stream in [
            "CHAT_design",
            "KV_cotal_acl_design",
            "OBJ_cotal_artifacts_design",
        ] {
            for api in ["DELETE", "PURGE"] {
                let subject = format!("$JS.API.STREAM.{api}.{stream}");
                assert!(p.publish.deny.contains(&subject), "{subject}");
            }
        }
        assert_eq!(p.publish.deny.len(), 2 * crate::space::streams::count());
    }

    #[test]
    fn user_names_are_subject_tokens() {
        assert!(valid_user_name("alice_01-x").is_ok());
        for bad in ["", "a.b", "a*", ">", "a b", "é", &"x".repeat(65)] {
            assert!(valid_user_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
