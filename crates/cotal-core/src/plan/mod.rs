//! The plan: a closed set of steps, ordered as docs/design/architecture.md ("The plan") says, each with its reason
//! and blast radius, computed by a pure function of (desired, observed).
//!
//! [`compute`] is a pipeline of named pure stages: [`guards`] (refusals as values), [`removals`]
//! (journaled and requested), [`purges`] (the spaces emptied: journaled and requested), [`system`] (the system account's re-issue: rotation, the legacy
//! seed's replacement, the evictor opt-in, revocations of $SYS users; and why a space's $SYS
//! creds are re-minted), [`diff`] (what changes per space, as types), [`describe`] (the
//! words and blast radius people read), [`promotion`] (why the one config promotion happens,
//! and the config it shows) and [`order`] (the steps in that order).
//!
//! Invariants: the planner does no IO, reads no clock and draws no randomness; equal inputs give
//! equal plans; the plan never holds a seed (it holds account public keys and shortened JWTs).
//! What apply does depends only on a step's decision fields, never on display fields (details,
//! blast radius, work lists, reason wording): [`Plan::decision_digest`] covers exactly those.

mod blast;
pub mod capacity;
mod compute;
mod describe;
mod diff;
mod fence;
pub mod guards;
mod intent;
mod narrow;
mod order;
mod promotion;
mod purges;
mod relocations;
mod removals;
pub mod settings;
pub mod sides;
mod system;
pub mod tls;

pub use blast::Blast;
pub use compute::{compute, nodes};
pub use guards::{Refusal, guard_liveness, guard_trust};
pub use intent::{Intent, Rotate};
pub use narrow::{applied_spec, narrow, pending_elsewhere};
pub use promotion::boot_plan;

use crate::model::{SpaceName, SpaceSpec};
use serde::{Deserialize, Serialize};

/// Bumped when the JSON shape of a plan changes incompatibly. 2: promotion reasons and the
/// state transition of a re-issue are typed; a saved plan pins its decisions, not its figures.
pub const FORMAT_VERSION: u32 = 2;

/// What a saved plan pins: if any of these moved, the plan is stale.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pins {
    pub generation: u64,
    pub desired_digest: String,
    pub inventory_digest: String,
    pub config_digest: String,
}

/// The per-space verdict shown first, Terraform style.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Add,
    Change,
    Remove,
}

impl Action {
    pub fn symbol(self) -> char {
        match self {
            Action::Add => '+',
            Action::Change => '~',
            Action::Remove => '-',
        }
    }
}

/// One space's change, for people: what and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpaceChange {
    pub action: Action,
    pub space: SpaceName,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub account: Option<String>,
    pub details: Vec<String>,
    pub blast: Blast,
}

/// One field of a space that changes (for people: the words of the diff).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldChange {
    pub field: String,
    pub from: String,
    pub to: String,
}

/// What a re-issue does to a space's state: the decision the executor (and the audit) acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transition {
    /// Active to suspended.
    Suspend,
    /// Suspended to active.
    Resume,
    /// Same state, other limits.
    Limits,
    /// Same state and limits; users revoked by `cotal creds revoke`.
    Revoke,
}

/// Why the config is promoted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Reason {
    /// The plan adds these spaces.
    Adds { spaces: Vec<SpaceName> },
    /// The plan removes these spaces, which the promoted config still loads.
    Removes { spaces: Vec<SpaceName> },
    /// The plan re-issues these spaces' JWTs.
    Reissues { spaces: Vec<SpaceName> },
    /// The plan writes side accounts of these existing spaces (their members', their
    /// observer's, their evictor's).
    SideAccounts { spaces: Vec<SpaceName> },
    /// The plan archives these spaces: their accounts leave the config.
    Archives { spaces: Vec<SpaceName> },
    /// The plan brings these archived spaces back: their accounts are loaded again.
    Unarchives { spaces: Vec<SpaceName> },
    /// An imperative verb's own change of these spaces.
    Changes { spaces: Vec<SpaceName> },
    /// The plan re-issues the system account's JWT.
    SystemAccount,
    /// There is no `server.conf` yet.
    NoConfig,
    /// The client listener's TLS changes: declared, removed, or a new certificate (its
    /// fingerprint and expiry, before and after).
    Tls {
        before: Option<String>,
        after: Option<String>,
    },
    /// The routes' TLS changes (`[cluster.tls]`): declared, removed, or a new certificate.
    RouteTls {
        before: Option<String>,
        after: Option<String>,
    },
    /// `cotal rotate routes` replaced the route credential: every node's include gets it.
    RouteCredential { rotation: u64 },
    /// `server.conf` is not the rendering of the inventory (hand edit, interrupted apply).
    ConfigDrift,
    /// The config's settings differ from what `cotal.toml` renders: each
    /// `key: old -> new` (the node's name first in a cluster).
    Settings { changes: Vec<String> },
    /// Where a node's data lives changes: the rendering puts its store elsewhere.
    StoreMove { moves: Vec<settings::StoreMove> },
    /// These running nodes (a single server: its one node) report a loaded config other than
    /// the promoted one (VARZ): a reload they missed, or one made by hand.
    NodesBehind { nodes: Vec<String> },
    /// The generation record does not match the promoted inventory.
    GenerationBehind,
    /// There is no generation record yet.
    NoGeneration,
    /// `cotal up`: the config on disk is not the rendering of the inventory.
    BootConfigDrift,
    /// `cotal up`: the generation record does not match the inventory.
    BootGenerationDrift,
}

