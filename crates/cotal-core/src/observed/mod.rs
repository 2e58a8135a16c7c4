//! What observation found: plain data, no IO. The planner is a pure function of this and the
//! desired state, so everything it may depend on is here and nothing else is.
//!
//! Invariant: nothing in this module holds a seed.
//!
//! The room of what is there: this module is what observation found; beside it, the verdicts on
//! stream configs (`drift_verdicts`) and the secret-free state a plan can be made from (`state`).

pub mod drift_verdicts;
pub mod state;

use crate::model::SpaceName;
use crate::trust::jwt::AccountLimits;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub use crate::trust::jwt::BrokerTrust;

/// Every space of an inventory, signed, in name order: what a render of the inventory preloads.
pub fn preloads(spaces: &BTreeMap<SpaceName, ObservedSpace>) -> Vec<crate::render::Preload<'_>> {
    spaces
        .iter()
        .filter(|(_, s)| s.archived.is_none())
        .flat_map(|(n, s)| space_preloads(n, s))
        .collect()
}

/// One space's preloads: its account, then its side accounts in role order.
pub fn space_preloads<'a>(
    name: &'a SpaceName,
    space: &'a ObservedSpace,
) -> impl Iterator<Item = crate::render::Preload<'a>> {
    std::iter::once(crate::render::Preload {
        space: name,
        account: &space.account_pub,
        token: crate::render::Token::Verified(&space.jwt),
        side: None,
    })
    .chain(
        space
            .sides
            .iter()
            .map(move |(role, side)| crate::render::Preload {
                space: name,
                account: &side.account_pub,
                token: crate::render::Token::Verified(&side.jwt),
                side: Some(role),
            }),
    )
}

/// What is at a record's path: nothing, something that is not a valid record (with its file and
/// why: a guard decides, so corruption is a value and never an error), or the record. The one
/// shape of every record cotal reads (`store::record` reads them all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<T> {
    Absent,
    Corrupt { file: PathBuf, reason: String },
    Valid(T),
}

/// The broker record, its public half.
pub type BrokerRecordState = Record<BrokerTrust>;

/// One valid account record, public parts only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedSpace {
    pub account_pub: String,
    pub signing_pub: String,
    /// Invariant: checked by whoever read it against the broker's trust (issued by the
    /// operator or one of its signing keys, for `account_pub`: `store::inventory::validate`,
    /// a state file's reader), so a render preloads it as [`crate::render::Token::Verified`].
    pub jwt: String,
    /// Limits as decoded from the account JWT.
    pub limits: AccountLimits,
    /// Revocations as decoded from the account JWT (what the broker enforces once loaded).
    pub revocations: crate::trust::jwt::Revocations,
    /// Revocations recorded by `cotal creds revoke` for this account (what the JWT should say):
    /// of its own users, never of a side account's.
    pub revoked: crate::trust::jwt::Revocations,
    /// Revocations recorded for the users of each side account (by its public key), `*` (every
    /// user of the space) included where the ledger holds one.
    pub side_revoked: BTreeMap<String, crate::trust::jwt::Revocations>,
    /// The archive its record holds: no config cotal renders preloads it.
    pub archived: Option<crate::model::Archival>,
    /// Its move to another broker, when one is recorded (`cotal space backup` of it fenced).
    pub relocation: Option<crate::adopt::relocation::Relocation>,
    /// Protection recorded on disk by the last apply (survives deletion from `cotal.toml`).
    pub protect_recorded: bool,
    /// The suspension the lifecycle record holds (why, when, by whom); `None` for an active
    /// space, or a suspended one whose suspension was never recorded.
    pub suspension_recorded: Option<crate::model::Suspension>,
    pub usage: Usage,
    /// Pids of live local processes recorded for this space.
    pub live_processes: Vec<u32>,
    /// Whether `.cotal/space.<hex>/` holds this account's $SYS creds.
    pub sys_creds_present: bool,
    /// The $SYS users those creds hold (observer, evictor), as their JWTs say.
    pub sys_users: Vec<SysUser>,
    /// Every $SYS user minted for the space and not expired (its ledger): what a suspension or
    /// removal revokes, the replaced ones included.
    pub sys_issued: Vec<SysUser>,
    /// Streams whose live config differs from the table, with the differing fields.
    pub stream_drift: Vec<(String, Vec<String>)>,
    /// The artifact store's `max_bytes` in the live figures (`None`: not live, or no store):
    /// its cap follows the storage quota, so a plan that changes the quota updates it.
    pub artifact_max_bytes: Option<i64>,
    /// The channel registry, as the running broker holds it.
    pub registry: RegistryState,
    /// The registry stream's fingerprint in the live figures (`None`: not live, or no stream).
    pub registry_fingerprint: Option<RegistryFingerprint>,
    /// On a running cluster: the fewest replicas any of the space's streams has, and whether
    /// every replica of every stream is current.
    pub replication: Option<(usize, bool)>,
    /// The claims of an adopted account cotal does not model, kept as they are (its record's
    /// `keepClaims`). Its `limits` and `revocations` above are then what cotal models of them
    /// (the rest is not cotal's to change), so a plan re-issues it only for a declared change.
    pub kept_claims: Vec<String>,
    /// The members' acl records, as the running broker holds them (read only when the space
    /// declares members or its acl bucket holds a record).
    pub acl: RegistryState,
    /// The users its ledger records for declared members, not revoked.
    pub member_users: Vec<crate::space::members::MemberUser>,
    /// Its side accounts as its record holds them ([`crate::space::side_accounts`]), each with the
    /// claims its JWT carries.
    pub sides: BTreeMap<crate::space::side_accounts::SideRole, ObservedSide>,
    /// The exports its account JWT carries (what its side accounts import from).
    pub exports: Vec<crate::trust::jwt::Export>,
    /// The imports its account JWT carries (cotal writes none; an adopted account whose
    /// claims are kept may carry its own).
    pub imports: Vec<crate::trust::jwt::Import>,
    /// Users its ledger records of the retired `member` profile (`cotal creds --user` before
    /// side accounts), not revoked nor expired. They live in the space's account, so every
    /// answer the broker gives them lands there; a plan revokes them, by name.
    pub retired_users: Vec<LedgerUser>,
    /// Owners (`--profile admin`) its ledger records minted before the owner's guard, not
    /// revoked nor expired: they may still delete and purge what cotal provisions.
    pub unguarded_owners: Vec<LedgerUser>,
}

