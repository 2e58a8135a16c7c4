//! The broker's processes: `up` (render from the inventory, start every local node that is not
//! running, wait for a cluster's JetStream meta leader, complete provisioning) and `down` (stop
//! every node this root started). What happens is told as typed events; the command renders
//! them.

use crate::apply::{self, Context, Progress};
use crate::broker::identity::{self, Listener, Liveness};
use crate::broker::{Running, Stopped as StoppedBroker, process};
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::observe;
use crate::observed::PromotedConfig;
pub use crate::outcomes::{DownEvent, Served, Stopped, UpEvent};
use crate::plan::{self, Step};
use crate::store::{Root, lock};
use std::time::Duration;

/// What `up` is asked.
pub struct Up {
    /// How long to wait for each node to accept connections (and a cluster for its leader).
    pub timeout: Duration,
    pub lock_timeout: Duration,
    /// Start on a store without the spaces' data (`--allow-destroy`).
    pub allow_destroy: bool,
}

/// What `down` is asked.
pub struct Down {
    /// How long nats-server gets after SIGTERM before SIGKILL.
    pub grace: Duration,
    pub lock_timeout: Duration,
    /// Record a cut for `space backup` and `space restore`.
    pub preserve_state: bool,
}

/// Render from the inventory, start nats-server (every node of a cluster that is not
/// running), wait for a cluster's JetStream meta leader, provision what is missing.
/// `on` is told what happens as it happens; the result is the broker served.
pub fn up(root: &Root, args: &Up, progress: &dyn Progress, on: &dyn Fn(UpEvent)) -> Result<Served> {
    let (desired, digest) = observe::desired(root)?;
    let lock = lock::acquire(root, &crate::operator::holder(), args.lock_timeout)?;
    let observed = observe::observe(root, &desired, digest.clone())?;
    let journal = journal_up_finishes(&desired, &observed)?;
    plan::guard_trust(&observed)?;
    plan::guard_liveness(&observed)?;
    let topology = &desired.topology;
    if observed.is_running() && observed.nodes_down().is_empty() {
        // Nothing to start: the journal is what is left, and `apply` finishes it.
        apply::refuse_if_journal_open(&observed.journal, "up")?;
        return Ok(Served::AlreadyRunning {
            pid: observed.process().pid().filter(|_| !topology.is_cluster()),
        });
    }
    for n in &observed.nodes {
        process::check_log(&n.files)?;
    }
    refuse_nothing_to_serve(&observed)?;
    if !args.allow_destroy {
        refuse_foreign_store(&observed, desired.topology.replicas)?;
    }
    let to_start = nodes_to_start(&observed, topology)?;
    // Start each node of `to_start`, telling `on`; then record the store each local node
    // serves (its identity written into it first, when it has none).
    let start_all = || -> Result<()> {
        for (f, listener) in &to_start {
            let pid = process::start(root, f, listener, args.timeout)?;
            on(UpEvent::Started {
                node: topology.is_cluster().then(|| f.name.clone()),
                pid,
                listener: listener.clone(),
            });
        }
        record_stores(root, &observed)
    };
    if let Some(j) = journal {
        start_all()?;
        if topology.is_cluster() {
            let observed = observe::observe(root, &desired, digest)?;
            let leader = wait_for_meta_leader(root, topology, &observed, args.timeout)?;
            on(UpEvent::MetaLeader(leader));
        }
        return Ok(Served::StartedForJournal {
            started: to_start.len(),
            removals: j.removals.iter().map(|r| r.space.clone()).collect(),
        });
    }
    // The config on disk must be the rendering of the inventory: promote it when it is not.
    let boot = plan::boot_plan(&desired, &observed)?;
    if boot.moves_data_out_of_service() && !args.allow_destroy {
        return Err(store_move_refusal(&boot, &observed));
    }
    if !boot.is_empty() {
        if observed.is_running() {
            return Err(Error::refused(
                Diagnostic::new("the config on disk is not the rendering of the inventory, and some nodes of the cluster run it: starting the others on another config would split the cluster.")
                .blast("none, nothing was started.")
                .next("`cotal down`, then `cotal up`"),
            ));
        }
        execute(
            root,
            &desired,
            &observed,
            &lock,
            progress,
            &boot,
            &mut StoppedBroker,
        )?;
    }
    start_all()?;
    if crate::store::cut::clear(root)? {
        on(UpEvent::CutCleared);
    }

    complete_provisioning(
        root,
        (&desired, digest),
        &lock,
        (args.timeout, progress),
        on,
    )
}