impl Reason {
    /// How many broker settings the reason changes: each `key: old -> new`, each store move, a
    /// listener's TLS, the route credential (0: not a change of the broker itself). What the
    /// summary counts, and what a verb narrowed to one space never carries.
    pub fn broker_settings(&self) -> usize {
        match self {
            Reason::Settings { changes } => changes.len(),
            Reason::StoreMove { moves } => moves.len(),
            Reason::Tls { .. } | Reason::RouteTls { .. } | Reason::RouteCredential { .. } => 1,
            _ => 0,
        }
    }

    /// Whether the reason is one of the plan's own space changes (what an imperative verb
    /// narrows away when it keeps other spaces' changes for later).
    pub fn is_space_change(&self) -> bool {
        matches!(
            self,
            Reason::Adds { .. }
                | Reason::Removes { .. }
                | Reason::Reissues { .. }
                | Reason::SideAccounts { .. }
                | Reason::Archives { .. }
                | Reason::Unarchives { .. }
                | Reason::SystemAccount
        )
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Adds { spaces } => write!(f, "adds {}", list(spaces)),
            Reason::Removes { spaces } => write!(f, "removes {}", list(spaces)),
            Reason::Reissues { spaces } => write!(f, "re-issues {}", list(spaces)),
            Reason::SideAccounts { spaces } => {
                write!(f, "writes the side accounts of {}", list(spaces))
            }
            Reason::Archives { spaces } => write!(
                f,
                "archives {} (left out of the config; data kept on disk)",
                list(spaces)
            ),
            Reason::Unarchives { spaces } => write!(
                f,
                "brings back {} (loaded again, with the data kept on disk)",
                list(spaces)
            ),
            Reason::Changes { spaces } => write!(
                f,
                "changes {}",
                spaces.iter().map(SpaceName::quoted).collect::<Vec<_>>().join(", ")
            ),
            Reason::SystemAccount => f.write_str("re-issues the system account"),
            Reason::NoConfig => f.write_str("server.conf does not exist yet"),
            Reason::Tls { before, after } => write!(
                f,
                "the client listener's TLS certificate changes: {} -> {}",
                before.as_deref().unwrap_or("none"),
                after.as_deref().unwrap_or("none")
            ),
            Reason::RouteTls { before, after } => write!(
                f,
                "the routes' TLS certificate changes: {} -> {}",
                before.as_deref().unwrap_or("none"),
                after.as_deref().unwrap_or("none")
            ),
            Reason::RouteCredential { rotation } => write!(
                f,
                "the route credential was rotated (rotation {rotation}): every node's include file gets the new one"
            ),
            Reason::Settings { changes } => write!(
                f,
                "server.conf's settings differ from what cotal.toml renders: {}",
                changes.join("; ")
            ),
            Reason::StoreMove { moves } => {
                let each: Vec<String> = moves
                    .iter()
                    .map(|m| {
                        let node = if m.node == crate::desired::topology::LONE_NODE {
                            String::new()
                        } else {
                            format!("node {}: ", m.node)
                        };
                        // A path may come from a hand-edited config: shown escaped.
                        let from = crate::space::channels::displayable(&m.from.display().to_string());
                        let to = crate::space::channels::displayable(&m.to.display().to_string());
                        let then = if m.carried {
                            "with its data (its .cotal-store-id is the recorded one): the broker serves it from there".to_string()
                        } else if m.out_of_service {
                            format!("the broker starts on a store without the spaces' data, which stays in {from} unserved (cotal does not move it; every space comes back empty)")
                        } else if m.caught_up {
                            "the node starts on an empty store and catches up from the replicas on the other nodes".to_string()
                        } else {
                            format!("{from} holds no space's data, so nothing is taken out of service")
                        };
                        if m.carried {
                            format!("{node}the store moved from {from} to {to} {then}")
                        } else {
                            format!("{node}the store moves from {from} to {to}: {then}")
                        }
                    })
                    .collect();
                f.write_str(&each.join("; "))
            }
            Reason::ConfigDrift => f.write_str(
                "server.conf differs from the rendering of the inventory (edited by hand, or left by an interrupted apply)",
            ),
            Reason::NodesBehind { nodes } => write!(
                f,
                "{} the config on disk but another one (a reload missed, or one made by hand): promoted again, every node is reloaded and confirmed",
                match nodes.as_slice() {
                    [one] => format!("node {one} does not run"),
                    many => format!("nodes {} do not run", many.join(", ")),
                }
            ),
            Reason::GenerationBehind => f.write_str(
                "the generation record does not match the promoted inventory (an apply was interrupted before it advanced the generation)",
            ),
            Reason::NoGeneration => f.write_str("no generation record yet"),
            Reason::BootConfigDrift => {
                f.write_str("server.conf is not the rendering of the inventory")
            }
            Reason::BootGenerationDrift => {
                f.write_str("the generation record does not match the inventory")
            }
        }
    }
}

