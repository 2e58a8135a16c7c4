//! `cotal status` as one value and its renderings: the document (its JSON is `cotal status
//! --format json`, described by `schemas/status.schema.json`), the text an operator reads, and
//! the OpenMetrics text a collector scrapes. The edge (`cotal::ops::status`) fills the document
//! from an observation; everything here is a plain function of it.

use crate::model::{human_bytes, human_count};
use crate::observed::{BrokerRecordState, JournalState};
use crate::space::lifecycle;
use serde::Serialize;
use std::fmt::Write as _;

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
    pub fn of(store: &crate::observed::Store, committed: u64) -> Self {
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
    pub fn of(
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

/// The status as OpenMetrics text: per space its state, servability, connections, streams,
/// messages, bytes and drift; the broker's generation, nodes up, problems and certificate
/// expiry. Gauges only; every space is a `space` label (its name, escaped).
pub fn prometheus(s: &Status) -> String {
    fn label(v: &str) -> String {
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    }
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, samples: Vec<(String, f64)>| {
        let _ = writeln!(out, "# HELP cotal_{name} {help}");
        let _ = writeln!(out, "# TYPE cotal_{name} gauge");
        for (labels, value) in samples {
            let _ = writeln!(out, "cotal_{name}{labels} {value}");
        }
    };
    let up = |state: &str| if state == "running" { 1.0 } else { 0.0 };
    gauge(
        "broker_up",
        "Whether the broker runs (1) or not (0).",
        vec![(String::new(), up(s.broker.state))],
    );
    gauge(
        "generation",
        "The promoted generation.",
        vec![(String::new(), s.generation as f64)],
    );
    gauge(
        "problems",
        "Records or settings status cannot trust (status exits 3 when above 0).",
        vec![(String::new(), s.problems.len() as f64)],
    );
    if !s.nodes.is_empty() {
        gauge(
            "nodes_up",
            "Nodes of the cluster that run.",
            vec![(String::new(), s.nodes.iter().map(|n| up(n.state)).sum())],
        );
    }
    let certificates: Vec<(String, f64)> = [("client", &s.tls), ("routes", &s.route_tls)]
        .into_iter()
        .filter_map(|(listener, t)| {
            let t = t.as_ref()?;
            Some((
                format!("{{listener=\"{listener}\",cert=\"{}\"}}", label(&t.cert)),
                t.not_after as f64,
            ))
        })
        .collect();
    if !certificates.is_empty() {
        gauge(
            "tls_certificate_expiry_seconds",
            "When a listener's certificate expires (unix seconds): the client listener's, the routes'.",
            certificates,
        );
    }
    let per_space = |f: &dyn Fn(&SpaceStatus) -> Option<f64>| {
        s.spaces
            .iter()
            .filter_map(|sp| f(sp).map(|v| (format!("{{space=\"{}\"}}", label(&sp.name)), v)))
            .collect::<Vec<_>>()
    };
    gauge(
        "space_state",
        "The space's derived state (1 for the state it is in).",
        s.spaces
            .iter()
            .map(|sp| {
                (
                    format!(
                        "{{space=\"{}\",state=\"{}\"}}",
                        label(&sp.name),
                        sp.view.state
                    ),
                    1.0,
                )
            })
            .collect(),
    );
    gauge(
        "space_servable",
        "Whether the space is served (1) or not (0).",
        per_space(&|sp| Some(if sp.view.servable { 1.0 } else { 0.0 })),
    );
    gauge(
        "space_connections",
        "Live connections of the space (running broker only).",
        per_space(&|sp| sp.connections.map(|c| c as f64)),
    );
    gauge(
        "space_streams",
        "Streams and buckets of the space.",
        per_space(&|sp| Some(sp.streams as f64)),
    );
    gauge(
        "space_messages",
        "Messages the space's streams hold (when counted).",
        per_space(&|sp| sp.messages.map(|m| m as f64)),
    );
    gauge(
        "space_bytes",
        "Bytes the space's streams hold.",
        per_space(&|sp| Some(sp.bytes as f64)),
    );
    gauge(
        "space_drifted_streams",
        "Streams whose config drifted from what cotal provisions.",
        per_space(&|sp| Some(sp.drifted_streams as f64)),
    );
    out.push_str("# EOF\n");
    out
}

pub fn text(s: &Status, observed: &crate::observed::Observed) -> String {
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
    // The broken cotal.toml, said above, is the first problem.
    for p in s
        .problems
        .iter()
        .skip(usize::from(s.desired_error.is_some()))
    {
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
    if let Some(f) = &s.open_files {
        let _ = writeln!(
            out,
            "open files  limit {} ({}): holds {} spaces; the applied ones need {}{}",
            f.limit,
            f.source,
            f.spaces_within,
            f.needed,
            if f.needed > f.limit {
                ", MORE than the limit: raise it, then `cotal down` and `cotal up`"
            } else {
                ""
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
        "\n{:<20} {:<13} {:<9} {:>7} {:>10} {:>10} {:>6}  ACCOUNT",
        "SPACE", "STATE", "SERVABLE", "STREAMS", "MESSAGES", "BYTES", "CONNS"
    );
    for sp in &s.spaces {
        let space =
            crate::model::SpaceName::from_record(&sp.name).expect("inventory names are valid");
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
        if let Some(m) = &sp.relocation {
            let _ = writeln!(
                out,
                "{:<20} moving to another broker: phase {}{} (`cotal space relocation {}`)",
                "",
                m.phase,
                m.artifact
                    .as_ref()
                    .map(|a| format!(", artifact {}", a.digest))
                    .unwrap_or_default(),
                sp.name
            );
        }
        if let Some(s) = sp.suspension.as_ref().filter(|_| sp.archived.is_none()) {
            let _ = writeln!(
                out,
                "{:<20} suspended at {} by {}{}",
                "",
                s.at,
                s.by,
                match &s.reason {
                    Some(r) => format!(": {}", serde_json::to_string(r).expect("a string")),
                    None => String::new(),
                }
            );
        }
    }
    if s.spaces.is_empty() {
        out.push_str(
            if s.problems.len() <= usize::from(s.desired_error.is_some()) {
                "(no spaces)\n"
            } else {
                "(no space can be listed with certainty: see the problems above)\n"
            },
        );
    }
}
