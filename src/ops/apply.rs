//! The apply operation: lock, (edit `cotal.toml`), observe, plan, check a saved plan, reach the
//! running broker, execute, put an imperative verb's edit back when nothing of it took effect,
//! and leave the state after the apply. `cotal apply`, the `cotal space` verbs and `cotal
//! rotate` all run it; each command only prints the plan, asks for confirmation and reports.
//!
//! Invariants: the lock is held from before the observation to the end; `lock.json` is written
//! only once the plan has steps (a no-op apply writes nothing); the edit of an imperative verb is
//! written only when its plan executes, and put back when the apply failed before anything of it
//! took effect (no commit point passed, no promotion, no lost lock).

use crate::apply::{self, Context, Progress};
use crate::broker::{Running, Stopped};
use crate::desired::Desired;
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::observe;
use crate::observed::{BrokerProcess, JournalState, Observed};
use crate::plan::{self, Intent, Plan, Rotate};
use crate::store::{Root, desired_file, lock};
use std::collections::BTreeSet;
use std::time::Duration;

/// The imperative verbs that run the apply flow on their own space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpaceVerb {
    Add,
    Rm,
    Suspend,
    Resume,
    Archive,
    Purge,
}

impl std::fmt::Display for SpaceVerb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SpaceVerb::Add => "space add",
            SpaceVerb::Rm => "space rm",
            SpaceVerb::Suspend => "space suspend",
            SpaceVerb::Resume => "space resume",
            SpaceVerb::Archive => "space archive",
            SpaceVerb::Purge => "space purge",
        })
    }
}

/// An edit of `cotal.toml`'s text.
pub type Edit<'a> = &'a dyn Fn(&str) -> Result<String>;

/// What an apply is asked to do beyond applying `cotal.toml` as it is.
#[derive(Default)]
pub struct Request<'a> {
    /// A saved plan to apply exactly (refused when stale).
    pub saved: Option<Plan>,
    /// Edit `cotal.toml` (under the lock); the edit is written only when the plan executes.
    pub edit: Option<Edit<'a>>,
    /// Apply only these spaces' changes.
    pub only: Option<BTreeSet<SpaceName>>,
    /// The imperative verb, for refusals; `None` for apply.
    pub verb: Option<SpaceVerb>,
    /// Keys this run replaces (`cotal rotate`).
    pub rotate: Rotate,
    /// Spaces this run empties (`cotal space purge`).
    pub purge: BTreeSet<SpaceName>,
    /// How long to wait for the root's lock.
    pub lock_timeout: Duration,
    /// Proceed with a quorum of a cluster's nodes (`--allow-degraded`).
    pub allow_degraded: bool,
    /// Receipt files of moves (`--relocated`): a removal of a space whose relocation is
    /// recorded needs its destination's.
    pub relocated: Vec<std::path::PathBuf>,
    /// Drop expired monitoring users' revocations (`--prune-revocations`).
    pub prune_revocations: bool,
}

/// An apply planned under the lock, not yet executed.
pub struct Prepared<'r> {
    root: &'r Root,
    lock: lock::Lock,
    /// `cotal.toml` as read, and as this apply will leave it (the same unless a verb edits it).
    text: String,
    new_text: String,
    desired: Desired,
    observed: Observed,
    /// The plan to execute.
    pub plan: Plan,
}