/// `"a", "b" and "c"`.
pub fn list<'a>(names: impl IntoIterator<Item = &'a SpaceName>) -> String {
    let v: Vec<String> = names.into_iter().map(SpaceName::quoted).collect();
    match v.len() {
        0 => String::new(),
        1 => v[0].clone(),
        n => format!("{} and {}", v[..n - 1].join(", "), v[n - 1]),
    }
}

/// [`list`] of at most `shown` names, then how many more (`"a", "b" and 2,998 more`): a refusal
/// about thousands of spaces stays readable.
pub fn list_some<'a>(names: impl IntoIterator<Item = &'a SpaceName>, shown: usize) -> String {
    let v: Vec<&SpaceName> = names.into_iter().collect();
    if v.len() <= shown {
        return list(v);
    }
    let first: Vec<String> = v[..shown].iter().map(|n| n.quoted()).collect();
    format!("{} and {} more", first.join(", "), v.len() - shown)
}

/// How a promotion step's title begins (the journal records steps by title).
pub const PROMOTION_TITLE: &str = "render server.conf from the inventory and promote it";

/// A space the fence promotion keeps loaded, refusing everyone: a removed one (every user
/// revoked, its streams deleted next), or one being archived (`archive`: JetStream off for
/// the account, so the broker stops its streams and keeps their data on disk, before the final
/// promotion leaves it out; its users stay valid for its return).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fenced {
    pub space: SpaceName,
    pub account: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archive: bool,
}

/// The title of a [`Step::Fence`]: what it does to the removed spaces, then to the archived
/// ones.
fn fence_title(spaces: &[Fenced], from: u64, to: u64) -> String {
    let its = |n: usize| {
        if n == 1 {
            "its account"
        } else {
            "their accounts"
        }
    };
    let (archived, removed): (Vec<&Fenced>, Vec<&Fenced>) = spaces.iter().partition(|f| f.archive);
    let mut parts = Vec::new();
    if !removed.is_empty() {
        parts.push(format!(
            "fence {}: re-issue {} with no connection and every user revoked",
            list(removed.iter().map(|f| &f.space)),
            its(removed.len())
        ));
    }
    if !archived.is_empty() {
        parts.push(format!(
            "fence {} before the archive: re-issue {} with no connection and JetStream off (its streams stopped, their data kept on disk)",
            list(archived.iter().map(|f| &f.space)),
            its(archived.len())
        ));
    }
    format!(
        "{}, promote and reload (generation {from} -> {to}{})",
        parts.join("; "),
        if removed.is_empty() {
            ""
        } else {
            "; commit point"
        }
    )
}

