//! `cotal fmt [--check] [FILE]`: rewrite `cotal.toml` in the canonical layout
//! ([`crate::desired::toml_fmt`]), keeping every comment and value; `--check` changes nothing, prints
//! the diff and exits 2 when the file is not in the layout (a pre-commit hook, CI).

use super::Global;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result, exit};
use crate::store::atomic;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to format (default: the root's cotal.toml).
    pub file: Option<PathBuf>,
    /// Change nothing: print the diff and exit 2 when the file is not in the layout, 0 when it is.
    #[arg(long)]
    pub check: bool,
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let (file, root) = match args.file {
        Some(f) => (f, None),
        None => {
            let root = crate::store::Root::discover(global.root.as_deref())?;
            (root.desired_file(), Some(root))
        }
    };
    // The root's own file is read and written under its lock, as the space verbs edit it, so
    // an edit in between is never overwritten.
    let _lock = match &root {
        Some(root) if std::fs::symlink_metadata(root.state_dir()).is_ok() => Some(
            crate::store::lock::take(root, &crate::operator::holder(), std::time::Duration::ZERO)?,
        ),
        _ => None,
    };
    let text = crate::store::desired_file::read_at(&file)?;
    let formatted = crate::desired::toml_fmt::format(&text).map_err(|e| {
        Error::input(
            Diagnostic::new(format!("{e}; nothing was written.")).next(format!(
                "`cotal validate {}` names the line and column",
                file.display()
            )),
        )
    })?;
    if formatted == text {
        return Ok(exit::OK);
    }
    if args.check {
        let diff = similar::TextDiff::from_lines(&text, &formatted);
        print!(
            "{}",
            diff.unified_diff()
                .header(&file.display().to_string(), "formatted")
        );
        return Ok(exit::CHANGES);
    }
    let mode = std::fs::metadata(&file)
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(atomic::PUBLIC);
    atomic::write(&file, formatted.as_bytes(), mode)?;
    println!(
        "Formatted {} (its comments and values kept).",
        file.display()
    );
    Ok(exit::OK)
}
