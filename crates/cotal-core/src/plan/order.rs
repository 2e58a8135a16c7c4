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
use crate::model::SpaceState;
use crate::observed::{JournalState, Observed};

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
    let inv = &observed.inventory;
    let running = observed.is_running();
    let mut steps = Vec::new();
    if let JournalState::Valid(j) = &observed.journal {
        steps.push(Step::FinishJournal {
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
        });
    }
    let fenced: Vec<_> = match &fence {
        Some(Step::Fence { spaces, .. }) => spaces.iter().map(|f| f.space.clone()).collect(),
        _ => Vec::new(),
    };
    steps.extend(fence);
    for (name, r) in removals.iter() {
        let mut blast = described
            .removal_blasts
            .get(name)
            .cloned()
            .unwrap_or_default();
        // Each step's blast radius says what that step does: the fence before it evicted the
        // space's clients and invalidated its credentials.
        if fenced.contains(name) {
            blast.connections_dropped = None;
            blast.credentials_invalidated.clear();
        }
        steps.push(Step::DeleteStreams {
            space: name.clone(),
            account: r.account.clone(),
            committed: r.committed,
            fenced: fenced.contains(name),
            relocation: r.receipt.clone(),
            blast,
        });
    }
    // Purges before any record changes: the space is served as it was planned (a suspension
    // in the same plan would refuse the purge's own user), and the provisioning after the
    // promotion seeds their buckets again.
    for (name, p) in &diff.purges {
        steps.push(Step::PurgeStreams {
            space: name.clone(),
            account: p.account.clone(),
            committed: p.committed,
            blast: described
                .purge_blasts
                .get(name)
                .cloned()
                .unwrap_or_default(),
        });
    }
    // The system account first: the $SYS creds written below are signed by its keys.
    if let Some(r) = system {
        steps.push(Step::ReissueSystemAccount {
            rotate: r.rotate,
            evictor: r.evictor,
            revoke: r.revoke.clone(),
            handed_out: r.handed_out.clone(),
            pruned: r.pruned.clone(),
            changes: r.changes.clone(),
        });
    }
    let side_step = |name: &crate::model::SpaceName, account: String| {
        diff.sides.get(name).map(|c| Step::WriteSideAccounts {
            space: name.clone(),
            account,
            suspended: desired
                .spec(name)
                .is_some_and(|s| s.state == SpaceState::Suspended),
            write: c.write.clone(),
            drop: c.drop.clone(),
            retired: c.retired.clone(),
            changes: c.lines.clone(),
        })
    };
    for (name, spec) in &diff.adds {
        steps.push(Step::AddAccount {
            space: name.clone(),
            spec: *spec,
            sides: diff
                .sides
                .get(name)
                .map(|c| c.write.clone())
                .unwrap_or_default(),
        });
        if spec.state == SpaceState::Suspended {
            steps.push(Step::RecordSuspension {
                space: name.clone(),
                suspended: true,
                reason: desired.suspend_reason(name).cloned(),
                backfill: false,
                renew: false,
            });
        }
    }
    // Provisioning runs after the reload: added spaces first, then existing ones.
    let mut late = Vec::new();
    for (name, spec) in &diff.adds {
        if running && spec.state == SpaceState::Active {
            late.push(Step::Provision {
                space: name.clone(),
                work: vec![format!(
                    "create its {} streams and buckets, seed the default delivery class",
                    crate::space::streams::count()
                )],
            });
        }
    }
    for name in diff.changed() {
        if let Some(reissue) = diff.reissues.get(name) {
            steps.push(Step::ReissueAccount {
                space: name.clone(),
                account: inv.spaces[name].account_pub.clone(),
                spec: desired.spaces[name].spec,
                transition: reissue.transition,
                revocations: {
                    let mut r = inv.spaces[name].revoked.clone();
                    for (key, at) in &reissue.member_revocations {
                        r.entry(key.clone()).or_insert(*at);
                    }
                    r
                },
                rotate_signing: reissue.rotate_signing,
                changes: reissue.fields.clone(),
                blast: described
                    .reissue_blasts
                    .get(name)
                    .cloned()
                    .unwrap_or_else(Blast::default),
            });
        }
        // After the re-issue: a rotated signing key is the one its members' accounts list.
        steps.extend(side_step(name, inv.spaces[name].account_pub.clone()));
        if let Some(protect) = diff.protections.get(name) {
            steps.push(Step::RecordProtection {
                space: name.clone(),
                protect: *protect,
            });
        }
        if let Some(change) = diff.suspensions.get(name) {
            steps.push(Step::RecordSuspension {
                space: name.clone(),
                suspended: change.suspended,
                reason: change.reason.clone(),
                backfill: change.backfill,
                renew: change.renew,
            });
        }
        if let Some(&archived) = diff.archivals.get(name) {
            let mut blast = described
                .archive_blasts
                .get(name)
                .cloned()
                .unwrap_or_default();
            // The fence before it evicted the space's clients.
            if fenced.contains(name) {
                blast.connections_dropped = None;
            }
            steps.push(Step::RecordArchive {
                space: name.clone(),
                account: inv.spaces[name].account_pub.clone(),
                archived,
                blast,
            });
        }
        if diff.sys_creds.contains_key(name) {
            steps.push(Step::WriteSysCreds {
                space: name.clone(),
            });
        }
        if let Some(work) = diff.provisions.get(name) {
            late.push(Step::Provision {
                space: name.clone(),
                work: work.clone(),
            });
        }
    }
    // Channels last: their registry exists once provisioning ran, and a resumed space is
    // loaded by then.
    for (name, d) in &diff.channels {
        if d.writes.is_empty() {
            continue;
        }
        let account = match inv.spaces.get(name) {
            Some(s) if !diff.adds.contains_key(name) => s.account_pub.clone(),
            _ => String::new(),
        };
        late.push(Step::WriteChannels {
            space: name.clone(),
            account,
            writes: d.writes.clone(),
            changes: d.lines.clone(),
        });
    }
    // Members' acl records after the reload that revoked their older users ("revoke first,
    // then delete the record"), and after provisioning made the bucket.
    for (name, m) in &diff.members {
        if m.writes.is_empty() {
            continue;
        }
        let account = match inv.spaces.get(name) {
            Some(s) if !diff.adds.contains_key(name) => s.account_pub.clone(),
            _ => String::new(),
        };
        late.push(Step::WriteAcl {
            space: name.clone(),
            account,
            writes: m.writes.clone(),
            changes: m.lines(),
        });
    }
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
