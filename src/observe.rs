//! Observation: read everything the planner may depend on from disk (and, when the broker
//! runs, from the broker) into an [`Observed`] value. The only IO before planning.
//!
//! Invariant: observation never writes.

use crate::broker::identity::{self, Listener, Liveness};
use crate::broker::live;
use crate::desired::{self, Desired};
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::mint;
use crate::model::SpaceName;
use crate::observed::ObservedSpace;
use crate::observed::drift_verdicts::{DriftCache, Verdict, Vouching};
use crate::observed::{
    BrokerProcess, BrokerRecordState, Capacity, CapacitySource, Inventory, JournalState, Observed,
    ObservedNode, PromotedConfig, ServerInfo, Store, StreamUsage, SysKeysState, SystemObserved,
    Usage, UsageSource,
};
use crate::space::{permissions, streams};
use crate::store::folder_cache::{self, FolderCache};
use crate::store::signature_memo::SignatureMemo;
use crate::store::{
    Root, broker_record, desired_file, generation, inventory, jetstream_dir, journal, server_conf,
    space_dir, users,
};
use crate::trust::digest;
use rayon::prelude::*;
use std::collections::BTreeMap;

/// Read and parse `cotal.toml`; returns the desired state and the sha256 of its bytes.
pub fn desired(root: &Root) -> Result<(Desired, String)> {
    desired_from_text(root, &desired_file::read_required(root)?)
}

/// For the verbs that only read (`status`, `space list`, `creds`): the desired state, or, when
/// `cotal.toml` is missing or does not parse, the defaults and why (the caller says so; what is
/// on disk is still shown).
pub fn desired_for_reading(root: &Root) -> Result<(Desired, String, Option<String>)> {
    match desired_file::read(root)? {
        None => Ok((
            Desired::default(),
            String::new(),
            Some(format!("{} does not exist", root.desired_file().display())),
        )),
        Some(text) => match desired_from_text(root, &text) {
            Ok((desired, digest)) => Ok((desired, digest, None)),
            Err(Error::Input(why)) => {
                Ok((Desired::default(), String::new(), Some(why.to_string())))
            }
            Err(e) => Err(e),
        },
    }
}

/// Parse a `cotal.toml` text (the file's, or an edit of it); returns the desired state and the
/// digest of what it says ([`desired_digest`]).
pub fn desired_from_text(root: &Root, text: &str) -> Result<(Desired, String)> {
    let file = root.desired_file().display().to_string();
    let document = desired::document(text, &file).map_err(Error::input)?;
    // The TOML, parsed once, is read into the model and into the values its digest covers at
    // once, on two cores.
    let copy = document.clone();
    let (desired, digest) = rayon::join(
        || desired::parse_document(copy, text, &file),
        || digest::desired_digest_of(document, text),
    );
    Ok((desired.map_err(Error::input)?, digest))
}

pub use crate::trust::digest::desired_digest;

/// Observe the root.
/// The original Cotal's material that names no tenant ([`Observed::unattributed_material`]):
/// its P7 files at the root of `.cotal/` and files flat in `auth/creds/`, relative to the
/// root, in name order. A link or any other entry counts as what it is named.
fn unattributed_material(root: &Root) -> Result<Vec<String>> {
    let mut out: Vec<String> = crate::adopt::MATERIAL
        .iter()
        .filter(|name| std::fs::symlink_metadata(root.state_dir().join(name)).is_ok())
        .map(|name| format!(".cotal/{name}"))
        .collect();
    let dir = root.agent_creds_dir();
    match std::fs::read_dir(&dir) {
        Ok(entries) => {
            let mut flat: Vec<String> = entries
                .flatten()
                .filter(|e| !e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| format!(".cotal/auth/creds/{}", e.file_name().to_string_lossy()))
                .collect();
            flat.sort();
            out.extend(flat);
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(dir, e)),
    }
    Ok(out)
}

pub fn observe(root: &Root, desired: &Desired, desired_digest: String) -> Result<Observed> {
    observe_for(root, desired, desired_digest, Purpose::Plan)
}

/// An observation for `purpose` that knows no registry beforehand, and keeps no memo.
fn observe_for(
    root: &Root,
    desired: &Desired,
    desired_digest: String,
    purpose: Purpose,
) -> Result<Observed> {
    observe_with(
        root,
        desired,
        desired_digest,
        KnownRegistries::default(),
        None,
        purpose,
    )
    .map(|(o, _)| o)
}

/// What an observation made for a caller that has just written to save for the next one: the
/// memo of the signatures it verified or found verified before ([`SignatureMemo::save`]), and
/// what each space's folder said, stamped (`store::folder_cache`; `None` when the file system
/// gave no reference time).
pub struct ForNext {
    pub memo: SignatureMemo,
    pub folders: Option<FolderCache>,
}

/// What an observation knows of the channel registries without reading them. `read`: after an
/// apply, each space's as observed before it (with its account), patched with what the apply
/// wrote, and no registry is read (`None`: every registry not otherwise known is read).
/// `seeded`: the revision at which this process's provisioning seeded a registry, known to hold
/// the seed alone when its stream's fingerprint, asked after the seed, shows that one message.
#[derive(Default)]
pub struct KnownRegistries {
    pub read: Option<BTreeMap<SpaceName, (String, crate::observed::RegistryState)>>,
    pub seeded: BTreeMap<SpaceName, u64>,
}

/// What an observation is for: what it asks the broker and what it prepares.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// A plan (an apply's included).
    Plan,
    /// `status`: every node's view of the streams on a cluster.
    Status,
    /// The state a write leaves, whose caches the caller saves: the verdicts on stream
    /// configs whose counters its own bucket reads moved are judged again (`up` reads every
    /// registry).
    Remembered,
    /// The state after an apply ([`observe_after_apply`]).
    AfterApply,
}

/// [`observe`], and the memo of the signatures it verified or found verified before, for a
/// caller that has just written to save ([`SignatureMemo::save`]) for the next observation.
/// `seeded`: the registries this process's provisioning seeded (`up`'s), each at its revision.
pub fn observe_remembering(
    root: &Root,
    desired: &Desired,
    desired_digest: String,
    seeded: BTreeMap<SpaceName, u64>,
) -> Result<(Observed, ForNext)> {
    observe_with(
        root,
        desired,
        desired_digest,
        KnownRegistries { read: None, seeded },
        None,
        Purpose::Remembered,
    )
}

/// [`observe`] for `status`: on a cluster every node's view of the streams is gathered, so
/// whether every replica is current comes from each stream's leader (a plan needs only one
/// node's view when every node holds a replica of every stream).
pub fn observe_for_status(
    root: &Root,
    desired: &Desired,
    desired_digest: String,
) -> Result<Observed> {
    observe_for(root, desired, desired_digest, Purpose::Status)
}

