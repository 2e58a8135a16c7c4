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
    /// New system signing keys (control, observer, evictor): the system account is re-issued
    /// listing only them, every space's $SYS creds are re-minted, the old ones are refused; one
    /// reload, journaled like any apply. The plan also carries any other pending change of
    /// cotal.toml. Recovers a root whose system keys are lost (with the broker stopped).
    Sys {
        #[command(flatten)]
        confirm: ConfirmArgs,
    },
    /// A new signing key for one space's account: users signed by the old key (every creds
    /// `cotal creds` minted for it) are refused after the reload; mint new ones.
    Account {
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
