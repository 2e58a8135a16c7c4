//! `cotal apply [FILE]`: runs [`crate::ops::apply`] and presents it: the plan, the confirmation
//! and the report. The `cotal space` verbs and `cotal rotate` present their applies here too.

use super::Global;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::ops::apply::{self as op, Request};
use crate::plan::Plan;
use crate::report::{Format, Palette, outcome};
use crate::store::Root;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A plan saved by `cotal plan --out FILE`: apply exactly it, refusing when it is stale.
    /// The saved plan is the approval: nothing is asked (a plan that destroys data still needs
    /// --allow-destroy).
    pub plan_file: Option<PathBuf>,
    #[command(flatten)]
    pub confirm: ConfirmArgs,
}

/// Confirmation and locking options of `apply` and the verbs that may destroy data: a verb's
/// own ([`VerbArgs`]) and what only such a plan needs.
#[derive(Debug, Clone, clap::Args)]
pub struct ConfirmArgs {
    #[command(flatten)]
    pub common: VerbArgs,
    /// Allow a plan that destroys data (removes spaces) without an interactive `yes`.
    #[arg(long)]
    pub allow_destroy: bool,
    /// Drop the revocations of monitoring users whose recorded expiry has passed (the plan
    /// names them; check the host's clock first: revoked creds whose expiry has not really
    /// passed would connect again).
    #[arg(long)]
    pub prune_revocations: bool,
    /// The receipt `cotal space restore` wrote on the destination of a move: a space whose
    /// move this root recorded (`cotal space backup` of it fenced) is removed only with it.
    /// Repeat for several.
    #[arg(long, value_name = "RECEIPT")]
    pub relocated: Vec<std::path::PathBuf>,
}

/// The confirmation options every applying verb has. A space verb that never destroys data
/// (add, suspend, resume, archive) has only these: `--allow-destroy`, `--prune-revocations` and
/// `--relocated` are not offered, since its plan is narrowed to its space and holds nothing
/// they would allow.
#[derive(Debug, Clone, clap::Args)]
pub struct VerbArgs {
    /// Do not ask for confirmation.
    #[arg(long)]
    pub auto_approve: bool,
    /// How long to wait for the root's lock (0: fail at once naming the holder).
    #[arg(long, value_parser = super::parse_duration, default_value = "0")]
    pub lock_timeout: Duration,
    /// Output format of the plan shown before applying.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Show the whole server.conf diff (the text plan shows its first 40 lines otherwise).
    #[arg(long)]
    pub diff: bool,
    /// On a cluster with nodes down: proceed when a majority of the nodes run and confirm; the
    /// others get their config file for their next start (the plan says which).
    #[arg(long)]
    pub allow_degraded: bool,
}