/// Observe the root right after an apply, for the state it leaves: every local file is read
/// again, but not the channel registries, which the apply knows (`known`: what it observed
/// before, patched with what it wrote): reading every space's registry again would cost one
/// connection per space. The live figures are asked again of the accounts the apply `touched`
/// only (a few requests, not every stream of the broker); every other space keeps the figures
/// observed `before` the apply, a second earlier. `touched: None` asks for every account.
/// With it, the memo of the signatures it verified, for the apply to save.
pub fn observe_after_apply(
    root: &Root,
    desired: &Desired,
    desired_digest: String,
    known: KnownRegistries,
    before: &Observed,
    touched: Option<&std::collections::BTreeSet<SpaceName>>,
) -> Result<(Observed, ForNext)> {
    observe_with(
        root,
        desired,
        desired_digest,
        known,
        touched.map(|t| (before, t)),
        Purpose::AfterApply,
    )
}

fn observe_with(
    root: &Root,
    desired: &Desired,
    desired_digest: String,
    known_registries: KnownRegistries,
    reuse: Option<(&Observed, &std::collections::BTreeSet<SpaceName>)>,
    purpose: Purpose,
) -> Result<(Observed, ForNext)> {
    observe_from(
        root,
        DesiredFrom::Given(desired, desired_digest),
        known_registries,
        reuse,
        purpose,
    )
    .map(|(_, observed, next)| (observed, next))
}

/// A plan's inputs: `cotal.toml` parsed (and digested) while the records are read, and the
/// observation of the root.
pub fn observe_parsing(root: &Root) -> Result<(Desired, Observed)> {
    observe_from(
        root,
        DesiredFrom::Parse,
        KnownRegistries::default(),
        None,
        Purpose::Plan,
    )
    .map(|(desired, observed, _)| (desired.into_owned(), observed))
}

/// Where an observation's desired state comes from: given (with its digest), or `cotal.toml`,
/// parsed beside the records read.
enum DesiredFrom<'a> {
    Given(&'a Desired, String),
    Parse,
}

/// The root's local records: the broker record (with the signature memo and the system
/// account's state it gives) and the account records.
struct Records {
    broker: BrokerRecordState,
    system: SystemObserved,
    memo: SignatureMemo,
    inventory: Inventory,
    /// What the folders said last (`store::folder_cache`).
    folders: Option<folder_cache::Loaded>,
}

/// Read the root's [`Records`], each account record on every core.
fn read_records(root: &Root, now: i64) -> Result<Records> {
    let mut system = SystemObserved {
        keys: SysKeysState::None,
        revocations: Default::default(),
        templates_current: true,
        previous_control: false,
        handed_out_revoked: Default::default(),
        handed_out_expires: Default::default(),
        monitor: None,
        legacy_monitor_users: 0,
    };
    let mut memo = SignatureMemo::none();
    let broker = match broker_record::load(root)? {
        broker_record::Loaded::Absent => BrokerRecordState::Absent,
        broker_record::Loaded::Corrupt { file, reason } => {
            BrokerRecordState::Corrupt { file, reason }
        }
        broker_record::Loaded::Valid((record, trust)) => {
            memo = SignatureMemo::load(root, record.operator.seed.expose());
            system = system_observed(&record, broker_record::sys_seed_retained(root));
            let ledger = crate::store::users::load_system(root, &record.sys.public)?;
            system.legacy_monitor_users = ledger
                .minted
                .iter()
                .filter(|m| m.account.is_none())
                .filter(|m| !ledger.is_revoked(&m.key, m.issued_at))
                .filter(|m| m.expires_at.is_none_or(|t| t > now))
                .count();
            system.handed_out_expires = ledger
                .minted
                .iter()
                .filter_map(|m| m.expires_at.map(|t| (m.key.clone(), t)))
                .collect();
            system.handed_out_revoked = ledger.revoked;
            system.monitor = record.sys.monitor_account.as_ref().and_then(|m| {
                crate::trust::jwt::decode_verified::<crate::trust::jwt::AccountNats>(&m.jwt)
                    .ok()
                    .map(|c| (m.public.clone(), c.nats))
            });
            BrokerRecordState::Valid(trust)
        }
    };
    let (inventory, folders) = match &broker {
        BrokerRecordState::Valid(trust) => rayon::join(
            || inventory::read(root, trust, &memo),
            || folder_cache::load(root, &trust.operator_pub, now),
        ),
        _ => (Ok(Inventory::default()), None),
    };
    Ok(Records {
        broker,
        system,
        memo,
        inventory: inventory?,
        folders,
    })
}

