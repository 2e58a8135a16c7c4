//! `status`: the root, the broker (on a cluster every node, asked through the system account),
//! the generation, the stores, the system keys, and every space's derived state, figures,
//! limits and protection, as one value (its JSON is `cotal status --format json`). Read-only;
//! takes no lock; works with a broken `cotal.toml` (and says so).

use crate::error::Result;
use crate::observe;
use crate::observed::{BrokerProcess, BrokerRecordState, JournalState, Observed};
use crate::space::lifecycle;
use crate::store::Root;
use serde::Serialize;

/// Bumped when the JSON shape of `status` changes incompatibly.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Serialize)]
pub struct Status {
    pub format_version: u32,
    pub root: String,
    /// Why `cotal.toml` could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub desired_error: Option<String>,
    /// Records that cannot be trusted (status exits 3 when there are any).
    pub problems: Vec<String>,
    pub broker: BrokerStatus,
    pub generation: u64,
    pub journal_open: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<String>,
    pub jetstream: JetStreamStatus,
    /// The broker's open-file limit and how many spaces it holds (each stream and bucket holds
    /// a file open).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_files: Option<OpenFilesStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsStatus>,
    /// The routes' certificate (`[cluster.tls]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub route_tls: Option<TlsStatus>,
    pub system: SystemStatus,
    /// A cluster's nodes (absent for one server).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeStatus>,
    pub spaces: Vec<SpaceStatus>,
}