/// A user a ledger records, as a plan names it when it revokes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerUser {
    /// The name it was minted with (`--user NAME`).
    pub name: String,
    /// Its public key.
    pub key: String,
    /// Unix seconds: the revocation covers users of this key issued up to then.
    pub issued_at: i64,
}

/// One side account as recorded: its key, its JWT (verified against the broker's trust when
/// the record was read) and the claims it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedSide {
    pub account_pub: String,
    pub jwt: String,
    pub claims: crate::trust::jwt::AccountNats,
}

impl ObservedSpace {
    /// What an account record alone says of a space (its keys, token and the token's limits and
    /// revocations); every fact observed beside it (its folder, usage, registries, processes)
    /// starts empty, for the observer to fill.
    pub fn recorded(
        account_pub: String,
        signing_pub: String,
        jwt: String,
        limits: AccountLimits,
        revocations: crate::trust::jwt::Revocations,
    ) -> ObservedSpace {
        ObservedSpace {
            account_pub,
            signing_pub,
            jwt,
            limits,
            revocations,
            archived: None,
            relocation: None,
            revoked: Default::default(),
            side_revoked: BTreeMap::new(),
            protect_recorded: false,
            suspension_recorded: None,
            usage: Usage::default(),
            live_processes: Vec::new(),
            sys_creds_present: false,
            sys_users: Vec::new(),
            sys_issued: Vec::new(),
            stream_drift: Vec::new(),
            artifact_max_bytes: None,
            registry_fingerprint: None,
            registry: Default::default(),
            replication: None,
            kept_claims: Vec::new(),
            acl: Default::default(),
            member_users: Vec::new(),
            sides: BTreeMap::new(),
            exports: Vec::new(),
            imports: Vec::new(),
            retired_users: Vec::new(),
            unguarded_owners: Vec::new(),
        }
    }
}

/// What the live figures say of a registry's stream. Any write to the stream moves `last_seq`,
/// any removal lowers `messages` (and only a write raises it again), and a stream deleted and
/// made again has another `created`: two equal fingerprints of one account's registry mean it
/// did not change in between.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RegistryFingerprint {
    pub created: String,
    pub first_seq: u64,
    pub last_seq: u64,
    pub messages: u64,
}

