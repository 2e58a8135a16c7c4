//! `cotal root backup DIR` and `cotal root restore DIR`: the root's trust material and records
//! (see [`crate::ops::backup::root_backup`] and [`crate::root_backup`]).

use super::Global;
use super::status_cmd::Format;
use crate::error::Result;
use crate::report::documents;
use crate::root_backup;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Copy the root's trust and records (cotal.toml, the broker and account records with their
    /// seeds, the config, the generation, the space folders, the audit) into a new folder
    /// (0700, files 0600, with a manifest of checksums). It holds every seed: keep it as you
    /// keep the operator's keys. Stream data is backed up per space (`cotal space backup`).
    #[command(
        after_help = "Examples:\n  cotal root backup /secure/cotal-2026-12-02\n  cotal root backup /secure/nightly --lock-timeout 2m --format json"
    )]
    Backup {
        /// The folder to make (it must not exist yet).
        dir: PathBuf,
        /// How long to wait for the root's lock.
        #[arg(long, value_parser = super::parse_duration, default_value = "0")]
        lock_timeout: Duration,
        /// `json`: one versioned document of what was written (`schemas/root-backup.schema.json`).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Bring a root backup up on this host: verify it, then write it into this root, which
    /// must hold no .cotal/ yet; `cotal up` then serves the same operator and accounts, so
    /// every creds handed out works again.
    #[command(
        after_help = "Examples:\n  mkdir newroot && cotal --root newroot root restore /secure/cotal-2026-12-02\n  cotal --root newroot up"
    )]
    Restore {
        /// The folder `cotal root backup` made.
        dir: PathBuf,
        /// `json`: one versioned document of what was restored (`schemas/root-restore.schema.json`).
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
}

pub fn run(global: &Global, command: Command) -> Result<i32> {
    match command {
        Command::Backup {
            dir,
            lock_timeout,
            format,
        } => {
            let root = global.root()?;
            let manifest = crate::ops::backup::root_backup(&root, &dir, lock_timeout)?;
            if format == Format::Json {
                print!(
                    "{}",
                    documents::pretty(&documents::RootBackup {
                        format_version: documents::FORMAT_VERSION,
                        operator: manifest.operator.clone(),
                        generation: manifest.generation,
                        files: manifest.files.len(),
                        dir: dir.display().to_string(),
                    })
                );
                return Ok(0);
            }
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
        Command::Restore { dir, format } => {
            let root = global.new_root()?;
            let manifest = root_backup::restore(&root, &dir)?;
            if format == Format::Json {
                print!(
                    "{}",
                    documents::pretty(&documents::RootRestore {
                        format_version: documents::FORMAT_VERSION,
                        operator: manifest.operator.clone(),
                        generation: manifest.generation,
                        taken_at: manifest.created_at.clone(),
                        root: root.dir().display().to_string(),
                    })
                );
                return Ok(0);
            }
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
