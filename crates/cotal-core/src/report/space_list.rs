//! `cotal space list` as a value and its renderings: each space's row (its JSON is `cotal space
//! list --format json`, described by `schemas/space-list.schema.json`) and the text table. The
//! edge (`cotal::ops::space_list`) fills the rows from an observation.

use crate::model::{SpaceName, SpaceState};
use crate::space::lifecycle;
use serde::Serialize;

/// One space's line of the list (its JSON is `cotal space list --format json`).
#[derive(Serialize)]
pub struct Row {
    pub name: String,
    pub in_file: bool,
    pub desired_state: Option<SpaceState>,
    pub protect: Option<bool>,
    pub applied: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<lifecycle::LifecycleState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub servable: Option<bool>,
    /// Its account record exists but cannot be trusted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub record_corrupt: bool,
    /// Channels cotal.toml declares for the space.
    pub channels_declared: usize,
    /// Channels its registry holds (the defaults key not counted), when the broker was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub channels_in_registry: Option<usize>,
}

/// The list, and what made it incomplete.
pub struct SpaceList {
    /// Why `cotal.toml` could not be read, when it could not (only applied spaces are listed).
    pub desired_error: Option<String>,
    /// Records and nodes that cannot be trusted (`space list` exits 3 when there are any).
    pub problems: Vec<String>,
    /// By name.
    pub rows: Vec<Row>,
}

/// The versioned JSON document of the list, pretty, with a trailing newline.
pub fn json(rows: &[Row]) -> String {
    let mut s = serde_json::to_string_pretty(&serde_json::json!({
        "format_version": 1,
        "spaces": rows,
    }))
    .expect("rows serialize");
    s.push('\n');
    s
}

/// The text table: each column as wide as its widest cell.
pub fn table(rows: &[Row], file_broken: bool) -> String {
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                SpaceName::from_record(&r.name).expect("valid").quoted(),
                match (r.desired_state, file_broken) {
                    (Some(s), _) => s.to_string(),
                    (None, true) => "?".into(),
                    (None, false) => "(removed)".into(),
                },
                r.protect
                    .map(|p| p.to_string())
                    .unwrap_or_else(|| "-".into()),
                match (r.state, r.record_corrupt) {
                    (Some(s), _) => s.to_string(),
                    (None, true) => "(record corrupt)".into(),
                    (None, false) => "(not applied)".into(),
                },
                match r.servable {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                }
                .into(),
                match r.channels_in_registry {
                    Some(n) => format!("{} declared, {n} in the registry", r.channels_declared),
                    None => format!("{} declared", r.channels_declared),
                },
            ]
        })
        .collect();
    // Headers in capitals, as every table of cotal (status, creds list, audit) and kubectl's.
    let header = [
        "SPACE", "DESIRED", "PROTECT", "STATE", "SERVABLE", "CHANNELS",
    ]
    .map(String::from);
    let mut widths = [0usize; 6];
    for row in std::iter::once(&header).chain(&cells) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(console::measure_text_width(cell));
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&cells) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&console::pad_str(
                    cell,
                    widths[i],
                    console::Alignment::Left,
                    None,
                ));
                line.push_str("  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