/// What is known of a space's channel registry.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum RegistryState {
    /// Not read (the broker is stopped, or the space is suspended).
    #[default]
    Unknown,
    /// The space has no registry bucket yet (provisioning creates it).
    Missing,
    Read(crate::space::channels::Registry),
    /// Reading it failed.
    Failed(String),
}

/// Where usage figures came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum UsageSource {
    /// Nothing known.
    #[default]
    Unknown,
    /// Read from the JetStream store folder with the broker stopped: bytes, no message counts.
    Store,
    /// Asked of the running broker.
    Live,
}

/// A space's data and connections, as far as they are known.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct Usage {
    pub source: UsageSource,
    pub streams: Vec<StreamUsage>,
    /// The space's tenant connections: its own account's and its members' accounts' (not its
    /// observer's nor its evictor's, which cotal's helpers hold).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
    /// The same, per account (the space's first, then each member's that has any): a
    /// connection limit bounds each account on its own.
    #[serde(skip)]
    pub per_account: Vec<u64>,
    /// Each declared member's live connections (its own account's), by principal: what a
    /// revocation of its users closes. Empty unless the figures are live.
    #[serde(skip)]
    pub by_member: BTreeMap<String, u64>,
}

impl Usage {
    pub fn total_bytes(&self) -> u64 {
        self.streams.iter().map(|s| s.bytes).sum()
    }
    pub fn total_messages(&self) -> Option<u64> {
        self.streams.iter().map(|s| s.messages).sum()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamUsage {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub messages: Option<u64>,
    pub bytes: u64,
}

/// Why an entry of the account-record namespace is not a valid record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CorruptRecord {
    pub file: PathBuf,
    pub reason: String,
    /// Set when the record is well-formed but signed by another operator.
    pub foreign_issuer: Option<String>,
}

impl CorruptRecord {
    /// The space the record's file name encodes (`account.<hex>.json`), when it does.
    pub fn space(&self) -> Option<SpaceName> {
        let name = self.file.file_name()?.to_str()?;
        let hex = name.strip_prefix("account.")?.strip_suffix(".json")?;
        SpaceName::from_hex(hex)
    }
}

/// The validated account records.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Inventory {
    pub spaces: BTreeMap<SpaceName, ObservedSpace>,
    pub corrupt: Vec<CorruptRecord>,
}

/// `broker-config.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GenerationRecord {
    #[serde(rename = "gen")]
    pub generation: u64,
    #[serde(rename = "inventoryDigest")]
    pub inventory_digest: String,
}

/// The generation record.
pub type GenerationState = Record<GenerationRecord>;

impl GenerationState {
    /// The generation to compare-and-set against (0 before the first promotion).
    pub fn generation(&self) -> u64 {
        match self {
            GenerationState::Valid(r) => r.generation,
            _ => 0,
        }
    }
}

/// One removal recorded in the journal. Finished by every later apply whatever the desired
/// state says: the operator approved it and its commit point may have passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournaledRemoval {
    pub space: SpaceName,
    pub account: String,
    /// True once the space's streams were deleted (the commit point).
    pub committed: bool,
    /// The digest of the receipt that proved the space's recorded move, when the removal ends
    /// one: the apply that finishes it audits the move completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

/// A purge in the journal: the space whose streams and buckets are emptied, pinned to its
/// account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournaledPurge {
    pub space: SpaceName,
    pub account: String,
    /// True once its first stream may have been emptied (the commit point): the purge is then
    /// finished by the next apply.
    pub committed: bool,
    /// Each stream's last sequence when the purge committed: what is emptied is exactly what
    /// the streams held then (messages up to it), so a re-run finishing the purge never
    /// removes what clients wrote after it.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub upto: std::collections::BTreeMap<String, u64>,
}

/// An account minted by a journaled apply for a space whose old account that apply was also
/// removing (a removed name listed again): the one account other than the pinned one that the
/// space's record may hold while the removal is finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournaledAdd {
    pub space: SpaceName,
    pub account: String,
}

/// Progress of one step in the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JournaledStep {
    pub step: String,
    pub started_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<String>,
}