/// Lock the root, observe it and plan, refusing a stale saved plan.
pub fn prepare<'r>(root: &'r Root, req: Request) -> Result<Prepared<'r>> {
    desired_file::read_required(root)?;
    // The lock is taken before observing, but `lock.json` is written only once there is
    // something to do: a no-op apply writes nothing.
    let lock = lock::take(root, &crate::operator::holder(), req.lock_timeout)?;
    crate::fault::point(crate::fault::Point::AfterLock);
    let text = desired_file::read_required(root)?;
    let new_text = match req.edit {
        Some(edit) => edit(&text)?,
        None => text.clone(),
    };
    let (desired, digest) = observe::desired_from_text(root, &new_text)?;
    let intent = Intent {
        rotate: req.rotate,
        purge: req.purge,
        allow_degraded: req.allow_degraded,
        relocated: crate::ops::relocation::read_receipts(&req.relocated)?,
        prune_revocations: req.prune_revocations,
    };
    let observed = observe::observe(root, &desired, digest)?;
    // A rotation is its own change, never the one that finishes an interrupted apply (seed 000
    // §2.2 step 4, §3): `cotal apply` finishes it first.
    if intent.rotate.sys || !intent.rotate.accounts.is_empty() {
        apply::refuse_if_journal_open(
            &observed.journal,
            if intent.rotate.sys {
                "rotate sys"
            } else {
                "rotate account"
            },
        )?;
    }
    let planning = std::time::Instant::now();
    // What was observed is only this cotal's to act on while its lock is still the root's.
    lock.verify()?;
    if let (Some(verb), Some(only)) = (req.verb, &req.only) {
        // `space rm` of a space the open journal removes finishes that journal, and so does
        // `space purge` of a space whose purge it committed.
        let finishing = matches!(&observed.journal, JournalState::Valid(j)
            if (verb == SpaceVerb::Rm && j.removals.iter().any(|r| only.contains(&r.space)))
                || (verb == SpaceVerb::Purge
                    && j.purges.iter().any(|p| p.committed && only.contains(&p.space))));
        if !finishing {
            apply::refuse_if_journal_open(&observed.journal, &verb.to_string())?;
        }
    }
    // An imperative verb is judged on its own spaces' change alone: every other space is
    // planned as it is applied, so no other space's pending edit can refuse it.
    let plan = match &req.only {
        // A purge changes nothing of any space but the data: every space is planned as it is
        // applied, the purged one's protection as strict as cotal.toml or its record says.
        Some(only) if req.verb == Some(SpaceVerb::Purge) => {
            let none = BTreeSet::new();
            let mut narrowed = plan::narrow(&desired, &observed, &none);
            for name in only {
                if let (Some(declared), Some(space)) =
                    (desired.spec(name), narrowed.spaces.get_mut(name))
                {
                    space.spec.protect |= declared.protect;
                }
            }
            let mut plan = plan::compute(&narrowed, &observed, &intent)?.only(only);
            let others = plan::pending_elsewhere(&desired, &narrowed, &none);
            if !others.is_empty() {
                plan.warnings.push(format!(
                    "cotal.toml has pending changes ({}); they are left for `cotal apply`",
                    plan::list(&others)
                ));
            }
            plan
        }
        Some(only) => {
            let narrowed = plan::narrow(&desired, &observed, only);
            let mut plan = plan::compute(&narrowed, &observed, &intent)?.only(only);
            let others = plan::pending_elsewhere(&desired, &narrowed, only);
            if !others.is_empty() {
                plan.warnings.push(format!(
                    "cotal.toml has other pending changes ({}); they are left for `cotal apply`",
                    plan::list(&others)
                ));
            }
            plan
        }
        None => plan::compute(&desired, &observed, &intent)?,
    };
    if req.only.is_some() {
        let verb = req
            .verb
            .map_or_else(|| "rotate account".to_string(), |v| v.to_string());
        refuse_broker_changes(&plan, &verb)?;
    }
    let mut plan = plan;
    plan.target = Some(target(root, &observed, None));
    tracing::debug!(took = ?planning.elapsed(), steps = plan.steps.len(), "planned");
    if let Some(saved) = &req.saved {
        check_stale(saved, &plan)?;
    }
    Ok(Prepared {
        root,
        lock,
        text,
        new_text,
        desired,
        observed,
        plan,
    })
}

