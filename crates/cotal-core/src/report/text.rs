//! The text plan: `+`/`-`/`~` per space, the ordered steps, warnings, the summary line, the
//! blast radius and a unified diff of `server.conf`: whole with `--diff`, else its first
//! [`DIFF_LINES_SHOWN`] lines and a count of the rest (the plan comes first; at 300 spaces the
//! whole diff is hundreds of lines).

use super::{config_diff, summary_line};
use crate::plan::{Action, Plan, Step};
use console::Style;
use std::fmt::Write as _;

/// Colours, or none.
#[derive(Debug, Clone)]
pub struct Palette {
    pub add: Style,
    pub change: Style,
    pub remove: Style,
    pub dim: Style,
    pub bold: Style,
    pub warn: Style,
}

impl Palette {
    pub fn new(colour: bool) -> Self {
        let s = |style: Style| style.force_styling(colour);
        Palette {
            add: s(Style::new().green()),
            change: s(Style::new().yellow()),
            remove: s(Style::new().red()),
            dim: s(Style::new().dim()),
            bold: s(Style::new().bold()),
            warn: s(Style::new().yellow().bold()),
        }
    }
}

/// How many lines of the `server.conf` diff a text plan shows without `--diff`.
pub const DIFF_LINES_SHOWN: usize = 40;

/// What a text plan shows beyond the plan itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextOptions {
    /// Every line of the config diff (`--diff`), not the first [`DIFF_LINES_SHOWN`].
    pub whole_diff: bool,
    /// Say that a plan destroying data needs `yes` or `--allow-destroy` (not when the operator
    /// already gave it, or applies a saved plan).
    pub destroy_hint: bool,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            whole_diff: false,
            destroy_hint: true,
        }
    }
}

impl TextOptions {
    /// The defaults, with the whole config diff when `whole_diff` (`--diff`).
    pub fn diff(whole_diff: bool) -> Self {
        TextOptions {
            whole_diff,
            ..Default::default()
        }
    }
}

/// The text plan, its config diff folded to [`DIFF_LINES_SHOWN`] lines.
pub fn text(plan: &Plan, p: &Palette) -> String {
    text_with(plan, p, TextOptions::default())
}

/// The text plan, as `options` say.
pub fn text_with(plan: &Plan, p: &Palette, options: TextOptions) -> String {
    let whole_diff = options.whole_diff;
    let mut out = String::new();
    if let Some(notice) = &plan.notice {
        let _ = writeln!(out, "{} {notice}\n", p.warn.apply_to("warning:"));
    }
    if let Some(target) = &plan.target {
        let _ = writeln!(out, "{}", target.line());
    }
    if plan.is_empty() {
        out.push_str("No changes. The broker matches cotal.toml.\n");
        for w in &plan.warnings {
            let _ = writeln!(out, "{} {w}", p.warn.apply_to("warning:"));
        }
        return out;
    }
    let _ = writeln!(
        out,
        "cotal will perform the following actions (generation {}, broker {}):\n",
        plan.pins.generation,
        if plan.broker_running {
            "running"
        } else {
            "stopped"
        }
    );
    changes_section(&mut out, plan, p);
    steps_section(&mut out, plan, p);
    if !plan.warnings.is_empty() {
        out.push('\n');
        for w in &plan.warnings {
            let _ = writeln!(out, "{} {w}", p.warn.apply_to("warning:"));
        }
    }
    out.push('\n');
    let _ = writeln!(out, "{}", p.bold.apply_to(summary_line(plan)));
    let system = plan
        .steps
        .iter()
        .any(|s| matches!(s, Step::ReissueSystemAccount { .. }));
    let drift_only = plan.steps.iter().all(|s| match s {
        Step::PromoteConfig { reasons, .. } => reasons.iter().all(|r| {
            matches!(
                r,
                crate::plan::Reason::ConfigDrift
                    | crate::plan::Reason::NodesBehind { .. }
                    | crate::plan::Reason::GenerationBehind
                    | crate::plan::Reason::BootConfigDrift
                    | crate::plan::Reason::BootGenerationDrift
            )
        }),
        _ => true,
    });
    if plan.changes.is_empty() {
        let _ = writeln!(
            out,
            "{}",
            if system {
                "No space changes: the system account is re-issued."
            } else if drift_only {
                "No space changes: the config is promoted again to repair drift."
            } else {
                "No space changes: the config is promoted with the settings above."
            }
        );
    }
    if plan.moves_data_out_of_service() {
        let _ = writeln!(
            out,
            "{}",
            p.remove.apply_to(
                "This plan moves the broker's store away from every space's data: the spaces come back empty, their data left unserved where it is."
            )
        );
    }
    if plan.destroys_data() && options.destroy_hint {
        let _ = writeln!(
            out,
            "{}",
            p.remove.apply_to(
                "This plan destroys data: it needs an interactive `yes` or --allow-destroy."
            )
        );
    }
    if let Some(diff) = config_diff(plan) {
        out.push('\n');
        let _ = writeln!(out, "{}", p.bold.apply_to("server.conf (JWTs shortened):"));
        let total = diff.lines().count();
        let shown = if whole_diff {
            total
        } else {
            DIFF_LINES_SHOWN.min(total)
        };
        for line in diff.lines().take(shown) {
            let styled = if line.starts_with("+++") || line.starts_with("---") {
                p.bold.apply_to(line).to_string()
            } else if line.starts_with('+') {
                p.add.apply_to(line).to_string()
            } else if line.starts_with('-') {
                p.remove.apply_to(line).to_string()
            } else if line.starts_with("@@") {
                p.dim.apply_to(line).to_string()
            } else {
                line.to_string()
            };
            let _ = writeln!(out, "{styled}");
        }
        if shown < total {
            let _ = writeln!(
                out,
                "{}",
                p.dim.apply_to(format!(
                    "... {} more lines of the server.conf diff (`--diff` shows it whole; the markdown plan holds it too)",
                    total - shown
                ))
            );
        }
    }
    out
}