/// `.cotal/maintenance/journal.json`: the open apply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Journal {
    pub op: String,
    pub plan_digest: String,
    pub started_at: String,
    pub pid: u32,
    pub host: String,
    #[serde(default)]
    pub removals: Vec<JournaledRemoval>,
    /// The spaces the apply empties (`cotal space purge`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub purges: Vec<JournaledPurge>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub added: Vec<JournaledAdd>,
    /// The spaces the apply adds (written once, when the journal opens): a re-plan of an
    /// interrupted bulk add counts them as adds being completed, not as changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adding: Vec<SpaceName>,
    #[serde(default)]
    pub steps: Vec<JournaledStep>,
    /// Audit records of changes that took effect but could not be written (seed 002 §5.1):
    /// the apply that finishes this journal writes them first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owed: Vec<crate::audit::Record>,
}

impl Journal {
    /// Whether the interrupted apply was adding `space`.
    pub fn adds(&self, space: &SpaceName) -> bool {
        self.adding.contains(space)
    }
}

/// The journal: `Absent` when no apply is open, `Valid` when one is (an interrupted apply the
/// next `apply` finishes).
pub type JournalState = Record<Journal>;

/// Whether a node of this root's broker runs, three-valued (docs/design/architecture.md, "The running
/// broker"): running only when the recorded pid is this root's nats-server and owns the
/// listener, stopped only when no such process exists and nothing listens, unknown otherwise
/// (every writing verb refuses). A node cotal does not run (another machine's, or one a state
/// file records) runs when it answered through the system account, and has no pid here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum BrokerProcess {
    Stopped,
    Running {
        pid: u32,
    },
    /// Runs, but is no process of this machine that cotal probes: a remote node (`local =
    /// false`) that answered through the cluster's system account, or a node a state file
    /// records as running.
    Answering,
    Unknown {
        seen: String,
    },
}

impl BrokerProcess {
    pub fn is_running(&self) -> bool {
        matches!(
            self,
            BrokerProcess::Running { .. } | BrokerProcess::Answering
        )
    }

    /// One word for people and for `status`: running, stopped or unknown.
    pub fn word(&self) -> &'static str {
        match self {
            BrokerProcess::Running { .. } | BrokerProcess::Answering => "running",
            BrokerProcess::Stopped => "stopped",
            BrokerProcess::Unknown { .. } => "unknown",
        }
    }

    /// The pid of a process of this machine, when it runs.
    pub fn pid(&self) -> Option<u32> {
        match self {
            BrokerProcess::Running { pid } => Some(*pid),
            _ => None,
        }
    }
}

/// The promoted `server.conf`: its text and what cotal reads back from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotedConfig {
    pub text: String,
    pub view: crate::render::Promoted,
}

impl PromotedConfig {
    pub fn new(text: String) -> Self {
        PromotedConfig {
            view: crate::render::read_promoted(&text),
            text,
        }
    }
}

/// Where a JetStream store size comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacitySource {
    /// `[broker] max_file_store` / `max_memory_store` in `cotal.toml`.
    Configured,
    /// The running broker says so (VARZ).
    Broker,
    /// nats-server's default, estimated: 75% of the free disk of the store, or of the memory.
    Estimated,
}

impl std::fmt::Display for CapacitySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CapacitySource::Configured => "set in cotal.toml",
            CapacitySource::Broker => "as the running broker reports it",
            CapacitySource::Estimated => {
                "nats-server's default, estimated: 75% of the free disk, or of the memory"
            }
        })
    }
}

/// One of a space's $SYS users, from its creds file (public: no secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysUser {
    pub role: crate::space::permissions::SysRole,
    /// The user's public key.
    pub key: String,
    /// The signing key that issued it.
    pub issuer: String,
    /// The account it is a user of (its JWT's `issuer_account`): the space's side account of
    /// its role, or (creds minted before side accounts) the system account.
    #[serde(default)]
    pub account: String,
    pub issued_at: i64,
    pub expires_at: Option<i64>,
}

/// Which system signing keys the root keeps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SysKeysState {
    /// Scoped keys in the broker record: each kept role's public key.
    Scoped(std::collections::BTreeMap<crate::space::permissions::SysRole, String>),
    /// Only the unscoped `sys.seed` of a root made before the scoped keys.
    Legacy,
    /// No system key at rest: a single-space root, or a multi-space root whose keys are lost.
    None,
}