fn observe_from<'a>(
    root: &Root,
    from: DesiredFrom<'a>,
    known_registries: KnownRegistries,
    reuse: Option<(&Observed, &std::collections::BTreeSet<SpaceName>)>,
    purpose: Purpose,
) -> Result<(std::borrow::Cow<'a, Desired>, Observed, ForNext)> {
    let now = crate::clock::now();
    // An observation whose caller saves what it read stamps every space's folder before it
    // reads it, against a time the file system stamped before any read (`store::folder_cache`).
    let reference = matches!(purpose, Purpose::Remembered | Purpose::AfterApply)
        .then(|| folder_cache::reference(root))
        .flatten();
    // The records are read on every core while `cotal.toml` is parsed (when it is not given)
    // and the nodes are looked for (a scan of `/proc`).
    let (records, given) = rayon::join(
        || read_records(root, now),
        || -> Result<_> {
            let (desired, digest) = match from {
                DesiredFrom::Given(desired, digest) => {
                    (std::borrow::Cow::Borrowed(desired), digest)
                }
                DesiredFrom::Parse => {
                    let (desired, digest) = desired(root)?;
                    (std::borrow::Cow::Owned(desired), digest)
                }
            };
            // Every connection this process makes to the broker speaks what the root declares
            // (looking for a cluster's remote nodes makes the first).
            crate::broker::client_tls::configure(root, desired.broker.tls.as_ref());
            let started = std::time::Instant::now();
            let nodes = observe_nodes(root, &desired);
            tracing::debug!(took = ?started.elapsed(), "observed the nodes");
            Ok((desired, digest, nodes))
        },
    );
    // `cotal.toml`'s error first, as when it was parsed before anything was read.
    let (desired_owned, desired_digest, nodes) = given?;
    let desired: &Desired = &desired_owned;
    let Records {
        broker,
        system,
        memo,
        mut inventory,
        folders,
    } = records?;
    let nodes = nodes?;
    let started = std::time::Instant::now();
    // The broker as a whole: unknown when a node is, and the node cotal reaches it through.
    let process = crate::observed::nodes_process(&nodes);
    let listener = crate::observed::via(&nodes).listener.clone();
    let stopped = process == BrokerProcess::Stopped;
    // Each local store with the accounts it holds folders for (listed once when the broker is
    // stopped: then every space's streams are read from it).
    let stores: Vec<LocalStore> = nodes
        .iter()
        .filter(|n| !n.remote())
        .map(|n| {
            Ok(LocalStore {
                accounts: if stopped {
                    Some(jetstream_dir::account_names(&n.store_dir)?)
                } else {
                    None
                },
                dir: n.store_dir.clone(),
            })
        })
        .collect::<Result<_>>()?;
    let request = match (process.is_running(), &broker) {
        (true, BrokerRecordState::Valid(_)) => {
            Some(live_request(desired, &nodes, &inventory, reuse, purpose))
        }
        _ => None,
    };
    // The verdicts on stream configs the last apply or `up` cached, with the expectation each
    // space's records make now: what lets the broker leave out the configs it vouches for.
    let drift = request
        .as_ref()
        .filter(|r| {
            // After an apply, the accounts it re-signed are asked afresh, never vouched for
            // by verdicts cached before it (enabling an account's JetStream again resets its
            // counters).
            r.purpose != Purpose::AfterApply
                && r.touched.is_none()
                && r.jsz_servers == 1
                && r.running == 1
                && !desired.topology.is_cluster()
        })
        .and_then(|_| crate::store::drift_cache::load(root))
        .map(|cache| DriftVouch::new(cache, &inventory));
    // The small per-space files are read on every core (at thousands of spaces they are most
    // of a plan's time) while the broker answers for its live figures: none of them depends
    // on the other.
    let known = Folders {
        cache: folders.as_ref(),
        reference: reference.as_ref(),
    };
    // The registries the last apply read, when this observation reads registries: loaded
    // beside the figures too (the cache is a few hundred KB at a thousand spaces).
    let wants_registries = request.is_some() && known_registries.read.is_none();
    let (fetched, (local, registries)) = rayon::join(
        || {
            request.as_ref().map(|r| {
                live_figures(
                    root,
                    &listener,
                    r.jsz_servers,
                    r.running,
                    r.touched.as_deref(),
                    drift.as_ref().map(DriftVouch::vouching).as_ref(),
                )
            })
        },
        || {
            let registries = wants_registries.then(|| crate::store::registry_cache::load(root));
            let local = inventory
                .spaces
                .par_iter_mut()
                .map(|(name, space)| local_files(root, name, space, now, &memo, known))
                .collect::<Result<Vec<_>>>();
            (local, registries)
        },
    );
    let read = local?;
    tracing::debug!(
        vouched = read.iter().filter(|r| r.vouched).count(),
        read = read.iter().filter(|r| !r.vouched).count(),
        "space folders the folder cache vouched for, and read"
    );
    let for_next_folders = reference.map(|reference| {
        let operator = match &broker {
            BrokerRecordState::Valid(trust) => trust.operator_pub.as_str(),
            _ => "",
        };
        let mut cache = FolderCache::new(operator, now);
        cache.extend_settled(read.into_iter().filter_map(|r| r.entry), &reference);
        cache
    });
    let live = match (request, fetched) {
        (Some(request), Some(fetched)) => observe_live(
            root,
            desired,
            &nodes,
            &listener,
            &mut inventory,
            &known_registries,
            registries.unwrap_or_default(),
            reuse,
            request,
            fetched,
            drift.as_ref().map(|d| &d.cache),
        )?,
        _ => Live::default(),
    };
    tracing::debug!(took = ?started.elapsed(), "read the live figures and the local files");
    // What a space's store folders hold, where the broker does not report it (after the live
    // figures, which say which spaces it does).
    inventory
        .spaces
        .par_iter_mut()
        .try_for_each(|(_, space)| stored_streams(space, stopped, &stores))?;
    tracing::debug!(verified = memo.hits(), "signatures the memo vouched for");
    tracing::debug!(
        spaces = inventory.spaces.len(),
        corrupt = inventory.corrupt.len(),
        running = ?process,
        "observed"
    );
    let stored: u64 = inventory
        .spaces
        .values()
        .map(|s| s.usage.total_bytes())
        .sum();
    let mut capacity = capacity(desired, &nodes[0].store_dir, live.store, stored);
    capacity.open_files = open_files(&nodes);
    let journal = journal::load(root)?;
    let mut journal_protected = std::collections::BTreeSet::new();
    if let crate::observed::JournalState::Valid(j) = &journal {
        for r in &j.removals {
            let protected = match space_dir::load_lifecycle(root, &r.space) {
                Ok(Some(l)) => l.account == r.account && l.protect,
                Ok(None) => false,
                Err(_) => true,
            };
            if protected {
                journal_protected.insert(r.space.clone());
            }
        }
    }
    let tenant_material = match broker {
        BrokerRecordState::Absent => broker_record::tenant_material(root)?,
        _ => Vec::new(),
    };
    let unattributed_material = unattributed_material(root)?;
    let mut observed = Observed {
        broker,
        tenant_material,
        unattributed_material,
        system,
        now,
        inventory,
        generation: generation::load(root)?,
        journal,
        journal_protected,
        capacity,
        desired_digest,
        live_error: live.error,
        server: live.server,
        nodes,
        layout_conflict: layout_conflict(root, desired)?,
        tls: desired
            .broker
            .tls
            .as_ref()
            .map(|t| crate::tls::observe(root, t, crate::tls::Use::Listener)),
        route_rotation: crate::store::route_rotation::load(root)?,
        route_tls: desired
            .topology
            .route_tls
            .as_ref()
            .map(|t| crate::tls::observe(root, t, crate::tls::Use::Routes)),
        include: desired
            .broker
            .include
            .as_ref()
            .map(|p| crate::include::observe(root.dir(), &p.path, &p.at)),
    };
    // Which running nodes have loaded a config other than the rendering of the inventory.
    // `behind` only with no journal open: an interrupted apply's records (a removal not yet
    // reaped, an add not yet promoted) are not what the broker should run, and finishing it
    // promotes. `behind_records` whatever the journal, of the records the promoted config
    // preloads: whether an interrupted apply's fence is in force.
    if let (Some(server), BrokerRecordState::Valid(trust)) =
        (observed.server.as_ref(), &observed.broker)
        && !server.loaded.is_empty()
    {
        let behind_of = |spaces: &BTreeMap<SpaceName, ObservedSpace>| -> Vec<String> {
            digests_of(root, desired, &observed, trust, spaces)
                .into_iter()
                .filter(|(name, digest)| server.loaded.get(name).is_some_and(|l| l != digest))
                .map(|(name, _)| name)
                .collect()
        };
        let journal_open = !matches!(observed.journal, JournalState::Absent);
        let behind = (!journal_open).then(|| behind_of(&observed.inventory.spaces));
        // With a journal open: the records the promoted config preloads (an interrupted
        // apply may have written others for its next promotion).
        let every_loaded = observed
            .inventory
            .spaces
            .values()
            .all(|s| observed.loads(&s.account_pub));
        let behind_records = match &behind {
            Some(b) if every_loaded => b.clone(),
            _ => behind_of(
                &observed
                    .inventory
                    .spaces
                    .iter()
                    .filter(|(_, s)| observed.loads(&s.account_pub))
                    .map(|(n, s)| (n.clone(), s.clone()))
                    .collect(),
            ),
        };
        if let Some(server) = observed.server.as_mut() {
            if let Some(behind) = behind {
                server.behind = behind;
            }
            server.behind_records = Some(behind_records);
        }
    }
    Ok((
        desired_owned,
        observed,
        ForNext {
            memo,
            folders: for_next_folders,
        },
    ))
}

