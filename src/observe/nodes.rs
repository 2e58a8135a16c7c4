//! The broker's nodes as observed: each node's promoted config and process, the remote nodes
//! answering through the cluster, the system account's record, the host's capacity (disk,
//! memory, open files), and the listener a promoted config serves.

use super::*;

/// Every node's promoted config, process and listener, in `cotal.toml`'s order.
pub(super) fn observe_nodes(root: &Root, desired: &Desired) -> Result<Vec<ObservedNode>> {
    let topology = &desired.topology;
    let mut homes = crate::store::store_home::load(root)?;
    let mut nodes = Vec::new();
    for spec in &topology.nodes {
        let files = root.files_of(topology, spec);
        let conf = if topology.is_cluster() {
            root.check_node_config(&files)?;
            node_conf(&files)?
        } else {
            // `[broker] config`: an adopted broker's file, replaced by cotal's at its first
            // apply (the plan shows the difference), so it need not be cotal's yet.
            if spec.config.is_some() {
                root.check_node_config(&files)?;
            }
            server_conf::read(&files)?.map(PromotedConfig::new)
        };
        let listener = promoted_listener(conf.as_ref(), &spec.host, spec.port);
        let declared = Listener {
            host: spec.host.clone(),
            port: spec.port,
        };
        let process = if spec.local {
            broker_process_moving(&files, &listener, &declared)?
        } else {
            BrokerProcess::Stopped
        };
        let store_dir = root.store_dir(&spec.store_dir);
        // Where the data lives: the record's, else (a root that never recorded it) the store
        // its promoted config names.
        let store_home = match &mut homes {
            Some(h) => h.nodes.remove(&spec.name),
            None => conf
                .as_ref()
                .and_then(|c| c.view.store_dir.as_ref())
                .map(|d| crate::observed::StoreHome {
                    dir: d.into(),
                    id: None,
                }),
        };
        nodes.push(ObservedNode {
            // A remote node's store is on its own machine: taken to hold the data.
            store_holds_data: !spec.local
                || store_home
                    .as_ref()
                    .is_some_and(|h| crate::store::store_home::holds_data(&h.dir)),
            store_home,
            store_id: if spec.local {
                crate::store::store_home::read_id(&store_dir)
            } else {
                None
            },
            store_dir,
            spec: spec.clone(),
            files,
            listener,
            server_conf: conf,
            process,
        });
    }
    // A remote node runs when it answers, by its server name, through the cluster's system
    // account (asked through a local node whose process and listener were checked).
    let remote: Vec<String> = nodes
        .iter()
        .filter(|n| n.remote())
        .map(|n| n.name().to_string())
        .collect();
    let via = nodes
        .iter()
        .find(|n| !n.remote() && n.process.is_running())
        .map(|n| n.listener.clone());
    if let (false, Some(via)) = (remote.is_empty(), via)
        && let Ok(answered) = remote_nodes_answering(root, &via, &remote)
    {
        for n in nodes.iter_mut().filter(|n| answered.contains(n.name())) {
            n.process = BrokerProcess::Answering;
        }
    }
    Ok(nodes)
}

/// Which of `names` answer, by server name, through the system account of the cluster that
/// `via` (a running local node) belongs to.
pub(super) fn remote_nodes_answering(
    root: &Root,
    via: &Listener,
    names: &[String],
) -> Result<std::collections::BTreeSet<String>> {
    let url = live::Nats::new(&via.host, via.port)?.url().to_string();
    let mut last = None;
    for creds in mint::system_users(root, "cotal-monitor", permissions::monitor())? {
        match crate::broker::control::Control::connect(&url, &creds) {
            Ok(control) => return Ok(control.servers(names)?.into_keys().collect()),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("system_users is never empty"))
}

/// A cluster node's promoted config, refused unless cotal rendered it (a node's `config` may
/// name a file anywhere: one cotal did not write is never shown in a plan nor replaced).
pub(super) fn node_conf(f: &crate::store::NodeFiles) -> Result<Option<PromotedConfig>> {
    let Some(text) = server_conf::read(f)? else {
        return Ok(None);
    };
    if !text.starts_with(crate::render::HEADER) {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "node {}'s config file {} exists and is not a config cotal rendered; cotal neither shows it in a plan nor replaces it.",
                f.name,
                f.conf.display()
            ))
            .blast("none, nothing was read into the plan or changed.")
            .next(format!(
                "point `config` of node {} at a file of its own, or move that file aside",
                f.name
            )),
        ));
    }
    Ok(Some(PromotedConfig::new(text)))
}

/// The system account as the broker record holds it: which scoped keys it keeps (or the legacy
/// `sys.seed`), the JWT's revocations, and whether its scoped keys carry today's templates.
pub(super) fn system_observed(
    record: &broker_record::BrokerRecord,
    legacy_seed: bool,
) -> SystemObserved {
    use crate::trust::jwt::{self, AccountNats};
    use permissions::SysRole;
    let claims = jwt::decode_verified::<AccountNats>(&record.sys.jwt).ok();
    let revocations = claims
        .as_ref()
        .map(|c| c.nats.revocations.clone())
        .unwrap_or_default();
    let Some(keys) = &record.sys.keys else {
        return SystemObserved {
            keys: if legacy_seed {
                SysKeysState::Legacy
            } else {
                SysKeysState::None
            },
            revocations,
            templates_current: true,
            previous_control: false,
            handed_out_revoked: Default::default(),
            handed_out_expires: Default::default(),
            monitor: None,
            legacy_monitor_users: 0,
        };
    };
    let kept: std::collections::BTreeMap<SysRole, String> = SysRole::ALL
        .into_iter()
        .filter_map(|role| {
            let key = keys.get(role)?.key_pair().ok()?.public_key();
            Some((role, key))
        })
        .collect();
    let templates_current = claims
        .as_ref()
        .is_some_and(|c| permissions::sys_templates_current(&kept, &c.nats));
    SystemObserved {
        keys: SysKeysState::Scoped(kept),
        revocations,
        templates_current,
        previous_control: keys.previous_control.is_some(),
        handed_out_revoked: Default::default(),
        handed_out_expires: Default::default(),
        monitor: None,
        legacy_monitor_users: 0,
    }
}

