//! The fence of a plan's removals and archives: which departing spaces a running broker
//! still serves, so are fenced (their accounts re-issued with no connection, reloaded and
//! confirmed) before anything else happens to them, and the step that does it. A removed
//! space also has every user revoked, and its data is deleted after the fence: the seed's
//! order of a deprovisioning, deny traffic, revoke credentials, drop storage. A space being
//! archived has JetStream turned off instead (nats-server stops its streams and keeps their
//! data), so that the final promotion drops an account with nothing running. Pure.
//!
//! Invariant: the fence comes before any stream of a removed space is deleted and before any
//! archived account leaves the config, and after the open journal's steps; it is planned again
//! while its removal or archive is unfinished (a re-run fences again, idempotently), and never
//! for a space whose record is already reaped or whose account the promoted config no longer
//! loads (nothing of it is served), but a removed archived one: the fence loads it, so that the
//! broker deletes the data it kept on disk.

use super::describe::Described;
use super::diff::Diff;
use super::removals::{Removal, Removals};
use super::{Blast, Fenced, Step, list};
use crate::model::SpaceName;
use crate::observed::Observed;
use crate::trust::jwt::AccountLimits;

/// The fence step of the plan, when the broker runs and serves a space the plan removes or
/// archives.
pub fn fence(
    observed: &Observed,
    removals: &Removals,
    diff: &Diff,
    described: &Described,
) -> Option<Step> {
    if !observed.is_running() {
        return None;
    }
    let inv = &observed.inventory;
    let removed = removals
        .iter()
        .filter(|(name, r)| {
            removals.leaving(inv, name)
                && (observed.loads(&r.account)
                    || loads_archived(observed, name, r)
                    || serves_live(observed, name))
                && !in_force(observed, name, r.committed, fenced_for_removal)
        })
        .map(|(name, r)| Fenced {
            space: name.clone(),
            account: r.account.clone(),
            archive: false,
        });
    let archived = diff
        .archivals
        .iter()
        .filter(|(_, archive)| **archive)
        .filter_map(|(name, _)| Some((name, inv.spaces.get(name)?)))
        .filter(|(name, space)| {
            observed.loads(&space.account_pub)
                && !in_force(observed, name, true, |l, _| quiesced(l))
        })
        .map(|(name, space)| Fenced {
            space: name.clone(),
            account: space.account_pub.clone(),
            archive: true,
        });
    let spaces: Vec<Fenced> = removed.chain(archived).collect();
    if spaces.is_empty() {
        return None;
    }
    let names: Vec<SpaceName> = spaces.iter().map(|f| f.space.clone()).collect();
    let removed: Vec<SpaceName> = spaces
        .iter()
        .filter(|f| !f.archive)
        .map(|f| f.space.clone())
        .collect();
    let dropped: Option<u64> = spaces
        .iter()
        .map(|f| {
            let blasts = if f.archive {
                &described.archive_blasts
            } else {
                &described.removal_blasts
            };
            blasts.get(&f.space).and_then(|b| b.connections_dropped)
        })
        .sum();
    let mut siblings = Vec::new();
    if !removed.is_empty() {
        siblings.push(format!(
            "a reload before the data of {} is deleted, so none of its clients can write or recreate a stream meanwhile",
            list(&removed)
        ));
    }
    if removed.len() < names.len() {
        siblings.push(
            "the streams of the spaces being archived are stopped, their data kept on disk"
                .to_string(),
        );
    }
    siblings.push("hot reload: every other space sees no dropped connection".into());
    let from = observed.generation.generation();
    Some(Step::Fence {
        spaces,
        from_generation: from,
        to_generation: from + 1,
        blast: Blast {
            touched: names,
            connections_dropped: dropped,
            credentials_invalidated: removed,
            siblings: Some(siblings.join("; ")),
            ..Blast::default()
        },
    })
}

