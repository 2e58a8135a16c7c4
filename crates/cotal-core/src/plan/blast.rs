//! Blast radius: who a step touches and what it destroys, evicts or invalidates, and the one
//! sentence each renderer prints for it.

use crate::model::{SpaceName, human_bytes, human_count};
use crate::observed::StreamUsage;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Blast {
    /// Tenants this step acts on.
    pub touched: Vec<SpaceName>,
    /// Streams deleted, with their figures.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub streams_destroyed: Vec<StreamUsage>,
    /// Messages deleted; `None` when unknown (broker stopped).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub messages_destroyed: Option<u64>,
    #[serde(skip_serializing_if = "is_zero", default)]
    pub bytes_destroyed: u64,
    /// Live connections closed; `None` when unknown or not applicable.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub connections_dropped: Option<u64>,
    /// Spaces whose user credentials stop working.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub credentials_invalidated: Vec<SpaceName>,
    /// The data destroyed could not be counted (live figures unavailable): it is all of what
    /// the space stores.
    #[serde(skip_serializing_if = "is_false", default)]
    pub data_uncounted: bool,
    /// Data is explicitly kept (suspension).
    #[serde(skip_serializing_if = "is_false", default)]
    pub data_kept: bool,
    /// The streams of `streams_destroyed` are emptied, not deleted: their configs, the
    /// account and its credentials stay (a purge).
    #[serde(skip_serializing_if = "is_false", default)]
    pub emptied: bool,
    /// The data of `streams_destroyed` is taken out of service, not deleted: the broker
    /// starts on a store without it (a moved store), and it stays unserved where it is.
    #[serde(skip_serializing_if = "is_false", default)]
    pub out_of_service: bool,
    /// What an archive keeps on disk, no longer served.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kept_on_disk: Option<KeptOnDisk>,
    /// What happens to the other tenants.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub siblings: Option<String>,
}

/// The data an archived space keeps on disk: its streams, messages and bytes when the live
/// figures counted them (`None`: not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptOnDisk {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub streams: Option<u64>,
    pub messages: Option<u64>,
    pub bytes: Option<u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
fn is_false(b: &bool) -> bool {
    !*b
}

impl Blast {
    /// `destroys 3 streams, 12,408 messages, 4.2 MiB; evicts 7 connections; ...`
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.out_of_service {
            let n = self.streams_destroyed.len();
            parts.push(if self.data_uncounted {
                "takes every stream, message and byte of every space out of service (not counted: figures unavailable while the broker is stopped)".into()
            } else {
                format!(
                    "takes {n} stream{}, {}, {} out of service",
                    if n == 1 { "" } else { "s" },
                    self.messages_destroyed.map_or("messages uncounted".into(), |m| format!(
                        "{} message{}",
                        human_count(m),
                        if m == 1 { "" } else { "s" }
                    )),
                    human_bytes(self.bytes_destroyed)
                )
            });
        } else if self.data_uncounted && self.emptied {
            parts.push("empties every stream and bucket of the space (not counted: figures unavailable); their configs, the account and its credentials are kept".into());
        } else if self.data_uncounted {
            parts.push(
                "destroys every stream, message and byte the space stores (not counted: figures unavailable)"
                    .into(),
            );
        } else if !self.streams_destroyed.is_empty() || self.bytes_destroyed > 0 {
            let n = self.streams_destroyed.len();
            let verb = if self.emptied { "empties" } else { "destroys" };
            let mut d = format!("{verb} {n} stream{}", if n == 1 { "" } else { "s" });
            match self.messages_destroyed {
                Some(m) => d.push_str(&format!(
                    ", {} message{}",
                    human_count(m),
                    if m == 1 { "" } else { "s" }
                )),
                None => d.push_str(", messages uncounted (figures unavailable)"),
            }
            d.push_str(&format!(", {}", human_bytes(self.bytes_destroyed)));
            if self.emptied {
                d.push_str(" (their configs, the account and its credentials are kept)");
            }
            parts.push(d);
        } else if self.emptied {
            parts.push("empties the space's streams and buckets (they hold nothing now); their configs, the account and its credentials are kept".into());
        }
        match self.connections_dropped {
            Some(0) => parts.push("no live connections".into()),
            Some(c) => parts.push(format!(
                "evicts {c} live connection{}",
                if c == 1 { "" } else { "s" }
            )),
            None => {}
        }
        if !self.credentials_invalidated.is_empty() {
            parts.push("invalidates every credential of the space".into());
        }
        if self.data_kept {
            parts.push("data kept".into());
        }
        if let Some(k) = self.kept_on_disk {
            parts.push(match (k.messages, k.bytes) {
                (Some(m), Some(b)) => format!(
                    "data kept on disk ({} message{}, {})",
                    human_count(m),
                    if m == 1 { "" } else { "s" },
                    human_bytes(b)
                ),
                (None, Some(b)) => format!("data kept on disk ({})", human_bytes(b)),
                _ => "data kept on disk (not counted: figures unavailable)".into(),
            });
        }
        if let Some(s) = &self.siblings {
            parts.push(s.clone());
        }
        parts.join("; ")
    }
}

