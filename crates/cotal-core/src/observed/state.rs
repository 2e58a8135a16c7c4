//! The secret-free state: what `cotal plan --state FILE` plans against with no root, no seed
//! and no broker (Terraform's state, for pull-request review). It holds the public part of an
//! observation: the operator's and the system account's public keys and JWTs, the promoted
//! config and generation, and per space its account key, signing key, JWT, applied limits,
//! state and protection, the revocations recorded, its $SYS users' public keys and the streams
//! seen. JWTs and public keys are not secrets (every client of the broker sees them); seeds never
//! enter it.
//!
//! Invariants: pure (no IO, no clock: the caller gives the time); [`export`] refuses an
//! observation that is not certain (a record that cannot be trusted, an open journal);
//! [`observed`] of an export plans like the root it came from, without live figures.

use crate::diagnostic::Diagnostic;
use crate::model::{Limits, Listener, SpaceName, SpaceState};
use crate::observed::{
    BrokerProcess, BrokerRecordState, BrokerTrust, Capacity, GenerationRecord, GenerationState,
    Inventory, JournalState, Observed, ObservedSpace, PromotedConfig, StreamUsage, SysKeysState,
    SysUser, SystemObserved, Usage, UsageSource,
};
use crate::space::permissions::SysRole;
use crate::trust::jwt::{self, Revocations};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Bumped when the state's JSON shape changes incompatibly.
pub const FORMAT_VERSION: u32 = 1;

/// The state file (`schemas/state.schema.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    pub format_version: u32,
    /// When it was exported (RFC 3339).
    pub exported_at: String,
    /// The promoted generation record.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub generation: Option<GenerationRecord>,
    pub broker: BrokerState,
    /// The promoted `server.conf` (it holds JWTs and paths, no seed).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_conf: Option<String>,
    /// A cluster's nodes, each with its promoted config (absent for one server).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub nodes: Vec<NodeState>,
    pub spaces: BTreeMap<SpaceName, AppliedSpace>,
    /// The root's state key's signature of everything above ([`crate::trust::state_signature`]);
    /// absent in a state exported before states were signed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub signature: Option<crate::trust::state_signature::Signature>,
}

/// One node of a cluster at the export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeState {
    pub name: String,
    pub listener: Listener,
    /// Where its data lives (the recorded store).
    pub store_dir: PathBuf,
    /// The identity that store holds (`.cotal-store-id`), when recorded.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub store_id: Option<String>,
    /// That store held no JetStream data at the export (absent: it did, or it is not known).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub store_empty: bool,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_conf: Option<String>,
    pub running: bool,
    /// Whether another machine runs it (`local = false`).
    #[serde(default)]
    pub remote: bool,
}

/// The broker: trust (public), where it listens and stores, whether it ran at the export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BrokerState {
    pub operator: String,
    pub operator_jwt: String,
    pub system_account: String,
    pub system_jwt: String,
    /// The system account's kept signing keys by role (`scoped`), or `legacy` / `none`.
    pub system_keys: SystemKeys,
    #[serde(default)]
    pub previous_control: bool,
    pub listener: Listener,
    /// Where the broker's data lives (a single server's recorded store).
    pub store_dir: PathBuf,
    /// The identity that store holds (`.cotal-store-id`), when recorded.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub store_id: Option<String>,
    /// That store held no JetStream data at the export (absent: it did, or it is not known).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub store_empty: bool,
    /// The root's folder on the broker host: a plan from the state resolves `cotal.toml`'s
    /// relative paths (`store_dir`) against it, as the host does.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub root: Option<PathBuf>,
    pub capacity: Capacity,
    pub running: bool,
    /// `[broker.tls]`'s certificate as read at the export (paths, fingerprint, expiry, names;
    /// never a key): a plan from the state renders the same `tls {}` block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::observed::TlsFacts>,
    /// The revocations `cotal creds revoke --system` recorded (user public keys and times), so
    /// a plan from the state puts the same ones in force.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub handed_out_revoked: crate::trust::jwt::Revocations,
    /// When each monitoring user the ledger records expires, so a plan from the state drops
    /// the same expired revocations the host's would.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub handed_out_expires: std::collections::BTreeMap<String, i64>,
    /// The original Cotal's material that names no tenant, as the host found it: a plan from
    /// the state refuses a removal the host would refuse.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unattributed_material: Vec<String>,
    /// How many times the route credential was rotated (the comment each node's config names).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub route_rotation: u64,
    /// `[cluster.tls]`'s certificate as read at the export, the same way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route_tls: Option<crate::observed::TlsFacts>,
    /// The monitoring account (its key and JWT), when the root has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitor_account: Option<SideAccountState>,
    /// Monitoring users handed out as users of the system account, still valid.
    #[serde(default, skip_serializing_if = "is_zero_usize")]
    pub legacy_monitor_users: usize,
}

