//! Evicting one space: close every live connection of it (its own account's and its members'
//! accounts'), with cotal's own control user: the CONNZ of each of those accounts only, then a
//! KICK of exactly the client ids it listed. nats-server never reuses a client id while it runs, so a client of another space
//! can never be named, even when the list is stale by the time it is used.

use crate::audit::Event;
use crate::broker::Running;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::observed::BrokerProcess;
use crate::store::{Root, lock};
use crate::{apply, credentials, observe, plan};
use std::time::Duration;

/// What an eviction did.
pub enum Evicted {
    /// The broker is stopped: the space has no connection.
    BrokerStopped,
    /// This many connections were closed (the audit records it).
    Closed(usize),
}

/// Close every live connection of `space` (under the lock, audited); refused on a cluster.
pub fn evict(root: &Root, space: &SpaceName, lock_timeout: Duration) -> Result<Evicted> {
    let _lock = lock::acquire(root, &crate::operator::holder(), lock_timeout)?;
    let (desired, digest) = observe::desired(root)?;
    let observed = observe::observe(root, &desired, digest)?;
    plan::guard_trust(&observed)?;
    plan::guard_liveness(&observed)?;
    apply::refuse_if_journal_open(&observed.journal, "space evict")?;
    let Some(observed_space) = observed.inventory.spaces.get(space) else {
        return Err(Error::input(format!(
            "no space {} on this root",
            space.quoted()
        )));
    };
    // Its tenant's accounts: its own, and each member's (its observer's and evictor's are
    // cotal's helpers, not the tenant's clients).
    let accounts: Vec<&str> = std::iter::once(observed_space.account_pub.as_str())
        .chain(
            observed_space
                .sides
                .iter()
                .filter(|(role, _)| {
                    matches!(role, crate::space::side_accounts::SideRole::Member(_))
                })
                .map(|(_, side)| side.account_pub.as_str()),
        )
        .collect();
    if observed.process() == BrokerProcess::Stopped {
        return Ok(Evicted::BrokerStopped);
    }
    if let Some(cluster) = &desired.topology.cluster {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "`space evict` does not work on a cluster yet: a client id names a connection on one node, and cotal kicks through one node's control plane; on the {} nodes of cluster {:?} it could not close every connection of {}.",
                desired.topology.nodes.len(),
                cluster,
                space.quoted()
            ))
            .blast("none, nothing was closed.")
            .next(format!(
                "`cotal space suspend {}` closes the space's clients on every node (and `cotal space resume` lets them back)",
                space.as_str()
            )),
        ));
    }
    let running = Running::connect(root, &desired.topology, &observed)?;
    // Audited before any connection is closed (fail closed); the outcome follows.
    credentials::audit(
        root,
        Event::SpaceEvicted,
        space,
        "eviction begun: closing every live connection of its accounts".into(),
    )?;
    let mut closed = 0usize;
    let result = accounts
        .iter()
        .try_for_each(|account| kick_all(running.control(), account, &mut closed));
    let outcome = match &result {
        Ok(()) => format!("closed {closed} connection(s)"),
        Err(e) => format!("closed {closed} connection(s), then failed: {e}"),
    };
    credentials::audit(root, Event::SpaceEvicted, space, outcome)?;
    result?;
    Ok(Evicted::Closed(closed))
}

/// Kick every client the account had when the eviction started. CONNZ is paged, and a page
/// read while clients leave can skip some: the account is listed again until no client up to
/// the highest id first seen is left (clients that connect later, with higher ids, are not
/// chased, so this ends).
fn kick_all(
    control: &crate::broker::control::Control,
    account: &str,
    closed: &mut usize,
) -> Result<()> {
    let mut bound = None;
    let mut kicked = std::collections::BTreeSet::new();
    loop {
        let cids = control.account_connections(account)?;
        let bound = *bound.get_or_insert_with(|| cids.iter().copied().max().unwrap_or(0));
        let targets: Vec<u64> = cids
            .into_iter()
            .filter(|c| *c <= bound && !kicked.contains(c))
            .collect();
        if targets.is_empty() {
            return Ok(());
        }
        for cid in targets {
            kicked.insert(cid);
            if control.kick(cid)? {
                *closed += 1;
            }
        }
    }
}
