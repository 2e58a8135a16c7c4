//! The broker: the only async IO boundary (process, the NATS connection, the system account's
//! control plane).
//!
//! [`Broker`] is what the executor needs from it. [`Stopped`] serves a broker that is not
//! running (data is deleted from the store folder, there is nothing to reload or provision);
//! [`Running`] serves a live one over NATS: reloads through `$SYS.REQ.SERVER.<id>.RELOAD`
//! confirmed by VARZ, teardown through `$JS.API.ACCOUNT.PURGE`, and a data-plane check that
//! never needs a free connection slot in a tenant's account.

pub mod client_tls;
pub mod control;
pub mod gather;
pub mod identity;
pub mod isolated;
pub mod listen_table;
pub mod live;
pub mod preflight;
pub mod process;

use crate::diagnostic::Diagnostic;
use crate::error::{BrokerError, Error, Result};
use crate::model::SpaceName;
use crate::store::Root;
use std::path::PathBuf;
use std::time::Duration;

/// How long a removal waits, after the broker accepted the purge of an account, for every node
/// to stop reporting a stream of it.
const PURGE_SETTLES: Duration = Duration::from_secs(15);

/// How long the provisioning of a space brought back from its archive waits for the broker to
/// serve every stream its store folders hold.
const RECOVERY_SETTLES: Duration = Duration::from_secs(30);

/// One data-plane expectation after a reload.
pub enum Expectation {
    /// The broker holds no other JWT for the account than this one (asked through the system
    /// account: needs no connection slot in the tenant's account). An account the broker has not
    /// registered yet (no client since it started) holds no claims: it is read from the
    /// preload, which the reload's config digest confirmed, on first use.
    Loaded {
        space: SpaceName,
        account: String,
        jwt: String,
    },
    /// The broker no longer knows the account.
    Unloaded { space: SpaceName, account: String },
    /// The broker runs no stream of the account (its JetStream turned off before an archive;
    /// the data stays on disk). Waited on, within a deadline.
    NoStreams { space: SpaceName, account: String },
    /// The system account is in force with exactly this JWT (its keys and revocations).
    SystemLoaded { account: String, jwt: String },
    /// The root's monitoring account is in force with exactly this JWT.
    MonitorLoaded { account: String, jwt: String },
    /// A side account of a space ([`crate::space::side_accounts`]) holds no other JWT than `jwt`
    /// (`None`: the broker no longer knows it), asked as [`Expectation::Loaded`] is.
    SideLoaded {
        space: SpaceName,
        role: crate::space::side_accounts::SideRole,
        account: String,
        jwt: Option<String>,
    },
    /// A fresh user of the space connects (only for added spaces, whose slots are all free).
    Accepts { space: SpaceName, creds: String },
    /// A fresh user of the space is refused (suspended or removed spaces; a refused connection
    /// takes no slot).
    Refuses { space: SpaceName, creds: String },
    /// The client listener serves this certificate (`sha256:…` of its leaf): nats-server's
    /// config digest covers the TLS files' paths, not what they hold, so a new certificate at
    /// the same paths is confirmed by a handshake.
    Serves { fingerprint: String },
    /// Every node's route listener (`(node name, host:port)`) serves this certificate
    /// (`[cluster.tls]`), asked the same way, presenting `identity` (the routes' certificate
    /// and key files), as a route would.
    RoutesServe {
        fingerprint: String,
        listeners: Vec<(String, String)>,
        identity: (PathBuf, PathBuf),
        /// The CA the served chain must chain to (`[cluster.tls]` `ca`).
        ca: PathBuf,
    },
}

/// What apply asks of the broker.
/// What provisioning a space did: the work, for the log, and the revision at which it seeded
/// the channel registry's defaults (`None`: they were set already).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provisioned {
    pub work: Vec<String>,
    pub registry_seed: Option<u64>,
}

/// One space to provision.
#[derive(Debug, Clone)]
pub struct Provisioning {
    pub space: SpaceName,
    /// Its account's storage quota (`None`: unlimited), which the artifact store's cap follows
    /// ([`crate::space::streams::artifact_cap`]).
    pub quota: Option<u64>,
    /// A provisioner user of its account.
    pub creds: String,
}

