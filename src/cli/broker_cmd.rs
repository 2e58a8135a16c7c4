//! `cotal up` and `cotal down`: run [`crate::ops::broker`] and say what it did.

use super::Global;
use super::status_cmd::Format;
use crate::error::Result;
use crate::ops::broker::{self as op, DownEvent, Served, Stopped, UpEvent};
use crate::report::documents;
use std::cell::RefCell;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// How long to wait for the broker to accept connections.
    #[arg(long, value_parser = super::parse_duration, default_value = "20s")]
    pub timeout: Duration,
    /// How long to wait for the root's lock.
    #[arg(long, value_parser = super::parse_duration, default_value = "0")]
    pub lock_timeout: Duration,
    /// Start on a store that does not hold the spaces' data (it was moved, wiped or restored
    /// elsewhere): they come back empty, their data left where it is. Without it, `up` refuses.
    #[arg(long)]
    pub allow_destroy: bool,
    /// `json`: one versioned document of what was done, at the end (`schemas/up.schema.json`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, clap::Args)]
pub struct DownArgs {
    /// How long nats-server gets to stop after SIGTERM before SIGKILL.
    #[arg(long, value_parser = super::parse_duration, default_value = "10s")]
    pub grace: Duration,
    /// How long to wait for the root's lock.
    #[arg(long, value_parser = super::parse_duration, default_value = "0")]
    pub lock_timeout: Duration,
    /// Record a cut (broker stopped, listener unreachable) for `space backup` and `space restore`;
    /// `cotal up` clears it.
    #[arg(long)]
    pub preserve_state: bool,
    /// `json`: one versioned document of what was done, at the end (`schemas/down.schema.json`).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

/// Render from the inventory, start nats-server (every node of a cluster that is not
/// running), wait for a cluster's JetStream meta leader, provision what is missing.
pub fn up(global: &Global, args: UpArgs) -> Result<i32> {
    let root = global.root()?;
    let progress = super::progress::Bar::new();
    // With --format json the events are kept for the one document printed at the end.
    let kept: RefCell<Vec<UpEvent>> = RefCell::new(Vec::new());
    let served = op::up(
        &root,
        &op::Up {
            timeout: args.timeout,
            lock_timeout: args.lock_timeout,
            allow_destroy: args.allow_destroy,
        },
        &progress,
        &|event| match event {
            event if args.format == Format::Json => kept.borrow_mut().push(event),
            UpEvent::Started {
                node: Some(node),
                pid,
                listener,
            } => println!("node {node} started (pid {pid}) on nats://{listener}"),
            UpEvent::Started {
                node: None,
                pid,
                listener,
            } => println!("nats-server started (pid {pid}) on nats://{listener}"),
            UpEvent::CutCleared => {
                println!("The cut taken by `cotal down --preserve-state` is cleared.")
            }
            UpEvent::RemoteNotAnswering { node, config } => println!(
                "node {node} runs on another machine (local = false) and does not answer through the cluster: start it there, on its config {}",
                config.display()
            ),
            UpEvent::MetaLeader(leader) => {
                println!("The cluster's JetStream meta leader is {leader}.")
            }
            UpEvent::Provisioned(title) => println!("  {title}"),
        },
    )?;
    if args.format == Format::Json {
        print!(
            "{}",
            documents::pretty(&documents::Up::new(
                kept.into_inner(),
                &served,
                progress.elapsed()
            ))
        );
        if let Served::Started {
            registry_seeded,
            failed,
            ..
        } = served
        {
            refresh_state(&root, registry_seeded);
            if !failed.is_empty() {
                return Ok(crate::error::exit::PARTLY_APPLIED);
            }
        }
        return Ok(0);
    }
    match served {
        Served::AlreadyRunning { pid: Some(pid) } => {
            println!("The broker is already running (pid {pid}).")
        }
        Served::AlreadyRunning { pid: None } => {
            println!("Every node of the cluster is already running.")
        }
        Served::StartedForJournal { started, removals } => {
            println!(
                "Started {started} node{} on the config on disk. An interrupted apply's journal is open, so nothing was promoted or provisioned.",
                if started == 1 { "" } else { "s" }
            );
            println!(
                "next: `cotal apply` finishes it{}",
                if removals.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (it completes the removal of {})",
                        crate::plan::list(&removals)
                    )
                }
            );
        }
        Served::Started {
            spaces,
            generation,
            registry_seeded,
            failed,
        } => {
            println!(
                "{spaces} space{} served; generation {generation}; up in {}.",
                if spaces == 1 { "" } else { "s" },
                super::progress::took(progress.elapsed())
            );
            refresh_state(&root, registry_seeded);
            if !failed.is_empty() {
                // On standard error, as `apply` says it: what failed and what to do next.
                eprintln!(
                    "error: partly done: the broker runs, but {} space step(s) failed; those spaces are not served, every other one is.",
                    failed.len()
                );
                for f in &failed {
                    eprintln!("  {f}");
                }
                eprintln!(
                    "next: fix what each names (the space's own streams, connections or registry), then `cotal apply`: it plans only what is left"
                );
                return Ok(crate::error::exit::PARTLY_APPLIED);
            }
        }
    }
    Ok(0)
}

