//! `cotal validate [FILE]`: check `cotal.toml` with no root and no broker (a pre-commit hook,
//! a pull request's CI); the operation is [`crate::ops::validate`].

use super::Global;
use crate::error::{Result, exit};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The file to check (default: the root's cotal.toml). Paths it names (TLS files, the
    /// include) are read relative to its folder.
    pub file: Option<PathBuf>,
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let file = match args.file {
        Some(f) => f,
        None => crate::store::Root::discover(global.root.as_deref())?.desired_file(),
    };
    let text = crate::store::desired_file::read_at(&file)?;
    let dir = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let dir = crate::store::Root::at(dir)?;
    match crate::ops::validate::validate(&dir, &file.display().to_string(), &text) {
        Ok(valid) => {
            println!(
                "{} is valid: {} space(s), {}.",
                file.display(),
                valid.spaces,
                match valid.cluster_nodes {
                    Some(n) => format!("a cluster of {n} nodes"),
                    None => "one server".to_string(),
                }
            );
            Ok(exit::OK)
        }
        Err(problems) => {
            for p in &problems {
                eprintln!("error: {p}");
            }
            eprintln!(
                "{} is not valid: {} problem(s); nothing was read beyond it.",
                file.display(),
                problems.len()
            );
            Ok(exit::ERROR)
        }
    }
}