pub trait Broker {
    /// Whether a broker process is running (and so must be reloaded and verified).
    fn running(&self) -> bool;
    /// Delete every stream and bucket of the account, and its store folder. Idempotent, and
    /// bounded by a deadline.
    /// `store_dirs`: every node's store (one for a single server).
    fn delete_streams(
        &mut self,
        space: &SpaceName,
        account: &str,
        store_dirs: &[PathBuf],
    ) -> Result<()>;
    /// Every stream and bucket of the space, as `purger` (a user of its account) sees it.
    fn survey_streams(
        &mut self,
        space: &SpaceName,
        purger: &str,
    ) -> Result<Vec<live::StreamSurvey>>;
    /// Empty each stream of `upto` up to its sequence as `purger`, keeping its config: each
    /// stream with the messages purged. Idempotent.
    fn purge_streams(
        &mut self,
        space: &SpaceName,
        purger: &str,
        upto: &std::collections::BTreeMap<String, u64>,
    ) -> Result<Vec<(String, u64)>>;
    /// Reload every running node with its promoted config (a cluster's all at once) and confirm
    /// through the broker that each loaded a config with its digest (`(node name, digest)`).
    /// `Err` means at least one node did not confirm; the caller puts every node's previous
    /// config back and calls [`Broker::restore`].
    fn reload(&mut self, digests: &[(String, String)]) -> Result<Duration>;
    /// After a failed reload (or a failed check) and the previous config put back: reload it
    /// and confirm the broker runs the config it ran before the failed attempt. `Ok(false)`
    /// when no reload had been sent (the broker never answered), so there was nothing to undo.
    fn restore(&mut self) -> Result<bool>;
    /// Check the data plane: every expectation holds.
    fn verify(&mut self, expectations: &[Expectation]) -> Result<()>;
    /// Create the space's missing streams and buckets, update drifted ones.
    fn provision(&mut self, work: &Provisioning) -> Result<Provisioned>;
    /// Use the space's account as `creds` (a user of it: nats-server enables an account's
    /// JetStream, and recovers its streams from disk, when it first uses it), then wait until
    /// the broker serves every one of `streams` (a space brought back from its archive, before
    /// anything of it is provisioned). Bounded by a deadline.
    fn await_streams(
        &mut self,
        space: &SpaceName,
        creds: &str,
        account: &str,
        streams: &[String],
    ) -> Result<()>;
    /// [`Broker::provision`] for many spaces, as concurrently as the broker allows; each result
    /// in the order given.
    fn provision_many(&mut self, work: &[Provisioning]) -> Vec<Result<Provisioned>> {
        work.iter().map(|w| self.provision(w)).collect()
    }
    /// Write the space's channel registry as `writer` (compare-and-set per key; a key that
    /// a tenant moved is rebased and retried, then [`Error::conflict`]). Returns each key with
    /// the value written and its new revision (`None`: deleted).
    fn write_channels(
        &mut self,
        space: &SpaceName,
        writer: &str,
        writes: &[crate::space::channels::Write],
    ) -> Result<Vec<crate::space::channels::Written>>;
    /// Write the space's members' acl records as `writer` ([`live::Nats::write_acl`]).
    fn write_acl(
        &mut self,
        space: &SpaceName,
        writer: &str,
        writes: &[crate::space::channels::Write],
    ) -> Result<()>;
}

/// A broker that is not running.
#[derive(Debug, Default)]
pub struct Stopped;

