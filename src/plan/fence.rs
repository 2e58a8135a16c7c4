//! The fence of a plan's removals: which removed spaces a running broker still serves, so are
//! fenced (their account re-issued with no connection and every user revoked, reloaded and
//! confirmed) before their data is deleted, and the step that does it. The seed's order of a
//! deprovisioning: deny traffic, revoke credentials, drop storage. Pure.
//!
//! Invariant: the fence comes before any stream of a removed space is deleted and after the
//! open journal's steps; it is planned again while its removal is unfinished (a re-run fences
//! again, idempotently), and never for a space whose record is already reaped or whose
//! account the promoted config no longer loads (nothing of it is served).

use super::describe::Described;
use super::removals::{Removal, Removals};
use super::{Blast, Fenced, Step, list};
use crate::observed::Observed;

/// The fence step of the plan, when the broker runs and serves a removed space.
pub fn fence(observed: &Observed, removals: &Removals, described: &Described) -> Option<Step> {
    if !observed.is_running() {
        return None;
    }
    let inv = &observed.inventory;
    let spaces: Vec<Fenced> = removals
        .iter()
        .filter(|(name, r)| {
            removals.leaving(inv, name)
                && observed.loads(&r.account)
                && !already_fenced(observed, name, r)
        })
        .map(|(name, r)| Fenced {
            space: name.clone(),
            account: r.account.clone(),
        })
        .collect();
    if spaces.is_empty() {
        return None;
    }
    let names: Vec<_> = spaces.iter().map(|f| f.space.clone()).collect();
    let dropped: Option<u64> = spaces
        .iter()
        .map(|f| {
            described
                .removal_blasts
                .get(&f.space)
                .and_then(|b| b.connections_dropped)
        })
        .sum();
    let from = observed.generation.generation();
    Some(Step::FenceRemovals {
        spaces,
        from_generation: from,
        to_generation: from + 1,
        blast: Blast {
            touched: names.clone(),
            connections_dropped: dropped,
            credentials_invalidated: names.clone(),
            siblings: Some(format!(
                "a reload before the data of {} is deleted, so none of its clients can write or recreate a stream meanwhile; hot reload: every other space sees no dropped connection",
                list(&names)
            )),
            ..Blast::default()
        },
    })
}

/// Whether an interrupted apply's fence of `name` is in force: its removal committed, its
/// record fenced (no connection, every user revoked), the config of every node preloading
/// exactly that record, and every running node running that config. Fencing it again would
/// cost a reload and change nothing.
fn already_fenced(observed: &Observed, name: &crate::model::SpaceName, r: &Removal) -> bool {
    let Some(space) = observed.inventory.spaces.get(name) else {
        return false;
    };
    r.committed
        && space.limits.is_suspended()
        && space.revocations.contains_key("*")
        && observed.nodes.iter().all(|n| {
            n.server_conf
                .as_ref()
                .is_some_and(|c| c.text.contains(&space.jwt))
        })
        && observed
            .server
            .as_ref()
            .and_then(|s| s.behind_records.as_ref())
            .is_some_and(|behind| behind.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observed::{BrokerProcess, PromotedConfig};
    use crate::testing::name;

    /// A root of `names` whose promoted config loads them all.
    fn root_of(names: &[&str]) -> Observed {
        let (trust, spaces) = crate::testing::minted(names);
        let refs: Vec<(&str, _)> = spaces
            .iter()
            .map(|(n, s)| (n.as_str(), s.clone()))
            .collect();
        let mut o = crate::testing::observed(&refs);
        let desired = crate::desired::parse("version = 1\n", "f").unwrap();
        let node = crate::plan::nodes(&desired, &o).remove(0);
        let preloads = crate::observed::preloads(&o.inventory.spaces);
        let conf = crate::render::server_conf(&trust, &preloads, &node).unwrap();
        o.nodes[0].server_conf = Some(PromotedConfig::new(conf));
        o
    }

    fn removing(o: &Observed, n: &str) -> Removals {
        Removals(
            [(
                name(n),
                Removal {
                    account: o.inventory.spaces[&name(n)].account_pub.clone(),
                    committed: false,
                    journaled: false,
                },
            )]
            .into(),
        )
    }

    #[test]
    fn a_running_broker_fences_what_it_serves_and_a_stopped_one_nothing() {
        let mut o = root_of(&["gone", "keep"]);
        let removals = removing(&o, "gone");
        let described = Described::default();
        assert_eq!(fence(&o, &removals, &described), None, "stopped");
        o.nodes[0].process = BrokerProcess::Running { pid: 1 };
        let Some(Step::FenceRemovals {
            spaces,
            blast,
            from_generation: 0,
            to_generation: 1,
        }) = fence(&o, &removals, &described)
        else {
            panic!("a running broker serving the removed space fences it");
        };
        assert_eq!(spaces.len(), 1);
        assert_eq!(spaces[0].space, name("gone"));
        assert_eq!(blast.touched, vec![name("gone")]);
        assert_eq!(fence(&o, &Removals::default(), &described), None);
        // A record already reaped (an interrupted reap) has nothing left to fence.
        o.inventory.spaces.remove(&name("gone"));
        assert_eq!(fence(&o, &removals, &described), None);
    }
}