/// The open journal whose nodes `up` starts (and does nothing else), or a refusal of `up`.
/// On a cluster, an open journal (an interrupted apply) lets `up` start the nodes that are
/// not running, and nothing else: starting a node changes no record, and the apply that
/// finishes the journal needs them (a cluster's removal does, and so does its promotion,
/// which a node down stops). A node started while a promotion was under way runs the
/// config on disk, which may be newer than what the running nodes loaded; the apply that
/// finishes the journal reloads every running node to the config it promotes (or restores)
/// and confirms it on each, so the nodes agree again within it, and until then the newer
/// config serves no more than what the journal already committed. A single server (whose
/// journal `apply` finishes with the broker stopped, without serving a removed tenant
/// again) or a corrupt journal refuses, but for a single server whose journal removes nothing
/// and holds a committed purge: a purge is finished only through the running broker, and
/// serving the config on disk serves no tenant the journal drops.
fn journal_up_finishes(
    desired: &crate::desired::Desired,
    observed: &crate::observed::Observed,
) -> Result<Option<crate::observed::Journal>> {
    Ok(match &observed.journal {
        crate::observed::JournalState::Valid(j)
            if desired.topology.is_cluster()
                || (j.removals.is_empty() && j.purges.iter().any(|p| p.committed)) =>
        {
            Some(j.clone())
        }
        other => {
            apply::refuse_if_journal_open(other, "up")?;
            None
        }
    })
}

/// Refused when no space is served: none, or only archived ones.
fn refuse_nothing_to_serve(observed: &crate::observed::Observed) -> Result<()> {
    if observed
        .inventory
        .spaces
        .values()
        .all(|s| s.archived.is_some())
    {
        return Err(Error::refused(
            Diagnostic::new("this root holds no space to serve yet (none, or only archived ones), and a broker needs at least one.").next(
                "add a [spaces.NAME] table to cotal.toml and run `cotal apply`, then `cotal up`",
            ),
        ));
    }
    Ok(())
}

