//! What an apply did, as one versioned JSON document (`apply --format json`, and the `cotal
//! space` and `cotal rotate` verbs, which apply the same way): the plan it executed, whether it
//! completed, the generation, each reload's confirmation time, each space whose own step
//! failed, what could not be reaped, and how long it took (`schemas/apply.schema.json`).
//!
//! Pure: built from values the apply returned; no secret is in any of them.

use crate::plan::Plan;
use serde::Serialize;
use std::time::Duration;

/// Bumped when the document's shape changes incompatibly.
pub const FORMAT_VERSION: u32 = 1;

/// How the apply ended (an apply that failed prints no document: standard error and the exit
/// code say why).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The plan had no step.
    NoChanges,
    /// Every step is done.
    Applied,
    /// Some spaces' own steps failed; every other step is done (exit 8).
    PartlyApplied,
}

/// One space whose own step failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failed {
    pub space: String,
    pub step: String,
    pub reason: String,
}

/// What the reap of one removed space removed (`store folder <path>`, `account record`,
/// `space folder`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reaped {
    pub space: String,
    pub removed: Vec<String>,
}

/// A space an apply emptied: how many streams, holding how many messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Purged {
    pub space: String,
    pub streams: usize,
    pub messages: u64,
}

/// The generation an apply moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Generation {
    pub from: u64,
    pub to: u64,
}

/// The document.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome<'p> {
    pub format_version: u32,
    pub status: Status,
    pub plan: &'p Plan,
    pub generation: Option<Generation>,
    /// Each reload's confirmation time in milliseconds (the slowest node's).
    pub reloads_ms: Vec<f64>,
    /// How many running nodes confirmed each reload (0: the broker was stopped).
    pub nodes: usize,
    pub failed: Vec<Failed>,
    /// What the reap of each removed space removed.
    pub reaped: Vec<Reaped>,
    /// The spaces emptied, with what their streams held.
    pub purged: Vec<Purged>,
    /// Local material of removed spaces that could not be reaped (the removals are done).
    pub reap_failures: Vec<String>,
    /// The whole apply: lock, observe, plan, execute.
    pub duration_ms: u64,
}

impl Outcome<'_> {
    /// The document as pretty JSON, with a trailing newline.
    pub fn json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("the outcome serializes");
        s.push('\n');
        s
    }
}

/// The one JSON document of an apply's outcome (`schemas/apply.schema.json`), the plan in it:
/// what the apply did (`applied`), each reload's confirmation time, how many nodes confirmed each,
/// and how long the whole apply took.
pub fn document(
    plan: &Plan,
    applied: &crate::outcomes::Outcome,
    reloads: &[Duration],
    nodes: usize,
    elapsed: Duration,
) -> String {
    Outcome {
        format_version: FORMAT_VERSION,
        status: if applied.failed.is_empty() {
            Status::Applied
        } else {
            Status::PartlyApplied
        },
        plan,
        generation: applied
            .generations()
            .map(|(from, to)| Generation { from, to }),
        reloads_ms: reloads.iter().map(|d| d.as_secs_f64() * 1000.0).collect(),
        nodes,
        failed: applied
            .failed
            .iter()
            .map(|f| Failed {
                space: f.space.to_string(),
                step: f.step.clone(),
                reason: f.reason.clone(),
            })
            .collect(),
        reaped: applied
            .reaped
            .iter()
            .map(|(space, removed)| Reaped {
                space: space.to_string(),
                removed: removed.clone(),
            })
            .collect(),
        purged: applied
            .purged
            .iter()
            .map(|p| Purged {
                space: p.space.to_string(),
                streams: p.streams,
                messages: p.messages,
            })
            .collect(),
        reap_failures: applied
            .reap_failures
            .iter()
            .map(|f| f.to_string())
            .collect(),
        duration_ms: elapsed.as_millis() as u64,
    }
    .json()
}
