//! The accounts at a space's side: one per declared member, one for the space's membership
//! observer and one for its connection evictor, each holding the users of one principal and
//! importing from the space's account exactly what that principal may do; and the exports of
//! the space's account they import from. Pure.
//!
//! Why (docs/design/decisions.md, "Side accounts"): nats-server checks the subject a client
//! publishes to, never the reply subject it attaches, and the answers the server produces
//! inside an account (a stream's acknowledgement, a direct get, a pull, an ack's answer, a
//! `$SYS` reply) are delivered to that reply subject as if the account had published them. A
//! principal living in the space's account could aim them at the JetStream API, another
//! member's channel or a bucket key. In an account of its own, an answer to a request it sends
//! through an import comes back into that account (nats-server rewrites the reply subject of a
//! service import), where the only subjects that lead anywhere are its own imports: the
//! account's import list is its grant, so an answer aimed anywhere does at most what the
//! principal may do itself.
//!
//! Two consequences of nats-server's rules shape the imports:
//! - A message a service import brings into the space's account is never passed on to a
//!   stream export (nats-server's guard against loops), so members would not see each other's
//!   posts live. The chat and DM streams republish what they store under
//!   [`LIVE_PREFIX`] (`$COTAL.LIVE.<t>.…`), and a member imports that, under the wire subject
//!   its client subscribes to.
//! - A member's own post would reach it twice (its connection's echo, and the republished
//!   copy). Its account maps the post's subject to [`POST_PREFIX`] (`$COTAL.POST.<t>.…`) before
//!   the import forwards it, so the echo never matches the member's subscription.
//!
//! It also owns the root's monitoring account (the same idea for the monitoring users
//! `cotal creds --system monitor` hands out: the read-only `$SYS` requests imported, nothing
//! else) and the check of an adopted account's kept imports ([`foreign_imports`]).
//!
//! Invariants: every side account is a plain account (no JetStream), signed by the operator like
//! the space's, a member's carrying the space's connection and payload limits; its claims are a
//! pure function of its role and [`Space`]; the space's exports depend on its token alone, so
//! they never change with its members.

use crate::space::members::{Grant, Principal};
use crate::space::permissions::{SysRole, inbox_prefix};
use crate::trust::jwt::{
    self, AccountLimits, AccountNats, Export, Import, Permission, Permissions, SigningKey,
    UserScope,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where the chat and DM streams republish every message they store: `$COTAL.LIVE.<t>.chat.…`
/// and `$COTAL.LIVE.<t>.inst.…` (no stream captures it, and no subscriber of the space's
/// subjects sees it twice).
pub const LIVE_PREFIX: &str = "$COTAL.LIVE";
/// What a member account maps its own posts to before the import forwards them:
/// `$COTAL.POST.<t>.chat.<owner>.<actor>.<channel>`.
pub const POST_PREFIX: &str = "$COTAL.POST";

/// The streams whose stored messages members read live, by subject segment
/// (`cotal.<t>.<segment>.>`), republished under [`LIVE_PREFIX`].
pub const LIVE_SEGMENTS: [&str; 2] = ["chat", "inst"];

/// The republish of a space's stream on `cotal.<t>.<segment>.>`: (source, destination).
pub fn republish(token: &str, segment: &str) -> (String, String) {
    (
        format!("cotal.{token}.{segment}.>"),
        format!("{LIVE_PREFIX}.{token}.{segment}.>"),
    )
}

/// Which principal a side account holds.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SideRole {
    /// The space's membership observer (its `$SYS` creds' `membership-observer.creds`): the
    /// space account's connect and disconnect events, and its connections.
    Observer,
    /// The space's connection evictor (`evictor_creds = true`): the space account's
    /// connections, and `KICK`, which nats-server makes broker-wide.
    Evictor,
    /// A declared member: exactly its grant.
    Member(Principal),
}

impl std::fmt::Display for SideRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SideRole::Observer => f.write_str("observer"),
            SideRole::Evictor => f.write_str("evictor"),
            SideRole::Member(p) => write!(f, "member {p}"),
        }
    }
}

