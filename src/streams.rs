//! The one table of what a space holds in JetStream (docs/design/architecture.md, "Provisioning and teardown"): its five streams and
//! seven KV buckets, their configs, and which are backed up. Pure.
//!
//! Invariant: every stream and bucket name is built from the space's token, so it only contains
//! `[A-Za-z0-9_-]`; a space's set never overlaps another space's set with a different token.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How a stream retains messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Retention {
    Limits,
    WorkQueue,
}

/// The config fields cotal sets and checks for drift.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    pub subjects: Vec<String>,
    pub retention: Retention,
    /// -1: unlimited.
    pub max_msgs_per_subject: i64,
    pub discard_new: bool,
    pub allow_direct: bool,
    pub max_age: Duration,
    /// -1: unlimited.
    pub max_bytes: i64,
    /// File storage; a stream someone recreated in memory has drifted.
    pub in_memory: bool,
    /// Locks a tenant's admin can set on its own stream, which nats-server never lets anyone
    /// take off in place (`can not unseal a sealed stream`, 10052): cotal provisions none.
    #[serde(default)]
    pub sealed: bool,
    #[serde(default)]
    pub deny_delete: bool,
    #[serde(default)]
    pub deny_purge: bool,
}

/// A stream or bucket a space must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    Stream {
        name: String,
        shape: Shape,
        backed_up: bool,
    },
    Bucket {
        bucket: String,
        history: i64,
        ttl: Duration,
        max_bytes: i64,
        backed_up: bool,
    },
}

impl Expected {
    /// The JetStream stream name (`KV_<bucket>` for a bucket).
    pub fn stream_name(&self) -> String {
        match self {
            Expected::Stream { name, .. } => name.clone(),
            Expected::Bucket { bucket, .. } => format!("KV_{bucket}"),
        }
    }

    pub fn backed_up(&self) -> bool {
        match self {
            Expected::Stream { backed_up, .. } | Expected::Bucket { backed_up, .. } => *backed_up,
        }
    }

    /// The shape the stream must have (a bucket's as the KV layer creates it).
    pub fn shape(&self) -> Shape {
        match self {
            Expected::Stream { shape, .. } => shape.clone(),
            Expected::Bucket {
                bucket,
                history,
                ttl,
                max_bytes,
                ..
            } => Shape {
                subjects: vec![format!("$KV.{bucket}.>")],
                retention: Retention::Limits,
                max_msgs_per_subject: *history,
                discard_new: true,
                allow_direct: true,
                max_age: *ttl,
                max_bytes: *max_bytes,
                in_memory: false,
                sealed: false,
                // The KV layer creates every bucket's stream with deny_delete.
                deny_delete: true,
                deny_purge: false,
            },
        }
    }
}

/// (stream prefix, subject segment, retention, max messages per subject)
const STREAMS: [(&str, &str, Retention, i64); 5] = [
    ("CHAT", "chat", Retention::Limits, 1000),
    ("DM", "inst", Retention::Limits, -1),
    ("TASK", "svc", Retention::WorkQueue, -1),
    ("INBOX", "dinbox", Retention::Limits, -1),
    ("DLV", "dlv", Retention::Limits, -1),
];

/// (bucket kind, history, ttl seconds, max bytes, backed up)
const BUCKETS: [(&str, i64, u64, i64, bool); 7] = [
    ("presence", 1, 6, -1, false),
    ("channels", 1, 0, -1, true),
    ("members", 1, 0, -1, true),
    ("acl", 1, 0, -1, true),
    ("membership", 1, 0, 1 << 20, false),
    ("delivery", 1, 30, -1, false),
    ("manager", 1, 10, -1, false),
];

/// The channel registry bucket kind (its keys: [`crate::channels`]).
pub const REGISTRY: &str = "channels";

/// Everything a space with wire token `t` must hold, streams first.
pub fn expected(t: &str) -> Vec<Expected> {
    let streams =
        STREAMS.iter().map(
            |(prefix, segment, retention, per_subject)| Expected::Stream {
                name: format!("{prefix}_{t}"),
                shape: Shape {
                    subjects: vec![format!("cotal.{t}.{segment}.>")],
                    retention: *retention,
                    max_msgs_per_subject: *per_subject,
                    discard_new: false,
                    allow_direct: *prefix == "CHAT",
                    max_age: Duration::ZERO,
                    max_bytes: -1,
                    in_memory: false,
                    sealed: false,
                    deny_delete: false,
                    deny_purge: false,
                },
                backed_up: true,
            },
        );
    let buckets =
        BUCKETS.iter().map(
            |(kind, history, ttl, max_bytes, backed_up)| Expected::Bucket {
                bucket: format!("cotal_{kind}_{t}"),
                history: *history,
                ttl: Duration::from_secs(*ttl),
                max_bytes: *max_bytes,
                backed_up: *backed_up,
            },
        );
    streams.chain(buckets).collect()
}