/// Each space change: its symbol, name and account, its details and its blast radius.
fn changes_section(out: &mut String, plan: &Plan, p: &Palette) {
    for c in &plan.changes {
        let style = match c.action {
            Action::Add => &p.add,
            Action::Change => &p.change,
            Action::Remove => &p.remove,
        };
        let verb = match c.action {
            Action::Add => "add",
            Action::Change => "change",
            Action::Remove => "remove",
        };
        let account = c
            .account
            .as_deref()
            .map(|a| format!(" (account {})", &a[..a.len().min(12)]))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} {} {verb}{}",
            style.apply_to(c.action.symbol()),
            style.apply_to(c.space.quoted()).bold(),
            p.dim.apply_to(account)
        );
        for d in &c.details {
            let _ = writeln!(out, "      {d}");
        }
        let blast = c.blast.describe();
        if !blast.is_empty() {
            let _ = writeln!(out, "      {} {blast}", p.bold.apply_to("blast radius:"));
        }
    }
    if !plan.changes.is_empty() {
        out.push('\n');
    }
}

/// The numbered steps, each with what it re-issues, why and its blast radius.
fn steps_section(out: &mut String, plan: &Plan, p: &Palette) {
    let _ = writeln!(out, "{}", p.bold.apply_to("Steps:"));
    for (i, step) in plan.steps.iter().enumerate() {
        let _ = writeln!(out, "  {}. {}", i + 1, step.title());
        if let Step::ReissueSystemAccount { changes, .. } = step {
            for c in changes {
                let _ = writeln!(out, "     {} {c}", p.change.apply_to("~"));
            }
        }
        if let Step::Fence { blast, .. } | Step::RecordArchive { blast, .. } = step
            && !blast.describe().is_empty()
        {
            let _ = writeln!(
                out,
                "     {}",
                p.dim
                    .apply_to(format!("blast radius: {}", blast.describe()))
            );
        }
        if let Step::PromoteConfig { reasons, blast, .. } = step {
            let _ = writeln!(
                out,
                "     {}",
                p.dim.apply_to(format!(
                    "because: {}",
                    reasons
                        .iter()
                        .map(|r| r.to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                ))
            );
            let _ = writeln!(
                out,
                "     {}",
                p.dim
                    .apply_to(format!("blast radius: {}", blast.describe()))
            );
        }
    }
}
