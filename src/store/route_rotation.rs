//! `.cotal/auth/routes.json`: how many times `cotal rotate routes` replaced the cluster's route
//! credential (`{"rotation": N}`; absent: 0). The credential itself is derived from it and the
//! operator seed ([`crate::trust::route_auth`]), never stored.
//!
//! Invariants: written 0600 under the root's lock, only ever incremented; a file that does not
//! parse is an error naming it.

use crate::error::Result;
use crate::store::record::{self, Layout};
use crate::store::{Root, atomic};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteRotation {
    rotation: u64,
}

/// The rotation count (0 when the file is absent).
pub fn load(root: &Root) -> Result<u64> {
    Ok(record::read_optional::<RouteRotation>(&root.route_rotation())?.map_or(0, |r| r.rotation))
}

/// Record `rotation` (0600).
pub fn save(root: &Root, rotation: u64) -> Result<()> {
    record::write(
        &root.route_rotation(),
        &RouteRotation { rotation },
        Layout::Pretty,
        atomic::SECRET,
    )
}
