//! The executor: runs a [`Plan`]'s steps in order under the root's lock, with one exhaustive
//! `match` over [`Step`], journaling each step's start and end.
//!
//! Invariants:
//! - Nothing before a removal's commit point destroys anything; every step is idempotent, so
//!   re-running apply after a crash finishes the work.
//! - A removal's commit point is the journal saying `committed` for it, written before its first
//!   stream is deleted: a failure anywhere after that leaves the removal to be finished.
//! - The journal is opened before the first step and closed after the last. A failure after a
//!   commit point leaves it open and returns [`Error::interrupted`] (exit 6); a failure before any
//!   commit point closes it (the re-plan derives the remaining work) and returns the failure.
//! - The root's lock is checked before every step and just before the promotion: once its file
//!   was replaced, this apply stops and touches nothing more (not even the journal).
//! - Promotion is compare-and-set twice: on the generation record, and on the inventory, which
//!   must hold exactly what the plan saw plus this apply's own writes.
//! - A reload is confirmed by the broker itself; one it does not confirm is rolled back with
//!   everything the apply changed (config and records), so disk and broker agree again.
//! - Reap failures are reported, never thrown: they come after a commit point.

mod audit;
mod promote;
mod steps;
mod system;
mod undo;
mod users;

use crate::audit::{Actor, Event};
use crate::broker::Broker;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::fault::{self, Point};
use crate::model::SpaceName;
use crate::observed::{
    Journal, JournalState, JournaledPurge, JournaledRemoval, JournaledStep, Observed,
};
use crate::plan::{Plan, Step};
use crate::store::broker_record::{self, BrokerRecord};
use crate::store::lock::Lock;
use crate::store::{Root, journal};
use audit::Auditor;
use std::collections::BTreeMap;
use undo::{UndoLog, annotate, put_back};

pub use crate::outcomes::{Outcome, Purged, ReapFailure, SpaceFailure, WrittenKey};

/// After this many spaces' steps failed in a row, the next failure is not one space's: the
/// broker itself is failing them all (stopped, out of quorum, out of disk), and the apply stops
/// as any failed apply does instead of failing every remaining space one by one.
const ISOLATED_IN_A_ROW: usize = 8;

/// The space whose own step `step` is, when its failure `e` is that space's alone: a
/// provisioning or a channel registry write (each touches one account, and what it left
/// undone is planned again from what the next apply observes), once the plan's promotion is
/// in force (or when it has none: nothing is left to put back). A lost lock is never one
/// space's: the root may be another cotal's.
fn isolated(step: &Step, e: &Error, plan: &Plan, outcome: &Outcome) -> Option<SpaceName> {
    // What the broker or the tenant answered is the space's; a local I/O error, a lost lock
    // or cotal's own failure is the root's.
    if !matches!(e, Error::Broker(_) | Error::Conflict(_)) {
        return None;
    }
    let promoted = outcome.generation.is_some()
        || !plan
            .steps
            .iter()
            .any(|s| matches!(s, Step::PromoteConfig { .. }));
    match step {
        Step::Provision { space, .. }
        | Step::WriteChannels { space, .. }
        | Step::WriteAcl { space, .. }
            if promoted =>
        {
            Some(space.clone())
        }
        _ => None,
    }
}

/// Everything the executor needs besides the plan.
pub struct Context<'a> {
    pub root: &'a Root,
    /// The broker's nodes as every promotion renders them ([`crate::plan::nodes`]), in the
    /// order of `observed.nodes`, whose files they are written to.
    pub nodes: &'a [crate::render::Node],
    pub observed: &'a Observed,
    /// Who is applying, for the journal and the audit.
    pub actor: Actor,
    /// The root's lock, held by the caller.
    pub lock: &'a Lock,
    /// Who watches the steps go by (the CLI's progress bar, or [`Silent`]).
    pub progress: &'a dyn Progress,
}

/// An observer of an apply's steps: told before each one and once at the end, whatever the
/// outcome. The executor never depends on what it does.
pub trait Progress {
    /// Step `index` (0-based) of `total` starts.
    fn step(&self, index: usize, total: usize, step: &Step);
    /// The apply ended (done or failed).
    fn finished(&self);
}

/// No progress shown.
pub struct Silent;