/// Whether the removal of `name` is of an archived space the running broker does not load:
/// its data is on disk, unserved, and only the broker may delete it (it may hold the files),
/// so the fence loads it first, fenced, and the final promotion drops it again.
pub fn loads_archived(observed: &Observed, name: &SpaceName, r: &Removal) -> bool {
    observed.is_running()
        && observed
            .inventory
            .spaces
            .get(name)
            .is_some_and(|s| s.archived.is_some() && s.account_pub == r.account)
}

/// Limits that admit no connection and run no JetStream: an account fenced before its
/// archive.
pub fn quiesced(l: &AccountLimits) -> bool {
    l.is_suspended() && l.mem_storage == 0 && l.disk_storage == 0
}

/// A record fenced for its removal: no connection, every user revoked.
fn fenced_for_removal(l: &AccountLimits, revocations: &crate::trust::jwt::Revocations) -> bool {
    l.is_suspended() && revocations.contains_key("*")
}

/// Whether an interrupted apply's fence of `name` is in force: `ready` (its removal
/// committed), its record fenced as `fenced` says, the config of every node preloading exactly
/// that record, and every running node running that config. Fencing it again would cost a
/// reload and change nothing.
fn in_force(
    observed: &Observed,
    name: &SpaceName,
    ready: bool,
    fenced: fn(&AccountLimits, &crate::trust::jwt::Revocations) -> bool,
) -> bool {
    let Some(space) = observed.inventory.spaces.get(name) else {
        return false;
    };
    ready
        && fenced(&space.limits, &space.revocations)
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

/// Whether the running broker still serves `name` whatever the config on disk says (a config
/// changed by hand and not reloaded, a reload a node missed): its live figures show the
/// account's connections or streams, so a removal fences it before deleting anything.
fn serves_live(observed: &Observed, name: &SpaceName) -> bool {
    observed.inventory.spaces.get(name).is_some_and(|s| {
        s.usage.source == crate::observed::UsageSource::Live
            && (s.usage.connections.unwrap_or(0) > 0 || !s.usage.streams.is_empty())
    })
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
                    receipt: None,
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
        assert_eq!(
            fence(&o, &removals, &Diff::default(), &described),
            None,
            "stopped"
        );
        o.nodes[0].process = BrokerProcess::Running { pid: 1 };
        let Some(Step::Fence {
            spaces,
            blast,
            from_generation: 0,
            to_generation: 1,
        }) = fence(&o, &removals, &Diff::default(), &described)
        else {
            panic!("a running broker serving the removed space fences it");
        };
        assert_eq!(spaces.len(), 1);
        assert_eq!(spaces[0].space, name("gone"));
        assert_eq!(blast.touched, vec![name("gone")]);
        assert_eq!(
            fence(&o, &Removals::default(), &Diff::default(), &described),
            None
        );
        // A config on disk that no longer loads it (changed by hand, not reloaded), while the
        // broker still serves its clients: fenced all the same.
        let stripped = o.nodes[0]
            .server_conf
            .as_ref()
            .unwrap()
            .text
            .replace(&o.inventory.spaces[&name("gone")].account_pub, "AGONE");
        let kept = o.nodes[0]
            .server_conf
            .replace(PromotedConfig::new(stripped));
        assert_eq!(
            fence(&o, &removals, &Diff::default(), &described),
            None,
            "nothing says it is served"
        );
        let gone = o.inventory.spaces.get_mut(&name("gone")).unwrap();
        gone.usage.source = crate::observed::UsageSource::Live;
        gone.usage.connections = Some(2);
        assert!(
            fence(&o, &removals, &Diff::default(), &described).is_some(),
            "its live connections are fenced before its data goes"
        );
        o.nodes[0].server_conf = kept;
        // A record already reaped (an interrupted reap) has nothing left to fence.
        o.inventory.spaces.remove(&name("gone"));
        assert_eq!(fence(&o, &removals, &Diff::default(), &described), None);
    }
}
