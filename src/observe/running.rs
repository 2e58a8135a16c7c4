//! What the running broker says, read for observation: each node's live figures (streams,
//! connections, accounts), the spaces' channel registries and acl records from their KV
//! buckets, and whether a node lacks a stream a space in use needs.

use super::*;

/// What the running broker says, and why nothing when it could not be asked.
#[derive(Default)]
pub(super) struct Live {
    /// Why the live figures are missing although the broker runs.
    pub(super) error: Option<String>,
    pub(super) server: Option<ServerInfo>,
    pub(super) store: Option<live::StoreFigures>,
}

/// What the live figures are asked for: how many nodes' JSZ and how many running nodes, and
/// after an apply the accounts it touched; and what the observation is for.
pub(super) struct LiveRequest {
    pub(super) jsz_servers: usize,
    pub(super) running: usize,
    pub(super) touched: Option<Vec<String>>,
    pub(super) purpose: Purpose,
}

/// What to ask the running broker for, from the topology, the nodes running and (after an
/// apply, `reuse`) the spaces it touched.
pub(super) fn live_request(
    desired: &Desired,
    nodes: &[ObservedNode],
    inventory: &Inventory,
    reuse: Option<(&Observed, &std::collections::BTreeSet<SpaceName>)>,
    purpose: Purpose,
) -> LiveRequest {
    let topology = &desired.topology;
    let running = nodes.iter().filter(|n| n.process.is_running()).count();
    // Streams are read from every running node unless each holds a replica of every
    // stream (replicas = nodes, all running): then one node's view is the whole of it.
    // Connections are always summed over every node.
    let whole_on_each =
        topology.replicas as usize >= topology.nodes.len() && running == topology.nodes.len();
    let jsz_servers = if whole_on_each && purpose != Purpose::Status {
        1
    } else {
        running
    };
    // After an apply: the accounts of the spaces it touched, as they are now.
    let touched: Option<Vec<String>> = reuse.map(|(_, names)| {
        names
            .iter()
            .filter_map(|n| inventory.spaces.get(n))
            .map(|s| s.account_pub.clone())
            .collect()
    });
    LiveRequest {
        jsz_servers,
        running,
        touched,
        purpose,
    }
}

/// Apply the running broker's figures (`fetched` for `request`) to `inventory`: every stream
/// and connection (from one node when each holds every stream, else from every running node;
/// asked again of every running node when one node's view lacks a space's stream), and each
/// space's channel registry and ACL (read now, or taken from `known_registries` after an
/// apply). After an apply (`reuse`), only the touched accounts were asked again; the others
/// keep what was observed before.
#[allow(clippy::too_many_arguments)]
pub(super) fn observe_live(
    root: &Root,
    desired: &Desired,
    nodes: &[ObservedNode],
    listener: &Listener,
    inventory: &mut Inventory,
    known_registries: &KnownRegistries,
    registry_cache: crate::store::caches::registry_cache::Cache,
    reuse: Option<(&Observed, &std::collections::BTreeSet<SpaceName>)>,
    request: LiveRequest,
    mut fetched: Result<live::Figures>,
    drift_cache: Option<&DriftCache>,
) -> Result<Live> {
    let started = std::time::Instant::now();
    let LiveRequest {
        jsz_servers,
        running,
        touched,
        purpose,
    } = request;
    let topology = &desired.topology;
    // One node's view is the whole only once every replica is placed: right after a rescale
    // up, the node that answers may not hold its new replicas yet, and a stream it does not
    // report would read as missing. Then every running node is asked, and their views merged.
    // A second view that cannot be had leaves the first one standing.
    if jsz_servers < running
        && let Ok(figures) = &fetched
        && lacks_a_space_stream(inventory, figures, touched.as_deref())
    {
        tracing::debug!("one node's view lacks a space's stream: asking every running node");
        match live_figures(root, listener, running, running, touched.as_deref(), None) {
            Ok(merged) => fetched = Ok(merged),
            Err(e) => tracing::debug!(error = %e, "every running node's view: kept the one node's"),
        }
    }
    let figures = match fetched {
        Ok(figures) => figures,
        Err(e) => {
            return Ok(Live {
                error: Some(e.to_string()),
                ..Live::default()
            });
        }
    };
    apply_figures(
        inventory,
        &figures,
        topology.is_cluster().then_some(topology.replicas as usize),
    );
    if let Some(cache) = drift_cache {
        take_vouched_verdicts(inventory, &figures, cache);
    }
    let mut verdicts = (!topology.is_cluster())
        .then(|| judged(inventory, &figures))
        .flatten();
    if let (Some((before, _)), Some(touched)) = (reuse, &touched) {
        keep_untouched_figures(inventory, before, touched);
        // The untouched accounts' verdicts as observed before (what vouched for them then
        // still does).
        if let (Some(verdicts), Some(before)) = (
            verdicts.as_mut(),
            before.server.as_ref().and_then(|s| s.drift_cache.as_ref()),
        ) {
            verdicts.carry(before, |account| !touched.iter().any(|t| t == account));
        }
    }
    // The registries this process's provisioning seeded, where their streams show the seed
    // alone: known without reading them.
    for (name, space) in inventory.spaces.iter_mut() {
        if let Some(&revision) = known_registries.seeded.get(name)
            && space.registry_fingerprint.as_ref().is_some_and(|f| {
                f.first_seq == revision && f.last_seq == revision && f.messages == 1
            })
        {
            space.registry =
                crate::observed::RegistryState::Read(crate::space::channels::seeded(revision));
        }
    }
    match &known_registries.read {
        None => {
            let mut read = read_registries(
                root,
                listener,
                inventory,
                topology.is_cluster(),
                &registry_cache,
            )?;
            read.extend(read_acls(root, listener, inventory, topology.is_cluster())?);
            tracing::debug!(took = ?started.elapsed(), "read the channel registries and acls");
            // A bucket read asks its account's JetStream API: the counters the verdicts were
            // judged with have moved, by cotal's own hand. For a state whose caches are saved
            // (`up`'s refresh, which reads every registry its provisioning did not seed) those
            // accounts are judged again from a report after the reads; otherwise their verdicts
            // are left out (the next plan asks them again).
            if let Some(verdicts) = verdicts.as_mut()
                && !read.is_empty()
            {
                read.sort_unstable();
                read.dedup();
                if purpose == Purpose::Remembered {
                    judge_again(root, listener, inventory, verdicts, &read);
                } else {
                    verdicts
                        .accounts
                        .retain(|a, _| read.binary_search(a).is_err());
                }
            }
        }
        Some(known) => {
            for (name, space) in inventory.spaces.iter_mut() {
                if matches!(space.registry, crate::observed::RegistryState::Read(_))
                    && known_registries.seeded.contains_key(name)
                {
                    continue;
                }
                // Only the same account's: a name removed and added again is new.
                if let Some((account, r)) = known.get(name)
                    && *account == space.account_pub
                {
                    space.registry = r.clone();
                }
            }
        }
    }
    Ok(Live {
        error: None,
        server: Some(ServerInfo {
            version: figures.version,
            started: figures.start,
            // A single server answers by whatever name it has: it is the one node.
            loaded: if nodes.len() == 1 {
                figures
                    .loaded
                    .into_values()
                    .next()
                    .map(|d| (nodes[0].name().to_string(), d))
                    .into_iter()
                    .collect()
            } else {
                figures.loaded
            },
            behind: Vec::new(),
            behind_records: None,
            drift_cache: verdicts,
        }),
        store: figures.store,
    })
}

