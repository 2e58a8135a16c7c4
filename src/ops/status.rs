//! `status`: the root, the broker (on a cluster every node, asked through the system account),
//! the generation, the stores, the system keys, and every space's derived state, figures,
//! limits and protection, as one value (its JSON is `cotal status --format json`). Read-only;
//! takes no lock; works with a broken `cotal.toml` (and says so).

use crate::error::Result;
use crate::observe;
use crate::observed::{BrokerProcess, BrokerRecordState, JournalState, Observed};
use crate::space::lifecycle;
use crate::store::Root;

pub use crate::report::status::*;

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
