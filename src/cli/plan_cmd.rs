//! `cotal plan`: observe, compute the plan, print it; optionally save it for `apply FILE`.

use super::Global;
use super::out_file::Target;
use crate::diagnostic::Diagnostic;
use crate::error::{Result, exit};
use crate::observe;
use crate::plan;
use crate::report::{self, Format};
use crate::store::atomic;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Save the plan (JSON, pinned to the generation and the digests of its inputs) for `cotal
    /// apply FILE`; `-` writes it to standard output (the plan for people then goes to standard
    /// error). An existing file is replaced only with --force; a link or special file never.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace an existing --out file.
    #[arg(long, requires = "out")]
    pub force: bool,
    /// Exit 2 when there are changes, 0 when there are none.
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Show the whole server.conf diff (the text plan shows its first 40 lines otherwise).
    #[arg(long)]
    pub diff: bool,
    /// Plan cotal.toml against a secret-free state (`cotal state export`, or a root's
    /// `.cotal/state.json`) instead of the root: no seed, no broker, no `.cotal/` needed (a
    /// pull request's CI). Figures that need the broker are unavailable.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// The public key the --state file must be signed with (`cotal state key` prints it on the
    /// broker host). Give it from outside the pull request (a repository setting): a state
    /// that is unsigned, signed by another key or edited after it was signed is refused.
    /// Ignored without --state, so a shell or job that exports the key still plans on a root.
    #[arg(long, value_name = "KEY", env = "COTAL_STATE_KEY")]
    pub state_key: Option<String>,
    /// Plan against the --state file without checking its signature; every plan printed then
    /// says so on its first line. For a state you made yourself, never for one a pull request
    /// brings.
    /// A --state-key given too (the environment's) is then not used.
    #[arg(long, requires = "state")]
    pub unverified_state: bool,
    /// Plan as `cotal apply --allow-degraded` would: on a cluster with nodes down, proceed when
    /// a majority runs.
    #[arg(long)]
    pub allow_degraded: bool,
    /// Plan as `cotal apply --prune-revocations` would: drop the revocations of monitoring
    /// users whose recorded expiry has passed.
    #[arg(long)]
    pub prune_revocations: bool,
    /// Plan as `cotal apply --relocated RECEIPT` would: the receipt of a move a removal ends.
    #[arg(long, value_name = "RECEIPT")]
    pub relocated: Vec<std::path::PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// A plan saved with `cotal plan --out FILE`.
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Show the whole server.conf diff (the text plan shows its first 40 lines otherwise).
    #[arg(long)]
    pub diff: bool,
}

/// `cotal show FILE`: a saved plan, printed.
pub fn show(global: &Global, args: ShowArgs) -> Result<i32> {
    let plan = crate::ops::apply::load_saved(&args.file)?;
    print!(
        "{}",
        super::format_plan(
            &plan,
            args.format,
            global.colour,
            crate::report::TextOptions::diff(args.diff)
        )
    );
    Ok(exit::OK)
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let root = global.root()?;
    let out = args
        .out
        .as_deref()
        .map(|raw| Target::check(raw, args.force, Some(&root)))
        .transpose()?;
    if let (Some(Target::File(out)), Some(state)) = (&out, &args.state)
        && std::fs::canonicalize(state).ok() == std::fs::canonicalize(out).ok()
    {
        return Err(crate::error::Error::input(
            Diagnostic::new(format!(
                "--out {} is the state file the plan is made from; nothing was written.",
                out.display()
            ))
            .next("save the plan elsewhere"),
        ));
    }
    let intent = plan::Intent {
        allow_degraded: args.allow_degraded,
        prune_revocations: args.prune_revocations,
        relocated: crate::ops::relocation::read_receipts(&args.relocated)?,
        ..Default::default()
    };
    // On a root, `cotal.toml` is parsed while the records are read.
    let (desired, observed) = match &args.state {
        Some(file) => {
            let (desired, digest) = observe::desired(&root)?;
            let trust = match (&args.state_key, args.unverified_state) {
                (_, true) => Trust::Unverified,
                (Some(key), false) => Trust::Key(key),
                (None, false) => {
                    return Err(crate::error::Error::input(
                        Diagnostic::new(format!(
                            "no state key was given to check {} against: a state a pull request brings can say anything; nothing was planned.",
                            file.display()
                        ))
                        .next("give the broker's public state key (`cotal state key` on the broker host) with --state-key or COTAL_STATE_KEY; for a state you made yourself, --unverified-state"),
                    ));
                }
            };
            let mut observed = from_state(file, &desired, digest, trust)?;
            // The include is a file beside cotal.toml, in the pull request as it is on the root.
            observed.include = desired
                .broker
                .include
                .as_ref()
                .map(|p| crate::include::observe(root.dir(), &p.path, &p.at));
            (desired, observed)
        }
        None => observe::observe_parsing(&root)?,
    };
    let mut plan = plan::compute(&desired, &observed, &intent)?;
    plan.target = Some(crate::ops::apply::target(
        &root,
        &observed,
        args.state.as_deref(),
    ));
    if args.unverified_state {
        plan.notice = Some(UNVERIFIED_NOTICE.to_string());
    }
    let shown = super::format_plan(
        &plan,
        args.format,
        global.colour,
        crate::report::TextOptions::diff(args.diff),
    );
    match &out {
        Some(Target::Stdout) => {
            eprint!("{shown}");
            Target::Stdout.write(report::json(&plan).as_bytes(), atomic::PUBLIC)?;
        }
        Some(file) => {
            print!("{shown}");
            file.write(report::json(&plan).as_bytes(), atomic::PUBLIC)?;
            if args.format == Format::Text {
                println!("\nSaved the plan to {file}. Apply exactly it with `cotal apply {file}`.");
            }
        }
        None => print!("{shown}"),
    }
    let code = if args.detailed_exitcode && !plan.is_empty() {
        exit::CHANGES
    } else {
        exit::OK
    };
    // The process ends with this verb: freeing the observation of thousands of spaces, and the
    // plan made of it, would cost a millisecond for nothing.
    std::mem::forget((desired, observed, plan));
    Ok(code)
}

