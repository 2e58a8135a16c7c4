//! The command line: parse, observe, plan, render, confirm, apply. Thin: every decision lives
//! in the pure core or the executor.

mod adopt_cmd;
mod apply_cmd;
mod audit_cmd;
mod backup_cmd;
mod broker_cmd;
mod creds_cmd;
mod evict_cmd;
mod fmt_cmd;
mod init;
mod out_file;
mod output;
mod plan_cmd;
mod progress;
mod root_cmd;
mod rotate_cmd;
mod space_cmd;
mod state_cmd;
mod status_cmd;
mod validate_cmd;

use crate::diagnostic::Diagnostic;
use crate::error::Result;
use crate::report::Format;
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// The exit codes, as `cotal --help` ends (docs/reference/exit-codes.md says more of each).
const EXIT_CODES: &str = "\
Exit codes:
  0    done, or no changes
  1    error: bad input, I/O (nothing changed unless the message says otherwise)
  2    changes present (plan --detailed-exitcode; fmt --check)
  3    refused by a guard (the message names the tenants, the blast radius, the next step)
  4    the root's lock is held (the message names the holder)
  5    a saved plan is stale
  6    an apply was interrupted: its journal is open; `cotal apply` finishes it
  7    a reload was not confirmed: everything the apply changed was put back
  8    partly applied (or `up` partly done): some spaces' own steps failed, every other step is done
  64   usage error (an unknown flag, a missing argument)
  130  stopped by a signal at a step boundary; `cotal apply` finishes it

Examples:
  cotal init && cotal plan && cotal apply
  cotal plan --out plan.json && cotal apply plan.json
  cotal plan --state state.json --state-key \"$COTAL_STATE_KEY\" --format markdown
  cotal space add ops --limit max_connections=50 --auto-approve";

#[derive(Debug, Parser)]
#[command(
    name = "cotal",
    version,
    about = "Declarative tenants (spaces) on a shared NATS broker",
    after_help = "`cotal --help` lists the exit codes and examples.",
    after_long_help = EXIT_CODES
)]
pub struct Cli {
    /// The root directory (else COTAL_ROOT, else the nearest ancestor holding cotal.toml or .cotal/).
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        help_heading = "Global options"
    )]
    pub root: Option<PathBuf>,
    /// Colour output.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t = ColorChoice::Auto,
        help_heading = "Global options"
    )]
    pub color: ColorChoice,
    /// More logging on stderr (-v info, -vv debug, -vvv trace); RUST_LOG works too.
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = "Global options")]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the broker trust of a new root (operator, system account) and a starter cotal.toml.
    #[command(
        after_help = "Examples:\n  mkdir mybroker && cd mybroker && cotal init\n  cotal --root /srv/cotal init"
    )]
    Init(init::Args),
    /// Bring a root the original Cotal made, or an operator managed with nsc (--nsc), under
    /// cotal: keeps every key, writes cotal.toml from what it finds.
    #[command(
        after_help = "Examples:\n  cotal --root /srv/cotal adopt              # shows what it found and will do, asks `yes`\n  cotal adopt --auto-approve                 # CI; a second run is a no-op\n  cotal adopt --nsc ~/.local/share/nats/nsc --server-config /etc/nats/nats.conf\n  cotal adopt --nsc DIR --account team --account billing=payments --keep-claims"
    )]
    Adopt(adopt_cmd::Args),
    /// Show what apply would change, with its blast radius.
    #[command(
        after_help = "Examples:\n  cotal plan\n  cotal plan --detailed-exitcode            # CI: exit 2 when there are changes\n  cotal plan --out plan.json                 # review it, then `cotal apply plan.json`\n  cotal plan --state state.json --state-key \"$COTAL_STATE_KEY\" --format markdown"
    )]
    Plan(plan_cmd::Args),
    /// Make the broker match cotal.toml (or execute a saved plan).
    #[command(
        after_help = "Examples:\n  cotal apply                                # shows the plan, asks for `yes`\n  cotal apply --auto-approve                 # CI (removals also need --allow-destroy)\n  cotal apply plan.json                      # exactly the reviewed plan; nothing asked\n  cotal apply --auto-approve --format json   # one document of what was done"
    )]
    Apply(apply_cmd::Args),
    /// Render server.conf from the inventory and start nats-server; provision what is missing.
    #[command(after_help = "Examples:\n  cotal up\n  cotal up --timeout 60s --format json")]
    Up(broker_cmd::UpArgs),
    /// Stop the broker (SIGTERM, grace, SIGKILL).
    #[command(
        after_help = "Examples:\n  cotal down\n  cotal down --preserve-state              # then `cotal space backup NAME DIR`"
    )]
    Down(broker_cmd::DownArgs),
    /// Show the broker, the generation and every space's state and figures.
    #[command(
        after_help = "Examples:\n  cotal status\n  cotal status --format json | jq '.spaces[] | select(.state != \"active\")'\n  cotal status --format prometheus > /var/lib/node_exporter/cotal.prom"
    )]
    Status(status_cmd::Args),
    /// Mint a user creds file for a space.
    #[command(
        after_help = "Examples:\n  cotal creds design --member acme.alice --out alice.creds\n  cotal creds design --user ci --profile admin --expires 7d --out ci.creds\n  cotal creds --system monitor --out monitor.creds\n  cotal creds list design\n  cotal creds revoke design --user alice && cotal apply"
    )]
    Creds(creds_cmd::Args),
    /// Add, remove, suspend, resume or list spaces (edits cotal.toml, applies only that change).
    #[command(subcommand)]
    Space(space_cmd::Command),
    /// Replace signing keys: the system account's, or one space's account's.
    #[command(subcommand)]
    Rotate(rotate_cmd::Command),
    /// Back up the root's trust and records, or bring such a backup up on a new host.
    #[command(subcommand)]
    Root(root_cmd::Command),
    /// The secret-free state `plan --state` plans against.
    #[command(subcommand)]
    State(state_cmd::Command),
    /// Print a saved plan (`plan --out FILE`) in any format, without applying it.
    #[command(
        after_help = "Examples:\n  cotal show plan.json\n  cotal show plan.json --format markdown > plan.md"
    )]
    Show(plan_cmd::ShowArgs),
    /// Read the lifecycle audit.
    #[command(
        after_help = "Examples:\n  cotal audit --since 7d\n  cotal audit --space design --format json | jq -r .event"
    )]
    Audit(audit_cmd::Args),
    /// Check cotal.toml (schema, names, limits, topology, channels, the files it names) with
    /// no root, no seed and no broker; exit 0 or 1. A pre-commit hook.
    #[command(after_help = "Examples:\n  cotal validate\n  cotal validate path/to/cotal.toml")]
    Validate(validate_cmd::Args),
    /// Rewrite cotal.toml in the canonical layout (spacing, blank lines), keeping every comment
    /// and value; --check changes nothing and exits 2 when it would.
    #[command(
        after_help = "Examples:\n  cotal fmt\n  cotal fmt --check                          # CI, a pre-commit hook"
    )]
    Fmt(fmt_cmd::Args),
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  cotal completions bash > ~/.local/share/bash-completion/completions/cotal\n  cotal completions zsh > \"${fpath[1]}/_cotal\""
    )]
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

