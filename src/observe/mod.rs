//! Observation: read everything the planner may depend on from disk (and, when the broker
//! runs, from the broker) into an [`Observed`] value. The only IO before planning.
//!
//! Invariant: observation never writes.
//!
//! This module reads `cotal.toml` and the records, and runs the observation in its order
//! (`observe_from`); its parts read the rest: [`running`] what the running broker says (live
//! figures, registries, acl records), [`local`] what each space's folder and stored streams
//! say, [`nodes`] the nodes, their configs and processes and the host's capacity, and
//! [`drift`] the drift of the live streams from the table, through the drift cache. The caches
//! it loads are in `store::caches`.

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
use crate::store::caches::folder_cache::{self, FolderCache};
use crate::store::caches::signature_memo::SignatureMemo;
use crate::store::{
    Root, broker_record, desired_file, generation, inventory, jetstream_dir, journal, server_conf,
    space_dir, users,
};
use crate::trust::digest;
use rayon::prelude::*;
use std::collections::BTreeMap;

mod drift;
mod local;
mod nodes;
mod running;
use drift::*;
use local::*;
use nodes::*;
pub use nodes::{broker_process, broker_process_moving, promoted_listener};
pub use running::live_figures;
use running::*;

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
/// what each space's folder said, stamped (`store::caches::folder_cache`; `None` when the file system
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
    /// What the folders said last (`store::caches::folder_cache`).
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
    // reads it, against a time the file system stamped before any read (`store::caches::folder_cache`).
    let reference = matches!(purpose, Purpose::Remembered | Purpose::AfterApply)
        .then(|| folder_cache::reference(root))
        .flatten();
    // The records are read on every core while `cotal.toml` is parsed (when it is not given)
    // and the nodes are looked for (a scan of `/proc`).
    let (records, given) =
        rayon::join(|| read_records(root, now), || desired_and_nodes(root, from));
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
    let stores = local_stores(&nodes, stopped)?;
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
        .and_then(|r| drift_vouch(root, desired, r, &inventory));
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
        || local_and_registries(root, &mut inventory, now, &memo, known, wants_registries),
    );
    let read = local?;
    tracing::debug!(
        vouched = read.iter().filter(|r| r.vouched).count(),
        read = read.iter().filter(|r| !r.vouched).count(),
        "space folders the folder cache vouched for, and read"
    );
    let for_next_folders =
        reference.map(|reference| folders_for_next(&broker, now, read, &reference));
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
    let capacity = capacity_of(desired, &nodes, live.store, &inventory);
    let journal = journal::load(root)?;
    let journal_protected = journal_protected(root, &journal);
    let tenant_material = match broker {
        BrokerRecordState::Absent => broker_record::tenant_material(root)?,
        _ => Vec::new(),
    };
    let unattributed_material = unattributed_material(root)?;
    let (tls, route_tls, include) = declared_material(root, desired);
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
        tls,
        route_rotation: crate::store::route_rotation::load(root)?,
        route_tls,
        include,
    };
    mark_behind(root, desired, &mut observed);
    Ok((
        desired_owned,
        observed,
        ForNext {
            memo,
            folders: for_next_folders,
        },
    ))
}

/// Each space's folder read (or vouched for by the folder cache), on every core; and the
/// registry cache, when `wants_registries`.
fn local_and_registries(
    root: &Root,
    inventory: &mut Inventory,
    now: i64,
    memo: &SignatureMemo,
    known: Folders<'_>,
    wants_registries: bool,
) -> (
    Result<Vec<FolderRead>>,
    Option<crate::store::caches::registry_cache::Cache>,
) {
    let registries = wants_registries.then(|| crate::store::caches::registry_cache::load(root));
    let local = inventory
        .spaces
        .par_iter_mut()
        .map(|(name, space)| local_files(root, name, space, now, memo, known))
        .collect::<Result<Vec<_>>>();
    (local, registries)
}