impl Serialize for SideRole {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&match self {
            SideRole::Observer => "observer".to_string(),
            SideRole::Evictor => "evictor".to_string(),
            SideRole::Member(p) => format!("member:{p}"),
        })
    }
}

impl<'de> Deserialize<'de> for SideRole {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        match raw.as_str() {
            "observer" => Ok(SideRole::Observer),
            "evictor" => Ok(SideRole::Evictor),
            _ => raw
                .strip_prefix("member:")
                .ok_or_else(|| format!("unknown side account role {raw:?}"))
                .and_then(Principal::parse)
                .map(SideRole::Member)
                .map_err(serde::de::Error::custom),
        }
    }
}

impl SideRole {
    /// The account's name in its JWT (`<token>:observer`, `<token>:member:acme.alice`).
    pub fn account_name(&self, token: &str) -> String {
        match self {
            SideRole::Observer => format!("{token}:observer"),
            SideRole::Evictor => format!("{token}:evictor"),
            SideRole::Member(p) => format!("{token}:member:{p}"),
        }
    }
}

/// What a space's side accounts are made from: the space, its account and signing key, the
/// system account and the root's scoped system keys, and whether the space is suspended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space<'a> {
    pub token: &'a str,
    /// The space's account: what every side account imports from.
    pub account: &'a str,
    /// The space account's signing key, which signs its members' users too (listed as each
    /// member account's signing key: `cotal rotate account` replaces it in all of them).
    pub signing_key: &'a str,
    /// The system account: what the observer and the evictor import events and `KICK` from.
    pub system: &'a str,
    /// The root's scoped observer and evictor keys (`None`: the root keeps none, so the space
    /// has no such account).
    pub observer_key: Option<&'a str>,
    pub evictor_key: Option<&'a str>,
    /// Suspended: no side account accepts a connection either.
    pub suspended: bool,
    /// The space's connection and payload limits (its account's `conn` and `payload`), which
    /// each of its side accounts carries too: nats-server counts connections per account, so a
    /// member's account must bound its own, and a message a member publishes is forwarded into
    /// the space whatever the space's own payload limit says.
    pub conn: i64,
    pub payload: i64,
}

/// A side account's limits: no JetStream, no connection while the space is suspended; a
/// member's carries the space's connection and payload limits (its clients are the tenant's),
/// the observer's and the evictor's (cotal's helpers) no other; leaf nodes are unbounded, as
/// in the space's own account.
fn limits(role: &SideRole, space: &Space) -> AccountLimits {
    let (conn, payload) = match role {
        SideRole::Member(_) => (space.conn, space.payload),
        SideRole::Observer | SideRole::Evictor => (jwt::UNLIMITED, AccountLimits::system().payload),
    };
    AccountLimits {
        conn: if space.suspended { 0 } else { conn },
        leaf: if space.suspended { 0 } else { jwt::UNLIMITED },
        payload,
        ..AccountLimits::system()
    }
}

fn nats(limits: AccountLimits) -> AccountNats {
    AccountNats {
        limits,
        signing_keys: Vec::new(),
        default_permissions: Permissions::default(),
        revocations: jwt::Revocations::new(),
        exports: Vec::new(),
        imports: Vec::new(),
        mappings: BTreeMap::new(),
        kind: "account".into(),
        version: 2,
    }
}

/// The claims (`nats`) a side account of `role` must carry. `grant` is the member's (ignored
/// for the observer and the evictor); `revocations` the users of this account revoked.
pub fn claims(
    role: &SideRole,
    space: &Space,
    grant: Option<&Grant>,
    revocations: &jwt::Revocations,
) -> AccountNats {
    let mut n = nats(limits(role, space));
    n.revocations = revocations.clone();
    match role {
        SideRole::Observer => {
            if let Some(key) = space.observer_key {
                n.signing_keys = vec![SigningKey::Scoped(UserScope::new(
                    key,
                    SysRole::Observer.name(),
                    observer_template(space.account),
                ))];
            }
            n.imports = observer_imports(space);
        }
        SideRole::Evictor => {
            if let Some(key) = space.evictor_key {
                n.signing_keys = vec![SigningKey::Scoped(UserScope::new(
                    key,
                    SysRole::Evictor.name(),
                    evictor_template(space.account),
                ))];
            }
            n.imports = evictor_imports(space);
        }
        SideRole::Member(p) => {
            let grant = grant.cloned().unwrap_or_default();
            n.signing_keys = vec![SigningKey::Plain(space.signing_key.into())];
            n.imports = member_imports(space.token, space.account, p, &grant);
            n.mappings = member_mappings(space.token, p, &grant);
        }
    }
    n.imports.sort();
    n
}