fn is_zero_usize(n: &usize) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SystemKeys {
    Scoped(BTreeMap<SysRole, String>),
    Legacy,
    None,
}

/// One space as applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppliedSpace {
    pub account: String,
    pub signing_key: String,
    pub jwt: String,
    /// Read from the JWT, for people (the JWT is what is planned against).
    pub state: SpaceState,
    pub limits: Limits,
    pub protect: bool,
    /// Why, when and by whom the space was suspended (a suspended space whose apply recorded
    /// it).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub suspension: Option<crate::model::Suspension>,
    /// When and by whom the space was archived (its record says so: `state` is then
    /// `archived`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub archived: Option<crate::model::Archival>,
    /// Its move to another broker, as the source records it (its removal needs the receipt).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub relocation: Option<crate::adopt::relocation::Relocation>,
    /// The revocations recorded for the next apply (`cotal creds revoke`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub revoked: Revocations,
    pub sys_creds: bool,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub sys_users: Vec<SysUser>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub sys_issued: Vec<SysUser>,
    /// The streams and buckets seen at the export.
    #[serde(default)]
    pub streams: Vec<String>,
    /// The channel registry as read at the export (the broker ran and the space was active).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub channels: Option<crate::space::channels::Registry>,
    /// Its side accounts (its members', its observer's, its evictor's): each key and JWT.
    #[serde(
        rename = "side-accounts",
        skip_serializing_if = "BTreeMap::is_empty",
        default
    )]
    pub side_accounts: BTreeMap<crate::space::side_accounts::SideRole, SideAccountState>,
    /// The revocations recorded for the users of each side account (by its key).
    #[serde(
        rename = "side-revoked",
        skip_serializing_if = "BTreeMap::is_empty",
        default
    )]
    pub side_revoked: BTreeMap<String, Revocations>,
}

/// A side account as applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SideAccountState {
    pub account: String,
    pub jwt: String,
}

/// Where a node's data lives and the identity of that store: the recorded store, else the
/// node's own (a root that never recorded one).
fn data_home(n: &crate::observed::ObservedNode) -> (PathBuf, Option<String>) {
    match &n.store_home {
        Some(h) => (h.dir.clone(), h.id.clone()),
        None => (n.store_dir.clone(), n.store_id.clone()),
    }
}

