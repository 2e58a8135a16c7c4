//! Guards: the refusals of a plan, as values. Each names what it saw, the blast radius of the
//! refusal, and what to do next; the caller turns a [`Refusal`] into exit 3 once.
//!
//! Invariant: a guard only reads the observation; a refused plan has changed nothing.

use super::blast;
use super::list;
use super::removals::Removals;
use crate::desired::Desired;
use crate::diagnostic::Diagnostic;
use crate::error::Error;
use crate::model::{Listener, SpaceName};
use crate::observed::{
    BrokerProcess, BrokerRecordState, BrokerTrust, GenerationState, Inventory, JournalState,
    Observed,
};
use crate::render::Node;

/// Why a plan is refused: what was seen, the blast radius of the refusal, what to do next (a
/// [`Diagnostic`]; the caller turns it into exit 3 once).
pub type Refusal = Diagnostic;

/// The renderer refused the inventory (an account preloaded twice, one signed by another
/// operator): the records under `.cotal/auth/` are inconsistent.
pub fn render_refusal(why: String) -> Refusal {
    Diagnostic::refusal(
        format!("the inventory cannot be rendered: {why}."),
        NOTHING_CHANGED,
        "restore the records of .cotal/auth/ from a backup, or move the record it names out of that folder, then run `cotal plan`",
    )
}

impl From<Refusal> for Error {
    fn from(r: Refusal) -> Error {
        Error::refused(r)
    }
}

const NOTHING_CHANGED: &str = "none, nothing was changed.";

/// Refuse on anything that makes the tenant set or the trust uncertain.
pub fn guard_trust(observed: &Observed) -> Result<BrokerTrust, Refusal> {
    let broker = match &observed.broker {
        BrokerRecordState::Absent if !observed.tenant_material.is_empty() => {
            return Err(Diagnostic::refusal(
                format!(
                    "this root has no broker record (.cotal/auth/broker.json) but holds tenant material ({}): the operator that signed those tenants is missing, and a new one would orphan them.",
                    observed.tenant_material.join(", ")
                ),
                "every space of this root; nothing was changed.",
                "restore .cotal/auth/broker.json from a backup (`cotal init` refuses here)",
            ));
        }
        // A folder with `cotal.toml` and no root state is most often a checkout of the file
        // (a pull request's CI): the way forward is the broker's root or its exported state.
        BrokerRecordState::Absent => {
            return Err(Diagnostic::refusal(
                "this folder has no broker record (.cotal/auth/broker.json): it holds cotal.toml but not the broker's root, and a plan needs what the broker runs.",
                NOTHING_CHANGED,
                "on the broker host, run it in the broker's root (--root DIR, or COTAL_ROOT)",
            )
            .next("elsewhere (a pull request's CI), plan against the broker's exported state: `cotal plan --state state.json --state-key KEY`"));
        }
        BrokerRecordState::Corrupt { file, reason } => {
            return Err(Diagnostic::refusal(
                format!("the broker record {} is corrupt: {reason}.", file.display()),
                "every space of this broker; nothing was changed.",
                "restore the file from a backup; do not run `cotal init` over it (that would orphan every space)",
            ));
        }
        BrokerRecordState::Valid(b) => b.clone(),
    };
    inventory(&observed.inventory)?;
    if let GenerationState::Corrupt { file, reason } = &observed.generation {
        return Err(Diagnostic::refusal(
            format!(
                "the generation record {} is corrupt: {reason}.",
                file.display()
            ),
            "none yet; nothing was changed (promotion compares against it).",
            "restore it, or delete it to let the next apply start the generation again from 0",
        ));
    }
    if let JournalState::Corrupt { file, reason } = &observed.journal {
        return Err(Diagnostic::refusal(
            format!(
                "the apply journal {} is corrupt: {reason}; an interrupted apply cannot be identified.",
                file.display()
            ),
            "unknown; nothing was changed.",
            "inspect it; when the spaces it names are known, remove it and run `cotal plan`",
        ));
    }
    Ok(broker)
}

