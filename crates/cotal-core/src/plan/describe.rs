//! The words of a plan: each space's change as people read it (what, why, and its blast
//! radius), and the warnings. Nothing here steers what apply does.

use super::blast::{self, Blast};
use super::diff::Diff;
use super::removals::{Removal, Removals};
use super::{Action, SpaceChange, list};
use crate::desired::Desired;
use crate::model::{SpaceName, SpaceSpec, SpaceState, human_bytes};
use crate::observed::{Observed, UsageSource};
use crate::render::Node;
use std::collections::BTreeMap;

/// The described changes, and the blast radius of the steps that carry one.
#[derive(Debug, Clone, Default)]
pub struct Described {
    /// In space-name order, removals before adds before changes of one name.
    pub changes: Vec<SpaceChange>,
    pub removal_blasts: BTreeMap<SpaceName, Blast>,
    pub reissue_blasts: BTreeMap<SpaceName, Blast>,
    pub purge_blasts: BTreeMap<SpaceName, Blast>,
    pub archive_blasts: BTreeMap<SpaceName, Blast>,
}

/// The declared members of a space the plan touches that no member change names, each with
/// its grant, so a reviewer always sees the ACLs of what changes: with the broker stopped
/// (a first pull request's plan) their acl records are read and written only later, and it
/// says so; with it running, no change is planned for them; while the space is suspended their
/// records wait for its resume. An archived space's members wait for it and are not listed.
fn declared_members(
    desired: &Desired,
    observed: &Observed,
    diff: &Diff,
    name: &SpaceName,
) -> Vec<String> {
    let Some(spec) = desired.spec(name) else {
        return Vec::new();
    };
    let Some(declared) = desired.members_of(name) else {
        return Vec::new();
    };
    let why = match (spec.state, observed.is_running()) {
        (SpaceState::Archived, _) => return Vec::new(),
        (_, false) => "its acl record is written by the next `cotal apply` with the broker running",
        (SpaceState::Suspended, true) => {
            "declared; its acl record waits until the space is resumed"
        }
        (_, true) => "declared; no change planned",
    };
    let named: std::collections::BTreeSet<&str> = diff
        .members
        .get(name)
        .map(|m| m.changes.iter().map(|(p, _, _)| p.as_str()).collect())
        .unwrap_or_default();
    declared
        .iter()
        .filter(|(p, _)| !named.contains(p.to_string().as_str()))
        .map(|(p, grant)| format!("member {p}: {} ({why})", grant.describe()))
        .collect()
}

/// Describe every change of the plan.
pub fn describe(
    desired: &Desired,
    observed: &Observed,
    removals: &Removals,
    diff: &Diff,
) -> Described {
    let mut out = Described::default();
    for (name, r) in removals.iter() {
        let (change, blast) = removal(observed, name, r);
        out.changes.push(change);
        out.removal_blasts.insert(name.clone(), blast);
    }
    for (name, spec) in &diff.adds {
        let mut details = spec_details(spec);
        if let Some(d) = diff.channels.get(name) {
            details.extend(d.lines.iter().cloned());
        }
        if let Some(m) = diff.members.get(name) {
            details.extend(m.lines());
        }
        details.extend(declared_members(desired, observed, diff, name));
        if let Some(c) = diff.sides.get(name) {
            details.extend(c.lines.iter().cloned());
        }
        out.changes.push(SpaceChange {
            action: Action::Add,
            space: name.clone(),
            account: None,
            details,
            blast: Blast {
                touched: vec![name.clone()],
                ..Blast::default()
            },
        });
    }
    for name in diff.changed() {
        let (mut change, reissue_blast, purge_blast) = existing(desired, observed, diff, name);
        if let Some(b) = reissue_blast {
            out.reissue_blasts.insert(name.clone(), b);
        }
        if let Some(&archive) = diff.archivals.get(name) {
            let b = archival(observed, desired, name, archive, &mut change);
            change.blast.connections_dropped = b.connections_dropped;
            change.blast.kept_on_disk = b.kept_on_disk;
            out.archive_blasts.insert(name.clone(), b);
        }
        if let Some(b) = purge_blast {
            out.purge_blasts.insert(name.clone(), b);
        }
        out.changes.push(change);
    }
    out.changes
        .sort_by(|a, b| (a.space.cmp(&b.space)).then((a.action as u8).cmp(&(b.action as u8))));
    out
}

