//! `cotal apply [FILE]`: lock, re-observe, re-plan, (check a saved plan), confirm, execute. The
//! same flow serves the imperative `cotal space` verbs, which edit `cotal.toml` first and apply
//! only their own change.

use super::Global;
use crate::apply::{self, Context};
use crate::broker::{Running, Stopped};
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::observe;
use crate::observed::{BrokerProcess, JournalState};
use crate::plan::{self, Plan};
use crate::report::{Format, Palette};
use crate::store::{Root, desired_file, lock};
use std::collections::BTreeSet;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A plan saved by `cotal plan --out FILE`: apply exactly it, refusing when it is stale.
    pub plan_file: Option<PathBuf>,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

/// Confirmation and locking options shared by apply and the space verbs.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfirmArgs {
    /// Do not ask for confirmation.
    #[arg(long)]
    pub auto_approve: bool,
    /// Allow a plan that destroys data (removes spaces) without an interactive `yes`.
    #[arg(long)]
    pub allow_destroy: bool,
    /// How long to wait for the root's lock (0: fail at once naming the holder).
    #[arg(long, value_parser = super::parse_duration, default_value = "0")]
    pub lock_timeout: Duration,
    /// Output format of the plan shown before applying.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// On a cluster with nodes down: proceed when a majority of the nodes run and confirm; the
    /// others get their config file for their next start (the plan says which).
    #[arg(long)]
    pub allow_degraded: bool,
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let root = global.root()?;
    let saved = args.plan_file.as_deref().map(load_saved).transpose()?;
    flow(
        global,
        &root,
        &args.confirm,
        Request {
            saved,
            ..Request::default()
        },
    )
}

/// The imperative verbs that run the apply flow on their own space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpaceVerb {
    Add,
    Rm,
    Suspend,
    Resume,
}

impl std::fmt::Display for SpaceVerb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SpaceVerb::Add => "space add",
            SpaceVerb::Rm => "space rm",
            SpaceVerb::Suspend => "space suspend",
            SpaceVerb::Resume => "space resume",
        })
    }
}

/// An edit of `cotal.toml`'s text.
pub type Edit<'a> = &'a dyn Fn(&str) -> Result<String>;

/// What a caller of the apply flow asks for beyond the confirmation options.
#[derive(Default)]
pub struct Request<'a> {
    pub saved: Option<Plan>,
    /// Edit `cotal.toml` (under the lock); the edit is written only when the plan executes.
    pub edit: Option<Edit<'a>>,
    /// Apply only these spaces' changes.
    pub only: Option<BTreeSet<SpaceName>>,
    /// The imperative verb, for refusals; `None` for apply.
    pub verb: Option<SpaceVerb>,
    /// Keys this run replaces (`cotal rotate`).
    pub rotate: plan::Rotate,
}

