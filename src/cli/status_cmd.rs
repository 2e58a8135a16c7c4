//! `cotal status`: runs [`crate::ops::status`] and shows it as text or JSON; names every record
//! it cannot trust, exiting 3 like `plan`.

use super::Global;
use crate::error::Result;
use crate::model::{human_bytes, human_count};
use crate::observed::{BrokerRecordState, JournalState};
use crate::ops::status::Status;
use std::fmt::Write as _;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
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
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&status).expect("status serializes")
        ),
        Format::Text => print!("{}", text(&status, &observed)),
    }
    Ok(if status.problems.is_empty() {
        crate::error::exit::OK
    } else {
        crate::error::exit::REFUSED
    })
}

fn text(s: &Status, observed: &crate::observed::Observed) -> String {
    let mut out = String::new();
    root_and_problems(&mut out, s);
    broker_line(&mut out, s);
    node_lines(&mut out, s);
    generation_store_and_keys(&mut out, s, observed);
    space_table(&mut out, s);
    out
}

/// The root, a broken `cotal.toml`, and what cannot be trusted.
fn root_and_problems(out: &mut String, s: &Status) {
    let _ = writeln!(out, "root        {}", s.root);
    if let Some(why) = &s.desired_error {
        let _ = writeln!(
            out,
            "cotal.toml  BROKEN: {}\n            (what is on disk is shown; plan and apply refuse until it is fixed)",
            why.replace('\n', "\n            ")
        );
    }
    for p in &s.problems {
        let _ = writeln!(out, "PROBLEM     {p}");
    }
}

/// The broker: its state and listener (a cluster: how many nodes run), its process.
fn broker_line(out: &mut String, s: &Status) {
    if !s.nodes.is_empty() {
        let running = s.nodes.iter().filter(|n| n.state == "running").count();
        let _ = write!(
            out,
            "broker      {}: a cluster, {running} of {} nodes running",
            s.broker.state,
            s.nodes.len()
        );
    } else {
        let _ = write!(out, "broker      {} {}", s.broker.state, s.broker.url);
    }
    if let Some(pid) = s.broker.pid.filter(|_| s.nodes.is_empty()) {
        let _ = write!(out, " (pid {pid}");
        if let Some(v) = &s.broker.version {
            let _ = write!(out, ", nats-server {v}");
        }
        if let Some(start) = &s.broker.started {
            let _ = write!(out, ", up since {start}");
        }
        out.push(')');
    }
    if let Some(seen) = &s.broker.seen {
        let _ = write!(
            out,
            "\n            ({seen}; every verb that writes refuses until this is resolved)"
        );
    }
    out.push('\n');
}

/// A cluster's nodes, one line each.
fn node_lines(out: &mut String, s: &Status) {
    for n in &s.nodes {
        let _ = write!(
            out,
            "  node {:<8} {}{} {}",
            n.name,
            n.state,
            if n.remote { " (remote)" } else { "" },
            n.url
        );
        if let Some(pid) = n.pid {
            let _ = write!(out, " (pid {pid}");
            if let Some(v) = &n.version {
                let _ = write!(out, ", nats-server {v}");
            }
            out.push(')');
        }
        if let Some(id) = &n.server_id {
            let _ = write!(out, " id {}", &id[..id.len().min(8)]);
        }
        match n.config_current {
            Some(true) => out.push_str(", config of this generation"),
            Some(false) => out.push_str(", config NOT of this generation (apply or restart)"),
            None => {}
        }
        if n.meta_leader == Some(true) {
            out.push_str(", JetStream leader");
        }
        if let Some(e) = &n.error {
            let _ = write!(out, ", not asked: {e}");
        }
        out.push('\n');
    }
}

/// The generation, JetStream's stores, the system keys, a cut and an open journal.
fn generation_store_and_keys(out: &mut String, s: &Status, observed: &crate::observed::Observed) {
    let _ = writeln!(out, "generation  {}", s.generation);
    for (label, st) in [
        ("jetstream   file  ", &s.jetstream.file),
        ("            memory", &s.jetstream.memory),
    ] {
        let _ = writeln!(
            out,
            "{label} {} committed of {} ({}){}",
            human_bytes(st.committed),
            human_bytes(st.size),
            st.source,
            match (st.used, st.available) {
                (Some(u), Some(a)) =>
                    format!(", {} used, {} available", human_bytes(u), human_bytes(a)),
                _ => String::new(),
            }
        );
    }
    if let Some(f) = &s.open_files {
        let _ = writeln!(
            out,
            "open files  limit {} ({}): holds {} spaces; the applied ones need {}{}",
            f.limit,
            f.source,
            f.spaces_within,
            f.needed,
            if f.needed > f.limit {
                ", MORE than the limit: raise it, then `cotal down` and `cotal up`"
            } else {
                ""
            }
        );
    }
    let keys = if matches!(observed.broker, BrokerRecordState::Valid(_)) {
        format!("{} keys", s.system.keys)
    } else {
        "(no broker record)".to_string()
    };
    let _ = writeln!(
        out,
        "system      {keys}{}{}",
        match s.system.creds_expire {
            Some(t) => format!(
                ", $SYS creds expire from {} (apply renews them)",
                crate::model::stamp(t)
            ),
            None => String::new(),
        },
        if s.system.evictor {
            "\n            evictor creds minted per space: their KICK is broker-wide by NATS's design (any client of any space); `cotal space evict` is scoped to one space"
        } else {
            ""
        }
    );
    if let Some(cut) = &s.cut {
        let _ = writeln!(
            out,
            "cut         taken at {} (backup and restore allowed; `cotal up` clears it)",
            cut
        );
    }
    if let JournalState::Valid(j) = &observed.journal {
        let _ = writeln!(
            out,
            "journal     OPEN since {} (pid {} on {}): run `cotal apply` to finish it",
            j.started_at, j.pid, j.host
        );
    }
}

/// Every space, one line each (and why one is not servable).
fn space_table(out: &mut String, s: &Status) {
    let _ = writeln!(
        out,
        "\n{:<20} {:<13} {:<9} {:>7} {:>10} {:>10} {:>6}  account",
        "space", "state", "servable", "streams", "messages", "bytes", "conns"
    );
    for sp in &s.spaces {
        let space = crate::model::SpaceName::parse(&sp.name).expect("inventory names are valid");
        let _ = writeln!(
            out,
            "{:<20} {:<13} {:<9} {:>7} {:>10} {:>10} {:>6}  {}",
            space.quoted(),
            sp.view.state.to_string(),
            if sp.view.servable { "yes" } else { "no" },
            sp.streams,
            sp.messages.map(human_count).unwrap_or_else(|| "-".into()),
            human_bytes(sp.bytes),
            sp.connections
                .map(|c| c.to_string())
                .unwrap_or_else(|| "-".into()),
            sp.account
        );
        if !sp.view.why_not.is_empty() && !sp.view.servable {
            let _ = writeln!(out, "{:<20} ({})", "", sp.view.why_not.join(", "));
        }
    }
    if s.spaces.is_empty() {
        out.push_str(if s.problems.is_empty() {
            "(no spaces)\n"
        } else {
            "(no space can be listed with certainty: see the problems above)\n"
        });
    }
}
