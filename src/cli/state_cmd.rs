//! `cotal state export`: the secret-free state of the root (see [`crate::state`]), for
//! `cotal plan --state FILE` where the root and its seeds are not (a pull request's CI).
//! The operation is [`crate::ops::state`], which every successful apply also runs to write
//! `.cotal/state.json`.

use super::Global;
use super::out_file::Target;
use crate::error::Result;
use crate::store::atomic;
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Write the secret-free state (public keys, JWTs, the promoted config, each space's
    /// limits, state, protection and streams; never a seed) to standard output or --out.
    Export {
        /// Where to write it (`-`: standard output, the default).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Replace an existing --out file.
        #[arg(long, requires = "out")]
        force: bool,
    },
}

pub fn run(global: &Global, command: Command) -> Result<i32> {
    let root = global.root()?;
    match command {
        Command::Export { out, force } => {
            let target = match out {
                Some(raw) => Target::check(&raw, force, Some(&root))?,
                None => Target::Stdout,
            };
            target.write(&crate::ops::state::export(&root)?, atomic::PUBLIC)?;
            if !target.is_stdout() {
                eprintln!("Wrote the state to {target} (no secret in it).");
            }
            Ok(0)
        }
    }
}