/// An adopted account whose kept claims import what cotal exports for side accounts (from the
/// system account or a space's account: [`crate::space::side_accounts::foreign_imports`]) would reach
/// past them once loaded: refused, naming each import.
pub fn guard_kept_imports(observed: &Observed, trust: &BrokerTrust) -> Result<(), Refusal> {
    let spaces: std::collections::BTreeMap<String, String> = observed
        .inventory
        .spaces
        .iter()
        .map(|(name, s)| (s.account_pub.clone(), name.token()))
        .collect();
    let mut found = Vec::new();
    for (name, space) in &observed.inventory.spaces {
        for i in
            crate::space::side_accounts::foreign_imports(&space.imports, &trust.sys_pub, &spaces)
        {
            found.push(format!(
                "{} imports {:?} from {}",
                name.quoted(),
                i.subject,
                if i.account == trust.sys_pub {
                    "the system account".to_string()
                } else {
                    format!("account {}", i.account)
                }
            ));
        }
    }
    if found.is_empty() {
        return Ok(());
    }
    Err(Diagnostic::refusal(
        format!(
            "an adopted account's kept claims import what cotal exports only for a space's own side accounts (its members, observer and evictor), so its users would reach another space or every tenant's connections:\n  {}",
            found.join("\n  ")
        ),
        NOTHING_CHANGED,
        "remove those imports from the account (`nsc delete import`, then adopt it again), or leave the account out of this broker",
    ))
}

/// An inventory with a record that is not a valid record of this broker is uncertain: the
/// record may be a real tenant.
fn inventory(inv: &Inventory) -> Result<(), Refusal> {
    if inv.corrupt.is_empty() {
        return Ok(());
    }
    let mut what = String::from(
        "the account inventory holds records that are not valid records of this broker; an unreadable record may be a real tenant, so the blast radius is unknown:",
    );
    for c in &inv.corrupt {
        what.push_str(&format!("\n  {}: {}", c.file.display(), c.reason));
    }
    let foreign = inv.corrupt.iter().any(|c| c.foreign_issuer.is_some());
    Err(Diagnostic::refusal(
        what,
        "unknown; nothing was changed.",
        if foreign {
            "a record signed by another operator belongs to another broker: move it out of .cotal/auth/ (and re-add that space here if it belongs here), or restore the right broker.json"
        } else {
            "restore each file from a backup, or move it out of .cotal/auth/ if it is not a tenant of this broker"
        },
    ))
}

/// Refuse when it is unknown whether this root's broker runs: a plan could neither say how a
/// removal deletes data (through the broker, or its folder) nor be sure a reload reaches it.
pub fn guard_liveness(observed: &Observed) -> Result<(), Refusal> {
    if let Some(found) = &observed.layout_conflict {
        return Err(Diagnostic::refusal(
            format!(
                "{found}. A root does not move between one server and a cluster in place: the streams of the one would not be in the stores of the other, so every space would start empty."
            ),
            NOTHING_CHANGED,
            "keep cotal.toml as it was; or, to accept that the spaces start with empty streams (their accounts and credentials are kept), `cotal down`, move the other layout's files aside (named above), then `cotal apply` and `cotal up`",
        ));
    }
    match observed.process() {
        BrokerProcess::Unknown { seen } => Err(Diagnostic::refusal(
            format!("cannot tell whether this root's broker is running: {seen}."),
            "unknown; nothing was changed.",
            "if the line above names this root's nats-server (its pidfile was lost), `cotal down` stops it; \
             if the port is another program's, leave it alone and move this root's port: change [broker] port in cotal.toml and run `cotal plan` (it judges the port the next start binds)",
        )),
        _ => Ok(()),
    }
}

/// Refuse removing a space from a stopped cluster: its replicated streams are assigned in every
/// node's JetStream meta layer, which only the running cluster's API deletes (deleting the
/// folders would leave the assignments, and a space added again under the name could not use
/// its streams until every node restarted).
pub fn guard_cluster_removals(
    desired: &Desired,
    observed: &Observed,
    removals: &Removals,
) -> Result<(), Refusal> {
    // Journaled removals too: an interrupted removal is finished through the running cluster.
    let fresh: Vec<&SpaceName> = removals.iter().map(|(n, _)| n).collect();
    if !desired.topology.is_cluster() || observed.is_running() || fresh.is_empty() {
        return Ok(());
    }
    Err(Diagnostic::refusal(
        format!(
            "removing {} from a stopped cluster cannot delete its streams: they are assigned in every node's JetStream meta layer, which only the running cluster deletes.",
            list(fresh)
        ),
        NOTHING_CHANGED,
        "`cotal up`, then apply the removal (cotal deletes the streams through the JetStream API before any node drops the account)",
    ))
}

