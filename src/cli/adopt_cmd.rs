//! `cotal adopt`: bring a root the original Cotal made under cotal, keeping every key. Prints
//! what it found and what adoption will do ([`crate::adopt::describe`]), asks (or
//! `--auto-approve`), carries out the migration ([`crate::ops::adopt`]), then runs the system
//! rotation the root needs when the broker is stopped (as `cotal rotate sys`, the apply it is),
//! or says how to run it when the broker runs. With `--nsc DIR`, an operator managed with nsc
//! instead ([`crate::ops::adopt_nsc`]): its keys and JWTs become a new root's records.

use super::Global;
use super::apply_cmd;
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
    /// Adopt an operator managed with nsc: nsc's data folder, holding `stores/` and `keys/`
    /// (by default ~/.local/share/nats/nsc).
    #[arg(long, value_name = "DIR")]
    pub nsc: Option<std::path::PathBuf>,
    /// The nsc operator to adopt (needed when the store holds several).
    #[arg(long, value_name = "NAME", requires = "nsc")]
    pub operator: Option<String>,
    /// An nsc account to adopt, as the space SPACE (its own name by default); repeat it.
    /// Without it, every account but the system account.
    #[arg(long = "account", value_name = "NAME[=SPACE]", requires = "nsc")]
    pub accounts: Vec<String>,
    /// Keep the claims cotal does not model (exports, imports, mappings, tiered limits, ...)
    /// of the accounts that have them, as they are: cotal then changes only what cotal.toml
    /// declares of those accounts, and every plan says so.
    #[arg(long, requires = "nsc")]
    pub keep_claims: bool,
    /// The config file the running broker was started with (`nats-server -c FILE`): read for
    /// its listener, store and the accounts it serves; cotal's first apply replaces it and
    /// reloads the broker.
    #[arg(long, value_name = "FILE", requires = "nsc")]
    pub server_config: Option<std::path::PathBuf>,
}

/// `cotal adopt --nsc DIR`.
fn run_nsc(global: &Global, args: Args, dir: std::path::PathBuf) -> Result<i32> {
    let root = global.new_root()?;
    let nsc = crate::ops::adopt_nsc::Args {
        dir,
        operator: args.operator,
        request: crate::adopt::nsc::Request {
            accounts: args
                .accounts
                .iter()
                .map(|a| match a.split_once('=') {
                    Some((name, space)) => (name.to_string(), Some(space.to_string())),
                    None => (a.clone(), None),
                })
                .collect(),
            keep_claims: args.keep_claims,
        },
        server_config: args.server_config,
    };
    let outcome = crate::ops::adopt_nsc::adopt(&root, &nsc, args.lock_timeout, |survey| {
        print!("{}", crate::ops::adopt_nsc::describe(survey));
        if !args.auto_approve {
            apply_cmd::ask_yes("Adopt this operator?", "adopt")?;
        }
        Ok(true)
    })?;
    if !outcome.carried_out {
        print!("{}", crate::ops::adopt_nsc::describe(&outcome.survey));
        return Ok(0);
    }
    println!(
        "\nAdopted: operator {:?} and {} space(s); every key is kept.",
        outcome.survey.import.operator,
        outcome.survey.import.spaces.len()
    );
    println!(
        "Next: `cotal plan` shows the switch to cotal's config (and what cotal adds: JetStream where it was off, every space's streams, the system account's scoped keys); `cotal apply` makes it, by a reload when the broker runs."
    );
    Ok(0)
}

pub fn run(global: &Global, mut args: Args) -> Result<i32> {
    if let Some(dir) = args.nsc.take() {
        return run_nsc(global, args, dir);
    }
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
                &apply_cmd::VerbArgs {
                    // Approved with the adoption that named it; asked for on its own when
                    // the adoption had nothing else to do.
                    auto_approve: args.auto_approve || outcome.carried_out,
                    lock_timeout: args.lock_timeout,
                    format: crate::report::Format::Text,
                    diff: false,
                    allow_degraded: false,
                }
                .confirm(false, Vec::new()),
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
