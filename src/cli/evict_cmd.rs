//! `cotal space evict NAME`: runs [`crate::ops::evict`] and says what it closed (`--format
//! json`: [`documents::SpaceEvict`]).

use super::Global;
use super::status_cmd::Format;
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::ops::evict::{self as op, Evicted};
use crate::report::documents;
use std::time::Duration;

pub fn run(global: &Global, name: &str, lock_timeout: Duration, format: Format) -> Result<i32> {
    let root = global.root()?;
    let space = SpaceName::parse(name).map_err(Error::input)?;
    let evicted = op::evict(&root, &space, lock_timeout)?;
    if format == Format::Json {
        print!(
            "{}",
            documents::pretty(&documents::SpaceEvict {
                format_version: documents::FORMAT_VERSION,
                space: space.to_string(),
                broker_running: !matches!(evicted, Evicted::BrokerStopped),
                closed: match evicted {
                    Evicted::BrokerStopped => 0,
                    Evicted::Closed(n) => n,
                },
            })
        );
        return Ok(0);
    }
    match evicted {
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