/// The steps apply executes, in order. Closed: the executor matches every variant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Step {
    /// An earlier apply was interrupted; its journaled removals are finished by this plan.
    FinishJournal {
        started_at: String,
        plan_digest: String,
        removals: Vec<SpaceName>,
        /// The spaces whose purge passed its commit point.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        purges: Vec<SpaceName>,
        /// The spaces the interrupted apply was adding: one whose add took effect but whose
        /// audit ends at `space.provisioning` gets its `space.added` from this step.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        adding: Vec<SpaceName>,
        /// The audit records of changes the interrupted apply made but could not record: this
        /// step writes them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        owed: Vec<crate::audit::Record>,
    },
    /// Fence the removed spaces a running broker still serves, before their data is dropped
    /// (the seed's deprovisioning order: deny traffic, revoke credentials, drop storage):
    /// journal each removal committed (its commit point), write its record re-issued with no
    /// client or leaf connection and every user revoked (`*`), promote a config that still
    /// preloads it so fenced, reload every node and confirm each loads the fenced JWT and
    /// refuses a fresh user. The spaces being archived are fenced by the same promotion, with
    /// JetStream off instead of the revocation (nats-server stops their streams, keeping the
    /// data; an account dropped with its streams running keeps them half-alive in the server,
    /// and they are not served right when it is loaded again). Advances the generation like a
    /// promotion; the final [`Step::PromoteConfig`] drops the accounts.
    Fence {
        spaces: Vec<Fenced>,
        from_generation: u64,
        to_generation: u64,
        blast: Blast,
    },
    /// Delete a removed space's streams and buckets: the commit point of its removal (when no
    /// [`Step::Fence`] passed it first).
    DeleteStreams {
        space: SpaceName,
        account: String,
        /// The commit point already passed in an interrupted apply.
        committed: bool,
        /// A [`Step::Fence`] before it fences the space (and passes its commit point).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        fenced: bool,
        /// The space's recorded move to another broker ends with this removal: the digest of
        /// the receipt that proved it (recorded before the commit point, audited
        /// `relocation.verified`, then `relocation.completed` once the space is reaped).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        relocation: Option<String>,
        blast: Blast,
    },
    /// Empty every stream and bucket of a space through the running broker, keeping their
    /// configs, the account and its credentials (`cotal space purge`): the commit point of the
    /// purge. The provisioning and channel writes after the promotion seed them again.
    PurgeStreams {
        space: SpaceName,
        account: String,
        /// The commit point already passed in an interrupted apply.
        committed: bool,
        blast: Blast,
    },
    /// Re-issue the system account's JWT (kept or new scoped keys, revocations of the $SYS
    /// users of suspended and removed spaces) and write it with its keys in the broker record.
    ReissueSystemAccount {
        /// New keys for every role.
        rotate: bool,
        /// Whether an evictor key is listed afterwards; `None` keeps it as it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        evictor: Option<bool>,
        /// $SYS user keys to revoke, per space.
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        revoke: std::collections::BTreeMap<SpaceName, Vec<String>>,
        /// Revocations `cotal creds revoke --system` recorded that the JWT lacks (user key to
        /// the time up to which its JWTs are refused).
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        handed_out: crate::trust::jwt::Revocations,
        /// Revocations of the monitoring account's JWT this plan drops: their users' recorded
        /// expiry has passed ([`system::SystemReissue::pruned`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pruned: Vec<String>,
        /// Why, for people.
        changes: Vec<String>,
    },
    /// Mint a new account for a space and write its record.
    AddAccount {
        space: SpaceName,
        spec: SpaceSpec,
        /// Its side accounts, minted with it; then its `$SYS` creds (users of its observer's
        /// and evictor's), when it is added active.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        sides: Vec<sides::SideWrite>,
    },
    /// Re-issue a space's account JWT (same key) with new limits or state.
    ReissueAccount {
        space: SpaceName,
        account: String,
        spec: SpaceSpec,
        transition: Transition,
        /// The revocations the re-issued JWT carries (every one recorded for the account).
        #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
        revocations: crate::trust::jwt::Revocations,
        /// Replace the account's signing key (`cotal rotate account`): users it signed are
        /// refused after the reload.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        rotate_signing: bool,
        changes: Vec<FieldChange>,
        blast: Blast,
    },
    /// Write a space's side accounts ([`crate::space::side_accounts`]) into its record: mint the new
    /// ones, re-issue those whose claims change, drop those no longer wanted; record the
    /// revocations the step adds in the space's ledger.
    WriteSideAccounts {
        space: SpaceName,
        /// The space's account as the plan saw it.
        account: String,
        /// Suspended with the space: no side account accepts a connection.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        suspended: bool,
        write: Vec<sides::SideWrite>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        drop: Vec<crate::space::side_accounts::SideRole>,
        /// Users of the dropped members' accounts, recorded revoked in the ledger.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        retired: Vec<(String, i64)>,
        /// One line per account, for people.
        changes: Vec<String>,
    },
    /// Mint and write the space's $SYS creds (membership observer, connection evictor).
    WriteSysCreds { space: SpaceName },
    /// Record the space's protection on disk beside its material.
    RecordProtection { space: SpaceName, protect: bool },
    /// Mark the space's account record archived (`archived`: the promotion that follows leaves
    /// the account out of the config, so nothing of it is served; its record, keys,
    /// protection and JetStream data stay on disk), or clear the mark (the promotion loads the
    /// same account again, and its streams come back from disk).
    RecordArchive {
        space: SpaceName,
        account: String,
        archived: bool,
        blast: Blast,
    },
    /// Record, in the space's lifecycle record, that it is suspended and why (`suspended`:
    /// the apply fills in when and by whom, and keeps them when only the reason changes), or
    /// clear the record of a resumed space.
    RecordSuspension {
        space: SpaceName,
        suspended: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// The space was suspended before cotal recorded suspensions: its time and operator
        /// are recorded as `unknown`, never as this apply's.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        backfill: bool,
        /// A new suspension (a space brought back from its archive suspended): this apply's
        /// time and operator replace those of a suspension recorded before the archive.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        renew: bool,
    },
    /// Render `server.conf` from the inventory, promote it by compare-and-set, reload a running
    /// broker and confirm, then advance the generation.
    PromoteConfig {
        from_generation: u64,
        to_generation: u64,
        reasons: Vec<Reason>,
        blast: Blast,
    },
    /// Create a space's missing streams and buckets and update drifted ones, under an
    /// ephemeral provisioner (running broker only).
    Provision { space: SpaceName, work: Vec<String> },
    /// Delete a removed space's local material (account record, space folder).
    Reap { space: SpaceName, account: String },
    /// Write a space's channel registry: each key compare-and-set on the revision the plan saw
    /// (running broker only; no promotion, no reload).
    WriteChannels {
        space: SpaceName,
        account: String,
        writes: Vec<crate::space::channels::Write>,
        /// `+`/`~`/`-` per key, for people.
        changes: Vec<String>,
    },
    /// Write a space's members' acl records (`cotal_acl_<t>`): each compare-and-set on the
    /// revision the plan saw, after the reload that revoked their older users (running broker
    /// only; no promotion, no reload).
    WriteAcl {
        space: SpaceName,
        account: String,
        writes: Vec<crate::space::channels::Write>,
        /// One line per member, for people.
        changes: Vec<String>,
    },
}