impl Broker for Stopped {
    fn running(&self) -> bool {
        false
    }
    fn delete_streams(
        &mut self,
        _space: &SpaceName,
        account: &str,
        store_dirs: &[PathBuf],
    ) -> Result<()> {
        for dir in store_dirs {
            crate::store::jetstream_dir::remove(dir, account)?;
        }
        Ok(())
    }
    /// A stopped broker empties nothing (a purge is planned only while it runs).
    fn survey_streams(
        &mut self,
        space: &SpaceName,
        _purger: &str,
    ) -> Result<Vec<live::StreamSurvey>> {
        Err(Error::process(format!(
            "cannot empty the streams of {}: the broker is not running (`cotal up`, then purge)",
            space.quoted()
        )))
    }
    fn purge_streams(
        &mut self,
        space: &SpaceName,
        _purger: &str,
        _upto: &std::collections::BTreeMap<String, u64>,
    ) -> Result<Vec<(String, u64)>> {
        Err(Error::process(format!(
            "cannot empty the streams of {}: the broker is not running (`cotal up`, then `cotal apply`)",
            space.quoted()
        )))
    }
    fn reload(&mut self, _digests: &[(String, String)]) -> Result<Duration> {
        Ok(Duration::ZERO)
    }
    fn restore(&mut self) -> Result<bool> {
        Ok(false)
    }
    fn verify(&mut self, _expectations: &[Expectation]) -> Result<()> {
        Ok(())
    }
    fn await_streams(
        &mut self,
        space: &SpaceName,
        _creds: &str,
        _account: &str,
        _streams: &[String],
    ) -> Result<()> {
        Err(Error::process(format!(
            "cannot bring {} back: the broker is not running (`cotal up` serves it)",
            space.quoted()
        )))
    }
    fn provision(&mut self, work: &Provisioning) -> Result<Provisioned> {
        Err(Error::process(format!(
            "cannot provision {}: the broker is not running (`cotal up` provisions it)",
            work.space.quoted()
        )))
    }
    fn write_channels(
        &mut self,
        space: &SpaceName,
        _writer: &str,
        _writes: &[crate::space::channels::Write],
    ) -> Result<Vec<crate::space::channels::Written>> {
        Err(Error::process(format!(
            "cannot write the channels of {}: the broker is not running (plan with it running)",
            space.quoted()
        )))
    }
    fn write_acl(
        &mut self,
        space: &SpaceName,
        _writer: &str,
        _writes: &[crate::space::channels::Write],
    ) -> Result<()> {
        Err(Error::process(format!(
            "cannot write the members of {}: the broker is not running (plan with it running)",
            space.quoted()
        )))
    }
}

/// One node cotal reloads and confirms: its name, the server id it answers `$SYS` requests as,
/// its client listener (for data-plane checks) and its files (for the log it quotes).
struct Target {
    name: String,
    id: String,
    nats: live::Nats,
    files: crate::desired::topology::NodeFiles,
}

/// The root's running broker (one server, or every running node of a cluster), reached on the
/// listener of a node whose pid owns it; every other node is addressed by its server id through
/// the cluster's system account.
pub struct Running {
    root: Root,
    nats: live::Nats,
    control: control::Control,
    targets: Vec<Target>,
    /// Replicas of the streams and buckets provisioning creates and keeps (a cluster's
    /// declared count; `None` for a single server).
    replicas: Option<usize>,
    /// Whether the broker is a cluster (errors then name the node).
    clustered: bool,
    /// What each node (index into `targets`) had loaded before the last reload, for
    /// [`Broker::restore`].
    before: Vec<(usize, control::Loaded)>,
    /// Every control creds this session minted (secret, in memory), newest last: a reload
    /// that replaces the system keys closes the control connection, and a rollback may need
    /// the creds of either key set.
    creds: Vec<String>,
    /// Reload confirmation times (the slowest node's, per reload), for the report.
    pub reloads: Vec<Duration>,
}