/// The system account as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemObserved {
    pub keys: SysKeysState,
    /// The revocations of the system account's JWT.
    pub revocations: crate::trust::jwt::Revocations,
    /// Whether the JWT's scoped keys carry exactly the templates this cotal writes.
    pub templates_current: bool,
    /// A previous control key is still kept: a change of the control key was interrupted
    /// before its promotion was confirmed.
    pub previous_control: bool,
    /// The revocations `cotal creds revoke --system` recorded in the system users' ledger
    /// (`.cotal/auth/system-users.json`); the next re-issue puts those the monitoring account's
    /// JWT lacks in force.
    pub handed_out_revoked: crate::trust::jwt::Revocations,
    /// When each monitoring user the ledger records expires (user public key to its `exp`;
    /// one that never expires is absent): a revocation is dropped from the JWT only by a plan,
    /// and only once the ledger says its user has expired.
    pub handed_out_expires: std::collections::BTreeMap<String, i64>,
    /// The root's monitoring account, as its broker record holds it: its key and the claims
    /// its JWT carries (`None`: the root has none yet).
    pub monitor: Option<(String, crate::trust::jwt::AccountNats)>,
    /// Monitoring users handed out before the monitoring account (users of the system
    /// account's monitor key), not revoked nor expired: the re-issue that moves the key to the
    /// monitoring account refuses them.
    pub legacy_monitor_users: usize,
}

impl SystemObserved {
    /// The public key kept for `role`, if any.
    pub fn key(&self, role: crate::space::permissions::SysRole) -> Option<&str> {
        match &self.keys {
            SysKeysState::Scoped(keys) => keys.get(&role).map(String::as_str),
            _ => None,
        }
    }
}

/// One JetStream store of the broker: its size, where that figure comes from, and what it
/// holds now when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Store {
    pub size: u64,
    pub source: CapacitySource,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<u64>,
}

/// `[broker] include` as read ([`crate::desired::include`]): its text (inlined into every config), its
/// top-level settings as nats-server reads them (for the digest), and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservedInclude {
    /// As written in `cotal.toml`.
    pub path: String,
    pub text: String,
    pub values: Vec<(String, serde_json::Value)>,
    pub problems: Vec<String>,
}

/// The TLS material of `[broker.tls]`, as observed (`cotal::tls` reads it).
/// What the broker's TLS files are, as far as a plan needs them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsFacts {
    /// Absolute paths, as the config names them.
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
    /// `sha256:` and the hex of the leaf certificate's DER: a new certificate at the same path
    /// changes it, and with it the rendered config.
    pub fingerprint: String,
    /// The leaf's expiry (unix seconds).
    pub not_after: i64,
    /// The DNS names and IP addresses the leaf covers.
    pub names: Vec<String>,
    /// `sha256:` of the CA file, when one is declared: a new CA at the same path is a planned
    /// change too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_fingerprint: Option<String>,
}

/// The material as read: its facts when the certificate could be read, and every problem.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObservedTls {
    pub facts: Option<TlsFacts>,
    /// Each `cotal.toml:LINE:COLUMN: ...`.
    pub problems: Vec<String>,
}

/// Whether `names` (a certificate's) cover `host`: an exact name or address, or a `*.` wildcard
/// for one label.
pub fn covers(names: &[String], host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    names.iter().any(|n| {
        let n = n.to_ascii_lowercase();
        if n == host {
            return true;
        }
        match n.strip_prefix("*.") {
            Some(suffix) => host
                .split_once('.')
                .is_some_and(|(first, rest)| !first.is_empty() && rest == suffix),
            None => false,
        }
    })
}

/// What the broker can hold in JetStream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capacity {
    pub file: Store,
    pub memory: Store,
    /// How many files the broker may hold open: each stream and bucket of every space holds
    /// one. Exported in the state, so a plan from the state judges adds as the root would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_files: Option<OpenFiles>,
}

/// The broker's open-file limit and where it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenFiles {
    pub limit: u64,
    pub source: OpenFilesSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpenFilesSource {
    /// The running nats-server's own soft limit (`/proc/PID/limits`; the lowest of a
    /// cluster's local nodes).
    Broker,
    /// What `cotal up` gives a broker it starts: this host's hard limit for the user.
    Up,
}

impl std::fmt::Display for OpenFilesSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OpenFilesSource::Broker => "the running broker's limit",
            OpenFilesSource::Up => "what `cotal up` gives the broker: this host's hard limit",
        })
    }
}