/// What the broker's JetStream can hold: the configured store sizes, else what the running
/// broker reports, else nats-server's default estimated as it computes it at start (75% of the
/// free disk of the store folder, 75% of the memory).
pub(super) fn capacity(
    desired: &Desired,
    store_dir: &std::path::Path,
    live: Option<live::StoreFigures>,
    stored: u64,
) -> Capacity {
    let resource =
        |configured: Option<u64>, running: Option<u64>, estimate: fn(&std::path::Path) -> u64| {
            match (configured, running) {
                (Some(size), _) => (size, CapacitySource::Configured),
                (None, Some(size)) => (size, CapacitySource::Broker),
                (None, None) => (estimate(store_dir), CapacitySource::Estimated),
            }
        };
    let (file, file_source) = resource(
        desired.broker.max_file_store.map(|b| b.0),
        live.map(|s| s.max_file),
        |dir| free_disk(dir) / 4 * 3,
    );
    let (memory, memory_source) = resource(
        desired.broker.max_memory_store.map(|b| b.0),
        live.map(|s| s.max_memory),
        |_| total_memory() / 4 * 3,
    );
    Capacity {
        file: Store {
            size: file,
            source: file_source,
            used: Some(live.map(|s| s.file_used).unwrap_or(stored)),
        },
        memory: Store {
            size: memory,
            source: memory_source,
            used: live.map(|s| s.memory_used),
        },
        open_files: None,
    }
}

/// The broker's open-file limit: the lowest soft limit of its running local nodes (as
/// `/proc/PID/limits` says), else what `cotal up` will give the nats-server it starts (this
/// process's hard limit: `up` raises the soft limit to it).
pub(super) fn open_files(
    nodes: &[crate::observed::ObservedNode],
) -> Option<crate::observed::OpenFiles> {
    use crate::observed::{OpenFiles, OpenFilesSource};
    let running = nodes
        .iter()
        .filter_map(|n| n.process.pid())
        .filter_map(|pid| {
            let text = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
            crate::broker::process::soft_open_files(&text)
        })
        .min();
    if let Some(limit) = running {
        return Some(OpenFiles {
            limit,
            source: OpenFilesSource::Broker,
        });
    }
    let (_, hard) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok()?;
    Some(OpenFiles {
        limit: hard,
        source: OpenFilesSource::Up,
    })
}

/// Bytes free for an unprivileged writer on the filesystem of `dir` (or of its nearest existing
/// ancestor).
pub(super) fn free_disk(dir: &std::path::Path) -> u64 {
    dir.ancestors()
        .find_map(|d| nix::sys::statvfs::statvfs(d).ok())
        .map(|s| s.blocks_available() * s.fragment_size())
        .unwrap_or(0)
}

/// The machine's memory (`MemTotal` of `/proc/meminfo`).
pub(super) fn total_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map(|kib| kib * 1024)
        .unwrap_or(0)
}

/// The listener a promoted config names, else `host` and `port`.
pub fn promoted_listener(promoted: Option<&PromotedConfig>, host: &str, port: u16) -> Listener {
    let view = promoted.map(|p| &p.view);
    Listener {
        host: view
            .and_then(|v| v.host.clone())
            .unwrap_or_else(|| host.to_string()),
        port: view.and_then(|v| v.port).unwrap_or(port),
    }
}

/// The root's broker, three-valued, from the kernel's view of the pidfile's process and the
/// listener (see [`crate::broker::identity`]).
pub fn broker_process(
    node: &crate::desired::topology::NodeFiles,
    listener: &Listener,
) -> Result<BrokerProcess> {
    Ok(match identity::probe(node, listener)? {
        Liveness::Running { pid } => BrokerProcess::Running { pid },
        Liveness::Stopped { .. } => BrokerProcess::Stopped,
        Liveness::Unknown { seen } => BrokerProcess::Unknown { seen },
    })
}

/// [`broker_process`] of a node whose promoted config listens on `promoted` while `cotal.toml`
/// declares `declared`: when the promoted listener is held by what is known to be another
/// program ([`identity::held_by_another_program`]: no nats-server among its holders, the
/// pidfile's pid dead, no broker of this root found), "the port" of stopped is the one the next
/// start binds, the declared one. So an operator who moved the port away from a squatter is not
/// refused for the old one; a holder that might be this root's broker unrecognised keeps it
/// unknown.
pub fn broker_process_moving(
    node: &crate::desired::topology::NodeFiles,
    promoted: &Listener,
    declared: &Listener,
) -> Result<BrokerProcess> {
    let seen = broker_process(node, promoted)?;
    if matches!(seen, BrokerProcess::Unknown { .. })
        && promoted != declared
        && identity::held_by_another_program(
            node,
            &identity::listening_sockets(promoted)?,
            identity::recorded_pid(node)?.ok().flatten(),
        )
    {
        return broker_process(node, declared);
    }
    Ok(seen)
}
