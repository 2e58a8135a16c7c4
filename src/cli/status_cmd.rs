//! `cotal status`: runs [`crate::ops::status`] and prints it as text, JSON or OpenMetrics
//! ([`crate::report::status`] renders it); names every record it cannot trust, exiting 3 like
//! `plan`.

use super::Global;
use crate::error::Result;
use crate::report;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// `prometheus`: OpenMetrics text for a textfile collector (node_exporter's
    /// `--collector.textfile.directory`).
    #[arg(long, value_enum, default_value_t = StatusFormat::Text)]
    pub format: StatusFormat,
}

/// How `status` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StatusFormat {
    Text,
    Json,
    Prometheus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let root = global.root()?;
    let (status, observed) = crate::ops::status::status(&root)?;
    match args.format {
        StatusFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&status).expect("status serializes")
        ),
        StatusFormat::Text => print!("{}", report::status::text(&status, &observed)),
        StatusFormat::Prometheus => print!("{}", report::status::prometheus(&status)),
    }
    // The broken `cotal.toml` is one of the problems; the others are records not trusted.
    let broken = usize::from(status.desired_error.is_some());
    Ok(reader_exit(
        status.problems.len() > broken,
        status.desired_error.is_some(),
    ))
}

/// The exit code of a reader (`status`, `space list`) that printed what it could: 3 when a
/// record cannot be trusted, else 1 when `cotal.toml` cannot be read (plan and apply refuse
/// until it is fixed, so CI must not read it as healthy), else 0.
pub fn reader_exit(problems: bool, desired_broken: bool) -> i32 {
    if problems {
        crate::error::exit::REFUSED
    } else if desired_broken {
        crate::error::exit::ERROR
    } else {
        crate::error::exit::OK
    }
}
