//! `cotal up` and `cotal down`: the broker process of the root.

use super::Global;
use crate::apply::{self, Context};
use crate::broker::identity::{self, Listener, Liveness};
use crate::broker::{Running, Stopped, process};
use crate::error::{Error, Result};
use crate::observe;
use crate::observed::{BrokerProcess, PromotedConfig};
use crate::plan::{self, Step};
use crate::store::lock;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// How long to wait for the broker to accept connections.
    #[arg(long, value_parser = super::parse_duration, default_value = "20s")]
    pub timeout: Duration,
    /// How long to wait for the root's lock.
    #[arg(long, value_parser = super::parse_duration, default_value = "0")]
    pub lock_timeout: Duration,
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
}

/// Render from the inventory, start nats-server, provision what is missing.
pub fn up(global: &Global, args: UpArgs) -> Result<i32> {
    let root = global.root()?;
    let progress = super::progress::Bar::new();
    let (desired, digest) = observe::desired(&root)?;
    let lock = lock::acquire(&root, &crate::operator::holder(), args.lock_timeout)?;
    let observed = observe::observe(&root, &desired, digest.clone())?;
    apply::refuse_if_journal_open(&observed.journal, "up")?;
    plan::guard_trust(&observed)?;
    plan::guard_liveness(&observed)?;
    if let BrokerProcess::Running { pid } = observed.process {
        println!("The broker is already running (pid {pid}).");
        return Ok(0);
    }
    process::check_log(&root)?;
    if observed.inventory.spaces.is_empty() {
        return Err(Error::Refused(
            "this root holds no space yet, and a broker needs at least one.\nnext: add a [spaces.NAME] table to cotal.toml and run `cotal apply`, then `cotal up`".into(),
        ));
    }
    // The broker will listen where cotal.toml says: nothing of this root may run there and
    // nothing may listen there. Checked before anything is written.
    let listener = Listener {
        host: desired.broker.host.clone(),
        port: desired.broker.port,
    };
    let refuse_listener = |seen: String| {
        Error::Refused(format!(
            "cannot start the broker: {seen}.\n\
             blast radius: none, nothing was started.\n\
             next: stop that process, or change [broker] port in cotal.toml and run `cotal apply`, then `cotal up`"
        ))
    };
    if let Liveness::Unknown { seen } = identity::probe(&root, &listener)? {
        return Err(refuse_listener(seen));
    }
    // The config on disk must be the rendering of the inventory: promote it when it is not.
    let boot = plan::boot_plan(&desired, &observed)?;
    if !boot.is_empty() {
        let ctx = Context {
            root: &root,
            desired: &desired,
            observed: &observed,
            actor: crate::operator::actor(),
            lock: &lock,
            progress: &progress,
        };
        apply::execute(&ctx, &boot, &mut Stopped)?;
    }
    let pid = process::start(&root, &listener, args.timeout)?;
    if crate::store::cut::clear(&root)? {
        println!("The cut taken by `cotal down --preserve-state` is cleared.");
    }
    println!(
        "nats-server started (pid {pid}) on nats://{}:{}",
        desired.broker.host, desired.broker.port
    );

    // Booting completes provisioning (seed 000 section 2.1), from what the broker says it holds.
    let observed = observe::observe(&root, &desired, digest)?;
    if let Some(e) = &observed.live_error {
        return Err(Error::Other(format!(
            "nats-server started (pid {pid}), but cotal could not read which streams it holds ({e}), so provisioning was not checked.\n\
             next: `cotal status` to see the broker, then `cotal apply`, which provisions whatever is missing"
        )));
    }
    let mut provisioning = plan::compute(&desired, &observed)?;
    provisioning.steps.retain(|s| {
        // Only spaces already applied: `up` completes provisioning, it does not apply cotal.toml
        // (and not suspended there: a suspended account accepts no provisioner).
        matches!(s, Step::Provision { space, .. }
            if observed.inventory.spaces.get(space).is_some_and(|o| !o.limits.is_suspended()))
    });
    if !provisioning.is_empty() {
        // The executor runs them, with its journal and audit, as apply would.
        let ctx = Context {
            root: &root,
            desired: &desired,
            observed: &observed,
            actor: crate::operator::actor(),
            lock: &lock,
            progress: &progress,
        };
        let mut broker = Running::connect(&root, &observed.listener)?;
        apply::execute(&ctx, &provisioning, &mut broker)?;
        for step in &provisioning.steps {
            println!("  {}", step.title());
        }
    }
    println!(
        "{} space{} served; generation {}; up in {}.",
        observed.inventory.spaces.len(),
        if observed.inventory.spaces.len() == 1 {
            ""
        } else {
            "s"
        },
        observed.generation.generation(),
        super::progress::took(progress.elapsed())
    );
    Ok(0)
}