/// `.cotal/state.json` again after `up` or `down` changed what it records (`seeded`: the
/// registries `up`'s provisioning seeded); a failure is a warning (the broker is up or down
/// either way).
fn refresh_state(
    root: &crate::store::Root,
    seeded: std::collections::BTreeMap<crate::model::SpaceName, u64>,
) {
    if let Err(e) = crate::ops::state::refresh(root, seeded) {
        eprintln!(
            "warning: {} could not be brought up to date: {e}",
            root.state_file().display()
        );
    }
}

/// Stop the broker (every node of a cluster). Works while a journal is open: the operator can
/// always stop the broker, and the next `cotal apply` finishes the journal with it stopped.
pub fn down(global: &Global, args: DownArgs) -> Result<i32> {
    let root = global.root()?;
    let began = std::time::Instant::now();
    let kept: RefCell<Vec<DownEvent>> = RefCell::new(Vec::new());
    let on = |node: &Option<String>, what: &str| match node {
        Some(node) => println!("node {node}: {what}"),
        None => println!("{what}"),
    };
    let stopped = op::down(
        &root,
        &op::Down {
            grace: args.grace,
            lock_timeout: args.lock_timeout,
            preserve_state: args.preserve_state,
        },
        &|event| match event {
            event if args.format == Format::Json => kept.borrow_mut().push(event),
            DownEvent::Stopped { node, pid } => {
                on(&node, &format!("nats-server stopped (pid {pid})."))
            }
            DownEvent::StalePidfile { node, pid } => on(
                &node,
                &format!(
                    "The pidfile named pid {pid}, which is not this root's nats-server (dead or reused); it was removed, nothing was signalled."
                ),
            ),
            DownEvent::NotRunning { node: None } => println!("The broker was not running."),
            DownEvent::NotRunning { node } => on(&node, "not running."),
            DownEvent::Remote { node } => {
                println!("node {node}: runs on another machine (local = false); stop it there.")
            }
        },
    )?;
    if !matches!(stopped, Stopped::NeverInitialised) {
        refresh_state(&root, Default::default());
    }
    if args.format == Format::Json {
        print!(
            "{}",
            documents::pretty(&documents::Down::new(
                kept.into_inner(),
                &stopped,
                began.elapsed()
            ))
        );
        return Ok(0);
    }
    match stopped {
        Stopped::NeverInitialised => println!(
            "The broker is not running: this root has no .cotal/ (never initialised here)."
        ),
        Stopped::Stopped => {}
        Stopped::Cut { at, generation } => println!(
            "Cut recorded at {at} (generation {generation}): the store is preserved for `cotal space backup` and `cotal space restore`; `cotal up` clears it."
        ),
    }
    Ok(0)
}