/// Refuse a cluster some of whose nodes run and some do not: a reload must reach every node
/// (a client of a new account on a node that has not loaded it is cut off from the others).
/// With `--allow-degraded` a strict majority of running nodes is enough; the others get their
/// file for their next start.
pub fn guard_nodes(
    desired: &Desired,
    observed: &Observed,
    intent: &super::Intent,
) -> Result<(), Refusal> {
    let down = observed.nodes_down();
    if down.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = down.iter().map(|n| n.name()).collect();
    let (total, running) = (observed.nodes.len(), observed.nodes_running());
    let quorum = observed.has_quorum();
    // With one replica a stream lives on one node: a node down hides its streams, and a plan
    // could not tell a missing stream from one on that node.
    let replicated = desired.topology.replicas > 1;
    if intent.allow_degraded && quorum && replicated {
        return Ok(());
    }
    Err(Diagnostic::refusal(
        format!(
            "node{} {} of the cluster {} not running ({running} of {total} run), and an apply must reach every node: a node that has not loaded a change serves a tenant differently from the others.",
            if names.len() == 1 { "" } else { "s" },
            names.join(", "),
            if names.len() == 1 { "is" } else { "are" }
        ),
        NOTHING_CHANGED,
        if quorum && !replicated {
            "`cotal up` starts the nodes that are down (with replicas = 1 a node down hides the streams it holds, so --allow-degraded cannot proceed)"
        } else if quorum {
            "`cotal up` starts the nodes that are down; or, to change the cluster without them, apply with --allow-degraded (their files are written for their next start)"
        } else {
            "`cotal up` starts the nodes that are down (fewer than a majority run, so --allow-degraded cannot proceed: JetStream has no quorum)"
        },
    ))
}

/// With nodes down (`--allow-degraded`), refuse adding spaces whose streams need more replicas
/// than nodes run: JetStream cannot place them, so they could not be provisioned.
pub fn guard_degraded_adds<'a>(
    desired: &Desired,
    observed: &Observed,
    adds: impl IntoIterator<Item = &'a SpaceName>,
) -> Result<(), Refusal> {
    let down = observed.nodes_down().len();
    let replicas = desired.topology.replicas;
    let running = observed.nodes_running();
    let adds: Vec<&SpaceName> = adds.into_iter().collect();
    if down == 0 || adds.is_empty() || (replicas as usize) <= running {
        return Ok(());
    }
    Err(Diagnostic::refusal(
        format!(
            "cannot add {} with only {running} of {} nodes running: its streams and buckets have {} replicas, and JetStream places each replica on its own running node.",
            list(adds),
            observed.nodes.len(),
            replicas
        ),
        NOTHING_CHANGED,
        "`cotal up` starts the nodes that are down, then apply again (changes that add no space go through with --allow-degraded)",
    ))
}

/// Refuse a storage quota that would cap a space's artifact store below what it holds: the
/// provisioning after the reload lowers the store's `max_bytes` with the quota
/// ([`crate::space::streams::artifact_cap`]), and nats-server drops a stream's oldest messages to fit
/// a lower `max_bytes`, so the artifacts would be lost. Known only from live figures.
pub fn guard_artifact_shrink(desired: &Desired, observed: &Observed) -> Result<(), Refusal> {
    for (name, spec) in desired.specs() {
        let Some(space) = observed.inventory.spaces.get(name) else {
            continue;
        };
        if space.usage.source != crate::observed::UsageSource::Live {
            continue;
        }
        let store = crate::space::streams::artifact_stream(&name.token());
        let Some(held) = space.usage.streams.iter().find(|s| s.name == store) else {
            continue;
        };
        let quota = spec.limits.max_storage.map(|b| b.0);
        let replicas = desired.topology.replicas.max(1);
        let cap = crate::space::streams::artifact_cap(crate::space::streams::per_replica(
            quota, replicas,
        ));
        if held.bytes <= cap {
            continue;
        }
        let needed =
            (held.bytes * 2 + crate::space::streams::fixed_reservation()) * u64::from(replicas);
        return Err(Diagnostic::refusal(
            format!(
                "{}'s max_storage of {} caps its artifact store ({store}) at {}, below the {} of artifacts it holds: nats-server would drop the oldest artifacts to fit.",
                name.quoted(),
                crate::model::human_bytes(quota.unwrap_or(0)),
                crate::model::human_bytes(cap),
                crate::model::human_bytes(held.bytes),
            ),
            format!("{}'s artifacts; nothing was changed.", name.quoted()),
            format!(
                "set max_storage to at least {} in [spaces.{}.limits] of cotal.toml (the artifact store gets half of the quota past the fixed {}), or have the space's clients delete artifacts first",
                crate::model::human_bytes(needed),
                toml_key(name),
                crate::model::human_bytes(crate::space::streams::fixed_reservation()),
            ),
        ));
    }
    Ok(())
}

