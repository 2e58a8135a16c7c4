//! `cotal init`: mint the broker trust of a new root and write a starter `cotal.toml`.

use super::Global;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::ops::init::no_single_space;

/// Every root keeps scoped system signing keys: without them cotal could not confirm a reload
/// of its broker, observe it, nor give a space its $SYS creds, so the single-space mode of the
/// design (no system key at rest) could not hold even its first space. It was removed; its flag
/// is refused with that reason.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The default (and only) mode; accepted for old scripts.
    #[arg(long, hide = true, conflicts_with = "single_space")]
    pub multi_space: bool,
    /// Removed: refused with the reason.
    #[arg(long, hide = true)]
    pub single_space: bool,
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    if args.single_space {
        return Err(Error::input(no_single_space()));
    }
    let root = global.new_root()?;
    refuse_ancestor(global, &root)?;
    let made = crate::ops::init::init(&root)?;
    println!("Initialised a cotal root at {}", root.dir().display());
    println!("  operator        {}", made.operator_pub);
    println!("  system account  {}", made.sys_pub);
    println!(
        "  system keys     scoped (control, observer, monitor{}), kept in .cotal/auth/broker.json (0600)",
        if made.evictor { ", evictor" } else { "" }
    );
    if made.wrote_starter {
        println!("  wrote           cotal.toml (starter)");
    }
    if !made.gitignored {
        println!(
            "  git             add `.cotal/` to .gitignore: it holds every seed of this broker (commit cotal.toml, and .cotal/state.json's export, never .cotal/)"
        );
    }
    println!("\nNext: add a [spaces.NAME] table to cotal.toml, then run `cotal plan`.");
    Ok(0)
}

/// Without `--root` or `COTAL_ROOT`, the root is found by walking up from the working folder:
/// `init` refuses one found in an ancestor (it would write the seeds there, not here).
fn refuse_ancestor(global: &Global, root: &crate::store::Root) -> Result<()> {
    if global.root.is_some() || std::env::var_os("COTAL_ROOT").is_some_and(|v| !v.is_empty()) {
        return Ok(());
    }
    let here = crate::store::Root::at(std::env::current_dir().map_err(|e| Error::io(".", e))?)?;
    if here.dir() == root.dir() {
        return Ok(());
    }
    Err(Error::refused(
        Diagnostic::new(format!(
            "{} is inside the cotal root {} (it holds a cotal.toml or .cotal/): `cotal init` here would initialise that root, not this folder.",
            here.dir().display(),
            root.dir().display()
        ))
        .blast("none, nothing was changed.")
        .next(format!(
            "`cotal init --root .` makes a new root here; `cotal --root {} init` the enclosing one",
            root.dir().display()
        )),
    ))
}
