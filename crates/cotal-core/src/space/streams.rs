//! The one table of what a space holds in JetStream (docs/design/architecture.md, "Provisioning and teardown"): its five streams,
//! its artifact object store and nine KV buckets (the original Cotal's fifteen, `backup-config.ts`),
//! their configs, and which are backed up. Pure.
//!
//! Invariant: every stream and bucket name is built from the space's token, so it only contains
//! `[A-Za-z0-9_-]`; a space's set never overlaps another space's set with a different token.
//!
//! The artifact store's cap is the original's 4 GiB (`ARTIFACT_STORE_MAX_BYTES`) in a space
//! without a storage quota. nats-server reserves every stream's `max_bytes` up front, within the
//! account's quota and within the broker's store, so in a space with a quota the cap is half of
//! what the quota leaves after the other reservations ([`artifact_cap`]): the quota bounds the
//! store either way, a space of the starter's 32 MiB can still be provisioned, and the other half
//! stays free for the streams the tenant creates. On a cluster every reservation counts once
//! per replica against the quota, so the shapes are made of [`per_replica`]'s share of it.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How a stream retains messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Retention {
    Limits,
    WorkQueue,
}

/// The config fields cotal sets and checks for drift.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    /// Rollup headers allowed: an object store replaces an object's metadata with a rollup, so
    /// one without them rejects every put.
    #[serde(default)]
    pub allow_rollup: bool,
    /// Where the stream republishes what it stores (source, destination): the chat and DM
    /// streams' live copy the members' accounts import ([`crate::space::side_accounts::republish`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub republish: Option<(String, String)>,
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
                // And with rollups allowed (a purge of a key is one).
                allow_rollup: true,
                republish: None,
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

/// (bucket kind, history, ttl seconds, max bytes, backed up). The two artifact index buckets
/// are created as the original's clients create them (history 1, no ttl: a possession row
/// must outlive the lifecycle that wrote it, `artifact-index.ts`) and are not backed up.
const BUCKETS: [(&str, i64, u64, i64, bool); 9] = [
    ("presence", 1, 6, -1, false),
    ("channels", 1, 0, -1, true),
    ("members", 1, 0, -1, true),
    ("acl", 1, 0, -1, true),
    ("membership", 1, 0, 1 << 20, false),
    ("delivery", 1, 30, -1, false),
    ("manager", 1, 10, -1, false),
    ("artpossess", 1, 0, -1, false),
    ("artattach", 1, 0, -1, false),
];

/// The artifact object store's cap in a space without a storage quota: the original's
/// `ARTIFACT_STORE_MAX_BYTES`.
pub const ARTIFACT_STORE_CAP: u64 = 4 << 30;

/// The object store bucket of a space's artifacts (its stream is `OBJ_<bucket>`).
pub fn artifact_bucket(t: &str) -> String {
    format!("cotal_artifacts_{t}")
}

/// The artifact store's stream (`OBJ_<bucket>`, as the object store layer names it).
pub fn artifact_stream(t: &str) -> String {
    format!("OBJ_{}", artifact_bucket(t))
}

/// The artifact store's cap in a space whose storage quota is `quota` (`None`: unlimited):
/// [`ARTIFACT_STORE_CAP`], or half of what the quota leaves after the fixed reservations,
/// whichever is smaller (at least one byte; a quota below [`min_quota`] is refused by the
/// parser).
///
/// Invariant: a space's reservations stay below its quota by at least half of what is left.
/// JetStream reserves every `max_bytes` up front and counts a stream without one as one byte,
/// so a store capped at the whole remainder would refuse every stream created after it: the
/// space's own buckets as much as the tenant's streams.
pub fn artifact_cap(quota: Option<u64>) -> u64 {
    match quota {
        None => ARTIFACT_STORE_CAP,
        Some(q) => ARTIFACT_STORE_CAP.min((q.saturating_sub(fixed_reservation()) / 2).max(1)),
    }
}

/// The part of an account's storage quota one replica of its streams may reserve (`None`:
/// unlimited): nats-server counts a stream's `max_bytes` once per replica against an account's
/// (untiered) quota (`accountReservation` in its `jetstream.go`), so on a cluster of
/// `replicas = 3` a space's reservations, its artifact store's cap among them, are made of a
/// third of its quota. Every shape that depends on the quota ([`expected`], [`artifact_cap`])
/// is given this, never the quota itself.
pub fn per_replica(quota: Option<u64>, replicas: u8) -> Option<u64> {
    quota.map(|q| q / u64::from(replicas.max(1)))
}

/// The channel registry bucket kind (its keys: [`crate::space::channels`]).
pub const REGISTRY: &str = "channels";

/// The names of the streams and buckets a space with wire token `t` must hold (see
/// [`expected`]) that are not among `present`, in [`expected`]'s order.
pub fn missing<'a>(t: &str, present: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let present: std::collections::BTreeSet<&str> = present.into_iter().collect();
    expected(t, None)
        .iter()
        .map(Expected::stream_name)
        .filter(|name| !present.contains(name.as_str()))
        .collect()
}

