//! The steps of a plan in order of docs/design/architecture.md, "The plan": finish an open journal; fence the
//! removed spaces a running broker serves (their commit point, a promotion of its own); delete
//! the streams of removed spaces (each its commit point when not fenced); empty the purged ones (each its commit
//! point); write the records of added and changed spaces; one promotion; provision; reap.

use super::describe::Described;
use super::diff::Diff;
use super::promotion::Promotion;
use super::removals::Removals;
use super::system::SystemReissue;
use super::{Blast, Step};
use crate::desired::Desired;
use crate::model::{SpaceName, SpaceState};
use crate::observed::{JournalState, Observed};

/// What every stage of the ordering reads.
struct Order<'a> {
    desired: &'a Desired,
    inv: &'a crate::observed::Inventory,
    diff: &'a Diff,
    described: &'a Described,
    /// The spaces the plan's fence fences.
    fenced: Vec<SpaceName>,
}

/// Every step of the plan, in order.
pub fn steps(
    desired: &Desired,
    observed: &Observed,
    removals: &Removals,
    diff: &Diff,
    described: &Described,
    system: Option<&SystemReissue>,
    promotions: Promotions,
) -> Vec<Step> {
    let Promotions {
        fence,
        config: promotion,
    } = promotions;
    let running = observed.is_running();
    let o = Order {
        desired,
        inv: &observed.inventory,
        diff,
        described,
        fenced: match &fence {
            Some(Step::Fence { spaces, .. }) => spaces.iter().map(|f| f.space.clone()).collect(),
            _ => Vec::new(),
        },
    };
    let mut steps = Vec::new();
    steps.extend(finish_journal(&observed.journal));
    steps.extend(fence);
    steps.extend(stream_deletions(&o, removals));
    // Purges before any record changes: the space is served as it was planned (a suspension
    // in the same plan would refuse the purge's own user), and the provisioning after the
    // promotion seeds their buckets again.
    steps.extend(purges(&o));
    // The system account first: the $SYS creds written below are signed by its keys.
    steps.extend(system.map(system_reissue));
    steps.extend(additions(&o));
    // Provisioning runs after the reload: added spaces first, then existing ones.
    let mut late: Vec<Step> = diff
        .adds
        .iter()
        .filter(|(_, spec)| running && spec.state == SpaceState::Active)
        .map(|(name, _)| Step::Provision {
            space: name.clone(),
            work: vec![format!(
                "create its {} streams and buckets, seed the default delivery class",
                crate::space::streams::count()
            )],
        })
        .collect();
    for name in diff.changed() {
        steps.extend(changes(&o, name));
        if let Some(work) = diff.provisions.get(name) {
            late.push(Step::Provision {
                space: name.clone(),
                work: work.clone(),
            });
        }
    }
    late.extend(registry_writes(&o));
    steps.extend(promotion);
    steps.extend(late);
    for (name, r) in removals.iter() {
        steps.push(Step::Reap {
            space: name.clone(),
            account: r.account.clone(),
        });
    }
    steps
}

/// The open journal's finishing, first of all.
fn finish_journal(journal: &JournalState) -> Option<Step> {
    let JournalState::Valid(j) = journal else {
        return None;
    };
    Some(Step::FinishJournal {
        started_at: j.started_at.clone(),
        plan_digest: j.plan_digest.clone(),
        removals: j.removals.iter().map(|r| r.space.clone()).collect(),
        purges: j
            .purges
            .iter()
            .filter(|p| p.committed)
            .map(|p| p.space.clone())
            .collect(),
        adding: j.adding.clone(),
        owed: j.owed.clone(),
    })
}

/// The deletion of each removed space's streams.
fn stream_deletions(o: &Order, removals: &Removals) -> Vec<Step> {
    removals
        .iter()
        .map(|(name, r)| {
            let mut blast = o
                .described
                .removal_blasts
                .get(name)
                .cloned()
                .unwrap_or_default();
            // Each step's blast radius says what that step does: the fence before it evicted
            // the space's clients and invalidated its credentials.
            if o.fenced.contains(name) {
                blast.connections_dropped = None;
                blast.credentials_invalidated.clear();
            }
            Step::DeleteStreams {
                space: name.clone(),
                account: r.account.clone(),
                committed: r.committed,
                fenced: o.fenced.contains(name),
                relocation: r.receipt.clone(),
                blast,
            }
        })
        .collect()
}