impl Step {
    /// The step with its display fields emptied: only what the executor acts on.
    pub fn decision(&self) -> Step {
        let mut s = self.clone();
        match &mut s {
            Step::DeleteStreams { blast, .. }
            | Step::PurgeStreams { blast, .. }
            | Step::RecordArchive { blast, .. }
            | Step::Fence { blast, .. } => *blast = Blast::default(),
            Step::ReissueAccount { changes, blast, .. } => {
                changes.clear();
                *blast = Blast::default();
            }
            Step::PromoteConfig { reasons, blast, .. } => {
                reasons.clear();
                *blast = Blast::default();
            }
            Step::Provision { work, .. } => work.clear(),
            Step::ReissueSystemAccount { changes, .. }
            | Step::WriteChannels { changes, .. }
            | Step::WriteSideAccounts { changes, .. }
            | Step::WriteAcl { changes, .. } => changes.clear(),
            Step::FinishJournal { .. }
            | Step::AddAccount { .. }
            | Step::WriteSysCreds { .. }
            | Step::RecordProtection { .. }
            | Step::RecordSuspension { .. }
            | Step::Reap { .. } => {}
        }
        s
    }

    /// The space a step acts on (none for the journal and the promotion).
    pub fn space(&self) -> Option<&SpaceName> {
        match self {
            Step::FinishJournal { .. }
            | Step::PromoteConfig { .. }
            | Step::Fence { .. }
            | Step::ReissueSystemAccount { .. } => None,
            Step::DeleteStreams { space, .. }
            | Step::PurgeStreams { space, .. }
            | Step::AddAccount { space, .. }
            | Step::ReissueAccount { space, .. }
            | Step::WriteSideAccounts { space, .. }
            | Step::WriteSysCreds { space }
            | Step::RecordProtection { space, .. }
            | Step::RecordSuspension { space, .. }
            | Step::RecordArchive { space, .. }
            | Step::Provision { space, .. }
            | Step::Reap { space, .. }
            | Step::WriteChannels { space, .. }
            | Step::WriteAcl { space, .. } => Some(space),
        }
    }

    /// Whether the step changes what the config renders.
    fn changes_config(&self) -> bool {
        matches!(
            self,
            Step::DeleteStreams { .. }
                | Step::AddAccount { .. }
                | Step::ReissueAccount { .. }
                | Step::WriteSideAccounts { .. }
                | Step::RecordArchive { .. }
                | Step::ReissueSystemAccount { .. }
        )
    }

    /// Whether the step only writes the root's own records (no promotion, no broker, no
    /// commit point): a run of such steps may defer its syncs to one flush.
    pub fn writes_only_records(&self) -> bool {
        matches!(
            self,
            Step::AddAccount { .. }
                | Step::ReissueAccount { .. }
                | Step::WriteSideAccounts { .. }
                | Step::WriteSysCreds { .. }
                | Step::RecordProtection { .. }
                | Step::RecordSuspension { .. }
                | Step::RecordArchive { .. }
        )
    }

    /// A one-line description for step lists and the journal.
    pub fn title(&self) -> String {
        match self {
            Step::FinishJournal { started_at, .. } => {
                format!("finish the apply interrupted at {started_at}")
            }
            Step::Fence {
                spaces,
                from_generation,
                to_generation,
                ..
            } => fence_title(spaces, *from_generation, *to_generation),
            Step::DeleteStreams {
                space,
                fenced,
                committed,
                ..
            } => deletion_title(space, *fenced, *committed),
            Step::PurgeStreams {
                space, committed, ..
            } => purge_title(space, *committed),
            Step::ReissueSystemAccount { rotate, .. } => {
                if *rotate {
                    "rotate the system account's signing keys and re-issue its JWT".into()
                } else {
                    "re-issue the system account's JWT".into()
                }
            }
            Step::AddAccount { space, sides, .. } => add_title(space, sides.len()),
            Step::WriteChannels { space, writes, .. } => format!(
                "write {} channel registry key{} of {} (compare-and-set; no reload)",
                writes.len(),
                if writes.len() == 1 { "" } else { "s" },
                space.quoted()
            ),
            Step::WriteAcl { space, writes, .. } => format!(
                "write {} member acl record{} of {} (compare-and-set; no reload)",
                writes.len(),
                if writes.len() == 1 { "" } else { "s" },
                space.quoted()
            ),
            Step::ReissueAccount { space, .. } => {
                format!("re-issue the account JWT of {}", space.quoted())
            }
            Step::WriteSideAccounts {
                space, write, drop, ..
            } => side_accounts_title(space, write.len(), drop.len()),
            Step::RecordProtection { space, protect } => {
                format!("record protect = {protect} for {}", space.quoted())
            }
            Step::RecordSuspension {
                space,
                suspended,
                backfill,
                reason,
                ..
            } => suspension_title(space, *suspended, *backfill, reason.as_deref()),
            Step::RecordArchive {
                space,
                archived: true,
                ..
            } => format!(
                "archive {}: mark its record archived, so the promotion leaves its account out of the config (data kept on disk)",
                space.quoted()
            ),
            Step::RecordArchive { space, .. } => format!(
                "bring back {}: clear its archive mark, so the promotion loads its account again",
                space.quoted()
            ),
            Step::WriteSysCreds { space } => {
                format!("write the $SYS credentials of {}", space.quoted())
            }
            Step::Provision { space, work } => {
                format!("provision {}: {}", space.quoted(), work.join(", "))
            }
            Step::PromoteConfig {
                from_generation,
                to_generation,
                ..
            } => format!("{PROMOTION_TITLE} (generation {from_generation} -> {to_generation})"),
            Step::Reap { space, .. } => format!("reap the local material of {}", space.quoted()),
        }
    }
}