/// An archive (`archive`) or a return from one, described into `change` (its state line
/// first): the blast radius of its record step.
fn archival(
    observed: &Observed,
    desired: &Desired,
    name: &SpaceName,
    archive: bool,
    change: &mut SpaceChange,
) -> Blast {
    let space = &observed.inventory.spaces[name];
    // The state the space is served in now, or will be in once back.
    let served = |suspended: bool| {
        if suspended {
            SpaceState::Suspended
        } else {
            SpaceState::Active
        }
    };
    let mut blast = Blast {
        touched: vec![name.clone()],
        ..Blast::default()
    };
    let lines = if archive {
        let live = space.usage.source == UsageSource::Live;
        blast.connections_dropped = space.usage.connections;
        blast.kept_on_disk = Some(super::blast::KeptOnDisk {
            streams: live.then_some(space.usage.streams.len() as u64),
            messages: live
                .then(|| {
                    space
                        .usage
                        .streams
                        .iter()
                        .map(|s| s.messages)
                        .sum::<Option<u64>>()
                })
                .flatten(),
            bytes: live.then(|| space.usage.total_bytes()),
        });
        blast.siblings = Some(if observed.is_running() {
            "hot reload: every other space sees no dropped connection".into()
        } else {
            "the broker is stopped: the account is left out from its next `cotal up`".into()
        });
        vec![
            format!(
                "state: {} -> archived",
                served(space.limits.is_suspended())
            ),
            "its account leaves the config: no connection, subscription or stream of it is served; its record, keys, protection and data stay on disk".into(),
        ]
    } else {
        let to = desired.spaces[name].spec.state;
        vec![
            format!("state: archived -> {to}"),
            if to == SpaceState::Suspended {
                "its account is loaded again, suspended: its users stay refused and its data stays on disk (served again once it is resumed)".into()
            } else {
                "its account is loaded again: what its store holds comes back from disk, and creds handed out before connect again".into()
            },
        ]
    };
    change.details.splice(0..0, lines);
    blast
}

/// A removal: what it destroys (or that it destroys everything, uncounted, without figures).
fn removal(observed: &Observed, name: &SpaceName, r: &Removal) -> (SpaceChange, Blast) {
    let usage = observed.inventory.spaces.get(name).map(|s| &s.usage);
    let mut blast = blast::removal(
        name,
        usage.map(|u| u.streams.as_slice()).unwrap_or(&[]),
        usage.and_then(|u| u.connections),
    );
    blast.data_uncounted = !r.committed && usage.is_none_or(|u| u.source == UsageSource::Unknown);
    let mut details = Vec::new();
    if r.journaled {
        details.push(if r.committed {
            "finishing a removal interrupted after its commit point".into()
        } else {
            "finishing a removal journaled by an interrupted apply".into()
        });
    }
    (
        SpaceChange {
            action: Action::Remove,
            space: name.clone(),
            account: Some(r.account.clone()),
            details,
            blast: blast.clone(),
        },
        blast,
    )
}