/// The config digest each node reports (VARZ) once it has loaded the rendering of the observed
/// inventory, by node name; a cluster node's covers its route credential (derived from the
/// operator seed, which is why this is observation and not planning).
pub fn expected_digests(
    root: &Root,
    desired: &Desired,
    observed: &Observed,
    trust: &crate::observed::BrokerTrust,
) -> Vec<(String, String)> {
    digests_of(root, desired, observed, trust, &observed.inventory.spaces)
}

/// [`expected_digests`] of the rendering of `spaces`' records.
fn digests_of(
    root: &Root,
    desired: &Desired,
    observed: &Observed,
    trust: &crate::observed::BrokerTrust,
    spaces: &BTreeMap<SpaceName, ObservedSpace>,
) -> Vec<(String, String)> {
    let preloads = crate::observed::preloads(spaces);
    let credential = match crate::store::broker_record::load(root) {
        Ok(crate::store::broker_record::Loaded::Valid((record, _))) => {
            Some(crate::trust::route_auth::RouteCredential::derive(
                &record.operator.seed,
                observed.route_rotation,
            ))
        }
        _ => None,
    };
    crate::plan::nodes(desired, observed)
        .iter()
        .map(|node| match &credential {
            Some(c) => node.with_route_credential(c),
            None => node.clone(),
        })
        .filter_map(|node| {
            crate::render::render(trust, &preloads, &node)
                .ok()
                .map(|r| (node.name.clone(), r.digest))
        })
        .collect()
}

/// What the running broker says, and why nothing when it could not be asked.
#[derive(Default)]
struct Live {
    /// Why the live figures are missing although the broker runs.
    error: Option<String>,
    server: Option<ServerInfo>,
    store: Option<live::StoreFigures>,
}

/// What the live figures are asked for: how many nodes' JSZ and how many running nodes, and
/// after an apply the accounts it touched; and what the observation is for.
struct LiveRequest {
    jsz_servers: usize,
    running: usize,
    touched: Option<Vec<String>>,
    purpose: Purpose,
}