/// The title of a removed space's stream deletion.
fn deletion_title(space: &SpaceName, fenced: bool, committed: bool) -> String {
    if fenced {
        format!(
            "delete the streams and buckets of {} (fenced: no client can recreate them)",
            space.quoted()
        )
    } else if committed {
        format!(
            "finish deleting the streams of {} (already past its commit point)",
            space.quoted()
        )
    } else {
        format!(
            "delete the streams and buckets of {} (commit point)",
            space.quoted()
        )
    }
}

/// The title of a space's purge.
fn purge_title(space: &SpaceName, committed: bool) -> String {
    if committed {
        format!(
            "finish emptying the streams and buckets of {} (already past its commit point)",
            space.quoted()
        )
    } else {
        format!(
            "empty the streams and buckets of {}, keeping their configs (commit point)",
            space.quoted()
        )
    }
}

/// `s` for a count other than one.
fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The title of an added space's record, with its `sides` side accounts.
fn add_title(space: &SpaceName, sides: usize) -> String {
    if sides == 0 {
        format!(
            "mint the account of {} and write its record",
            space.quoted()
        )
    } else {
        format!(
            "mint the account of {} and its {sides} side account{}, and write its record",
            space.quoted(),
            plural(sides)
        )
    }
}

/// The title of a space's side accounts written and dropped.
fn side_accounts_title(space: &SpaceName, write: usize, drop: usize) -> String {
    let mut what = Vec::new();
    if write > 0 {
        what.push(format!("write {write} side account{}", plural(write)));
    }
    if drop > 0 {
        what.push(format!("drop {drop} side account{}", plural(drop)));
    }
    format!("{} of {}", what.join(" and "), space.quoted())
}

/// The title of a space's suspension record written (`suspended`; `backfill`: for a
/// suspension made before cotal recorded them) or cleared.
fn suspension_title(
    space: &SpaceName,
    suspended: bool,
    backfill: bool,
    reason: Option<&str>,
) -> String {
    match (suspended, backfill, reason) {
        (true, true, _) => format!(
            "record the suspension of {} (made before cotal recorded suspensions: its time and operator are unknown)",
            space.quoted()
        ),
        (true, false, Some(reason)) => format!(
            "record the suspension of {} (reason: {})",
            space.quoted(),
            serde_json::to_string(reason).expect("a string serializes")
        ),
        (true, false, None) => format!("record the suspension of {}", space.quoted()),
        (false, _, _) => format!("clear the suspension record of {}", space.quoted()),
    }
}

/// Counts for the summary line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Summary {
    pub add: usize,
    pub change: usize,
    pub remove: usize,
    /// Broker settings the promotion changes (a `[broker]` or `[cluster]` key, node by node in
    /// a cluster, a store move, a listener's TLS): [`settings_changed`]. Absent when none.
    #[serde(skip_serializing_if = "is_zero_count", default)]
    pub settings: usize,
}

fn is_zero_count(n: &usize) -> bool {
    *n == 0
}

/// How many broker settings the steps' promotions change ([`Reason::broker_settings`]).
pub fn settings_changed(steps: &[Step]) -> usize {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::PromoteConfig { reasons, .. } => Some(reasons),
            _ => None,
        })
        .flatten()
        .map(Reason::broker_settings)
        .sum()
}

/// The config before and after, with JWTs shortened: what the diff shows. For a cluster: the
/// first node's, with the nodes whose change is the same but for their own lines (listener,
/// server name, routes, store) and, whole, the nodes with a change of their own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigChange {
    /// The node `before` and `after` are of (a cluster's first; absent for one server).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub node: Option<String>,
    pub before: Option<String>,
    pub after: String,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub same_on: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub nodes: Vec<NodeConfigChange>,
    /// The nodes whose config stays as it is.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub unchanged: Vec<String>,
}

/// One cluster node's config before and after, when its change is not the first node's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeConfigChange {
    pub name: String,
    pub before: Option<String>,
    pub after: String,
}

/// The whole plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// What the plan says before anything else (it was made from a state whose signature was
    /// not checked); set by the CLI, never by planning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
    /// Which root, `cotal.toml` and broker the plan is for; set by the CLI, never by planning
    /// (a plan must never leave a reader guessing whose broker it changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<PlanTarget>,
    pub format_version: u32,
    pub pins: Pins,
    pub broker_running: bool,
    pub summary: Summary,
    pub changes: Vec<SpaceChange>,
    pub steps: Vec<Step>,
    pub warnings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigChange>,
}