/// The public part of `observed`, exported at `now` (RFC 3339) from the root at `root` (its
/// folder, so a plan from the state resolves `cotal.toml`'s paths as the host does); refused
/// when the observation is not certain.
pub fn export(
    observed: &Observed,
    now: &str,
    root: Option<&std::path::Path>,
) -> Result<StateFile, Diagnostic> {
    let problems = observed.problems();
    if !problems.is_empty() {
        return Err(Diagnostic::new(format!(
            "the root holds records that cannot be trusted: {}",
            problems.join("; ")
        )));
    }
    if matches!(observed.journal, JournalState::Valid(_)) {
        return Err(Diagnostic::new(
            "an apply was interrupted (the journal is open): the state would not be one the broker runs.",
        )
        .next("run `cotal apply` to finish it, then export"));
    }
    let BrokerRecordState::Valid(trust) = &observed.broker else {
        return Err("the broker record is missing".into());
    };
    let system_keys = match &observed.system.keys {
        SysKeysState::Scoped(keys) => SystemKeys::Scoped(keys.clone()),
        SysKeysState::Legacy => SystemKeys::Legacy,
        SysKeysState::None => SystemKeys::None,
    };
    Ok(StateFile {
        format_version: FORMAT_VERSION,
        exported_at: now.to_string(),
        generation: match &observed.generation {
            GenerationState::Valid(g) => Some(g.clone()),
            _ => None,
        },
        broker: BrokerState {
            operator: trust.operator_pub.clone(),
            operator_jwt: trust.operator_jwt.clone(),
            system_account: trust.sys_pub.clone(),
            system_jwt: trust.sys_jwt.clone(),
            system_keys,
            previous_control: observed.system.previous_control,
            listener: observed.listener().clone(),
            store_dir: data_home(observed.first()).0,
            store_id: data_home(observed.first()).1,
            store_empty: !observed.first().store_holds_data,
            root: root.map(std::path::Path::to_path_buf),
            capacity: observed.capacity,
            running: observed.is_running(),
            tls: observed.tls.as_ref().and_then(|t| t.facts.clone()),
            route_tls: observed.route_tls.as_ref().and_then(|t| t.facts.clone()),
            handed_out_revoked: observed.system.handed_out_revoked.clone(),
            handed_out_expires: observed.system.handed_out_expires.clone(),
            unattributed_material: observed.unattributed_material.clone(),
            monitor_account: trust
                .monitor
                .as_ref()
                .map(|(account, jwt)| SideAccountState {
                    account: account.clone(),
                    jwt: jwt.clone(),
                }),
            legacy_monitor_users: observed.system.legacy_monitor_users,
            route_rotation: observed.route_rotation,
        },
        server_conf: observed.server_conf_text().map(str::to_string),
        // A single server is the broker the fields above describe (the format of states
        // exported before clusters); a cluster lists every node.
        nodes: if observed.is_cluster() {
            observed
                .nodes
                .iter()
                .map(|n| NodeState {
                    name: n.name().to_string(),
                    listener: n.listener.clone(),
                    store_dir: data_home(n).0,
                    store_id: data_home(n).1,
                    store_empty: !n.store_holds_data,
                    server_conf: n.server_conf.as_ref().map(|c| c.text.clone()),
                    running: n.process.is_running(),
                    remote: n.remote(),
                })
                .collect()
        } else {
            Vec::new()
        },
        spaces: observed
            .inventory
            .spaces
            .iter()
            .map(|(name, s)| {
                let spec = crate::plan::applied_spec(s);
                (
                    name.clone(),
                    AppliedSpace {
                        account: s.account_pub.clone(),
                        signing_key: s.signing_pub.clone(),
                        jwt: s.jwt.clone(),
                        state: spec.state,
                        limits: spec.limits,
                        protect: s.protect_recorded,
                        suspension: s.suspension_recorded.clone(),
                        archived: s.archived.clone(),
                        relocation: s.relocation.clone(),
                        revoked: s.revoked.clone(),
                        sys_creds: s.sys_creds_present,
                        sys_users: s.sys_users.clone(),
                        sys_issued: s.sys_issued.clone(),
                        streams: s.usage.streams.iter().map(|u| u.name.clone()).collect(),
                        channels: match &s.registry {
                            crate::observed::RegistryState::Read(r) => Some(r.clone()),
                            _ => None,
                        },
                        side_accounts: s
                            .sides
                            .iter()
                            .map(|(role, side)| {
                                (
                                    role.clone(),
                                    SideAccountState {
                                        account: side.account_pub.clone(),
                                        jwt: side.jwt.clone(),
                                    },
                                )
                            })
                            .collect(),
                        side_revoked: s.side_revoked.clone(),
                    },
                )
            })
            .collect(),
        signature: None,
    })
}