/// The capacity the broker has for the spaces: its store's, with what the spaces hold, and
/// the nodes' open files.
fn capacity_of(
    desired: &Desired,
    nodes: &[ObservedNode],
    store: Option<live::StoreFigures>,
    inventory: &Inventory,
) -> Capacity {
    let stored: u64 = inventory
        .spaces
        .values()
        .map(|s| s.usage.total_bytes())
        .sum();
    let mut capacity = capacity(desired, &nodes[0].store_dir, store, stored);
    capacity.open_files = open_files(nodes);
    capacity
}

/// The files `cotal.toml` names, read and checked: the listener's TLS, the routes' TLS and the
/// include.
fn declared_material(
    root: &Root,
    desired: &Desired,
) -> (
    Option<crate::observed::ObservedTls>,
    Option<crate::observed::ObservedTls>,
    Option<crate::observed::ObservedInclude>,
) {
    (
        desired
            .broker
            .tls
            .as_ref()
            .map(|t| crate::tls::observe(root, t, crate::tls::Use::Listener)),
        desired
            .topology
            .route_tls
            .as_ref()
            .map(|t| crate::tls::observe(root, t, crate::tls::Use::Routes)),
        desired
            .broker
            .include
            .as_ref()
            .map(|p| crate::include::observe(root.dir(), &p.path, &p.at)),
    )
}

/// `cotal.toml` (given, or parsed from the root) and the broker's nodes, found as it says.
fn desired_and_nodes<'a>(
    root: &Root,
    from: DesiredFrom<'a>,
) -> Result<(
    std::borrow::Cow<'a, Desired>,
    String,
    Result<Vec<ObservedNode>>,
)> {
    let (desired, digest) = match from {
        DesiredFrom::Given(desired, digest) => (std::borrow::Cow::Borrowed(desired), digest),
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
}

/// Each local store with the accounts it holds folders for (listed once when the broker is
/// stopped: then every space's streams are read from it).
fn local_stores(nodes: &[ObservedNode], stopped: bool) -> Result<Vec<LocalStore>> {
    nodes
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
        .collect()
}

/// The verdicts on stream configs the last apply or `up` cached, with the expectation each
/// space's records make now, when `request` may use them: a single server asked once, and never
/// after an apply (the accounts it re-signed are asked afresh, never vouched for by verdicts
/// cached before it: enabling an account's JetStream again resets its counters).
fn drift_vouch(
    root: &Root,
    desired: &Desired,
    request: &LiveRequest,
    inventory: &Inventory,
) -> Option<DriftVouch> {
    let usable = request.purpose != Purpose::AfterApply
        && request.touched.is_none()
        && request.jsz_servers == 1
        && request.running == 1
        && !desired.topology.is_cluster();
    usable
        .then(|| crate::store::caches::drift_cache::load(root))
        .flatten()
        .map(|cache| DriftVouch::new(cache, inventory))
}

/// The folder cache the next observation may use: what this one read, each entry settled
/// before `reference`, under the broker's operator.
fn folders_for_next(
    broker: &BrokerRecordState,
    now: i64,
    read: Vec<FolderRead>,
    reference: &folder_cache::Reference,
) -> FolderCache {
    let operator = match broker {
        BrokerRecordState::Valid(trust) => trust.operator_pub.as_str(),
        _ => "",
    };
    let mut cache = FolderCache::new(operator, now);
    cache.extend_settled(read.into_iter().filter_map(|r| r.entry), reference);
    cache
}

/// The spaces an open journal removes whose protection is on (or cannot be read: counted as
/// on), by their lifecycle records.
fn journal_protected(root: &Root, journal: &JournalState) -> std::collections::BTreeSet<SpaceName> {
    let mut out = std::collections::BTreeSet::new();
    if let JournalState::Valid(j) = journal {
        for r in &j.removals {
            let protected = match space_dir::load_lifecycle(root, &r.space) {
                Ok(Some(l)) => l.account == r.account && l.protect,
                Ok(None) => false,
                Err(_) => true,
            };
            if protected {
                out.insert(r.space.clone());
            }
        }
    }
    out
}

/// Mark which running nodes lag behind the records (`server.behind`, `server.behind_records`).
fn mark_behind(root: &Root, desired: &Desired, observed: &mut Observed) {
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
            digests_of(root, desired, observed, trust, spaces)
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
