//! The executor: runs a [`Plan`]'s steps in order under the root's lock, with one exhaustive
//! `match` over [`Step`], journaling each step's start and end.
//!
//! Invariants:
//! - Nothing before a removal's commit point (its `DeleteStreams`) destroys anything; every step
//!   is idempotent, so re-running apply after a crash finishes the work.
//! - The journal is opened before the first step and closed after the last. A failure after a
//!   commit point leaves it open and returns [`Error::Interrupted`] (exit 6); a failure before any
//!   commit point closes it (the re-plan derives the remaining work) and returns the failure.
//! - Promotion is compare-and-set on the generation record and renders from the inventory as
//!   re-read from disk, never from a remembered list.
//! - Reap failures are reported, never thrown: they come after a commit point.

use crate::audit::{Actor, Counts, Event, Generations, Record as AuditRecord};
use crate::broker::{Broker, Expectation, preflight};
use crate::desired::Desired;
use crate::digest;
use crate::error::{Error, Result};
use crate::fault;
use crate::mint;
use crate::model::SpaceName;
use crate::observed::{
    GenerationRecord, GenerationState, Journal, JournalState, JournaledRemoval, JournaledStep,
    Observed,
};
use crate::permissions;
use crate::plan::{self, Plan, Step};
use crate::render;
use crate::store::audit as store_audit;
use crate::store::broker_record::BrokerRecord;
use crate::store::{
    Root, account_record, broker_record, generation, inventory, jetstream_dir, journal,
    server_conf, space_dir,
};

/// What an apply did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub generation: Option<(u64, u64)>,
    pub reap_failures: Vec<String>,
    pub steps_done: usize,
}

/// Everything the executor needs besides the plan.
pub struct Context<'a> {
    pub root: &'a Root,
    pub desired: &'a Desired,
    pub observed: &'a Observed,
    /// Who is applying, for the journal and the audit.
    pub actor: Actor,
}

/// Execute `plan`. The caller holds the lock and has confirmed.
pub fn execute(ctx: &Context, plan: &Plan, broker: &mut dyn Broker) -> Result<Outcome> {
    let record = load_broker(ctx.root)?;
    let audit = Auditor {
        root: ctx.root,
        actor: ctx.actor.clone(),
        plan_digest: plan.steps_digest(),
        before: ctx.observed.generation.generation(),
    };
    // Fail closed: nothing is changed before the apply is on the record.
    audit.write(Event::ApplyStarted, None, None, "started", None)?;
    let mut outcome = Outcome::default();
    match run(ctx, plan, broker, &record, &audit, &mut outcome) {
        Ok(()) => Ok(outcome),
        Err(e) => {
            let event = if matches!(e, Error::RolledBack(_)) {
                Event::ApplyRolledBack
            } else {
                Event::ApplyFailed
            };
            // Best effort: the failure itself may be the audit log.
            let _ = audit.write(event, None, None, &first_line(&e.to_string()), None);
            Err(e)
        }
    }
}

fn run(
    ctx: &Context,
    plan: &Plan,
    broker: &mut dyn Broker,
    record: &BrokerRecord,
    audit: &Auditor,
    outcome: &mut Outcome,
) -> Result<()> {
    let mut journal = Journal {
        op: "apply".into(),
        plan_digest: audit.plan_digest.clone(),
        started_at: timestamp(),
        pid: std::process::id(),
        host: ctx.actor.host.clone(),
        removals: plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::DeleteStreams {
                    space,
                    account,
                    committed,
                    ..
                } => Some(JournaledRemoval {
                    space: space.clone(),
                    account: account.clone(),
                    committed: *committed,
                }),
                _ => None,
            })
            .collect(),
        steps: Vec::new(),
    };
    journal::save(ctx.root, &journal)?;
    tracing::info!(steps = plan.steps.len(), digest = %journal.plan_digest, "journal opened");
    fault::point("after-journal-open");

    let mut committed = journal.removals.iter().any(|r| r.committed);
    for step in &plan.steps {
        journal.steps.push(JournaledStep {
            step: step.title(),
            started_at: timestamp(),
            ended_at: None,
        });
        journal::save(ctx.root, &journal)?;
        tracing::info!(step = %step.title(), "step started");
        let result = audit
            .before_step(step)
            .and_then(|_| run_step(ctx, record, step, broker, &mut journal, outcome, plan))
            .and_then(|_| audit.after_step(step, plan, broker.running(), outcome));
        committed |= journal.removals.iter().any(|r| r.committed);
        if let Err(e) = result {
            return Err(fail(ctx.root, e, committed, step));
        }
        if let Some(last) = journal.steps.last_mut() {
            last.ended_at = Some(timestamp());
        }
        journal::save(ctx.root, &journal)?;
        outcome.steps_done += 1;
    }
    let after = outcome.generation.map(|(_, to)| to);
    audit
        .write(Event::ApplyCompleted, None, after, "completed", None)
        .map_err(|e| {
            fail(
                ctx.root,
                e,
                committed,
                plan.steps.last().expect("a plan that ran has steps"),
            )
        })?;
    fault::point("before-journal-close");
    journal::close(ctx.root)?;
    tracing::info!("journal closed");
    Ok(())
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

