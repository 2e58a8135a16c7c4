//! The markdown plan, for a pull-request comment: a table of spaces, the steps, warnings and the
//! config diff folded in a `<details>` block.

use super::{config_diff, summary_line};
use crate::plan::{Plan, Step};
use std::fmt::Write as _;

/// Escape text for a table cell.
fn cell(s: &str) -> String {
    let escaped: String = s
        .chars()
        .map(|c| match c {
            '\\' | '|' | '`' | '*' | '_' | '[' | ']' | '~' | '#' => format!("\\{c}"),
            '<' => "&lt;".into(),
            '\n' | '\r' => " ".into(),
            c => c.to_string(),
        })
        .collect();
    crate::space::channels::displayable(&escaped)
}

pub fn markdown(plan: &Plan) -> String {
    let mut out = String::new();
    if let Some(notice) = &plan.notice {
        let _ = writeln!(out, "> **Warning:** {notice}\n");
    }
    if let Some(t) = &plan.target {
        let _ = writeln!(
            out,
            "**Root** `{}` · **cotal.toml** `{}` · **Broker** `{}`{}\n",
            t.root,
            t.desired_file,
            t.broker,
            t.state
                .as_ref()
                .map(|s| format!(" · **State** `{s}`"))
                .unwrap_or_default()
        );
    }
    if plan.is_empty() {
        out.push_str("### cotal plan: no changes\n\nThe broker matches `cotal.toml`.\n");
        return out;
    }
    let _ = writeln!(
        out,
        "### cotal plan: {}\n",
        summary_line(plan)
            .trim_start_matches("Plan: ")
            .trim_end_matches('.')
    );
    let _ = writeln!(
        out,
        "Generation {} -> {}, broker {}.\n",
        plan.pins.generation,
        plan.steps
            .iter()
            .find_map(|s| match s {
                Step::PromoteConfig { to_generation, .. } => Some(to_generation.to_string()),
                _ => None,
            })
            .unwrap_or_else(|| plan.pins.generation.to_string()),
        if plan.broker_running {
            "running"
        } else {
            "stopped"
        }
    );
    out.push_str("| | space | details | blast radius |\n|---|---|---|---|\n");
    for c in &plan.changes {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} |",
            c.action.symbol(),
            cell(&c.space.quoted()),
            cell(&c.details.join("; ")),
            cell(&c.blast.describe_or_contained())
        );
    }
    out.push_str("\n**Steps**\n\n");
    for (i, step) in plan.steps.iter().enumerate() {
        let _ = writeln!(out, "{}. {}", i + 1, cell(&step.title()));
        match step {
            Step::ReissueSystemAccount { changes, .. } => {
                for c in changes {
                    let _ = writeln!(out, "   - {}", cell(c));
                }
            }
            Step::PromoteConfig { reasons, blast, .. } => {
                let reasons: Vec<String> = reasons.iter().map(|r| r.to_string()).collect();
                let _ = writeln!(out, "   - because: {}", cell(&reasons.join("; ")));
                let _ = writeln!(
                    out,
                    "   - blast radius: {}",
                    cell(&blast.describe_or_contained())
                );
            }
            Step::DeleteStreams { blast, .. }
            | Step::Fence { blast, .. }
            | Step::RecordArchive { blast, .. }
            | Step::PurgeStreams { blast, .. }
            | Step::ReissueAccount { blast, .. } => {
                let _ = writeln!(
                    out,
                    "   - blast radius: {}",
                    cell(&blast.describe_or_contained())
                );
            }
            _ => {}
        }
    }
    if !plan.warnings.is_empty() {
        out.push_str("\n**Warnings**\n\n");
        for w in &plan.warnings {
            let _ = writeln!(out, "- {}", cell(w));
        }
    }
    if plan.destroys_data() {
        out.push_str("\n> [!WARNING]\n> This plan destroys data.\n");
    }
    if let Some(diff) = config_diff(plan) {
        out.push_str(
            "\n<details><summary>server.conf diff (JWTs shortened)</summary>\n\n```diff\n",
        );
        out.push_str(&diff.replace("```", "``\u{200b}`"));
        if !diff.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("```\n\n</details>\n");
    }
    out
}
