//! `space list`: every space of `cotal.toml` and of the root (applied, pending, removed from the
//! file, or with a record that cannot be trusted), each with its desired and derived state,
//! protection and channel counts, as one value. Read-only; takes no lock; reads through a
//! broken `cotal.toml` (and says so).

use crate::error::Result;
use crate::model::SpaceName;
use crate::observe;
use crate::space::lifecycle;
use crate::store::Root;
use std::collections::BTreeSet;

pub use crate::report::space_list::{Row, SpaceList};

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
            let spec = desired.spec(n);
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
                channels_declared: desired.channels_of(n).map_or(0, |c| c.channels.len()),
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