/// Refuse an open journal that local state contradicts: a journaled removal is finished only
/// when its pinned account is not another space's, the record of its name holds the pinned
/// account (or is gone, or holds the new account the journaled apply minted for that name),
/// and its folder does not record it as protected.
pub fn guard_journal(observed: &Observed) -> Result<(), Refusal> {
    let JournalState::Valid(j) = &observed.journal else {
        return Ok(());
    };
    let inv = &observed.inventory;
    let mut refusals = Vec::new();
    for r in &j.removals {
        for (name, s) in &inv.spaces {
            if name != &r.space && s.account_pub == r.account {
                refusals.push(format!(
                    "it would remove account {} under the name {}, but that account is the one of {}",
                    r.account,
                    r.space.quoted(),
                    name.quoted()
                ));
            }
        }
        if let Some(s) = inv.spaces.get(&r.space)
            && s.account_pub != r.account
            && !j
                .added
                .iter()
                .any(|a| a.space == r.space && a.account == s.account_pub)
        {
            refusals.push(format!(
                "it pins account {} for {}, but the record of {} holds account {}",
                r.account,
                r.space.quoted(),
                r.space.quoted(),
                s.account_pub
            ));
        }
        if observed.journal_protected.contains(&r.space) {
            refusals.push(format!(
                "it would remove {}, which .cotal/space.{}/lifecycle.json records as protected",
                r.space.quoted(),
                r.space.hex()
            ));
        }
    }
    if refusals.is_empty() {
        return Ok(());
    }
    Err(Diagnostic::refusal(
        format!(
            "the open journal .cotal/maintenance/journal.json (started {} by pid {} on {}) contradicts what is on disk, so it is not finished:\n  {}",
            j.started_at,
            j.pid,
            j.host,
            refusals.join("\n  ")
        ),
        "none; nothing was changed.",
        "find out where this journal came from; if no interrupted apply of this root wrote it, move it out of .cotal/maintenance/ and run `cotal plan`",
    ))
}

/// A space is brought back from its archive only when the broker does not still run its
/// streams half-alive ([`super::diff::still_running`]): it would serve them half.
pub fn guard_returns(
    desired: &Desired,
    observed: &crate::observed::Observed,
) -> Result<(), Refusal> {
    let stale: Vec<&SpaceName> = observed
        .inventory
        .spaces
        .iter()
        .filter(|(name, space)| {
            desired
                .spec(name)
                .is_some_and(|s| s.state != crate::model::SpaceState::Archived)
                && super::diff::still_running(observed, space)
        })
        .map(|(name, _)| name)
        .collect();
    if stale.is_empty() {
        return Ok(());
    }
    Err(Diagnostic::new(format!(
        "the broker still runs the streams of {} although {} archived (a return rolled back after a client of it connected): nats-server keeps them until it restarts, and loaded again they would answer their API but not a KV read.",
        list(stale.iter().copied()),
        if stale.len() == 1 { "it is" } else { "they are" }
    ))
    .blast(NOTHING_CHANGED)
    .tenants(stale.into_iter().cloned())
    .next("restart the broker (`cotal down`, then `cotal up`; every tenant reconnects), then apply again"))
}

