//! `cotal plan`: observe, compute the plan, print it; optionally save it for `apply FILE`.

use super::Global;
use super::out_file::Target;
use crate::error::{Result, exit};
use crate::observe;
use crate::plan;
use crate::report::{self, Format};
use crate::store::atomic;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Save the plan (JSON, pinned to the generation and the digests of its inputs) for `cotal
    /// apply FILE`; `-` writes it to standard output (the plan for people then goes to standard
    /// error). An existing file is replaced only with --force; a link or special file never.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace an existing --out file.
    #[arg(long, requires = "out")]
    pub force: bool,
    /// Exit 2 when there are changes, 0 when there are none.
    #[arg(long)]
    pub detailed_exitcode: bool,
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let root = global.root()?;
    let out = args
        .out
        .as_deref()
        .map(|raw| Target::check(raw, args.force, Some(&root)))
        .transpose()?;
    let (desired, digest) = observe::desired(&root)?;
    let observed = observe::observe(&root, &desired, digest)?;
    let plan = plan::compute(&desired, &observed)?;
    let shown = super::format_plan(&plan, args.format, global.colour);
    match &out {
        Some(Target::Stdout) => {
            eprint!("{shown}");
            Target::Stdout.write(report::json(&plan).as_bytes(), atomic::PUBLIC)?;
        }
        Some(file) => {
            print!("{shown}");
            file.write(report::json(&plan).as_bytes(), atomic::PUBLIC)?;
            if args.format == Format::Text {
                println!("\nSaved the plan to {file}. Apply exactly it with `cotal apply {file}`.");
            }
        }
        None => print!("{shown}"),
    }
    Ok(if args.detailed_exitcode && !plan.is_empty() {
        exit::CHANGES
    } else {
        exit::OK
    })
}