/// One node of a cluster: its process, and what it says through the system account.
#[derive(Serialize)]
pub struct NodeStatus {
    pub name: String,
    /// `running`, `stopped` or `unknown`.
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Another machine runs it (`local = false`): `running` means it answered through the
    /// cluster's system account.
    pub remote: bool,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// VARZ's `config_digest`: the config the node has loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_digest: Option<String>,
    /// Whether that is the rendering of the generation on disk (`None`: not asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_current: Option<bool>,
    /// Whether the node is the JetStream meta leader.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_leader: Option<bool>,
    /// Why the node could not be asked, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The system account's keys as the root keeps them, and the $SYS creds they signed.
#[derive(Serialize)]
pub struct SystemStatus {
    /// `scoped`, `legacy` (an unscoped sys.seed, replaced at the next apply) or `none`.
    pub keys: &'static str,
    /// Whether each space gets a connection evictor; its KICK reaches every client of the
    /// broker (NATS's design).
    pub evictor: bool,
    /// The earliest expiry (unix seconds) of the spaces' $SYS creds; apply renews them within
    /// ten days of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub creds_expire: Option<i64>,
}

/// What the broker's JetStream can hold, what the applied spaces commit it to, what it holds.
#[derive(Serialize)]
pub struct JetStreamStatus {
    pub file: StoreStatus,
    pub memory: StoreStatus,
}

#[derive(Serialize)]
pub struct OpenFilesStatus {
    pub limit: u64,
    pub source: crate::observed::OpenFilesSource,
    /// How many spaces the limit holds.
    pub spaces_within: u64,
    /// Files the applied spaces' streams and buckets hold open (and the broker's own).
    pub needed: u64,
}

#[derive(Serialize)]
pub struct StoreStatus {
    pub size: u64,
    pub source: crate::observed::CapacitySource,
    /// The applied spaces' quotas (or, without one, their reservations).
    pub committed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available: Option<u64>,
}

impl StoreStatus {
    fn of(store: &crate::observed::Store, committed: u64) -> Self {
        StoreStatus {
            size: store.size,
            source: store.source,
            committed,
            used: store.used,
            available: store.used.map(|u| store.size.saturating_sub(u)),
        }
    }
}

#[derive(Serialize)]
pub struct BrokerStatus {
    pub state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// What was seen when the state is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seen: Option<String>,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
}

#[derive(Serialize)]
pub struct SpaceStatus {
    pub name: String,
    pub account: String,
    #[serde(flatten)]
    pub view: lifecycle::View,
    pub streams: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<u64>,
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
    /// The applied protection.
    pub protect: bool,
    /// Why, when and by whom it was suspended (a suspended space whose apply recorded it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspension: Option<crate::model::Suspension>,
    /// When and by whom it was archived (its record says so).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived: Option<crate::model::Archival>,
    /// Its move to another broker, as this (source) root records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relocation: Option<crate::adopt::relocation::Relocation>,
    /// The applied limits (from the account JWT; absent: unlimited).
    pub limits: crate::model::Limits,
    /// On a running cluster: the fewest replicas of the space's streams, and whether every
    /// replica of every stream is current.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas_current: Option<bool>,
    /// The channel registry as the running broker holds it (key -> value), when read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels: Option<std::collections::BTreeMap<String, serde_json::Value>>,
    /// Streams and buckets whose config drifted from what cotal provisions.
    pub drifted_streams: usize,
}

/// The client listener's certificate (`[broker.tls]`).
#[derive(Serialize)]
pub struct TlsStatus {
    pub cert: String,
    pub fingerprint: String,
    /// Its expiry (unix seconds).
    pub not_after: i64,
}

impl TlsStatus {
    /// The declared certificate's, when it could be read.
    fn of(
        declared: &Option<crate::desired::tls_config::TlsSettings>,
        observed: &Option<crate::observed::ObservedTls>,
    ) -> Option<TlsStatus> {
        let (declared, f) = (declared.as_ref()?, observed.as_ref()?.facts.as_ref()?);
        Some(TlsStatus {
            cert: declared.cert.path.clone(),
            fingerprint: f.fingerprint.clone(),
            not_after: f.not_after,
        })
    }
}

/// The problem a broken `cotal.toml` is, as every format of `status` carries it.
pub fn desired_problem(why: &str) -> String {
    format!("cotal.toml is broken (plan and apply refuse until it is fixed): {why}")
}

/// The status of the root, and the observation it was made from.
pub fn status(root: &Root) -> Result<(Status, Observed)> {
    let (desired, digest, desired_error) = observe::desired_for_reading(root)?;
    let observed = observe::observe_for_status(root, &desired, digest)?;
    let server = observed.server.as_ref();
    let mut problems = observed.problems();
    problems.extend(observed.node_problems());
    if let Some(include) = &observed.include {
        problems.extend(include.problems.iter().cloned());
    }
    if let Some(left) = crate::store::partial_copy::leftover(root) {
        problems.push(format!(
            "a killed backup left {} (a partial copy of tenant data or of the root's trust, mode 0700): the next `cotal space backup` or `cotal root backup` removes it, or delete it yourself",
            crate::report::visible(&left.display().to_string())
        ));
    }
    // The client listener's and the routes' TLS: files that cannot serve, an expired
    // certificate, or one that expires within 30 days.
    for (tls, declared) in [
        (&observed.tls, &desired.broker.tls),
        (&observed.route_tls, &desired.topology.route_tls),
    ] {
        let Some(tls) = tls else { continue };
        problems.extend(tls.problems.iter().cloned());
        if let (Some(f), Some(declared)) = (&tls.facts, declared) {
            if f.not_after <= observed.now {
                problems.push(format!(
                    "the TLS certificate {} expired at {}",
                    declared.cert.path,
                    crate::model::stamp(f.not_after)
                ));
            } else if f.not_after - observed.now <= crate::plan::tls::EXPIRY_WARNING {
                problems.push(crate::plan::tls::expiring(
                    &declared.cert.path,
                    f.not_after,
                    observed.now,
                ));
            }
        }
    }
    let nodes = node_status(root, &desired, &observed);
    // Every format carries every problem: a broken `cotal.toml` is the first (a collector
    // reading `problems` or `cotal_problems` never publishes a healthy broker while plan and
    // apply refuse).
    if let Some(why) = &desired_error {
        problems.insert(0, desired_problem(why));
    }
    let status = Status {
        format_version: FORMAT_VERSION,
        root: root.dir().display().to_string(),
        desired_error,
        problems,
        broker: BrokerStatus {
            state: observed.process().word(),
            pid: observed.process().pid(),
            seen: match observed.process() {
                BrokerProcess::Unknown { seen } => Some(seen),
                _ => None,
            },
            url: format!("nats://{}", observed.listener()),
            version: server.map(|s| s.version.clone()),
            started: server.map(|s| s.started.clone()),
            operator: match &observed.broker {
                BrokerRecordState::Valid(t) => Some(t.operator_pub.clone()),
                _ => None,
            },
        },
        generation: observed.generation.generation(),
        journal_open: matches!(observed.journal, JournalState::Valid(_)),
        cut: crate::store::cut::load(root)?.map(|c| c.at),
        jetstream: {
            // What the applied spaces commit (their records' limits), not what cotal.toml asks.
            let applied = crate::plan::capacity::applied(&observed);
            JetStreamStatus {
                file: StoreStatus::of(&observed.capacity.file, applied.file),
                memory: StoreStatus::of(&observed.capacity.memory, applied.memory),
            }
        },
        tls: TlsStatus::of(&desired.broker.tls, &observed.tls),
        route_tls: TlsStatus::of(&desired.topology.route_tls, &observed.route_tls),
        open_files: observed.capacity.open_files.map(|f| OpenFilesStatus {
            limit: f.limit,
            source: f.source,
            spaces_within: crate::plan::capacity::spaces_within(f.limit),
            needed: crate::plan::capacity::OPEN_FILES_RESERVED
                + observed.inventory.spaces.len() as u64
                    * crate::plan::capacity::open_files_per_space(),
        }),
        system: SystemStatus {
            keys: match observed.system.keys {
                crate::observed::SysKeysState::Scoped(_) => "scoped",
                crate::observed::SysKeysState::Legacy => "legacy",
                crate::observed::SysKeysState::None => "none",
            },
            evictor: observed
                .system
                .key(crate::space::permissions::SysRole::Evictor)
                .is_some(),
            creds_expire: observed
                .inventory
                .spaces
                .values()
                .flat_map(|s| s.sys_users.iter().filter_map(|u| u.expires_at))
                .min(),
        },
        nodes,
        spaces: observed
            .inventory
            .spaces
            .iter()
            .map(|(n, s)| SpaceStatus {
                name: n.to_string(),
                account: s.account_pub.clone(),
                view: lifecycle::view(n, s, &observed),
                streams: s.usage.streams.len(),
                messages: s.usage.total_messages(),
                bytes: s.usage.total_bytes(),
                connections: s.usage.connections,
                protect: s.protect_recorded,
                suspension: s.suspension_recorded.clone(),
                archived: s.archived.clone(),
                relocation: s.relocation.clone(),
                limits: crate::plan::applied_spec(s).limits,
                replicas: s.replication.map(|(n, _)| n),
                replicas_current: s.replication.map(|(_, c)| c),
                drifted_streams: s.stream_drift.len(),
                channels: match &s.registry {
                    crate::observed::RegistryState::Read(r) => Some(
                        r.iter()
                            .map(|(k, e)| (k.clone(), e.value.clone()))
                            .collect(),
                    ),
                    _ => None,
                },
            })
            .collect(),
    };
    Ok((status, observed))
}

/// Every node of a cluster, asked through the system account when it runs: its server id,
/// version, loaded config (against the rendering of the inventory) and whether it leads
/// JetStream's meta layer.
fn node_status(
    root: &Root,
    desired: &crate::desired::Desired,
    observed: &crate::observed::Observed,
) -> Vec<NodeStatus> {
    // A single server is the broker line itself; a cluster lists its nodes.
    if !observed.is_cluster() {
        return Vec::new();
    }
    let mut out: Vec<NodeStatus> = observed
        .nodes
        .iter()
        .map(|n| NodeStatus {
            name: n.name().to_string(),
            state: n.process.word(),
            pid: n.process.pid(),
            remote: n.remote(),
            url: format!("nats://{}", n.listener),
            server_id: None,
            version: None,
            config_digest: None,
            config_current: None,
            meta_leader: None,
            error: None,
        })
        .collect();
    if !observed.is_running() {
        return out;
    }
    let BrokerRecordState::Valid(trust) = &observed.broker else {
        return out;
    };
    let running = match crate::broker::Running::connect(root, &desired.topology, observed) {
        Ok(r) => r,
        Err(e) => {
            for n in out.iter_mut().filter(|n| n.state == "running") {
                n.error = Some(e.to_string());
            }
            return out;
        }
    };
    let leader = running
        .control()
        .meta_group(running.server_ids().len())
        .ok()
        .flatten()
        .map(|(leader, _)| leader);
    let rendered = crate::observe::expected_digests(root, desired, observed, trust);
    let ids = running.server_ids();
    for n in out.iter_mut() {
        let Some(id) = ids.get(&n.name) else { continue };
        n.server_id = Some(id.clone());
        n.meta_leader = Some(leader.as_deref() == Some(n.name.as_str()));
        match running.control().varz_of(id) {
            Ok(v) => {
                n.config_current = Some(
                    rendered
                        .iter()
                        .any(|(name, d)| *name == n.name && *d == v.digest),
                );
                n.version = Some(v.version);
                n.config_digest = Some(v.digest);
            }
            Err(e) => n.error = Some(e.to_string()),
        }
    }
    out
}