/// The purge of each purged space's streams.
fn purges(o: &Order) -> Vec<Step> {
    o.diff
        .purges
        .iter()
        .map(|(name, p)| Step::PurgeStreams {
            space: name.clone(),
            account: p.account.clone(),
            committed: p.committed,
            blast: o
                .described
                .purge_blasts
                .get(name)
                .cloned()
                .unwrap_or_default(),
        })
        .collect()
}

/// The system account's re-issue.
fn system_reissue(r: &SystemReissue) -> Step {
    Step::ReissueSystemAccount {
        rotate: r.rotate,
        evictor: r.evictor,
        revoke: r.revoke.clone(),
        handed_out: r.handed_out.clone(),
        pruned: r.pruned.clone(),
        changes: r.changes.clone(),
    }
}

/// Each added space's record (with its side accounts), and its suspension when it is added
/// suspended.
fn additions(o: &Order) -> Vec<Step> {
    let mut steps = Vec::new();
    for (name, spec) in &o.diff.adds {
        steps.push(Step::AddAccount {
            space: name.clone(),
            spec: *spec,
            sides: o
                .diff
                .sides
                .get(name)
                .map(|c| c.write.clone())
                .unwrap_or_default(),
        });
        if spec.state == SpaceState::Suspended {
            steps.push(Step::RecordSuspension {
                space: name.clone(),
                suspended: true,
                reason: o.desired.suspend_reason(name).cloned(),
                backfill: false,
                renew: false,
            });
        }
    }
    steps
}

/// The record changes of changed space `name` (before the promotion): its re-issue, its side
/// accounts, protection, suspension, archive and `$SYS` creds.
fn changes(o: &Order, name: &SpaceName) -> Vec<Step> {
    let mut steps = Vec::new();
    let account = &o.inv.spaces[name].account_pub;
    if let Some(reissue) = o.diff.reissues.get(name) {
        steps.push(Step::ReissueAccount {
            space: name.clone(),
            account: account.clone(),
            spec: o.desired.spaces[name].spec,
            transition: reissue.transition,
            revocations: {
                let mut r = o.inv.spaces[name].revoked.clone();
                for (key, at) in &reissue.member_revocations {
                    r.entry(key.clone()).or_insert(*at);
                }
                r
            },
            rotate_signing: reissue.rotate_signing,
            changes: reissue.fields.clone(),
            blast: o
                .described
                .reissue_blasts
                .get(name)
                .cloned()
                .unwrap_or_else(Blast::default),
        });
    }
    // After the re-issue: a rotated signing key is the one its members' accounts list.
    if let Some(c) = o.diff.sides.get(name) {
        steps.push(Step::WriteSideAccounts {
            space: name.clone(),
            account: account.clone(),
            suspended: o
                .desired
                .spec(name)
                .is_some_and(|s| s.state == SpaceState::Suspended),
            write: c.write.clone(),
            drop: c.drop.clone(),
            retired: c.retired.clone(),
            changes: c.lines.clone(),
        });
    }
    if let Some(protect) = o.diff.protections.get(name) {
        steps.push(Step::RecordProtection {
            space: name.clone(),
            protect: *protect,
        });
    }
    if let Some(change) = o.diff.suspensions.get(name) {
        steps.push(Step::RecordSuspension {
            space: name.clone(),
            suspended: change.suspended,
            reason: change.reason.clone(),
            backfill: change.backfill,
            renew: change.renew,
        });
    }
    if let Some(&archived) = o.diff.archivals.get(name) {
        let mut blast = o
            .described
            .archive_blasts
            .get(name)
            .cloned()
            .unwrap_or_default();
        // The fence before it evicted the space's clients.
        if o.fenced.contains(name) {
            blast.connections_dropped = None;
        }
        steps.push(Step::RecordArchive {
            space: name.clone(),
            account: account.clone(),
            archived,
            blast,
        });
    }
    if o.diff.sys_creds.contains_key(name) {
        steps.push(Step::WriteSysCreds {
            space: name.clone(),
        });
    }
    steps
}