/// A verb narrowed to its spaces applies their change alone: a pending change of the broker
/// itself (a setting, the store, a listener's TLS, the route credential), whether cotal.toml or
/// a hand edit of server.conf made it, is never carried by it, since the operator asked for one
/// space's change. Refused, naming each, so `cotal apply` (which shows them) applies them; a
/// plan that finishes an interrupted apply is never refused.
fn refuse_broker_changes(plan: &Plan, verb: &str) -> Result<()> {
    use crate::plan::Step;
    // Finishing an interrupted apply is never refused: the journal must always be finishable.
    if plan
        .steps
        .iter()
        .any(|s| matches!(s, Step::FinishJournal { .. }))
    {
        return Ok(());
    }
    let pending: Vec<String> = plan
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::PromoteConfig { reasons, .. } => Some(reasons),
            _ => None,
        })
        .flatten()
        .filter(|r| r.broker_settings() > 0)
        .map(|r| r.to_string())
        .collect();
    if pending.is_empty() {
        return Ok(());
    }
    Err(Error::refused(
        crate::diagnostic::Diagnostic::new(format!(
            "`cotal {verb}` applies only its space's change, and this plan would also change the broker itself (an edit of cotal.toml's [broker] or [cluster], a file it names such as a certificate, or server.conf changed by hand): {}.",
            pending.join("; ")
        ))
        .blast("none, nothing was changed.")
        .next("`cotal apply` applies every pending change (its plan shows them all); then run the verb again if anything is left"),
    ))
}

/// What a plan of `root` is for: its folder and `cotal.toml`, the broker it targets (its
/// first node's client URL), and the state file it was made from, if any.
pub fn target(
    root: &Root,
    observed: &Observed,
    state: Option<&std::path::Path>,
) -> plan::PlanTarget {
    plan::PlanTarget {
        root: root.dir().display().to_string(),
        desired_file: root.desired_file().display().to_string(),
        broker: format!("nats://{}", observed.listener()),
        state: state.map(|s| s.display().to_string()),
    }
}

/// What an executed apply did, for the report; [`Applied::write_state`] then leaves the state
/// it made in `.cotal/state.json`.
pub struct Applied<'r> {
    pub outcome: apply::Outcome,
    /// Each reload's confirmation time (the slowest node's).
    pub reloads: Vec<Duration>,
    /// How many running nodes confirmed each reload (0: the broker was stopped).
    pub nodes: usize,
    pub clustered: bool,
    root: &'r Root,
    desired: Desired,
    before: Observed,
    plan: Plan,
}

impl Applied<'_> {
    /// Write the state the apply left (`.cotal/state.json`); a failure is a warning for the
    /// caller: the apply itself is done.
    pub fn write_state(&self) -> Result<()> {
        super::state::write_after_apply(
            self.root,
            &self.desired,
            &self.before,
            &self.outcome,
            &self.plan,
        )
    }
}

impl<'r> Prepared<'r> {
    /// The plan has no step: write the verb's edit (if any; it changes nothing applied) and
    /// leave everything else as it is.
    pub fn finish_empty(self) -> Result<()> {
        self.write_file()
    }

    /// Record the lock's holder (`lock.json`) now that there is something to do.
    pub fn announce(&mut self) -> Result<()> {
        self.lock.announce()
    }

    /// Reach the running broker's control plane (none when it is stopped): an apply that could
    /// not confirm its reload does not start.
    pub fn connect(&self) -> Result<Option<Running>> {
        match self.observed.process() {
            BrokerProcess::Running { .. } | BrokerProcess::Answering => Ok(Some(Running::connect(
                self.root,
                &self.desired.topology,
                &self.observed,
            )?)),
            BrokerProcess::Stopped => Ok(None),
            BrokerProcess::Unknown { .. } => {
                Err(plan::guard_liveness(&self.observed).unwrap_err().into())
            }
        }
    }