/// Everything a space with wire token `t` and storage quota `quota` (`None`: unlimited) must
/// hold, streams first. Only the artifact store's cap depends on the quota.
pub fn expected(t: &str, quota: Option<u64>) -> Vec<Expected> {
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
                    allow_rollup: false,
                    republish: crate::space::side_accounts::LIVE_SEGMENTS
                        .contains(segment)
                        .then(|| crate::space::side_accounts::republish(t, segment)),
                },
                backed_up: true,
            },
        );
    // As the original's object store layer creates it: chunks and metadata, rollups for the
    // metadata, direct gets, discard new (a full store refuses a put, never evicts an artifact).
    let bucket = artifact_bucket(t);
    let artifacts = Expected::Stream {
        name: artifact_stream(t),
        shape: Shape {
            subjects: vec![format!("$O.{bucket}.C.>"), format!("$O.{bucket}.M.>")],
            retention: Retention::Limits,
            max_msgs_per_subject: -1,
            discard_new: true,
            allow_direct: true,
            max_age: Duration::ZERO,
            max_bytes: artifact_cap(quota) as i64,
            in_memory: false,
            sealed: false,
            deny_delete: false,
            deny_purge: false,
            allow_rollup: true,
            republish: None,
        },
        backed_up: false,
    };
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
    streams
        .chain(std::iter::once(artifacts))
        .chain(buckets)
        .collect()
}

/// How many streams and buckets a space holds.
pub fn count() -> usize {
    STREAMS.len() + 1 + BUCKETS.len()
}

/// Bytes JetStream reserves up front for a space's streams other than the artifact store
/// (whose cap follows the quota): every stream with a `max_bytes` reserves it at creation.
pub fn fixed_reservation() -> u64 {
    BUCKETS
        .iter()
        .map(|b| b.3)
        .filter(|b| *b > 0)
        .map(|b| b as u64)
        .sum()
}

/// The smallest storage quota a space can be provisioned under: the fixed reservations and
/// a MiB of artifact store.
pub fn min_quota() -> u64 {
    fixed_reservation() + (1 << 20)
}

/// Bytes JetStream reserves up front for a space with storage quota `quota`: every stream
/// with a `max_bytes` reserves it at creation. A space without a quota commits this much of
/// the broker's store (and may use what is left).
pub fn reserved_storage(quota: Option<u64>) -> u64 {
    expected("t", quota)
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
    if expected.allow_rollup && !actual.allow_rollup {
        out.push("allow_rollup_hdrs");
    }
    if expected.republish != actual.republish {
        out.push("republish");
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
    fn a_space_holds_the_originals_fifteen_streams_and_buckets() {
        let all = expected("design", None);
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
        assert_eq!(all.len(), 15);
        assert_eq!(count(), 15);
        let obj = all
            .iter()
            .find(|e| e.stream_name() == "OBJ_cotal_artifacts_design")
            .expect("the artifact store");
        assert!(!obj.backed_up());
        let shape = obj.shape();
        assert_eq!(
            shape.subjects,
            [
                "$O.cotal_artifacts_design.C.>",
                "$O.cotal_artifacts_design.M.>"
            ]
        );
        assert_eq!(
            (shape.max_bytes, shape.discard_new, shape.allow_rollup),
            (4 << 30, true, true)
        );
        for index in ["KV_cotal_artpossess_design", "KV_cotal_artattach_design"] {
            let e = all.iter().find(|e| e.stream_name() == index).expect(index);
            assert!(!e.backed_up());
            assert_eq!(e.shape().max_age, Duration::ZERO, "{index}: no ttl");
        }
    }

    #[test]
    fn the_artifact_cap_is_half_the_quota_left_after_the_fixed_reservations() {
        assert_eq!(artifact_cap(None), 4 << 30);
        assert_eq!(artifact_cap(Some(32 << 20)), ((32 << 20) - (1 << 20)) / 2);
        assert_eq!(artifact_cap(Some(1 << 40)), 4 << 30);
        // The reservations of a space with a quota leave room for the streams created after
        // the artifact store (each at least one byte) and for the tenant's own.
        for quota in [min_quota(), 32 << 20, 5 << 30, 1 << 40] {
            let left = quota - reserved_storage(Some(quota));
            assert!(left >= (quota - fixed_reservation()) / 2, "{quota}");
        }
        assert_eq!(reserved_storage(None), (4 << 30) + (1 << 20));
        // At replicas = 3 each reservation counts three times: the reservations made of a
        // third of the quota fit it three times over, the starter's 32 MiB among them.
        for quota in [3 * min_quota(), 32 << 20, 5 << 30] {
            let share = per_replica(Some(quota), 3);
            assert!(3 * reserved_storage(share) < quota, "{quota}");
        }
        assert_eq!(per_replica(None, 3), None);
        assert_eq!(per_replica(Some(32 << 20), 1), Some(32 << 20));
    }

    #[test]
    fn a_store_without_rollups_has_drifted() {
        let want = expected("a", None)
            .into_iter()
            .find(|e| e.stream_name().starts_with("OBJ_"))
            .unwrap()
            .shape();
        let mut got = want.clone();
        got.allow_rollup = false;
        assert_eq!(drift(&want, &got), ["allow_rollup_hdrs"]);
    }

    #[test]
    fn drift_names_each_differing_field() {
        let want = expected("a", None)[0].shape();
        let mut got = want.clone();
        assert!(drift(&want, &got).is_empty());
        got.max_msgs_per_subject = 10;
        got.allow_direct = false;
        assert_eq!(drift(&want, &got), ["max_msgs_per_subject", "allow_direct"]);
    }
}
