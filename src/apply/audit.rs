//! The audit records of one apply: mandatory events before the work they announce (so the
//! audit fails closed), and the transitions each step completed.

use super::Outcome;
use crate::audit::{Actor, Counts, Event, Generations, Record as AuditRecord};
use crate::error::Result;
use crate::model::{SpaceName, SpaceState};
use crate::plan::{Plan, Step, Transition};
use crate::store::Root;
use crate::store::audit as store_audit;

/// Writes the audit records of one apply.
pub struct Auditor<'a> {
    pub root: &'a Root,
    pub actor: Actor,
    pub plan_digest: String,
    pub before: u64,
    /// Each space's last audited event, read from the log once per apply (then kept current
    /// by [`Auditor::write`]): a boot provisioning thousands of spaces asks for each.
    pub last_events: std::cell::RefCell<Option<std::collections::HashMap<SpaceName, Event>>>,
    /// While [`Auditor::after_step_owing`] runs: the records made, written after all are made.
    pub buffer: std::cell::RefCell<Option<Vec<AuditRecord>>>,
    /// The (event, space) of each owed record this apply wrote late: a step the plan runs again
    /// (a journaled removal's reap, a committed purge) makes the same record, which is then
    /// not written a second time.
    pub late: std::cell::RefCell<std::collections::HashSet<(Event, Option<SpaceName>)>>,
}

