//! The versioned JSON documents of the verbs that neither plan nor apply: what `up`, `down`,
//! `root backup`, `root restore`, `space backup`, `space restore`, `space evict`, `rotate
//! routes` and `creds` (mint, revoke, list) did, each printed once at the end with `--format
//! json` and described by its schema in `schemas/` (`up`, `down`, `root-backup`,
//! `root-restore`, `space-backup`, `space-restore`, `space-evict`, `rotate-routes`,
//! `creds-mint`, `creds-revoke`, `creds-list`), as `apply`'s is by
//! `schemas/apply.schema.json` ([`super::outcome`]). An `audit --format json` line is the record
//! with the version added ([`AuditLine`]).
//!
//! Pure: built from values the operations returned. No secret is in any of them: a creds
//! document names the file the creds were written to, never the creds.

use crate::outcomes::{DownEvent, Served, Stopped, UpEvent};
use serde::Serialize;

/// Bumped when one of these documents changes shape incompatibly.
pub const FORMAT_VERSION: u32 = 1;

/// The document as pretty JSON, with a trailing newline.
pub fn pretty(document: &impl Serialize) -> String {
    let mut s = serde_json::to_string_pretty(document).expect("a document serializes");
    s.push('\n');
    s
}

/// How `up` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpStatus {
    /// Every node already ran; nothing was started.
    AlreadyRunning,
    /// The broker runs and serves the spaces at the generation.
    Started,
    /// An interrupted apply's journal is open: nodes were started on the config on disk and
    /// nothing was promoted or provisioned; `cotal apply` finishes it.
    StartedForJournal,
}

/// A node `up` started (`node`: its name on a cluster, null for a single server).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StartedNode {
    pub node: Option<String>,
    pub pid: u32,
    /// `nats://host:port`.
    pub url: String,
}

/// A node another machine runs that did not answer through the cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemoteNode {
    pub node: String,
    /// The config it is to be started on, there.
    pub config: String,
}

/// What `up` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Up {
    pub format_version: u32,
    pub status: UpStatus,
    pub started: Vec<StartedNode>,
    /// A single server's pid when it was already running.
    pub running_pid: Option<u32>,
    /// The cut of `down --preserve-state` was cleared.
    pub cut_cleared: bool,
    pub remote_not_answering: Vec<RemoteNode>,
    /// A cluster's JetStream meta leader.
    pub meta_leader: Option<String>,
    /// The provisioning steps completed (their titles), in order.
    pub provisioned: Vec<String>,
    /// The spaces served (status `started`).
    pub spaces: Option<usize>,
    /// The generation served (status `started`).
    pub generation: Option<u64>,
    /// The spaces the open journal removes (status `started-for-journal`).
    pub journal_removes: Vec<String>,
    /// The provisioning steps that failed, each `STEP: WHY` (status `started`; non-empty: the
    /// command exits 8, those spaces not served).
    pub failed: Vec<String>,
    pub duration_ms: u64,
}

impl Up {
    /// The document of `events` (as they were told) and the broker served.
    pub fn new(events: Vec<UpEvent>, served: &Served, duration: std::time::Duration) -> Up {
        let mut doc = Up {
            format_version: FORMAT_VERSION,
            status: UpStatus::Started,
            started: Vec::new(),
            running_pid: None,
            cut_cleared: false,
            remote_not_answering: Vec::new(),
            meta_leader: None,
            provisioned: Vec::new(),
            spaces: None,
            generation: None,
            journal_removes: Vec::new(),
            failed: Vec::new(),
            duration_ms: duration.as_millis() as u64,
        };
        for event in events {
            match event {
                UpEvent::Started {
                    node,
                    pid,
                    listener,
                } => doc.started.push(StartedNode {
                    node,
                    pid,
                    url: format!("nats://{listener}"),
                }),
                UpEvent::CutCleared => doc.cut_cleared = true,
                UpEvent::RemoteNotAnswering { node, config } => {
                    doc.remote_not_answering.push(RemoteNode {
                        node,
                        config: config.display().to_string(),
                    })
                }
                UpEvent::MetaLeader(leader) => doc.meta_leader = Some(leader),
                UpEvent::Provisioned(title) => doc.provisioned.push(title),
            }
        }
        match served {
            Served::AlreadyRunning { pid } => {
                doc.status = UpStatus::AlreadyRunning;
                doc.running_pid = *pid;
            }
            Served::Started {
                spaces,
                generation,
                failed,
                ..
            } => {
                doc.spaces = Some(*spaces);
                doc.generation = Some(*generation);
                doc.failed = failed.iter().map(ToString::to_string).collect();
            }
            Served::StartedForJournal { removals, .. } => {
                doc.status = UpStatus::StartedForJournal;
                doc.journal_removes = removals.iter().map(|s| s.to_string()).collect();
            }
        }
        doc
    }
}

/// How `down` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DownStatus {
    /// The root has no `.cotal/`: no broker of it can run.
    NeverInitialised,
    /// Every local node is stopped (or was not running).
    Stopped,
    /// Stopped, with a cut recorded for `space backup` and `space restore`.
    Cut,
}

/// What `down` found or did on one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeOutcome {
    Stopped,
    /// The pidfile named a process that is not this root's nats-server: it was removed and
    /// nothing was signalled.
    StalePidfile,
    NotRunning,
    /// Another machine runs it: stop it there.
    Remote,
}

/// One node of `down` (`node`: null for a single server).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DownNode {
    pub node: Option<String>,
    pub outcome: NodeOutcome,
    pub pid: Option<u32>,
}

/// The cut `down --preserve-state` recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cut {
    pub at: String,
    pub generation: u64,
}