impl VerbArgs {
    /// The apply's options for this verb: destroying only when the verb's own flag allows.
    pub fn confirm(&self, allow_destroy: bool, relocated: Vec<std::path::PathBuf>) -> ConfirmArgs {
        ConfirmArgs {
            common: self.clone(),
            allow_destroy,
            prune_revocations: false,
            relocated,
        }
    }
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let root = global.root()?;
    let saved = args.plan_file.as_deref().map(op::load_saved).transpose()?;
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

/// Present one apply: the plan, the confirmation, the outcome.
pub fn flow(global: &Global, root: &Root, confirm_args: &ConfirmArgs, req: Request) -> Result<i32> {
    // The time an apply reports is the whole of it: lock, observe, plan, confirm, execute.
    let progress = super::progress::Bar::new();
    // A saved plan is the approval (as in Terraform): it was reviewed with its blast radius,
    // and its pins refuse it when anything it was made from moved, so it is not asked again.
    let approved = req.saved.is_some();
    let mut prepared = op::prepare(
        root,
        Request {
            lock_timeout: confirm_args.common.lock_timeout,
            allow_degraded: confirm_args.common.allow_degraded,
            prune_revocations: confirm_args.prune_revocations,
            relocated: confirm_args.relocated.clone(),
            ..req
        },
    )?;
    let shown = super::format_plan(
        &prepared.plan,
        confirm_args.common.format,
        global.colour,
        crate::report::TextOptions {
            whole_diff: confirm_args.common.diff,
            destroy_hint: !confirm_args.allow_destroy,
        },
    );
    // With --format json the one document of the outcome is printed at the end (the plan in
    // it); the plan is not printed before.
    let json = confirm_args.common.format == Format::Json;
    // The plan is not shown before a JSON apply, so nobody can be asked to approve it.
    if json && !approved && !confirm_args.common.auto_approve {
        return Err(Error::input(
            Diagnostic::new(
                "--format json prints what was done once it is done; it shows no plan to approve, so it needs --auto-approve (or a saved plan); nothing was changed.",
            )
            .next("review `cotal plan`, then `cotal apply --auto-approve --format json` (or `cotal plan --out plan.json` and `cotal apply plan.json --format json`)"),
        ));
    }
    if prepared.plan.is_empty() {
        let plan = prepared.plan.clone();
        prepared.finish_empty()?;
        if json {
            print!(
                "{}",
                outcome::Outcome {
                    format_version: outcome::FORMAT_VERSION,
                    status: outcome::Status::NoChanges,
                    plan: &plan,
                    generation: None,
                    reloads_ms: Vec::new(),
                    nodes: 0,
                    failed: Vec::new(),
                    reaped: Vec::new(),
                    purged: Vec::new(),
                    reap_failures: Vec::new(),
                    duration_ms: progress.elapsed().as_millis() as u64,
                }
                .json()
            );
        } else {
            print!("{shown}");
        }
        return Ok(0);
    }
    prepared.announce()?;
    tracing::debug!("announced");
    if !json {
        print!("{shown}");
    }
    let running = prepared.connect()?;
    if approved {
        // Destroying data is never approved by a file alone: the flag says the operator on
        // this host means it (the hidden removal a pull request could try stops here too).
        if prepared.plan.destroys_data() && !confirm_args.allow_destroy {
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "this saved plan destroys data ({}); a saved plan approves everything else, but destroying data also needs --allow-destroy.",
                    prepared
                        .plan
                        .destroyed_spaces()
                        .iter()
                        .map(|s| s.quoted())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
                .blast("none, nothing was changed.")
                .next("review the plan above, then re-run with --allow-destroy"),
            ));
        }
        if confirm_args.common.format == Format::Text {
            println!("\nApplying the saved plan: it is the approval, so nothing is asked.");
        }
    } else {
        confirm(&prepared.plan, confirm_args)?;
    }
    // From here a Ctrl-C stops at the next step boundary (a second one at once).
    crate::interrupt::watch()?;
    let summary = prepared.plan.summary;
    let prepared_plan = prepared.plan.clone();
    let applied = prepared.execute(running, &progress)?;

    // With a machine-readable plan on stdout, the progress report goes to stderr.
    let report = |line: String| {
        if confirm_args.common.format == Format::Text {
            println!("{line}");
        } else {
            eprintln!("{line}");
        }
    };
    report_outcome(
        &report,
        global,
        root,
        &applied,
        (summary, progress.elapsed()),
    );
    let p = Palette::new(global.colour);
    if json {
        print!(
            "{}",
            outcome::document(
                &prepared_plan,
                &applied.outcome,
                &applied.reloads,
                applied.nodes,
                progress.elapsed()
            )
        );
    }
    if !applied.outcome.failed.is_empty() {
        // On standard error, like every failure: what failed and what to do next.
        eprintln!(
            "{} partly applied: {} space step(s) failed; every other step is done.",
            p.remove.apply_to("error:"),
            applied.outcome.failed.len()
        );
        for f in &applied.outcome.failed {
            eprintln!("  {f}");
        }
        eprintln!(
            "next: fix what each names (the space's own streams, connections or registry), then `cotal apply` again: it plans only what is left"
        );
        return Ok(crate::error::exit::PARTLY_APPLIED);
    }
    Ok(0)
}