    /// Execute the plan (confirmed by the caller) against `running` (`None`: the broker is
    /// stopped).
    pub fn execute(self, running: Option<Running>, progress: &dyn Progress) -> Result<Applied<'r>> {
        let mut running = running;
        self.write_file()?;
        let nodes = plan::nodes(&self.desired, &self.observed);
        let ctx = Context {
            root: self.root,
            nodes: &nodes,
            observed: &self.observed,
            actor: crate::operator::actor(),
            lock: &self.lock,
            progress,
        };
        let executed = match running.as_mut() {
            Some(broker) => apply::execute(&ctx, &self.plan, broker),
            None => apply::execute(&ctx, &self.plan, &mut Stopped),
        };
        let outcome = match executed {
            Ok(outcome) => outcome,
            Err(e) => return Err(self.put_back_edit(e)?),
        };
        Ok(Applied {
            outcome,
            reloads: running
                .as_ref()
                .map(|r| r.reloads.clone())
                .unwrap_or_default(),
            nodes: running.as_ref().map_or(0, |r| r.server_ids().len()),
            clustered: self.desired.topology.is_cluster(),
            root: self.root,
            desired: self.desired,
            before: self.observed,
            plan: self.plan,
        })
    }

    fn write_file(&self) -> Result<()> {
        if self.new_text != self.text {
            desired_file::write(self.root, &self.new_text)?;
        }
        Ok(())
    }

    /// An edit made by an imperative verb goes with its apply: when nothing of it took effect
    /// (no removal past its commit point, no promotion, no lost lock), the file is put back.
    /// Returns the error to report.
    fn put_back_edit(&self, e: Error) -> Result<Error> {
        // An apply stopped by a signal past a commit point leaves its journal open, like an
        // interrupted one: the removal it committed is finished by the next apply, so the edit
        // that asked for it stays.
        let journal_open = matches!(e, Error::Stopped(_))
            && std::fs::symlink_metadata(self.root.journal()).is_ok();
        let nothing_took_effect = self.new_text != self.text
            && !journal_open
            && !matches!(e, Error::Interrupted(_) | Error::LockLost(_))
            && crate::store::generation::load(self.root)?.generation()
                == self.observed.generation.generation();
        if !nothing_took_effect {
            return Ok(e);
        }
        Ok(match desired_file::write(self.root, &self.text) {
            Ok(()) => e,
            Err(undo) => Error::other(format!(
                "{e}\n(cotal.toml keeps the edit: putting it back failed: {undo})"
            )),
        })
    }
}

/// Read a plan saved by `cotal plan --out FILE`.
pub fn load_saved(path: &std::path::Path) -> Result<Plan> {
    let bytes =
        crate::store::atomic::read_following_within(path, crate::observed::state::MAX_STATE_BYTES)
            .map_err(|e| Error::io(path, e))?;
    let plan: Plan = serde_json::from_slice(&bytes)
        .map_err(|e| Error::input(format!("{}: not a saved cotal plan: {e}", path.display())))?;
    if plan.format_version != plan::FORMAT_VERSION {
        return Err(Error::input(format!(
            "{}: plan format {} is not {}; make a new plan with this cotal",
            path.display(),
            plan.format_version,
            plan::FORMAT_VERSION
        )));
    }
    Ok(plan)
}

/// Refuse a saved plan whose inputs moved, naming each one.
fn check_stale(saved: &Plan, now: &Plan) -> Result<()> {
    let mut moved = Vec::new();
    if saved.pins.generation != now.pins.generation {
        moved.push(format!(
            "the generation moved from {} to {}",
            saved.pins.generation, now.pins.generation
        ));
    }
    if saved.pins.desired_digest != now.pins.desired_digest {
        moved.push("cotal.toml changed".to_string());
    }
    if saved.pins.inventory_digest != now.pins.inventory_digest {
        moved.push("the account inventory changed".to_string());
    }
    if saved.pins.config_digest != now.pins.config_digest {
        moved.push("server.conf changed".to_string());
    }
    if saved.broker_running != now.broker_running {
        moved.push(format!(
            "the broker {} since the plan was made (a reload, and its evictions, would {})",
            if now.broker_running {
                "started"
            } else {
                "stopped"
            },
            if now.broker_running {
                "now happen"
            } else {
                "no longer happen"
            }
        ));
    }
    // The include's content and the TLS certificate are read beside cotal.toml, not pinned by
    // its digest: what they render must be what was reviewed.
    let rendered = |p: &Plan| {
        p.config.as_ref().map(|c| {
            let mut texts = vec![c.after.clone()];
            texts.extend(c.nodes.iter().map(|n| n.after.clone()));
            texts
        })
    };
    if moved.is_empty() && rendered(saved) != rendered(now) {
        moved.push(
            "the config it renders changed since the plan (the include's content, or the TLS certificate)"
                .to_string(),
        );
    }
    if moved.is_empty() && saved.decision_digest() != now.decision_digest() {
        moved.push(
            "its steps are not the ones this root plans now: what the broker holds changed since (streams, connections, a channel registry), or the saved file was edited"
                .to_string(),
        );
    }
    if moved.is_empty() {
        Ok(())
    } else {
        Err(Error::stale_plan(moved.join("; ")))
    }
}
