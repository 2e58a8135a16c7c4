//! `cotal audit`: read the lifecycle audit, filtered by space and time.

use super::Global;
use crate::error::{Error, Result};
use crate::store::audit;
use std::time::SystemTime;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only this space's records.
    #[arg(long)]
    pub space: Option<String>,
    /// Only records at or after this time: RFC 3339 (2026-11-30T10:00:00Z) or an age (1h, 7d).
    #[arg(long)]
    pub since: Option<String>,
    /// `json`: JSON Lines, one record a line, each with its `format_version`
    /// (`schemas/audit-record.schema.json`).
    #[arg(long, value_enum, default_value_t = super::status_cmd::Format::Text)]
    pub format: super::status_cmd::Format,
}

fn since(raw: &str) -> Result<SystemTime> {
    if let Ok(t) = humantime::parse_rfc3339_weak(raw) {
        return Ok(t);
    }
    let age = humantime::parse_duration(raw).map_err(|_| {
        Error::input(format!(
            "--since {raw:?}: write a time (2026-11-30T10:00:00Z) or an age (1h, 7d)"
        ))
    })?;
    Ok(crate::clock::current() - age)
}

pub fn run(global: &Global, args: Args) -> Result<i32> {
    let root = global.root()?;
    let cutoff = args.since.as_deref().map(since).transpose()?;
    let records: Vec<_> = audit::read(&root)?
        .into_iter()
        .filter(|r| {
            args.space
                .as_deref()
                .is_none_or(|s| r.space.as_ref().is_some_and(|n| n.as_str() == s))
        })
        .filter(|r| {
            cutoff.is_none_or(|c| {
                humantime::parse_rfc3339_weak(&r.time)
                    .map(|t| t >= c)
                    .unwrap_or(true)
            })
        })
        .collect();
    match args.format {
        super::status_cmd::Format::Json => {
            // JSON Lines, one record a line (`cotal audit --format json | head -1` stops early),
            // each with the output's version (`schemas/audit-record.schema.json`).
            for record in &records {
                let line = crate::report::documents::AuditLine {
                    format_version: crate::report::documents::FORMAT_VERSION,
                    record,
                };
                println!(
                    "{}",
                    serde_json::to_string(&line).expect("record serializes")
                );
            }
        }
        super::status_cmd::Format::Text => {
            if !records.is_empty() {
                println!(
                    "{:<20}  {:<22} {:<16} {:<12} {:<16} OUTCOME",
                    "TIME", "EVENT", "SPACE", "GENERATION", "ACTOR"
                );
            }
            for r in &records {
                let event = serde_json::to_value(r.event)
                    .expect("event")
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                let space = r
                    .space
                    .as_ref()
                    .map(crate::model::SpaceName::quoted)
                    .unwrap_or_else(|| "-".into());
                let generation = match r.generation.after {
                    Some(a) => format!("gen {}->{a}", r.generation.before),
                    None => format!("gen {}", r.generation.before),
                };
                let counts = r.counts.map(|c| {
                    let mut parts = Vec::new();
                    let plural =
                        |n: u64, one: &str| format!("{n} {one}{}", if n == 1 { "" } else { "s" });
                    if c.streams > 0 || c.bytes > 0 {
                        parts.push(plural(c.streams, "stream"));
                        parts.push(crate::model::human_bytes(c.bytes));
                    }
                    if let Some(m) = c.messages {
                        parts.push(plural(m, "message"));
                    }
                    if let Some(n) = c.connections {
                        parts.push(plural(n, "connection"));
                    }
                    parts
                });
                let counts = match counts {
                    Some(p) if !p.is_empty() => format!(" [{}]", p.join(", ")),
                    _ => String::new(),
                };
                let actor = format!("{}@{}", r.actor.user, r.actor.host);
                println!(
                    "{:<20}  {:<22} {:<16} {:<12} {:<16} {}{counts}",
                    r.time, event, space, generation, actor, r.outcome
                );
            }
            if records.is_empty() {
                println!("(no audit records)");
            }
        }
    }
    Ok(0)
}