/// What a plan is for: the root folder, the `cotal.toml` planned, the broker it targets, and
/// the state file it was planned from (a pull request's plan).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanTarget {
    pub root: String,
    pub desired_file: String,
    /// The broker's client URL (its first node's, on a cluster).
    pub broker: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

impl PlanTarget {
    /// One line for people: `for ROOT/cotal.toml, broker nats://HOST:PORT` (and the state).
    pub fn line(&self) -> String {
        match &self.state {
            Some(state) => format!(
                "Plan for {}, broker {} as the state {} records it.",
                self.desired_file, self.broker, state
            ),
            None => format!("Plan for {}, broker {}.", self.desired_file, self.broker),
        }
    }
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// True when executing the plan destroys data that still exists (or takes it out of
    /// service: a store the broker no longer starts on).
    pub fn destroys_data(&self) -> bool {
        self.moves_data_out_of_service()
            || self.steps.iter().any(|s| {
                matches!(
                    s,
                    Step::DeleteStreams {
                        committed: false,
                        ..
                    } | Step::PurgeStreams {
                        committed: false,
                        ..
                    }
                )
            })
    }

    /// Whether a promotion moves a store away from the spaces' data.
    pub fn moves_data_out_of_service(&self) -> bool {
        self.steps.iter().any(|s| {
            match s {
            Step::PromoteConfig { reasons, .. } => reasons.iter().any(|r| {
                matches!(r, Reason::StoreMove { moves } if moves.iter().any(|m| m.out_of_service))
            }),
            _ => false,
        }
        })
    }

    /// Digest of the steps' decisions: what a saved plan promises to execute. Display data
    /// (details, blast radius figures, work lists, reasons) is left out, so live traffic between
    /// `plan --out` and `apply FILE` does not make a saved plan stale; apply shows the fresh plan,
    /// figures included, before it asks.
    pub fn decision_digest(&self) -> String {
        let decisions: Vec<Step> = self.steps.iter().map(Step::decision).collect();
        crate::trust::digest::sha256(&serde_json::to_vec(&decisions).expect("steps serialize"))
    }

    /// What the system account's pending re-issue would do for the spaces `keep` (its own
    /// changes, and the revocations of those spaces' `$SYS` users; its changes end with one
    /// line per revoked space, in name order), in words; `None` when nothing of it is theirs.
    fn system_left_for(&self, keep: &std::collections::BTreeSet<SpaceName>) -> Option<String> {
        self.steps.iter().find_map(|s| match s {
            Step::ReissueSystemAccount {
                revoke, changes, ..
            } => {
                let own = changes.len().saturating_sub(revoke.len());
                let mut kept = changes[..own].to_vec();
                for ((name, _), line) in revoke.iter().zip(&changes[own..]) {
                    if keep.contains(name) {
                        kept.push(line.clone());
                    }
                }
                (!kept.is_empty()).then(|| kept.join("; "))
            }
            _ => None,
        })
    }

    /// The part of the plan about `keep` (the imperative `cotal space` verbs): their steps, the
    /// open journal's (always finished whole), and the one promotion when a kept step changes
    /// the config or the config has drifted. Other spaces' pending edits are left for a later
    /// apply; the render reads the inventory, which only kept steps change.
    pub fn only(&self, keep: &std::collections::BTreeSet<SpaceName>) -> Plan {
        let mut keep = keep.clone();
        for step in &self.steps {
            if let Step::FinishJournal {
                removals, purges, ..
            } = step
            {
                keep.extend(removals.iter().cloned());
                keep.extend(purges.iter().cloned());
            }
        }
        // A verb narrowed to its spaces never rewrites the broker's trust (seed 000 §4: tenant
        // verbs never write broker.json, which holds the system account): a pending re-issue
        // of it is left for `cotal apply`, and said so.
        let system_left = self.system_left_for(&keep);
        let kept = |s: &Step| s.space().is_some_and(|sp| keep.contains(sp));
        let dropped_config_change = self.steps.iter().any(|s| s.changes_config() && !kept(s));
        let kept_config_change = self.steps.iter().any(|s| s.changes_config() && kept(s));
        let mut steps = Vec::new();
        // A fence of no kept space is dropped, and the promotion after it starts one
        // generation earlier.
        let mut behind = 0;
        for step in &self.steps {
            match step {
                Step::FinishJournal { .. } => steps.push(step.clone()),
                Step::Fence {
                    spaces,
                    from_generation,
                    to_generation,
                    blast,
                } => {
                    let spaces: Vec<Fenced> = spaces
                        .iter()
                        .filter(|f| keep.contains(&f.space))
                        .cloned()
                        .collect();
                    if spaces.is_empty() {
                        behind += 1;
                    } else {
                        let mut blast = blast.clone();
                        blast.touched.retain(|s| keep.contains(s));
                        steps.push(Step::Fence {
                            spaces,
                            from_generation: *from_generation,
                            to_generation: *to_generation,
                            blast,
                        });
                    }
                }
                Step::PromoteConfig {
                    from_generation,
                    to_generation,
                    reasons,
                    blast,
                } => {
                    let (from_generation, to_generation) =
                        (&(from_generation - behind), &(to_generation - behind));
                    let mut reasons: Vec<Reason> = reasons
                        .iter()
                        .filter(|r| !r.is_space_change())
                        .cloned()
                        .collect();
                    if kept_config_change {
                        reasons.insert(
                            0,
                            Reason::Changes {
                                spaces: keep.iter().cloned().collect(),
                            },
                        );
                    }
                    if !reasons.is_empty() {
                        steps.push(Step::PromoteConfig {
                            from_generation: *from_generation,
                            to_generation: *to_generation,
                            reasons,
                            blast: blast.clone(),
                        });
                    }
                }
                Step::ReissueSystemAccount { .. } => {}
                s if kept(s) => steps.push(s.clone()),
                _ => {}
            }
        }
        let changes: Vec<SpaceChange> = self
            .changes
            .iter()
            .filter(|c| keep.contains(&c.space))
            .cloned()
            .collect();
        let count = |a: Action| changes.iter().filter(|c| c.action == a).count();
        let mut warnings = self.warnings.clone();
        let others: Vec<String> = self
            .changes
            .iter()
            .filter(|c| !keep.contains(&c.space))
            .map(|c| c.space.quoted())
            .collect();
        if !others.is_empty() {
            warnings.push(format!(
                "cotal.toml has other pending changes ({}); they are left for `cotal apply`",
                others.join(", ")
            ));
        }
        if let Some(left) = system_left {
            warnings.push(format!(
                "the system account's pending re-issue ({left}) is left for `cotal apply`: a verb of one space never rewrites the broker's trust"
            ));
        }
        Plan {
            notice: self.notice.clone(),
            target: self.target.clone(),
            format_version: self.format_version,
            pins: self.pins.clone(),
            broker_running: self.broker_running,
            summary: Summary {
                add: count(Action::Add),
                change: count(Action::Change),
                remove: count(Action::Remove),
                settings: settings_changed(&steps),
            },
            changes,
            steps,
            warnings,
            config: if dropped_config_change {
                None
            } else {
                self.config.clone()
            },
        }
    }

