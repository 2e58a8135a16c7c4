//! What the edge's operations tell and return, as plain data: what an apply did, the events of
//! `up` and `down`, what each leaves, and one space's failed step. The operations (`cotal::ops`) produce them; the
//! reports ([`crate::report`]) render them.

use crate::model::{Listener, SpaceName};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One space's step that failed while the others went on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpaceFailure {
    pub space: SpaceName,
    /// The step's title (`provision "x"`, `write the channel registry of "x"`).
    pub step: String,
    /// What went wrong, first line.
    pub reason: String,
}

impl std::fmt::Display for SpaceFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.step, self.reason)
    }
}

/// What `up` tells as it goes.
pub enum UpEvent {
    /// A node was started (`node`: its name on a cluster).
    Started {
        node: Option<String>,
        pid: u32,
        listener: Listener,
    },
    /// The cut of `down --preserve-state` was cleared.
    CutCleared,
    /// A node another machine runs does not answer through the cluster.
    RemoteNotAnswering { node: String, config: PathBuf },
    /// The cluster's JetStream meta leader.
    MetaLeader(String),
    /// A provisioning step `up` completed.
    Provisioned(String),
}

/// What `up` leaves.
pub enum Served {
    /// Every node already ran (`pid`: a single server's).
    AlreadyRunning { pid: Option<u32> },
    /// The broker runs and serves these spaces at this generation.
    Started {
        spaces: usize,
        generation: u64,
        /// The registries its provisioning seeded, each at its revision (for the state
        /// refresh that follows: `ops::state::refresh`).
        registry_seeded: std::collections::BTreeMap<SpaceName, u64>,
        /// The spaces whose own provisioning failed (each step and why, as `apply` says it):
        /// not served; every other space is. Non-empty: `up` exits 8, partly done.
        failed: Vec<SpaceFailure>,
    },
    /// An interrupted apply's journal is open: the nodes that were not running were started on
    /// the config they last ran, and nothing was promoted or provisioned (the next `cotal apply`
    /// finishes the journal, which may need every node running: a cluster's removal does).
    StartedForJournal {
        started: usize,
        /// The spaces the journal removes.
        removals: Vec<SpaceName>,
    },
}

/// What `down` tells of each node (`node`: its name when there is more than one).
pub enum DownEvent {
    Stopped {
        node: Option<String>,
        pid: u32,
    },
    /// The pidfile named a process that is not this root's nats-server; it was removed.
    StalePidfile {
        node: Option<String>,
        pid: u32,
    },
    NotRunning {
        node: Option<String>,
    },
    /// Another machine runs it: stop it there.
    Remote {
        node: String,
    },
}

/// What `down` leaves.
pub enum Stopped {
    /// The root has no `.cotal/`: no broker of it can run.
    NeverInitialised,
    Stopped,
    /// Stopped, with a cut recorded.
    Cut {
        at: String,
        generation: u64,
    },
}

/// What an apply did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The final promotion's generations (from, to).
    pub generation: Option<(u64, u64)>,
    /// The fence promotion's generations, when the plan fenced removed spaces.
    pub fenced: Option<(u64, u64)>,
    /// Spaces whose recorded move this apply ended, by serving them again (resumed, or
    /// brought back from an archive).
    pub relocations_ended: Vec<SpaceName>,
    /// What the reap of each removed space removed (`store folder <path>`, `account record`,
    /// `space folder`), in the plan's order.
    pub reaped: Vec<(SpaceName, Vec<String>)>,
    pub reap_failures: Vec<ReapFailure>,
    /// What each purged space's streams held when they were emptied, in the plan's order.
    pub purged: Vec<Purged>,
    /// The registry keys written per space, with the value written (`None`: deleted) and the
    /// revision the broker gave it: what the state after the apply knows without reading again.
    pub channels_written: BTreeMap<SpaceName, Vec<WrittenKey>>,
    /// The spaces whose channel registry provisioning seeded, with the seed's revision: what
    /// the state after the apply may know without reading it (see `ops::state`).
    pub registry_seeded: BTreeMap<SpaceName, u64>,
    /// The per-space steps that failed after the promotion (or in a plan without one), in
    /// the plan's order: each space's failure is its own, every other step ran. Non-empty
    /// means "partly applied"; the next apply plans what is left.
    pub failed: Vec<SpaceFailure>,
}

/// A space whose streams and buckets were emptied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purged {
    pub space: SpaceName,
    /// Streams emptied (its buckets' streams included; none when the broker was stopped and
    /// its store folder was deleted instead).
    pub streams: usize,
    /// Messages they held.
    pub messages: u64,
    /// The bytes they held when the purge committed (`None`: it committed in an earlier run).
    pub bytes: Option<u64>,
}

impl Outcome {
    /// The generations the apply moved the broker across, its fence's promotion included:
    /// (before the first promotion, after the last).
    pub fn generations(&self) -> Option<(u64, u64)> {
        match (self.fenced, self.generation) {
            (Some((from, _)), Some((_, to))) => Some((from, to)),
            (fenced, last) => last.or(fenced),
        }
    }
}

/// A registry key an apply wrote: the key, the value written (`None`: deleted), and the
/// revision the broker gave it.
pub type WrittenKey = crate::space::channels::Written;

/// Local material of a removed space that could not be reaped (the removal itself is done).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReapFailure {
    pub space: SpaceName,
    /// `store folder`, `account record` or `space folder`.
    pub part: &'static str,
    pub error: String,
}

impl std::fmt::Display for ReapFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {}: {}",
            self.part,
            self.space.quoted(),
            self.error
        )
    }
}
