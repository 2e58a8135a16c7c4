//! The broker: the only async IO boundary (process, the NATS connection, the system account's
//! control plane).
//!
//! [`Broker`] is what the executor needs from it. [`Stopped`] serves a broker that is not
//! running (data is deleted from the store folder, there is nothing to reload or provision);
//! [`Running`] serves a live one over NATS: reloads through `$SYS.REQ.SERVER.<id>.RELOAD`
//! confirmed by VARZ, teardown through `$JS.API.ACCOUNT.PURGE`, and a data-plane check that
//! never needs a free connection slot in a tenant's account.

pub mod control;
pub mod identity;
pub mod isolated;
pub mod live;
pub mod preflight;
pub mod process;

use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::plan::q;
use crate::store::Root;
use std::path::Path;
use std::time::Duration;

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
    /// The system account is in force with exactly this JWT (its keys and revocations).
    SystemLoaded { account: String, jwt: String },
    /// A fresh user of the space connects (only for added spaces, whose slots are all free).
    Accepts { space: SpaceName, creds: String },
    /// A fresh user of the space is refused (suspended or removed spaces; a refused connection
    /// takes no slot).
    Refuses { space: SpaceName, creds: String },
}

/// What apply asks of the broker.
pub trait Broker {
    /// Whether a broker process is running (and so must be reloaded and verified).
    fn running(&self) -> bool;
    /// Delete every stream and bucket of the account, and its store folder. Idempotent, and
    /// bounded by a deadline.
    fn delete_streams(&mut self, space: &SpaceName, account: &str, store_dir: &Path) -> Result<()>;
    /// Reload every node with its promoted config and confirm through the broker that it
    /// loaded a config with `digests[i]`. `Err` means at least one node did not confirm; the
    /// caller puts the previous config back and calls [`Broker::restore`].
    fn reload(&mut self, digests: &[String]) -> Result<Duration>;
    /// After a failed reload (or a failed check) and the previous config put back: reload it
    /// and confirm the broker runs the config it ran before the failed attempt. `Ok(false)`
    /// when no reload had been sent (the broker never answered), so there was nothing to undo.
    fn restore(&mut self) -> Result<bool>;
    /// Check the data plane: every expectation holds.
    fn verify(&mut self, expectations: &[Expectation]) -> Result<()>;
    /// Create the space's missing streams and buckets, update drifted ones.
    fn provision(&mut self, space: &SpaceName, provisioner: &str) -> Result<Vec<String>>;
    /// Write the space's channel registry as `writer` (compare-and-set per key; a key that
    /// moved is [`Error::StalePlan`]). Returns each key with its new revision (`None`: deleted).
    fn write_channels(
        &mut self,
        space: &SpaceName,
        writer: &str,
        writes: &[crate::channels::Write],
    ) -> Result<Vec<(String, Option<u64>)>>;
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
        store_dir: &Path,
    ) -> Result<()> {
        crate::store::jetstream_dir::remove(store_dir, account).map(|_| ())
    }
    fn reload(&mut self, _digests: &[String]) -> Result<Duration> {
        Ok(Duration::ZERO)
    }
    fn restore(&mut self) -> Result<bool> {
        Ok(false)
    }
    fn verify(&mut self, _expectations: &[Expectation]) -> Result<()> {
        Ok(())
    }
    fn provision(&mut self, space: &SpaceName, _provisioner: &str) -> Result<Vec<String>> {
        Err(Error::Other(format!(
            "cannot provision {}: the broker is not running (`cotal up` provisions it)",
            q(space)
        )))
    }
    fn write_channels(
        &mut self,
        space: &SpaceName,
        _writer: &str,
        _writes: &[crate::channels::Write],
    ) -> Result<Vec<(String, Option<u64>)>> {
        Err(Error::Other(format!(
            "cannot write the channels of {}: the broker is not running (plan with it running)",
            q(space)
        )))
    }
}

/// The root's running broker, reached on the listener its pid owns.
pub struct Running {
    root: Root,
    nats: live::Nats,
    control: control::Control,
    /// What the broker had loaded before the last reload, for [`Broker::restore`].
    before: Option<control::Loaded>,
    /// Every control creds this session minted (secret, in memory), newest last: a reload
    /// that replaces the system keys closes the control connection, and a rollback may need
    /// the creds of either key set.
    creds: Vec<String>,
    /// Reload confirmation times, for the report.
    pub reloads: Vec<Duration>,
}

