//! `cotal.toml`: the operator's desired state (docs/design/architecture.md, "cotal.toml"), parsed and validated.
//!
//! Pure: [`parse`] takes the file's text and a display name and returns a [`Desired`] or an
//! error that names the file, line and column. Unknown keys are errors, unknown versions are
//! refused, and every value is range-checked here so that later stages never see a bad one.
//!
//! The room of `cotal.toml`: this module parses and validates it; beside it, the broker's nodes
//! (`topology`), its TLS tables (`tls_config`), the include it names (`include`), the space verbs'
//! edits (`edit`) and `cotal fmt` (`toml_fmt`).

pub mod edit;
pub mod include;
pub mod tls_config;
pub mod toml_fmt;
pub mod topology;

pub use crate::desired::tls_config::{LocatedPath, TlsSettings};
use crate::desired::topology::{Topology, check_host, check_path, check_port, loopback};
use crate::model::{ByteSize, Limits, SpaceName, SpaceSpec, SpaceState};
use serde::Deserialize;
use std::collections::BTreeMap;
use toml::Spanned;

/// The only `version` this build understands.
pub const VERSION: i64 = 1;

/// Streams plus KV buckets cotal provisions in every space; `max_streams` below it cannot work.
pub const PROVISIONED_STREAMS: u64 = 15;

/// The `[broker]` table with defaults applied; its listener and store are the lone node's of
/// the [`Topology`] (a cluster's nodes set their own).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BrokerSettings {
    /// Kept for files written before every root kept its system keys: `init` refuses `false`,
    /// saying why (a root without them cannot confirm a reload).
    pub multi_space: bool,
    /// The JetStream file store the broker may use (`jetstream { max_file_store }`); unset:
    /// nats-server's own default (75% of the free disk when it starts).
    pub max_file_store: Option<ByteSize>,
    /// The JetStream memory store (`jetstream { max_memory_store }`); unset: 75% of memory.
    pub max_memory_store: Option<ByteSize>,
    /// Mint each space a connection-evictor ($SYS KICK, broker-wide by NATS's design); off by
    /// default: `cotal space evict` is the operator's way, scoped to one space.
    pub evictor_creds: bool,
    /// `[broker.tls]`: TLS on the client listener of every node.
    pub tls: Option<TlsSettings>,
    /// `[broker.monitoring]`: nats-server's HTTP monitoring listener (one server).
    pub monitoring: Option<Monitoring>,
    /// `[broker.websocket]`: a websocket listener for browser clients (one server).
    pub websocket: Option<Websocket>,
    /// `[broker] include`: an operator-owned file of nats-server settings cotal does not
    /// model, inlined into every node's config ([`crate::desired::include`]).
    pub include: Option<LocatedPath>,
    /// `[broker] log_rotation` (default true): render `logfile_size_limit` and
    /// `logfile_max_num`. `false` for a broker adopted running without them: nats-server
    /// cannot turn rotation on by a reload, so cotal renders what it runs until a restart.
    pub log_rotation: bool,
}

/// `[broker.websocket]`: the listener browser clients connect to (`wss://`, with
/// `[broker.tls]`'s certificate; `ws://` only with `no_tls = true` on a loopback bind).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Websocket {
    pub host: String,
    pub port: u16,
    pub no_tls: bool,
}

/// `[broker.monitoring]`: the monitoring endpoint (`/varz`, `/connz`, `/jsz`, ...), which lists
/// every tenant's connections: on loopback unless `allow_public = true` is written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Monitoring {
    pub host: String,
    pub port: u16,
    /// Served over TLS with `[broker.tls]`'s certificate (`https = ...`).
    pub https: bool,
}

impl Default for BrokerSettings {
    fn default() -> Self {
        BrokerSettings {
            multi_space: true,
            max_file_store: None,
            max_memory_store: None,
            evictor_creds: false,
            tls: None,
            monitoring: None,
            websocket: None,
            include: None,
            log_rotation: true,
        }
    }
}

/// The lone server's listener and store when `[broker]` does not set them.
pub const DEFAULT_HOST: &str = "127.0.0.1";
pub const DEFAULT_PORT: u16 = 4222;
pub const DEFAULT_STORE_DIR: &str = ".cotal/nats";

/// The desired state, exactly what `cotal.toml` says: broker settings, the topology and the
/// spaces by name, each space's limits already completed from `[defaults.limits]` (a limit a
/// space does not set is the default's; one neither sets is unlimited). What one run asks on
/// top of it (rotations, `--allow-degraded`) is the plan's [`crate::plan::Intent`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub broker: BrokerSettings,
    /// The broker's nodes: `[broker]`'s lone server, or `[cluster]`'s nodes.
    pub topology: Topology,
    /// `[defaults.limits]` as written.
    pub defaults: Limits,
    /// Every declared space, with all it declares: one entry per space, so a new per-space
    /// setting is one field of [`DesiredSpace`].
    pub spaces: BTreeMap<SpaceName, DesiredSpace>,
}

/// A space's members as declared: each principal's grant.
pub type Members = BTreeMap<crate::space::members::Principal, crate::space::members::Grant>;

/// One space as `cotal.toml` declares it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredSpace {
    /// Its state, protection and limits (the defaults filled in).
    pub spec: SpaceSpec,
    /// The channels it declares (`[spaces.X.channel_defaults]`, `[spaces.X.channels.NAME]`,
    /// `prune_channels`); `None` when it declares none.
    pub channels: Option<crate::space::channels::SpaceChannels>,
    /// The members it declares (`[spaces.X.members."OWNER.ACTOR"]`); empty when none.
    pub members: Members,
    /// Why it is suspended (`suspend_reason`); only for a suspended space that gives one.
    pub suspend_reason: Option<String>,
}

impl Desired {
    /// The spec of space `name`, when declared.
    pub fn spec(&self, name: &SpaceName) -> Option<&SpaceSpec> {
        self.spaces.get(name).map(|s| &s.spec)
    }

