//! `cotal plan`: observe, compute the plan, print it; optionally save it for `apply FILE`.

use super::Global;
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
    /// Save the plan (JSON, pinned to the generation and the digests of its inputs) for `cotal apply FILE`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Exit 2 when there are changes, 0 when there are none.
    #[arg(long)]
    pub detailed_exitcode: bool,
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let root = global.root()?;
    if let Some(out) = &args.out {
        root.refuse_own_file(out)?;
    }
    let (desired, digest) = observe::desired(&root)?;
    let observed = observe::observe(&root, &desired, digest)?;
    let plan = plan::compute(&desired, &observed)?;
    print!("{}", super::format_plan(&plan, args.format, global.colour));
    if let Some(out) = &args.out {
        atomic::write(out, report::json(&plan).as_bytes(), atomic::PUBLIC)?;
        if args.format == Format::Text {
            println!(
                "\nSaved the plan to {}. Apply exactly it with `cotal apply {}`.",
                out.display(),
                out.display()
            );
        }
    }
    Ok(if args.detailed_exitcode && !plan.is_empty() {
        exit::CHANGES
    } else {
        exit::OK
    })
}
