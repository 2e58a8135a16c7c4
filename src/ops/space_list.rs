//! `space list`: every space of `cotal.toml` and of the root (applied, pending, removed from the
//! file, or with a record that cannot be trusted), each with its desired and derived state,
//! protection and channel counts, as one value. Read-only; takes no lock; reads through a
//! broken `cotal.toml` (and says so).

use crate::error::Result;
use crate::model::{SpaceName, SpaceState};
use crate::observe;
use crate::space::lifecycle;
use crate::store::Root;
use serde::Serialize;
use std::collections::BTreeSet;

/// One space's line of the list (its JSON is `cotal space list --format json`).
#[derive(Serialize)]
pub struct Row {
    pub name: String,
    pub in_file: bool,
    pub desired_state: Option<SpaceState>,
    pub protect: Option<bool>,
    pub applied: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<lifecycle::LifecycleState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub servable: Option<bool>,
    /// Its account record exists but cannot be trusted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub record_corrupt: bool,
    /// Channels cotal.toml declares for the space.
    pub channels_declared: usize,
    /// Channels its registry holds (the defaults key not counted), when the broker was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels_in_registry: Option<usize>,
}

/// The list, and what made it incomplete.
pub struct SpaceList {
    /// Why `cotal.toml` could not be read, when it could not (only applied spaces are listed).
    pub desired_error: Option<String>,
    /// Records and nodes that cannot be trusted (`space list` exits 3 when there are any).
    pub problems: Vec<String>,
    /// By name.
    pub rows: Vec<Row>,
}

/// Read the root and list its spaces.
pub fn list(root: &Root) -> Result<SpaceList> {
    let (desired, digest, desired_error) = observe::desired_for_reading(root)?;
    let observed = observe::observe(root, &desired, digest)?;
    let mut problems = observed.problems();
    problems.extend(observed.node_problems());
    let corrupt: BTreeSet<SpaceName> = observed
        .inventory
        .corrupt
        .iter()
        .filter_map(|c| c.space())
        .collect();
    let names: BTreeSet<&SpaceName> = desired
        .spaces
        .keys()
        .chain(observed.inventory.spaces.keys())
        .chain(corrupt.iter())
        .collect();
    let rows = names
        .into_iter()
        .map(|n| {
            let spec = desired.spaces.get(n);
            let view = observed
                .inventory
                .spaces
                .get(n)
                .map(|s| lifecycle::view(n, s, &observed));
            Row {
                name: n.to_string(),
                in_file: spec.is_some(),
                desired_state: spec.map(|s| s.state),
                protect: spec.map(|s| s.protect),
                applied: observed.inventory.spaces.contains_key(n),
                state: view.as_ref().map(|v| v.state),
                servable: view.map(|v| v.servable),
                record_corrupt: corrupt.contains(n),
                channels_declared: desired.channels.get(n).map_or(0, |c| c.channels.len()),
                channels_in_registry: observed.inventory.spaces.get(n).and_then(|s| {
                    match &s.registry {
                        crate::observed::RegistryState::Read(r) => Some(
                            r.keys()
                                .filter(|k| *k != crate::space::channels::DEFAULTS_KEY)
                                .count(),
                        ),
                        _ => None,
                    }
                }),
            }
        })
        .collect();
    Ok(SpaceList {
        desired_error,
        problems,
        rows,
    })
}