/// Run the CLI; returns the process exit code.
pub fn main() -> i32 {
    output::quiet_on_broken_pipe();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and the version print on stdout and exit 0; any other parse error is a usage
        // error, with clap's message, and its own exit code.
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                crate::error::exit::USAGE
            } else {
                crate::error::exit::OK
            };
        }
    };
    output::init_logging(cli.verbose);
    let colour = output::colour_enabled(cli.color);
    match run(cli, colour) {
        Ok(code) => code,
        Err(e) => {
            output::print_error(&e, colour);
            e.exit_code()
        }
    }
}

fn run(cli: Cli, colour: bool) -> Result<i32> {
    let global = Global {
        root: cli.root,
        colour,
    };
    match cli.command {
        Command::Init(args) => init::run(&global, args),
        Command::Adopt(args) => adopt_cmd::run(&global, args),
        Command::Plan(args) => plan_cmd::run(&global, args),
        Command::Apply(args) => apply_cmd::run(&global, args),
        Command::Up(args) => broker_cmd::up(&global, args),
        Command::Down(args) => broker_cmd::down(&global, args),
        Command::Status(args) => status_cmd::run(&global, args),
        Command::Creds(args) => creds_cmd::run(&global, args),
        Command::Space(command) => space_cmd::run(&global, command),
        Command::Rotate(command) => rotate_cmd::run(&global, command),
        Command::Root(command) => root_cmd::run(&global, command),
        Command::State(command) => state_cmd::run(&global, command),
        Command::Show(args) => plan_cmd::show(&global, args),
        Command::Audit(args) => audit_cmd::run(&global, args),
        Command::Validate(args) => validate_cmd::run(&global, args),
        Command::Fmt(args) => fmt_cmd::run(&global, args),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "cotal", &mut std::io::stdout());
            Ok(0)
        }
    }
}

/// Options every command shares.
pub struct Global {
    pub root: Option<PathBuf>,
    pub colour: bool,
}

impl Global {
    /// The root every verb but `init` works on: one that exists (a `cotal.toml` or a `.cotal/`).
    /// A verb run outside any root refuses and creates nothing.
    pub fn root(&self) -> Result<crate::store::Root> {
        let root = self.new_root()?;
        let exists = |p: std::path::PathBuf| std::fs::symlink_metadata(p).is_ok();
        if exists(root.desired_file()) || exists(root.state_dir()) {
            return Ok(root);
        }
        if !root.dir().is_dir() {
            return Err(crate::error::Error::input(
                Diagnostic::new(format!(
                    "{} does not exist (or is not a folder); nothing was read or written.",
                    root.dir().display()
                ))
                .next("check the path given to --root (or COTAL_ROOT), or make a root there with `cotal init`"),
            ));
        }
        Err(crate::error::Error::input(
            Diagnostic::new(format!(
                "{} is not a cotal root (no cotal.toml, no .cotal/, here or in any parent folder); nothing was read or written.",
                root.dir().display()
            ))
            .next("run it from a root (or pass --root DIR, or set COTAL_ROOT), or make one with `cotal init`"),
        ))
    }

    /// The root `init` makes: found like [`Global::root`], but it need not exist yet.
    pub fn new_root(&self) -> Result<crate::store::Root> {
        crate::store::Root::discover(self.root.as_deref())
    }
}

/// Parse `--lock-timeout`: `0`, `30s`, `2m`.
pub fn parse_duration(raw: &str) -> Result<std::time::Duration, String> {
    if raw.trim() == "0" {
        return Ok(std::time::Duration::ZERO);
    }
    humantime::parse_duration(raw)
        .map_err(|e| format!("{raw:?} is not a duration like 30s or 2m: {e}"))
}

/// Format choice for commands that print a plan.
pub fn format_plan(
    plan: &crate::plan::Plan,
    format: Format,
    colour: bool,
    options: crate::report::TextOptions,
) -> String {
    match format {
        Format::Text => {
            crate::report::text_with(plan, &crate::report::Palette::new(colour), options)
        }
        Format::Json => crate::report::json(plan),
        Format::Markdown => crate::report::markdown(plan),
    }
}