/// What the running nats-server says of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerInfo {
    pub version: String,
    pub started: String,
    /// Each running node's loaded config digest (VARZ), by node name: a node whose digest is
    /// not its promoted config's missed a reload, and the plan promotes again to bring it in.
    pub loaded: std::collections::BTreeMap<String, String>,
    /// The running nodes whose loaded config is not the rendering of the inventory (the
    /// observation computes it: a cluster node's digest covers its route credential).
    pub behind: Vec<String>,
    /// The nodes whose loaded config is not the rendering of the records the promoted config
    /// preloads, whatever the journal says (`None`: not known): with none, the broker runs
    /// the promoted config, so an interrupted apply's fence it holds is in force.
    #[serde(skip)]
    pub behind_records: Option<Vec<String>>,
    /// Of a single server: each account's verdict on its stream configs and what vouches for
    /// it (`store::caches::drift_cache`), for an apply or `up` to cache. Not for planning.
    #[serde(skip)]
    pub drift_cache: Option<crate::observed::drift_verdicts::DriftCache>,
}

/// One node's recorded store (`.cotal/store.json`, `cotal::store::store_home`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoreHome {
    /// The store folder, absolute.
    pub dir: PathBuf,
    /// The identity the store holds; `None` after an approved move, until `up` starts on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// Everything the planner may look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    pub broker: BrokerRecordState,
    /// With the broker record absent: the tenant material still on disk (account records,
    /// config, generation, journal, space folders), named for people. Empty otherwise.
    pub tenant_material: Vec<String>,
    /// Material the original Cotal kept for no named tenant, relative to the root: its P7
    /// files at the root of `.cotal/` and its pre-P1 agent secrets flat in `auth/creds/`. A
    /// removal is refused while any is there (seed 000 §2.2 step 1): removing a space is what
    /// would make it look owned by the survivors.
    pub unattributed_material: Vec<String>,
    pub system: SystemObserved,
    pub inventory: Inventory,
    pub generation: GenerationState,
    pub journal: JournalState,
    /// sha256 of `cotal.toml` as read.
    pub desired_digest: String,
    /// Why live figures are missing although the broker runs.
    pub live_error: Option<String>,
    /// The running server's version and start time, read with the live figures.
    pub server: Option<ServerInfo>,
    /// Spaces an open journal removes whose folder records protection for the pinned account
    /// (or whose protection record is unreadable: fail closed).
    pub journal_protected: std::collections::BTreeSet<SpaceName>,
    /// What the broker's JetStream can hold.
    pub capacity: Capacity,
    /// When this was observed (unix seconds): expiry is judged against it, never against the
    /// clock, so planning stays a pure function.
    pub now: i64,
    /// Every node of the broker, in `cotal.toml`'s order; never empty: a single server is the
    /// one node `local`, a cluster has at least two.
    pub nodes: Vec<ObservedNode>,
    /// The root holds the promoted config of the other layout (a single server's while
    /// `cotal.toml` declares a cluster, or a cluster node's while it does not): what was found.
    pub layout_conflict: Option<String>,
    /// `[broker.tls]`'s files as read (absent when `cotal.toml` declares no TLS).
    pub tls: Option<ObservedTls>,
    /// `[cluster.tls]`'s files as read (absent when no route TLS is declared).
    pub route_tls: Option<ObservedTls>,
    /// How many times `cotal rotate routes` replaced the cluster's route credential.
    pub route_rotation: u64,
    /// `[broker] include` as read (absent when `cotal.toml` declares none).
    pub include: Option<ObservedInclude>,
}

/// One node of the broker, as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedNode {
    /// The node as `cotal.toml` declares it.
    pub spec: crate::desired::topology::NodeSpec,
    /// Its config, the promotion's candidate and previous config, pidfile and log.
    pub files: crate::desired::topology::NodeFiles,
    /// Where it listens: its promoted config's listener, else `cotal.toml`'s.
    pub listener: crate::model::Listener,
    pub server_conf: Option<PromotedConfig>,
    /// A remote node (`local = false`) is [`BrokerProcess::Answering`] when it answered through
    /// the cluster's system account, else `Stopped`: its process is never probed.
    pub process: BrokerProcess,
    /// The node's JetStream store, absolute (a remote node's is on its own machine).
    pub store_dir: PathBuf,
    /// Where the root recorded this node's data to live (`.cotal/store.json`); `None` on a
    /// root that never recorded it (made before the record, or never started).
    pub store_home: Option<StoreHome>,
    /// The identity the store at `store_dir` holds (`.cotal-store-id`), when it holds one.
    pub store_id: Option<String>,
    /// The store of `store_home` holds JetStream data (a remote node's: taken to).
    pub store_holds_data: bool,
}