impl Blast {
    /// [`Blast::describe`], or what an empty blast radius means (for a table cell that must
    /// never be blank): the step touches only its own space.
    pub fn describe_or_contained(&self) -> String {
        let d = self.describe();
        if d.is_empty() {
            "nothing destroyed, no connection closed; no other space touched".into()
        } else {
            d
        }
    }
}

/// Blast of emptying a space's streams (a purge): every message goes, every connection,
/// credential and stream config stays.
pub fn purge(space: &SpaceName, streams: &[StreamUsage]) -> Blast {
    Blast {
        touched: vec![space.clone()],
        streams_destroyed: streams.to_vec(),
        messages_destroyed: streams.iter().map(|s| s.messages).sum(),
        bytes_destroyed: streams.iter().map(|s| s.bytes).sum(),
        emptied: true,
        siblings: Some("no other space's streams are touched".into()),
        ..Blast::default()
    }
}

/// Blast of deleting a space's streams.
pub fn removal(space: &SpaceName, streams: &[StreamUsage], connections: Option<u64>) -> Blast {
    Blast {
        touched: vec![space.clone()],
        streams_destroyed: streams.to_vec(),
        messages_destroyed: streams.iter().map(|s| s.messages).sum(),
        bytes_destroyed: streams.iter().map(|s| s.bytes).sum(),
        connections_dropped: connections,
        credentials_invalidated: vec![space.clone()],
        data_uncounted: false,
        data_kept: false,
        emptied: false,
        kept_on_disk: None,
        out_of_service: false,
        siblings: Some("no other space's streams are touched".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_destruction_and_eviction_in_one_sentence() {
        let space = SpaceName::parse("release").unwrap();
        let streams = vec![
            StreamUsage {
                name: "CHAT_release".into(),
                messages: Some(12_000),
                bytes: 4_000_000,
            },
            StreamUsage {
                name: "DM_release".into(),
                messages: Some(400),
                bytes: 400_000,
            },
            StreamUsage {
                name: "TASK_release".into(),
                messages: Some(8),
                bytes: 4_019,
            },
        ];
        let b = removal(&space, &streams, Some(7));
        assert_eq!(
            b.describe(),
            "destroys 3 streams, 12,408 messages, 4.2 MiB; evicts 7 live connections; invalidates every credential of the space; no other space's streams are touched"
        );
        let offline = removal(
            &space,
            &[StreamUsage {
                name: "CHAT_release".into(),
                messages: None,
                bytes: 2048,
            }],
            None,
        );
        assert!(
            offline
                .describe()
                .starts_with("destroys 1 stream, messages uncounted (figures unavailable), 2 KiB")
        );
    }
}