/// Whether `figures` lack one of the streams and buckets cotal makes of a space in use (not
/// archived, not suspended: nats-server recovers a suspended account's streams only when a
/// client first uses it) among those asked about (`only`: the accounts asked for; `None`:
/// every account): then one node's view may not be the whole.
pub(super) fn lacks_a_space_stream(
    inventory: &Inventory,
    figures: &live::Figures,
    only: Option<&[String]>,
) -> bool {
    inventory
        .spaces
        .iter()
        .filter(|(_, space)| space.archived.is_none() && !space.limits.is_suspended())
        .filter(|(_, space)| only.is_none_or(|asked| asked.contains(&space.account_pub)))
        .any(|(name, space)| {
            let reported = figures.accounts.get(&space.account_pub);
            let present = reported.into_iter().flat_map(|a| &a.streams);
            !streams::missing(&name.token(), present.map(|s| s.name.as_str())).is_empty()
        })
}

/// Ask the running broker for every account's streams and connections, through an ephemeral
/// system-account user (one connection, three requests, whatever the number of spaces).
pub fn live_figures(
    root: &Root,
    listener: &Listener,
    jsz_servers: usize,
    servers: usize,
    only: Option<&[String]>,
    vouch: Option<&Vouching>,
) -> Result<live::Figures> {
    let nats = live::Nats::new(&listener.host, listener.port)?;
    // The previous control key, when kept, reaches a broker still running the system JWT of
    // an interrupted key change.
    let mut last = None;
    for creds in mint::system_users(root, "cotal-monitor", permissions::monitor())? {
        match nats.figures_of(&creds, only, jsz_servers, servers, vouch) {
            Ok(figures) => return Ok(figures),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("system_users is never empty"))
}

/// Read every active space's channel registry from the running broker, as an ephemeral user of
/// each space that may touch nothing but its registry (spaces read concurrently). A registry the
/// live figures show missing or empty is known without a connection, and so is one whose stream
/// has the fingerprint it had when the last apply read it (`cache`, the root's
/// `store::caches::registry_cache` as loaded for this observation).
pub(super) fn read_registries(
    root: &Root,
    listener: &Listener,
    inventory: &mut Inventory,
    clustered: bool,
    cache: &crate::store::caches::registry_cache::Cache,
) -> Result<Vec<String>> {
    use crate::observed::RegistryState;
    let mut wanted = Vec::new();
    let mut known = Vec::new();
    let mut seeded = 0usize;
    for (name, space) in &inventory.spaces {
        if space.limits.is_suspended() {
            continue;
        }
        // Known already: a registry this process's provisioning seeded.
        if matches!(space.registry, RegistryState::Read(_)) {
            seeded += 1;
            continue;
        }
        // The live figures already say which registries hold nothing: a bucket whose stream
        // does not exist, or holds no message, reads as missing or empty without connecting.
        if let Some(state) =
            known_from_figures(space, &streams::registry_stream(&name.token()), clustered)
        {
            known.push((name.clone(), state));
            continue;
        }
        // Unchanged since the last apply read it: its stream has the same fingerprint.
        if let Some(registry) = space
            .registry_fingerprint
            .as_ref()
            .and_then(|f| cache.get(&space.account_pub, f))
        {
            known.push((name.clone(), RegistryState::Read(registry.clone())));
            continue;
        }
        let Some(creds) = bucket_reader(
            root,
            name,
            space,
            "cotal-registry",
            permissions::registry(&name.token()),
        )?
        else {
            continue;
        };
        wanted.push((name.clone(), name.token(), creds));
    }
    tracing::debug!(
        known = known.len(),
        seeded,
        read = wanted.len(),
        "channel registries known from the live figures or the cache, and to read"
    );
    for (name, state) in known {
        if let Some(space) = inventory.spaces.get_mut(&name) {
            space.registry = state;
        }
    }
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let read = accounts_of(inventory, wanted.iter().map(|(name, _, _)| name));
    let results = live::Nats::new(&listener.host, listener.port)?.registries(wanted);
    for (name, result) in results {
        if let Some(space) = inventory.spaces.get_mut(&name) {
            space.registry = bucket_state(result);
        }
    }
    Ok(read)
}

/// The accounts of the spaces `names`.
pub(super) fn accounts_of<'a>(
    inventory: &Inventory,
    names: impl Iterator<Item = &'a SpaceName>,
) -> Vec<String> {
    names
        .filter_map(|n| inventory.spaces.get(n))
        .map(|s| s.account_pub.clone())
        .collect()
}

