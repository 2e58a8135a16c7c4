//! `cotal space evict NAME`: runs [`crate::ops::evict`] and says what it closed.

use super::Global;
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::ops::evict::{self as op, Evicted};
use std::time::Duration;

pub fn run(global: &Global, name: &str, lock_timeout: Duration) -> Result<i32> {
    let root = global.root()?;
    let space = SpaceName::parse(name).map_err(Error::input)?;
    match op::evict(&root, &space, lock_timeout)? {
        Evicted::BrokerStopped => println!(
            "The broker is stopped: space {} has no connection to evict.",
            space.quoted()
        ),
        Evicted::Closed(closed) => println!(
            "Closed {closed} connection{} of space {} (no other space was touched).\n\
             Its clients may reconnect at once: to keep them out, suspend the space (`cotal space suspend {}`) or revoke their creds (`cotal creds revoke`).",
            if closed == 1 { "" } else { "s" },
            space.quoted(),
            space.as_str()
        ),
    }
    Ok(0)
}