/// Plan input from a state: what the root looked like at the export, without live figures
/// (`live_error` says so when the broker ran). Refuses a state whose JWTs do not verify or
/// do not match the keys it names.
pub fn observed(
    state: &StateFile,
    desired: &crate::desired::Desired,
    desired_digest: String,
    now: i64,
) -> Result<Observed, String> {
    if state.format_version != FORMAT_VERSION {
        return Err(format!(
            "state format_version {} is not {FORMAT_VERSION}, the one this cotal reads",
            state.format_version
        ));
    }
    let b = &state.broker;
    let operator: jwt::Claims<jwt::OperatorNats> =
        jwt::decode_verified(&b.operator_jwt).map_err(|e| format!("operator JWT: {e}"))?;
    if operator.sub != b.operator {
        return Err("the operator JWT is not the operator's".into());
    }
    let sys: jwt::Claims<jwt::AccountNats> =
        jwt::decode_verified(&b.system_jwt).map_err(|e| format!("system JWT: {e}"))?;
    let trust = BrokerTrust {
        operator_pub: b.operator.clone(),
        operator_signing: operator.nats.signing_keys.clone(),
        operator_jwt: b.operator_jwt.clone(),
        sys_pub: b.system_account.clone(),
        sys_jwt: b.system_jwt.clone(),
        monitor: b
            .monitor_account
            .as_ref()
            .map(|m| (m.account.clone(), m.jwt.clone())),
    };
    let monitor = match &b.monitor_account {
        Some(m) => {
            let c: jwt::Claims<jwt::AccountNats> = jwt::decode_verified(&m.jwt)
                .map_err(|e| format!("the monitoring account's JWT: {e}"))?;
            if c.sub != m.account || !trust.signs_accounts(&c.iss) {
                return Err(
                    "the monitoring account's JWT is not its key's, or not signed by this operator"
                        .into(),
                );
            }
            Some((m.account.clone(), c.nats))
        }
        None => None,
    };
    let mut inventory = Inventory::default();
    for (name, s) in &state.spaces {
        inventory
            .spaces
            .insert(name.clone(), observed_space(name, s, &trust)?);
    }
    let keys = match &b.system_keys {
        SystemKeys::Scoped(k) => SysKeysState::Scoped(k.clone()),
        SystemKeys::Legacy => SysKeysState::Legacy,
        SystemKeys::None => SysKeysState::None,
    };
    let templates_current = match &keys {
        SysKeysState::Scoped(k) => crate::space::permissions::sys_templates_current(k, &sys.nats),
        _ => true,
    };
    Ok(Observed {
        broker: BrokerRecordState::Valid(trust),
        tenant_material: Vec::new(),
        unattributed_material: b.unattributed_material.clone(),
        system: SystemObserved {
            keys,
            revocations: sys.nats.revocations.clone(),
            templates_current,
            previous_control: b.previous_control,
            handed_out_revoked: b.handed_out_revoked.clone(),
            handed_out_expires: b.handed_out_expires.clone(),
            monitor,
            legacy_monitor_users: b.legacy_monitor_users,
        },
        inventory,
        generation: match &state.generation {
            Some(g) => GenerationState::Valid(g.clone()),
            None => GenerationState::Absent,
        },
        journal: JournalState::Absent,
        desired_digest,
        live_error: b.running.then(|| {
            format!(
                "planned from a state exported at {}, not from the broker: `cotal apply` on the broker host plans again under the lock",
                state.exported_at
            )
        }),
        server: None,
        journal_protected: Default::default(),
        capacity: declared_capacity(b.capacity, desired),
        now,
        layout_conflict: None,
        // Read by `plan --state` from the folder of the cotal.toml it plans.
        include: None,
        tls: b.tls.clone().map(|facts| crate::observed::ObservedTls {
            facts: Some(facts),
            problems: Vec::new(),
        }),
        route_rotation: b.route_rotation,
        route_tls: b.route_tls.clone().map(|facts| crate::observed::ObservedTls {
            facts: Some(facts),
            problems: Vec::new(),
        }),
        nodes: if state.nodes.is_empty() {
            vec![exported_node(
                ExportedNode {
                    name: crate::desired::topology::LONE_NODE,
                    listener: &b.listener,
                    home: &b.store_dir,
                    store_id: b.store_id.as_deref(),
                    store_empty: b.store_empty,
                    server_conf: state.server_conf.as_deref(),
                    running: b.running,
                    remote: false,
                },
                declared_store(state, desired, crate::desired::topology::LONE_NODE),
            )]
        } else {
            state
                .nodes
                .iter()
                .map(|n| {
                    exported_node(
                        ExportedNode {
                            name: &n.name,
                            listener: &n.listener,
                            home: &n.store_dir,
                            store_id: n.store_id.as_deref(),
                            store_empty: n.store_empty,
                            server_conf: n.server_conf.as_deref(),
                            running: n.running,
                            remote: n.remote,
                        },
                        declared_store(state, desired, &n.name),
                    )
                })
                .collect()
        },
    })
}

