//! `cotal rotate sys` and `cotal rotate account SPACE`: an apply whose plan also replaces keys.
//! The rotation is an intent of this run, never written to `cotal.toml`, so a second run plans
//! nothing more.

use super::Global;
use super::apply_cmd::{self, ConfirmArgs};
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::ops::apply::Request;
use crate::plan::Rotate;
use std::collections::BTreeSet;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// New system signing keys (control, observer, monitor, evictor): the system account is
    /// re-issued listing only them, every space's $SYS creds are re-minted, the old ones (and
    /// every monitoring user `cotal creds --system` handed out) are refused; one
    /// reload, journaled like any apply. The plan also carries any other pending change of
    /// cotal.toml. Recovers a root whose system keys are lost (with the broker stopped).
    #[command(
        after_help = "Examples:\n  cotal rotate sys\n  cotal rotate sys --auto-approve --format json"
    )]
    Sys {
        #[command(flatten)]
        confirm: ConfirmArgs,
    },
    /// A new route credential for a cluster (the cluster stopped): recorded now, written into
    /// every node's include by the next `cotal apply` or `cotal up`. A node on another machine
    /// needs its new include file before it starts.
    #[command(after_help = "Examples:\n  cotal down && cotal rotate routes && cotal up")]
    Routes {
        /// How long to wait for the root's lock.
        #[arg(long, value_parser = super::parse_duration, default_value = "0")]
        lock_timeout: std::time::Duration,
        /// `json`: one versioned document of the rotation recorded
        /// (`schemas/rotate-routes.schema.json`).
        #[arg(long, value_enum, default_value_t = super::status_cmd::Format::Text)]
        format: super::status_cmd::Format,
    },
    /// A new signing key for one space's account: users signed by the old key (every creds
    /// `cotal creds` minted for it) are refused after the reload; mint new ones.
    #[command(
        after_help = "Examples:\n  cotal rotate account design\n  cotal rotate account design --auto-approve && cotal creds design --member acme.alice --out alice.creds"
    )]
    Account {
        /// The space whose account gets a new signing key.
        name: String,
        #[command(flatten)]
        confirm: ConfirmArgs,
    },
}

pub fn run(global: &Global, command: Command) -> Result<i32> {
    let root = global.root()?;
    match command {
        Command::Sys { confirm } => apply_cmd::flow(
            global,
            &root,
            &confirm,
            Request {
                rotate: Rotate {
                    sys: true,
                    ..Rotate::default()
                },
                ..Request::default()
            },
        ),
        Command::Routes {
            lock_timeout,
            format,
        } => {
            let rotation = crate::ops::routes::rotate(&root, lock_timeout)?;
            if format == super::status_cmd::Format::Json {
                print!(
                    "{}",
                    crate::report::documents::pretty(&crate::report::documents::RotateRoutes {
                        format_version: crate::report::documents::FORMAT_VERSION,
                        rotation,
                    })
                );
                return Ok(0);
            }
            eprintln!(
                "Recorded route credential rotation {rotation}.\n\
                 next: `cotal apply` (or `cotal up`) writes it into every node's include file (`<config>.routes.conf`, 0600); copy the include of each node on another machine to it before it starts"
            );
            Ok(0)
        }
        Command::Account { name, confirm } => {
            let name = SpaceName::parse(&name).map_err(Error::input)?;
            apply_cmd::flow(
                global,
                &root,
                &confirm,
                Request {
                    only: Some(BTreeSet::from([name.clone()])),
                    rotate: Rotate {
                        accounts: BTreeSet::from([name]),
                        ..Rotate::default()
                    },
                    ..Request::default()
                },
            )
        }
    }
}