    /// Every declared space's spec, in name order.
    pub fn specs(&self) -> impl Iterator<Item = (&SpaceName, &SpaceSpec)> {
        self.spaces.iter().map(|(n, s)| (n, &s.spec))
    }

    /// The channels space `name` declares, when it declares any.
    pub fn channels_of(&self, name: &SpaceName) -> Option<&crate::space::channels::SpaceChannels> {
        self.spaces.get(name)?.channels.as_ref()
    }

    /// Every space that declares channels, with them, in name order.
    pub fn declared_channels(
        &self,
    ) -> impl Iterator<Item = (&SpaceName, &crate::space::channels::SpaceChannels)> {
        self.spaces
            .iter()
            .filter_map(|(n, s)| Some((n, s.channels.as_ref()?)))
    }

    /// The members space `name` declares, when it declares any.
    pub fn members_of(&self, name: &SpaceName) -> Option<&Members> {
        self.spaces
            .get(name)
            .map(|s| &s.members)
            .filter(|m| !m.is_empty())
    }

    /// Why space `name` is suspended, when it is and says why.
    pub fn suspend_reason(&self, name: &SpaceName) -> Option<&String> {
        self.spaces.get(name)?.suspend_reason.as_ref()
    }
}

impl Desired {
    /// The desired spaces keyed as the root records them, when they differ: a space declared
    /// as `café` (names are put in NFC) whose record an older cotal wrote under another
    /// Unicode form of it (`cafe` + U+0301) is that recorded space, never a removal and an add
    /// of a new account. `None` when no name differs (the common case, checked without
    /// normalising a name already in NFC). Pure.
    pub fn with_recorded_names<'a>(
        &self,
        recorded: impl IntoIterator<Item = &'a SpaceName>,
    ) -> Option<Desired> {
        use unicode_normalization::{IsNormalized, is_nfc_quick};
        let mut out: Option<Desired> = None;
        for name in recorded {
            if is_nfc_quick(name.as_str().chars()) == IsNormalized::Yes {
                continue;
            }
            let Ok(normal) = SpaceName::parse(name.as_str()) else {
                continue;
            };
            if &normal == name
                || self.spaces.contains_key(name)
                || !self.spaces.contains_key(&normal)
            {
                continue;
            }
            let d = out.get_or_insert_with(|| self.clone());
            if let Some(space) = d.spaces.remove(&normal) {
                d.spaces.insert(name.clone(), space);
            }
        }
        out
    }
}

