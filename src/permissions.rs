//! The permissions of every user cotal mints, in one place. Pure.
//!
//! Each ephemeral user gets what its one job needs and nothing more (a removal's streams are
//! deleted by the system account's account purge, so no user of a tenant account holds a
//! delete right); the system account's users get what the template of their scoped signing key
//! allows ([`SysRole`]): a space's $SYS pair reaches only that space's account, with its own
//! inbox prefix, except the evictor's KICK, which is broker-wide by NATS's design (docs/design/lifecycle-model.md,
//! "System keys for a later space") and minted only when the root opts in. The profiles of the users handed to people
//! ([`Profile`]) are here too.

use crate::jwt::{Permission, Permissions};
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
    bucket_keeper(&crate::streams::registry_bucket(token))
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
/// itself with a chosen reply subject would let it publish anywhere once.
pub fn member_grant(
    token: &str,
    principal: &crate::members::Principal,
    grant: &crate::members::Grant,
) -> Permissions {
    let user = principal.user_name();
    let (owner, actor) = (&principal.owner, &principal.actor);
    let chat = format!("CHAT_{token}");
    let registry = crate::streams::registry_stream(token);
    let presence_bucket = format!("cotal_presence_{token}");
    let presence = format!("KV_{presence_bucket}");
    let mut publish: Vec<String> = grant
        .post
        .iter()
        .map(|c| format!("cotal.{token}.chat.{owner}.{actor}.{c}"))
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
        format!("$JS.FC.{chat}.{user}.>"),
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
                let mut publish = vec!["$SYS.REQ.SERVER.PING".to_string()];
                for z in MONITOR_SERVER_REQUESTS {
                    publish.push(format!("$SYS.REQ.SERVER.PING.{z}"));
                    publish.push(format!("$SYS.REQ.SERVER.*.{z}"));
                }
                for z in MONITOR_ACCOUNT_REQUESTS {
                    publish.push(format!("$SYS.REQ.ACCOUNT.*.{z}"));
                }
                publish.push("$SYS.REQ.ACCOUNT.PING.STATZ".into());
                publish.push("$SYS.REQ.ACCOUNT.PING.CONNZ".into());
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
/// (`$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE`) and JetStream's purge are not among them.
pub const MONITOR_ACCOUNT_REQUESTS: [&str; 7] =
    ["STATZ", "CONNZ", "SUBSZ", "JSZ", "INFO", "LEAFZ", "CONNS"];

/// Whether the system account's JWT lists each kept scoped key with exactly the template this
/// cotal writes for its role (else the next apply re-issues it).
pub fn sys_templates_current(
    kept: &std::collections::BTreeMap<SysRole, String>,
    listed: &[crate::jwt::SigningKey],
) -> bool {
    kept.iter().all(|(role, key)| {
        listed.contains(&crate::jwt::SigningKey::Scoped(crate::jwt::UserScope::new(
            key,
            role.name(),
            role.template(),
        )))
    })
}

/// The inbox prefix a space's $SYS users must use (`_INBOX_<account>`): they may subscribe to
/// nothing else, so no space reads the replies of another's requests, nor cotal's.
pub fn inbox_prefix(account: &str) -> String {
    format!("_INBOX_{account}")
}

/// What a user minted by `cotal creds` may do in its space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// Publish and subscribe under `cotal.<token>.>`, read the space's streams through its own
    /// consumers, read and write keys of its buckets; never create, delete, purge or
    /// reconfigure a stream or bucket, nor touch another user's consumer.
    Member,
    /// Everything inside the space's account (its streams and buckets included).
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

/// The permissions of a user of the space whose wire token is `token`, named `user` (a subject
/// token, see [`valid_user_name`]).
pub fn profile(profile: Profile, token: &str, user: &str) -> Permissions {
    match profile {
        Profile::Admin => Permissions::default(),
        Profile::Member => member(token, user),
    }
}

/// A member: the space's subjects, the read side of JetStream, its own consumers (named after
/// the user), key writes, replies on its own inbox prefix ([`member_inbox`]). No reply
/// permission (`resp`): with one, a message it sent itself with a chosen reply subject (a
/// stream's delete, say) would let it publish there once; a member answers requests on the
/// space's subjects (a reply subject under `cotal.<token>.>`).
fn member(token: &str, user: &str) -> Permissions {
    let space = format!("cotal.{token}.>");
    let own = |api: &str| format!("$JS.API.CONSUMER.{api}.*.{user}");
    let mut p = allow(
        &[
            &space,
            "$KV.>",
            "$JS.API.INFO",
            "$JS.API.STREAM.NAMES",
            "$JS.API.STREAM.LIST",
            "$JS.API.STREAM.INFO.*",
            "$JS.API.DIRECT.GET.>",
            "$JS.API.STREAM.MSG.GET.*",
            "$JS.API.CONSUMER.NAMES.*",
            "$JS.API.CONSUMER.LIST.*",
            "$JS.API.CONSUMER.INFO.*.*",
            // Only consumers named after the user: nats-server checks the name in the subject
            // against the request's. The unnamed create subject (`CONSUMER.CREATE.<stream>`)
            // is not granted: nats-server 2.15 lets a request on it that names a durable in
            // its body update that (another user's) consumer.
            &own("CREATE"),
            &format!("$JS.API.CONSUMER.CREATE.*.{user}.>"),
            &own("DURABLE.CREATE"),
            &own("MSG.NEXT"),
            &own("DELETE"),
            // Acks and flow control of its own consumers only: `$JS.ACK.<stream>.<consumer>.…`.
            &format!("$JS.ACK.*.{user}.>"),
            &format!("$JS.FC.*.{user}.>"),
        ],
        // Replies on its own inbox prefix only: no member reads another's replies (its pull
        // deliveries, its acks).
        &[&space, &format!("{}.>", member_inbox(user))],
    );
    p.resp = None;
    p
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
    fn a_member_holds_no_right_that_changes_a_stream_or_another_users_consumer() {
        let p = profile(Profile::Member, "design", "alice");
        for forbidden in [
            "STREAM.CREATE",
            "STREAM.UPDATE",
            "STREAM.DELETE",
            "STREAM.PURGE",
            "STREAM.MSG.DELETE",
            "STREAM.RESTORE",
            "STREAM.SNAPSHOT",
            "ACCOUNT.",
            "META.",
        ] {
            assert!(
                !p.publish.allow.iter().any(|s| s.contains(forbidden)),
                "{forbidden} granted: {:?}",
                p.publish.allow
            );
        }
        let consumer_writes: Vec<&String> = p
            .publish
            .allow
            .iter()
            .filter(|s| {
                ["CONSUMER.DELETE", "CONSUMER.MSG.NEXT", "CONSUMER.DURABLE"]
                    .iter()
                    .any(|api| s.contains(api))
            })
            .collect();
        assert!(!consumer_writes.is_empty());
        assert!(consumer_writes.iter().all(|s| s.ends_with(".*.alice")));
        assert!(!p.publish.allow.iter().any(|s| s.starts_with("_INBOX")));
        assert_eq!(
            p.resp, None,
            "a reply permission would let it publish anywhere"
        );
    }

    #[test]
    fn an_admin_is_unrestricted_inside_its_account() {
        assert_eq!(
            profile(Profile::Admin, "design", "root"),
            Permissions::default()
        );
    }

    #[test]
    fn user_names_are_subject_tokens() {
        assert!(valid_user_name("alice_01-x").is_ok());
        for bad in ["", "a.b", "a*", ">", "a b", "é", &"x".repeat(65)] {
            assert!(valid_user_name(bad).is_err(), "{bad:?} accepted");
        }
    }
}