/// What every plan made with `--unverified-state` says first.
pub const UNVERIFIED_NOTICE: &str = "this plan was made from a state whose signature was not checked (--unverified-state): it shows what the state file says, which may not be what the broker runs.";

/// How a state file is trusted: signed by this public state key, or not checked at all.
#[derive(Debug, Clone, Copy)]
enum Trust<'a> {
    Key(&'a str),
    Unverified,
}

/// The observation a state file stands for (no root, no seed, no broker). The file comes with
/// a pull request, and what cotal says of it is posted publicly: a link, a FIFO, a device or a
/// file over [`crate::observed::state::MAX_STATE_BYTES`] is refused unread, a parse error names the
/// line and column, never a value, and a state not signed by the trusted key is refused.
fn from_state(
    file: &std::path::Path,
    desired: &crate::desired::Desired,
    digest: String,
    trust: Trust,
) -> Result<crate::observed::Observed> {
    use crate::error::Error;
    use crate::store::atomic::{Found, read_no_follow_within};
    let next = "pass the state file itself: a regular file of at most 64 MiB, as `cotal state export --out FILE` writes it";
    let found = read_no_follow_within(file, crate::observed::state::MAX_STATE_BYTES)
        .map_err(|e| Error::input(crate::diagnostic::Diagnostic::new(e.to_string()).next(next)))?;
    let bytes = match found {
        Found::File(bytes) => bytes,
        Found::Absent => {
            return Err(Error::input(
                crate::diagnostic::Diagnostic::new(format!("{}: no such file", file.display()))
                    .next(next),
            ));
        }
        Found::NotRegular(kind) => {
            return Err(Error::input(
                crate::diagnostic::Diagnostic::new(format!(
                    "{} is {kind}, not a regular file: a state is read from a file only; nothing was read.",
                    file.display()
                ))
                .next(next),
            ));
        }
    };
    let state: crate::observed::state::StateFile = serde_json::from_slice(&bytes).map_err(|e| {
        Error::input(
            crate::diagnostic::Diagnostic::new(format!(
                "{}:{}:{}: not a cotal state ({}; the file's values are not shown)",
                file.display(),
                e.line(),
                e.column(),
                match e.classify() {
                    serde_json::error::Category::Io => "unreadable",
                    serde_json::error::Category::Syntax => "not JSON",
                    serde_json::error::Category::Data => "a field of the wrong type, or missing",
                    serde_json::error::Category::Eof => "cut short",
                }
            ))
            .next(next),
        )
    })?;
    if let Trust::Key(key) = trust {
        if !crate::trust::state_signature::is_public_key(key) {
            return Err(Error::input(
                crate::diagnostic::Diagnostic::new(format!(
                    "--state-key {key} is not a public state key (an nkey starting with M); nothing was planned."
                ))
                .next("give the key `cotal state key` prints on the broker host"),
            ));
        }
        crate::trust::state_signature::verify(&state, key).map_err(|why| {
            Error::refused(
                crate::diagnostic::Diagnostic::new(format!(
                    "{} is not a state the broker signed: {why}; nothing was planned.",
                    file.display()
                ))
                .blast("none: no plan was made from it.")
                .next("plan against the state the broker host wrote (its `.cotal/state.json`, or `cotal state export`), as the base branch holds it, never as a pull request changed it"),
            )
        })?;
    }
    crate::observed::state::observed(&state, desired, digest, crate::clock::now())
        .map_err(|e| Error::input(format!("{}: {e}", file.display())))
}