/// What to ask the running broker for, from the topology, the nodes running and (after an
/// apply, `reuse`) the spaces it touched.
fn live_request(
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
fn observe_live(
    root: &Root,
    desired: &Desired,
    nodes: &[ObservedNode],
    listener: &Listener,
    inventory: &mut Inventory,
    known_registries: &KnownRegistries,
    registry_cache: crate::store::registry_cache::Cache,
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
fn lacks_a_space_stream(
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

/// A node's JetStream store on this machine.
struct LocalStore {
    dir: std::path::PathBuf,
    /// The account folders it holds, when listed.
    accounts: Option<std::collections::BTreeSet<String>>,
}

/// What [`local_files`] may rely on: what the folders said last, and (for a caller that saves
/// what is read) the reference their stamps are taken against.
#[derive(Clone, Copy)]
struct Folders<'a> {
    cache: Option<&'a folder_cache::Loaded>,
    reference: Option<&'a folder_cache::Reference>,
}

/// What [`local_files`] did with a space's folder: whether the cache vouched for it, and its
/// entry for the next observation's cache (when stamped and read whole, or vouched for).
struct FolderRead {
    vouched: bool,
    entry: Option<folder_cache::Entry>,
}

/// What the root's own files say of one space: its $SYS creds and ledger, its protection
/// record, its live processes, its revoked users (its streams on disk: [`stored_streams`]);
/// the folder's facts from the cache when it vouches for them, else read. Reads only, and
/// nothing the live figures bring: safe to run for many spaces at once, and while the broker
/// is asked for them.
fn local_files(
    root: &Root,
    name: &SpaceName,
    space: &mut crate::observed::ObservedSpace,
    now: i64,
    memo: &SignatureMemo,
    folders: Folders,
) -> Result<FolderRead> {
    use crate::store::paths::SpaceFile;
    let dir = root.space_dir(name);
    if let Some(entry) = folders
        .cache
        .and_then(|c| c.vouched(&dir, name, &space.account_pub))
    {
        // A cached folder holds no pidfile, no member users and no move.
        set_folder_facts(space, entry.facts_at(now));
        space.live_processes = Vec::new();
        space.relocation = None;
        set_ledger(space, users::Ledger::empty(&space.account_pub));
        return Ok(FolderRead {
            vouched: true,
            entry: folders.reference.map(|_| entry),
        });
    }
    // Stamped before it is listed and its files read (for a caller that saves what it read).
    let dir_stamp = folders
        .reference
        .and_then(|r| folder_cache::stamp_dir(&dir, r));
    // One listing of the folder; only the files it holds are opened.
    let listing = space_dir::listing_of(dir)?;
    let stamps = dir_stamp.and_then(|d| folder_cache::stamp_files(d, &listing));
    let (facts, whole) = space_dir::folder_facts(&listing, &space.account_pub, now, memo);
    set_folder_facts(space, facts.clone());
    space.live_processes = space_dir::live_pids_listed(&listing)?;
    // Fail closed: a record that cannot be read is a move whose state is unknown.
    if listing.has(SpaceFile::Relocation) {
        space.relocation = match crate::store::relocation::load(root, name, &space.account_pub) {
            Ok(r) => r,
            Err(e) => Some(crate::adopt::relocation::Relocation::unreadable(
                &space.account_pub,
                &e.to_string(),
            )),
        };
    }
    let ledger = if listing.has(SpaceFile::Users) {
        users::load(root, name, &space.account_pub)?
    } else {
        users::Ledger::empty(&space.account_pub)
    };
    set_ledger(space, ledger);
    Ok(FolderRead {
        vouched: false,
        entry: stamps.filter(|_| whole).map(|stamps| folder_cache::Entry {
            space: name.clone(),
            account: space.account_pub.clone(),
            stamps,
            facts,
        }),
    })
}

/// What a space's folder says of its `$SYS` users and its protection, on the space.
fn set_folder_facts(space: &mut crate::observed::ObservedSpace, facts: space_dir::FolderFacts) {
    space.sys_creds_present = facts.sys_creds_present;
    space.sys_users = facts.sys_users;
    space.sys_issued = facts.sys_issued;
    space.protect_recorded = facts.protect_recorded;
    space.suspension_recorded = facts.suspension_recorded;
}

/// The member users `ledger` records (unrevoked, unexpired), and its revocations, on the space.
fn set_ledger(space: &mut crate::observed::ObservedSpace, ledger: users::Ledger) {
    space.member_users = ledger
        .minted
        .iter()
        .filter(|m| !ledger.is_revoked(&m.key, m.issued_at))
        .filter(|m| m.expires_at.is_none_or(|t| t > crate::clock::now()))
        .filter_map(|m| {
            m.member
                .as_ref()
                .map(|mark| crate::space::members::MemberUser {
                    principal: mark.principal.clone(),
                    key: m.key.clone(),
                    grant: mark.grant.clone(),
                    issued_at: m.issued_at,
                    read: mark.read.clone(),
                    post: mark.post.clone(),
                    account: m.account.clone(),
                })
        })
        .collect();
    // The users the ledger records that still connect (not revoked, not expired) and match.
    let in_force = |matches: &dyn Fn(&users::Minted) -> bool| -> Vec<crate::observed::LedgerUser> {
        ledger
            .minted
            .iter()
            .filter(|m| matches(m))
            .filter(|m| !ledger.is_revoked(&m.key, m.issued_at))
            .filter(|m| m.expires_at.is_none_or(|t| t > crate::clock::now()))
            .map(|m| crate::observed::LedgerUser {
                name: m.name.clone(),
                key: m.key.clone(),
                issued_at: m.issued_at,
            })
            .collect()
    };
    space.retired_users = in_force(&|m| {
        m.profile == crate::space::permissions::Profile::Member
            && m.member.is_none()
            && m.account.is_none()
    });
    space.unguarded_owners =
        in_force(&|m| m.profile == crate::space::permissions::Profile::Admin && !m.owner_guard);
    // Each revocation goes to the account its user lives in: a side account's users' to it
    // (with `*`, every user of the space), the others' to the space's account.
    let in_side: std::collections::BTreeMap<&str, &str> = ledger
        .minted
        .iter()
        .filter_map(|m| m.account.as_deref().map(|a| (m.key.as_str(), a)))
        .collect();
    space.side_revoked = Default::default();
    for (key, at) in &ledger.revoked {
        match in_side.get(key.as_str()) {
            Some(side) => {
                space
                    .side_revoked
                    .entry(side.to_string())
                    .or_default()
                    .insert(key.clone(), *at);
            }
            None if key == "*" => {
                for side in in_side.values() {
                    space
                        .side_revoked
                        .entry(side.to_string())
                        .or_default()
                        .insert(key.clone(), *at);
                }
            }
            None => {}
        }
    }
    space.revoked = ledger
        .revoked
        .into_iter()
        .filter(|(key, _)| !in_side.contains_key(key.as_str()))
        .collect();
    if !space.kept_claims.is_empty() {
        // Revocations an adopted account kept are not cotal's: only its own ledger's count,
        // each as the ledger records it once the JWT refuses at least that much.
        let jwt = std::mem::take(&mut space.revocations);
        space.revocations = space
            .revoked
            .iter()
            .filter(|(key, at)| jwt.get(*key).is_some_and(|t| t >= *at))
            .map(|(k, t)| (k.clone(), *t))
            .collect();
    }
}

/// The streams a space's store folders hold, when the broker does not report them: it is
/// stopped, or the space is not in use. Runs after the live figures (which say whether the
/// broker reported the space's streams).
fn stored_streams(
    space: &mut crate::observed::ObservedSpace,
    stopped: bool,
    stores: &[LocalStore],
) -> Result<()> {
    // An archived space is not loaded, so the broker does not report it (unless a return
    // rolled back left its streams running), and a suspended one brought back by a reload is
    // loaded but not in use (nats-server recovers an account's streams when a client first
    // uses it): their data is what their store folders hold.
    let unused = (space.archived.is_some() || space.limits.is_suspended())
        && (space.usage.source != UsageSource::Live || space.usage.streams.is_empty());
    if stopped || unused {
        space.usage.source = UsageSource::Store;
        // Every node's store: a stream of one replica lives on one node only.
        for store in stores {
            if store
                .accounts
                .as_ref()
                .is_some_and(|a| !a.contains(&space.account_pub))
            {
                continue;
            }
            for s in jetstream_dir::streams(&store.dir, &space.account_pub)? {
                if !space.usage.streams.iter().any(|k| k.name == s.name) {
                    space.usage.streams.push(s);
                }
            }
        }
    }
    Ok(())
}

/// The promoted config of the other layout, if the root holds one: a single server's
/// `.cotal/auth/server.conf` while `cotal.toml` declares a cluster, or a cluster node's config
/// while it does not.
fn layout_conflict(root: &Root, desired: &Desired) -> Result<Option<String>> {
    if desired.topology.is_cluster() {
        let single = &root.lone_node_files();
        return Ok(server_conf::read(single)?.map(|_| {
            format!(
                "cotal.toml declares a [cluster], but this root runs as one server: its config is {} and its streams are in its store",
                single.conf.display()
            )
        }));
    }
    for name in root.node_folders() {
        let node = root.node_files(&name, None);
        if server_conf::read(&node)?.is_some() {
            return Ok(Some(format!(
                "cotal.toml declares no [cluster], but this root runs as a cluster: node {name}'s config is {} (every node's is in .cotal/node.NAME/)",
                node.conf.display()
            )));
        }
    }
    Ok(None)
}

/// Every node's promoted config, process and listener, in `cotal.toml`'s order.
fn observe_nodes(root: &Root, desired: &Desired) -> Result<Vec<ObservedNode>> {
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
fn remote_nodes_answering(
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
fn node_conf(f: &crate::store::NodeFiles) -> Result<Option<PromotedConfig>> {
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
fn system_observed(record: &broker_record::BrokerRecord, legacy_seed: bool) -> SystemObserved {
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
/// `store::registry_cache` as loaded for this observation).
fn read_registries(
    root: &Root,
    listener: &Listener,
    inventory: &mut Inventory,
    clustered: bool,
    cache: &crate::store::registry_cache::Cache,
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
fn accounts_of<'a>(
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
fn known_from_figures(
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
fn bucket_reader(
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
fn bucket_state(
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
fn read_acls(
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

/// The verdicts on stream configs cached (`cache`), with the expectation each space's records
/// make now (its token and storage quota, by account): what says whether a verdict still holds.
struct DriftVouch {
    cache: DriftCache,
    expected: std::collections::HashMap<String, (String, Option<u64>)>,
}

impl DriftVouch {
    fn new(cache: DriftCache, inventory: &Inventory) -> Self {
        let expected = inventory
            .spaces
            .iter()
            .map(|(name, space)| {
                (
                    space.account_pub.clone(),
                    (name.token(), space.limits.storage_quota()),
                )
            })
            .collect();
        DriftVouch { cache, expected }
    }

    fn vouching(&self) -> Vouching<'_> {
        Vouching {
            cache: &self.cache,
            expected: &self.expected,
        }
    }
}

/// Give each space whose configs the broker left out (the cached verdict vouched for them) that
/// verdict: its streams' drift and its artifact store's cap.
fn take_vouched_verdicts(inventory: &mut Inventory, figures: &live::Figures, cache: &DriftCache) {
    for space in inventory.spaces.values_mut() {
        if let Some(verdict) = figures
            .accounts
            .get(&space.account_pub)
            .filter(|a| a.configs_vouched)
            .and_then(|_| cache.accounts.get(&space.account_pub))
        {
            space.stream_drift = verdict.drift.clone();
            space.artifact_max_bytes = verdict.artifact_max_bytes;
        }
    }
}

/// Of a single server's figures: each space's verdict on its stream configs (as the figures
/// gave it, fresh or vouched for, and as `inventory` now holds it), with what vouches for it,
/// for an apply or `up` to cache.
fn judged(inventory: &Inventory, figures: &live::Figures) -> Option<DriftCache> {
    let server_id = figures.server_id.as_ref()?;
    let loaded = figures
        .loaded
        .values()
        .next()
        .map(String::as_str)
        .unwrap_or("");
    let mut cache = DriftCache::new(server_id, loaded, figures.server_api);
    for (name, space) in &inventory.spaces {
        let Some(account) = figures.accounts.get(&space.account_pub) else {
            continue;
        };
        let Some(voucher) = &account.voucher else {
            continue;
        };
        if !account.configs_vouched && account.streams.iter().any(|s| s.shape.is_none()) {
            continue;
        }
        cache.accounts.insert(
            space.account_pub.clone(),
            verdict(
                name,
                space.limits.storage_quota(),
                voucher,
                (space.stream_drift.clone(), space.artifact_max_bytes),
            ),
        );
    }
    Some(cache)
}

/// The verdict `judgement` (drift, artifact cap) on the space `name` (storage `quota`), with
/// what vouches for it.
fn verdict(
    name: &SpaceName,
    quota: Option<u64>,
    voucher: &crate::observed::drift_verdicts::Voucher,
    (drift, artifact_max_bytes): (Vec<(String, Vec<String>)>, Option<i64>),
) -> Verdict {
    Verdict {
        api: voucher.api,
        streams: voucher.streams.clone(),
        token: name.token(),
        quota,
        drift,
        artifact_max_bytes,
    }
}

/// The verdict on the stream configs of the space `name` (storage `quota`) in a single
/// server's report of its account, every config in it; `None` otherwise.
fn verdict_of(
    name: &SpaceName,
    quota: Option<u64>,
    account: &live::AccountFigures,
) -> Option<Verdict> {
    let voucher = account.voucher.as_ref()?;
    if account.streams.iter().any(|s| s.shape.is_none()) {
        return None;
    }
    Some(verdict(
        name,
        quota,
        voucher,
        judge(name, quota, account, None),
    ))
}

/// Judge again the verdicts of the accounts `read` (sorted) from a report of their configs
/// asked now (of every account's, past [`live::CONFIGS_ASKED_ONE_BY_ONE`]); a verdict that
/// cannot be judged again is left out.
fn judge_again(
    root: &Root,
    listener: &Listener,
    inventory: &Inventory,
    verdicts: &mut DriftCache,
    read: &[String],
) {
    let only = (read.len() <= live::CONFIGS_ASKED_ONE_BY_ONE).then_some(read);
    let after = match live_figures(root, listener, 1, 1, only, None) {
        Ok(after) if after.server_id.as_deref() == Some(verdicts.server_id.as_str()) => after,
        _ => {
            verdicts
                .accounts
                .retain(|a, _| read.binary_search(a).is_err());
            return;
        }
    };
    for (name, space) in &inventory.spaces {
        if read.binary_search(&space.account_pub).is_err() {
            continue;
        }
        verdicts.accounts.remove(&space.account_pub);
        let Some(account) = after.accounts.get(&space.account_pub) else {
            continue;
        };
        if let Some(verdict) = verdict_of(name, space.limits.storage_quota(), account) {
            verdicts.accounts.insert(space.account_pub.clone(), verdict);
        }
    }
}

/// Give every space whose account was not `touched` the live figures observed `before`.
fn keep_untouched_figures(inventory: &mut Inventory, before: &Observed, touched: &[String]) {
    for (name, space) in inventory.spaces.iter_mut() {
        if touched.contains(&space.account_pub) {
            continue;
        }
        if let Some(b) = before
            .inventory
            .spaces
            .get(name)
            .filter(|b| b.account_pub == space.account_pub)
        {
            space.usage = b.usage.clone();
            space.stream_drift = b.stream_drift.clone();
            space.replication = b.replication;
            space.registry_fingerprint = b.registry_fingerprint.clone();
        }
    }
}

/// Fill each space's usage and stream drift from live figures.
/// `replicas`: the declared replica count on a cluster (`None` for a single server).
fn apply_figures(inventory: &mut Inventory, figures: &live::Figures, replicas: Option<usize>) {
    let clustered = replicas.is_some();
    // Each space's figures are its own: they are applied on every core (at thousands of spaces,
    // each with its fifteen streams judged, this was milliseconds of a hot apply on one).
    inventory.spaces.par_iter_mut().for_each(|(name, space)| {
        let account = figures.accounts.get(&space.account_pub);
        if account.is_none() && space.archived.is_some() {
            // Not loaded: its usage is what its store folders hold (read with the local facts).
            return;
        }
        space.usage = Usage {
            source: UsageSource::Live,
            streams: account
                .map(|a| {
                    a.streams
                        .iter()
                        .map(|s| StreamUsage {
                            name: s.name.clone(),
                            messages: Some(s.messages),
                            bytes: s.bytes,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            connections: None,
            per_account: Vec::new(),
            by_member: BTreeMap::new(),
        };
        // Its own account's connections, then its members' accounts' (each bounded on its own).
        let mut per_account = vec![account.map(|a| a.connections).unwrap_or(0)];
        per_account.extend(
            space
                .sides
                .iter()
                .filter(|(role, _)| {
                    matches!(role, crate::space::side_accounts::SideRole::Member(_))
                })
                .filter_map(|(_, side)| figures.accounts.get(&side.account_pub))
                .map(|a| a.connections)
                .filter(|c| *c > 0),
        );
        space.usage.connections = Some(per_account.iter().sum());
        space.usage.per_account = per_account;
        space.usage.by_member = space
            .sides
            .iter()
            .filter_map(|(role, side)| match role {
                crate::space::side_accounts::SideRole::Member(p) => Some((
                    p.to_string(),
                    figures
                        .accounts
                        .get(&side.account_pub)
                        .map_or(0, |a| a.connections),
                )),
                _ => None,
            })
            .collect();
        let Some(account) = account else { return };
        // Only a single server's: a cluster's report may come from a replica that is behind.
        let bucket = streams::registry_stream(&name.token());
        // A server that does not report the creation time gives no fingerprint: a bucket made
        // again could not be told from the old one.
        space.registry_fingerprint = account
            .streams
            .iter()
            .find(|s| s.name == bucket && !clustered && !s.fingerprint.created.is_empty())
            .map(|s| s.fingerprint.clone());
        space.replication = clustered
            .then(|| {
                account
                    .streams
                    .iter()
                    .filter_map(|s| s.replication)
                    .reduce(|(a, x), (b, y)| (a.min(b), x && y))
            })
            .flatten();
        // On a cluster the shapes are made of each replica's share of the quota.
        let share = streams::per_replica(
            space.limits.storage_quota(),
            replicas.map_or(1, |r| r as u8),
        );
        (space.stream_drift, space.artifact_max_bytes) = judge(name, share, account, replicas);
    });
}

/// The verdict on a space's stream configs in its account's figures: the streams whose config
/// differs from the shape cotal expects (with the fields), and its artifact store's cap.
/// `quota`: each replica's share of the storage quota ([`streams::per_replica`]); `replicas`:
/// the declared replica count on a cluster.
fn judge(
    name: &SpaceName,
    quota: Option<u64>,
    account: &live::AccountFigures,
    replicas: Option<usize>,
) -> (Vec<(String, Vec<String>)>, Option<i64>) {
    let artifacts = streams::artifact_stream(&name.token());
    let artifact_max_bytes = account
        .streams
        .iter()
        .find(|s| s.name == artifacts)
        .and_then(|s| s.shape.as_ref())
        .map(|shape| shape.max_bytes);
    let mut drift = Vec::new();
    for want in streams::expected(&name.token(), quota) {
        let stream_name = want.stream_name();
        let live = account.streams.iter().find(|s| s.name == stream_name);
        if let Some(shape) = live.and_then(|s| s.shape.as_ref()) {
            let mut fields = streams::drift(&want.shape(), shape);
            // On a cluster the declared replicas are part of the shape (updatable in place).
            if let (Some(want), Some(have)) = (replicas, live.and_then(|s| s.num_replicas))
                && want != have
            {
                fields.push("replicas");
            }
            if !fields.is_empty() {
                drift.push((stream_name, fields.iter().map(|f| f.to_string()).collect()));
            }
        }
    }
    (drift, artifact_max_bytes)
}

/// What the broker's JetStream can hold: the configured store sizes, else what the running
/// broker reports, else nats-server's default estimated as it computes it at start (75% of the
/// free disk of the store folder, 75% of the memory).
fn capacity(
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
fn open_files(nodes: &[crate::observed::ObservedNode]) -> Option<crate::observed::OpenFiles> {
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
fn free_disk(dir: &std::path::Path) -> u64 {
    dir.ancestors()
        .find_map(|d| nix::sys::statvfs::statvfs(d).ok())
        .map(|s| s.blocks_available() * s.fragment_size())
        .unwrap_or(0)
}

/// The machine's memory (`MemTotal` of `/proc/meminfo`).
fn total_memory() -> u64 {
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

#[cfg(test)]
mod tests {
    use super::{Root, desired_digest, desired_from_text};

    /// A stream as a node reports it: nothing stored, with `shape` (`None`: its config left
    /// out).
    fn reported_stream(
        name: String,
        shape: Option<crate::space::streams::Shape>,
    ) -> crate::broker::live::StreamFigures {
        crate::broker::live::StreamFigures {
            name,
            messages: 0,
            bytes: 0,
            shape,
            replication: None,
            num_replicas: None,
            fingerprint: crate::observed::RegistryFingerprint {
                created: String::new(),
                first_seq: 0,
                last_seq: 0,
                messages: 0,
            },
        }
    }

    #[test]
    fn one_nodes_view_lacks_a_stream_only_of_a_space_in_use_among_those_asked() {
        use super::{Inventory, lacks_a_space_stream, streams};
        use crate::broker::live::{AccountFigures, Figures};
        let space =
            |n: u8, name: &str| crate::testing::fixed_space(n, name, &Default::default(), 0);
        let (a, sa) = space(1, "a");
        let (b, mut sb) = space(2, "b");
        // Every stream of `name`'s, or all but its first.
        let reported = |name: &crate::model::SpaceName, all: bool| AccountFigures {
            streams: streams::expected(&name.token(), None)
                .iter()
                .skip(usize::from(!all))
                .map(|want| reported_stream(want.stream_name(), None))
                .collect(),
            ..AccountFigures::default()
        };
        let (a_pub, b_pub) = (sa.account_pub.clone(), sb.account_pub.clone());
        let figures = |b_whole: bool| Figures {
            version: String::new(),
            start: String::new(),
            now: String::new(),
            accounts: [
                (a_pub.clone(), reported(&a, true)),
                (b_pub.clone(), reported(&b, b_whole)),
            ]
            .into(),
            store: None,
            loaded: Default::default(),
            server_id: None,
            server_api: Default::default(),
        };
        let mut inventory = Inventory::default();
        inventory.spaces.insert(a.clone(), sa.clone());
        inventory.spaces.insert(b.clone(), sb.clone());
        assert!(!lacks_a_space_stream(&inventory, &figures(true), None));
        assert!(lacks_a_space_stream(&inventory, &figures(false), None));
        // Only the accounts asked about count (after an apply, the ones it touched).
        let only_a = [a_pub.clone()];
        assert!(!lacks_a_space_stream(
            &inventory,
            &figures(false),
            Some(&only_a)
        ));
        // A suspended space's streams are not recovered until a client uses it.
        sb.limits.conn = 0;
        sb.limits.leaf = 0;
        inventory.spaces.insert(b.clone(), sb);
        assert!(!lacks_a_space_stream(&inventory, &figures(false), None));
    }

    #[test]
    fn a_vouched_verdict_gives_its_space_the_drift_and_cap_judged_and_a_fresh_one_is_judged() {
        use super::{Inventory, judged, streams, take_vouched_verdicts};
        use crate::broker::live::{AccountFigures, Figures};
        use crate::observed::drift_verdicts::{ApiCounters, DriftCache, Verdict, Voucher};
        let (a, sa) = crate::testing::fixed_space(1, "a", &Default::default(), 0);
        let (b, sb) = crate::testing::fixed_space(2, "b", &Default::default(), 0);
        let api = ApiCounters {
            total: 27,
            errors: 0,
        };
        // `a`'s configs left out (vouched for); `b`'s reported, its chat stream drifted.
        let reported = |name: &crate::model::SpaceName, vouched: bool| AccountFigures {
            streams: streams::expected(&name.token(), None)
                .iter()
                .map(|want| {
                    let shape = (!vouched).then(|| {
                        let mut shape = want.shape();
                        if want.stream_name().starts_with("CHAT_") {
                            shape.max_msgs_per_subject = 10;
                        }
                        shape
                    });
                    reported_stream(want.stream_name(), shape)
                })
                .collect(),
            voucher: Some(Voucher {
                api,
                streams: "names".into(),
            }),
            configs_vouched: vouched,
            ..AccountFigures::default()
        };
        let figures = Figures {
            version: String::new(),
            start: String::new(),
            now: String::new(),
            accounts: [
                (sa.account_pub.clone(), reported(&a, true)),
                (sb.account_pub.clone(), reported(&b, false)),
            ]
            .into(),
            store: None,
            loaded: [("n1".to_string(), "sha256:loaded".to_string())].into(),
            server_id: Some("NSERVER".into()),
            server_api: api,
        };
        let judged_before = Verdict {
            api,
            streams: "names".into(),
            token: a.token(),
            quota: None,
            drift: vec![(format!("DM_{}", a.token()), vec!["max_age".into()])],
            artifact_max_bytes: Some(4096),
        };
        let mut cache = DriftCache::new("NSERVER", "sha256:loaded", api);
        cache
            .accounts
            .insert(sa.account_pub.clone(), judged_before.clone());
        let mut inventory = Inventory::default();
        inventory.spaces.insert(a.clone(), sa.clone());
        inventory.spaces.insert(b.clone(), sb.clone());
        super::apply_figures(&mut inventory, &figures, None);
        take_vouched_verdicts(&mut inventory, &figures, &cache);
        assert_eq!(inventory.spaces[&a].stream_drift, judged_before.drift);
        assert_eq!(inventory.spaces[&a].artifact_max_bytes, Some(4096));
        let chat_b = format!("CHAT_{}", b.token());
        assert_eq!(
            inventory.spaces[&b].stream_drift,
            vec![(chat_b.clone(), vec!["max_msgs_per_subject".to_string()])],
            "a reported config is judged"
        );
        let saved = judged(&inventory, &figures).expect("a single server's figures");
        assert_eq!(
            saved.accounts[&sa.account_pub], judged_before,
            "carried as judged"
        );
        assert_eq!(
            saved.accounts[&sb.account_pub].drift,
            vec![(chat_b, vec!["max_msgs_per_subject".to_string()])]
        );
        assert_eq!(saved.server_api, api);
        let cluster = Figures {
            server_id: None,
            ..figures
        };
        assert!(
            judged(&inventory, &cluster).is_none(),
            "a cluster's figures judge nothing"
        );
    }

    #[test]
    fn the_desired_digest_ignores_comments_and_layout_but_not_values() {
        let base = "version = 1\n\n[broker]\nport = 4222\n\n[spaces.design]\nprotect = true\n";
        let commented = "# the broker\nversion = 1\n[broker]\nport = 4222 # the client port\n\n\n[spaces.design] # design\nprotect   =   true\n";
        let inline = "version = 1\nbroker = { port = 4222 }\nspaces.design.protect = true\n";
        assert_eq!(desired_digest(base), desired_digest(commented));
        assert_eq!(desired_digest(base), desired_digest(inline));
        let changed = base.replace("4222", "4223");
        assert_ne!(desired_digest(base), desired_digest(&changed));
        let typed = base.replace("port = 4222", "port = \"4222\"");
        assert_ne!(desired_digest(base), desired_digest(&typed));
    }

    #[test]
    fn the_desired_digest_of_every_kind_of_value_is_the_one_saved_plans_carry() {
        // Computed by the code that parsed the text twice: plans saved then stay valid.
        let every = "version = 1 # c\n[defaults.limits]\nmax_storage = \"32MiB\"\n[broker]\nport = 0x10F\nhost = \"a\\\"b\"\n[spaces.\"d\u{e9}sign\"]\nprotect = true\n[spaces.b]\nstate = \"suspended\"\nx = 1.5\ny = 1979-05-27T07:32:00Z\nz = [1, \"two\", {a = false}]\n";
        assert_eq!(
            desired_digest(every),
            "sha256:adc15e57d5b854534ed226e42f4d60da82bbdb6b77388d5098e7392ec730f48b"
        );
        assert_eq!(
            desired_digest("not [ toml"),
            "sha256:ed2f9c1d9a2896b812027819718a3292df4133598e48a88b7856bb05e209c9df"
        );
        // Through the root's reader, which parses the TOML once for both: the same digest,
        // and a model error still placed in the text.
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path()).unwrap();
        let valid =
            "version = 1\n[broker]\nport = 0x10F\n[spaces.\"d\u{e9}sign\"]\nprotect = true\n";
        let (desired, digest) = desired_from_text(&root, valid).unwrap();
        assert_eq!(digest, desired_digest(valid));
        assert_eq!(desired.spaces.len(), 1);
        let err = desired_from_text(&root, every).unwrap_err().to_string();
        assert!(err.contains("cotal.toml:11:1: unknown field `x`"), "{err}");
        let err = desired_from_text(&root, "version = 1\n[spaces.a\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("cotal.toml:2:10: unclosed table"), "{err}");
    }
}