/// Writes the audit records of one apply.
struct Auditor<'a> {
    root: &'a Root,
    actor: Actor,
    plan_digest: String,
    before: u64,
}

impl Auditor<'_> {
    fn write(
        &self,
        event: Event,
        space: Option<&SpaceName>,
        after: Option<u64>,
        outcome: &str,
        counts: Option<Counts>,
    ) -> Result<()> {
        store_audit::append(
            self.root,
            &AuditRecord {
                time: timestamp(),
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
            },
        )
    }

    /// Whether the last audit record of `space` is `space.provisioning` (an add never finished).
    fn add_unfinished(&self, space: &SpaceName) -> Result<bool> {
        Ok(store_audit::read(self.root)?
            .iter()
            .rev()
            .find(|r| r.space.as_ref() == Some(space))
            .is_some_and(|r| r.event == Event::SpaceProvisioning))
    }

    /// Mandatory events written before the step's work (a removal's before its commit point).
    fn before_step(&self, step: &Step) -> Result<()> {
        match step {
            Step::DeleteStreams {
                space,
                committed: false,
                blast,
                ..
            } => self.write(
                Event::SpaceRemovalStarted,
                Some(space),
                None,
                "deleting its streams and buckets",
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

    /// Events of transitions a step completed.
    fn after_step(&self, step: &Step, plan: &Plan, running: bool, outcome: &Outcome) -> Result<()> {
        let after = outcome.generation.map(|(_, to)| to);
        match step {
            Step::RecordProtection { space, protect } => self.write(
                Event::SpaceProtected,
                Some(space),
                after,
                &format!("protect = {protect}"),
                None,
            ),
            // A re-issued account takes effect when the broker loads the promoted config.
            Step::PromoteConfig { .. } => {
                for s in &plan.steps {
                    if let Step::ReissueAccount {
                        space,
                        changes,
                        blast,
                        ..
                    } = s
                    {
                        let event = match changes
                            .iter()
                            .find(|c| c.field == "state")
                            .map(|c| c.to.as_str())
                        {
                            Some("suspended") => Event::SpaceSuspended,
                            Some("active") => Event::SpaceResumed,
                            _ => Event::SpaceLimitsChanged,
                        };
                        let what: Vec<String> = changes
                            .iter()
                            .map(|c| format!("{}: {} -> {}", c.field, c.from, c.to))
                            .collect();
                        let counts = Counts {
                            connections: blast.connections_dropped,
                            ..Counts::default()
                        };
                        self.write(event, Some(space), after, &what.join("; "), Some(counts))?;
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
            Step::Reap { space, account } => {
                let counts = plan.steps.iter().find_map(|s| match s {
                    Step::DeleteStreams {
                        space: sp,
                        account: a,
                        blast,
                        ..
                    } if sp == space && a == account => Some(Counts::of(blast)),
                    _ => None,
                });
                let text = if outcome
                    .reap_failures
                    .iter()
                    .any(|f| f.contains(&plan::q(space)))
                {
                    "removed; some local material could not be reaped"
                } else {
                    "removed"
                };
                self.write(Event::SpaceRemoved, Some(space), after, text, counts)
            }
            _ => Ok(()),
        }
    }
}

/// Spaces the plan adds.
fn added(plan: &Plan) -> Vec<&SpaceName> {
    plan.steps
        .iter()
        .filter_map(|s| match s {
            Step::AddAccount { space, .. } => Some(space),
            _ => None,
        })
        .collect()
}

/// Turn a step failure into what the operator must know: before any commit point the journal is
/// closed and the failure returned as is; after one, the journal stays and apply must be re-run.
fn fail(root: &Root, e: Error, committed: bool, step: &Step) -> Error {
    if committed {
        Error::Interrupted(format!(
            "apply stopped at `{}` after a commit point: {e}\nthe journal stays open; fix the cause and re-run `cotal apply` to finish",
            step.title()
        ))
    } else {
        let _ = journal::close(root);
        e
    }
}

fn run_step(
    ctx: &Context,
    record: &BrokerRecord,
    step: &Step,
    broker: &mut dyn Broker,
    journal: &mut Journal,
    outcome: &mut Outcome,
    plan: &Plan,
) -> Result<()> {
    let root = ctx.root;
    match step {
        Step::FinishJournal { .. } => Ok(()),
        Step::DeleteStreams {
            space,
            account,
            committed,
            ..
        } => {
            // Past the commit point the streams are gone already, and after the reload the
            // account may no longer be loaded, so a running broker is not asked again (the
            // store folder is reaped later); a stopped broker's folder removal is idempotent.
            if *committed && broker.running() {
                return Ok(());
            }
            let teardown = if broker.running() {
                space_user(
                    root,
                    space,
                    account,
                    "cotal-teardown",
                    permissions::teardown(),
                )?
            } else {
                None
            };
            broker.delete_streams(space, account, &ctx.observed.store_dir, teardown.as_deref())?;
            fault::point("after-streams-deleted");
            if let Some(r) = journal
                .removals
                .iter_mut()
                .find(|r| &r.space == space && &r.account == account)
            {
                r.committed = true;
            }
            journal::save(root, journal)
        }
        Step::AddAccount { space, spec } => {
            let account = mint::account(record, space, spec).map_err(Error::Other)?;
            account_record::save(root, &account)?;
            fault::point("after-record-written");
            space_dir::save_lifecycle(
                root,
                space,
                &space_dir::Lifecycle {
                    account: account.account.public.clone(),
                    protect: spec.protect,
                },
            )?;
            write_sys_creds(root, record, space, &account.account.public)
        }
        Step::ReissueAccount {
            space,
            account,
            spec,
            ..
        } => {
            let current = account_record::load(root, space)?;
            if &current.account.public != account {
                return Err(Error::Other(format!(
                    "the record of {} changed under the lock (now account {})",
                    plan::q(space),
                    current.account.public
                )));
            }
            let updated = mint::reissue(record, &current, space, spec).map_err(Error::Other)?;
            account_record::save(root, &updated)?;
            fault::point("after-record-written");
            Ok(())
        }
        Step::WriteSysCreds { space } => {
            let current = account_record::load(root, space)?;
            write_sys_creds(root, record, space, &current.account.public)
        }
        Step::RecordProtection { space, protect } => {
            let current = account_record::load(root, space)?;
            space_dir::save_lifecycle(
                root,
                space,
                &space_dir::Lifecycle {
                    account: current.account.public,
                    protect: *protect,
                },
            )
        }
        Step::PromoteConfig {
            from_generation, ..
        } => {
            let (from, to) = promote(
                ctx,
                record,
                *from_generation,
                &journal.removals,
                plan,
                broker,
            )?;
            outcome.generation = Some((from, to));
            Ok(())
        }
        Step::Provision { space, .. } => {
            let current = account_record::load(root, space)?;
            let creds = space_user(
                root,
                space,
                &current.account.public,
                "cotal-provisioner",
                permissions::provisioner(),
            )?
            .ok_or_else(|| Error::Other(format!("the record of {} disappeared", plan::q(space))))?;
            let done = broker.provision(space, &creds)?;
            tracing::info!(space = %space, work = ?done, "provisioned");
            Ok(())
        }
        Step::Reap { space, account } => {
            reap(
                root,
                space,
                account,
                &ctx.observed.store_dir,
                broker.running(),
                outcome,
            );
            fault::point("after-reap");
            Ok(())
        }
    }
}

/// An ephemeral user of a space (in memory, short expiry), signed by its signing key. `None`
/// when the space's record no longer holds `account`.
fn space_user(
    root: &Root,
    space: &SpaceName,
    account: &str,
    name: &str,
    permissions: crate::jwt::Permissions,
) -> Result<Option<String>> {
    let record = match account_record::load(root, space) {
        Ok(r) if r.account.public == account => r,
        Ok(_) => return Ok(None),
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    };
    let (creds, _) = mint::user(
        account,
        &record.account.signing_seed,
        name,
        permissions,
        Some(permissions::EPHEMERAL),
    )
    .map_err(Error::Other)?;
    Ok(Some(creds))
}

/// Mint and write the space's $SYS pair (needs the retained system signing seed).
fn write_sys_creds(
    root: &Root,
    record: &BrokerRecord,
    space: &SpaceName,
    account: &str,
) -> Result<()> {
    let Some(sys_seed) = broker_record::load_sys_seed(root)? else {
        return Ok(());
    };
    let sys = &record.sys.public;
    let (observer, _) = mint::user(
        sys,
        &sys_seed,
        "membership-observer",
        permissions::membership_observer(account),
        None,
    )
    .map_err(Error::Other)?;
    let (evictor, _) = mint::user(
        sys,
        &sys_seed,
        "connection-evictor",
        permissions::connection_evictor(),
        None,
    )
    .map_err(Error::Other)?;
    space_dir::save_sys_creds(root, space, account, &observer, &evictor)
}

/// What the data plane must show after the reload: added and resumed spaces accept a fresh
/// user; removed and suspended ones refuse it.
fn expectations(
    root: &Root,
    plan: &Plan,
    removals: &[JournaledRemoval],
) -> Result<Vec<Expectation>> {
    let mut wanted: Vec<(&SpaceName, bool)> = Vec::new();
    for step in &plan.steps {
        match step {
            Step::AddAccount { space, spec } | Step::ReissueAccount { space, spec, .. } => {
                wanted.push((space, spec.state == crate::model::SpaceState::Active));
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (space, accept) in wanted {
        let record = account_record::load(root, space)?;
        if let Some(creds) = space_user(
            root,
            space,
            &record.account.public,
            "cotal-verifier",
            permissions::verifier(),
        )? {
            out.push(Expectation {
                space: space.clone(),
                accept,
                creds,
            });
        }
    }
    for r in removals {
        if let Some(creds) = space_user(
            root,
            &r.space,
            &r.account,
            "cotal-verifier",
            permissions::verifier(),
        )? {
            out.push(Expectation {
                space: r.space.clone(),
                accept: false,
                creds,
            });
        }
    }
    Ok(out)
}

/// Render from the inventory as it is on disk now (minus the journaled removals), promote by compare-and-set, reload and
/// confirm a running broker (restoring `.prev` when it does not confirm), then advance the
/// generation. Returns (from, to).
fn promote(
    ctx: &Context,
    record: &BrokerRecord,
    expected: u64,
    removals: &[JournaledRemoval],
    plan: &Plan,
    broker: &mut dyn Broker,
) -> Result<(u64, u64)> {
    let root = ctx.root;
    let trust = record.validate().map_err(Error::Other)?;
    let mut inv = inventory::read(root, &trust.operator_pub)?;
    // Spaces being removed keep their records until the reap, but leave the config now.
    inv.spaces.retain(|name, space| {
        !removals
            .iter()
            .any(|r| &r.space == name && r.account == space.account_pub)
    });
    if !inv.corrupt.is_empty() {
        return Err(Error::Refused(format!(
            "the inventory became uncertain during apply ({}: {}); an uncertain tenant list is not rendered.\nnext: find who changed .cotal/auth/ during the apply, then run `cotal plan`",
            inv.corrupt[0].file.display(),
            inv.corrupt[0].reason
        )));
    }
    let preloads = render::inventory_preloads(&inv.spaces);
    let nodes = plan::nodes(ctx.desired, ctx.observed);
    // One node today; each is rendered and pre-flighted before any is promoted.
    let mut rendered = Vec::with_capacity(nodes.len());
    for node in &nodes {
        let text = render::server_conf(&trust, &preloads, node).map_err(Error::Refused)?;
        let next = server_conf::write_next(root, &text)?;
        if let Err(e) = preflight::check(&next) {
            server_conf::discard_next(root)?;
            return Err(e);
        }
        rendered.push(text);
    }
    let digest = digest::preloads(&preloads);

    // Compare-and-set: the generation must still be the one this plan was made against.
    let current = match generation::load(root)? {
        GenerationState::Corrupt { file, reason } => {
            server_conf::discard_next(root)?;
            return Err(Error::Refused(format!(
                "{} became corrupt during apply: {reason}.\nnext: find who changed it during the apply; restore or delete it, then run `cotal plan`",
                file.display()
            )));
        }
        other => other.generation(),
    };
    if current != expected {
        server_conf::discard_next(root)?;
        return Err(Error::Refused(format!(
            "the generation moved from {expected} to {current} while this apply held the lock: another writer promoted a config (a cotal that bypassed the lock, or a hand edit of {}).\n\
             blast radius: none from this apply; its records are written but its config was not promoted.\n\
             next: run `cotal plan` to see the state now, then apply again",
            root.generation_record().display()
        )));
    }
    server_conf::promote_next(root)?;
    tracing::info!(
        generation = current,
        spaces = inv.spaces.len(),
        "config promoted"
    );
    fault::point("after-config-promoted");
    fault::break_config(&root.server_conf());
    if broker.running() {
        let expectations = expectations(root, plan, removals)?;
        fault::point("before-reload");
        let confirmed = broker
            .reload(&nodes)
            .and_then(|_| broker.verify(&expectations));
        if let Err(e) = confirmed {
            server_conf::restore_prev(root)?;
            let tail = match broker.reload(&nodes) {
                Ok(_) => {
                    "the previous config was restored and reloaded; the generation is unchanged"
                        .to_string()
                }
                Err(again) => format!(
                    "the previous config was restored, but reloading it failed too: {again}"
                ),
            };
            return Err(Error::RolledBack(format!("{e}\n{tail}")));
        }
    }
    fault::point("after-reload");
    generation::save(
        root,
        &GenerationRecord {
            generation: current + 1,
            inventory_digest: digest,
        },
    )?;
    Ok((current, current + 1))
}

fn reap(
    root: &Root,
    space: &SpaceName,
    account: &str,
    store_dir: &std::path::Path,
    running: bool,
    outcome: &mut Outcome,
) {
    // The account's (now empty) folder in the store: its streams were deleted through the API
    // (broker running) or with the folder itself (broker stopped).
    if running && let Err(e) = jetstream_dir::remove(store_dir, account) {
        outcome
            .reap_failures
            .push(format!("store folder of {}: {e}", plan::q(space)));
    }
    if let Err(e) = account_record::remove_if_account(root, space, account) {
        outcome
            .reap_failures
            .push(format!("account record of {}: {e}", plan::q(space)));
    }
    fault::point("mid-reap");
    if let Err(e) = space_dir::reap(root, space, account) {
        outcome
            .reap_failures
            .push(format!("space folder of {}: {e}", plan::q(space)));
    }
}

fn load_broker(root: &Root) -> Result<BrokerRecord> {
    match broker_record::load(root)? {
        broker_record::Loaded::Valid(record, _) => Ok(*record),
        broker_record::Loaded::Absent => {
            Err(Error::Refused(
            "the broker record disappeared during apply.\nnext: restore .cotal/auth/broker.json from a backup".into(),
        ))
        }
        broker_record::Loaded::Corrupt(why) => Err(Error::Refused(format!(
            "{} is corrupt: {why}.\nnext: restore it from a backup",
            root.broker_record().display()
        ))),
    }
}

/// RFC 3339 UTC, seconds.
pub fn timestamp() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Whether the journal observed blocks a verb other than apply.
pub fn refuse_if_journal_open(observed_journal: &JournalState, verb: &str) -> Result<()> {
    match observed_journal {
        JournalState::Closed => Ok(()),
        JournalState::Open(j) => Err(Error::Interrupted(format!(
            "an apply started at {} by pid {} on {} was interrupted (journal .cotal/maintenance/journal.json); `{verb}` refuses until it is finished.\n\
             next: run `cotal apply` to finish it{}",
            j.started_at,
            j.pid,
            j.host,
            if j.removals.is_empty() {
                String::new()
            } else {
                format!(
                    " (it completes the removal of {})",
                    j.removals
                        .iter()
                        .map(|r| plan::q(&r.space))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ))),
        JournalState::Corrupt { file, reason } => Err(Error::Interrupted(format!(
            "the apply journal {} is corrupt ({reason}); `{verb}` refuses.\nnext: inspect it and run `cotal plan`",
            file.display()
        ))),
    }
}
