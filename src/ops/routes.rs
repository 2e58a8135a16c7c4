//! `cotal rotate routes`: replace a cluster's route credential. Recorded now (the rotation
//! count, under the root's lock), written into every node's include by the next apply or `up`.
//! Refused while any node runs: a node reloaded with another credential closes the routes
//! open with the old one, and the others refuse it until they reload too.

use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::store::{Root, lock, route_rotation};
use crate::{observe, plan};
use std::time::Duration;

/// Rotate the route credential; returns the new rotation count.
pub fn rotate(root: &Root, lock_timeout: Duration) -> Result<u64> {
    let (desired, digest, broken) = observe::desired_for_reading(root)?;
    if let Some(why) = broken {
        return Err(Error::input(format!(
            "cotal.toml cannot be read ({why}): the route credential is a cluster's, and which nodes it has is in cotal.toml"
        )));
    }
    if !desired.topology.is_cluster() {
        return Err(Error::input(
            "this root runs one server, which has no routes: there is no route credential to rotate",
        ));
    }
    let observed = observe::observe(root, &desired, digest)?;
    plan::guard_trust(&observed)?;
    let running: Vec<&str> = observed
        .nodes
        .iter()
        .filter(|n| n.process.is_running())
        .map(|n| n.name())
        .collect();
    if !running.is_empty() {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "node(s) {} run: a node reloaded with a new route credential closes the routes open with the old one, and the others refuse it until they reload too.",
                running.join(", ")
            ))
            .blast("none, nothing was changed.")
            .next("`cotal down` (and stop every node on another machine), then `cotal rotate routes` and `cotal up`"),
        ));
    }
    let lock = lock::acquire(root, &crate::operator::holder(), lock_timeout)?;
    lock.verify()?;
    crate::apply::refuse_if_journal_open(&crate::store::journal::load(root)?, "rotate routes")?;
    let rotation = route_rotation::load(root)? + 1;
    // Audited before it is recorded (fail closed): a failed save leaves the attempt on record.
    crate::credentials::audit_root(
        root,
        crate::audit::Event::RoutesRotated,
        format!(
            "route credential rotation {rotation} recorded; the next apply or up writes it into every node's include"
        ),
    )?;
    route_rotation::save(root, rotation)?;
    Ok(rotation)
}