impl Default for Desired {
    /// A root with no space: one server at the default listener and store.
    fn default() -> Self {
        Desired {
            broker: BrokerSettings::default(),
            topology: Topology::lone(DEFAULT_HOST.into(), DEFAULT_PORT, DEFAULT_STORE_DIR.into()),
            defaults: Limits::default(),
            spaces: BTreeMap::new(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    version: Option<Spanned<i64>>,
    #[serde(default)]
    broker: Option<RawBroker>,
    #[serde(default)]
    defaults: Option<RawDefaults>,
    #[serde(default)]
    spaces: BTreeMap<Spanned<String>, RawSpace>,
    #[serde(default)]
    cluster: Option<Spanned<crate::desired::topology::RawCluster>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDefaults {
    limits: Option<RawLimits>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBroker {
    host: Option<Spanned<String>>,
    port: Option<Spanned<i64>>,
    store_dir: Option<Spanned<String>>,
    multi_space: Option<Spanned<bool>>,
    max_file_store: Option<Spanned<toml::Value>>,
    max_memory_store: Option<Spanned<toml::Value>>,
    evictor_creds: Option<bool>,
    tls: Option<Spanned<crate::desired::tls_config::RawTls>>,
    monitoring: Option<Spanned<RawMonitoring>>,
    include: Option<Spanned<String>>,
    websocket: Option<Spanned<RawWebsocket>>,
    config: Option<Spanned<String>>,
    log_rotation: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebsocket {
    port: Option<Spanned<i64>>,
    host: Option<Spanned<String>>,
    no_tls: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMonitoring {
    http: Option<Spanned<String>>,
    https: Option<Spanned<String>>,
    allow_public: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpace {
    state: Option<Spanned<SpaceState>>,
    suspend_reason: Option<Spanned<String>>,
    protect: Option<bool>,
    limits: Option<RawLimits>,
    channel_defaults: Option<RawChannelDefaults>,
    #[serde(default)]
    channels: BTreeMap<Spanned<String>, RawChannel>,
    prune_channels: Option<bool>,
    #[serde(default)]
    members: BTreeMap<Spanned<String>, RawMember>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMember {
    #[serde(default)]
    read: Vec<Spanned<String>>,
    #[serde(default)]
    post: Vec<Spanned<String>>,
}

/// The longest `suspend_reason`, in bytes.
pub const MAX_SUSPEND_REASON_BYTES: usize = 256;

/// Check a `suspend_reason`: given only with `state = "suspended"`, not empty, at most
/// [`MAX_SUSPEND_REASON_BYTES`], and without a character that could hide or reorder what a
/// terminal shows (it is printed by `status` and the audit).
pub fn suspend_reason(text: &str, state: Option<SpaceState>) -> Result<String, String> {
    if state != Some(SpaceState::Suspended) {
        return Err(
            "suspend_reason is only for a suspended space: set state = \"suspended\" too, or remove it".into(),
        );
    }
    if text.trim().is_empty() {
        return Err("suspend_reason cannot be empty".into());
    }
    if text.len() > MAX_SUSPEND_REASON_BYTES {
        return Err(format!(
            "suspend_reason is at most {MAX_SUSPEND_REASON_BYTES} bytes; this one is {}",
            text.len()
        ));
    }
    if let Some(c) = text.chars().find(|c| crate::model::hides_or_reorders(*c)) {
        return Err(format!(
            "suspend_reason cannot hold a control character or an invisible or bidirectional formatting character (U+{:04X})",
            c as u32
        ));
    }
    Ok(text.to_string())
}

/// The defaults carry only what a client falls back to: the delivery class and replay window
/// (a description or instructions belong to a channel, and are unknown fields here).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChannelDefaults {
    delivery_class: Option<crate::space::channels::DeliveryClass>,
    replay_window: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChannel {
    delivery_class: Option<crate::space::channels::DeliveryClass>,
    replay_window: Option<Spanned<String>>,
    description: Option<Spanned<String>>,
    instructions: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    max_connections: Option<Spanned<i64>>,
    max_storage: Option<Spanned<toml::Value>>,
    max_memory: Option<Spanned<toml::Value>>,
    max_streams: Option<Spanned<i64>>,
    max_consumers: Option<Spanned<i64>>,
    max_payload: Option<Spanned<toml::Value>>,
}

/// A located error: `file:line:column: message`.
struct Located<'a> {
    file: &'a str,
    text: &'a str,
}

impl Located<'_> {
    fn at(&self, offset: usize, message: impl std::fmt::Display) -> String {
        let (line, column) = line_column(self.text, offset);
        format!("{}:{line}:{column}: {message}", self.file)
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..floor_char_boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// A `cotal.toml` text parsed as TOML (its values not yet read into the model).
pub type Document<'a> = Spanned<toml::de::DeTable<'a>>;

/// Parse `text` as TOML: the document [`parse_document`] reads, or where it is not TOML.
pub fn document<'a>(text: &'a str, file: &str) -> Result<Document<'a>, String> {
    toml::de::DeTable::parse(text).map_err(|e| toml_error(&Located { file, text }, &e))
}

/// A TOML error at its place in the text.
fn toml_error(loc: &Located, e: &toml::de::Error) -> String {
    let offset = e.span().map(|s| s.start).unwrap_or(0);
    loc.at(offset, e.message().trim_end())
}

/// Parse and validate the text of a `cotal.toml`. `file` is how errors name it.
pub fn parse(text: &str, file: &str) -> Result<Desired, String> {
    parse_document(document(text, file)?, text, file)
}

/// [`parse`] of a text already parsed as TOML (`document`, of `text`).
pub fn parse_document(document: Document<'_>, text: &str, file: &str) -> Result<Desired, String> {
    let loc = Located { file, text };
    let raw = RawFile::deserialize(toml::de::Deserializer::from(document))
        .map_err(|e| toml_error(&loc, &e))?;

    let version = raw
        .version
        .ok_or_else(|| format!("{file}:1:1: missing `version = {VERSION}`"))?;
    if *version.get_ref() != VERSION {
        return Err(loc.at(
            version.span().start,
            format!(
                "unsupported version {}: this cotal understands version {VERSION}",
                version.get_ref()
            ),
        ));
    }

    let cluster_span = raw.cluster.as_ref().map(|c| c.span());
    if let (Some(b), Some(_)) = (&raw.broker, cluster_span.clone()) {
        // With a cluster each node has its own listener and store.
        for (field, span) in [
            ("host", b.host.as_ref().map(|v| v.span())),
            ("port", b.port.as_ref().map(|v| v.span())),
            ("store_dir", b.store_dir.as_ref().map(|v| v.span())),
            ("config", b.config.as_ref().map(|v| v.span())),
        ] {
            if let Some(span) = span {
                return Err(loc.at(
                    span.start,
                    format!("[broker] {field} is not used with a [cluster]: each [[cluster.nodes]] entry sets its own host, port, store_dir and config"),
                ));
            }
        }
    }
    let (broker, lone) = match raw.broker {
        None => (BrokerSettings::default(), Desired::default().topology),
        Some(b) => broker_settings(b, &loc)?,
    };
    if let Some(span) = cluster_span.clone() {
        for (declared, table) in [
            (broker.monitoring.is_some(), "[broker.monitoring]"),
            (broker.websocket.is_some(), "[broker.websocket]"),
        ] {
            if declared {
                return Err(loc.at(
                    span.start,
                    format!("{table} serves one server's listener; a cluster's nodes would each need their own port, which cotal does not render yet"),
                ));
            }
        }
    }
    let topology = match raw.cluster {
        None => lone,
        Some(c) => topology::cluster(c, &|offset, msg| loc.at(offset, msg))?,
    };

    let defaults = match raw.defaults.and_then(|d| d.limits) {
        None => Limits::default(),
        Some(l) => limits(l, &loc, topology.replicas)?,
    };
    let mut spaces: BTreeMap<SpaceName, DesiredSpace> = BTreeMap::new();
    // Where the first `state = "archived"` is: a file whose every space is archived is refused.
    let mut archived_at: Option<usize> = None;
    for (key, space) in raw.spaces {
        let name = SpaceName::parse(key.get_ref()).map_err(|e| loc.at(key.span().start, e))?;
        // Two keys that differ only in their Unicode form (composed, decomposed) name one space.
        if spaces.contains_key(&name) {
            return Err(loc.at(
                key.span().start,
                format!(
                    "{} is declared twice: two tables name the same space once put in Unicode normal form C (NFC)",
                    name.quoted()
                ),
            ));
        }
        let declared = space_channels(
            space.channel_defaults,
            space.channels,
            space.prune_channels,
            &loc,
        )?;
        let channels =
            (declared != crate::space::channels::SpaceChannels::default()).then_some(declared);
        let members = space_members(space.members, &loc)?;
        let limits = match space.limits {
            None => Limits::default(),
            Some(l) => limits(l, &loc, topology.replicas)?,
        }
        .or(&defaults);
        let state = space.state.as_ref().map(|s| *s.get_ref());
        if let (Some(SpaceState::Archived), Some(s), None) = (state, &space.state, archived_at) {
            archived_at = Some(s.span().start);
        }
        if let (Some(SpaceState::Archived), Some(_), Some(s)) = (state, &cluster_span, &space.state)
        {
            return Err(loc.at(
                s.span().start,
                "state = \"archived\" is for one server: on a cluster, an archived account's replicated streams did not come back when it was loaded again (nats-server 2.15.1), so cotal does not archive there (suspend the space instead)",
            ));
        }
        let suspend_reason = match space.suspend_reason {
            Some(reason) => {
                let at = reason.span().start;
                let text = reason.into_inner();
                Some(suspend_reason(&text, state).map_err(|e| loc.at(at, e))?)
            }
            None => None,
        };
        spaces.insert(
            name,
            DesiredSpace {
                spec: SpaceSpec {
                    state: state.unwrap_or_default(),
                    protect: space.protect.unwrap_or(false),
                    limits,
                },
                channels,
                members,
                suspend_reason,
            },
        );
    }
    if let Some(at) = archived_at
        && spaces
            .values()
            .all(|s| s.spec.state == SpaceState::Archived)
    {
        return Err(loc.at(
            at,
            "every space of this file is archived: the broker would serve no account, and it needs at least one; keep one space active or suspended (to stop serving every tenant, stop the broker: `cotal down`)",
        ));
    }
    Ok(Desired {
        broker,
        topology,
        defaults,
        spaces,
    })
}

/// A space's members, validated (each error at its line and column): principals `OWNER.ACTOR`,
/// read patterns, concrete post channels, and no two members whose users share a name.
fn space_members(
    raw: BTreeMap<Spanned<String>, RawMember>,
    loc: &Located,
) -> Result<BTreeMap<crate::space::members::Principal, crate::space::members::Grant>, String> {
    use crate::space::members::{Grant, Principal, valid_post, valid_read};
    let mut out = BTreeMap::new();
    let mut users: BTreeMap<String, String> = BTreeMap::new();
    for (key, m) in raw {
        let at = key.span().start;
        let principal = Principal::parse(key.get_ref()).map_err(|e| loc.at(at, e))?;
        if let Some(other) = users.insert(principal.user_name(), principal.to_string()) {
            return Err(loc.at(
                at,
                format!(
                    "members {other:?} and {principal:?} would both mint users named {:?} (their consumers and inbox): rename one",
                    principal.user_name()
                ),
            ));
        }
        for r in &m.read {
            valid_read(r.get_ref()).map_err(|e| loc.at(r.span().start, e))?;
        }
        for p in &m.post {
            valid_post(p.get_ref()).map_err(|e| loc.at(p.span().start, e))?;
        }
        let grant = Grant::new(
            m.read.into_iter().map(Spanned::into_inner).collect(),
            m.post.into_iter().map(Spanned::into_inner).collect(),
        )
        .map_err(|e| loc.at(at, e))?;
        out.insert(principal, grant);
    }
    Ok(out)
}

/// A space's channel declarations, validated (each error at its line and column).
fn space_channels(
    defaults: Option<RawChannelDefaults>,
    raw: BTreeMap<Spanned<String>, RawChannel>,
    prune: Option<bool>,
    loc: &Located,
) -> Result<crate::space::channels::SpaceChannels, String> {
    use crate::space::channels::{self, Settings};
    let settings = |c: RawChannel| -> Result<Settings, String> {
        let text = |f: Option<Spanned<String>>,
                    what: &str,
                    max: usize|
         -> Result<Option<String>, String> {
            match f {
                None => Ok(None),
                Some(v) if v.get_ref().chars().count() > max => Err(loc.at(
                    v.span().start,
                    format!(
                        "{what} is {} characters; at most {max}",
                        v.get_ref().chars().count()
                    ),
                )),
                Some(v) => Ok(Some(v.into_inner())),
            }
        };
        let replay_window = match c.replay_window {
            None => None,
            Some(w) => {
                channels::valid_replay_window(w.get_ref())
                    .map_err(|e| loc.at(w.span().start, e))?;
                Some(w.into_inner())
            }
        };
        Ok(Settings {
            delivery_class: c.delivery_class,
            replay_window,
            description: text(c.description, "description", channels::DESCRIPTION_MAX)?,
            instructions: text(c.instructions, "instructions", channels::INSTRUCTIONS_MAX)?,
        })
    };
    let mut out = crate::space::channels::SpaceChannels {
        defaults: defaults
            .map(|d| {
                settings(RawChannel {
                    delivery_class: d.delivery_class,
                    replay_window: d.replay_window,
                    description: None,
                    instructions: None,
                })
            })
            .transpose()?,
        channels: BTreeMap::new(),
        prune: prune.unwrap_or(false),
    };
    for (name, c) in raw {
        channels::valid_channel_name(name.get_ref()).map_err(|e| loc.at(name.span().start, e))?;
        out.channels.insert(name.into_inner(), settings(c)?);
    }
    Ok(out)
}

/// `[broker]`, and the lone server its listener and store describe.
fn broker_settings(b: RawBroker, loc: &Located) -> Result<(BrokerSettings, Topology), String> {
    let defaults = BrokerSettings::default();
    let host = match b.host {
        None => DEFAULT_HOST.to_string(),
        Some(h) => check_host(h.get_ref()).map_err(|e| loc.at(h.span().start, e))?,
    };
    let port = match b.port {
        None => DEFAULT_PORT,
        Some(p) => check_port("port", *p.get_ref()).map_err(|e| loc.at(p.span().start, e))?,
    };
    let store_dir = match b.store_dir {
        None => DEFAULT_STORE_DIR.to_string(),
        Some(d) => check_path("store_dir", d.get_ref()).map_err(|e| loc.at(d.span().start, e))?,
    };
    let store =
        |field: &str, v: Option<Spanned<toml::Value>>| -> Result<Option<ByteSize>, String> {
            let Some(s) = v else { return Ok(None) };
            size_value(s.get_ref()).map(Some).map_err(|e| {
                loc.at(
                    s.span().start,
                    format!("{field}: {e}; omit it for nats-server's default"),
                )
            })
        };
    // Accepted and ignored, `false` would say something of the root that is not true: every
    // root keeps its system keys, and one made without them is not made any more.
    if let Some(m) = &b.multi_space
        && !*m.get_ref()
    {
        return Err(loc.at(
            m.span().start,
            "multi_space = false is refused: a root without system signing keys could not confirm a reload of its broker, observe it, or give a space its $SYS creds, so cotal neither makes nor keeps one (every root keeps scoped system keys, each able to mint only its role's users); remove the key or set it to true (nothing else changes)",
        ));
    }
    let settings = BrokerSettings {
        multi_space: true,
        max_file_store: store("max_file_store", b.max_file_store)?,
        max_memory_store: store("max_memory_store", b.max_memory_store)?,
        evictor_creds: b.evictor_creds.unwrap_or(defaults.evictor_creds),
        log_rotation: b.log_rotation.unwrap_or(defaults.log_rotation),
        tls: b
            .tls
            .map(|t| crate::desired::tls_config::listener(t, &|offset, msg| loc.at(offset, msg)))
            .transpose()?,
        monitoring: None,
        websocket: None,
        include: match b.include {
            None => None,
            Some(v) => Some(LocatedPath {
                at: loc
                    .at(v.span().start, "")
                    .trim_end_matches(": ")
                    .to_string(),
                path: check_path("include", v.get_ref()).map_err(|e| loc.at(v.span().start, e))?,
            }),
        },
    };
    let websocket = b
        .websocket
        .map(|w| websocket(w, settings.tls.is_some(), &host, loc))
        .transpose()?;
    let monitoring = b
        .monitoring
        .map(|m| monitoring(m, settings.tls.is_some(), loc))
        .transpose()?;
    let settings = BrokerSettings {
        monitoring,
        websocket,
        ..settings
    };
    let mut lone = Topology::lone(host, port, store_dir);
    if let Some(c) = b.config {
        let path = crate::desired::topology::check_path("config", c.get_ref())
            .and_then(|p| {
                crate::desired::topology::check_config_path(crate::desired::topology::LONE_NODE, p)
            })
            .map_err(|e| loc.at(c.span().start, e))?;
        lone.nodes[0].config = Some(path);
    }
    Ok((settings, lone))
}

fn websocket(
    raw: Spanned<RawWebsocket>,
    tls: bool,
    listener_host: &str,
    loc: &Located,
) -> Result<Websocket, String> {
    let start = raw.span().start;
    let w = raw.into_inner();
    let port = match w.port {
        Some(p) => crate::desired::topology::check_port("the websocket port", *p.get_ref())
            .map_err(|e| loc.at(p.span().start, e))?,
        None => return Err(loc.at(start, "[broker.websocket] needs `port`")),
    };
    let host = match w.host {
        Some(h) => crate::desired::topology::check_host(h.get_ref())
            .map_err(|e| loc.at(h.span().start, e))?,
        None => listener_host.to_string(),
    };
    let no_tls = w.no_tls.unwrap_or(false);
    if no_tls && !loopback(&host) {
        return Err(loc.at(
            start,
            format!("no_tls = true is for a loopback bind only: browsers on other machines would send their creds in the clear to {host}"),
        ));
    }
    if !no_tls && !tls {
        return Err(loc.at(
            start,
            "[broker.websocket] serves wss:// with [broker.tls]'s certificate: declare [broker.tls], or write no_tls = true on a loopback bind",
        ));
    }
    Ok(Websocket { host, port, no_tls })
}

fn monitoring(raw: Spanned<RawMonitoring>, tls: bool, loc: &Located) -> Result<Monitoring, String> {
    let start = raw.span().start;
    let m = raw.into_inner();
    let (address, https) = match (m.http, m.https) {
        (Some(a), None) => (a, false),
        (None, Some(a)) => (a, true),
        _ => {
            return Err(loc.at(
                start,
                "[broker.monitoring] takes one of `http = \"HOST:PORT\"` or `https = \"HOST:PORT\"`",
            ));
        }
    };
    if https && !tls {
        return Err(loc.at(
            address.span().start,
            "https needs [broker.tls]: the monitoring listener serves its certificate",
        ));
    }
    let at = |e: String| loc.at(address.span().start, e);
    let (host, port) = address
        .get_ref()
        .rsplit_once(':')
        .ok_or_else(|| at(format!("{:?} is not HOST:PORT", address.get_ref())))?;
    let host =
        crate::desired::topology::check_host(host.trim_start_matches('[').trim_end_matches(']'))
            .map_err(at)?;
    let port = port
        .parse::<i64>()
        .map_err(|_| at(format!("{port:?} is not a port")))
        .and_then(|p| crate::desired::topology::check_port("the monitoring port", p).map_err(at))?;
    if !loopback(&host) && m.allow_public != Some(true) {
        return Err(at(format!(
            "the monitoring listener lists every tenant's connections: binding it to {host} (not loopback) needs `allow_public = true` written beside it"
        )));
    }
    Ok(Monitoring { host, port, https })
}

/// The limits of a space (or the defaults) on a broker whose streams have `replicas` replicas:
/// a storage quota must hold each replica's reservations (nats-server counts a stream's
/// `max_bytes` once per replica against an account's quota).
fn limits(l: RawLimits, loc: &Located, replicas: u8) -> Result<Limits, String> {
    let count = |field: &str, v: Option<Spanned<i64>>, min: u64| -> Result<Option<u64>, String> {
        match v {
            None => Ok(None),
            Some(s) => u64::try_from(*s.get_ref())
                .ok()
                .filter(|n| *n >= min)
                .map(Some)
                .ok_or_else(|| {
                    let why = match field {
                        "max_connections" => " (to refuse every connection, set state = \"suspended\")".to_string(),
                        "max_streams" => format!(" (cotal provisions {PROVISIONED_STREAMS} streams and buckets in every space)"),
                        _ => String::new(),
                    };
                    loc.at(
                        s.span().start,
                        format!("{field} = {} must be at least {min}{why}; omit it for unlimited", s.get_ref()),
                    )
                }),
        }
    };
    let size = |field: &str,
                v: Option<Spanned<toml::Value>>,
                min: u64,
                why: &str|
     -> Result<Option<ByteSize>, String> {
        let Some(s) = v else { return Ok(None) };
        let parsed = size_value(s.get_ref());
        let at = s.span().start;
        let parsed =
            parsed.map_err(|e| loc.at(at, format!("{field}: {e}; omit it for unlimited")))?;
        if parsed.0 < min {
            return Err(loc.at(
                at,
                format!(
                    "{field} = {parsed} must be at least {} ({why}); omit it for unlimited",
                    ByteSize(min)
                ),
            ));
        }
        Ok(Some(parsed))
    };
    Ok(Limits {
        max_connections: count("max_connections", l.max_connections, 1)?,
        max_storage: size(
            "max_storage",
            l.max_storage,
            crate::space::streams::min_quota() * u64::from(replicas.max(1)),
            &if replicas > 1 {
                format!(
                    "JetStream reserves each stream's max_bytes up front, once per replica: with replicas = {replicas} the space's provisioned buckets reserve {}, and its artifact store takes what the quota leaves",
                    ByteSize(crate::space::streams::fixed_reservation() * u64::from(replicas))
                )
            } else {
                "JetStream reserves each stream's max_bytes up front: the space's provisioned buckets reserve 1 MiB, and its artifact store takes what the quota leaves (at most 4 GiB)".to_string()
            },
        )?,
        max_memory: size("max_memory", l.max_memory, 1, "")?,
        max_streams: count("max_streams", l.max_streams, PROVISIONED_STREAMS)?,
        max_consumers: count("max_consumers", l.max_consumers, 1)?,
        max_payload: size(
            "max_payload",
            l.max_payload,
            crate::space::streams::MIN_PAYLOAD,
            "cotal provisions the space's streams and buckets with JetStream API requests under this limit",
        )?,
    })
}

/// A positive size: an integer of bytes or a string with a unit.
fn size_value(v: &toml::Value) -> Result<ByteSize, String> {
    match v {
        toml::Value::Integer(n) if *n > 0 => Ok(ByteSize(*n as u64)),
        toml::Value::Integer(n) => Err(format!("{n} is not a positive size")),
        toml::Value::String(text) => ByteSize::parse(text).and_then(|b| {
            if b.0 == 0 {
                Err(format!("{text:?} is not a positive size"))
            } else {
                Ok(b)
            }
        }),
        other => Err(format!(
            "expected a size like \"10GiB\" or an integer, found {}",
            other.type_str()
        )),
    }
}

/// The starter file `cotal init` writes when the root has none.
pub const STARTER: &str = r#"# cotal.toml: the spaces (tenants) this broker hosts. Edit, then `cotal plan` and `cotal apply`.
version = 1

[broker]
host = "127.0.0.1"        # listener; changing it needs a broker restart
port = 4222
store_dir = ".cotal/nats" # JetStream store, relative to this file
multi_space = true        # keep the system signing keys so every space gets its $SYS creds
# evictor_creds = true      # also mint each space a connection evictor: its KICK is broker-wide
# max_file_store = "50GiB"  # JetStream's disk (default: 75% of the free disk when it starts)
# max_memory_store = "4GiB" # JetStream's memory (default: 75% of memory)

# Limits for every space that does not set its own (each one separately); finite, so that
# no tenant can take the whole broker. Quotas are commitments: nats-server gives a space
# JetStream only while every space's quota fits in its store, and `cotal plan` refuses a plan
# that does not fit. These fit 1000 spaces on a machine with 24 GiB of memory and 50 GB free.
[defaults.limits]
max_connections = 100
max_storage = "32MiB"     # JetStream disk quota (raise it per space: [spaces.NAME.limits])
max_memory = "8MiB"       # JetStream memory quota
max_streams = 50          # cotal provisions 15 per space
max_consumers = 500
max_payload = "1MiB"

# One table per space, keyed by its name:
#
# [spaces.design]
# state = "active"        # active | suspended (connections refused, data kept) | archived (not served, data kept on disk)
# protect = true          # removal refused while set
# [spaces.design.limits]  # overrides [defaults.limits], key by key
# max_connections = 200
# max_storage = "10GiB"
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text, "cotal.toml").unwrap_err()
    }

    #[test]
    fn parses_the_design_example() {
        let d = parse(
            r#"version = 1
[broker]
host = "0.0.0.0"
port = 4333
[spaces.design]
state = "suspended"
protect = true
[spaces.design.limits]
max_connections = 200
max_storage = "10GiB"
[spaces.release]
"#,
            "cotal.toml",
        )
        .unwrap();
        assert!(!d.topology.is_cluster());
        assert_eq!(d.topology.nodes.len(), 1, "one server is a cluster of one");
        assert_eq!(d.topology.first().name, crate::desired::topology::LONE_NODE);
        assert_eq!(d.topology.first().port, 4333);
        assert_eq!(d.topology.first().store_dir, ".cotal/nats");
        let design = &d.spaces[&SpaceName::parse("design").unwrap()].spec;
        assert_eq!(design.state, SpaceState::Suspended);
        assert!(design.protect);
        assert_eq!(design.limits.max_connections, Some(200));
        assert_eq!(design.limits.max_storage, Some(ByteSize(10 << 30)));
        assert_eq!(
            d.spaces[&SpaceName::parse("release").unwrap()].spec,
            SpaceSpec::default()
        );
    }

    #[test]
    fn a_single_server_may_read_its_config_elsewhere_and_run_without_log_rotation() {
        let d = parse(
            "version = 1\n[broker]\nconfig = \"/etc/nats/nats.conf\"\nlog_rotation = false\n",
            "cotal.toml",
        )
        .unwrap();
        assert_eq!(
            d.topology.first().config.as_deref(),
            Some("/etc/nats/nats.conf")
        );
        assert!(!d.broker.log_rotation);
        assert!(BrokerSettings::default().log_rotation);
        let e = err("version = 1\n[broker]\nconfig = \".cotal/auth/x.conf\"\n");
        assert!(
            e.starts_with("cotal.toml:3:10:") && e.contains("lies in .cotal/"),
            "{e}"
        );
        let e = err("version = 1\n[broker]\nconfig = \"cotal.toml\"\n");
        assert!(e.contains("is cotal.toml"), "{e}");
    }

    #[test]
    fn starter_file_parses_to_no_spaces_and_finite_defaults() {
        let d = parse(STARTER, "cotal.toml").unwrap();
        assert!(d.spaces.is_empty());
        assert_eq!(d.broker, BrokerSettings::default());
        assert_eq!(d.topology, Desired::default().topology);
        assert!(
            d.defaults.entries().iter().all(|(_, v)| v.is_some()),
            "every default is finite: {:?}",
            d.defaults
        );
    }

    #[test]
    fn defaults_fill_each_limit_a_space_does_not_set() {
        let d = parse(
            "version = 1\n[defaults.limits]\nmax_connections = 10\nmax_storage = \"1GiB\"\n\
             [spaces.a]\n[spaces.b.limits]\nmax_connections = 99\n",
            "f",
        )
        .unwrap();
        let a = &d.spaces[&SpaceName::parse("a").unwrap()].spec.limits;
        let b = &d.spaces[&SpaceName::parse("b").unwrap()].spec.limits;
        assert_eq!(
            (a.max_connections, a.max_storage),
            (Some(10), Some(ByteSize(1 << 30)))
        );
        assert_eq!(
            (b.max_connections, b.max_storage),
            (Some(99), Some(ByteSize(1 << 30)))
        );
        assert_eq!(a.max_payload, None, "neither sets it: unlimited");
        assert!(err("version = 1\n[defaults.limits]\nmax_streams = 3\n").contains("at least 15"));
        assert!(err("version = 1\n[defaults]\nstate = \"suspended\"\n").contains("unknown field"));
        let d = parse("version = 1\n[broker]\nmax_file_store = \"10GiB\"\n", "f").unwrap();
        assert_eq!(d.broker.max_file_store, Some(ByteSize(10 << 30)));
    }

    #[test]
    fn channels_are_parsed_and_bad_declarations_named_at_their_line_and_column() {
        let d = parse(
            "version = 1\n[spaces.a.channel_defaults]\ndelivery_class = \"durable\"\nreplay_window = \"24h\"\n[spaces.a.channels.\"team.backend\"]\ndelivery_class = \"live\"\ninstructions = \"x\"\n",
            "cotal.toml",
        )
        .unwrap();
        let a = d.channels_of(&SpaceName::parse("a").unwrap()).unwrap();
        assert_eq!(
            a.defaults.as_ref().unwrap().replay_window.as_deref(),
            Some("24h")
        );
        assert_eq!(
            a.channels["team.backend"].delivery_class,
            Some(crate::space::channels::DeliveryClass::Live)
        );
        assert!(
            parse("version = 1\n[spaces.b]\n", "f")
                .unwrap()
                .declared_channels()
                .next()
                .is_none()
        );
        for (text, at, what) in [
            (
                "[spaces.a.channels.general]\nreplay_window = \"24 hours\"\n",
                "cotal.toml:3:17",
                "not a window",
            ),
            (
                "[spaces.a.channels.\"team.*\"]\n",
                "cotal.toml:2:20",
                "not allowed",
            ),
            (
                "[spaces.a.channels.\"=x\"]\n",
                "cotal.toml:2:20",
                "reserved",
            ),
            (
                "[spaces.a.channel_defaults]\ninstructions = \"x\"\n",
                "cotal.toml:3:1",
                "unknown field `instructions`, expected `delivery_class` or `replay_window`",
            ),
            (
                "[spaces.a.channels.g]\ndelivery_class = \"sometimes\"\n",
                "cotal.toml:3:18",
                "unknown variant",
            ),
        ] {
            let e = err(&format!("version = 1\n{text}"));
            assert!(e.starts_with(at) && e.contains(what), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_space_recorded_under_another_unicode_form_is_planned_as_that_space() {
        let d = parse(
            "version = 1\n[spaces.\"caf\u{e9}\"]\nstate = \"suspended\"\nsuspend_reason = \"r\"\n",
            "t",
        )
        .unwrap();
        let legacy = SpaceName::from_record("cafe\u{301}").unwrap();
        let other = SpaceName::parse("design").unwrap();
        assert!(
            d.with_recorded_names([&other]).is_none(),
            "nothing to rekey"
        );
        let rekeyed = d.with_recorded_names([&legacy, &other]).unwrap();
        assert_eq!(rekeyed.spaces.keys().collect::<Vec<_>>(), [&legacy]);
        assert_eq!(rekeyed.suspend_reason(&legacy).unwrap(), "r");
    }

    #[test]
    fn members_are_parsed_and_each_mistake_is_named_at_its_line() {
        let d = parse(
            "version = 1\n[spaces.a.members.\"acme.alice\"]\nread = [\"team.>\", \"random\"]\npost = [\"team.backend\"]\n",
            "cotal.toml",
        )
        .unwrap();
        let alice = crate::space::members::Principal::parse("acme.alice").unwrap();
        let g = &d.spaces[&SpaceName::parse("a").unwrap()].members[&alice];
        assert_eq!(g.read, ["random", "team.>"]);
        assert_eq!(g.post, ["team.backend"]);
        for (text, at, what) in [
            ("[spaces.a.members.alice]\n", "cotal.toml:2:", "OWNER.ACTOR"),
            (
                "[spaces.a.members.\"a.b\"]\nread = [\"team.>.x\"]\n",
                "cotal.toml:3:9:",
                "read \"team.>.x\"",
            ),
            (
                "[spaces.a.members.\"a.b\"]\npost = [\"team.*\"]\n",
                "cotal.toml:3:9:",
                "a post target is a concrete channel",
            ),
            (
                "[spaces.a.members.\"a_b.c\"]\n[spaces.a.members.\"a.b_c\"]\n",
                "cotal.toml:",
                "would both mint users named \"a_b_c\"",
            ),
        ] {
            let e = err(&format!("version = 1\n{text}"));
            assert!(e.starts_with(at) && e.contains(what), "{e}");
        }
    }

    #[test]
    fn errors_name_file_line_and_column() {
        assert_eq!(
            err("version = 1\n[spaces.a]\nstat = \"active\"\n")
                .lines()
                .next()
                .unwrap(),
            "cotal.toml:3:1: unknown field `stat`, expected one of `state`, `suspend_reason`, `protect`, `limits`, `channel_defaults`, `channels`, `prune_channels`, `members`"
        );
        assert!(
            err("version = 1\n[spaces.\"\"]\n")
                .starts_with("cotal.toml:2:9: a space name cannot be empty")
        );
        assert!(err("version = 1\n[spaces.\"..\"]\n").starts_with("cotal.toml:2:9:"));
        assert!(err("version = 2\n").starts_with("cotal.toml:1:11: unsupported version 2"));
        assert!(err("[spaces.a]\n").contains("missing `version = 1`"));
        assert!(err("version = 1\n[spaces.a]\n[spaces.a]\n").starts_with("cotal.toml:3:"));
        assert!(err("version = 1\n[spaces.a\n").starts_with("cotal.toml:2:"));
        assert!(
            err("version = 1\n[broker]\nport = 70000\n").starts_with("cotal.toml:3:8: port 70000")
        );
        assert!(err("version = 1\n[spaces.a]\nstate = \"gone\"\n").starts_with("cotal.toml:3:9:"));
    }

    #[test]
    fn limits_are_range_checked() {
        let e = err("version = 1\n[spaces.a.limits]\nmax_connections = 0\n");
        assert!(
            e.starts_with("cotal.toml:3:19: max_connections = 0 must be at least 1"),
            "{e}"
        );
        assert!(e.contains("suspended"));
        let e = err("version = 1\n[spaces.a.limits]\nmax_storage = \"10GB\"\n");
        assert!(
            e.starts_with("cotal.toml:3:15: max_storage: unknown unit"),
            "{e}"
        );
        assert!(
            err("version = 1\n[spaces.a.limits]\nmax_storage = 0\n")
                .contains("not a positive size")
        );
        assert!(err("version = 1\n[spaces.a.limits]\nmax_streams = 3\n").contains("at least 15"));
        let e = err("version = 1\n[spaces.a.limits]\nmax_payload = \"16B\"\n");
        assert!(
            e.starts_with("cotal.toml:3:15: max_payload = 16 B must be at least 4 KiB"),
            "{e}"
        );
        let e = err("version = 1\n[spaces.a.limits]\nmax_storage = \"512KiB\"\n");
        assert!(e.contains("must be at least 2 MiB"), "{e}");
        let ok = parse(
            "version = 1\n[spaces.a.limits]\nmax_payload = \"4KiB\"\nmax_storage = \"2MiB\"\n",
            "f",
        );
        assert!(ok.is_ok(), "the minimums themselves are accepted");
        assert!(
            err("version = 1\n[spaces.a.limits]\nmax_payload = true\n").contains("found boolean")
        );
        let ok = parse(
            "version = 1\n[spaces.a.limits]\nmax_payload = 1048576\n",
            "f",
        )
        .unwrap();
        assert_eq!(
            ok.spaces.values().next().unwrap().spec.limits.max_payload,
            Some(ByteSize(1 << 20))
        );
    }

    /// At replicas = 3 nats-server counts every reservation three times against the quota:
    /// a quota that holds one replica's reservations but not three is refused at its line.
    #[test]
    fn a_storage_quota_holds_every_replicas_reservations() {
        let cluster = "version = 1\n[cluster]\nname = \"c\"\n[[cluster.nodes]]\nname = \"n1\"\nport = 4222\ncluster_port = 6222\n[[cluster.nodes]]\nname = \"n2\"\nport = 4223\ncluster_port = 6223\n[[cluster.nodes]]\nname = \"n3\"\nport = 4224\ncluster_port = 6224\n";
        let e = err(&format!(
            "{cluster}[spaces.a.limits]\nmax_storage = \"4MiB\"\n"
        ));
        assert!(
            e.starts_with("cotal.toml:17:15:")
                && e.contains("must be at least 6 MiB")
                && e.contains("once per replica"),
            "{e}"
        );
        let e = err(&format!(
            "{cluster}[defaults.limits]\nmax_storage = \"4MiB\"\n"
        ));
        assert!(e.contains("must be at least 6 MiB"), "{e}");
        assert!(
            parse(
                &format!("{cluster}[spaces.a.limits]\nmax_storage = \"6MiB\"\n"),
                "cotal.toml"
            )
            .is_ok()
        );
        assert!(
            parse(
                "version = 1\n[spaces.a.limits]\nmax_storage = \"4MiB\"\n",
                "cotal.toml"
            )
            .is_ok(),
            "one server: one replica"
        );
    }

    #[test]
    fn an_archive_on_a_cluster_is_refused_at_its_line() {
        let cluster = "version = 1\n[cluster]\nname = \"c\"\n[[cluster.nodes]]\nname = \"n1\"\nport = 4222\ncluster_port = 6222\n[[cluster.nodes]]\nname = \"n2\"\nport = 4223\ncluster_port = 6223\n[[cluster.nodes]]\nname = \"n3\"\nport = 4224\ncluster_port = 6224\n";
        let e = err(&format!("{cluster}[spaces.a]\nstate = \"archived\"\n"));
        assert!(
            e.starts_with("cotal.toml:17:9:") && e.contains("is for one server"),
            "{e}"
        );
        assert!(
            parse(
                &format!("{cluster}[spaces.a]\nstate = \"suspended\"\n"),
                "cotal.toml"
            )
            .is_ok()
        );
        assert!(
            parse(
                "version = 1\n[spaces.a]\nstate = \"archived\"\n[spaces.b]\n",
                "cotal.toml"
            )
            .is_ok()
        );
    }

    #[test]
    fn line_column_counts_characters() {
        assert_eq!(line_column("ab\ncdé f", 0), (1, 1));
        assert_eq!(line_column("ab\ncdé f", 3), (2, 1));
        assert_eq!(line_column("ab\ncdé f", 8), (2, 5));
    }
}