/// The channel registries' and the members' acl writes, after provisioning. Channels last:
/// their registry exists once provisioning ran, and a resumed space is loaded by then. Acl
/// records after the reload that revoked their older users ("revoke first, then delete the
/// record"), and after provisioning made the bucket.
fn registry_writes(o: &Order) -> Vec<Step> {
    let account = |name: &SpaceName| match o.inv.spaces.get(name) {
        Some(s) if !o.diff.adds.contains_key(name) => s.account_pub.clone(),
        _ => String::new(),
    };
    let channels = o
        .diff
        .channels
        .iter()
        .filter(|(_, d)| !d.writes.is_empty())
        .map(|(name, d)| Step::WriteChannels {
            space: name.clone(),
            account: account(name),
            writes: d.writes.clone(),
            changes: d.lines.clone(),
        });
    let acls = o
        .diff
        .members
        .iter()
        .filter(|(_, m)| !m.writes.is_empty())
        .map(|(name, m)| Step::WriteAcl {
            space: name.clone(),
            account: account(name),
            writes: m.writes.clone(),
            changes: m.lines(),
        });
    channels.chain(acls).collect()
}

/// The plan's promotions: the fence of its removals ([`Step::Fence`]) and the one
/// config promotion ([`Step::PromoteConfig`]), each when there is one.
#[derive(Debug, Default)]
pub struct Promotions {
    pub fence: Option<Step>,
    pub config: Option<Step>,
}

/// The promotion step, if any, without the config it shows.
pub fn promotion_step(p: &Option<Promotion>) -> Option<Step> {
    p.as_ref().map(|p| p.step.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SpaceSpec;
    use crate::plan::{describe, diff, removals};
    use crate::testing::{journal, observed, space};

    #[test]
    fn steps_come_in_designs_order() {
        let spec = SpaceSpec::default();
        let mut o = observed(&[
            ("keep", space("AKEEP", &spec)),
            ("gone", space("AGONE", &spec)),
        ]);
        o.journal = journal("older", "AOLDER", true);
        let desired = crate::desired::parse(
            "version = 1\n[spaces.keep]\nstate = \"suspended\"\n[spaces.new]\n",
            "f",
        )
        .unwrap();
        let removals = removals::collect(&desired, &o);
        let diff = diff::diff(
            &desired,
            &o,
            &Default::default(),
            &removals,
            None,
            Default::default(),
        );
        let described = describe::describe(&desired, &o, &removals, &diff);
        let system = SystemReissue {
            rotate: false,
            evictor: None,
            revoke: Default::default(),
            handed_out: Default::default(),
            pruned: Vec::new(),
            changes: vec!["templates".into()],
        };
        let kinds: Vec<&str> = steps(
            &desired,
            &o,
            &removals,
            &diff,
            &described,
            Some(&system),
            Promotions::default(),
        )
        .iter()
        .map(|s| match s {
            Step::FinishJournal { .. } => "finish",
            Step::ReissueSystemAccount { .. } => "system",
            Step::Fence { .. } => "fence",
            Step::DeleteStreams { .. } => "delete",
            Step::PurgeStreams { .. } => "purge",
            Step::AddAccount { .. } => "add",
            Step::ReissueAccount { .. } => "reissue",
            Step::RecordProtection { .. } => "protect",
            Step::RecordSuspension { .. } => "suspension",
            Step::WriteSysCreds { .. } => "creds",
            Step::PromoteConfig { .. } => "promote",
            Step::Provision { .. } => "provision",
            Step::Reap { .. } => "reap",
            Step::WriteChannels { .. } => "channels",
            Step::WriteAcl { .. } => "acl",
            Step::RecordArchive { .. } => "archive",
            Step::WriteSideAccounts { .. } => "sides",
        })
        .collect();
        assert_eq!(
            kinds,
            [
                "finish",
                "delete",
                "delete",
                "system",
                "add",
                "reissue",
                // The suspension the re-issue makes, recorded with its reason.
                "suspension",
                "reap",
                "reap"
            ]
        );
    }
}