/// Lock, observe, plan, confirm, execute.
pub fn flow(global: &Global, root: &Root, confirm_args: &ConfirmArgs, req: Request) -> Result<i32> {
    // The time an apply reports is the whole of it: lock, observe, plan, confirm, execute.
    let progress = super::progress::Bar::new();
    desired_file::read_required(root)?;
    // The lock is taken before observing, but `lock.json` is written only once there is
    // something to do: a no-op apply writes nothing.
    let mut lock = lock::take(root, &crate::operator::holder(), confirm_args.lock_timeout)?;
    crate::fault::point(crate::fault::Point::AfterLock);
    let text = desired_file::read_required(root)?;
    let new_text = match req.edit {
        Some(edit) => edit(&text)?,
        None => text.clone(),
    };
    let (desired, digest) = observe::desired_from_text(root, &new_text)?;
    let intent = plan::Intent {
        rotate: req.rotate.clone(),
        allow_degraded: confirm_args.allow_degraded,
    };
    let observed = observe::observe(root, &desired, digest)?;
    // What was observed is only this cotal's to act on while its lock is still the root's.
    lock.verify()?;
    if let (Some(verb), Some(only)) = (req.verb, &req.only) {
        // `space rm` of a space the open journal removes finishes that journal.
        let finishing = matches!(&observed.journal, JournalState::Open(j)
            if verb == SpaceVerb::Rm && j.removals.iter().any(|r| only.contains(&r.space)));
        if !finishing {
            apply::refuse_if_journal_open(&observed.journal, &verb.to_string())?;
        }
    }
    // An imperative verb is judged on its own spaces' change alone: every other space is
    // planned as it is applied, so no other space's pending edit can refuse it.
    let plan = match &req.only {
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
    if let Some(saved) = &req.saved {
        check_stale(saved, &plan)?;
    }
    let write_file = || -> Result<()> {
        if new_text != text {
            desired_file::write(root, &new_text)?;
        }
        Ok(())
    };
    // With a machine-readable plan on stdout, the progress report goes to stderr.
    let report = |line: String| {
        if confirm_args.format == Format::Text {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    };
    if plan.is_empty() {
        write_file()?;
        print!(
            "{}",
            super::format_plan(&plan, confirm_args.format, global.colour)
        );
        return Ok(0);
    }
    lock.announce()?;
    print!(
        "{}",
        super::format_plan(&plan, confirm_args.format, global.colour)
    );
    // The running broker's control plane is reached before anything is confirmed or written:
    // an apply that could not confirm its reload does not start.
    let mut running = match observed.process() {
        BrokerProcess::Running { .. } | BrokerProcess::Answering => {
            Some(Running::connect(root, &desired.topology, &observed)?)
        }
        BrokerProcess::Stopped => None,
        BrokerProcess::Unknown { .. } => {
            return Err(plan::guard_liveness(&observed).unwrap_err().into());
        }
    };
    confirm(&plan, confirm_args)?;
    write_file()?;

    let nodes = plan::nodes(&desired, &observed);
    let ctx = Context {
        root,
        nodes: &nodes,
        observed: &observed,
        actor: crate::operator::actor(),
        lock: &lock,
        progress: &progress,
    };
    let executed = match running.as_mut() {
        Some(broker) => apply::execute(&ctx, &plan, broker),
        None => apply::execute(&ctx, &plan, &mut Stopped),
    };
    let outcome = match executed {
        Ok(outcome) => outcome,
        // An edit made by an imperative verb goes with its apply: when nothing of it took
        // effect (no removal past its commit point, no promotion, no lost lock), the file is put
        // back.
        Err(e)
            if new_text != text
                && !matches!(e, Error::Interrupted(_) | Error::LockLost(_))
                && crate::store::generation::load(root)?.generation()
                    == observed.generation.generation() =>
        {
            return Err(match desired_file::write(root, &text) {
                Ok(()) => e,
                Err(undo) => Error::Other(format!(
                    "{e}\n(cotal.toml keeps the edit: putting it back failed: {undo})"
                )),
            });
        }
        Err(e) => return Err(e),
    };
    if let Some(broker) = &running {
        let nodes = broker.server_ids().len();
        for took in &broker.reloads {
            let ms = took.as_secs_f64() * 1000.0;
            report(if desired.topology.is_cluster() {
                format!(
                    "Reload confirmed by all {nodes} running nodes in {ms:.1} ms (the slowest node's reply to its reload request, sent to every node at once, then VARZ on each node: its promoted config's digest); the data plane verified on every running node."
                )
            } else {
                format!(
                    "Reload confirmed by nats-server in {ms:.1} ms (its reply to the reload request, then VARZ: the promoted config's digest); the data plane verified."
                )
            });
        }
    }
    let p = Palette::new(global.colour);
    report(String::new());
    report(
        p.bold
            .apply_to(format!(
                "Apply complete: {} added, {} changed, {} removed, in {}.",
                plan.summary.add,
                plan.summary.change,
                plan.summary.remove,
                super::progress::took(progress.elapsed())
            ))
            .to_string(),
    );
    if let Some((from, to)) = outcome.generation {
        report(format!("Generation {from} -> {to}."));
    }
    super::state_cmd::write_after_apply(root, &desired, &observed, &outcome, &plan);
    for f in &outcome.reap_failures {
        report(format!(
            "{} could not reap {f} (the removal is complete; delete it by hand)",
            p.warn.apply_to("warning:")
        ));
    }
    Ok(0)
}

pub fn load_saved(path: &std::path::Path) -> Result<Plan> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let plan: Plan = serde_json::from_slice(&bytes)
        .map_err(|e| Error::Input(format!("{}: not a saved cotal plan: {e}", path.display())))?;
    if plan.format_version != plan::FORMAT_VERSION {
        return Err(Error::Input(format!(
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
    if moved.is_empty() && saved.decision_digest() != now.decision_digest() {
        moved.push(
            "its steps are not the ones this root plans now: what the broker holds changed since (streams, connections, a channel registry), or the saved file was edited"
                .to_string(),
        );
    }
    if moved.is_empty() {
        Ok(())
    } else {
        Err(Error::StalePlan(moved.join("; ")))
    }
}

fn confirm(plan: &Plan, args: &ConfirmArgs) -> Result<()> {
    if args.auto_approve {
        if plan.destroys_data() && !args.allow_destroy {
            return Err(Error::Refused(format!(
                "this plan destroys data ({}); --auto-approve alone does not allow that.\n\
                 blast radius: none, nothing was changed.\n\
                 next: review the plan and re-run with --allow-destroy, or answer `yes` interactively",
                plan.removed_spaces()
                    .iter()
                    .map(|s| s.quoted())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(Error::Refused(
            "standard input is not a terminal, so there is nobody to type `yes`.\n\
             next: pass --auto-approve (and --allow-destroy for a plan that destroys data)"
                .into(),
        ));
    }
    print!(
        "\nDo you want to perform these actions{}? Only 'yes' will be accepted: ",
        if plan.destroys_data() {
            ", destroying the data shown above"
        } else {
            ""
        }
    );
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if answer.trim() == "yes" {
        Ok(())
    } else {
        Err(Error::Other("apply cancelled; nothing was changed".into()))
    }
}