impl Auditor<'_> {
    /// `relocation.verified` for a removal that ends a recorded move, before its commit point.
    fn relocation_verified(&self, plan: &Plan, space: &SpaceName) -> Result<()> {
        match super::relocation_of(plan, space) {
            Some(digest) => self.write(
                Event::RelocationVerified,
                Some(space),
                None,
                &format!(
                    "the destination's receipt {digest} names the artifact this root exported, with every stream's messages and last sequence: the removal may go on"
                ),
                None,
            ),
            None => Ok(()),
        }
    }

    pub fn write(
        &self,
        event: Event,
        space: Option<&SpaceName>,
        after: Option<u64>,
        outcome: &str,
        counts: Option<Counts>,
    ) -> Result<()> {
        // A step failure is not a transition: an add whose provisioning failed is still
        // unfinished (`space.provisioning` stays its last transition).
        if self.late.borrow_mut().remove(&(event, space.cloned())) {
            return Ok(());
        }
        if event != Event::SpaceStepFailed
            && let (Some(space), Some(last)) = (space, self.last_events.borrow_mut().as_mut())
        {
            last.insert(space.clone(), event);
        }
        let record = AuditRecord {
            time: crate::clock::timestamp(),
            event,
            space: space.cloned(),
            actor: self.actor.clone(),
            generation: Generations {
                before: self.before,
                after,
            },
            plan_digest: self.plan_digest.clone(),
            outcome: outcome.to_string(),
            counts,
        };
        match self.buffer.borrow_mut().as_mut() {
            Some(buffer) => {
                buffer.push(record);
                Ok(())
            }
            None => store_audit::append(self.root, &record),
        }
    }

    /// Whether the last audit record of `space` is `space.provisioning` (an add never finished).
    fn add_unfinished(&self, space: &SpaceName) -> Result<bool> {
        let mut last = self.last_events.borrow_mut();
        if last.is_none() {
            let mut events = std::collections::HashMap::new();
            for r in store_audit::read(self.root)? {
                if let Some(space) = r.space
                    && r.event != Event::SpaceStepFailed
                {
                    events.insert(space, r.event);
                }
            }
            *last = Some(events);
        }
        Ok(last
            .as_ref()
            .and_then(|l| l.get(space))
            .is_some_and(|e| *e == Event::SpaceProvisioning))
    }

    /// Mandatory events written before the step's work (a removal's before its commit point).
    pub fn before_step(&self, step: &Step, plan: &Plan) -> Result<()> {
        match step {
            // The fence passes the commit point of each removal it fences.
            Step::Fence { spaces, .. } => {
                for f in spaces {
                    let uncommitted = plan.steps.iter().find_map(|s| match s {
                        Step::DeleteStreams {
                            space,
                            committed: false,
                            blast,
                            ..
                        } if *space == f.space => Some(blast),
                        _ => None,
                    });
                    if uncommitted.is_some() {
                        self.relocation_verified(plan, &f.space)?;
                        self.write(
                            Event::SpaceRemovalStarted,
                            Some(&f.space),
                            None,
                            "fencing it (no connection, every user revoked), then deleting its streams and buckets",
                            Some(Counts::of(&change_blast(plan, &f.space))),
                        )?;
                    }
                }
                Ok(())
            }
            Step::DeleteStreams {
                space,
                committed: false,
                fenced: false,
                ..
            } => {
                self.relocation_verified(plan, space)?;
                self.write(
                    Event::SpaceRemovalStarted,
                    Some(space),
                    None,
                    "deleting its streams and buckets",
                    Some(Counts::of(&change_blast(plan, space))),
                )
            }
            Step::PurgeStreams {
                space,
                committed: false,
                blast,
                ..
            } => self.write(
                Event::SpacePurgeStarted,
                Some(space),
                None,
                "emptying its streams and buckets",
                Some(Counts::of(blast)),
            ),
            Step::AddAccount { space, .. } => self.write(
                Event::SpaceProvisioning,
                Some(space),
                None,
                "minting its account",
                None,
            ),
            _ => Ok(()),
        }
    }

    /// [`Auditor::after_step`], its records made first and then written: when one cannot be
    /// written, the error comes with it and every record after it (what the apply owes).
    pub fn after_step_owing(
        &self,
        step: &Step,
        plan: &Plan,
        running: bool,
        outcome: &Outcome,
    ) -> std::result::Result<(), (crate::error::Error, Vec<AuditRecord>)> {
        *self.buffer.borrow_mut() = Some(Vec::new());
        let made = self.after_step(step, plan, running, outcome);
        let records = self.buffer.borrow_mut().take().unwrap_or_default();
        made.map_err(|e| (e, Vec::new()))?;
        for (i, record) in records.iter().enumerate() {
            if let Err(e) = store_audit::append(self.root, record) {
                return Err((e, records[i..].to_vec()));
            }
        }
        Ok(())
    }

    /// The transitions a promotion put in force: each re-issued account's (suspended, resumed,
    /// limits changed, users revoked), each archive and return, a move ended by serving the
    /// space again, and, with the broker stopped, each add.
    fn after_promotion(
        &self,
        plan: &Plan,
        running: bool,
        outcome: &Outcome,
        after: Option<u64>,
    ) -> Result<()> {
        for s in &plan.steps {
            if let Step::ReissueAccount {
                space,
                transition,
                changes,
                blast,
                ..
            } = s
                // A return from an archive is audited as such, below.
                && !plan.steps.iter().any(|a| {
                    matches!(a, Step::RecordArchive { space: a, .. } if a == space)
                })
            {
                let event = match transition {
                    Transition::Suspend => Event::SpaceSuspended,
                    Transition::Resume => Event::SpaceResumed,
                    Transition::Limits => Event::SpaceLimitsChanged,
                    Transition::Revoke => Event::UsersRevoked,
                };
                let mut what: Vec<String> = changes
                    .iter()
                    .map(|c| format!("{}: {} -> {}", c.field, c.from, c.to))
                    .collect();
                // A suspension's reason, as the plan records it (the record's own
                // time and actor are this audit record's).
                if *transition == Transition::Suspend
                    && let Some(reason) = suspend_reason(plan, space)
                {
                    what.push(format!("reason: {reason}"));
                }
                let counts = Counts {
                    connections: blast.connections_dropped,
                    ..Counts::default()
                };
                self.write(event, Some(space), after, &what.join("; "), Some(counts))?;
            }
        }
        for space in &outcome.relocations_ended {
            self.write(
                Event::RelocationFailed,
                Some(space),
                after,
                "ended: the space is served again (resumed, or brought back from its archive) after its export, so the artifact no longer holds it all; a move needs a new fence and export, and its removal needs no receipt now",
                None,
            )?;
        }
        for s in &plan.steps {
            if let Step::RecordArchive {
                space, archived, ..
            } = s
            {
                // The space's whole change: its fence's evictions included.
                let blast = change_blast(plan, space);
                let (event, what) = if *archived {
                    (
                        Event::SpaceArchived,
                        format!(
                            "archived: its account left the config; {}",
                            blast.describe()
                        ),
                    )
                } else {
                    (
                        Event::SpaceUnarchived,
                        "brought back: its account is loaded again with the data kept on disk"
                            .to_string(),
                    )
                };
                let kept = blast.kept_on_disk;
                let counts = Counts {
                    streams: kept.and_then(|k| k.streams).unwrap_or(0),
                    messages: kept.and_then(|k| k.messages),
                    bytes: kept.and_then(|k| k.bytes).unwrap_or(0),
                    connections: blast.connections_dropped,
                };
                self.write(event, Some(space), after, &what, Some(counts))?;
            }
        }
        if !running {
            for space in added(plan) {
                self.write(
                    Event::SpaceAdded,
                    Some(space),
                    after,
                    "added; its streams are provisioned at the next `cotal up`",
                    None,
                )?;
            }
        }
        Ok(())
    }

    /// The records an interrupted apply owes, written late, and the `space.added` of each add
    /// it made that its audit ends without (its last record `space.provisioning`) and that this
    /// plan does not make again.
    fn after_finishing(
        &self,
        plan: &Plan,
        adding: &[SpaceName],
        owed: &[AuditRecord],
    ) -> Result<()> {
        const LATE: &str = " (recorded by the apply that finished the interrupted one)";
        // What the log says of each space is read before the late records go in, so
        // the records below keep it current.
        if let Some(space) = adding.first() {
            self.add_unfinished(space)?;
        }
        for record in owed {
            let mut late = record.clone();
            if !late.outcome.ends_with(LATE) {
                late.outcome.push_str(LATE);
            }
            self.late
                .borrow_mut()
                .insert((late.event, late.space.clone()));
            if let (Some(space), Some(last)) = (&late.space, self.last_events.borrow_mut().as_mut())
            {
                last.insert(space.clone(), late.event);
            }
            match self.buffer.borrow_mut().as_mut() {
                Some(buffer) => buffer.push(late),
                None => store_audit::append(self.root, &late)?,
            }
        }
        for space in adding {
            // A `space.added` owed above is written already.
            if owed
                .iter()
                .any(|r| r.event == Event::SpaceAdded && r.space.as_ref() == Some(space))
            {
                continue;
            }
            let again = plan.steps.iter().any(|s| {
                matches!(s, Step::AddAccount { space: s, .. } | Step::Provision { space: s, .. } if s == space)
            });
            let recorded = std::fs::symlink_metadata(self.root.account_record(space)).is_ok();
            if !again && recorded && self.add_unfinished(space)? {
                self.write(
                    Event::SpaceAdded,
                    Some(space),
                    None,
                    "recorded by the apply that finished the interrupted one: the add took effect, its audit record could not be written then",
                    None,
                )?;
            }
        }
        Ok(())
    }

    /// A removal's end (`space.removed`, with its counts and what was reaped), and the end of
    /// the move it completes.
    fn after_reap(
        &self,
        plan: &Plan,
        outcome: &Outcome,
        (space, account): (&SpaceName, &str),
        after: Option<u64>,
    ) -> Result<()> {
        let counts = plan.steps.iter().find_map(|s| match s {
            Step::DeleteStreams {
                space: sp,
                account: a,
                ..
            } if sp == space && a == account => Some(Counts::of(&change_blast(plan, space))),
            _ => None,
        });
        let reaped = outcome
            .reaped
            .iter()
            .find(|(s, _)| s == space)
            .map(|(_, removed)| removed.join(", "))
            .filter(|r| !r.is_empty());
        let mut text = "removed".to_string();
        if let Some(reaped) = reaped {
            text.push_str(&format!("; reaped: {reaped}"));
        }
        if outcome.reap_failures.iter().any(|f| &f.space == space) {
            text.push_str("; some local material could not be reaped");
        }
        self.write(Event::SpaceRemoved, Some(space), after, &text, counts)?;
        if let Some(digest) = super::relocation_of(plan, space) {
            self.write(
                Event::RelocationCompleted,
                Some(space),
                after,
                &format!(
                    "moved: the destination verified the artifact (receipt {digest}), and the space is removed from this broker"
                ),
                None,
            )?;
        }
        Ok(())
    }

    /// Events of transitions a step completed.
    pub fn after_step(
        &self,
        step: &Step,
        plan: &Plan,
        running: bool,
        outcome: &Outcome,
    ) -> Result<()> {
        let after = outcome.generation.map(|(_, to)| to);
        match step {
            Step::Fence { spaces, .. } => {
                let (from, to) = outcome.fenced.unwrap_or_default();
                // An archive's fence is audited with the archive, at the final promotion.
                for f in spaces.iter().filter(|f| !f.archive) {
                    let connections = change_blast(plan, &f.space).connections_dropped;
                    self.write(
                        Event::SpaceFenced,
                        Some(&f.space),
                        Some(to),
                        &format!(
                            "fenced: its account is loaded with no connection and every user revoked, confirmed by the broker (generation {from} -> {to}); its data is deleted next"
                        ),
                        Some(Counts {
                            connections,
                            ..Counts::default()
                        }),
                    )?;
                }
                Ok(())
            }
            Step::RecordProtection { space, protect } => self.write(
                Event::SpaceProtected,
                Some(space),
                after,
                &format!("protect = {protect}"),
                None,
            ),
            // A suspension recorded without a re-issue in this plan (a reason changed, a space
            // added suspended, one an older cotal suspended): its own record, with the reason.
            // One made by a re-issue is audited with the promotion.
            Step::RecordSuspension {
                space,
                suspended: true,
                reason,
                backfill,
                ..
            } if !suspended_by_reissue(plan, space) => self.write(
                Event::SpaceSuspended,
                Some(space),
                after,
                &format!(
                    "suspension recorded{}{}",
                    match reason {
                        Some(r) => format!("; reason: {r}"),
                        None => "; no reason given".into(),
                    },
                    if *backfill {
                        " (suspended earlier: time and operator unknown)"
                    } else {
                        ""
                    }
                ),
                None,
            ),
            // A re-issued account takes effect when the broker loads the promoted config.
            Step::PromoteConfig { .. } => self.after_promotion(plan, running, outcome, after),
            // An add the interrupted apply made but could not audit (its last record is
            // `space.provisioning`) and that this plan does not make again: it took effect.
            Step::FinishJournal { adding, owed, .. } => self.after_finishing(plan, adding, owed),
            // Added archived: its record is all it gets, no promotion loads it.
            Step::AddAccount { space, spec, .. } if spec.state == SpaceState::Archived => self.write(
                Event::SpaceAdded,
                Some(space),
                after,
                "added archived: its account is minted and recorded, never loaded until it is brought back",
                None,
            ),
            Step::Provision { space, .. } if added(plan).contains(&space) => self.write(
                Event::SpaceAdded,
                Some(space),
                after,
                "added, loaded and provisioned",
                None,
            ),
            // A re-run finishing an interrupted add completes it: the audit's last word on the
            // space is still `space.provisioning`.
            Step::Provision { space, .. } if self.add_unfinished(space)? => self.write(
                Event::SpaceAdded,
                Some(space),
                after,
                "provisioning finished by a re-run",
                None,
            ),
            Step::PurgeStreams { space, .. } => {
                let purged = outcome.purged.iter().find(|p| &p.space == space);
                let counts = purged.map(|p| Counts {
                    streams: p.streams as u64,
                    messages: Some(p.messages),
                    bytes: p.bytes.unwrap_or(0),
                    connections: None,
                });
                self.write(
                    Event::SpacePurged,
                    Some(space),
                    after,
                    &match purged {
                        Some(p) => format!(
                            "emptied {} stream(s) and bucket(s): {} message(s) purged{}; their configs kept",
                            p.streams,
                            p.messages,
                            if p.bytes.is_none() {
                                " (bytes not counted: the purge committed in an earlier run)"
                            } else {
                                ""
                            }
                        ),
                        None => "emptied".into(),
                    },
                    counts,
                )
            }
            Step::WriteChannels { space, changes, .. } => self.write(
                Event::ChannelsWritten,
                Some(space),
                after,
                &changes.join("; "),
                None,
            ),
            Step::WriteAcl { space, changes, .. } => self.write(
                Event::MembersWritten,
                Some(space),
                after,
                &changes.join("; "),
                None,
            ),
            Step::Reap { space, account } => self.after_reap(plan, outcome, (space, account), after),
            _ => Ok(()),
        }
    }
}

