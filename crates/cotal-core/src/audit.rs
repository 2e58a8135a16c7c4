//! The lifecycle audit: one JSON object per transition, appended to `.cotal/audit.jsonl`.
//!
//! The event types and their fields are here (pure); writing and reading are in
//! `cotal::store::audit`. Mandatory events are written before the work they announce, so an
//! apply whose audit cannot be written stops before its commit point (fail closed: docs/design/lifecycle-model.md,
//! "The audit fails closed").

use crate::model::SpaceName;
use serde::{Deserialize, Serialize};

/// Every event kind, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Event {
    #[serde(rename = "apply.started")]
    ApplyStarted,
    #[serde(rename = "apply.completed")]
    ApplyCompleted,
    #[serde(rename = "apply.failed")]
    ApplyFailed,
    #[serde(rename = "apply.rolled_back")]
    ApplyRolledBack,
    /// SIGINT or SIGTERM stopped an apply at a step boundary.
    #[serde(rename = "apply.interrupted")]
    ApplyInterrupted,
    #[serde(rename = "space.provisioning")]
    SpaceProvisioning,
    #[serde(rename = "space.added")]
    SpaceAdded,
    #[serde(rename = "space.suspended")]
    SpaceSuspended,
    #[serde(rename = "space.resumed")]
    SpaceResumed,
    #[serde(rename = "space.limits_changed")]
    SpaceLimitsChanged,
    #[serde(rename = "space.protected")]
    SpaceProtected,
    #[serde(rename = "space.removal_started")]
    SpaceRemovalStarted,
    /// A removed space's account was fenced (no connection, every user revoked) and the
    /// broker confirmed it, before its data is deleted.
    #[serde(rename = "space.fenced")]
    SpaceFenced,
    #[serde(rename = "space.removed")]
    SpaceRemoved,
    /// `cotal space backup` of a fenced space began a move: recorded on the source.
    #[serde(rename = "relocation.started")]
    RelocationStarted,
    /// The moving space was found fenced (suspended or archived): no client writes to it.
    #[serde(rename = "relocation.fenced")]
    RelocationFenced,
    /// The moving space's artifact is written; its digest is recorded.
    #[serde(rename = "relocation.exported")]
    RelocationExported,
    /// A receipt from the destination was verified against the recorded artifact.
    #[serde(rename = "relocation.verified")]
    RelocationVerified,
    /// The moved space was removed from the source.
    #[serde(rename = "relocation.completed")]
    RelocationCompleted,
    /// A move's export failed, or the operator cancelled it.
    #[serde(rename = "relocation.failed")]
    RelocationFailed,
    /// A space's account left the config (archived): not served, data kept on disk.
    #[serde(rename = "space.archived")]
    SpaceArchived,
    /// An archived space's account was loaded again.
    #[serde(rename = "space.unarchived")]
    SpaceUnarchived,
    /// `cotal space purge` is about to empty a space (before its commit point, fail-closed).
    #[serde(rename = "space.purge_started")]
    SpacePurgeStarted,
    /// A space's streams and buckets were emptied (what they held, counted).
    #[serde(rename = "space.purged")]
    SpacePurged,
    /// `cotal creds` minted a user (its name, key, profile and expiry; never a secret).
    #[serde(rename = "creds.minted")]
    CredsMinted,
    /// `cotal creds revoke` recorded a revocation (it takes effect at the next apply).
    #[serde(rename = "creds.revoked")]
    CredsRevoked,
    /// An apply loaded an account JWT carrying new revocations.
    #[serde(rename = "space.users_revoked")]
    UsersRevoked,
    /// An apply wrote a space's channel registry (what it wrote, per key).
    #[serde(rename = "space.channels_written")]
    ChannelsWritten,
    /// An apply wrote a space's members' acl records (what each member may read and post, and
    /// the members removed).
    #[serde(rename = "space.members_written")]
    MembersWritten,
    /// `cotal space evict` closed a space's live connections.
    #[serde(rename = "space.evicted")]
    SpaceEvicted,
    /// One space's step (its provisioning, its channel registry write) failed while the apply
    /// went on with every other space: the apply is partly applied.
    #[serde(rename = "space.step_failed")]
    SpaceStepFailed,
    /// `cotal rotate routes` recorded a new route credential (written by the next apply or up).
    #[serde(rename = "routes.rotated")]
    RoutesRotated,
    /// `cotal init` made the broker's trust.
    #[serde(rename = "root.initialised")]
    RootInitialised,
    /// `cotal adopt` migrated a root the original Cotal made (recorded before its first
    /// write, fail-closed).
    #[serde(rename = "root.adopted")]
    RootAdopted,
    /// `cotal root backup` exported every seed (recorded before the copy, fail-closed).
    #[serde(rename = "root.backed_up")]
    RootBackedUp,
    /// `cotal root restore` brought a backup up in this root.
    #[serde(rename = "root.restored")]
    RootRestored,
    /// `cotal space backup` exported a space's streams (recorded before, fail-closed).
    #[serde(rename = "space.backed_up")]
    SpaceBackedUp,
    /// `cotal space restore` wrote a space's streams (recorded before, fail-closed).
    #[serde(rename = "space.restored")]
    SpaceRestored,
    /// `cotal down --preserve-state` recorded a cut (recorded before, fail-closed).
    #[serde(rename = "broker.cut")]
    BrokerCut,
}

/// Who did it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    pub user: String,
    pub host: String,
}

/// Generation before and after (after is absent until known).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generations {
    pub before: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub after: Option<u64>,
}

/// Figures of the data a transition touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Counts {
    pub streams: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub messages: Option<u64>,
    pub bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub connections: Option<u64>,
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub time: String,
    pub event: Event,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub space: Option<SpaceName>,
    pub actor: Actor,
    pub generation: Generations,
    pub plan_digest: String,
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub counts: Option<Counts>,
}

impl Counts {
    /// Counts from a blast radius.
    pub fn of(blast: &crate::plan::Blast) -> Counts {
        Counts {
            streams: blast.streams_destroyed.len() as u64,
            messages: blast.messages_destroyed,
            bytes: blast.bytes_destroyed,
            connections: blast.connections_dropped,
        }
    }
}
