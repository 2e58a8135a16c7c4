//! Renderers of a [`Plan`] for people and machines: text (terminal, with colour when asked),
//! json (stable key order, `format_version`, no secrets) and markdown (pull-request comments).
//!
//! Pure: each takes a plan and returns a string.

pub mod documents;
mod markdown;
pub mod outcome;
mod text;

pub use markdown::markdown;
pub use text::{Palette, TextOptions, text, text_with};

use crate::plan::Plan;

/// Output formats of `plan` and friends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Markdown,
}

/// The plan as pretty JSON.
pub fn json(plan: &Plan) -> String {
    let mut s = serde_json::to_string_pretty(plan).expect("plan serializes");
    s.push('\n');
    s
}

/// Unified diff of the config before and after (JWTs already shortened). For a cluster: the
/// first node's diff, which nodes share it, then the diff of each node with a change of its own.
pub fn config_diff(plan: &Plan) -> Option<String> {
    let change = plan.config.as_ref()?;
    let g = plan.pins.generation;
    let mut out = unified(
        change.node.as_deref(),
        change.before.as_deref(),
        &change.after,
        g,
    );
    if !change.same_on.is_empty() {
        out.push_str(&format!(
            "# the same change on node{} {} (each with its own listener, server name, routes and store)\n",
            if change.same_on.len() == 1 { "" } else { "s" },
            change.same_on.join(", ")
        ));
    }
    for n in &change.nodes {
        out.push_str(&unified(Some(&n.name), n.before.as_deref(), &n.after, g));
    }
    if !change.unchanged.is_empty() {
        out.push_str(&format!(
            "# no change on node{} {}\n",
            if change.unchanged.len() == 1 { "" } else { "s" },
            change.unchanged.join(", ")
        ));
    }
    if out.is_empty() {
        // A promotion that repairs the generation record alone: say so rather than print a
        // header over nothing.
        out.push_str("# no change to the text of the config: only the generation record moves\n");
    }
    Some(out)
}

fn unified(node: Option<&str>, before: Option<&str>, after: &str, generation: u64) -> String {
    let of = node.map(|n| format!(" of node {n}")).unwrap_or_default();
    let from = format!("server.conf{of} (generation {generation})");
    let to = format!("server.conf{of} (planned)");
    similar::TextDiff::from_lines(before.unwrap_or(""), after)
        .unified_diff()
        .context_radius(3)
        .header(&from, &to)
        .to_string()
}

/// The summary line.
pub fn summary_line(plan: &Plan) -> String {
    format!(
        "Plan: {} to add, {} to change, {} to remove.",
        plan.summary.add, plan.summary.change, plan.summary.remove
    )
}