/// What the live figures already say of a space's bucket (its stream `stream`) without
/// connecting: missing (no stream) or empty (no message). `None`: it must be read; always on a
/// cluster, whose figures may come from a replica that is behind.
pub(super) fn known_from_figures(
    space: &crate::observed::ObservedSpace,
    stream: &str,
    clustered: bool,
) -> Option<crate::observed::RegistryState> {
    use crate::observed::RegistryState;
    if clustered {
        return None;
    }
    match space.usage.streams.iter().find(|s| s.name == stream) {
        None => Some(RegistryState::Missing),
        Some(s) if s.messages == Some(0) => Some(RegistryState::Read(Default::default())),
        Some(_) => None,
    }
}

/// The creds of an ephemeral user of `space` named `user` with `permissions` (a bucket's
/// reader); `None` when its record no longer holds the account observed.
pub(super) fn bucket_reader(
    root: &Root,
    name: &SpaceName,
    space: &crate::observed::ObservedSpace,
    user: &str,
    permissions: crate::trust::jwt::Permissions,
) -> Result<Option<String>> {
    let record = crate::store::account_record::load(root, name)?;
    if record.account.public != space.account_pub {
        return Ok(None);
    }
    let creds = mint::user(
        &space.account_pub,
        &record.account.signing_seed,
        user,
        permissions,
        Some(permissions::EPHEMERAL),
        mint::issue_floor(&record.account.jwt),
    )
    .map_err(Error::other)?
    .creds;
    Ok(Some(creds))
}

/// A bucket as read: its keys, missing (no bucket yet), or why reading it failed.
pub(super) fn bucket_state(
    result: std::result::Result<Option<crate::space::channels::Registry>, String>,
) -> crate::observed::RegistryState {
    use crate::observed::RegistryState;
    match result {
        Ok(Some(keys)) => RegistryState::Read(keys),
        Ok(None) => RegistryState::Missing,
        Err(e) => RegistryState::Failed(e),
    }
}

/// Read the members' acl records of every active space whose acl bucket the live figures show
/// holding a record (one with none, or none yet, is known without connecting), as an ephemeral
/// user of the space that may touch nothing but that bucket.
pub(super) fn read_acls(
    root: &Root,
    listener: &Listener,
    inventory: &mut Inventory,
    clustered: bool,
) -> Result<Vec<String>> {
    let mut wanted = Vec::new();
    for (name, space) in inventory.spaces.iter_mut() {
        if space.limits.is_suspended() || space.archived.is_some() {
            continue;
        }
        let bucket = format!("cotal_acl_{}", name.token());
        if let Some(state) = known_from_figures(space, &format!("KV_{bucket}"), clustered) {
            space.acl = state;
            continue;
        }
        let Some(creds) = bucket_reader(
            root,
            name,
            space,
            "cotal-acl",
            permissions::bucket_keeper(&bucket),
        )?
        else {
            continue;
        };
        wanted.push((name.clone(), bucket, creds));
    }
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let read = accounts_of(inventory, wanted.iter().map(|(name, _, _)| name));
    let results = live::Nats::new(&listener.host, listener.port)?.buckets(wanted);
    for (name, result) in results {
        if let Some(space) = inventory.spaces.get_mut(&name) {
            space.acl = bucket_state(result);
        }
    }
    Ok(read)
}
