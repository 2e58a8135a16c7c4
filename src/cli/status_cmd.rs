//! `cotal status`: the root, the broker, the generation, and every space's derived state,
//! figures, limits and protection. Read-only; takes no lock. It works with a broken
//! `cotal.toml` (and says so), and names every record it cannot trust, exiting 3 like `plan`.

use super::Global;
use crate::error::Result;
use crate::lifecycle;
use crate::model::{human_bytes, human_count};
use crate::observe;
use crate::observed::{BrokerProcess, BrokerRecordState, JournalState};
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

/// Bumped when the JSON shape of `status` changes incompatibly.
const FORMAT_VERSION: u32 = 1;

#[derive(Serialize)]
struct Status {
    format_version: u32,
    root: String,
    /// Why `cotal.toml` could not be read, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    desired_error: Option<String>,
    /// Records that cannot be trusted (status exits 3 when there are any).
    problems: Vec<String>,
    broker: BrokerStatus,
    generation: u64,
    journal_open: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    cut: Option<String>,
    jetstream: JetStreamStatus,
    system: SystemStatus,
    /// A cluster's nodes (absent for one server).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    nodes: Vec<NodeStatus>,
    spaces: Vec<SpaceStatus>,
}

/// One node of a cluster: its process, and what it says through the system account.
#[derive(Serialize)]
struct NodeStatus {
    name: String,
    /// `running`, `stopped` or `unknown`.
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    /// Another machine runs it (`local = false`): `running` means it answered through the
    /// cluster's system account.
    remote: bool,
    url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    server_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    /// VARZ's `config_digest`: the config the node has loaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    config_digest: Option<String>,
    /// Whether that is the rendering of the generation on disk (`None`: not asked).
    #[serde(skip_serializing_if = "Option::is_none")]
    config_current: Option<bool>,
    /// Whether the node is the JetStream meta leader.
    #[serde(skip_serializing_if = "Option::is_none")]
    meta_leader: Option<bool>,
    /// Why the node could not be asked, when it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The system account's keys as the root keeps them, and the $SYS creds they signed.
#[derive(Serialize)]
struct SystemStatus {
    /// `scoped`, `legacy` (an unscoped sys.seed, replaced at the next apply) or `none`.
    keys: &'static str,
    /// Whether each space gets a connection evictor; its KICK reaches every client of the
    /// broker (NATS's design).
    evictor: bool,
    /// The earliest expiry (unix seconds) of the spaces' $SYS creds; apply renews them within
    /// ten days of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    creds_expire: Option<i64>,
}

/// What the broker's JetStream can hold, what the applied spaces commit it to, what it holds.
#[derive(Serialize)]
struct JetStreamStatus {
    file: StoreStatus,
    memory: StoreStatus,
}

#[derive(Serialize)]
struct StoreStatus {
    size: u64,
    source: crate::observed::CapacitySource,
    /// The applied spaces' quotas (or, without one, their reservations).
    committed: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    used: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    available: Option<u64>,
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
struct BrokerStatus {
    state: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pid: Option<u32>,
    /// What was seen when the state is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    seen: Option<String>,
    url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    started: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    operator: Option<String>,
}

#[derive(Serialize)]
struct SpaceStatus {
    name: String,
    account: String,
    #[serde(flatten)]
    view: lifecycle::View,
    streams: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    messages: Option<u64>,
    bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    connections: Option<u64>,
    /// The applied protection.
    protect: bool,
    /// The applied limits (from the account JWT; absent: unlimited).
    limits: crate::model::Limits,
    /// On a running cluster: the fewest replicas of the space's streams, and whether every
    /// replica of every stream is current.
    #[serde(skip_serializing_if = "Option::is_none")]
    replicas: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    replicas_current: Option<bool>,
    /// The channel registry as the running broker holds it (key -> value), when read.
    #[serde(skip_serializing_if = "Option::is_none")]
    channels: Option<std::collections::BTreeMap<String, serde_json::Value>>,
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let root = global.root()?;
    let (desired, digest, desired_error) = observe::desired_for_reading(&root)?;
    let observed = observe::observe_for_status(&root, &desired, digest)?;
    let server = observed.server.as_ref();
    let mut problems = observed.problems();
    problems.extend(observed.node_problems());
    let nodes = node_status(&root, &desired, &observed);
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
        cut: crate::store::cut::load(&root)?.map(|c| c.at),
        jetstream: {
            // What the applied spaces commit (their records' limits), not what cotal.toml asks.
            let applied = crate::plan::capacity::applied(&observed);
            JetStreamStatus {
                file: StoreStatus::of(&observed.capacity.file, applied.file),
                memory: StoreStatus::of(&observed.capacity.memory, applied.memory),
            }
        },
        system: SystemStatus {
            keys: match observed.system.keys {
                crate::observed::SysKeysState::Scoped(_) => "scoped",
                crate::observed::SysKeysState::Legacy => "legacy",
                crate::observed::SysKeysState::None => "none",
            },
            evictor: observed
                .system
                .key(crate::permissions::SysRole::Evictor)
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
                limits: crate::plan::applied_spec(s).limits,
                replicas: s.replication.map(|(n, _)| n),
                replicas_current: s.replication.map(|(_, c)| c),
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
    match args.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&status).expect("status serializes")
        ),
        Format::Text => print!("{}", text(&status, &observed)),
    }
    Ok(if status.problems.is_empty() {
        crate::error::exit::OK
    } else {
        crate::error::exit::REFUSED
    })
}