/// The local nodes that are stopped, each with the listener it will take. Each node will listen
/// where cotal.toml says: nothing of this root may run there and nothing may listen there.
/// Checked before anything is written.
fn nodes_to_start<'o>(
    observed: &'o crate::observed::Observed,
    topology: &crate::desired::topology::Topology,
) -> Result<Vec<(&'o crate::store::NodeFiles, Listener)>> {
    let refuse_listener = |seen: String| {
        Error::refused(
            Diagnostic::new(format!(
                "cannot start the broker: {seen}."
            ))
            .blast("none, nothing was started.")
            .next("stop that process, or change the port in cotal.toml and run `cotal apply`, then `cotal up`"),
        )
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
    Ok(to_start)
}

/// Record the store each local node serves (its identity written into it first, when it has
/// none).
fn record_stores(root: &Root, observed: &crate::observed::Observed) -> Result<()> {
    // The store recorded is the one the config each node runs names (read back from
    // disk: the boot may have promoted one; an open journal's start runs the config as it
    // is), never cotal.toml's unapplied one.
    for n in observed.nodes.iter().filter(|n| !n.remote()) {
        let Some(dir) = crate::store::server_conf::read(&n.files)?
            .and_then(|text| crate::render::read_promoted(&text).store_dir)
            .map(std::path::PathBuf::from)
        else {
            continue;
        };
        let id = crate::store::store_home::ensure_id(&dir)?;
        crate::store::store_home::set(
            root,
            n.name(),
            crate::store::store_home::StoreHome { dir, id: Some(id) },
        )?;
    }
    Ok(())
}

/// The refusal of a boot that puts the store where the spaces' data is not.
fn store_move_refusal(boot: &plan::Plan, observed: &crate::observed::Observed) -> Error {
    Error::refused(
        Diagnostic::new(format!(
            "cotal.toml puts the broker's store where the spaces' data is not: {}.",
            boot.steps
                .iter()
                .filter_map(|s| match s {
                    Step::PromoteConfig { reasons, .. } => Some(reasons),
                    _ => None,
                })
                .flatten()
                .filter(|r| matches!(r, plan::Reason::StoreMove { .. }))
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        ))
        .blast("none, nothing was started.")
        .tenants(observed.inventory.spaces.keys().cloned())
        .next("set store_dir back to where the data is, or move the data there (a store moved with its .cotal-store-id is recognised), then `cotal up`")
        .next("to start the spaces empty, leaving their data where it is: `cotal plan`, then `cotal apply --allow-destroy`, then `cotal up`"),
    )
}

/// `up`'s last stage, with every node started and the config promoted: booting completes
/// provisioning (docs/design/lifecycle-model.md, "Booting completes provisioning") of every
/// space already applied and in service, from what the broker says it holds, through the
/// executor (its journal and audit, as apply would).
fn complete_provisioning(
    root: &Root,
    (desired, digest): (&crate::desired::Desired, String),
    lock: &lock::Lock,
    (timeout, progress): (Duration, &dyn Progress),
    on: &dyn Fn(UpEvent),
) -> Result<Served> {
    let topology = &desired.topology;
    // Booting completes provisioning (docs/design/lifecycle-model.md, "Booting completes provisioning"), from what the broker says it holds.
    let observed = observe::observe(root, desired, digest)?;
    for n in &observed.nodes {
        if n.remote() && !n.process.is_running() {
            on(UpEvent::RemoteNotAnswering {
                node: n.name().to_string(),
                config: n.files.conf.clone(),
            });
        }
    }
    if topology.is_cluster() {
        let leader = wait_for_meta_leader(root, topology, &observed, timeout)?;
        on(UpEvent::MetaLeader(leader));
    }
    let observed = if topology.is_cluster() {
        // Read again now that JetStream answers cluster-wide.
        observe::observe(root, desired, observed.desired_digest.clone())?
    } else {
        observed
    };
    if let Some(e) = &observed.live_error {
        return Err(Error::other(
            Diagnostic::new(format!(
                "nats-server started, but cotal could not read which streams it holds ({e}), so provisioning was not checked."
            ))
            .next("`cotal status` to see the broker, then `cotal apply`, which provisions whatever is missing"),
        ));
    }
    let mut provisioning = plan::compute(desired, &observed, &plan::Intent::default())?;
    provisioning.steps.retain(|s| {
        // Only spaces already applied: `up` completes provisioning, it does not apply cotal.toml
        // (and not suspended or archived there: neither accepts a provisioner).
        matches!(s, Step::Provision { space, .. }
            if observed.inventory.spaces.get(space).is_some_and(|o| !o.limits.is_suspended() && o.archived.is_none()))
    });
    let mut registry_seeded = Default::default();
    let mut failed = Vec::new();
    if !provisioning.is_empty() {
        // The executor runs them, with its journal and audit, as apply would.
        let mut broker = Running::connect(root, topology, &observed)?;
        let outcome = execute(
            root,
            desired,
            &observed,
            lock,
            progress,
            &provisioning,
            &mut broker,
        )?;
        registry_seeded = outcome.registry_seeded;
        failed = outcome.failed;
        for step in &provisioning.steps {
            let title = step.title();
            if !failed.iter().any(|f| f.step == title) {
                on(UpEvent::Provisioned(title));
            }
        }
    }
    Ok(Served::Started {
        // In service: neither archived (left out) nor suspended (refusing its users), and
        // provisioned.
        spaces: observed
            .inventory
            .spaces
            .iter()
            .filter(|(n, s)| {
                s.archived.is_none()
                    && !s.limits.is_suspended()
                    && !failed.iter().any(|f| &f.space == *n)
            })
            .count(),
        generation: observed.generation.generation(),
        registry_seeded,
        failed,
    })
}

/// Run `to_run` through the executor, with its journal and audit, as an apply would.
fn execute(
    root: &Root,
    desired: &crate::desired::Desired,
    observed: &crate::observed::Observed,
    lock: &lock::Lock,
    progress: &dyn Progress,
    to_run: &plan::Plan,
    broker: &mut dyn crate::broker::Broker,
) -> Result<crate::apply::Outcome> {
    let nodes = plan::nodes(desired, observed);
    let ctx = Context {
        root,
        nodes: &nodes,
        observed,
        actor: crate::operator::actor(),
        lock,
        progress,
    };
    apply::execute(&ctx, to_run, broker)
}

/// Wait until the cluster's JetStream has a meta leader and its meta group counts every running
/// node as current (so streams of the declared replicas can be placed), asking through the
/// system account. Returns the leader's name.
fn wait_for_meta_leader(
    root: &Root,
    topology: &crate::desired::topology::Topology,
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
            return Err(Error::other(
                Diagnostic::new(format!(
                    "the cluster's nodes run, but JetStream elected no meta leader within {timeout:?} ({why}), so nothing was provisioned."
                ))
                .next("`cotal status`, and each node's log in .cotal/node.NAME/nats.log (can the nodes reach each other's cluster_port?)"),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stop the broker (every node of a cluster). Works while a journal is open: the operator can
/// always stop the broker, and the next `cotal apply` finishes the journal with it stopped.
/// `on` is told what happens to each node as it happens.
pub fn down(root: &Root, args: &Down, on: &dyn Fn(DownEvent)) -> Result<Stopped> {
    // No .cotal/: no server.conf, so no nats-server of this root can run.
    if std::fs::symlink_metadata(root.state_dir()).is_err() {
        return Ok(Stopped::NeverInitialised);
    }
    let mut lock = lock::take(root, &crate::operator::holder(), args.lock_timeout)?;
    // Stopping never needs a write that can fail (a full disk is when an operator most needs
    // it): the kernel's lock is the exclusion, and `lock.json` only names the holder to whoever
    // waits. A cut is a record, so `--preserve-state` writes (and needs) it.
    match lock.announce() {
        Err(e) if !args.preserve_state => {
            tracing::warn!(error = %e, "lock.json not written; stopping under the kernel's lock alone")
        }
        other => other?,
    }
    // The listener the running broker loaded: the promoted config's, else cotal.toml's (which
    // may be unparsable: stopping never needs it).
    let desired = observe::desired(root).map(|(d, _)| d).unwrap_or_default();
    let topology = &desired.topology;
    // A cut is a consistency point for backups: never one taken between two states (seed 000
    // §2.2 step 4): the apply that finishes the journal comes first. A plain `down` stops the
    // broker whatever the journal says.
    if args.preserve_state {
        apply::refuse_if_journal_open(
            &crate::store::journal::load(root)?,
            "down --preserve-state",
        )?;
    }
    if args.preserve_state && topology.is_cluster() {
        return Err(Error::refused(
            Diagnostic::new("--preserve-state records a cut for `cotal space backup` and `space restore`, which do not work on a cluster yet.")
            .blast("none, nothing was stopped.")
            .next("`cotal down` without it"),
        ));
    }
    // The nodes cotal.toml names with where each listens, and every node folder on disk
    // besides (a cotal.toml that does not parse, or whose [cluster] changed, still stops every
    // node this root started). A node folder cotal.toml does not name listens where its
    // promoted config says (port 0 matches no listener).
    let mut nodes: Vec<(
        crate::store::NodeFiles,
        Option<&crate::desired::topology::NodeSpec>,
    )> = topology
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
            on(DownEvent::Remote {
                node: f.name.clone(),
            });
            continue;
        }
        let promoted = crate::store::server_conf::read(f)?.map(PromotedConfig::new);
        let (host, port) = match spec {
            Some(s) => (s.host.as_str(), s.port),
            None => ("127.0.0.1", 0),
        };
        let l = observe::promoted_listener(promoted.as_ref(), host, port);
        let node = clustered.then(|| f.name.clone());
        stopped = stop_node(node, f, &l, args.grace, on)?.or(stopped);
        listener.get_or_insert(l);
    }
    let listener = listener.expect("a node");
    if args.preserve_state {
        let (host, port) = (&listener.host, listener.port);
        let sockets = identity::listening_sockets(&listener)?;
        if !sockets.is_empty() {
            return Err(Error::refused(
                Diagnostic::new(format!(
                    "the broker is stopped but {}; no cut without the evidence that nothing serves the store.",
                    identity::describe_holders(&sockets, &listener)
                ))
                .next("stop that process, then `cotal down --preserve-state` again"),
            ));
        }
        let cut = crate::store::cut::Cut {
            op: "cut".into(),
            at: crate::clock::timestamp(),
            generation: crate::store::generation::load(root)?.generation(),
            evidence: crate::store::cut::Evidence {
                broker_stopped: true,
                listener_unreachable: true,
                stopped_pid: stopped,
                listener: format!("{host}:{port}"),
            },
        };
        crate::credentials::audit_root(
            root,
            crate::audit::Event::BrokerCut,
            format!(
                "cut recorded at generation {}: the store is preserved for `cotal space backup` and `cotal space restore`",
                cut.generation
            ),
        )?;
        crate::store::cut::save(root, &cut)?;
        return Ok(Stopped::Cut {
            at: cut.at,
            generation: cut.generation,
        });
    }
    Ok(Stopped::Stopped)
}

/// Stop one node: every nats-server of this user started on its config (whatever it listens
/// on: still binding, a hand-edited port, a lost pidfile) and its pidfile's process when that is
/// one. Anything else is left alone. Returns the last pid stopped.
fn stop_node(
    name: Option<String>,
    node: &crate::store::NodeFiles,
    listener: &Listener,
    grace: Duration,
    on: &dyn Fn(DownEvent),
) -> Result<Option<u32>> {
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
                on(DownEvent::Stopped {
                    node: name.clone(),
                    pid,
                });
            }
            Ok(own.last().copied())
        }
        Liveness::Stopped { stale_pid } => {
            if let Some(pid) = stale_pid {
                crate::store::atomic::remove_file(&node.pid)?;
                on(DownEvent::StalePidfile {
                    node: name.clone(),
                    pid,
                });
            }
            on(DownEvent::NotRunning { node: name });
            Ok(None)
        }
        Liveness::Unknown { seen } => Err(Error::refused(
            Diagnostic::new(format!(
                "cannot tell whether this root's broker is running: {}{seen}; nothing was signalled there.",
                name.map(|n| crate::desired::topology::node_prefix(true, &n)).unwrap_or_default()
            ))
            .next("if the pidfile itself is wrong, move it aside and run `cotal down` again; otherwise stop whatever holds the port (it is not a nats-server of this root, so cotal leaves it alone)"),
        )),
    }
}

