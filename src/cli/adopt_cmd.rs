//! `cotal adopt`: bring a root the original Cotal made under cotal, keeping every key. Prints
//! what it found and what adoption will do ([`crate::adopt::describe`]), asks (or
//! `--auto-approve`), carries out the migration ([`crate::ops::adopt`]), then runs the system
//! rotation the root needs when the broker is stopped (as `cotal rotate sys`, the apply it is),
//! or says how to run it when the broker runs.

use super::Global;
use super::apply_cmd::{self, ConfirmArgs};
use crate::adopt::Rotation;
use crate::error::Result;
use crate::ops::apply::Request;
use crate::plan::Rotate;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Do not ask for confirmation (the report is printed all the same).
    #[arg(long)]
    pub auto_approve: bool,
    /// How long to wait for the root's lock.
    #[arg(long, value_parser = super::parse_duration, default_value = "0")]
    pub lock_timeout: std::time::Duration,
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let root = global.root()?;
    let outcome = crate::ops::adopt::adopt(&root, args.lock_timeout, |adoption| {
        print!("{}", crate::adopt::describe(adoption));
        if !args.auto_approve {
            apply_cmd::ask_yes("Adopt this root?", "adopt")?;
        }
        Ok(true)
    })?;
    let adoption = &outcome.adoption;
    if outcome.carried_out {
        println!(
            "\nAdopted: {} step(s) done; every account key and signing key is kept.",
            adoption.steps.len()
        );
    } else {
        // Nothing to write: the report says so, and what is left (the rotation) follows.
        print!("{}", crate::adopt::describe(adoption));
    }
    match adoption.rotation {
        Rotation::NotNeeded if outcome.carried_out => {
            println!("Next: `cotal plan` shows what cotal adds on top; `cotal apply` makes it so.");
            Ok(0)
        }
        Rotation::Tell if outcome.carried_out => {
            println!("Next: cotal down && cotal rotate sys && cotal up");
            Ok(0)
        }
        Rotation::NotNeeded | Rotation::Tell => Ok(0),
        Rotation::Run => {
            println!("\nRunning `cotal rotate sys` (the broker is stopped):\n");
            apply_cmd::flow(
                global,
                &root,
                &ConfirmArgs {
                    // Approved with the adoption that named it; asked for on its own when
                    // the adoption had nothing else to do.
                    auto_approve: args.auto_approve || outcome.carried_out,
                    allow_destroy: false,
                    lock_timeout: args.lock_timeout,
                    format: crate::report::Format::Text,
                    diff: false,
                    allow_degraded: false,
                    relocated: Vec::new(),
                },
                Request {
                    rotate: Rotate {
                        sys: true,
                        ..Rotate::default()
                    },
                    ..Request::default()
                },
            )
        }
    }
}