/// Removal guards for removals the operator asks for now (journaled ones are finished): not
/// the last space, not a protected one, not one with live local processes.
pub fn guard_removals(
    desired: &Desired,
    observed: &Observed,
    removals: &Removals,
) -> Result<(), Refusal> {
    let inv = &observed.inventory;
    let fresh: Vec<&SpaceName> = removals.requested().collect();
    if fresh.is_empty() {
        return Ok(());
    }
    let mut refused = Diagnostic::default().blast(NOTHING_CHANGED);
    let mut say = |what: String, next: String| {
        if !refused.what.is_empty() {
            refused.what.push('\n');
        }
        refused.what.push_str(&what);
        refused.next.push(next);
    };
    if desired.spaces.is_empty() {
        say(
            format!(
                "removing {} would leave the broker with no space: that is the broker-wide teardown, not a space removal.",
                list(fresh.iter().copied())
            ),
            "keep at least one space in cotal.toml, or stop the broker (`cotal down`) and delete the root".into(),
        );
    }
    // Seed 000 §2.2 step 1: material the original kept for no named tenant cannot be reaped
    // with the space it may belong to, nor left to look like a survivor's.
    if !observed.unattributed_material.is_empty() {
        say(
            format!(
                "this root holds material the original Cotal kept for no named tenant ({}): removing {} would strand it if it is theirs, or leave it looking like a survivor's.",
                {
                    let m = &observed.unattributed_material;
                    let shown: Vec<String> = m
                        .iter()
                        .take(10)
                        .map(|f| crate::space::channels::displayable(f))
                        .collect();
                    match m.len() {
                        n if n > 10 => format!("{} and {} more", shown.join(", "), n - 10),
                        _ => shown.join(", "),
                    }
                },
                list(fresh.iter().copied())
            ),
            "give each file its tenant first: `cotal adopt` moves the P7 files into the space's folder while the root holds the one tenant they belong to; move agent secrets into .cotal/auth/creds/space.<hex of its name>/ yourself; or move what no tenant uses out of .cotal/. Then apply again".into(),
        );
    }
    for name in &fresh {
        let Some(space) = inv.spaces.get(*name) else {
            continue;
        };
        if space.protect_recorded {
            say(
                format!(
                    "{} is protected (protect = true was applied and is recorded in .cotal/space.{}/lifecycle.json); its removal would have this blast radius: {}.",
                    name.quoted(),
                    name.hex(),
                    blast::removal(name, &space.usage.streams, space.usage.connections).describe(),
                ),
                format!(
                    "first set `protect = false` in its [spaces.{}] table and run `cotal apply`, then remove it again (`cotal space rm`, or delete the table and `cotal apply`)",
                    toml_key(name)
                ),
            );
        }
        if !space.live_processes.is_empty() {
            say(
                format!(
                    "{} has live local processes (pids {}); removing it would pull the account from under them.",
                    name.quoted(),
                    space
                        .live_processes
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                "stop them, then apply again".into(),
            );
        }
    }
    if refused.what.is_empty() {
        Ok(())
    } else {
        Err(refused.tenants(fresh.into_iter().cloned()))
    }
}

/// A listener change cannot be reloaded: refuse it while the broker runs.
pub fn guard_listener(observed: &Observed, node: &Node) -> Result<(), Refusal> {
    if !observed.is_running() {
        return Ok(());
    }
    match listener_change(observed, node) {
        Some(old) => Err(Diagnostic::refusal(
            format!(
                "the listener changes from {old} to {}:{} while the broker runs; nats-server cannot move its listener on reload, so the reload would be refused.",
                node.host, node.port
            ),
            NOTHING_CHANGED,
            "`cotal down`, `cotal apply`, then `cotal up` (a restart drops every tenant's connections briefly)",
        )),
        None => Ok(()),
    }
}

/// The monitoring and websocket listeners cannot be opened, moved or closed on reload
/// (nats-server refuses: "config reload not supported for HTTPHost"): refuse their change
/// while the broker runs. Nor can it change its log rotation (measured), and cotal does not
/// rely on a reload to replace its account resolver: a broker adopted on a `full` resolver,
/// or a change of `[broker] log_rotation`, is refused while it runs, with the restart that
/// applies it.
pub fn guard_monitoring(observed: &Observed, node: &Node) -> Result<(), Refusal> {
    if !observed.is_running() {
        return Ok(());
    }
    let Some(conf) = observed.node_conf_text(&node.name) else {
        return Ok(());
    };
    // Turning client TLS on or off changes how every client, cotal's own connections
    // included, must speak to the listener: a restart, not a reload.
    let served_tls = crate::render::serves_tls(conf);
    if served_tls != node.tls.is_some() {
        return Err(Diagnostic::refusal(
            format!(
                "client TLS is turned {} while the broker runs; every client, cotal included, would have to change how it connects at the reload.",
                if served_tls { "off" } else { "on" }
            ),
            NOTHING_CHANGED,
            "`cotal down`, `cotal apply`, then `cotal up`, and give clients the new URL and CA (a rotation of the certificate is applied hot)",
        ));
    }
    // Routes already open stay as they are at a reload: turning route TLS on would leave them
    // plaintext while the config says TLS; a restart reopens every route.
    let routes_tls = crate::render::routes_tls(conf);
    let wants_routes_tls = node.cluster.as_ref().is_some_and(|c| c.tls.is_some());
    if routes_tls != wants_routes_tls {
        return Err(Diagnostic::refusal(
            format!(
                "route TLS ([cluster.tls]) is turned {} while the cluster runs; the routes already open would stay as they are at the reload.",
                if routes_tls { "off" } else { "on" }
            ),
            NOTHING_CHANGED,
            "`cotal down`, `cotal apply`, then `cotal up` (every route reopens; a rotation of the certificate is applied hot)",
        ));
    }
    // A node reloaded with another route credential closes the routes open with the old one,
    // and the others refuse it until they reload too: a rotation is for a stopped cluster.
    let rotation = node.cluster.as_ref().map_or(0, |c| c.rotation);
    if crate::trust::route_auth::rotation_of(conf) != rotation {
        return Err(Diagnostic::refusal(
            format!(
                "the route credential was rotated (rotation {rotation}) while the cluster runs; a reload would close the routes open with the old one."
            ),
            NOTHING_CHANGED,
            "`cotal down`, then `cotal apply` (or `cotal up`, which applies it first); give every node on another machine its new include file",
        ));
    }
    // A resolver is set up when nats-server starts, and its log rotation cannot change at a
    // reload (measured): a broker adopted on another resolver, or a change of `log_rotation`,
    // needs a restart.
    if let Some(resolver) = crate::render::resolver_of(conf).filter(|r| r != "MEMORY") {
        return Err(Diagnostic::refusal(
            format!(
                "the running broker resolves accounts with `resolver: {resolver}`; cotal serves them from its config (`resolver: MEMORY`), and a resolver is set up when nats-server starts: cotal does not rely on a reload to replace it."
            ),
            NOTHING_CHANGED,
            "`cotal down`, `cotal apply`, then `cotal up` (a restart drops every tenant's connections briefly)",
        ));
    }
    if crate::render::rotates_logs(conf) != node.log_rotation {
        return Err(Diagnostic::refusal(
            format!(
                "log rotation (`[broker] log_rotation`) is turned {} while the broker runs; nats-server cannot change it on reload, so the reload would be refused.",
                if node.log_rotation { "on" } else { "off" }
            ),
            NOTHING_CHANGED,
            "`cotal down`, `cotal apply`, then `cotal up` (a restart drops every tenant's connections briefly)",
        ));
    }
    let before = crate::render::fixed_listeners(conf);
    let after = crate::render::fixed_listeners(&render_listeners(node));
    if before == after {
        return Ok(());
    }
    let word = |t: &str| {
        if t.is_empty() {
            "none".to_string()
        } else {
            t.trim_end().replace('\n', "; ")
        }
    };
    Err(Diagnostic::refusal(
        format!(
            "the monitoring or websocket listener changes ({} -> {}) while the broker runs; nats-server cannot open, move or close them on reload, so the reload would be refused.",
            word(&before),
            word(&after)
        ),
        NOTHING_CHANGED,
        "`cotal down`, `cotal apply`, then `cotal up` (a restart drops every tenant's connections briefly)",
    ))
}

/// An include whose settings cotal would not render as nats-server reads them, or that sets
/// what cotal owns: refused, each problem at its line of the include.
pub fn guard_include(observed: &Observed) -> Result<(), Refusal> {
    let Some(include) = &observed.include else {
        return Ok(());
    };
    if include.problems.is_empty() {
        return Ok(());
    }
    Err(Diagnostic::refusal(
        format!(
            "the include {} cannot be inlined:\n  {}",
            include.path,
            include.problems.join("\n  ")
        ),
        NOTHING_CHANGED,
        "set what cotal owns in cotal.toml instead, quote durations (\"10s\") and write sizes in bytes; then plan again",
    ))
}

/// The listener lines a node renders, without accounts (only the listeners are compared).
fn render_listeners(node: &Node) -> String {
    let mut text = String::new();
    if let Some(line) = node.monitoring_line() {
        text.push_str(&line);
        text.push('\n');
    }
    if let Some(w) = &node.websocket {
        text.push_str(&crate::render::websocket_block(w, node.tls.as_ref()));
    }
    text
}

/// Adding a space needs a system signing key (its $SYS creds): scoped keys, the legacy
/// `sys.seed` (replaced by scoped keys in the same apply), or a rotation that makes new ones.
pub fn guard_sys_keys<'a>(
    observed: &Observed,
    system: Option<&super::system::SystemReissue>,
    adds: impl IntoIterator<Item = &'a SpaceName>,
) -> Result<(), Refusal> {
    let adds: Vec<&SpaceName> = adds.into_iter().collect();
    let keyless = matches!(observed.system.keys, crate::observed::SysKeysState::None);
    if adds.is_empty() || !keyless || system.is_some_and(|s| s.rotate) {
        return Ok(());
    }
    Err(Diagnostic::refusal(
        format!(
            "cannot add {}: this root keeps no system signing key (neither scoped keys in .cotal/auth/broker.json nor .cotal/auth/sys.seed), so a new space could not get its $SYS credentials.",
            list(adds)
        ),
        NOTHING_CHANGED,
        "`cotal rotate sys` gives the system account new keys (with the broker stopped when it runs: `cotal down`, `cotal rotate sys`, `cotal up`), then add the space again",
    ))
}