/// What `down` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Down {
    pub format_version: u32,
    pub status: DownStatus,
    pub nodes: Vec<DownNode>,
    pub cut: Option<Cut>,
    pub duration_ms: u64,
}

impl Down {
    /// The document of `events` and how `down` ended.
    pub fn new(events: Vec<DownEvent>, stopped: &Stopped, duration: std::time::Duration) -> Down {
        let nodes = events
            .into_iter()
            .map(|event| match event {
                DownEvent::Stopped { node, pid } => DownNode {
                    node,
                    outcome: NodeOutcome::Stopped,
                    pid: Some(pid),
                },
                DownEvent::StalePidfile { node, pid } => DownNode {
                    node,
                    outcome: NodeOutcome::StalePidfile,
                    pid: Some(pid),
                },
                DownEvent::NotRunning { node } => DownNode {
                    node,
                    outcome: NodeOutcome::NotRunning,
                    pid: None,
                },
                DownEvent::Remote { node } => DownNode {
                    node: Some(node),
                    outcome: NodeOutcome::Remote,
                    pid: None,
                },
            })
            .collect();
        let (status, cut) = match stopped {
            Stopped::NeverInitialised => (DownStatus::NeverInitialised, None),
            Stopped::Stopped => (DownStatus::Stopped, None),
            Stopped::Cut { at, generation } => (
                DownStatus::Cut,
                Some(Cut {
                    at: at.clone(),
                    generation: *generation,
                }),
            ),
        };
        Down {
            format_version: FORMAT_VERSION,
            status,
            nodes,
            cut,
            duration_ms: duration.as_millis() as u64,
        }
    }
}

/// What `root backup` wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RootBackup {
    pub format_version: u32,
    /// The operator's public key: whose trust the backup holds.
    pub operator: String,
    pub generation: u64,
    /// How many files it holds (every seed of the broker among them).
    pub files: usize,
    pub dir: String,
}

/// What `root restore` brought up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RootRestore {
    pub format_version: u32,
    pub operator: String,
    pub generation: u64,
    /// When the backup was taken.
    pub taken_at: String,
    pub root: String,
}

/// A stream's figures: its messages and its first and last sequence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StreamFigures {
    pub name: String,
    pub messages: u64,
    pub first_seq: u64,
    pub last_seq: u64,
}

/// What `space backup` wrote: the space, the account its data came from, and each stream's
/// figures as the artifact's manifest records them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpaceBackup {
    pub format_version: u32,
    pub space: String,
    pub account: String,
    pub dir: String,
    pub streams: Vec<StreamFigures>,
    /// What the backup leaves out, as the original's backup classes do (the ephemeral buckets,
    /// the artifact store and its index): created empty by the provisioning after a restore.
    pub not_carried: Vec<String>,
    /// The move this export recorded (the space was fenced): its phase and the artifact's
    /// digest, which the destination's receipt must name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub relocation: Option<RelocationFigures>,
}

/// A recorded move, as `space backup` and `space relocation` report it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RelocationFigures {
    pub phase: String,
    pub started_at: String,
    pub by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_digest: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub artifact_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
}

impl RelocationFigures {
    pub fn of(r: &crate::adopt::relocation::Relocation) -> RelocationFigures {
        RelocationFigures {
            phase: r.phase.to_string(),
            started_at: r.started_at.clone(),
            by: r.by.clone(),
            artifact_digest: r.artifact.as_ref().map(|a| a.digest.clone()),
            artifact_path: r.artifact.as_ref().map(|a| a.path.clone()),
            receipt: r.receipt.clone(),
        }
    }
}

/// What `space restore` wrote, each stream verified against the artifact's manifest on an
/// isolated broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpaceRestore {
    pub format_version: u32,
    pub space: String,
    pub dir: String,
    /// The artifact came from another account (`--relocate`).
    pub relocated: bool,
    pub verified: Vec<StreamFigures>,
    /// The receipt written for the source of a move (`--relocated` there).
    pub receipt: String,
}

/// A space's recorded move (`space relocation`), and whether this run cancelled it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpaceRelocation {
    pub format_version: u32,
    pub space: String,
    /// `null`: no move is recorded.
    pub relocation: Option<RelocationFigures>,
    pub cancelled: bool,
}

/// What `space evict` closed (`broker_running: false`: nothing to close).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpaceEvict {
    pub format_version: u32,
    pub space: String,
    pub broker_running: bool,
    pub closed: usize,
}

/// The route credential rotation `rotate routes` recorded (written into every node's include by
/// the next `apply` or `up`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RotateRoutes {
    pub format_version: u32,
    pub rotation: u64,
}

/// A user `creds` minted (`space`: null for a system user). Its creds are in `out`, never
/// here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CredsMinted {
    pub format_version: u32,
    pub space: Option<String>,
    pub user: String,
    /// Its public key (U…).
    pub key: String,
    /// A space user's profile (`member`, `admin`) or a system user's role (`monitor`).
    pub profile: String,
    pub expires: Option<String>,
    /// The file the creds were written to (0600).
    pub out: String,
}

/// What `creds revoke` recorded (`space`: null for system users).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CredsRevoked {
    pub format_version: u32,
    pub space: Option<String>,
    /// The user public keys revoked.
    pub keys: Vec<String>,
    pub at: String,
    /// Recorded now; the next `cotal apply` enforces it.
    pub enforced_by_next_apply: bool,
}

/// One line of `audit --format json`: the record as the audit holds it, with the version of
/// this output first.
#[derive(Debug, Clone, Serialize)]
pub struct AuditLine<'r> {
    pub format_version: u32,
    #[serde(flatten)]
    pub record: &'r crate::audit::Record,
}