impl Progress for Silent {
    fn step(&self, _index: usize, _total: usize, _step: &Step) {}
    fn finished(&self) {}
}

/// The inventory the promotion must find on disk: account key and JWT per space.
type ExpectedInventory = BTreeMap<SpaceName, Expected>;

/// What a record of the inventory must hold at the promotion.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Expected {
    account: String,
    jwt: String,
    archived: bool,
    /// Its side accounts' keys and JWTs, in role order.
    sides: Vec<(String, String)>,
}

impl Expected {
    fn of(record: &crate::store::account_record::AccountRecord) -> Expected {
        Expected {
            account: record.account.public.clone(),
            jwt: record.account.jwt.clone(),
            archived: record.archived.is_some(),
            sides: record
                .side_accounts
                .values()
                .map(|s| (s.public.clone(), s.jwt.clone()))
                .collect(),
        }
    }

    fn observed(s: &crate::observed::ObservedSpace) -> Expected {
        Expected {
            account: s.account_pub.clone(),
            jwt: s.jwt.clone(),
            archived: s.archived.is_some(),
            sides: s
                .sides
                .values()
                .map(|side| (side.account_pub.clone(), side.jwt.clone()))
                .collect(),
        }
    }
}

/// What an apply carries from step to step.
struct RunState {
    journal: Journal,
    /// What the plan saw of the inventory, plus this apply's own writes.
    expected: ExpectedInventory,
    undo: UndoLog,
    /// Results of provisioning done ahead, for a run of provisioning steps done at once.
    /// Each space provisioned ahead of its step: the revision of its registry's seed, if any.
    provisioned: BTreeMap<SpaceName, Result<Option<u64>>>,
}

impl RunState {
    /// The state of an apply that opened `journal`, expecting the inventory `observed` saw.
    fn opened(journal: Journal, observed: &Observed) -> RunState {
        RunState {
            journal,
            expected: observed
                .inventory
                .spaces
                .iter()
                .map(|(n, s)| (n.clone(), Expected::observed(s)))
                .collect(),
            undo: UndoLog::default(),
            provisioned: BTreeMap::new(),
        }
    }
}

/// How many consecutive provisioning steps run at once: the lock is checked before each such
/// batch (as before every step), so a lost lock stops the apply within one batch.
const PROVISION_BATCH: usize = 64;

/// Execute `plan`. The caller holds the lock and has confirmed.
pub fn execute(ctx: &Context, plan: &Plan, broker: &mut dyn Broker) -> Result<Outcome> {
    let mut record = load_broker(ctx.root)?;
    let audit = Auditor {
        root: ctx.root,
        actor: ctx.actor.clone(),
        plan_digest: plan.decision_digest(),
        before: ctx.observed.generation.generation(),
        last_events: Default::default(),
        buffer: Default::default(),
        late: Default::default(),
    };
    ctx.lock.verify()?;
    // Fail closed: nothing is changed before the apply is on the record.
    audit.write(Event::ApplyStarted, None, None, "started", None)?;
    let mut outcome = Outcome::default();
    let result = run(ctx, plan, broker, &mut record, &audit, &mut outcome);
    ctx.progress.finished();
    match result {
        Ok(()) => Ok(outcome),
        // The root may be another cotal's now: not even the audit is written.
        Err(e @ Error::LockLost(_)) => Err(e),
        Err(e) => {
            let event = match e {
                Error::RolledBack(_) => Event::ApplyRolledBack,
                Error::Stopped(_) => Event::ApplyInterrupted,
                _ => Event::ApplyFailed,
            };
            // The generation the root stands at: a promotion the apply made before it
            // stopped stays made (the final one, or the fence's).
            let at = outcome.generation.or(outcome.fenced).map(|(_, to)| to);
            // Best effort: the failure itself may be the audit log.
            let _ = audit.write(event, None, at, &first_line(&e.to_string()), None);
            Err(e)
        }
    }
}