/// The subject of the space account's own connections' request (`CONNZ`) as the observer and
/// the evictor ask it: what the original's membership service asks.
pub fn connz_subject(account: &str) -> String {
    format!("$SYS.REQ.ACCOUNT.{account}.CONNZ")
}

/// The space account's `CONNZ`: every account imports its own as `$SYS.REQ.ACCOUNT.PING.CONNZ`
/// from the system account, and the space's account exports that. (The system account's own
/// export of `$SYS.REQ.ACCOUNT.*.CONNZ` is restricted by nats-server to each account's own, and
/// an export of it in the system account's JWT is lost at the first reload.)
fn own_connz(space: &Space) -> Import {
    Import::service("connz", space.account, "$SYS.REQ.ACCOUNT.PING.CONNZ")
        .as_local(&connz_subject(space.account))
}

fn observer_imports(space: &Space) -> Vec<Import> {
    let a = space.account;
    vec![
        Import::stream(
            "connect",
            space.system,
            &format!("$SYS.ACCOUNT.{a}.CONNECT"),
        ),
        Import::stream(
            "disconnect",
            space.system,
            &format!("$SYS.ACCOUNT.{a}.DISCONNECT"),
        ),
        own_connz(space),
    ]
}

fn evictor_imports(space: &Space) -> Vec<Import> {
    vec![
        Import::service("kick", space.system, KICK),
        own_connz(space),
    ]
}

/// `KICK`, of one server by its id: the system account exports it for the evictors.
pub const KICK: &str = "$SYS.REQ.SERVER.*.KICK";

/// What every user of a space's observer account may do: ask its space account's connections
/// and hear its connects and disconnects, with replies on `_INBOX_<account>` (what the
/// original's membership service uses).
pub fn observer_template(account: &str) -> Permissions {
    Permissions {
        publish: Permission {
            allow: vec![connz_subject(account)],
            deny: Vec::new(),
        },
        subscribe: Permission {
            allow: vec![
                format!("$SYS.ACCOUNT.{account}.CONNECT"),
                format!("$SYS.ACCOUNT.{account}.DISCONNECT"),
                format!("{}.>", inbox_prefix(account)),
            ],
            deny: Vec::new(),
        },
        resp: None,
    }
}

/// What every user of a space's evictor account may do: its space account's connections, and
/// `KICK` of a client by id on any server.
pub fn evictor_template(account: &str) -> Permissions {
    Permissions {
        publish: Permission {
            allow: vec![KICK.into(), connz_subject(account)],
            deny: Vec::new(),
        },
        subscribe: Permission {
            allow: vec![format!("{}.>", inbox_prefix(account))],
            deny: Vec::new(),
        },
        resp: None,
    }
}

/// The subjects a member publishes a post to, and the local subject its account maps it to
/// (so its own subscription never hears the echo: the republished copy is the one it reads).
fn post_subjects(token: &str, p: &Principal, channel: &str) -> (String, String) {
    let wire = format!("cotal.{token}.chat.{}.{}.{channel}", p.owner, p.actor);
    let local = format!(
        "{POST_PREFIX}.{token}.chat.{}.{}.{channel}",
        p.owner, p.actor
    );
    (wire, local)
}

fn member_mappings(
    token: &str,
    p: &Principal,
    grant: &Grant,
) -> BTreeMap<String, Vec<jwt::Mapping>> {
    grant
        .post
        .iter()
        .map(|c| {
            let (wire, local) = post_subjects(token, p, c);
            (wire, vec![jwt::Mapping::to(&local)])
        })
        .collect()
}