/// The listener of the node's promoted config, when it differs from the node's.
pub fn listener_change(observed: &Observed, node: &Node) -> Option<Listener> {
    let view = &observed.node(&node.name)?.server_conf.as_ref()?.view;
    let (host, port) = (view.host.clone()?, view.port?);
    (host != node.host || port != node.port).then_some(Listener { host, port })
}

/// The TOML key of a space's table.
fn toml_key(name: &SpaceName) -> String {
    let bare = name
        .as_str()
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare {
        name.to_string()
    } else {
        name.quoted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::PromotedConfig;

    fn observed_with(conf: &str, process: BrokerProcess) -> Observed {
        let mut o = crate::testing::observed(&[]);
        o.nodes[0].server_conf = Some(PromotedConfig::new(conf.to_string()));
        o.nodes[0].process = process;
        o
    }

    #[test]
    fn a_kept_import_of_what_cotal_exports_for_side_accounts_is_refused_by_name() {
        use crate::testing::{observed, space};
        let (trust, _) = crate::testing::minted(&[]);
        let spec = crate::model::SpaceSpec::default();
        let billing = space("ABILL", &spec);
        let mut team = space("ATEAM", &spec);
        team.kept_claims = vec!["imports".into()];
        // Its own design: billing's own API, which cotal does not export.
        team.imports = vec![crate::trust::jwt::Import::service(
            "api",
            "ABILL",
            "billing.api.>",
        )];
        let o = observed(&[("billing", billing.clone()), ("team", team.clone())]);
        assert!(guard_kept_imports(&o, &trust).is_ok());
        // What cotal exports for billing's members, and the system account's KICK: refused.
        team.imports.push(crate::trust::jwt::Import::service(
            "posts",
            "ABILL",
            "cotal.billing.>",
        ));
        team.imports.push(crate::trust::jwt::Import::service(
            "kick",
            &trust.sys_pub,
            "$SYS.REQ.SERVER.*.KICK",
        ));
        let o = observed(&[("billing", billing), ("team", team)]);
        let why = guard_kept_imports(&o, &trust).unwrap_err().to_string();
        assert!(
            why.contains("\"team\" imports \"cotal.billing.>\" from account ABILL")
                && why.contains(
                    "\"team\" imports \"$SYS.REQ.SERVER.*.KICK\" from the system account"
                )
                && !why.contains("billing.api"),
            "{why}"
        );
    }

    #[test]
    fn a_quota_that_would_truncate_the_artifact_store_is_refused() {
        use crate::testing::{observed, space};
        let mut keep = space("AK", &crate::model::SpaceSpec::default());
        keep.usage.source = crate::observed::UsageSource::Live;
        keep.usage.streams = vec![crate::observed::StreamUsage {
            name: "OBJ_cotal_artifacts_keep".into(),
            messages: Some(3),
            bytes: 20 << 20,
        }];
        let o = observed(&[("keep", keep)]);
        let at = |quota: &str| {
            let text = format!("version = 1\n[spaces.keep.limits]\nmax_storage = \"{quota}\"\n");
            guard_artifact_shrink(&crate::desired::parse(&text, "f").unwrap(), &o)
        };
        let refusal = at("32MiB").unwrap_err().to_string();
        assert!(
            refusal.contains("\"keep\"'s max_storage of 32 MiB caps its artifact store (OBJ_cotal_artifacts_keep) at 15.5 MiB, below the 20 MiB of artifacts it holds"),
            "{refusal}"
        );
        assert!(
            refusal.contains("at least 41 MiB in [spaces.keep.limits]"),
            "{refusal}"
        );
        assert!(at("41MiB").is_ok());
        // Unlimited: the original's 4 GiB.
        let unlimited = crate::desired::parse("version = 1\n[spaces.keep]\n", "f").unwrap();
        assert!(guard_artifact_shrink(&unlimited, &o).is_ok());
    }

    fn node(port: u16) -> Node {
        Node {
            cluster: None,
            name: "local".into(),
            host: "127.0.0.1".into(),
            port,
            store_dir: "/s".into(),
            max_file_store: None,
            max_memory_store: None,
            tls: None,
            monitoring: None,
            websocket: None,
            include: None,
            log_rotation: true,
        }
    }

    #[test]
    fn an_adopted_resolver_or_a_log_rotation_change_is_refused_only_while_the_broker_runs() {
        let full = "host: \"127.0.0.1\"\nport: 4222\nresolver: {type: full, dir: \"./jwt\"}\n";
        let running = observed_with(full, BrokerProcess::Running { pid: 1 });
        let quiet = Node {
            log_rotation: false,
            ..node(4222)
        };
        let refusal = guard_monitoring(&running, &quiet).unwrap_err();
        assert!(
            refusal
                .what
                .contains("resolves accounts with `resolver: {type: full"),
            "{}",
            refusal.what
        );
        assert!(refusal.next[0].starts_with("`cotal down`, `cotal apply`"));
        guard_monitoring(&observed_with(full, BrokerProcess::Stopped), &quiet).unwrap();
        // Adopted without rotation: kept off while it runs; turning it on needs a restart.
        let memory = "host: \"127.0.0.1\"\nport: 4222\nresolver: MEMORY\n";
        let running = observed_with(memory, BrokerProcess::Running { pid: 1 });
        guard_monitoring(&running, &quiet).unwrap();
        let refusal = guard_monitoring(&running, &node(4222)).unwrap_err();
        assert!(refusal.what.contains("log rotation"), "{}", refusal.what);
    }

    #[test]
    fn a_listener_change_is_refused_only_while_the_broker_runs() {
        let conf = "host: \"127.0.0.1\"\nport: 4222\n";
        let running = observed_with(conf, BrokerProcess::Running { pid: 1 });
        let refusal = guard_listener(&running, &node(4333)).unwrap_err();
        assert!(
            refusal
                .what
                .contains("from 127.0.0.1:4222 to 127.0.0.1:4333")
        );
        assert_eq!(refusal.blast.as_deref(), Some(NOTHING_CHANGED));
        assert!(refusal.next[0].starts_with("`cotal down`, `cotal apply`"));
        guard_listener(&running, &node(4222)).unwrap();
        let stopped = observed_with(conf, BrokerProcess::Stopped);
        guard_listener(&stopped, &node(4333)).unwrap();
    }

    #[test]
    fn an_unknown_broker_is_refused_naming_what_was_seen() {
        let o = observed_with(
            "",
            BrokerProcess::Unknown {
                seen: "pid 9 (x) listens on 127.0.0.1:4222".into(),
            },
        );
        let refusal = guard_liveness(&o).unwrap_err();
        assert!(refusal.to_string().contains("pid 9 (x) listens"));
        assert_eq!(
            Error::from(refusal).exit_code(),
            crate::error::exit::REFUSED
        );
        guard_liveness(&observed_with("", BrokerProcess::Stopped)).unwrap();
    }

    #[test]
    fn a_refusal_renders_its_parts_on_lines_of_their_own() {
        let r = Diagnostic::refusal("it is so.", "none.", "do this");
        assert_eq!(
            r.to_string(),
            "it is so.\nblast radius: none.\nnext: do this"
        );
    }
}
