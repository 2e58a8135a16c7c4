//! The broker: the only async IO boundary (process, signals, the NATS connection).
//!
//! [`Broker`] is what the executor needs from it. [`Stopped`] serves a broker that is not
//! running (data is deleted from the store folder, there is nothing to reload or provision);
//! [`Running`] serves a live one over NATS and signals.

pub mod isolated;
pub mod live;
pub mod preflight;
pub mod process;
pub mod reload;

use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::render::Node;
use crate::store::Root;
use std::path::Path;
use std::time::Duration;

/// One data-plane expectation after a reload: a fresh user of `space` must be accepted (or
/// refused).
pub struct Expectation {
    pub space: SpaceName,
    pub accept: bool,
    /// Creds of an ephemeral user of the space (secret, in memory only).
    pub creds: String,
}

/// What apply asks of the broker.
pub trait Broker {
    /// Whether a broker process is running (and so must be reloaded and verified).
    fn running(&self) -> bool;
    /// Delete every stream and bucket of the account. Idempotent. `teardown` is an ephemeral
    /// user of the account, needed when the broker runs.
    fn delete_streams(
        &mut self,
        space: &SpaceName,
        account: &str,
        store_dir: &Path,
        teardown: Option<&str>,
    ) -> Result<()>;
    /// Reload every node with its promoted config and confirm it took. `Err` means at least one
    /// node did not confirm; the caller restores the previous config and reloads again.
    fn reload(&mut self, nodes: &[Node]) -> Result<Duration>;
    /// Check the data plane: every expectation holds.
    fn verify(&mut self, expectations: &[Expectation]) -> Result<()>;
    /// Create the space's missing streams and buckets, update drifted ones.
    fn provision(&mut self, space: &SpaceName, provisioner: &str) -> Result<Vec<String>>;
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
        _teardown: Option<&str>,
    ) -> Result<()> {
        crate::store::jetstream_dir::remove(store_dir, account).map(|_| ())
    }
    fn reload(&mut self, _nodes: &[Node]) -> Result<Duration> {
        Ok(Duration::ZERO)
    }
    fn verify(&mut self, _expectations: &[Expectation]) -> Result<()> {
        Ok(())
    }
    fn provision(&mut self, space: &SpaceName, _provisioner: &str) -> Result<Vec<String>> {
        Err(Error::Other(format!(
            "cannot provision {}: the broker is not running (`cotal up` provisions it)",
            crate::plan::q(space)
        )))
    }
}

/// The root's running broker.
pub struct Running {
    root: Root,
    nats: live::Nats,
    /// Reload confirmation times, for the report.
    pub reloads: Vec<Duration>,
}

impl Running {
    pub fn new(root: &Root, host: &str, port: u16) -> Result<Self> {
        Ok(Running {
            root: root.clone(),
            nats: live::Nats::new(host, port)?,
            reloads: Vec::new(),
        })
    }
}

impl Broker for Running {
    fn running(&self) -> bool {
        true
    }
    fn delete_streams(
        &mut self,
        space: &SpaceName,
        _account: &str,
        _store_dir: &Path,
        teardown: Option<&str>,
    ) -> Result<()> {
        match teardown {
            Some(creds) => self.nats.delete_all_streams(creds).map(|_| ()),
            None => Err(Error::Other(format!(
                "cannot delete the streams of {}: its account record is gone, so no teardown user can be minted",
                crate::plan::q(space)
            ))),
        }
    }
    fn reload(&mut self, nodes: &[Node]) -> Result<Duration> {
        let mut total = Duration::ZERO;
        for _node in nodes {
            let took = reload::reload(&self.root, reload::TIMEOUT)?;
            self.reloads.push(took);
            total += took;
        }
        Ok(total)
    }
    fn verify(&mut self, expectations: &[Expectation]) -> Result<()> {
        let mut failures = Vec::new();
        for e in expectations {
            match (self.nats.try_connect(&e.creds), e.accept) {
                (Ok(()), true) | (Err(_), false) => {}
                (Err(why), true) => failures.push(format!(
                    "{} refused a fresh user: {why}",
                    crate::plan::q(&e.space)
                )),
                (Ok(()), false) => failures.push(format!(
                    "{} still accepts connections",
                    crate::plan::q(&e.space)
                )),
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
}
