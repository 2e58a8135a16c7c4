//! Renderers of a [`Plan`] for people and machines: text (terminal, with colour when asked),
//! json (stable key order, `format_version`, no secrets) and markdown (pull-request comments).
//!
//! Pure: each takes a plan and returns a string.

mod markdown;
mod text;

pub use markdown::markdown;
pub use text::{Palette, text};

use crate::model::SpaceName;
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

/// How a space name is shown: the one rule of [`SpaceName::quoted`].
pub fn name(space: &SpaceName) -> String {
    space.quoted()
}

/// Unified diff of the config before and after (JWTs already shortened).
pub fn config_diff(plan: &Plan) -> Option<String> {
    let change = plan.config.as_ref()?;
    let before = change.before.as_deref().unwrap_or("");
    let from = format!("server.conf (generation {})", plan.pins.generation);
    let diff = similar::TextDiff::from_lines(before, change.after.as_str());
    Some(
        diff.unified_diff()
            .context_radius(3)
            .header(&from, "server.conf (planned)")
            .to_string(),
    )
}

/// The summary line.
pub fn summary_line(plan: &Plan) -> String {
    format!(
        "Plan: {} to add, {} to change, {} to remove.",
        plan.summary.add, plan.summary.change, plan.summary.remove
    )
}
