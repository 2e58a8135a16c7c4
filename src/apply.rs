//! The executor: runs a [`Plan`]'s steps in order under the root's lock, with one exhaustive
//! `match` over [`Step`], journaling each step's start and end.
//!
//! Invariants:
//! - Nothing before a removal's commit point destroys anything; every step is idempotent, so
//!   re-running apply after a crash finishes the work.
//! - A removal's commit point is the journal saying `committed` for it, written before its first
//!   stream is deleted: a failure anywhere after that leaves the removal to be finished.
//! - The journal is opened before the first step and closed after the last. A failure after a
//!   commit point leaves it open and returns [`Error::Interrupted`] (exit 6); a failure before any
//!   commit point closes it (the re-plan derives the remaining work) and returns the failure.
//! - The root's lock is checked before every step and just before the promotion: once its file
//!   was replaced, this apply stops and touches nothing more (not even the journal).
//! - Promotion is compare-and-set twice: on the generation record, and on the inventory, which
//!   must hold exactly what the plan saw plus this apply's own writes.
//! - A reload is confirmed by the broker itself; one it does not confirm is rolled back with
//!   everything the apply changed (config and records), so disk and broker agree again.
//! - Reap failures are reported, never thrown: they come after a commit point.

use crate::audit::{Actor, Counts, Event, Generations, Record as AuditRecord};
use crate::broker::{Broker, Expectation, preflight};
use crate::desired::Desired;
use crate::digest;
use crate::error::{Error, Result};
use crate::fault;
use crate::fault::Point;
use crate::mint;
use crate::model::SpaceName;
use crate::observed::{
    GenerationRecord, GenerationState, Journal, JournalState, JournaledAdd, JournaledRemoval,
    JournaledStep, Observed,
};
use crate::permissions;
use crate::plan::{self, Plan, Step};
use crate::render;
use crate::store::audit as store_audit;
use crate::store::broker_record::BrokerRecord;
use crate::store::lock::Lock;
use crate::store::{
    Root, account_record, broker_record, generation, inventory, jetstream_dir, journal,
    server_conf, space_dir,
};
use std::collections::BTreeMap;
use std::path::PathBuf;

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
    /// The root's lock, held by the caller.
    pub lock: &'a Lock,
}

/// The inventory the promotion must find on disk: account key and JWT per space.
type ExpectedInventory = BTreeMap<SpaceName, (String, String)>;

/// How to put back one artifact this apply wrote, should its reload be rolled back.
enum Undo {
    /// Put these bytes back at the path.
    Restore(PathBuf, Vec<u8>),
    /// The path did not exist before: remove what this apply created there.
    Remove(PathBuf),
}

