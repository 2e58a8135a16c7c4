//! `cotal state export` and `cotal state key`: the secret-free state of the root (see [`crate::observed::state`]), for
//! `cotal plan --state FILE` where the root and its seeds are not (a pull request's CI).
//! The operation is [`crate::ops::state`], which every successful apply also runs to write
//! `.cotal/state.json`; its signature is checked against the key `state key` prints.

use super::Global;
use super::out_file::Target;
use crate::error::Result;
use crate::store::atomic;
use std::path::PathBuf;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Write the secret-free state (public keys, JWTs, the promoted config, each space's
    /// limits, state, protection and streams; never a seed) to standard output or --out.
    #[command(
        after_help = "Examples:\n  cotal state export --out state.json\n  cotal plan --state state.json --state-key \"$COTAL_STATE_KEY\"   # in CI, the key from its settings"
    )]
    Export {
        /// Where to write it (`-`: standard output, the default).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Replace an existing --out file.
        #[arg(long, requires = "out")]
        force: bool,
        /// The state is one versioned JSON document (`schemas/state.schema.json`) whatever
        /// is asked: `json` is the only format, accepted as every verb accepts it.
        #[arg(long, value_enum, default_value_t = StateFormat::Json)]
        format: StateFormat,
    },
    /// Print the public key that signs this root's states (made now if the root has none):
    /// give it to `cotal plan --state` in CI (`--state-key`, or `COTAL_STATE_KEY` from the
    /// repository's settings), never through the pull request. Public: no secret in it.
    #[command(
        after_help = "Examples:\n  cotal state key\n  gh variable set COTAL_STATE_KEY --body \"$(cotal state key)\""
    )]
    Key,
}

/// The one format of the state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StateFormat {
    Json,
}

pub fn run(global: &Global, command: Command) -> Result<i32> {
    let root = global.root()?;
    match command {
        Command::Export {
            out,
            force,
            format: StateFormat::Json,
        } => {
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
        Command::Key => {
            if std::fs::symlink_metadata(root.broker_record()).is_err() {
                return Err(crate::error::Error::refused(
                    crate::diagnostic::Diagnostic::new(format!(
                        "{} holds no broker record (.cotal/auth/broker.json): there is no state to sign; nothing was made.",
                        root.dir().display()
                    ))
                    .next("run `cotal init` first, or pass the broker's root with --root"),
                ));
            }
            let key = crate::store::state_key::load_or_create(&root)?;
            println!("{}", key.public_key());
            Ok(0)
        }
    }
}