/// One space of the state as a plan observes it: its JWT and each side account's checked
/// against the trust (its key's, signed by this operator), its records, and its streams known
/// by name only (no live figures).
fn observed_space(
    name: &SpaceName,
    s: &AppliedSpace,
    trust: &BrokerTrust,
) -> Result<ObservedSpace, String> {
    let claims: jwt::Claims<jwt::AccountNats> = jwt::decode_verified(&s.jwt)
        .map_err(|e| format!("the JWT of space {}: {e}", name.quoted()))?;
    if claims.sub != s.account || !trust.signs_accounts(&claims.iss) {
        return Err(format!(
            "the JWT of space {} is not its account's, or not signed by this operator",
            name.quoted()
        ));
    }
    let mut space = ObservedSpace::recorded(
        s.account.clone(),
        s.signing_key.clone(),
        s.jwt.clone(),
        claims.nats.limits,
        claims.nats.revocations,
    );
    space.exports = claims.nats.exports.clone();
    space.imports = claims.nats.imports.clone();
    for (role, side) in &s.side_accounts {
        let c: jwt::Claims<jwt::AccountNats> = jwt::decode_verified(&side.jwt)
            .map_err(|e| format!("the {role} side account of space {}: {e}", name.quoted()))?;
        if c.sub != side.account || !trust.signs_accounts(&c.iss) {
            return Err(format!(
                "the {role} side account of space {} is not its key's, or not signed by this operator",
                name.quoted()
            ));
        }
        space.sides.insert(
            role.clone(),
            crate::observed::ObservedSide {
                account_pub: side.account.clone(),
                jwt: side.jwt.clone(),
                claims: c.nats,
            },
        );
    }
    space.archived = s.archived.clone();
    space.relocation = s.relocation.clone();
    space.revoked = s.revoked.clone();
    space.side_revoked = s.side_revoked.clone();
    space.protect_recorded = s.protect;
    space.suspension_recorded = s.suspension.clone();
    space.usage = Usage {
        source: UsageSource::Unknown,
        streams: s
            .streams
            .iter()
            .map(|n| StreamUsage {
                name: n.clone(),
                messages: None,
                bytes: 0,
            })
            .collect(),
        connections: None,
        per_account: Vec::new(),
        by_member: Default::default(),
    };
    space.sys_creds_present = s.sys_creds;
    space.sys_users = s.sys_users.clone();
    space.sys_issued = s.sys_issued.clone();
    space.registry = match &s.channels {
        Some(r) => crate::observed::RegistryState::Read(r.clone()),
        None => crate::observed::RegistryState::Unknown,
    };
    Ok(space)
}

