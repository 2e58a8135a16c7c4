//! Which spaces the plan purges (empties every stream and bucket of, keeping the tenant): the
//! purges an open journal names past their commit point (always finished), and those this run
//! asks for (`cotal space purge`), each refused unless the space can be emptied now.
//!
//! Invariants: a requested purge is planned only for a space on the root, declared active,
//! served (not suspended), not protected, not being removed and with no stream locked against
//! purges, with the broker running; a committed one is finished only through the running
//! broker and only for the account the journal pins. A refusal names every space refused and
//! changes nothing.

use super::removals::Removals;
use crate::desired::Desired;
use crate::diagnostic::Diagnostic;
use crate::model::{SpaceName, SpaceState};
use crate::observed::{JournalState, Observed};
use std::collections::{BTreeMap, BTreeSet};

/// One purge the plan performs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purge {
    pub account: String,
    /// Its commit point passed in an interrupted apply: it is finished whatever this run asks.
    pub committed: bool,
}

/// The plan's purges by space name.
pub type Purges = BTreeMap<SpaceName, Purge>;

/// Collect the purges, refusing a requested one that cannot run now.
pub fn collect(
    desired: &Desired,
    observed: &Observed,
    requested: &BTreeSet<SpaceName>,
    removals: &Removals,
) -> Result<Purges, Diagnostic> {
    let mut refused = Diagnostic::default().blast("none, nothing was emptied.");
    let mut say = |(what, next): Refused| {
        if !refused.what.is_empty() {
            refused.what.push('\n');
        }
        refused.what.push_str(&what);
        refused.next.push(next);
    };
    let (mut out, journal_refusals) = committed(observed, removals);
    let mut tenants = Vec::new();
    for (space, why) in journal_refusals {
        tenants.push(space);
        say(why);
    }
    let finishing: BTreeSet<SpaceName> = out.keys().cloned().collect();
    for name in requested.iter().filter(|n| !finishing.contains(*n)) {
        match requested_purge(desired, observed, removals, name) {
            Ok(purge) => {
                out.insert(name.clone(), purge);
            }
            Err(why) => say(why),
        }
    }
    if refused.what.is_empty() {
        Ok(out)
    } else {
        tenants.extend(requested.iter().cloned());
        tenants.sort();
        tenants.dedup();
        Err(refused.tenants(tenants))
    }
}

/// Why a purge cannot run now: what, and what to do next.
type Refused = (String, String);

/// The purges an open journal committed, to finish; and each that cannot be finished now,
/// with why (what, next).
fn committed(observed: &Observed, removals: &Removals) -> (Purges, Vec<(SpaceName, Refused)>) {
    let inv = &observed.inventory;
    let mut out = Purges::new();
    let mut refused = Vec::new();
    let JournalState::Valid(j) = &observed.journal else {
        return (out, refused);
    };
    for p in j.purges.iter().filter(|p| p.committed) {
        // A space this plan removes loses its data with its account; one whose record
        // is gone has nothing left to empty.
        let Some(space) = inv.spaces.get(&p.space) else {
            continue;
        };
        if removals.leaving(inv, &p.space) {
            continue;
        }
        if space.account_pub != p.account {
            refused.push((
                p.space.clone(),
                (
                    format!(
                        "the open journal empties account {} for {}, but the record of {} holds account {}.",
                        p.account,
                        p.space.quoted(),
                        p.space.quoted(),
                        space.account_pub
                    ),
                    "restore .cotal/auth/ from a backup, or see docs/design/reliability.md".into(),
                ),
            ));
        } else if !observed.is_running() {
            refused.push((
                p.space.clone(),
                (
                    format!(
                        "an interrupted purge of {} is past its commit point, and it is finished through the running broker, which holds the streams.",
                        p.space.quoted()
                    ),
                    "`cotal up` (it starts the broker for the open journal), then `cotal apply`"
                        .into(),
                ),
            ));
        } else {
            out.insert(
                p.space.clone(),
                Purge {
                    account: p.account.clone(),
                    committed: true,
                },
            );
        }
    }
    (out, refused)
}

/// The purge of `name` the operator asked for, or why it cannot run now (what, next).
fn requested_purge(
    desired: &Desired,
    observed: &Observed,
    removals: &Removals,
    name: &SpaceName,
) -> Result<Purge, Refused> {
    let inv = &observed.inventory;
    if removals.leaving(inv, name) {
        return Err((
            format!(
                "{} is being removed: its removal deletes its data.",
                name.quoted()
            ),
            "run `cotal apply` to finish the removal".into(),
        ));
    }
    let (Some(space), Some(spec)) = (inv.spaces.get(name), desired.spec(name)) else {
        return Err((
            format!(
                "{} is not an applied space of this root: there is nothing to purge.",
                name.quoted()
            ),
            "`cotal space list` shows the spaces".into(),
        ));
    };
    if space.protect_recorded || spec.protect {
        return Err((
            format!(
                "{} is protected (protect = true); its purge would have this blast radius: {}.",
                name.quoted(),
                super::blast::purge(name, &space.usage.streams).describe()
            ),
            format!(
                "first set `protect = false` for {} and run `cotal apply`, then purge it",
                name.quoted()
            ),
        ));
    }
    if spec.state == SpaceState::Archived || space.archived.is_some() {
        return Err((
            format!(
                "{} is archived: its account is not loaded, so no broker can empty its streams.",
                name.quoted()
            ),
            format!(
                "bring it back first (state = \"active\" for {} in cotal.toml, then `cotal apply`), then purge it; to drop its data for good, remove it",
                name.quoted()
            ),
        ));
    }
    if spec.state != SpaceState::Active || space.limits.is_suspended() {
        return Err((
            format!(
                "{} is suspended: cotal empties a space through the broker as one of its users, and a suspended space admits none.",
                name.quoted()
            ),
            format!(
                "resume it first (`cotal space resume {}`), then purge it",
                name.as_str()
            ),
        ));
    }
    if let Some((stream, _)) = space.stream_drift.iter().find(|(_, fields)| {
        fields
            .iter()
            .any(|f| f.as_str() == "sealed" || f.as_str() == "deny_purge")
    }) {
        return Err((
            format!(
                "{stream} of {} was sealed or set to deny purges by a user of the space: nats-server lets no one empty it.",
                name.quoted()
            ),
            "delete that stream with an admin of the space (its messages go with it); `cotal apply` creates it again, then purge".into(),
        ));
    }
    if !observed.is_running() {
        return Err((
            format!(
                "the broker is stopped: {} is emptied through the running broker, which holds its streams.",
                name.quoted()
            ),
            format!("`cotal up`, then `cotal space purge {}`", name.as_str()),
        ));
    }
    Ok(Purge {
        account: space.account_pub.clone(),
        committed: false,
    })
}