impl Running {
    /// Connect to the root's running broker through an ephemeral system user minted from the
    /// retained system signing seed.
    pub fn connect(root: &Root, listener: &identity::Listener) -> Result<Self> {
        let nats = live::Nats::new(&listener.host, listener.port)?;
        // The previous control key's user, when one is kept, reaches a broker that still runs
        // the system JWT of an apply interrupted before its promotion.
        let creds =
            crate::mint::system_users(root, "cotal-control", crate::permissions::control())?;
        let mut last = None;
        for user in &creds {
            match control::Control::connect(nats.url(), user) {
                Ok(control) => {
                    return Ok(Running {
                        root: root.clone(),
                        nats,
                        control,
                        before: None,
                        creds,
                        reloads: Vec::new(),
                    });
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.expect("system_users is never empty"))
    }

    /// Connect again as a control user of the system keys on disk now (or of an earlier key
    /// set this session used), to the same server.
    fn reconnect(&mut self) -> Result<()> {
        let fresh =
            crate::mint::system_user(&self.root, "cotal-control", crate::permissions::control())?;
        self.creds.push(fresh);
        let mut last = None;
        for creds in self.creds.iter().rev() {
            match control::Control::connect(self.nats.url(), creds) {
                Ok(c) if c.server_id() == self.control.server_id() => {
                    self.control = c;
                    return Ok(());
                }
                Ok(c) => {
                    last = Some(Error::Other(format!(
                        "the listener now answers as server {}, not {}",
                        c.server_id(),
                        self.control.server_id()
                    )))
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| Error::Other("no control creds".into())))
    }

    /// Reload and confirm. A reload that drops the key the control user is signed by (the
    /// system keys replaced) closes its connection before the reply: the verdict is then asked
    /// of the broker again as a user of the keys now in force, and only VARZ decides.
    fn reload_confirmed(
        &mut self,
        before: &control::Loaded,
        digest: &str,
    ) -> std::result::Result<Duration, control::NotConfirmed> {
        let started = std::time::Instant::now();
        match self.control.reload(before, digest) {
            Err(control::NotConfirmed::Unreachable(why)) => {
                if self.reconnect().is_err() {
                    return Err(control::NotConfirmed::Unreachable(why));
                }
                tracing::info!(%why, "the reload closed the control connection; confirming as a user of the keys in force");
                self.control.confirm(before, digest)?;
                Ok(started.elapsed())
            }
            other => other,
        }
    }

    pub fn control(&self) -> &control::Control {
        &self.control
    }
}

impl Broker for Running {
    fn running(&self) -> bool {
        true
    }
    fn delete_streams(&mut self, space: &SpaceName, account: &str, store_dir: &Path) -> Result<()> {
        // The purge goes through the broker while it still has the account: in its promoted
        // config, or registered. An account it has dropped had its streams purged before the
        // reload that dropped it (the purge precedes every promotion that removes an account),
        // and a purge of an account the broker no longer knows would delete its folder but not
        // streams held in memory; its folder is reaped later.
        let registered = self
            .control
            .account_jwt(account)
            .map_err(|e| {
                Error::Other(format!(
                    "cannot ask the broker whether it has the account of {}: {e}",
                    q(space)
                ))
            })?
            .is_some();
        let configured = crate::store::server_conf::read(&self.root)?
            .is_some_and(|text| crate::render::read_promoted(&text).loads(account));
        if !registered && !configured {
            return Ok(());
        }
        self.control.purge_account(account)?;
        // The purge removes the account's folder too; a leftover is removed with the broker's
        // streams already gone.
        crate::store::jetstream_dir::remove(store_dir, account).map(|_| ())
    }
    fn reload(&mut self, digests: &[String]) -> Result<Duration> {
        let mut total = Duration::ZERO;
        for digest in digests {
            let before = self.control.varz()?;
            let log_start = process::log_offset(&self.root);
            self.before = Some(before.clone());
            let took = self.reload_confirmed(&before, digest).map_err(|e| {
                // The log only quotes the server's own words in the message; it never decides.
                Error::Other(format!("{e}{}", process::log_tail(&self.root, log_start)))
            })?;
            self.reloads.push(took);
            total += took;
        }
        Ok(total)
    }
    fn restore(&mut self) -> Result<bool> {
        let Some(before) = self.before.take() else {
            return Ok(false);
        };
        let now = match self.control.varz() {
            Ok(now) => now,
            Err(_) => {
                self.reconnect()?;
                self.control.varz()?
            }
        };
        self.reload_confirmed(&now, &before.digest)
            .map(|_| true)
            .map_err(|e| Error::Other(e.to_string()))
    }
    fn verify(&mut self, expectations: &[Expectation]) -> Result<()> {
        let mut failures = Vec::new();
        for e in expectations {
            match e {
                Expectation::Loaded {
                    space,
                    account,
                    jwt,
                } => match self.control.account_jwt(account)? {
                    Some(loaded) if &loaded != jwt => failures.push(format!(
                        "{} is still in force with another JWT than the promoted one",
                        q(space)
                    )),
                    _ => {}
                },
                Expectation::SystemLoaded { account, jwt } => {
                    if self.control.account_jwt(account)?.as_ref() != Some(jwt) {
                        failures.push(
                            "the system account is not in force with the re-issued JWT".into(),
                        );
                    }
                }
                Expectation::Unloaded { space, account } => {
                    if self.control.account_jwt(account)?.is_some() {
                        failures.push(format!("{} is still loaded", q(space)));
                    }
                }
                Expectation::Accepts { space, creds } => {
                    if let Err(why) = self.nats.try_connect(creds) {
                        failures.push(format!("{} refused a fresh user: {why}", q(space)));
                    }
                }
                Expectation::Refuses { space, creds } => {
                    if self.nats.try_connect(creds).is_ok() {
                        failures.push(format!("{} still accepts connections", q(space)));
                    }
                }
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(Error::Other(format!(
                "the reload did not take on the data plane: {}",
                failures.join("; ")
            )))
        }
    }
    fn provision(&mut self, space: &SpaceName, provisioner: &str) -> Result<Vec<String>> {
        self.nats.provision(provisioner, &space.token())
    }
    fn write_channels(
        &mut self,
        space: &SpaceName,
        writer: &str,
        writes: &[crate::channels::Write],
    ) -> Result<Vec<(String, Option<u64>)>> {
        self.nats.write_channels(writer, space, writes)
    }
}