/// The apply's outcome for people, line by line through `report`: each reload confirmed, the
/// summary, the generations, the state file's write, what was reaped and purged.
fn report_outcome(
    report: &dyn Fn(String),
    global: &Global,
    root: &Root,
    applied: &op::Applied,
    (summary, elapsed): (crate::plan::Summary, Duration),
) {
    for took in &applied.reloads {
        let ms = took.as_secs_f64() * 1000.0;
        let nodes = applied.nodes;
        report(if applied.clustered {
            format!(
                "Reload confirmed by all {nodes} running nodes in {ms:.1} ms (the slowest node's reply to its reload request, sent to every node at once, then VARZ on each node: its promoted config's digest); the data plane verified on every running node."
            )
        } else {
            format!(
                "Reload confirmed by nats-server in {ms:.1} ms (its reply to the reload request, then VARZ: the promoted config's digest); the data plane verified."
            )
        });
    }
    let p = Palette::new(global.colour);
    report(String::new());
    report(
        p.bold
            .apply_to(format!(
                "Apply {}: {} added, {} changed, {} removed{}, in {}.",
                if applied.outcome.failed.is_empty() {
                    "complete"
                } else {
                    "partly complete"
                },
                summary.add,
                summary.change,
                summary.remove,
                crate::report::settings_clause(summary.settings, "changed"),
                super::progress::took(elapsed)
            ))
            .to_string(),
    );
    if let Some((from, to)) = applied.outcome.generations() {
        report(format!("Generation {from} -> {to}."));
    }
    if let Err(e) = applied.write_state() {
        eprintln!(
            "warning: the apply {}, but {} could not be written: {e}",
            if applied.outcome.failed.is_empty() {
                "is complete"
            } else {
                "ran every other step"
            },
            root.state_file().display()
        );
    }
    for (space, removed) in &applied.outcome.reaped {
        if !removed.is_empty() {
            report(format!(
                "Reaped {}: {}.",
                space.quoted(),
                removed.join(", ")
            ));
        }
    }
    for p in &applied.outcome.purged {
        report(format!(
            "Purged {}: {} stream(s) and bucket(s) emptied, {} message(s).",
            p.space.quoted(),
            p.streams,
            crate::model::human_count(p.messages)
        ));
    }
    for f in &applied.outcome.reap_failures {
        report(format!(
            "{} could not reap {f} (the removal is complete; delete it by hand)",
            p.warn.apply_to("warning:")
        ));
    }
}

fn confirm(plan: &Plan, args: &ConfirmArgs) -> Result<()> {
    if args.common.auto_approve {
        if plan.destroys_data() && !args.allow_destroy {
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "this plan destroys data ({}); --auto-approve alone does not allow that.",
                    plan.destroyed_spaces()
                    .iter()
                    .map(|s| s.quoted())
                    .collect::<Vec<_>>()
                    .join(", ")
                ))
                .blast("none, nothing was changed.")
                .next("review the plan and re-run with --allow-destroy, or answer `yes` interactively"),
            ));
        }
        return Ok(());
    }
    ask_yes(
        &format!(
            "Do you want to perform these actions{}?",
            if plan.destroys_data() {
                ", destroying the data shown above"
            } else {
                ""
            }
        ),
        "apply",
    )
}

/// Ask `question` at the terminal; only `yes` goes on. Refused without a terminal (pass
/// --auto-approve); a signal at the prompt or another answer cancels `verb`, nothing changed.
pub fn ask_yes(question: &str, verb: &str) -> Result<()> {
    if !std::io::stdin().is_terminal() {
        return Err(Error::refused(
            Diagnostic::new("standard input is not a terminal, so there is nobody to type `yes`.")
                .next("pass --auto-approve (and --allow-destroy for a plan that destroys data)"),
        ));
    }
    // A Ctrl-C at the prompt cancels: nothing was changed, and the lock is released.
    crate::interrupt::watch()?;
    print!("\n{question} Only 'yes' will be accepted: ");
    std::io::stdout().flush()?;
    if !crate::interrupt::wait_for_input()? {
        println!();
        return Err(Error::stopped(format!(
            "{verb} cancelled by a signal at the prompt; nothing was changed."
        )));
    }
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if answer.trim() == "yes" {
        Ok(())
    } else {
        Err(Error::other(format!(
            "{verb} cancelled; nothing was changed"
        )))
    }
}