/// The store sizes a plan from the state judges by: what `cotal.toml` declares (a pull request
/// setting `max_file_store` is checked against what the stores hold, as the host checks it),
/// else what the host found at the export.
fn declared_capacity(
    mut capacity: crate::observed::Capacity,
    desired: &crate::desired::Desired,
) -> crate::observed::Capacity {
    use crate::observed::CapacitySource;
    if let Some(size) = desired.broker.max_file_store {
        capacity.file.size = size.0;
        capacity.file.source = CapacitySource::Configured;
    }
    if let Some(size) = desired.broker.max_memory_store {
        capacity.memory.size = size.0;
        capacity.memory.source = CapacitySource::Configured;
    }
    capacity
}

/// Where `cotal.toml` puts node `name`'s store on the broker host: its `store_dir` against the
/// root the state was exported from (`None`: a state exported before it named its root, or a
/// node the file does not declare; the store is then taken to be where the data lives).
fn declared_store(
    state: &StateFile,
    desired: &crate::desired::Desired,
    name: &str,
) -> Option<PathBuf> {
    let root = state.broker.root.as_ref()?;
    let spec = desired.topology.nodes.iter().find(|n| n.name == name)?;
    Some(crate::desired::topology::resolve(root, &spec.store_dir))
}

/// A node as the state recorded it.
struct ExportedNode<'a> {
    name: &'a str,
    listener: &'a Listener,
    /// Where its data lives.
    home: &'a std::path::Path,
    store_id: Option<&'a str>,
    store_empty: bool,
    server_conf: Option<&'a str>,
    running: bool,
    remote: bool,
}

/// A node as a state recorded it: on another host, so its files have no path here and a
/// running node is [`BrokerProcess::Answering`] (no pid of this machine). Its store is where
/// `cotal.toml` puts it (`declared`, else where the data lives): a pull request moving the
/// store plans the move the host would.
fn exported_node(n: ExportedNode<'_>, declared: Option<PathBuf>) -> crate::observed::ObservedNode {
    let ExportedNode {
        name,
        listener,
        home,
        store_id,
        store_empty,
        server_conf,
        running,
        remote,
    } = n;
    let store_dir = declared.unwrap_or_else(|| home.to_path_buf());
    crate::observed::ObservedNode {
        spec: crate::desired::topology::NodeSpec {
            name: name.to_string(),
            host: listener.host.clone(),
            port: listener.port,
            cluster_port: None,
            store_dir: store_dir.to_string_lossy().into_owned(),
            config: None,
            local: !remote,
        },
        files: crate::desired::topology::NodeFiles {
            name: name.to_string(),
            dir: PathBuf::new(),
            conf: PathBuf::new(),
            conf_next: PathBuf::new(),
            conf_prev: PathBuf::new(),
            pid: PathBuf::new(),
            log: PathBuf::new(),
        },
        listener: listener.clone(),
        server_conf: server_conf.map(|t| PromotedConfig::new(t.to_string())),
        process: if running {
            BrokerProcess::Answering
        } else {
            BrokerProcess::Stopped
        },
        store_home: Some(crate::observed::StoreHome {
            dir: home.to_path_buf(),
            id: store_id.map(str::to_string),
        }),
        // The store there is known only when it is the one the data lives in.
        store_id: (store_dir == home)
            .then(|| store_id.map(str::to_string))
            .flatten(),
        store_holds_data: !store_empty,
        store_dir,
    }
}

/// The largest state file `plan --state` reads (64 MiB): a state of 10,000 spaces with full
/// registries is a few MiB; a bigger one is refused unread.
pub const MAX_STATE_BYTES: u64 = 64 << 20;

/// Serde's skip test for a count that is absent when zero.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_states_roles_serialize_as_the_jwt_names_them() {
        let keys = SystemKeys::Scoped(BTreeMap::from([(SysRole::Observer, "AOBS".to_string())]));
        assert_eq!(
            serde_json::to_string(&keys).unwrap(),
            r#"{"scoped":{"observer":"AOBS"}}"#
        );
    }
}