/// The chat stream of a space and its presence and registry buckets' streams.
fn streams(token: &str) -> (String, [String; 2]) {
    (
        format!("CHAT_{token}"),
        [
            crate::space::streams::registry_stream(token),
            format!("KV_cotal_presence_{token}"),
        ],
    )
}

/// What a member's account imports from its space's account `account`: its grant, and
/// nothing else (see [`crate::space::permissions::member_grant`], the permissions of its users,
/// which name the same subjects).
pub fn member_imports(token: &str, account: &str, p: &Principal, grant: &Grant) -> Vec<Import> {
    let user = p.user_name();
    let (chat, kv) = streams(token);
    let (o, a) = (&p.owner, &p.actor);
    let mut out = Vec::new();
    for c in &grant.post {
        let (wire, local) = post_subjects(token, p, c);
        out.push(Import::service("post", account, &wire).as_local(&local));
    }
    // Each read pattern another covers is left out: nats-server refuses overlapping service
    // imports, and overlapping stream imports would deliver a message twice.
    for r in crate::space::members::uncovered(&grant.read) {
        out.push(
            Import::stream(
                "read",
                account,
                &format!("{LIVE_PREFIX}.{token}.chat.*.*.{r}"),
            )
            .as_local(&format!("cotal.{token}.chat.*.*.{r}")),
        );
        out.push(Import::service(
            "history",
            account,
            &format!("$JS.API.DIRECT.GET.{chat}.cotal.{token}.chat.*.*.{r}"),
        ));
    }
    out.push(
        Import::stream(
            "dm-inbox",
            account,
            &format!("{LIVE_PREFIX}.{token}.inst.{o}.{a}.>"),
        )
        .as_local(&format!("cotal.{token}.inst.{o}.{a}.>")),
    );
    out.push(Import::service(
        "dm",
        account,
        &format!("cotal.{token}.inst.*.*.{o}.{a}"),
    ));
    out.push(Import::service(
        "presence",
        account,
        &format!("$KV.cotal_presence_{token}.{o}.{a}"),
    ));
    out.push(Import::service("js-info", account, "$JS.API.INFO"));
    for api in ["MSG.NEXT", "INFO"] {
        out.push(Import::service(
            "consumer",
            account,
            &format!("$JS.API.CONSUMER.{api}.{chat}.{user}"),
        ));
    }
    out.push(Import::service(
        "ack",
        account,
        &format!("$JS.ACK.{chat}.{user}.>"),
    ));
    for stream in &kv {
        out.push(Import::service(
            "kv-info",
            account,
            &format!("$JS.API.STREAM.INFO.{stream}"),
        ));
        out.push(Import::service(
            "kv-get",
            account,
            &format!("$JS.API.DIRECT.GET.{stream}"),
        ));
        out.push(Import::service(
            "kv-get",
            account,
            &format!("$JS.API.DIRECT.GET.{stream}.>"),
        ));
    }
    out
}

/// What a space's account exports for its side accounts, whatever its members: services (a
/// post, a DM, a presence key; the JetStream API's reads a member makes: direct gets, its
/// consumer's pulls and info, stream info, `$JS.API.INFO`; acks; the account's own `CONNZ`) and
/// the republished stream of what its chat and DM streams store. Each export is as broad as
/// nats-server allows (an import may take any part of it), so the account's JWT stays small:
/// what a side account reaches is its own imports, never the export. Answered any number of
/// times where an answer may come in parts (direct gets, pulls, `CONNZ` from every server),
/// once elsewhere. Public: only side accounts cotal signs import them (adoption refuses an
/// account that imports, unless its claims are kept, and a plan refuses kept claims that
/// import any of these: [`foreign_imports`]).
pub fn space_exports(token: &str) -> Vec<Export> {
    let mut out = vec![
        Export::service("posts", &format!("cotal.{token}.>")),
        Export::stream("live", &format!("{LIVE_PREFIX}.{token}.>")),
        Export::service("presence", &format!("$KV.cotal_presence_{token}.>")),
        Export::service("js-info", "$JS.API.INFO"),
        Export::streamed_service("direct-get", "$JS.API.DIRECT.GET.>"),
        Export::streamed_service("pull", "$JS.API.CONSUMER.MSG.NEXT.>"),
        Export::service("consumer-info", "$JS.API.CONSUMER.INFO.>"),
        Export::service("stream-info", "$JS.API.STREAM.INFO.>"),
        Export::service("ack", "$JS.ACK.>"),
        Export::streamed_service("connz", "$SYS.REQ.ACCOUNT.PING.CONNZ"),
    ];
    out.sort();
    out
}