/// The blast radius of `space`'s whole change in `plan` (a removal's: what its fence evicts
/// and what its deletion destroys; an archive's: what its fence evicts and what it keeps): the
/// steps' own blast radii each say only what that step does.
fn change_blast(plan: &Plan, space: &SpaceName) -> crate::plan::Blast {
    plan.changes
        .iter()
        .find(|c| &c.space == space)
        .map(|c| c.blast.clone())
        .unwrap_or_default()
}

/// Spaces the plan adds.
fn added(plan: &Plan) -> Vec<&SpaceName> {
    plan.steps
        .iter()
        .filter_map(|s| match s {
            Step::AddAccount { space, spec, .. } if spec.state != SpaceState::Archived => {
                Some(space)
            }
            _ => None,
        })
        .collect()
}

/// The reason `plan` records for `space`'s suspension, if it gives one.
fn suspend_reason<'p>(plan: &'p Plan, space: &SpaceName) -> Option<&'p str> {
    plan.steps.iter().find_map(|s| match s {
        Step::RecordSuspension {
            space: s,
            suspended: true,
            reason: Some(reason),
            ..
        } if s == space => Some(reason.as_str()),
        _ => None,
    })
}

/// Whether `plan` suspends `space` by re-issuing its account (audited with the promotion).
fn suspended_by_reissue(plan: &Plan, space: &SpaceName) -> bool {
    plan.steps.iter().any(|s| {
        matches!(s, Step::ReissueAccount { space: s, transition: Transition::Suspend, .. } if s == space)
    })
}