/// Bytes JetStream reserves up front for a space's provisioned streams: every stream with a
/// `max_bytes` reserves it at creation. A `max_storage` below this can never provision.
pub fn reserved_storage() -> u64 {
    expected("t")
        .iter()
        .map(|e| e.shape().max_bytes)
        .filter(|b| *b > 0)
        .map(|b| b as u64)
        .sum()
}

/// The smallest `max_payload` provisioning works under: the JetStream API requests the
/// provisioner sends (stream and bucket configs, about 0.5-1 KiB of JSON each) are published
/// under the space's own payload limit.
pub const MIN_PAYLOAD: u64 = 4 << 10;

/// The registry bucket of a space.
pub fn registry_bucket(t: &str) -> String {
    format!("cotal_{REGISTRY}_{t}")
}

/// The JetStream stream that holds a space's registry bucket.
pub fn registry_stream(t: &str) -> String {
    format!("KV_{}", registry_bucket(t))
}

/// Fields of `actual` that differ from `expected`, by name.
pub fn drift(expected: &Shape, actual: &Shape) -> Vec<&'static str> {
    let mut out = Vec::new();
    if expected.subjects != actual.subjects {
        out.push("subjects");
    }
    if expected.retention != actual.retention {
        out.push("retention");
    }
    if expected.max_msgs_per_subject != actual.max_msgs_per_subject {
        out.push("max_msgs_per_subject");
    }
    if expected.discard_new != actual.discard_new {
        out.push("discard");
    }
    if expected.allow_direct != actual.allow_direct {
        out.push("allow_direct");
    }
    if expected.max_age != actual.max_age {
        out.push("max_age");
    }
    if expected.max_bytes != actual.max_bytes {
        out.push("max_bytes");
    }
    if expected.in_memory != actual.in_memory {
        out.push("storage");
    }
    // A lock counts only where someone set one cotal does not: a bucket recreated without
    // the KV layer's `deny_delete` is still a working bucket.
    for (field, want, have) in [
        ("sealed", expected.sealed, actual.sealed),
        ("deny_delete", expected.deny_delete, actual.deny_delete),
        ("deny_purge", expected.deny_purge, actual.deny_purge),
    ] {
        if have && !want {
            out.push(field);
        }
    }
    out
}

/// Whether a drifted field can be put right by updating the stream in place. nats-server
/// refuses to change a stream's storage type or retention policy, to unseal it, or to lift
/// `deny_delete` or `deny_purge`: such a stream must be deleted (with its messages) and
/// created again, which cotal does not do on its own. An update would fail every apply.
pub fn updatable(field: &str) -> bool {
    !LOCKED.contains(&field) && !matches!(field, "storage" | "retention")
}

/// The drifted fields that are a lock a user of the space set (not a recreation).
pub const LOCKED: [&str; 3] = ["sealed", "deny_delete", "deny_purge"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_space_holds_five_streams_and_seven_buckets() {
        let all = expected("design");
        assert_eq!(all.len(), crate::desired::PROVISIONED_STREAMS as usize);
        let names: Vec<String> = all.iter().map(|e| e.stream_name()).collect();
        assert_eq!(
            &names[..5],
            [
                "CHAT_design",
                "DM_design",
                "TASK_design",
                "INBOX_design",
                "DLV_design"
            ]
        );
        assert!(names.contains(&"KV_cotal_presence_design".to_string()));
        let chat = all[0].shape();
        assert_eq!(
            (
                chat.max_msgs_per_subject,
                chat.discard_new,
                chat.allow_direct
            ),
            (1000, false, true)
        );
        assert_eq!(all[2].shape().retention, Retention::WorkQueue);
        let backed: Vec<String> = all
            .iter()
            .filter(|e| e.backed_up())
            .map(|e| e.stream_name())
            .collect();
        assert_eq!(backed.len(), 8, "five streams and channels, members, acl");
    }

    #[test]
    fn drift_names_each_differing_field() {
        let want = expected("a")[0].shape();
        let mut got = want.clone();
        assert!(drift(&want, &got).is_empty());
        got.max_msgs_per_subject = 10;
        got.allow_direct = false;
        assert_eq!(drift(&want, &got), ["max_msgs_per_subject", "allow_direct"]);
    }
}
