//! `.cotal/maintenance/drift.json`: each account's stream-config verdict (which of its streams
//! drifted from the shapes cotal expects, and its artifact store's cap) as the last apply or
//! `up`'s state refresh found it on a single server, with what vouches for it. The next plan
//! still asks JSZ for every stream's state, but for the configs only of the accounts this file
//! does not vouch for: at 1,000 spaces the configs are 60% of JSZ's 12.6 MB reply, and most of
//! the time the broker takes to write it and cotal to read it.
//!
//! What vouches for a verdict: the same server process (its ID, fresh at every start) with the
//! same config loaded; the account's JetStream API counters and stream names unchanged; and the
//! same expectation (the space's token and storage quota, and this build's stream table).
//! nats-server creates, updates, deletes and restores a stream only through the account's
//! JetStream API, and counts every API request it answers in the account's `api.total` (and
//! `api.errors`) once the change is made (`trackAPI`, called by `sendAPIResponse` after
//! `mset.update`); JSZ reads an account's counters before its streams. So equal counters mean
//! no request changed a config since the verdict. What resets the counters: a restart (the
//! server ID) and an account's JetStream enabled again, which only a reload that changes the
//! account's JWT does. cotal never pushes claims; its apply asks the accounts it re-signed
//! afresh (`observe::observe_after_apply`), and a config another hand loaded voids the file.
//!
//! Invariants: a verdict is used only when every part of what vouches for it is equal; only a
//! single server's verdicts are kept (on a cluster a follower applies an update after its
//! leader has counted the request); the file is an optimisation, never a source of truth:
//! anything wrong with it counts as an empty cache, which costs one JSZ with every config.

use crate::drift_verdicts::DriftCache;
use crate::error::Result;
use crate::store::record::{self, Layout, Record};
use crate::store::{Root, atomic};

pub fn path(root: &Root) -> std::path::PathBuf {
    root.maintenance_dir().join("drift.json")
}

/// The cache; `None` when absent or unreadable.
pub fn load(root: &Root) -> Option<DriftCache> {
    match record::read(&path(root)) {
        Ok(Record::Valid(cache)) => Some(cache),
        _ => None,
    }
}

/// Replace the cache (0600, atomic).
pub fn save(root: &Root, cache: &DriftCache) -> Result<()> {
    atomic::ensure_dir(&root.maintenance_dir(), atomic::PRIVATE_DIR)?;
    record::write(&path(root), cache, Layout::Compact, atomic::SECRET)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift_verdicts::{ApiCounters, Verdict, names_digest};

    fn judged() -> DriftCache {
        let mut cache = DriftCache::new("NSERVER", "sha256:loaded");
        cache.accounts.insert(
            "AAA".into(),
            Verdict {
                api: ApiCounters {
                    total: 27,
                    errors: 1,
                },
                streams: names_digest(["CHAT_design"]),
                token: "design".into(),
                quota: None,
                drift: Vec::new(),
                artifact_max_bytes: None,
            },
        );
        cache
    }

    #[test]
    fn the_file_round_trips_and_anything_wrong_with_it_is_no_cache() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::at(dir.path()).unwrap();
        assert_eq!(load(&root), None, "absent");
        save(&root, &judged()).unwrap();
        assert_eq!(load(&root), Some(judged()));
        std::fs::write(path(&root), b"{not json").unwrap();
        assert_eq!(load(&root), None, "corrupt");
    }
}
