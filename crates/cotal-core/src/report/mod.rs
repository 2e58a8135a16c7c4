//! Everything cotal prints, rendered for people and machines. A [`Plan`] as text (terminal, with
//! colour when asked), json (stable key order, `format_version`, no secrets) and markdown
//! (pull-request comments); the status as text and OpenMetrics ([`status`]); the space list
//! ([`space_list`]) and the creds list ([`creds`]) as tables and JSON; the versioned JSON
//! document of what each verb did ([`outcome`], [`documents`]).
//!
//! Pure: each takes the values an operation returned and returns a string.

pub mod creds;
pub mod documents;
mod markdown;
pub mod outcome;
pub mod space_list;
pub mod status;
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
    let (before, after) = (visible(before.unwrap_or("")), visible(after));
    similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header(&from, &to)
        .to_string()
}

/// A file's text as a diff shows it: every character that could hide or reorder what a
/// terminal shows (a carriage return, an escape, a bidirectional control) escaped as `\u{..}`,
/// as tenant text is; newlines and tabs stay what they are.
pub fn visible(text: &str) -> std::borrow::Cow<'_, str> {
    let hidden = |c: char| c != '\n' && c != '\t' && crate::model::hides_or_reorders(c);
    if !text.chars().any(hidden) {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars()
        .map(|c| {
            if hidden(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// The summary line.
pub fn summary_line(plan: &Plan) -> String {
    let s = plan.summary;
    format!(
        "Plan: {} to add, {} to change, {} to remove{}.",
        s.add,
        s.change,
        s.remove,
        settings_clause(s.settings, "to change")
    )
}

/// `, N broker setting(s) DONE` when the promotion changes broker settings; empty otherwise.
pub fn settings_clause(settings: usize, done: &str) -> String {
    match settings {
        0 => String::new(),
        1 => format!(", 1 broker setting {done}"),
        n => format!(", {n} broker settings {done}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_shows_a_files_control_characters_escaped_and_keeps_its_lines() {
        let before = "port: 4222\n# ok\rhttp: 1\n";
        let after = "port: 4222\n\tdebug: true \u{1b}[2J\u{202e}\n";
        let diff = unified(None, Some(before), after, 3);
        assert!(diff.contains("-# ok\\u{d}http: 1\n"), "{diff}");
        assert!(
            diff.contains("+\tdebug: true \\u{1b}[2J\\u{202e}\n"),
            "{diff}"
        );
        assert!(!diff.contains('\r') && !diff.contains('\u{1b}'), "{diff}");
        assert_eq!(visible("plain\ttext\n"), "plain\ttext\n");
    }
}