/// Refuse to start a node on a store that is not the one its spaces' data lives in: the
/// recorded store's folder holds another `.cotal-store-id`, or none (wiped, restored elsewhere,
/// or replaced). A cluster whose streams have `replicas` copies is refused only when as many
/// nodes lost their store (a node with a fresh store catches up from the others' replicas); a
/// remote node is taken to keep it.
fn refuse_foreign_store(observed: &crate::observed::Observed, replicas: u8) -> Result<()> {
    if observed.inventory.spaces.is_empty() {
        return Ok(());
    }
    let foreign: Vec<String> = observed
        .nodes
        .iter()
        .filter(|n| !n.remote())
        .filter_map(|n| {
            let home = n.store_home.as_ref()?;
            let recorded = home.id.as_ref()?;
            (home.dir == n.store_dir && n.store_id.as_ref() != Some(recorded)).then(|| {
                format!(
                    "{}{} holds {} where the spaces' store held .cotal-store-id {}",
                    if observed.is_cluster() {
                        format!("node {}: ", n.name())
                    } else {
                        String::new()
                    },
                    crate::space::channels::displayable(&n.store_dir.display().to_string()),
                    match &n.store_id {
                        Some(id) => format!(
                            "another store (.cotal-store-id {})",
                            crate::space::channels::displayable(id)
                        ),
                        None => "no .cotal-store-id".to_string(),
                    },
                    crate::space::channels::displayable(recorded),
                )
            })
        })
        .collect();
    if foreign.is_empty()
        || (observed.is_cluster() && replicas > 1 && foreign.len() < usize::from(replicas))
    {
        return Ok(());
    }
    Err(Error::refused(
        Diagnostic::new(format!(
            "the store is not the one the spaces' data was provisioned in: {}; starting on it would serve {} space(s) empty ({}).",
            foreign.join("; "),
            observed.inventory.spaces.len(),
            crate::plan::list_some(observed.inventory.spaces.keys(), 10)
        ))
        .blast("none, nothing was started.")
        .tenants(observed.inventory.spaces.keys().cloned())
        .next("put the spaces' store back in that folder (a backup, or wherever it was moved), then `cotal up`")
        .next("if their data is gone for good: `cotal up --allow-destroy` starts them empty"),
    ))
}