/// What the system account exports: its accounts' connect and disconnect events (for the
/// observers) and `KICK` (for the evictors), and the read-only requests of the monitoring
/// account ([`monitor_imports`]).
pub fn system_exports() -> Vec<Export> {
    let mut out = vec![
        Export::stream("connect", "$SYS.ACCOUNT.*.CONNECT"),
        Export::stream("disconnect", "$SYS.ACCOUNT.*.DISCONNECT"),
        Export::service("kick", KICK),
    ];
    out.extend(monitor_subjects().into_iter().map(|(subject, many)| {
        if many {
            Export::streamed_service("monitor", &subject)
        } else {
            Export::service("monitor", &subject)
        }
    }));
    out.sort();
    out.dedup();
    out
}

/// The read-only `$SYS` requests the monitoring account imports, each with whether several
/// servers may answer it: every server's (`PING`) and one server's monitoring endpoints (one
/// wildcard subject covers both: nats-server refuses an account whose service exports or
/// imports overlap), and the per-account ones. One account's `CONNZ` and `STATZ` nats-server
/// lets only that account ask (an export of them in the system account's JWT is lost at its
/// first reload, and every account's `$SYS.REQ.ACCOUNT.PING.{CONNZ,STATZ}` is its own): a
/// monitor asks `$SYS.REQ.SERVER.PING.CONNZ` with the account as its filter (`acc`), and an
/// account's `CONNS` (what its `STATZ` duplicates).
pub fn monitor_subjects() -> Vec<(String, bool)> {
    let mut out = vec![("$SYS.REQ.SERVER.PING".to_string(), true)];
    for z in crate::space::permissions::MONITOR_SERVER_REQUESTS {
        out.push((format!("$SYS.REQ.SERVER.*.{z}"), true));
    }
    for z in crate::space::permissions::MONITOR_ACCOUNT_REQUESTS {
        out.push((format!("$SYS.REQ.ACCOUNT.*.{z}"), false));
    }
    out
}

/// What the monitoring account imports from the system account `system`.
pub fn monitor_imports(system: &str) -> Vec<Import> {
    let mut out: Vec<Import> = monitor_subjects()
        .into_iter()
        .map(|(subject, _)| Import::service("monitor", system, &subject))
        .collect();
    out.sort();
    out
}

/// The claims of the root's monitoring account: the monitor key scoped to its template, the
/// read-only `$SYS` requests imported, the handed-out users revoked.
pub fn monitor_claims(
    system: &str,
    monitor_key: &str,
    revocations: &jwt::Revocations,
) -> AccountNats {
    // The operator's own monitoring tools: no JetStream, no other limit.
    let mut n = nats(AccountLimits {
        conn: jwt::UNLIMITED,
        leaf: jwt::UNLIMITED,
        ..AccountLimits::system()
    });
    n.signing_keys = vec![SigningKey::Scoped(UserScope::new(
        monitor_key,
        SysRole::Monitor.name(),
        SysRole::Monitor.template(),
    ))];
    n.imports = monitor_imports(system);
    n.revocations = revocations.clone();
    n
}

/// The imports among `imports` (of an adopted account whose claims cotal keeps as they are)
/// that cotal's own exports would answer: from the system account `system` (its events,
/// `KICK`, the monitoring requests) or from a space's account (`spaces`: account public key to
/// wire token) of a subject overlapping what cotal exports there for side accounts. Nothing
/// exported those subjects before cotal did, so such an import lay dormant; it would reach a
/// space, or every tenant's connections, past the side accounts. A plan refuses them.
pub fn foreign_imports<'a>(
    imports: &'a [Import],
    system: &str,
    spaces: &std::collections::BTreeMap<String, String>,
) -> Vec<&'a Import> {
    imports
        .iter()
        .filter(|i| {
            let exported = if i.account == system {
                system_exports()
            } else if let Some(token) = spaces.get(&i.account) {
                space_exports(token)
            } else {
                return false;
            };
            exported
                .iter()
                .any(|e| subjects_overlap(&e.subject, &i.subject))
        })
        .collect()
}