/// A change of an existing space, and the blast radii of its re-issue and of its purge, if any.
fn existing(
    desired: &Desired,
    observed: &Observed,
    diff: &Diff,
    name: &SpaceName,
) -> (SpaceChange, Option<Blast>, Option<Blast>) {
    let space = &observed.inventory.spaces[name];
    let spec = &desired.spaces[name].spec;
    let mut details = Vec::new();
    let mut blast = Blast {
        touched: vec![name.clone()],
        ..Blast::default()
    };
    let mut reissue_blast = None;
    if let Some(reissue) = diff.reissues.get(name) {
        // A space brought back from its archive gets its declared limits again: its archived
        // record's (no connection, no JetStream) are not worth a line each.
        if diff.archivals.get(name) != Some(&false) {
            details.extend(reissue.fields.iter().map(|f| {
                // A change from nothing says only what it adds.
                if f.from.is_empty() {
                    format!("{}: {}", f.field, f.to)
                } else {
                    format!("{}: {} -> {}", f.field, f.from, f.to)
                }
            }));
        }
        let live = space.usage.connections;
        if spec.state == SpaceState::Suspended && !space.limits.is_suspended() {
            blast.connections_dropped = live;
            blast.data_kept = true;
            details.push("suspension closes every live connection of the space and refuses new ones; streams and buckets are kept".into());
        } else if let Some(max) = spec.limits.max_connections
            && spec.state == SpaceState::Active
        {
            // The limit bounds the space's account and each member's on its own.
            let over: u64 = space
                .usage
                .per_account
                .iter()
                .map(|c| c.saturating_sub(max))
                .sum();
            if over > 0 {
                blast.connections_dropped = Some(over);
                let live = live.unwrap_or(0);
                details.push(format!(
                    "{live} live connection{}, more than the new max {max} in an account (the space's, or a member's): {}",
                    if live == 1 { "" } else { "s" },
                    if over == 1 {
                        "the newest one is closed".to_string()
                    } else {
                        format!("the newest {over} are closed")
                    }
                ));
            }
        }
        if space.revoked != space.revocations {
            details.push("the revoked users' live connections are closed at the reload, and they are refused from then on".into());
        }
        let used = space.usage.total_bytes();
        if let Some(max) = spec.limits.max_storage
            && used > max.0
        {
            details.push(format!(
                "{} stored > new max_storage {max}: nothing is deleted, but JetStream refuses new writes until the space is under it",
                human_bytes(used)
            ));
        }
        reissue_blast = Some(blast.clone());
    }
    if let Some(protect) = diff.protections.get(name) {
        details.push(format!("protect: {} -> {protect}", space.protect_recorded));
    }
    if let Some(why) = diff.sys_creds.get(name) {
        details.push(if why == "missing" {
            "$SYS credentials: missing -> written".to_string()
        } else {
            format!("$SYS credentials: re-minted ({why})")
        });
    }
    if let Some(work) = diff.provisions.get(name) {
        details.push(format!("streams: {}", work.join(", ")));
    }
    let mut purge_blast = None;
    if let Some(p) = diff.purges.get(name) {
        let mut b = super::blast::purge(name, &space.usage.streams);
        b.data_uncounted = space.usage.source == UsageSource::Unknown;
        details.insert(0, if p.committed {
            "finishing a purge interrupted after its commit point".into()
        } else {
            "purge: every stream and bucket emptied; their configs, the account, its credentials and its connections are kept".into()
        });
        blast.streams_destroyed = b.streams_destroyed.clone();
        blast.messages_destroyed = b.messages_destroyed;
        blast.bytes_destroyed = b.bytes_destroyed;
        blast.emptied = true;
        blast.data_uncounted = b.data_uncounted;
        blast.siblings = b.siblings.clone();
        purge_blast = Some(b);
        if let Some(d) = diff.channels.get(name) {
            details.push(format!(
                "channels: the {} declared channel key(s) written again after the purge",
                d.writes.len()
            ));
        }
    } else if let Some(d) = diff.channels.get(name) {
        details.extend(d.lines.iter().cloned());
    }
    if let Some(m) = diff.members.get(name) {
        match observed.inventory.spaces.get(name) {
            Some(space) if space.usage.source == UsageSource::Live => {
                details.extend(m.lines_closing(&space.usage.by_member, &space.member_users))
            }
            _ => details.extend(m.lines()),
        }
    }
    details.extend(declared_members(desired, observed, diff, name));
    if let Some(c) = diff.sides.get(name) {
        details.extend(c.lines.iter().cloned());
    }
    // A space an interrupted apply was adding is an add being completed.
    let completing =
        matches!(&observed.journal, crate::observed::JournalState::Valid(j) if j.adds(name));
    if completing {
        details.insert(0, "completes the add an interrupted apply started".into());
    }
    (
        SpaceChange {
            action: if completing {
                Action::Add
            } else {
                Action::Change
            },
            space: name.clone(),
            account: Some(space.account_pub.clone()),
            details,
            blast,
        },
        reissue_blast,
        purge_blast,
    )
}

