//! What the edge's operations tell and return, as plain data: the events of `up` and `down`,
//! what each leaves, and one space's failed step. The operations (`cotal::ops`) produce them; the
//! reports ([`crate::report`]) render them.

use crate::model::{Listener, SpaceName};
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
