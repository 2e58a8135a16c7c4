//! A space's lifecycle state, derived from what is observed and never stored as a guess
//! (docs/design/lifecycle-model.md, "States and servability"): `provisioning`, `active`, `suspended`, `archived`, `removing`, and the single
//! predicate "servable". Pure.

use crate::model::SpaceName;
use crate::observed::{JournalState, Observed, ObservedSpace, UsageSource};
use crate::space::streams;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LifecycleState {
    /// The record exists but the broker has not loaded it, or its streams are incomplete.
    Provisioning,
    Active,
    /// Connections refused (`conn: 0`), data kept.
    Suspended,
    /// Its record says archived: the account is left out of the config, its data kept on disk.
    Archived,
    /// An open journal is removing it.
    Removing,
}

impl std::fmt::Display for LifecycleState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LifecycleState::Provisioning => "provisioning",
            LifecycleState::Active => "active",
            LifecycleState::Suspended => "suspended",
            LifecycleState::Archived => "archived",
            LifecycleState::Removing => "removing",
        })
    }
}

/// The derived view of one space.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct View {
    pub state: LifecycleState,
    /// Active, loaded by a running broker, streams complete.
    pub servable: bool,
    /// Whether the promoted config preloads the account.
    pub loaded: bool,
    /// Expected streams present (None when unknown).
    pub streams_complete: Option<bool>,
    /// Why it is not servable, for people.
    pub why_not: Vec<String>,
}

/// Derive a space's state from the observation.
pub fn view(name: &SpaceName, space: &ObservedSpace, observed: &Observed) -> View {
    let removing = matches!(&observed.journal, JournalState::Valid(j)
        if j.removals.iter().any(|r| &r.space == name && r.account == space.account_pub));
    let suspended = space.limits.is_suspended();
    let loaded = observed.loads(&space.account_pub);
    let streams_complete = match space.usage.source {
        UsageSource::Unknown => None,
        _ => Some(
            streams::missing(
                &name.token(),
                space.usage.streams.iter().map(|s| s.name.as_str()),
            )
            .is_empty(),
        ),
    };
    let running = observed.is_running();
    let state = if removing {
        LifecycleState::Removing
    } else if space.archived.is_some() {
        LifecycleState::Archived
    } else if suspended {
        LifecycleState::Suspended
    } else if !loaded || streams_complete == Some(false) {
        LifecycleState::Provisioning
    } else {
        LifecycleState::Active
    };
    let mut why_not = Vec::new();
    match state {
        LifecycleState::Removing => why_not.push("an interrupted apply is removing it".to_string()),
        LifecycleState::Suspended => why_not.push("suspended".to_string()),
        LifecycleState::Archived => {
            // Not loaded, so nothing of it is observed: its streams are on disk, unserved.
            why_not.push(match &space.archived {
                Some(a) => format!("archived at {} by {}", a.at, a.by),
                None => "archived".to_string(),
            });
            if loaded {
                why_not.push(
                    "still loaded by the promoted config (an apply that archived it was interrupted)"
                        .into(),
                );
            }
            return View {
                state,
                servable: false,
                loaded,
                streams_complete: None,
                why_not,
            };
        }
        _ => {}
    }
    if !loaded {
        why_not.push("not in the promoted config".into());
    }
    if !running {
        why_not.push("broker stopped".into());
    }
    // A cluster with fewer than a majority of its nodes running has no JetStream quorum: no
    // stream can elect a leader, so nothing is served, whatever each node says.
    let quorum = observed.has_quorum();
    if running && !quorum {
        why_not.push("the cluster has no quorum (fewer than a majority of its nodes run)".into());
    }
    match streams_complete {
        Some(false) => why_not.push("streams incomplete".into()),
        None => why_not.push("streams unknown".into()),
        Some(true) => {}
    }
    // A replica count other than the declared one serves as well; any other drift does not.
    let drifted = space
        .stream_drift
        .iter()
        .any(|(_, fields)| fields.iter().any(|f| f != "replicas"));
    if drifted {
        why_not.push("stream config drifted".into());
    }
    let servable = state == LifecycleState::Active
        && running
        && quorum
        && loaded
        && streams_complete == Some(true)
        && !drifted;
    View {
        state,
        servable,
        loaded,
        streams_complete,
        why_not: if servable { Vec::new() } else { why_not },
    }
}
