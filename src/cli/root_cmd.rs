//! `cotal root backup DIR` and `cotal root restore DIR`: the root's trust material and records
//! (see [`crate::ops::backup::root_backup`] and [`crate::root_backup`]).

use super::Global;
use crate::error::Result;
use crate::root_backup;
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
            let manifest = crate::ops::backup::root_backup(&root, &dir, lock_timeout)?;
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