impl ObservedNode {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Whether another machine runs it (`local = false`).
    pub fn remote(&self) -> bool {
        !self.spec.local
    }
}

/// The process of a broker made of `nodes`, three-valued: `Unknown` when any node is (what was
/// seen names the node on a cluster), else the first running node's, else `Stopped`.
pub fn nodes_process(nodes: &[ObservedNode]) -> BrokerProcess {
    let clustered = nodes.len() > 1;
    let unknown = nodes.iter().find_map(|n| match &n.process {
        BrokerProcess::Unknown { seen } => Some(BrokerProcess::Unknown {
            seen: format!(
                "{}{seen}",
                crate::desired::topology::node_prefix(clustered, n.name())
            ),
        }),
        _ => None,
    });
    unknown
        .or_else(|| {
            nodes
                .iter()
                .find(|n| n.process.is_running())
                .map(|n| n.process.clone())
        })
        .unwrap_or(BrokerProcess::Stopped)
}

/// The node cotal reaches a broker of `nodes` through: the first running one, else the first.
pub fn via(nodes: &[ObservedNode]) -> &ObservedNode {
    nodes
        .iter()
        .find(|n| n.process.is_running())
        .unwrap_or(&nodes[0])
}

impl Observed {
    /// What cannot be trusted, named for people (what `plan` refuses over): a missing or
    /// corrupt broker record, corrupt account records, a corrupt generation record or journal,
    /// a root holding the other layout's config. Empty when all is sound.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        match &self.broker {
            BrokerRecordState::Absent if !self.tenant_material.is_empty() => out.push(format!(
                "the broker record .cotal/auth/broker.json is missing, but the root holds {}",
                self.tenant_material.join(", ")
            )),
            BrokerRecordState::Absent => {
                out.push("the broker record .cotal/auth/broker.json is missing".into())
            }
            BrokerRecordState::Corrupt { file, reason } => {
                out.push(format!("{} is corrupt: {reason}", file.display()))
            }
            BrokerRecordState::Valid(_) => {}
        }
        for c in &self.inventory.corrupt {
            out.push(match c.space() {
                Some(space) => format!(
                    "the account record of space {} ({}) is corrupt: {}",
                    space.quoted(),
                    c.file.display(),
                    c.reason
                ),
                None => format!("{} is corrupt: {}", c.file.display(), c.reason),
            });
        }
        match &self.generation {
            GenerationState::Corrupt { file, reason } => {
                out.push(format!("{} is corrupt: {reason}", file.display()))
            }
            GenerationState::Absent
                if self.server_conf().is_some() || !self.inventory.spaces.is_empty() =>
            {
                out.push("the generation record .cotal/auth/broker-config.json is missing although spaces are applied: the next apply promotes the config again from generation 0".into())
            }
            _ => {}
        }
        if let JournalState::Corrupt { file, reason } = &self.journal {
            out.push(format!("{} is corrupt: {reason}", file.display()));
        }
        if let Some(found) = &self.layout_conflict {
            out.push(found.clone());
        }
        out
    }

    /// The nodes of a running cluster that are not running, named for people (`status` and
    /// `space list` exit 3 over them, as `plan` refuses over them).
    pub fn node_problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for n in self.nodes_down() {
            out.push(format!(
                "node {} of the cluster is not running ({} of {} run): `cotal up` starts it{}",
                n.name(),
                self.nodes_running(),
                self.nodes.len(),
                if n.remote() {
                    " on its own machine"
                } else {
                    ""
                }
            ));
        }
        out
    }

    /// Whether the broker is a cluster (a topology has one node exactly when it is a single
    /// server: a cluster has at least two).
    pub fn is_cluster(&self) -> bool {
        self.nodes.len() > 1
    }

    /// The node cotal reaches first in `cotal.toml`'s order.
    pub fn first(&self) -> &ObservedNode {
        &self.nodes[0]
    }

    /// Whether the broker runs: one of its nodes does, and none is unknown.
    pub fn is_running(&self) -> bool {
        self.process().is_running()
    }

    /// The broker's process, three-valued over its nodes (see [`nodes_process`]).
    pub fn process(&self) -> BrokerProcess {
        nodes_process(&self.nodes)
    }

    /// The listener cotal reaches the broker through (see [`via`]).
    pub fn listener(&self) -> &crate::model::Listener {
        &via(&self.nodes).listener
    }

    /// The first node's promoted config, if any.
    pub fn server_conf(&self) -> Option<&PromotedConfig> {
        self.first().server_conf.as_ref()
    }

    /// The text of the first node's promoted config, if any.
    pub fn server_conf_text(&self) -> Option<&str> {
        self.server_conf().map(|c| c.text.as_str())
    }

    /// Whether the promoted config preloads `account` (on any node).
    pub fn loads(&self, account: &str) -> bool {
        self.nodes.iter().any(|n| {
            n.server_conf
                .as_ref()
                .is_some_and(|c| c.view.loads(account))
        })
    }

    /// Every local node's JetStream store (a remote node's is on its own machine).
    pub fn store_dirs(&self) -> Vec<PathBuf> {
        self.nodes
            .iter()
            .filter(|n| !n.remote())
            .map(|n| n.store_dir.clone())
            .collect()
    }

    /// How many nodes run.
    pub fn nodes_running(&self) -> usize {
        self.nodes.iter().filter(|n| n.process.is_running()).count()
    }

    /// Whether node `name` runs.
    pub fn node_running(&self, name: &str) -> bool {
        self.node(name).is_some_and(|n| n.process.is_running())
    }

    /// Node `name`.
    pub fn node(&self, name: &str) -> Option<&ObservedNode> {
        self.nodes.iter().find(|n| n.name() == name)
    }

    /// Whether JetStream can have a quorum: a strict majority of the nodes running (a single
    /// server always has one: its meta layer is itself).
    pub fn has_quorum(&self) -> bool {
        !self.is_cluster() || self.nodes_running() * 2 > self.nodes.len()
    }

    /// The promoted config text of node `name`.
    pub fn node_conf_text(&self, name: &str) -> Option<&str> {
        self.node(name)
            .and_then(|n| n.server_conf.as_ref())
            .map(|c| c.text.as_str())
    }

    /// The nodes that are not running while another runs (empty when no node runs).
    pub fn nodes_down(&self) -> Vec<&ObservedNode> {
        if !self.is_running() {
            return Vec::new();
        }
        self.nodes
            .iter()
            .filter(|n| !n.process.is_running())
            .collect()
    }

    /// What the plan pins of the promoted configs: the sha256 of the one config of a single
    /// server (as saved plans have always pinned it), or of every node's name and config in
    /// order; `absent` when there is none.
    pub fn config_pin(&self) -> String {
        if !self.is_cluster() {
            return self
                .server_conf_text()
                .map(|c| crate::trust::digest::sha256(c.as_bytes()))
                .unwrap_or_else(|| "absent".into());
        }
        if self.nodes.iter().all(|n| n.server_conf.is_none()) {
            return "absent".into();
        }
        let mut all = String::new();
        for n in &self.nodes {
            all.push_str(n.name());
            all.push('\0');
            all.push_str(
                n.server_conf
                    .as_ref()
                    .map(|c| c.text.as_str())
                    .unwrap_or(""),
            );
            all.push('\0');
        }
        crate::trust::digest::sha256(all.as_bytes())
    }
}

#[cfg(test)]
mod tls_tests {

    use super::covers;

    #[test]
    fn names_cover_exact_hosts_and_one_wildcard_label() {
        let names = vec![
            "broker.example.com".to_string(),
            "*.nodes.example.com".into(),
            "10.0.0.2".into(),
        ];
        assert!(covers(&names, "broker.example.com"));
        assert!(covers(&names, "BROKER.example.com."));
        assert!(covers(&names, "n1.nodes.example.com"));
        assert!(!covers(&names, "a.n1.nodes.example.com"));
        assert!(!covers(&names, "nodes.example.com"));
        assert!(covers(&names, "10.0.0.2"));
        assert!(!covers(&names, "10.0.0.3"));
    }
}