/// Stop the broker. Works while a journal is open: the operator can always stop the broker,
/// and the next `cotal apply` finishes the journal with the broker stopped.
pub fn down(global: &Global, args: DownArgs) -> Result<i32> {
    let root = global.root()?;
    // No .cotal/: no server.conf, so no nats-server of this root can run.
    if std::fs::symlink_metadata(root.state_dir()).is_err() {
        println!("The broker is not running: this root has no .cotal/ (never initialised here).");
        return Ok(0);
    }
    let _lock = lock::acquire(&root, &crate::operator::holder(), args.lock_timeout)?;
    // The listener the running broker loaded: the promoted config's, else cotal.toml's (which
    // may be unparsable: stopping never needs it).
    let desired = observe::desired(&root).map(|(d, _)| d).unwrap_or_default();
    let promoted = crate::store::server_conf::read(&root)?.map(PromotedConfig::new);
    let listener = observe::listener(&desired, promoted.as_ref());
    // This root's own nats-servers are stopped whatever they listen on (still binding, a
    // hand-edited port, a lost pidfile): each is a nats-server of this user whose `-c` is this
    // root's server.conf. Anything else is left alone.
    let mut own = identity::root_brokers(&root);
    if let Ok(Some(pid)) = identity::recorded_pid(&root)?
        && identity::is_root_broker(&root, pid)
        && !own.contains(&pid)
    {
        own.push(pid);
    }
    let probed = match own.first() {
        Some(&pid) => Liveness::Running { pid },
        None => identity::probe(&root, &listener)?,
    };
    let stopped = match probed {
        Liveness::Running { .. } => {
            for &pid in &own {
                process::stop(&root, pid, args.grace)?;
                println!("nats-server stopped (pid {pid}).");
            }
            own.last().copied()
        }
        Liveness::Stopped { stale_pid } => {
            if let Some(pid) = stale_pid {
                crate::store::atomic::remove_file(&root.pid_file())?;
                println!(
                    "The pidfile named pid {pid}, which is not this root's nats-server (dead or reused); it was removed, nothing was signalled."
                );
            }
            println!("The broker was not running.");
            None
        }
        Liveness::Unknown { seen } => {
            return Err(Error::Refused(format!(
                "cannot tell whether this root's broker is running: {seen}; nothing was signalled.\n\
                 next: if the pidfile itself is wrong, move it aside and run `cotal down` again; otherwise stop whatever holds the port (it is not a nats-server of this root, so cotal leaves it alone)"
            )));
        }
    };
    if args.preserve_state {
        let (host, port) = (&listener.host, listener.port);
        let sockets = identity::listening_sockets(&listener)?;
        if !sockets.is_empty() {
            return Err(Error::Refused(format!(
                "the broker is stopped but {}; no cut without the evidence that nothing serves the store.\nnext: stop that process, then `cotal down --preserve-state` again",
                identity::describe_holders(&sockets, &listener)
            )));
        }
        let cut = crate::store::cut::Cut {
            op: "cut".into(),
            at: crate::clock::timestamp(),
            generation: crate::store::generation::load(&root)?.generation(),
            evidence: crate::store::cut::Evidence {
                broker_stopped: true,
                listener_unreachable: true,
                stopped_pid: stopped,
                listener: format!("{host}:{port}"),
            },
        };
        crate::store::cut::save(&root, &cut)?;
        println!(
            "Cut recorded at {} (generation {}): the store is preserved for `cotal space backup` and `cotal space restore`; `cotal up` clears it.",
            cut.at, cut.generation
        );
    }
    Ok(0)
}
