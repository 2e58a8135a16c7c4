//! `cotal creds`: mint a user of a space, signed by the space's signing key, so an operator can
//! connect a client.

use super::Global;
use crate::error::{Error, Result};
use crate::model::SpaceName;
use crate::store::{account_record, atomic};
use crate::{mint, observe, permissions, plan};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The space.
    pub space: String,
    /// The user's name (shown in the broker's connection lists).
    #[arg(long)]
    pub user: String,
    /// Write the creds file here (0600) instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Expire the user after this long (e.g. 1h, 30d); default: no expiry.
    #[arg(long, value_parser = super::parse_duration)]
    pub expires: Option<Duration>,
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let root = global.root()?;
    let space = SpaceName::parse(&args.space).map_err(Error::Input)?;
    let (desired, digest) = observe::desired(&root)?;
    let observed = observe::observe(&root, &desired, digest)?;
    plan::guard_trust(&observed)?;
    let Some(observed_space) = observed.inventory.spaces.get(&space) else {
        return Err(Error::Input(format!(
            "no space {} on this root (spaces: {})",
            plan::q(&space),
            observed
                .inventory
                .spaces
                .keys()
                .map(plan::q)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    let record = account_record::load(&root, &space)?;
    let (creds, user_pub) = mint::user(
        &observed_space.account_pub,
        &record.account.signing_seed,
        &args.user,
        permissions::operator_user(),
        args.expires,
    )
    .map_err(Error::Other)?;
    match &args.out {
        Some(path) => {
            root.refuse_own_file(path)?;
            atomic::write(path, creds.as_bytes(), atomic::SECRET)?;
            eprintln!(
                "Wrote {} (0600): user {} ({user_pub}) of space {}.",
                path.display(),
                args.user,
                plan::q(&space)
            );
        }
        None => print!("{creds}"),
    }
    Ok(0)
}