/// Whether two NATS subjects or patterns can match one subject in common.
fn subjects_overlap(a: &str, b: &str) -> bool {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    for i in 0..a.len().max(b.len()) {
        match (a.get(i), b.get(i)) {
            (Some(&">"), Some(_)) | (Some(_), Some(&">")) => return true,
            (Some(x), Some(y)) if x == y || *x == "*" || *y == "*" => {}
            _ => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::space::permissions::member_inbox;

    /// A member's user permissions name the same subjects its account imports.
    fn member_permissions(token: &str, p: &Principal, grant: &Grant) -> Permissions {
        let mut perms = crate::space::permissions::member_grant(token, p, grant);
        // Replies arrive on its own inbox prefix; its account is its own, so nobody else's are there.
        debug_assert!(
            perms
                .subscribe
                .allow
                .contains(&format!("{}.>", member_inbox(&p.user_name())))
        );
        perms.publish.allow.sort();
        perms.subscribe.allow.sort();
        perms
    }

    #[test]
    fn a_members_account_carries_the_spaces_connection_and_payload_limits() {
        let alice = Principal::parse("acme.alice").unwrap();
        let g = grant(&["general"], &["general"]);
        let observer = claims(
            &SideRole::Observer,
            &space(false),
            None,
            &Default::default(),
        );
        assert_eq!(
            observer.limits.conn,
            jwt::UNLIMITED,
            "cotal's helper: no limit"
        );
        for role in [SideRole::Observer, SideRole::Member(alice)] {
            let active = claims(&role, &space(false), Some(&g), &Default::default());
            if matches!(role, SideRole::Member(_)) {
                assert_eq!((active.limits.conn, active.limits.payload), (100, 1 << 20));
            }
            assert!(!active.limits.jetstream_enabled());
            let suspended = claims(&role, &space(true), Some(&g), &Default::default());
            assert!(suspended.limits.is_suspended());
        }
    }

    #[test]
    fn a_kept_import_cotal_would_answer_is_foreign_and_one_of_the_exporters_own_is_not() {
        let spaces =
            std::collections::BTreeMap::from([("ABILL".to_string(), "billing".to_string())]);
        let imports = vec![
            Import::service("kick", "ASYS", "$SYS.REQ.SERVER.*.KICK"),
            Import::stream("events", "ASYS", "$SYS.ACCOUNT.ABILL.>"),
            Import::service("posts", "ABILL", "cotal.billing.chat.x.y.general"),
            Import::service("own", "ABILL", "billing.api.>"),
            Import::service("elsewhere", "AOTHER", "cotal.billing.>"),
        ];
        let foreign: Vec<&str> = foreign_imports(&imports, "ASYS", &spaces)
            .iter()
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(foreign, ["kick", "events", "posts"]);
        assert!(subjects_overlap("a.*.c", "a.b.>"));
        assert!(!subjects_overlap("a.b", "a.b.c"));
        assert!(!subjects_overlap("a.>", "a"));
    }
    use crate::trust::jwt::Exchange;

    fn grant(read: &[&str], post: &[&str]) -> Grant {
        Grant::new(
            read.iter().map(|s| s.to_string()).collect(),
            post.iter().map(|s| s.to_string()).collect(),
        )
        .unwrap()
    }

    fn space(suspended: bool) -> Space<'static> {
        Space {
            token: "alpha",
            account: "AALPHA",
            signing_key: "ASIGN",
            system: "ASYS",
            observer_key: Some("AOBS"),
            evictor_key: None,
            suspended,
            conn: 100,
            payload: 1 << 20,
        }
    }

    /// Whether the NATS pattern `export` covers `import` (a subject or a narrower pattern).
    fn covers(export: &str, import: &str) -> bool {
        let e: Vec<&str> = export.split('.').collect();
        let i: Vec<&str> = import.split('.').collect();
        for (n, t) in e.iter().enumerate() {
            match *t {
                ">" => return n < i.len(),
                "*" if i.get(n).is_some_and(|x| *x != ">") => {}
                _ if i.get(n) == Some(t) => {}
                _ => return false,
            }
        }
        e.len() == i.len()
    }

    #[test]
    fn every_member_import_is_covered_by_an_export_of_its_kind_and_mirrors_its_permissions() {
        let alice = Principal::parse("acme.alice").unwrap();
        let g = grant(&["general", "team.>"], &["general"]);
        let imports = member_imports("alpha", "AALPHA", &alice, &g);
        let exports = space_exports("alpha");
        for i in &imports {
            assert!(
                exports
                    .iter()
                    .any(|e| e.kind == i.kind && covers(&e.subject, &i.subject)),
                "no export covers {i:?}"
            );
        }
        // Every subject its users may publish is a service import's local subject (or its
        // post, mapped to one); every subject it may subscribe is a stream import's, or its
        // own inbox.
        let perms = member_permissions("alpha", &alice, &g);
        let mappings = member_mappings("alpha", &alice, &g);
        let local = |i: &Import| i.local_subject.clone().unwrap_or(i.subject.clone());
        for p in &perms.publish.allow {
            let target = mappings.get(p).map_or(p.clone(), |m| m[0].subject.clone());
            assert!(
                imports
                    .iter()
                    .any(|i| i.kind == Exchange::Service && local(i) == target),
                "{p} is granted but not imported"
            );
        }
        for s in &perms.subscribe.allow {
            assert!(
                s.starts_with("_INBOX_acme_alice.")
                    || imports
                        .iter()
                        .any(|i| i.kind == Exchange::Stream && local(i) == *s),
                "{s} is granted but not imported"
            );
        }
        // And nothing of the JetStream API beyond reads of its own consumer and the space's
        // presence and registry: no create, update, delete or purge of anything.
        for i in &imports {
            for api in ["CREATE", "UPDATE", "DELETE", "PURGE", "SNAPSHOT", "RESTORE"] {
                assert!(!i.subject.contains(api), "{i:?}");
            }
        }
    }

    #[test]
    fn a_side_accounts_claims_follow_its_role_and_the_spaces_suspension() {
        let alice = Principal::parse("acme.alice").unwrap();
        let g = grant(&["general"], &[]);
        let active = claims(
            &SideRole::Member(alice.clone()),
            &space(false),
            Some(&g),
            &Default::default(),
        );
        assert!(!active.limits.jetstream_enabled());
        assert_eq!(active.limits.conn, 100, "the space's connection limit");
        assert_eq!(
            active.signing_keys,
            [SigningKey::Plain("ASIGN".into())],
            "its users are signed by the space's signing key"
        );
        assert!(active.mappings.is_empty(), "no post channel, no mapping");
        let suspended = claims(
            &SideRole::Member(alice),
            &space(true),
            Some(&g),
            &Default::default(),
        );
        assert!(suspended.limits.is_suspended());
        let observer = claims(
            &SideRole::Observer,
            &space(false),
            None,
            &Default::default(),
        );
        assert_eq!(observer.signing_keys.len(), 1);
        assert!(
            observer
                .imports
                .iter()
                .all(|i| i.account == "ASYS" || i.account == "AALPHA")
        );
        assert!(
            observer
                .imports
                .iter()
                .any(|i| i.local_subject.as_deref() == Some("$SYS.REQ.ACCOUNT.AALPHA.CONNZ"))
        );
    }

    #[test]
    fn roles_read_back_as_written() {
        for role in [
            SideRole::Observer,
            SideRole::Evictor,
            SideRole::Member(Principal::parse("acme.alice").unwrap()),
        ] {
            let text = serde_json::to_string(&role).unwrap();
            assert_eq!(serde_json::from_str::<SideRole>(&text).unwrap(), role);
        }
        assert!(serde_json::from_str::<SideRole>("\"member:nodot\"").is_err());
        assert!(serde_json::from_str::<SideRole>("\"owner\"").is_err());
    }
}