/// What the plan says of the purges an interrupted apply had not started (not past their commit
/// point): nothing of them was emptied, and only a new `cotal space purge` empties the space.
pub fn not_started(observed: &Observed, purges: &Purges) -> Vec<String> {
    let JournalState::Valid(j) = &observed.journal else {
        return Vec::new();
    };
    j.purges
        .iter()
        .filter(|p| !p.committed && !purges.contains_key(&p.space))
        .map(|p| {
            format!(
                "the interrupted apply had not started emptying {}: nothing of it was purged, and this plan does not purge it (`cotal space purge {}` does)",
                p.space.quoted(),
                p.space.as_str()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SpaceSpec;
    use crate::observed::BrokerProcess;
    use crate::testing::{name, observed, space};

    fn desired(toml: &str) -> Desired {
        crate::desired::parse(&format!("version = 1\n{toml}"), "f").unwrap()
    }

    #[test]
    fn a_purge_is_planned_only_for_a_served_unprotected_space_of_a_running_broker() {
        let spec = SpaceSpec::default();
        let mut o = observed(&[
            ("design", space("AD", &spec)),
            ("ops", space("AO", &spec)),
            ("paused", space("AP", &spec)),
        ]);
        o.nodes[0].process = BrokerProcess::Running { pid: 1 };
        let d = desired(
            "[spaces.design]\n[spaces.ops]\nprotect = true\n[spaces.paused]\nstate = \"suspended\"\n",
        );
        let none = Removals::default();
        let asked = |n: &str| BTreeSet::from([name(n)]);
        let got = collect(&d, &o, &asked("design"), &none).unwrap();
        assert_eq!(
            got[&name("design")],
            Purge {
                account: "AD".into(),
                committed: false
            }
        );
        let refused = collect(&d, &o, &asked("ops"), &none).unwrap_err();
        assert!(refused.what.contains("\"ops\" is protected"), "{refused:?}");
        assert_eq!(refused.tenants, [name("ops")]);
        let refused = collect(&d, &o, &asked("paused"), &none).unwrap_err();
        assert!(refused.what.contains("is suspended"), "{refused:?}");
        let refused = collect(&d, &o, &asked("nope"), &none).unwrap_err();
        assert!(
            refused.what.contains("\"nope\" is not an applied space"),
            "{refused:?}"
        );
        let mut locked = o.clone();
        locked
            .inventory
            .spaces
            .get_mut(&name("design"))
            .unwrap()
            .stream_drift
            .push(("CHAT_design".into(), vec!["deny_purge".into()]));
        let refused = collect(&d, &locked, &asked("design"), &none).unwrap_err();
        assert!(refused.what.contains("CHAT_design"), "{refused:?}");
        let leaving =
            desired("[spaces.ops]\nprotect = true\n[spaces.paused]\nstate = \"suspended\"\n");
        let removals = super::super::removals::collect(&leaving, &o);
        let refused = collect(&leaving, &o, &asked("design"), &removals).unwrap_err();
        assert!(refused.what.contains("is being removed"), "{refused:?}");
        o.nodes[0].process = BrokerProcess::Stopped;
        let refused = collect(&d, &o, &asked("design"), &none).unwrap_err();
        assert!(
            refused.what.contains("the broker is stopped"),
            "{refused:?}"
        );
    }

    #[test]
    fn a_purge_past_its_commit_point_is_finished_unasked_and_one_before_it_is_dropped() {
        let spec = SpaceSpec::default();
        let mut o = observed(&[("design", space("AD", &spec)), ("ops", space("AO", &spec))]);
        let JournalState::Valid(mut j) = crate::testing::journal("other", "AX", false) else {
            unreachable!()
        };
        j.removals.clear();
        for (space, account, committed) in [("design", "AD", true), ("ops", "AO", false)] {
            j.purges.push(crate::observed::JournaledPurge {
                space: name(space),
                account: account.into(),
                committed,
                upto: Default::default(),
            });
        }
        o.journal = JournalState::Valid(j);
        let d = desired("[spaces.design]\n[spaces.ops]\n");
        o.nodes[0].process = BrokerProcess::Running { pid: 1 };
        let got = collect(&d, &o, &BTreeSet::new(), &Removals::default()).unwrap();
        assert_eq!(got.keys().collect::<Vec<_>>(), [&name("design")]);
        assert!(got[&name("design")].committed);
        // Finished through the broker only: stopped, the plan says to start it.
        o.nodes[0].process = BrokerProcess::Stopped;
        let refused = collect(&d, &o, &BTreeSet::new(), &Removals::default()).unwrap_err();
        assert!(
            refused.what.contains("past its commit point"),
            "{refused:?}"
        );
        assert_eq!(refused.tenants, [name("design")]);
    }
}
