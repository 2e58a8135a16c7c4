//! The broker: the only async IO boundary (process, signals, the NATS connection).
//!
//! [`Broker`] is what the executor needs from it. [`Stopped`] is the implementation for a
//! broker that is not running: data is deleted from the store folder and there is nothing to
//! reload.

pub mod preflight;

use crate::error::Result;
use crate::model::SpaceName;
use crate::render::Node;
use std::path::Path;

/// What apply asks of the broker.
pub trait Broker {
    /// Whether a broker process is running (and so must be reloaded and verified).
    fn running(&self) -> bool;
    /// Delete every stream and bucket of the account. Idempotent.
    fn delete_streams(&mut self, space: &SpaceName, account: &str, store_dir: &Path) -> Result<()>;
    /// Reload every node with its promoted config and confirm it took. `Err` means at least one
    /// node did not confirm; the caller restores the previous config and reloads again.
    fn reload(&mut self, nodes: &[Node]) -> Result<()>;
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
    fn reload(&mut self, _nodes: &[Node]) -> Result<()> {
        Ok(())
    }
}
