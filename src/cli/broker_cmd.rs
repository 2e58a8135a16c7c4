//! `cotal up` and `cotal down`: the broker process of the root.

use super::Global;
use crate::apply::{self, Context};
use crate::broker::identity::{self, Listener, Liveness};
use crate::broker::{Running, Stopped, process};
use crate::error::{Error, Result};
use crate::observe;
use crate::observed::PromotedConfig;
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

/// Render from the inventory, start nats-server (every node of a cluster that is not
/// running), wait for a cluster's JetStream meta leader, provision what is missing.
pub fn up(global: &Global, args: UpArgs) -> Result<i32> {
    let root = global.root()?;
    let progress = super::progress::Bar::new();
    let (desired, digest) = observe::desired(&root)?;
    let lock = lock::acquire(&root, &crate::operator::holder(), args.lock_timeout)?;
    let observed = observe::observe(&root, &desired, digest.clone())?;
    apply::refuse_if_journal_open(&observed.journal, "up")?;
    plan::guard_trust(&observed)?;
    plan::guard_liveness(&observed)?;
    let topology = &desired.topology;
    if observed.is_running() && observed.nodes_down().is_empty() {
        match observed.process().pid() {
            Some(pid) if !topology.is_cluster() => {
                println!("The broker is already running (pid {pid}).")
            }
            _ => println!("Every node of the cluster is already running."),
        }
        return Ok(0);
    }
    for n in &observed.nodes {
        process::check_log(&n.files)?;
    }
    if observed.inventory.spaces.is_empty() {
        return Err(Error::Refused(
            "this root holds no space yet, and a broker needs at least one.\nnext: add a [spaces.NAME] table to cotal.toml and run `cotal apply`, then `cotal up`".into(),
        ));
    }
    // Each node will listen where cotal.toml says: nothing of this root may run there and
    // nothing may listen there. Checked before anything is written.
    let refuse_listener = |seen: String| {
        Error::Refused(format!(
            "cannot start the broker: {seen}.\n\
             blast radius: none, nothing was started.\n\
             next: stop that process, or change the port in cotal.toml and run `cotal apply`, then `cotal up`"
        ))
    };
    let mut to_start = Vec::new();
    for n in observed.nodes.iter().filter(|n| !n.remote()) {
        let listener = Listener {
            host: n.spec.host.clone(),
            port: n.spec.port,
        };
        match identity::probe(&n.files, &listener)? {
            Liveness::Unknown { seen } => {
                return Err(refuse_listener(format!("{}{seen}", topology.on(n.name()))));
            }
            Liveness::Running { .. } => {}
            Liveness::Stopped { .. } => to_start.push((&n.files, listener)),
        }
    }
    // The config on disk must be the rendering of the inventory: promote it when it is not.
    let boot = plan::boot_plan(&desired, &observed)?;
    if !boot.is_empty() {
        if observed.is_running() {
            return Err(Error::Refused(
                "the config on disk is not the rendering of the inventory, and some nodes of the cluster run it: starting the others on another config would split the cluster.\nblast radius: none, nothing was started.\nnext: `cotal down`, then `cotal up`".into(),
            ));
        }
        let nodes = plan::nodes(&desired, &observed);
        let ctx = Context {
            root: &root,
            nodes: &nodes,
            observed: &observed,
            actor: crate::operator::actor(),
            lock: &lock,
            progress: &progress,
        };
        apply::execute(&ctx, &boot, &mut Stopped)?;
    }
    for (f, listener) in &to_start {
        let pid = process::start(&root, f, listener, args.timeout)?;
        if topology.is_cluster() {
            println!("node {} started (pid {pid}) on nats://{listener}", f.name);
        } else {
            println!("nats-server started (pid {pid}) on nats://{listener}");
        }
    }
    if crate::store::cut::clear(&root)? {
        println!("The cut taken by `cotal down --preserve-state` is cleared.");
    }

    // Booting completes provisioning (docs/design/lifecycle-model.md, "Booting completes provisioning"), from what the broker says it holds.
    let observed = observe::observe(&root, &desired, digest)?;
    for n in &observed.nodes {
        if n.remote() && !n.process.is_running() {
            println!(
                "node {} runs on another machine (local = false) and does not answer through the cluster: start it there, on its config {}",
                n.name(),
                n.files.conf.display()
            );
        }
    }
    if topology.is_cluster() {
        let leader = wait_for_meta_leader(&root, topology, &observed, args.timeout)?;
        println!("The cluster's JetStream meta leader is {leader}.");
    }
    let observed = if topology.is_cluster() {
        // Read again now that JetStream answers cluster-wide.
        observe::observe(&root, &desired, observed.desired_digest.clone())?
    } else {
        observed
    };
    if let Some(e) = &observed.live_error {
        return Err(Error::Other(format!(
            "nats-server started, but cotal could not read which streams it holds ({e}), so provisioning was not checked.\n\
             next: `cotal status` to see the broker, then `cotal apply`, which provisions whatever is missing"
        )));
    }
    let mut provisioning = plan::compute(&desired, &observed, &plan::Intent::default())?;
    provisioning.steps.retain(|s| {
        // Only spaces already applied: `up` completes provisioning, it does not apply cotal.toml
        // (and not suspended there: a suspended account accepts no provisioner).
        matches!(s, Step::Provision { space, .. }
            if observed.inventory.spaces.get(space).is_some_and(|o| !o.limits.is_suspended()))
    });
    if !provisioning.is_empty() {
        // The executor runs them, with its journal and audit, as apply would.
        let nodes = plan::nodes(&desired, &observed);
        let ctx = Context {
            root: &root,
            nodes: &nodes,
            observed: &observed,
            actor: crate::operator::actor(),
            lock: &lock,
            progress: &progress,
        };
        let mut broker = Running::connect(&root, topology, &observed)?;
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

/// Wait until the cluster's JetStream has a meta leader and its meta group counts every running
/// node as current (so streams of the declared replicas can be placed), asking through the
/// system account. Returns the leader's name.
fn wait_for_meta_leader(
    root: &crate::store::Root,
    topology: &crate::topology::Topology,
    observed: &crate::observed::Observed,
    timeout: Duration,
) -> Result<String> {
    let running = Running::connect(root, topology, observed)?;
    let nodes = running.server_ids().len();
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let why = match running.control().meta_group(nodes) {
            Ok(Some((leader, current))) if current >= nodes => return Ok(leader),
            Ok(Some((leader, current))) => {
                format!("meta leader {leader} counts {current} of {nodes} running nodes as current")
            }
            Ok(None) => "no meta leader yet".to_string(),
            Err(e) => e.to_string(),
        };
        if std::time::Instant::now() >= deadline {
            return Err(Error::Other(format!(
                "the cluster's nodes run, but JetStream elected no meta leader within {timeout:?} ({why}), so nothing was provisioned.\nnext: `cotal status`, and each node's log in .cotal/node.NAME/nats.log (can the nodes reach each other's cluster_port?)"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stop the broker (every node of a cluster). Works while a journal is open: the operator can
/// always stop the broker, and the next `cotal apply` finishes the journal with it stopped.
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
    let topology = &desired.topology;
    if args.preserve_state && topology.is_cluster() {
        return Err(Error::Refused(
            "--preserve-state records a cut for `cotal space backup` and `space restore`, which do not work on a cluster yet.\nblast radius: none, nothing was stopped.\nnext: `cotal down` without it".into(),
        ));
    }
    // The nodes cotal.toml names with where each listens, and every node folder on disk
    // besides (a cotal.toml that does not parse, or whose [cluster] changed, still stops every
    // node this root started). A node folder cotal.toml does not name listens where its
    // promoted config says (port 0 matches no listener).
    let mut nodes: Vec<(crate::store::NodeFiles, Option<&crate::topology::NodeSpec>)> = topology
        .nodes
        .iter()
        .map(|n| (root.files_of(topology, n), Some(n)))
        .collect();
    let single = root.lone_node_files();
    if topology.is_cluster() && (single.conf.exists() || single.pid.exists()) {
        // A single server this root ran before its cotal.toml declared a cluster.
        nodes.push((single, None));
    }
    for name in root.node_folders() {
        if !nodes.iter().any(|(f, _)| f.name == name) {
            nodes.push((root.node_files(&name, None), None));
        }
    }
    // Messages name the node whenever there is more than one to stop.
    let clustered = nodes.len() > 1;
    let mut stopped = None;
    let mut listener = None;
    for (f, spec) in &nodes {
        if spec.is_some_and(|s| !s.local) {
            println!(
                "node {}: runs on another machine (local = false); stop it there.",
                f.name
            );
            continue;
        }
        let promoted = crate::store::server_conf::read(f)?.map(PromotedConfig::new);
        let (host, port) = match spec {
            Some(s) => (s.host.as_str(), s.port),
            None => ("127.0.0.1", 0),
        };
        let l = observe::promoted_listener(promoted.as_ref(), host, port);
        stopped = stop_node(clustered, f, &l, args.grace)?.or(stopped);
        listener.get_or_insert(l);
    }
    let listener = listener.expect("a node");
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

/// Stop one node: every nats-server of this user started on its config (whatever it listens
/// on: still binding, a hand-edited port, a lost pidfile) and its pidfile's process when that is
/// one. Anything else is left alone. Returns the last pid stopped.
fn stop_node(
    clustered: bool,
    node: &crate::store::NodeFiles,
    listener: &Listener,
    grace: Duration,
) -> Result<Option<u32>> {
    let said = |what: &str| {
        format!(
            "{}{what}",
            crate::topology::node_prefix(clustered, &node.name)
        )
    };
    let mut own = identity::root_brokers(node);
    if let Ok(Some(pid)) = identity::recorded_pid(node)?
        && identity::is_root_broker(node, pid)
        && !own.contains(&pid)
    {
        own.push(pid);
    }
    let probed = match own.first() {
        Some(&pid) => Liveness::Running { pid },
        None => identity::probe(node, listener)?,
    };
    match probed {
        Liveness::Running { .. } => {
            for &pid in &own {
                process::stop(node, pid, grace)?;
                println!("{}", said(&format!("nats-server stopped (pid {pid}).")));
            }
            Ok(own.last().copied())
        }
        Liveness::Stopped { stale_pid } => {
            if let Some(pid) = stale_pid {
                crate::store::atomic::remove_file(&node.pid)?;
                println!(
                    "{}",
                    said(&format!(
                        "The pidfile named pid {pid}, which is not this root's nats-server (dead or reused); it was removed, nothing was signalled."
                    ))
                );
            }
            println!(
                "{}",
                said(if clustered {
                    "not running."
                } else {
                    "The broker was not running."
                })
            );
            Ok(None)
        }
        Liveness::Unknown { seen } => Err(Error::Refused(format!(
            "cannot tell whether this root's broker is running: {}; nothing was signalled there.\n\
             next: if the pidfile itself is wrong, move it aside and run `cotal down` again; otherwise stop whatever holds the port (it is not a nats-server of this root, so cotal leaves it alone)",
            said(&seen)
        ))),
    }
}
