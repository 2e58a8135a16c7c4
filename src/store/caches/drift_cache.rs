//! `.cotal/maintenance/drift.json`: each account's stream-config verdict (which of its streams
//! drifted from the shapes cotal expects, and its artifact store's cap) as the last apply or
//! `up`'s state refresh found it on a single server, with what vouches for it. The next plan
//! still asks JSZ for every stream's state, but for the configs only of the accounts this file
//! does not vouch for: at 1,000 spaces the configs are 60% of JSZ's 12.6 MB reply, and most of
//! the time the broker takes to write it and cotal to read it.
//!
//! What vouches for a verdict: the same server process (its ID, fresh at every start) with the
//! same config loaded; the account's JetStream API counters and stream names unchanged, and no
//! counter (the account's, any other's, the server's over every account) lower than judged; and
//! the same expectation (the space's token and storage quota, and this build's stream table and
//! judgement). nats-server creates, updates and deletes a stream only through the account's
//! JetStream API, and counts every request it answers in the account's `api.total` (and
//! `api.errors`) once the change is made (`trackAPI`, called by `sendAPIResponse` after
//! `mset.update`); JSZ reads an account's counters before its streams. A restore is counted
//! when it starts, before its stream exists, and the system account's purge of an account
//! is counted on the system account: both change the stream names, which vouch too. So equal
//! counters and names mean no request changed a config since the verdict.
//!
//! What counts from zero again: a restart (another ID); an account's JetStream enabled again,
//! which a reload that changes the account's JWT does (cotal never pushes claims, and the state
//! after its apply asks every account it re-signed afresh; a config loaded by another hand has
//! another digest); a rolled-back apply's reload of the previous config, which enables a fenced
//! account again under the old digest (every apply removes this file before it changes
//! anything, [`void`]); and JetStream started again in place, after it ran out of space, by a
//! reload of the same config, which counts every account and the server from zero: a tenant
//! can bring its own counters back to the judged ones, not every account's and the server's.
//!
//! Invariants: a verdict is used only when every part of what vouches for it is equal and no
//! counter went back; only a single server's verdicts are kept (on a cluster a follower applies
//! an update after its leader has counted the request); the file is an optimisation, never a
//! source of truth: anything wrong with it counts as an empty cache, which costs one JSZ with
//! every config.

use crate::error::Result;
use crate::observed::drift_verdicts::DriftCache;
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

/// Remove the cache before an apply changes anything: an apply that fails after its reload
/// (a rollback to the previous config enables a fenced account's JetStream again, counting
/// from zero under the same digest) leaves none; the apply that finishes saves a fresh one.
/// Not synced: a removal a crash undoes comes back with the machine, and so with a broker
/// started again, under another ID.
pub fn void(root: &Root) -> Result<()> {
    match std::fs::remove_file(path(root)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(crate::error::Error::io(path(root), e))
        }
        _ => Ok(()),
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
    use crate::observed::drift_verdicts::{ApiCounters, Verdict, names_digest};

    fn judged() -> DriftCache {
        let mut cache = DriftCache::new("NSERVER", "sha256:loaded", ApiCounters::default());
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