impl Running {
    /// Ask every node which streams of `account` it holds until `settled` says they are as
    /// wanted, at most for `deadline`: `Ok(Err(held))` when they never were.
    fn streams_settle(
        &self,
        account: &str,
        deadline: Duration,
        settled: impl Fn(&std::collections::BTreeSet<String>) -> bool,
    ) -> Result<std::result::Result<(), std::collections::BTreeSet<String>>> {
        let until = std::time::Instant::now() + deadline;
        loop {
            let held = self.control.account_streams(account, self.targets.len())?;
            if settled(&held) {
                return Ok(Ok(()));
            }
            if std::time::Instant::now() >= until {
                return Ok(Err(held));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether the broker serves every one of `streams` of `account` within
    /// [`RECOVERY_SETTLES`]; `Err` names the missing ones.
    fn recovered(&self, account: &str, streams: &[String]) -> Result<(), String> {
        let settled = self
            .streams_settle(account, RECOVERY_SETTLES, |held| {
                streams.iter().all(|s| held.contains(s))
            })
            .map_err(|e| e.to_string())?;
        settled.map_err(|held| {
            format!(
                "after {RECOVERY_SETTLES:?} the broker still does not serve {}",
                streams
                    .iter()
                    .filter(|s| !held.contains(*s))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }

    /// Connect to the root's running broker through an ephemeral system user minted from the
    /// retained system signing seed; for a cluster, find every running node's server id by
    /// its `server_name` (a running node that does not answer is an error naming it).
    pub fn connect(
        root: &Root,
        topology: &crate::desired::topology::Topology,
        observed: &crate::observed::Observed,
    ) -> Result<Self> {
        let listener = observed.listener();
        let nats = live::Nats::new(&listener.host, listener.port)?;
        // The previous control key's user, when one is kept, reaches a broker that still runs
        // the system JWT of an apply interrupted before its promotion.
        let creds =
            crate::mint::system_users(root, "cotal-control", crate::space::permissions::control())?;
        let mut last = None;
        let mut control = None;
        for user in &creds {
            match control::Control::connect(nats.url(), user) {
                Ok(c) => {
                    control = Some(c);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let control = match control {
            Some(c) => c,
            None => return Err(last.expect("system_users is never empty")),
        };
        // A single server is the server cotal is connected to; a cluster's running nodes
        // are found by their server names through its system account.
        let running: Vec<&crate::observed::ObservedNode> = observed
            .nodes
            .iter()
            .filter(|n| n.process.is_running())
            .collect();
        let ids = if topology.is_cluster() {
            let names: Vec<String> = running.iter().map(|n| n.name().to_string()).collect();
            control.servers(&names)?
        } else {
            running
                .iter()
                .map(|n| (n.name().to_string(), control.server_id().to_string()))
                .collect()
        };
        let mut targets = Vec::new();
        for n in running {
            let id = ids.get(n.name()).ok_or_else(|| {
                BrokerError::unconfirmed(
                    Diagnostic::new(format!(
                        "node {} runs but did not answer the cluster's system account by its server name within {:?}: it may not have joined the cluster.",
                        n.name(),
                        control::REQUEST_DEADLINE
                    ))
                    .next(format!(
                        "`cotal status`, and the node's log in {}",
                        n.files.log.display()
                    )),
                )
            })?;
            targets.push(Target {
                name: n.name().to_string(),
                id: id.clone(),
                nats: live::Nats::new(&n.listener.host, n.listener.port)?,
                files: n.files.clone(),
            });
        }
        Ok(Running {
            root: root.clone(),
            nats,
            control,
            targets,
            replicas: topology.is_cluster().then_some(topology.replicas as usize),
            clustered: topology.is_cluster(),
            before: Vec::new(),
            creds,
            reloads: Vec::new(),
        })
    }

    /// Connect again as a control user of the system keys on disk now (or of an earlier key
    /// set this session used), to the same server.
    fn reconnect(&mut self) -> Result<()> {
        let fresh = crate::mint::system_user(
            &self.root,
            "cotal-control",
            crate::space::permissions::control(),
        )?;
        self.creds.push(fresh);
        let mut last = None;
        for creds in self.creds.iter().rev() {
            match control::Control::connect(self.nats.url(), creds) {
                Ok(c) if c.server_id() == self.control.server_id() => {
                    self.control = c;
                    return Ok(());
                }
                Ok(c) => {
                    last = Some(
                        BrokerError::connect(
                            "the listener",
                            format!(
                                "now answers as server {}, not {}",
                                c.server_id(),
                                self.control.server_id()
                            ),
                        )
                        .into(),
                    )
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| BrokerError::local("control", "no control creds").into()))
    }

    /// Reload the targets `(index, loaded before, digest)` at once and confirm each. A reload
    /// that drops the key the control user is signed by (the system keys replaced) closes its
    /// connection before the reply: the verdict is then asked again as a user of the keys now
    /// in force, and only VARZ decides. Returns the slowest node's time, or every node's failure.
    fn reload_targets(
        &mut self,
        work: &[(usize, control::Loaded, String)],
    ) -> std::result::Result<Duration, Vec<(usize, control::NotConfirmed)>> {
        let request: Vec<(String, control::Loaded, String)> = work
            .iter()
            .map(|(i, before, d)| (self.targets[*i].id.clone(), before.clone(), d.clone()))
            .collect();
        let results = self.control.reload_all(&request);
        let mut slowest = Duration::ZERO;
        let mut failed = Vec::new();
        let mut unreachable = Vec::new();
        for ((i, before, digest), result) in work.iter().zip(results) {
            match result {
                Ok(took) => slowest = slowest.max(took),
                Err(control::NotConfirmed::Unreachable(why)) => {
                    unreachable.push((*i, before.clone(), digest.clone(), why))
                }
                Err(e) => failed.push((*i, e)),
            }
        }
        if !unreachable.is_empty() {
            let reconnected = self.reconnect().is_ok();
            for (i, before, digest, why) in unreachable {
                if !reconnected {
                    failed.push((i, control::NotConfirmed::Unreachable(why)));
                    continue;
                }
                tracing::info!(%why, node = %self.targets[i].name, "the reload closed the control connection; confirming as a user of the keys in force");
                if let Err(e) = self
                    .control
                    .confirm_of(&self.targets[i].id, &before, &digest)
                {
                    failed.push((i, e));
                }
            }
        }
        if failed.is_empty() {
            Ok(slowest)
        } else {
            Err(failed)
        }
    }

    pub fn control(&self) -> &control::Control {
        &self.control
    }

    /// The server id of every node this session reloads and confirms, by node name.
    pub fn server_ids(&self) -> std::collections::BTreeMap<String, String> {
        self.targets
            .iter()
            .map(|t| (t.name.clone(), t.id.clone()))
            .collect()
    }

    /// "node NAME: " for a cluster, nothing for a single server.
    fn on(&self, i: usize) -> String {
        crate::desired::topology::node_prefix(self.clustered, &self.targets[i].name)
    }
}

impl Broker for Running {
    fn running(&self) -> bool {
        true
    }
    fn delete_streams(
        &mut self,
        space: &SpaceName,
        account: &str,
        store_dirs: &[PathBuf],
    ) -> Result<()> {
        // The purge goes through the broker while it still has the account: in its promoted
        // config, or registered. An account it has dropped had its streams purged before the
        // reload that dropped it (the purge precedes every promotion that removes an account),
        // and a purge of an account the broker no longer knows would delete its folder but not
        // streams held in memory; its folder is reaped later. On a cluster the purge goes to
        // the JetStream meta leader and deletes every replica.
        let registered = self
            .control
            .account_jwt(account)
            .map_err(|e| {
                BrokerError::request(
                    format!(
                        "asking the broker whether it has the account of {}",
                        space.quoted()
                    ),
                    e,
                )
            })?
            .is_some();
        let configured = crate::store::server_conf::read(&self.targets[0].files)?
            .is_some_and(|text| crate::render::read_promoted(&text).loads(account));
        if !registered && !configured {
            return Ok(());
        }
        self.control.purge_account(account)?;
        // A cluster's purge is proposed to the meta group and carried out by each node a
        // moment later: the removal waits until no node reports a stream of the account (the
        // account is fenced, so no client can recreate one), within a deadline.
        if let Err(left) = self.streams_settle(account, PURGE_SETTLES, |held| held.is_empty())? {
            return Err(BrokerError::reply(
                format!("deleting the streams of {}", space.quoted()),
                format!(
                    "{} still held by the broker {PURGE_SETTLES:?} after its purge: {}",
                    if left.len() == 1 {
                        "a stream is"
                    } else {
                        "streams are"
                    },
                    left.into_iter().collect::<Vec<_>>().join(", ")
                ),
            )
            .into());
        }
        // The purge removes the account's folders too; a leftover is removed with the broker's
        // streams already gone.
        for dir in store_dirs {
            crate::store::jetstream_dir::remove(dir, account)?;
        }
        Ok(())
    }
    fn survey_streams(
        &mut self,
        _space: &SpaceName,
        purger: &str,
    ) -> Result<Vec<live::StreamSurvey>> {
        self.nats.survey_streams(purger)
    }
    fn purge_streams(
        &mut self,
        _space: &SpaceName,
        purger: &str,
        upto: &std::collections::BTreeMap<String, u64>,
    ) -> Result<Vec<(String, u64)>> {
        self.nats.purge_streams(purger, upto)
    }
    fn reload(&mut self, digests: &[(String, String)]) -> Result<Duration> {
        let mut work = Vec::new();
        let mut log_starts = Vec::new();
        for (i, t) in self.targets.iter().enumerate() {
            let Some((_, digest)) = digests.iter().find(|(name, _)| *name == t.name) else {
                continue;
            };
            let before = self.control.varz_of(&t.id)?;
            log_starts.push(process::log_offset(&t.files));
            work.push((i, before, digest.clone()));
        }
        self.before = work.iter().map(|(i, b, _)| (*i, b.clone())).collect();
        match self.reload_targets(&work) {
            Ok(took) => {
                self.reloads.push(took);
                Ok(took)
            }
            Err(failed) => {
                // The log only quotes the server's own words in the message; it never decides.
                let words: Vec<String> = failed
                    .iter()
                    .map(|(i, e)| {
                        let start = work
                            .iter()
                            .position(|(j, _, _)| j == i)
                            .map(|k| log_starts[k])
                            .unwrap_or(0);
                        format!(
                            "{}{e}{}",
                            self.on(*i),
                            process::log_tail(&self.targets[*i].files, start)
                        )
                    })
                    .collect();
                Err(BrokerError::unconfirmed(words.join("\n")).into())
            }
        }
    }
    fn restore(&mut self) -> Result<bool> {
        let before = std::mem::take(&mut self.before);
        if before.is_empty() {
            return Ok(false);
        }
        if self.control.varz().is_err() {
            self.reconnect()?;
        }
        // Every node a reload was sent to is reloaded with its previous config and confirmed
        // to run it again: the ones that loaded the change go back, and the ones that refused it
        // prove they still run what they ran.
        // A node that does not answer is named; every other one is still put back.
        let mut work = Vec::new();
        let mut silent = Vec::new();
        for (i, was) in &before {
            match self.control.varz_of(&self.targets[*i].id) {
                Ok(now) => work.push((*i, now, was.digest.clone())),
                Err(e) => silent.push(format!("{}{e}", self.on(*i))),
            }
        }
        let reloaded = self.reload_targets(&work);
        let mut failures = silent;
        if let Err(failed) = reloaded {
            failures.extend(failed.iter().map(|(i, e)| format!("{}{e}", self.on(*i))));
        }
        if failures.is_empty() {
            Ok(true)
        } else {
            Err(BrokerError::unconfirmed(failures.join("; ")).into())
        }
    }
    fn verify(&mut self, expectations: &[Expectation]) -> Result<()> {
        let mut failures = Vec::new();
        for (i, t) in self.targets.iter().enumerate() {
            let on = match self.on(i) {
                o if o.is_empty() => o,
                o => format!(" on {}", o.trim_end_matches(": ")),
            };
            for e in expectations {
                match e {
                    Expectation::Loaded {
                        space,
                        account,
                        jwt,
                    } => match self.control.account_jwt_of(&t.id, account)? {
                        Some(loaded) if &loaded != jwt => failures.push(format!(
                            "{} is still in force with another JWT than the promoted one{on}",
                            space.quoted()
                        )),
                        _ => {}
                    },
                    Expectation::SystemLoaded { account, jwt } => {
                        if self.control.account_jwt_of(&t.id, account)?.as_ref() != Some(jwt) {
                            failures.push(format!(
                                "the system account is not in force with the re-issued JWT{on}"
                            ));
                        }
                    }
                    Expectation::MonitorLoaded { account, jwt } => {
                        match self.control.account_jwt_of(&t.id, account)? {
                            Some(loaded) if &loaded != jwt => failures.push(format!(
                                "the monitoring account is still in force with another JWT than the promoted one{on}"
                            )),
                            _ => {}
                        }
                    }
                    Expectation::SideLoaded {
                        space,
                        role,
                        account,
                        jwt,
                    } => match (jwt, self.control.account_jwt_of(&t.id, account)?) {
                        (Some(want), Some(loaded)) if &loaded != want => failures.push(format!(
                            "the {role} account of {} is still in force with another JWT than the promoted one{on}",
                            space.quoted()
                        )),
                        (None, Some(_)) => failures.push(format!(
                            "the {role} account of {} is still loaded{on}",
                            space.quoted()
                        )),
                        _ => {}
                    },
                    Expectation::Unloaded { space, account } => {
                        if self.control.account_jwt_of(&t.id, account)?.is_some() {
                            failures.push(format!("{} is still loaded{on}", space.quoted()));
                        }
                    }
                    // Checked once for every node, above.
                    Expectation::NoStreams { .. } => {}
                    Expectation::Serves { fingerprint } => {
                        match client_tls::served_fingerprint(
                            t.nats.url(),
                            control::REQUEST_DEADLINE,
                        ) {
                            Ok(served) if &served == fingerprint => {}
                            Ok(served) => failures.push(format!(
                                "the client listener still serves certificate {served}, not {fingerprint}{on}"
                            )),
                            Err(why) => failures.push(format!(
                                "cannot read the certificate the client listener serves{on}: {why}"
                            )),
                        }
                    }
                    Expectation::RoutesServe {
                        fingerprint,
                        listeners,
                        identity,
                        ca,
                    } => {
                        let Some((_, address)) = listeners.iter().find(|(n, _)| *n == t.name)
                        else {
                            continue;
                        };
                        match client_tls::route_fingerprint(
                            address,
                            identity,
                            ca,
                            control::REQUEST_DEADLINE,
                        ) {
                            Ok(served) if &served == fingerprint => {}
                            Ok(served) => failures.push(format!(
                                "the route listener still serves certificate {served}, not {fingerprint}{on}"
                            )),
                            Err(why) => failures.push(format!(
                                "cannot read the certificate the route listener serves{on}: {why}"
                            )),
                        }
                    }
                    Expectation::Accepts { space, creds } => {
                        if let Err(why) = t.nats.try_connect(creds) {
                            failures.push(format!(
                                "{} refused a fresh user{on}: {why}",
                                space.quoted()
                            ));
                        }
                    }
                    Expectation::Refuses { space, creds } => {
                        if t.nats.try_connect(creds).is_ok() {
                            failures
                                .push(format!("{} still accepts connections{on}", space.quoted()));
                        }
                    }
                }
            }
        }
        for e in expectations {
            if let Expectation::NoStreams { space, account } = e
                && let Err(held) =
                    self.streams_settle(account, PURGE_SETTLES, |held| held.is_empty())?
            {
                failures.push(format!(
                    "{} still runs {} after its JetStream was turned off",
                    space.quoted(),
                    held.into_iter().collect::<Vec<_>>().join(", ")
                ));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(BrokerError::unconfirmed(format!(
                "the reload did not take on the data plane: {}",
                failures.join("; ")
            ))
            .into())
        }
    }
    fn await_streams(
        &mut self,
        space: &SpaceName,
        creds: &str,
        account: &str,
        streams: &[String],
    ) -> Result<()> {
        // On every node (each runs its replicas once it uses the account); a refused user is
        // fine too: the lookup of its account is what enables it.
        for t in &self.targets {
            let _ = t.nats.try_connect(creds);
        }
        self.recovered(account, streams).map_err(|why| {
            BrokerError::reply(format!("bringing {} back", space.quoted()), why).into()
        })
    }
    fn provision(&mut self, work: &Provisioning) -> Result<Provisioned> {
        self.nats.provision(work, self.replicas)
    }
    fn provision_many(&mut self, work: &[Provisioning]) -> Vec<Result<Provisioned>> {
        self.nats.provision_many(work, self.replicas)
    }
    fn write_channels(
        &mut self,
        space: &SpaceName,
        writer: &str,
        writes: &[crate::space::channels::Write],
    ) -> Result<Vec<crate::space::channels::Written>> {
        self.nats.write_channels(writer, space, writes)
    }
    fn write_acl(
        &mut self,
        space: &SpaceName,
        writer: &str,
        writes: &[crate::space::channels::Write],
    ) -> Result<()> {
        self.nats.write_acl(writer, space, writes)
    }
}