/// The settings of a space being added, for people.
fn spec_details(spec: &SpaceSpec) -> Vec<String> {
    let mut out = Vec::new();
    if spec.state != SpaceState::Active {
        out.push(format!("state: {}", spec.state));
    }
    if spec.protect {
        out.push("protect: true".into());
    }
    let limits: Vec<String> = spec
        .limits
        .entries()
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k} = {v}")))
        .collect();
    out.push(if limits.is_empty() {
        "limits: unlimited".into()
    } else {
        format!("limits: {}", limits.join(", "))
    });
    out
}

/// What the operator should know but that changes nothing by itself.
pub fn warnings(desired: &Desired, observed: &Observed, nodes: &[Node]) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(e) = &observed.live_error {
        out.push(format!(
            "the broker runs but its live figures could not be read ({e}); blast radii show no message or connection counts"
        ));
    }
    for (name, space) in &observed.inventory.spaces {
        if !space.unguarded_owners.is_empty() {
            let names: std::collections::BTreeSet<&str> = space
                .unguarded_owners
                .iter()
                .map(|u| u.name.as_str())
                .collect();
            out.push(format!(
                "{} has {} owner user(s) minted before the owner's guard ({}): they may still delete and purge the streams and buckets cotal provisions; mint them again (`cotal creds {} --user NAME --profile admin`) and revoke the old keys (`cotal creds revoke {} --key KEY`, keys in `cotal creds list {}`)",
                name.quoted(),
                space.unguarded_owners.len(),
                names.into_iter().collect::<Vec<_>>().join(", "),
                name.as_str(),
                name.as_str(),
                name.as_str()
            ));
        }
        if !space.kept_claims.is_empty() {
            out.push(format!(
                "{} keeps claims cotal does not model ({}): cotal re-issues its JWT only for what cotal.toml declares (its limits and state, cotal's revocations, its signing key), and keeps the rest as it is",
                name.quoted(),
                space.kept_claims.join("; ")
            ));
        }
        let serves_again = desired.spec(name).is_some_and(|s| {
            s.state == SpaceState::Active
                && (space.limits.is_suspended() || space.archived.is_some())
        });
        if let (Some(moving), true) = (&space.relocation, serves_again) {
            out.push(format!(
                "{} is being moved (phase {}): serving it again ends its recorded move, since what it holds from then on is not in the artifact (a move needs a new fence and export)",
                name.quoted(),
                moving.phase
            ));
        }
        if super::diff::still_running(observed, space) {
            out.push(format!(
                "the broker still runs the streams of archived space {} (a return that was rolled back after a client of it connected): nats-server keeps them until it restarts, and brings it back with them half-served; restart the broker (`cotal down`, `cotal up`) before bringing it back",
                name.quoted()
            ));
        }
    }
    let mut by_token: BTreeMap<String, Vec<&SpaceName>> = BTreeMap::new();
    for name in desired.spaces.keys() {
        by_token.entry(name.token()).or_default().push(name);
    }
    for (token, names) in by_token {
        if names.len() > 1 {
            out.push(format!(
                "{} share the wire token {token:?}: they are different accounts and stay isolated, but their stream names look alike",
                list(names)
            ));
        }
    }
    for (name, space) in &observed.inventory.spaces {
        for (stream, fields) in &space.stream_drift {
            let fixed: Vec<&str> = fields
                .iter()
                .map(String::as_str)
                .filter(|f| !crate::space::streams::updatable(f))
                .collect();
            let (mut locked, recreated): (Vec<&str>, Vec<&str>) = fixed
                .iter()
                .partition(|f| crate::space::streams::LOCKED.contains(f));
            // Sealing a stream denies deletes and purges too: the seal is what to name.
            if locked.contains(&"sealed") {
                locked = vec!["sealed"];
            }
            if !recreated.is_empty() {
                out.push(format!(
                    "{stream} of {} was recreated with another {} than cotal provisions, which nats-server cannot change in place: the space is not servable until it is put right. \
                     To do so, delete that stream with a user of the space (its messages go with it); the next `cotal apply` creates it again",
                    name.quoted(),
                    recreated.join(" and ")
                ));
            }
            if !locked.is_empty() {
                out.push(format!(
                    "{stream} of {} was set {} by a user of the space, which nats-server never lets anyone undo in place: cotal leaves it as it is (an update would fail every apply) and the space is not servable until it is put right. \
                     To do so, delete that stream with an admin of the space (its messages go with it); the next `cotal apply` creates it again",
                    name.quoted(),
                    locked
                        .iter()
                        .map(|f| if *f == "sealed" { "sealed".to_string() } else { format!("{f} = true") })
                        .collect::<Vec<_>>()
                        .join(" and ")
                ));
            }
        }
    }
    for node in nodes {
        if let Some(old) = super::guards::listener_change(observed, node) {
            out.push(format!(
                "the listener{} changes from {old} to {}:{}: nats-server cannot move its listener on reload; restart the broker (`cotal down` then `cotal up`) for it to take effect",
                node_of(observed, &node.name),
                node.host,
                node.port
            ));
        }
    }
    if desired.topology.is_cluster() && desired.topology.nodes.len() == 2 {
        out.push(
            "a cluster of two nodes tolerates no node down: JetStream needs both for a quorum (three nodes tolerate one)".into(),
        );
    }
    for down in observed.nodes_down() {
        out.push(format!(
            "node {} is not running (--allow-degraded): its config file is written for its next start, but it is not reloaded or confirmed; `cotal up` starts it",
            down.name()
        ));
    }
    out
}