/// The journal this apply opens: its plan, the removals and purges it commits (a committed
/// purge keeps its recorded bounds), the accounts and adds an interrupted apply left known, and
/// the audit records it still owes.
fn opening_journal(ctx: &Context, plan: &Plan, audit: &Auditor) -> Journal {
    Journal {
        op: "apply".into(),
        plan_digest: audit.plan_digest.clone(),
        started_at: crate::clock::timestamp(),
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
                    relocation,
                    ..
                } => Some(JournaledRemoval {
                    space: space.clone(),
                    account: account.clone(),
                    committed: *committed,
                    receipt: relocation.clone(),
                }),
                _ => None,
            })
            .collect(),
        purges: plan
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::PurgeStreams {
                    space,
                    account,
                    committed,
                    ..
                } => Some(JournaledPurge {
                    space: space.clone(),
                    account: account.clone(),
                    committed: *committed,
                    // A committed purge keeps the bounds its commit recorded.
                    upto: match &ctx.observed.journal {
                        JournalState::Valid(j) => j
                            .purges
                            .iter()
                            .find(|p| &p.space == space && &p.account == account)
                            .map(|p| p.upto.clone())
                            .unwrap_or_default(),
                        _ => Default::default(),
                    },
                }),
                _ => None,
            })
            .collect(),
        // Accounts an interrupted apply minted for names it was also removing stay known.
        added: match &ctx.observed.journal {
            JournalState::Valid(j) => j.added.clone(),
            _ => Vec::new(),
        },
        // The spaces this apply adds, and those an interrupted one was adding and this one
        // completes.
        adding: {
            let mut adding: Vec<SpaceName> = match &ctx.observed.journal {
                JournalState::Valid(j) => j
                    .adding
                    .iter()
                    .filter(|s| plan.steps.iter().any(|st| st.space() == Some(*s)))
                    .cloned()
                    .collect(),
                _ => Vec::new(),
            };
            for step in &plan.steps {
                if let Step::AddAccount { space, .. } = step
                    && !adding.contains(space)
                {
                    adding.push(space.clone());
                }
            }
            adding
        },
        steps: Vec::new(),
        // Owed records stay on the record until the step that writes them has run.
        owed: plan
            .steps
            .iter()
            .find_map(|s| match s {
                Step::FinishJournal { owed, .. } => Some(owed.clone()),
                _ => None,
            })
            .unwrap_or_default(),
    }
}

