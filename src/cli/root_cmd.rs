//! `cotal root backup DIR` and `cotal root restore DIR`: the root's trust material and records
//! (see [`crate::root_backup`]).

use super::Global;
use crate::error::{Error, Result};
use crate::observed::{BrokerRecordState, JournalState};
use crate::store::lock;
use crate::{observe, plan, root_backup};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Copy the root's trust and records (cotal.toml, the broker and account records with their
    /// seeds, the config, the generation, the space folders, the audit) into a new folder
    /// (0700, files 0600, with a manifest of checksums). It holds every seed: keep it as you
    /// keep the operator's keys. Stream data is backed up per space (`cotal space backup`).
    Backup {
        dir: PathBuf,
        /// How long to wait for the root's lock.
        #[arg(long, value_parser = super::parse_duration, default_value = "0")]
        lock_timeout: Duration,
    },
    /// Bring a root backup up on this host: verify it, then write it into this root, which
    /// must hold no .cotal/ yet; `cotal up` then serves the same operator and accounts, so
    /// every creds handed out works again.
    Restore { dir: PathBuf },
}

pub fn run(global: &Global, command: Command) -> Result<i32> {
    match command {
        Command::Backup { dir, lock_timeout } => {
            let root = global.root()?;
            let _lock = lock::acquire(&root, &crate::operator::holder(), lock_timeout)?;
            let (desired, digest, _) = observe::desired_for_reading(&root)?;
            let observed = observe::observe(&root, &desired, digest)?;
            if let JournalState::Open(_) = observed.journal {
                return Err(Error::Interrupted(
                    "an apply was interrupted (the journal is open): the records are between two states.\nnext: run `cotal apply` to finish it, then back up".into(),
                ));
            }
            plan::guard_trust(&observed)?;
            let BrokerRecordState::Valid(trust) = &observed.broker else {
                unreachable!("guard_trust passed");
            };
            let manifest = root_backup::backup(
                &root,
                &dir,
                &trust.operator_pub,
                observed.generation.generation(),
            )?;
            println!(
                "Backed up the root (operator {}, generation {}, {} files) to {} (0700).\n\
                 It holds every seed of this broker: keep it as you keep the operator's keys. Stream data is backed up per space (`cotal space backup`).",
                manifest.operator,
                manifest.generation,
                manifest.files.len(),
                dir.display()
            );
            Ok(0)
        }
        Command::Restore { dir } => {
            let root = global.new_root()?;
            let manifest = root_backup::restore(&root, &dir)?;
            println!(
                "Restored the root of operator {} (generation {}, taken {}) into {}.\n\
                 next: `cotal up` serves the same operator and accounts (every creds handed out works again); restore stream data per space with `cotal space restore`",
                manifest.operator,
                manifest.generation,
                manifest.created_at,
                root.dir().display()
            );
            Ok(0)
        }
    }
}