/// " of node NAME" for a cluster's node, nothing for a single server.
fn node_of(observed: &Observed, name: &str) -> String {
    if observed.is_cluster() {
        format!(" of node {name}")
    } else {
        String::new()
    }
}

/// What the plan says of channels it does not write: declarations it cannot check (the broker
/// stopped, the space suspended, the registry unreadable) and registry entries the file does
/// not declare, kept.
pub fn channel_warnings(desired: &Desired, observed: &Observed, diff: &Diff) -> Vec<String> {
    use crate::observed::RegistryState;
    let mut out = Vec::new();
    for (name, declared) in desired.declared_channels() {
        if declared.channels.is_empty() && declared.defaults.is_none() {
            continue;
        }
        let why = match observed.inventory.spaces.get(name) {
            _ if !observed.is_running() => Some("the broker is stopped".to_string()),
            None => None,
            Some(s)
                if s.limits.is_suspended()
                    || desired.spaces[name].spec.state != SpaceState::Active =>
            {
                Some("the space is suspended".to_string())
            }
            Some(s) => match &s.registry {
                RegistryState::Failed(e) => Some(format!("its registry could not be read: {e}")),
                RegistryState::Unknown => Some("its registry was not read".to_string()),
                _ => None,
            },
        };
        if let Some(why) = why {
            out.push(format!(
                "the channels {} declares are not checked ({why}); an apply with the broker running and the space active writes them",
                name.quoted()
            ));
        }
    }
    for (name, d) in &diff.channels {
        if !d.kept.is_empty() {
            const SHOWN: usize = 20;
            let mut kept = d.kept[..d.kept.len().min(SHOWN)].join(", ");
            if d.kept.len() > SHOWN {
                kept.push_str(&format!(" and {} more", d.kept.len() - SHOWN));
            }
            out.push(format!(
                "{}: the registry holds channels cotal.toml does not declare, kept: {kept} (prune_channels = true removes them)",
                name.quoted()
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{name, observed, space};

    #[test]
    fn a_removal_without_figures_says_it_destroys_everything() {
        let o = observed(&[("gone", space("AGONE", &SpaceSpec::default()))]);
        let r = Removal {
            account: "AGONE".into(),
            committed: false,
            journaled: false,
            receipt: None,
        };
        let (change, blast) = removal(&o, &name("gone"), &r);
        assert_eq!(change.action, Action::Remove);
        assert!(blast.data_uncounted);
        assert!(blast.describe().starts_with("destroys every stream"));
        // Past its commit point there is nothing left to count.
        let done = Removal {
            committed: true,
            ..r
        };
        assert!(!removal(&o, &name("gone"), &done).1.data_uncounted);
    }
}