fn run(
    ctx: &Context,
    plan: &Plan,
    broker: &mut dyn Broker,
    record: &mut BrokerRecord,
    audit: &Auditor,
    outcome: &mut Outcome,
) -> Result<()> {
    let journal = opening_journal(ctx, plan, audit);
    let mut state = RunState::opened(journal, ctx.observed);
    crate::store::caches::drift_cache::void(ctx.root)?;
    journal::save(ctx.root, &state.journal)?;
    tracing::info!(steps = plan.steps.len(), digest = %state.journal.plan_digest, "journal opened");
    fault::point(Point::AfterJournalOpen);

    let mut committed = state.journal.removals.iter().any(|r| r.committed)
        || state.journal.purges.iter().any(|p| p.committed);
    // Isolated failures since the last step that succeeded.
    let mut in_a_row = 0usize;
    // Ends any deferral however this function returns.
    let _flush = FlushOnDrop;
    for (index, step) in plan.steps.iter().enumerate() {
        // SIGINT or SIGTERM: stop here, between two steps, as a failure of this one would.
        if crate::interrupt::requested() {
            let e = stopped_before(plan, index);
            let _ = crate::store::atomic::set_deferred(false);
            return Err(step_failed(
                ctx.root, e, outcome, &mut state, committed, step,
            ));
        }
        ctx.progress.step(index, plan.steps.len(), step);
        // Runs of steps that only write local records (a bulk add) defer their syncs; any other
        // step first makes them all durable at once. The promotion is never deferred, so every
        // record it refers to is on disk before it.
        let records_only = step.writes_only_records();
        // The records of the run before that could not be made durable fail like a step.
        if let Err(e) = crate::store::atomic::set_deferred(records_only) {
            return Err(step_failed(
                ctx.root, e, outcome, &mut state, committed, step,
            ));
        }
        // A lost lock stops the apply where it is, journal untouched: another cotal may own it.
        ctx.lock.verify().map_err(lock_lost)?;
        state.journal.steps.push(JournaledStep {
            step: step.title(),
            started_at: crate::clock::timestamp(),
            ended_at: None,
        });
        // Such a run's steps reach the journal with the next step that is not one (the journal
        // file grows with every step, and none of them is a commit point: a re-plan derives
        // what is left of them).
        if !records_only {
            journal::save(ctx.root, &state.journal)?;
        }
        tracing::info!(step = %step.title(), "step started");
        // A run of provisioning steps is done at once, up to a batch ahead: each space is its
        // own account, and the steps are idempotent. Each step then reports its own result.
        provision_ahead(ctx, broker, plan, index, &mut state);
        if left_after_its_space_failed(step, outcome) {
            continue;
        }
        // Only the step's own error can be its space's alone (an audit write that fails is the
        // root's).
        let mut own = false;
        // The step's work is done: an error after it is its audit record's.
        let mut worked = false;
        // The step's audit records that could not be written.
        let mut owed = Vec::new();
        let result = audit
            .before_step(step, plan)
            .and_then(|_| {
                let ran = run_step(ctx, record, step, broker, &mut state, outcome, plan);
                own = ran.is_err();
                worked = ran.is_ok();
                ran
            })
            .and_then(|_| {
                audit
                    .after_step_owing(step, plan, broker.running(), outcome)
                    .map_err(|(e, rest)| {
                        owed = rest;
                        e
                    })
            });
        if result.is_ok() && matches!(step, Step::FinishJournal { .. }) {
            state.journal.owed.clear();
        }
        committed |= state.journal.removals.iter().any(|r| r.committed)
            || state.journal.purges.iter().any(|p| p.committed);
        if let Err(e) = &result
            && own
            && in_a_row < ISOLATED_IN_A_ROW
            && let Some(space) = isolated(step, e, plan, outcome)
        {
            // This space's alone: reported, audited (best effort, like `apply.failed`), and
            // every other step goes on.
            in_a_row += 1;
            if let Err(e) = space_step_failed(ctx, audit, step, space, e, outcome, &mut state) {
                return Err(step_failed(
                    ctx.root, e, outcome, &mut state, committed, step,
                ));
            }
            continue;
        }
        if result.is_ok() {
            in_a_row = 0;
        }
        if let Err(e) = result {
            let failed = Failed {
                worked,
                owed,
                committed,
            };
            return Err(step_error(ctx, step, e, failed, outcome, &mut state));
        }
        if let Some(last) = state.journal.steps.last_mut() {
            last.ended_at = Some(crate::clock::timestamp());
        }
        if !records_only {
            journal::save(ctx.root, &state.journal)?;
        }
    }
    if let Err(e) = crate::store::atomic::set_deferred(false) {
        return Err(match plan.steps.last() {
            Some(last) => step_failed(ctx.root, e, outcome, &mut state, committed, last),
            None => e,
        });
    }
    let after = outcome.generation.map(|(_, to)| to);
    let completed = completion(outcome);
    if let Err(e) = audit.write(Event::ApplyCompleted, None, after, &completed, None) {
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

/// The error of an apply a signal stopped before step `index` of `plan`.
fn stopped_before(plan: &Plan, index: usize) -> Error {
    Error::stopped(
        Diagnostic::new(format!(
            "apply stopped by a signal after {index} of {} steps; `{}` and the steps after it were not run.",
            plan.steps.len(),
            plan.steps[index].title()
        ))
        .next("run `cotal apply` to finish: it plans what is left"),
    )
}

/// A run of provisioning steps is done at once when its first is reached, up to a batch ahead:
/// each space is its own account, and the steps are idempotent. Each step then reports its own
/// result (`state.provisioned`).
fn provision_ahead(
    ctx: &Context,
    broker: &mut dyn Broker,
    plan: &Plan,
    index: usize,
    state: &mut RunState,
) {
    let Step::Provision { space, .. } = &plan.steps[index] else {
        return;
    };
    if state.provisioned.contains_key(space) {
        return;
    }
    let batch: Vec<SpaceName> = plan.steps[index..]
        .iter()
        .take(PROVISION_BATCH)
        .map_while(|s| match s {
            Step::Provision { space, .. } => Some(space.clone()),
            _ => None,
        })
        .collect();
    let results = steps::provision_many(ctx, broker, &batch);
    state.provisioned.extend(batch.into_iter().zip(results));
}

/// Whether `step` is a later step of a space whose own step already failed (its channel write
/// after its provisioning): left for the next apply, which plans it again.
fn left_after_its_space_failed(step: &Step, outcome: &Outcome) -> bool {
    step.space()
        .is_some_and(|space| outcome.failed.iter().any(|f| &f.space == space))
        && matches!(
            step,
            Step::Provision { .. } | Step::WriteChannels { .. } | Step::WriteAcl { .. }
        )
}

/// Space `space`'s own step failed with `e`: told, audited (best effort, like `apply.failed`),
/// counted in `outcome`, and the step ended in the journal, saved (its error is the caller's).
fn space_step_failed(
    ctx: &Context,
    audit: &Auditor,
    step: &Step,
    space: SpaceName,
    e: &Error,
    outcome: &mut Outcome,
    state: &mut RunState,
) -> Result<()> {
    let reason = first_line(&e.to_string());
    tracing::info!(step = %step.title(), %reason, "a space's step failed; the others go on");
    let _ = audit.write(
        Event::SpaceStepFailed,
        Some(&space),
        outcome.generation.map(|(_, to)| to),
        &format!("{}: {reason}", step.title()),
        None,
    );
    outcome.failed.push(SpaceFailure {
        space,
        step: step.title(),
        reason,
    });
    if let Some(last) = state.journal.steps.last_mut() {
        last.ended_at = Some(crate::clock::timestamp());
    }
    journal::save(ctx.root, &state.journal)
}

/// What a failed step leaves besides its error.
struct Failed {
    /// The step's own work was done (the error is its audit record's).
    worked: bool,
    /// Its audit records that could not be written.
    owed: Vec<crate::audit::Record>,
    /// A commit point of this apply was passed before it.
    committed: bool,
}

/// The error an apply ends with when `step` failed with `e`. What the run wrote is made durable
/// first. The step's change is in force when a promotion made it so, or when the step is a
/// commit point, a reap after one, or the finishing of an interrupted apply: its records go on
/// the journal, which stays open ([`unaudited`]). Before a promotion a step's records are put
/// back instead (nothing took effect, and the re-plan does and audits it all again:
/// [`step_failed`]).
fn step_error(
    ctx: &Context,
    step: &Step,
    e: Error,
    failed: Failed,
    outcome: &Outcome,
    state: &mut RunState,
) -> Error {
    let _ = crate::store::atomic::set_deferred(false);
    let took_effect = failed.worked
        && (outcome.generation.is_some()
            || matches!(
                step,
                Step::Fence { .. }
                    | Step::DeleteStreams { .. }
                    | Step::PurgeStreams { .. }
                    | Step::Reap { .. }
                    | Step::FinishJournal { .. }
            ));
    if took_effect {
        // The records go on the journal (best effort: the journal stays open either way, and
        // the apply that finishes it writes what it can establish). The finishing step's own
        // records are the owed ones still unwritten: they replace the list, never add to it.
        if matches!(step, Step::FinishJournal { .. }) {
            state.journal.owed = failed.owed;
        } else {
            state.journal.owed.extend(failed.owed);
        }
        let _ = journal::save(ctx.root, &state.journal);
        return unaudited(ctx.root, e, step);
    }
    step_failed(ctx.root, e, outcome, state, failed.committed, step)
}

/// How the apply ended, as its `apply.completed` record says.
fn completion(outcome: &Outcome) -> String {
    if outcome.failed.is_empty() {
        return "completed".to_string();
    }
    format!(
        "partly applied: {} space step(s) failed ({})",
        outcome.failed.len(),
        outcome
            .failed
            .iter()
            .map(|f| f.space.quoted())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The receipt that proves the move `plan`'s removal of `space` ends, if it is one.
pub(crate) fn relocation_of<'p>(plan: &'p Plan, space: &SpaceName) -> Option<&'p str> {
    plan.steps.iter().find_map(|s| match s {
        Step::DeleteStreams {
            space: s,
            relocation: Some(digest),
            ..
        } if s == space => Some(digest.as_str()),
        _ => None,
    })
}

/// The error of `step`, which failed with `e`: records written for a promotion that never took
/// effect are put back, so the inventory never runs ahead of the broker (a lost lock touches
/// nothing more); past the promotion the change is in force, and the error says so. Then the
/// journal is closed or kept ([`fail`]).
fn step_failed(
    root: &Root,
    e: Error,
    outcome: &Outcome,
    state: &mut RunState,
    committed: bool,
    step: &Step,
) -> Error {
    let e = match outcome.generation {
        None if !matches!(e, Error::LockLost(_)) => put_back(e, &mut state.undo),
        Some((from, to)) => annotate(
            e,
            &format!(
                "the new config was already promoted and confirmed (generation {from} -> {to}); run `cotal apply` again to finish the remaining steps"
            ),
        ),
        None => e,
    };
    // Audit records still owed keep the journal open whatever failed: closing it would lose
    // them.
    if !committed && !state.journal.owed.is_empty() && !matches!(e, Error::LockLost(_)) {
        let _ = journal::save(root, &state.journal);
        return annotate(
            e,
            "the journal stays open: it holds audit records an interrupted apply owes, and `cotal apply` writes them",
        );
    }
    fail(root, e, committed, step)
}

/// Stops deferring syncs (flushing what is pending, best effort) when the executor returns early.
struct FlushOnDrop;

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        let _ = crate::store::atomic::set_deferred(false);
    }
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

/// The one exhaustive `match` over [`Step`]: one call per kind of step.
fn run_step(
    ctx: &Context,
    record: &mut BrokerRecord,
    step: &Step,
    broker: &mut dyn Broker,
    state: &mut RunState,
    outcome: &mut Outcome,
    plan: &Plan,
) -> Result<()> {
    match step {
        Step::FinishJournal { .. } => Ok(()),
        Step::ReissueSystemAccount {
            rotate,
            evictor,
            revoke,
            handed_out,
            pruned,
            ..
        } => system::reissue_system_account(
            ctx.root,
            record,
            state,
            system::Reissue {
                rotate: *rotate,
                evictor: *evictor,
                revoke,
                handed_out,
                pruned,
            },
        ),
        Step::DeleteStreams {
            space,
            account,
            relocation,
            ..
        } => delete_streams(ctx, broker, state, space, account, relocation.as_deref()),
        Step::PurgeStreams { space, account, .. } => {
            steps::purge_streams(ctx, broker, state, outcome, space, account)
        }
        Step::AddAccount { space, spec, sides } => {
            steps::add_account(ctx, record, state, space, spec, sides)
        }
        Step::ReissueAccount {
            space,
            account,
            spec,
            revocations,
            rotate_signing,
            transition,
            ..
        } => reissue_account(
            ctx,
            record,
            state,
            outcome,
            steps::AccountReissue {
                space,
                account,
                spec,
                revocations,
                rotate_signing: *rotate_signing,
            },
            *transition,
        ),
        Step::WriteSideAccounts {
            space,
            account,
            suspended,
            write,
            drop,
            retired,
            ..
        } => steps::write_side_accounts(
            ctx,
            record,
            state,
            steps::SideAccountsWrite {
                space,
                account,
                suspended: *suspended,
                write,
                drop,
                retired,
            },
        ),
        Step::WriteSysCreds { space } => steps::heal_sys_creds(ctx, record, state, space),
        Step::RecordProtection { space, protect } => {
            steps::record_protection(ctx, state, space, *protect)
        }
        Step::RecordArchive {
            space,
            account,
            archived,
            ..
        } => record_archive(ctx, state, outcome, space, account, *archived),
        Step::RecordSuspension {
            space,
            suspended,
            reason,
            backfill,
            renew,
        } => steps::record_suspension(
            ctx,
            state,
            space,
            (*suspended, *backfill && !*renew),
            reason.as_deref(),
            *renew,
        ),
        Step::Fence {
            spaces,
            from_generation,
            ..
        } => {
            outcome.fenced = Some(fence(
                ctx,
                record,
                broker,
                state,
                plan,
                spaces,
                *from_generation,
            )?);
            Ok(())
        }
        Step::PromoteConfig {
            from_generation,
            reasons,
            ..
        } => {
            let generations = promote::promote(
                ctx,
                record,
                *from_generation,
                state,
                plan,
                broker,
                promote::Stage::Final,
            )?;
            outcome.generation = Some(generations);
            record_store_moves(ctx.root, reasons)?;
            system::forget_previous_control(ctx.root, record)
        }
        Step::Provision { space, .. } => provision(ctx, broker, state, outcome, space),
        Step::WriteChannels {
            space,
            account,
            writes,
            ..
        } => {
            let written = steps::write_channels(ctx, broker, space, account, writes)?;
            outcome
                .channels_written
                .entry(space.clone())
                .or_default()
                .extend(written);
            Ok(())
        }
        Step::WriteAcl {
            space,
            account,
            writes,
            ..
        } => steps::write_acl(ctx, broker, space, account, writes),
        Step::Reap { space, account } => {
            steps::reap(ctx, broker.running(), outcome, space, account);
            Ok(())
        }
    }
}

/// A removed space's streams deleted, its move's receipt recorded first when the removal ends
/// one (`relocation`: the receipt's digest).
fn delete_streams(
    ctx: &Context,
    broker: &mut dyn Broker,
    state: &mut RunState,
    space: &SpaceName,
    account: &str,
    relocation: Option<&str>,
) -> Result<()> {
    if let Some(digest) = relocation {
        steps::record_relocation_verified(ctx, space, account, digest)?;
    }
    steps::delete_streams(ctx, broker, state, space, account)
}

/// A space's account re-issued; a resumption ends the space's recorded move, if any.
fn reissue_account(
    ctx: &Context,
    record: &mut BrokerRecord,
    state: &mut RunState,
    outcome: &mut Outcome,
    reissue: steps::AccountReissue,
    transition: crate::plan::Transition,
) -> Result<()> {
    let (space, account) = (reissue.space, reissue.account);
    steps::reissue_account(ctx, record, state, reissue)?;
    if transition == crate::plan::Transition::Resume
        && steps::end_relocation(ctx, state, space, account)?
    {
        outcome.relocations_ended.push(space.clone());
    }
    Ok(())
}

/// A space's archive mark set or cleared; a return from the archive ends the space's recorded
/// move, if any (once).
fn record_archive(
    ctx: &Context,
    state: &mut RunState,
    outcome: &mut Outcome,
    space: &SpaceName,
    account: &str,
    archived: bool,
) -> Result<()> {
    steps::record_archive(ctx, state, space, account, archived)?;
    if !archived
        && !outcome.relocations_ended.contains(space)
        && steps::end_relocation(ctx, state, space, account)?
    {
        outcome.relocations_ended.push(space.clone());
    }
    Ok(())
}

/// The fence: each fenced space's move receipt recorded (when its removal ends one), the fence
/// records written and promoted; its generations. Once it is in force, a later failure puts
/// back only what came after it.
fn fence(
    ctx: &Context,
    record: &mut BrokerRecord,
    broker: &mut dyn Broker,
    state: &mut RunState,
    plan: &Plan,
    spaces: &[crate::plan::Fenced],
    from_generation: u64,
) -> Result<(u64, u64)> {
    for f in spaces {
        if let Some(digest) = relocation_of(plan, &f.space) {
            steps::record_relocation_verified(ctx, &f.space, &f.account, digest)?;
        }
    }
    steps::fence_records(ctx, record, state, spaces)?;
    let generations = promote::promote(
        ctx,
        record,
        from_generation,
        state,
        plan,
        broker,
        promote::Stage::Fence,
    )?;
    state.undo.clear();
    Ok(generations)
}

/// A space provisioned (or its result taken from the batch done ahead); the revision its
/// registry's seed was written at, in `outcome`.
fn provision(
    ctx: &Context,
    broker: &mut dyn Broker,
    state: &mut RunState,
    outcome: &mut Outcome,
    space: &SpaceName,
) -> Result<()> {
    let seed = match state.provisioned.remove(space) {
        Some(done) => done,
        None => steps::provision(ctx, broker, space),
    }?;
    if let Some(revision) = seed {
        outcome.registry_seeded.insert(space.clone(), revision);
    }
    Ok(())
}

/// Turn a step failure into what the operator must know: before any commit point the journal is
/// closed and the failure returned as is; after one, the journal stays and apply must be re-run.
fn fail(root: &Root, e: Error, committed: bool, step: &Step) -> Error {
    if matches!(e, Error::LockLost(_)) {
        return e;
    }
    if committed && matches!(e, Error::Stopped(_)) {
        return annotate(
            e,
            "the journal stays open: every removal and purge it names is committed, and `cotal apply` finishes it",
        );
    }
    if committed {
        Error::interrupted(
            Diagnostic::new(format!(
                "apply stopped at `{}` after a commit point: {e}\n\
             the journal stays open: every removal and purge it names is committed and will be finished.",
                step.title()
            ))
            .next("fix the cause and re-run `cotal apply`")
            .next("one server whose broker stopped: `cotal apply` finishes a removal with the broker stopped, then `cotal up` (which refuses while a removal's journal is open); a running one that blocks a removal: `cotal down`, `cotal apply`, then `cotal up`")
            .next("a cluster: `cotal up` starts a stopped node (it works while the journal is open), then `cotal apply` finishes (a cluster's removal needs its nodes running)")
            .next("a purge is finished only through the running broker: `cotal up`, then `cotal apply`"),
        )
    } else {
        let _ = journal::close(root);
        e
    }
}

/// The error of a step whose change is in force but whose audit record could not be written
/// (seed 002 §5.1: no committed change without its audit). Nothing is put back (the change
/// took) and the journal stays open holding the records owed, so no later plan says "No
/// changes": the next apply finishes the journal and writes them (and the `space.added` of an
/// add it names whose record is missing).
fn unaudited(root: &Root, e: Error, step: &Step) -> Error {
    Error::interrupted(
        Diagnostic::new(format!(
            "`{}` took effect, but its audit record could not be written: {e}\n\
             the journal stays open: the next `cotal apply` finishes it and records what is missing.",
            step.title()
        ))
        .next(format!(
            "make the audit log writable ({}) and run `cotal apply`",
            root.audit_log().display()
        )),
    )
}

fn load_broker(root: &Root) -> Result<BrokerRecord> {
    match broker_record::load(root)? {
        broker_record::Loaded::Valid((record, _)) => Ok(*record),
        broker_record::Loaded::Absent => Err(Error::refused(
            Diagnostic::new("the broker record disappeared during apply.")
                .next("restore .cotal/auth/broker.json from a backup"),
        )),
        broker_record::Loaded::Corrupt { reason: why, .. } => Err(Error::refused(
            Diagnostic::new(format!(
                "{} is corrupt: {why}.",
                root.broker_record().display()
            ))
            .next("restore it from a backup"),
        )),
    }
}

/// Whether the journal observed blocks a verb other than apply.
pub fn refuse_if_journal_open(observed_journal: &JournalState, verb: &str) -> Result<()> {
    match observed_journal {
        JournalState::Absent => Ok(()),
        JournalState::Valid(j) => Err(Error::interrupted(
            Diagnostic::new(format!(
                "an apply started at {} by pid {} on {} was interrupted (journal .cotal/maintenance/journal.json); `{verb}` refuses until it is finished.",
                j.started_at,
                j.pid,
                j.host
            ))
            .next(format!(
                "run `cotal apply` to finish it{}{}",
                if j.removals.is_empty() {
                String::new()
            } else {
                format!(
                    " (it completes the removal of {})",
                    j.removals
                        .iter()
                        .map(|r| r.space.quoted())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
                {
                    let purges: Vec<String> = j
                        .purges
                        .iter()
                        .filter(|p| p.committed)
                        .map(|p| p.space.quoted())
                        .collect();
                    if purges.is_empty() {
                        String::new()
                    } else {
                        format!(" (it completes the purge of {})", purges.join(", "))
                    }
                }
            )),
        )),
        JournalState::Corrupt { file, reason } => Err(Error::interrupted(
            Diagnostic::new(format!(
                "the apply journal {} is corrupt ({reason}); `{verb}` refuses.",
                file.display()
            ))
            .next("inspect it and run `cotal plan`"),
        )),
    }
}

/// After a promotion that moved a node's store (approved: the plan said what it takes out of
/// service), record where the node's data lives now: the moved store with its identity when it
/// carried the data, else the new folder with none, which the next `cotal up` adopts. Until
/// this is written, every plan shows the move again (a re-run finishes it).
fn record_store_moves(root: &crate::store::Root, reasons: &[crate::plan::Reason]) -> Result<()> {
    use crate::store::store_home::{self, StoreHome};
    for r in reasons {
        let crate::plan::Reason::StoreMove { moves } = r else {
            continue;
        };
        for m in moves {
            let home = StoreHome {
                dir: m.to.clone(),
                id: if m.carried {
                    store_home::read_id(&m.to)
                } else {
                    None
                },
            };
            store_home::set(root, &m.node, home)?;
        }
    }
    Ok(())
}