    /// Spaces whose data executing the plan destroys: removed or emptied, and not yet past
    /// their commit point (what [`Plan::destroys_data`] counts).
    pub fn destroyed_spaces(&self) -> Vec<&SpaceName> {
        let moved = self.moves_data_out_of_service();
        let mut out: Vec<&SpaceName> = self
            .steps
            .iter()
            .flat_map(|s| match s {
                Step::DeleteStreams {
                    space,
                    committed: false,
                    ..
                }
                | Step::PurgeStreams {
                    space,
                    committed: false,
                    ..
                } => vec![space],
                // A store moved away from the data takes every space it held out of service.
                Step::PromoteConfig { blast, .. } if moved => blast.touched.iter().collect(),
                _ => Vec::new(),
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> SpaceName {
        SpaceName::parse(s).unwrap()
    }

    fn plan(steps: Vec<Step>) -> Plan {
        Plan {
            notice: None,
            target: None,
            format_version: FORMAT_VERSION,
            pins: Pins {
                generation: 1,
                desired_digest: String::new(),
                inventory_digest: String::new(),
                config_digest: String::new(),
            },
            broker_running: true,
            summary: Summary::default(),
            changes: Vec::new(),
            steps,
            warnings: Vec::new(),
            config: None,
        }
    }

    fn system(revoke: &[&str], own: &[&str]) -> Step {
        let mut changes: Vec<String> = own.iter().map(|s| s.to_string()).collect();
        changes.extend(revoke.iter().map(|n| format!("revoke {n}")));
        Step::ReissueSystemAccount {
            rotate: false,
            evictor: None,
            revoke: revoke
                .iter()
                .map(|n| (name(n), vec![format!("U{n}")]))
                .collect(),
            handed_out: Default::default(),
            pruned: Vec::new(),
            changes,
        }
    }

    fn promote() -> Step {
        Step::PromoteConfig {
            from_generation: 1,
            to_generation: 2,
            reasons: vec![Reason::SystemAccount],
            blast: Blast::default(),
        }
    }

    /// Seed 000 §4: a verb of one space never re-issues the system account (broker.json); what
    /// the re-issue would do for the kept spaces is named in the warning that leaves it.
    #[test]
    fn only_leaves_the_system_step_for_apply_and_says_so() {
        let keep = std::collections::BTreeSet::from([name("a")]);
        let narrowed = plan(vec![system(&["a", "b"], &["templates"]), promote()]).only(&keep);
        assert!(
            !narrowed
                .steps
                .iter()
                .any(|s| matches!(s, Step::ReissueSystemAccount { .. })),
            "{:?}",
            narrowed.steps
        );
        assert!(
            narrowed
                .warnings
                .iter()
                .any(|w| w.contains("system account's pending re-issue (templates")),
            "{:?}",
            narrowed.warnings
        );
        // Only another space's revocation: nothing of the system account is this verb's.
        let narrowed = plan(vec![system(&["b"], &[]), promote()]).only(&keep);
        assert!(narrowed.steps.is_empty(), "{:?}", narrowed.steps);
        assert!(narrowed.warnings.is_empty(), "{:?}", narrowed.warnings);
    }
}