/// Every node of a cluster, asked through the system account when it runs: its server id,
/// version, loaded config (against the rendering of the inventory) and whether it leads
/// JetStream's meta layer.
fn node_status(
    root: &crate::store::Root,
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
    let preloads = crate::observed::preloads(&observed.inventory.spaces);
    let rendered: Vec<(String, String)> = crate::plan::nodes(desired, observed)
        .iter()
        .filter_map(|node| {
            crate::render::render(trust, &preloads, node)
                .ok()
                .map(|r| (node.name.clone(), r.digest))
        })
        .collect();
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

fn text(s: &Status, observed: &crate::observed::Observed) -> String {
    let mut out = String::new();
    root_and_problems(&mut out, s);
    broker_line(&mut out, s);
    node_lines(&mut out, s);
    generation_store_and_keys(&mut out, s, observed);
    space_table(&mut out, s);
    out
}

/// The root, a broken `cotal.toml`, and what cannot be trusted.
fn root_and_problems(out: &mut String, s: &Status) {
    let _ = writeln!(out, "root        {}", s.root);
    if let Some(why) = &s.desired_error {
        let _ = writeln!(
            out,
            "cotal.toml  BROKEN: {}\n            (what is on disk is shown; plan and apply refuse until it is fixed)",
            why.replace('\n', "\n            ")
        );
    }
    for p in &s.problems {
        let _ = writeln!(out, "PROBLEM     {p}");
    }
}

/// The broker: its state and listener (a cluster: how many nodes run), its process.
fn broker_line(out: &mut String, s: &Status) {
    if !s.nodes.is_empty() {
        let running = s.nodes.iter().filter(|n| n.state == "running").count();
        let _ = write!(
            out,
            "broker      {}: a cluster, {running} of {} nodes running",
            s.broker.state,
            s.nodes.len()
        );
    } else {
        let _ = write!(out, "broker      {} {}", s.broker.state, s.broker.url);
    }
    if let Some(pid) = s.broker.pid.filter(|_| s.nodes.is_empty()) {
        let _ = write!(out, " (pid {pid}");
        if let Some(v) = &s.broker.version {
            let _ = write!(out, ", nats-server {v}");
        }
        if let Some(start) = &s.broker.started {
            let _ = write!(out, ", up since {start}");
        }
        out.push(')');
    }
    if let Some(seen) = &s.broker.seen {
        let _ = write!(
            out,
            "\n            ({seen}; every verb that writes refuses until this is resolved)"
        );
    }
    out.push('\n');
}

/// A cluster's nodes, one line each.
fn node_lines(out: &mut String, s: &Status) {
    for n in &s.nodes {
        let _ = write!(
            out,
            "  node {:<8} {}{} {}",
            n.name,
            n.state,
            if n.remote { " (remote)" } else { "" },
            n.url
        );
        if let Some(pid) = n.pid {
            let _ = write!(out, " (pid {pid}");
            if let Some(v) = &n.version {
                let _ = write!(out, ", nats-server {v}");
            }
            out.push(')');
        }
        if let Some(id) = &n.server_id {
            let _ = write!(out, " id {}", &id[..id.len().min(8)]);
        }
        match n.config_current {
            Some(true) => out.push_str(", config of this generation"),
            Some(false) => out.push_str(", config NOT of this generation (apply or restart)"),
            None => {}
        }
        if n.meta_leader == Some(true) {
            out.push_str(", JetStream leader");
        }
        if let Some(e) = &n.error {
            let _ = write!(out, ", not asked: {e}");
        }
        out.push('\n');
    }
}

/// The generation, JetStream's stores, the system keys, a cut and an open journal.
fn generation_store_and_keys(out: &mut String, s: &Status, observed: &crate::observed::Observed) {
    let _ = writeln!(out, "generation  {}", s.generation);
    for (label, st) in [
        ("jetstream   file  ", &s.jetstream.file),
        ("            memory", &s.jetstream.memory),
    ] {
        let _ = writeln!(
            out,
            "{label} {} committed of {} ({}){}",
            human_bytes(st.committed),
            human_bytes(st.size),
            st.source,
            match (st.used, st.available) {
                (Some(u), Some(a)) =>
                    format!(", {} used, {} available", human_bytes(u), human_bytes(a)),
                _ => String::new(),
            }
        );
    }
    let keys = if matches!(observed.broker, BrokerRecordState::Valid(_)) {
        format!("{} keys", s.system.keys)
    } else {
        "(no broker record)".to_string()
    };
    let _ = writeln!(
        out,
        "system      {keys}{}{}",
        match s.system.creds_expire {
            Some(t) => format!(
                ", $SYS creds expire from {} (apply renews them)",
                crate::model::stamp(t)
            ),
            None => String::new(),
        },
        if s.system.evictor {
            "\n            evictor creds minted per space: their KICK is broker-wide by NATS's design (any client of any space); `cotal space evict` is scoped to one space"
        } else {
            ""
        }
    );
    if let Some(cut) = &s.cut {
        let _ = writeln!(
            out,
            "cut         taken at {} (backup and restore allowed; `cotal up` clears it)",
            cut
        );
    }
    if let JournalState::Valid(j) = &observed.journal {
        let _ = writeln!(
            out,
            "journal     OPEN since {} (pid {} on {}): run `cotal apply` to finish it",
            j.started_at, j.pid, j.host
        );
    }
}

/// Every space, one line each (and why one is not servable).
fn space_table(out: &mut String, s: &Status) {
    let _ = writeln!(
        out,
        "\n{:<20} {:<13} {:<9} {:>7} {:>10} {:>10} {:>6}  account",
        "space", "state", "servable", "streams", "messages", "bytes", "conns"
    );
    for sp in &s.spaces {
        let space = crate::model::SpaceName::parse(&sp.name).expect("inventory names are valid");
        let _ = writeln!(
            out,
            "{:<20} {:<13} {:<9} {:>7} {:>10} {:>10} {:>6}  {}",
            space.quoted(),
            sp.view.state.to_string(),
            if sp.view.servable { "yes" } else { "no" },
            sp.streams,
            sp.messages.map(human_count).unwrap_or_else(|| "-".into()),
            human_bytes(sp.bytes),
            sp.connections
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            sp.account
        );
        if !sp.view.why_not.is_empty() && !sp.view.servable {
            let _ = writeln!(out, "{:<20} ({})", "", sp.view.why_not.join(", "));
        }
    }
    if s.spaces.is_empty() {
        out.push_str(if s.problems.is_empty() {
            "(no spaces)\n"
        } else {
            "(no space can be listed with certainty: see the problems above)\n"
        });
    }
}