/// What an apply carries from step to step.
struct State {
    journal: Journal,
    expected: ExpectedInventory,
    undo: Vec<Undo>,
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
    ctx.lock.verify()?;
    // Fail closed: nothing is changed before the apply is on the record.
    audit.write(Event::ApplyStarted, None, None, "started", None)?;
    let mut outcome = Outcome::default();
    match run(ctx, plan, broker, &record, &audit, &mut outcome) {
        Ok(()) => Ok(outcome),
        // The root may be another cotal's now: not even the audit is written.
        Err(e @ Error::LockLost(_)) => Err(e),
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
    let journal = Journal {
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
        // Accounts an interrupted apply minted for names it was also removing stay known.
        added: match &ctx.observed.journal {
            JournalState::Open(j) => j.added.clone(),
            _ => Vec::new(),
        },
        steps: Vec::new(),
    };
    let mut state = State {
        journal,
        expected: ctx
            .observed
            .inventory
            .spaces
            .iter()
            .map(|(n, s)| (n.clone(), (s.account_pub.clone(), s.jwt.clone())))
            .collect(),
        undo: Vec::new(),
    };
    journal::save(ctx.root, &state.journal)?;
    tracing::info!(steps = plan.steps.len(), digest = %state.journal.plan_digest, "journal opened");
    fault::point(Point::AfterJournalOpen);

    let mut committed = state.journal.removals.iter().any(|r| r.committed);
    for step in &plan.steps {
        // A lost lock stops the apply where it is, journal untouched: another cotal may own it.
        ctx.lock.verify().map_err(lock_lost)?;
        state.journal.steps.push(JournaledStep {
            step: step.title(),
            started_at: timestamp(),
            ended_at: None,
        });
        journal::save(ctx.root, &state.journal)?;
        tracing::info!(step = %step.title(), "step started");
        let result = audit
            .before_step(step)
            .and_then(|_| run_step(ctx, record, step, broker, &mut state, outcome, plan))
            .and_then(|_| audit.after_step(step, plan, broker.running(), outcome));
        committed |= state.journal.removals.iter().any(|r| r.committed);
        if let Err(e) = result {
            // Records written for a promotion that never took effect are put back, so the
            // inventory never runs ahead of the broker (a lost lock touches nothing more).
            let e = match outcome.generation {
                None if !matches!(e, Error::LockLost(_)) => put_back(e, &mut state.undo),
                // Past the promotion the change is in force: say so, with what is left.
                Some((from, to)) => annotate(
                    e,
                    &format!(
                        "the new config was already promoted and confirmed (generation {from} -> {to}); run `cotal apply` again to finish the remaining steps"
                    ),
                ),
                None => e,
            };
            return Err(fail(ctx.root, e, committed, step));
        }
        if let Some(last) = state.journal.steps.last_mut() {
            last.ended_at = Some(timestamp());
        }
        journal::save(ctx.root, &state.journal)?;
        outcome.steps_done += 1;
    }
    let after = outcome.generation.map(|(_, to)| to);
    if let Err(e) = audit.write(Event::ApplyCompleted, None, after, "completed", None) {
        return Err(match plan.steps.last() {
            Some(last) => fail(ctx.root, e, committed, last),
            None => e,
        });
    }
    fault::point(Point::BeforeJournalClose);
    journal::close(ctx.root)?;
    tracing::info!("journal closed");
    Ok(())
}

/// A lost lock is reported as a refusal that the failure path must not treat as its own: the
/// journal now may be another apply's.
fn lock_lost(e: Error) -> Error {
    match e {
        Error::Refused(msg) => Error::LockLost(msg),
        other => other,
    }
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
    if matches!(e, Error::LockLost(_)) {
        return e;
    }
    if committed {
        Error::Interrupted(format!(
            "apply stopped at `{}` after a commit point: {e}\n\
             the journal stays open: every removal it names is committed and will be finished.\n\
             next: fix the cause and re-run `cotal apply`; if the broker is what blocks it, `cotal down` (which works while the journal is open) and `cotal apply` finish it with the broker stopped",
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
    state: &mut State,
    outcome: &mut Outcome,
    plan: &Plan,
) -> Result<()> {
    let root = ctx.root;
    match step {
        Step::FinishJournal { .. } => Ok(()),
        Step::DeleteStreams { space, account, .. } => {
            // The commit point: the journal says the removal is committed before anything is
            // deleted, so a failure from here on leaves it to be finished by the next apply.
            // It counts as committed only once the journal on disk says so.
            let mut journal = state.journal.clone();
            if let Some(r) = journal
                .removals
                .iter_mut()
                .find(|r| &r.space == space && &r.account == account)
                && !r.committed
            {
                r.committed = true;
                journal::save(root, &journal)?;
                state.journal = journal;
            }
            fault::point(Point::AfterRemovalCommitted);
            broker.delete_streams(space, account, &ctx.observed.store_dir)?;
            fault::point(Point::AfterStreamsDeleted);
            Ok(())
        }
        Step::AddAccount { space, spec } => {
            let account = mint::account(record, space, spec).map_err(Error::Other)?;
            // A name this apply also removes (under its old account) is re-added: the journal
            // says which new account its record may hold before the record is written.
            if state.journal.removals.iter().any(|r| &r.space == space) {
                state.journal.added.push(JournaledAdd {
                    space: space.clone(),
                    account: account.account.public.clone(),
                });
                journal::save(root, &state.journal)?;
            }
            remember(&mut state.undo, &root.account_record(space))?;
            if std::fs::symlink_metadata(root.space_dir(space)).is_err() {
                state.undo.push(Undo::Remove(root.space_dir(space)));
            }
            account_record::save(root, &account)?;
            state.expected.insert(
                space.clone(),
                (account.account.public.clone(), account.account.jwt.clone()),
            );
            fault::point(Point::AfterRecordWritten);
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
                return Err(Error::Refused(format!(
                    "the record of {} changed under the lock (now account {}, the plan saw {account}).\n\
                     next: find who changed .cotal/auth/ during the apply, then run `cotal plan`",
                    plan::q(space),
                    current.account.public
                )));
            }
            let updated = mint::reissue(record, &current, space, spec).map_err(Error::Other)?;
            remember(&mut state.undo, &root.account_record(space))?;
            account_record::save(root, &updated)?;
            state.expected.insert(
                space.clone(),
                (updated.account.public.clone(), updated.account.jwt.clone()),
            );
            fault::point(Point::AfterRecordWritten);
            Ok(())
        }
        Step::WriteSysCreds { space } => {
            let current = account_record::load(root, space)?;
            write_sys_creds(root, record, space, &current.account.public)
        }
        Step::RecordProtection { space, protect } => {
            let current = account_record::load(root, space)?;
            remember(
                &mut state.undo,
                &root.space_file(space, crate::store::paths::SpaceFile::Lifecycle),
            )?;
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
            let (from, to) = promote(ctx, record, *from_generation, state, plan, broker)?;
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
            fault::point(Point::AfterReap);
            Ok(())
        }
    }
}

/// Note how to put `path` back as it is now (its bytes, or its absence), once per apply.
fn remember(undo: &mut Vec<Undo>, path: &std::path::Path) -> Result<()> {
    let known = undo.iter().any(|u| match u {
        Undo::Restore(p, _) | Undo::Remove(p) => p == path,
    });
    if !known {
        undo.push(match crate::store::atomic::read_optional(path)? {
            Some(bytes) => Undo::Restore(path.to_path_buf(), bytes),
            None => Undo::Remove(path.to_path_buf()),
        });
    }
    Ok(())
}

/// Put back what this apply wrote before failing with `e`, and say so in the error.
fn put_back(e: Error, undo: &mut Vec<Undo>) -> Error {
    if undo.is_empty() {
        return e;
    }
    let failures = undo_writes(undo);
    undo.clear();
    let note = if failures.is_empty() {
        "every record this apply wrote was put back".to_string()
    } else {
        format!(
            "some records this apply wrote could not be put back ({})",
            failures.join("; ")
        )
    };
    annotate(e, &note)
}

/// Add a note to an error's message, keeping its kind (and so its exit code).
fn annotate(e: Error, note: &str) -> Error {
    let with = |msg: String| format!("{msg}\n({note})");
    match e {
        Error::Refused(m) => Error::Refused(with(m)),
        Error::Other(m) => Error::Other(with(m)),
        Error::Interrupted(m) => Error::Interrupted(with(m)),
        Error::Input(m) => Error::Input(with(m)),
        Error::Io { path, source } => Error::Other(with(format!("{}: {source}", path.display()))),
        other => other,
    }
}

/// Put back everything this apply wrote, newest first. Returns what could not be put back.
fn undo_writes(undo: &[Undo]) -> Vec<String> {
    let mut failures = Vec::new();
    for u in undo.iter().rev() {
        let result = match u {
            Undo::Restore(path, bytes) => {
                crate::store::atomic::write(path, bytes, crate::store::atomic::SECRET)
            }
            Undo::Remove(path) => crate::store::atomic::remove_tree(path).map(|_| ()),
        };
        if let Err(e) = result {
            failures.push(e.to_string());
        }
    }
    failures
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

/// What the broker must show after the reload: added and re-issued spaces loaded with exactly
/// their new JWT (asked through the system account, so a space at its connection limit is
/// checked without a free slot); added active spaces accept a fresh user (all their slots are
/// free); suspended ones refuse it; removed ones are unloaded and refuse it.
fn expectations(
    root: &Root,
    plan: &Plan,
    removals: &[JournaledRemoval],
) -> Result<Vec<Expectation>> {
    let mut out = Vec::new();
    for step in &plan.steps {
        let (space, spec, added) = match step {
            Step::AddAccount { space, spec } => (space, spec, true),
            Step::ReissueAccount { space, spec, .. } => (space, spec, false),
            _ => continue,
        };
        let record = account_record::load(root, space)?;
        let account = record.account.public.clone();
        out.push(Expectation::Loaded {
            space: space.clone(),
            account: account.clone(),
            jwt: record.account.jwt.clone(),
        });
        let active = spec.state == crate::model::SpaceState::Active;
        if active && !added {
            continue;
        }
        if let Some(creds) = space_user(
            root,
            space,
            &account,
            "cotal-verifier",
            permissions::verifier(),
        )? {
            out.push(if active {
                Expectation::Accepts {
                    space: space.clone(),
                    creds,
                }
            } else {
                Expectation::Refuses {
                    space: space.clone(),
                    creds,
                }
            });
        }
    }
    for r in removals {
        out.push(Expectation::Unloaded {
            space: r.space.clone(),
            account: r.account.clone(),
        });
        if let Some(creds) = space_user(
            root,
            &r.space,
            &r.account,
            "cotal-verifier",
            permissions::verifier(),
        )? {
            out.push(Expectation::Refuses {
                space: r.space.clone(),
                creds,
            });
        }
    }
    Ok(out)
}

/// Refuse when the inventory on disk is not what this apply expects (what the plan saw plus
/// its own writes): a record that vanished, changed or appeared under the lock would otherwise
/// be rendered (or silently dropped, evicting its tenant).
fn check_inventory(
    root: &Root,
    inv: &crate::observed::Inventory,
    expected: &ExpectedInventory,
) -> Result<()> {
    let mut moved = Vec::new();
    for (name, (account, jwt)) in expected {
        match inv.spaces.get(name) {
            None => moved.push(format!("{} vanished", plan::q(name))),
            Some(s) if &s.account_pub != account => moved.push(format!(
                "{} now holds account {} (the plan saw {account})",
                plan::q(name),
                s.account_pub
            )),
            Some(s) if &s.jwt != jwt => {
                moved.push(format!("{} holds another account JWT", plan::q(name)))
            }
            Some(_) => {}
        }
    }
    for name in inv.spaces.keys().filter(|n| !expected.contains_key(*n)) {
        moved.push(format!("{} appeared", plan::q(name)));
    }
    if moved.is_empty() {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "the account inventory in {} changed under the lock since the plan was made: {}.\n\
         blast radius: none from the promotion; it was not done, so the broker still serves the config it had.\n\
         next: find who changed .cotal/auth/ during the apply, then run `cotal plan`",
        root.auth_dir().display(),
        moved.join("; ")
    )))
}

/// Render from the inventory as it is on disk now (minus the journaled removals), promote by
/// compare-and-set, reload and confirm a running broker (rolling back the config and every
/// record this apply wrote when it does not confirm), then advance the generation. Returns
/// (from, to).
fn promote(
    ctx: &Context,
    record: &BrokerRecord,
    expected: u64,
    state: &mut State,
    plan: &Plan,
    broker: &mut dyn Broker,
) -> Result<(u64, u64)> {
    let root = ctx.root;
    let removals = &state.journal.removals;
    let trust = record.validate().map_err(Error::Other)?;
    let mut inv = inventory::read(root, &trust.operator_pub)?;
    if !inv.corrupt.is_empty() {
        return Err(Error::Refused(format!(
            "the inventory became uncertain during apply ({}: {}); an uncertain tenant list is not rendered.\nnext: find who changed .cotal/auth/ during the apply, then run `cotal plan`",
            inv.corrupt[0].file.display(),
            inv.corrupt[0].reason
        )));
    }
    check_inventory(root, &inv, &state.expected)?;
    // Spaces being removed keep their records until the reap, but leave the config now.
    inv.spaces.retain(|name, space| {
        !removals
            .iter()
            .any(|r| &r.space == name && r.account == space.account_pub)
    });
    let preloads = render::inventory_preloads(&inv.spaces);
    let nodes = plan::nodes(ctx.desired, ctx.observed);
    // One node today; each is rendered and pre-flighted before any is promoted.
    let mut digests = Vec::with_capacity(nodes.len());
    for node in &nodes {
        let rendered = render::render(&trust, &preloads, node).map_err(Error::Refused)?;
        let next = server_conf::write_next(root, &rendered.text)?;
        if let Err(e) = preflight::check(&next) {
            server_conf::discard_next(root)?;
            return Err(e);
        }
        digests.push(rendered.digest);
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
             blast radius: none from this apply; its config was not promoted.\n\
             next: run `cotal plan` to see the state now, then apply again",
            root.generation_record().display()
        )));
    }
    // Everything the reload check needs is ready before the config changes.
    let expectations = if broker.running() {
        expectations(root, plan, removals)?
    } else {
        Vec::new()
    };
    ctx.lock.verify().map_err(lock_lost)?;
    server_conf::promote_next(root)?;
    tracing::info!(
        generation = current,
        spaces = inv.spaces.len(),
        "config promoted"
    );
    fault::point(Point::AfterConfigPromoted);
    fault::break_config(&root.server_conf());
    if broker.running() {
        fault::point(Point::BeforeReload);
        let confirmed = broker
            .reload(&digests)
            .and_then(|_| broker.verify(&expectations));
        if let Err(e) = confirmed {
            let reloaded = match server_conf::restore_prev(root).and_then(|_| broker.restore()) {
                Ok(true) => {
                    "the previous config was restored and the broker confirmed it".to_string()
                }
                Ok(false) => "the previous config was restored; no reload had reached the broker, so it still runs that config".to_string(),
                Err(again) => format!(
                    "the previous config could not be restored and confirmed: {again}"
                ),
            };
            let not_undone = undo_writes(&state.undo);
            state.undo.clear();
            let records = if not_undone.is_empty() {
                "every record this apply wrote was put back; the generation is unchanged"
                    .to_string()
            } else {
                format!(
                    "some records this apply wrote could not be put back ({}); the generation is unchanged",
                    not_undone.join("; ")
                )
            };
            return Err(Error::RolledBack(format!(
                "{e}\n{reloaded}; {records}.\nnext: `cotal plan` shows the refused change again; fix its cause and apply again"
            )));
        }
    }
    fault::point(Point::AfterReload);
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
    fault::point(Point::MidReap);
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
