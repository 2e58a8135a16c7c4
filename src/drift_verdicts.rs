//! Verdicts on stream configs and what vouches for them (`store::drift_cache` keeps them in
//! `.cotal/maintenance/drift.json`): each account's streams that drifted from the shapes cotal
//! expects and its artifact store's cap, as judged on a single server's report, with the
//! server process, its loaded config, the account's JetStream API counters and stream names,
//! and what the expected shapes were made of. Why equal vouchers mean an unchanged verdict is
//! in `store::drift_cache`'s header and `docs/design/decisions.md`.
//!
//! Invariants: a verdict holds only when every part of what vouches for it is equal
//! ([`DriftCache::verdict`]); verdicts are carried only between reports of the same server
//! process judged by the same stream table ([`DriftCache::carry`]).

use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::collections::BTreeMap;

/// The verdicts a server's reports gave.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriftCache {
    /// The server process that reported (nats-server's ID, fresh at every start).
    pub server_id: String,
    /// The digest of the config it had loaded then (VARZ `config_digest`).
    pub loaded: String,
    /// The stream table of the cotal that judged ([`table`]).
    pub table: String,
    /// By account public key.
    pub accounts: BTreeMap<String, Verdict>,
}

/// One account's verdict and what it was judged on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    /// Its JetStream API counters in the report judged.
    pub api: ApiCounters,
    /// [`names_digest`] of the streams that report named.
    pub streams: String,
    /// The space's token and storage quota: what the expected shapes were made of.
    pub token: String,
    pub quota: Option<u64>,
    /// The streams whose config differs from the expected shape, with the fields.
    pub drift: Vec<(String, Vec<String>)>,
    /// The artifact store's `max_bytes` in that report.
    pub artifact_max_bytes: Option<i64>,
}

/// An account's JetStream API requests answered, and of them the errors (JSZ `api`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiCounters {
    pub total: u64,
    pub errors: u64,
}

/// What vouches for an account's cached verdict, as a report must match it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voucher {
    pub api: ApiCounters,
    pub streams: String,
}

impl DriftCache {
    /// An empty cache of what `server_id` reported with `loaded` in force, judged by this build.
    pub fn new(server_id: &str, loaded: &str) -> Self {
        DriftCache {
            server_id: server_id.to_string(),
            loaded: loaded.to_string(),
            table: table().to_string(),
            accounts: BTreeMap::new(),
        }
    }

    /// The verdict of `account` (of the space `token` with `quota`) when the report of
    /// `server_id` with `loaded` in force, `api` and stream names `streams` ([`names_digest`])
    /// vouch for it; `None`: ask the broker for its configs.
    pub fn verdict(
        &self,
        server_id: &str,
        loaded: &str,
        account: &str,
        token: &str,
        quota: Option<u64>,
        voucher: &Voucher,
    ) -> Option<&Verdict> {
        self.vouchers(server_id, loaded)?;
        self.accounts.get(account).filter(|v| {
            v.api == voucher.api
                && v.streams == voucher.streams
                && v.token == token
                && v.quota == quota
        })
    }

    /// Whether this cache may vouch for anything reported by `server_id` with `loaded` in force
    /// (the same process, the same config, the same stream table).
    pub fn vouchers(&self, server_id: &str, loaded: &str) -> Option<()> {
        (!server_id.is_empty()
            && self.server_id == server_id
            && self.loaded == loaded
            && self.table == table())
        .then_some(())
    }

    /// Copy into this cache the verdicts of `from` for the accounts `keep` names and this cache
    /// lacks, when both were reported by the same server process and judged by the same table
    /// (the state after an apply keeps the untouched accounts' verdicts from before it).
    pub fn carry(&mut self, from: &DriftCache, keep: impl Fn(&str) -> bool) {
        if from.server_id != self.server_id || from.table != self.table {
            return;
        }
        for (account, verdict) in &from.accounts {
            if keep(account) && !self.accounts.contains_key(account) {
                self.accounts.insert(account.clone(), verdict.clone());
            }
        }
    }
}

/// The digest of a report's stream names, in any order.
pub fn names_digest<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.into_iter().collect();
    names.sort_unstable();
    let mut hash = sha2::Sha256::new();
    for n in names {
        hash.update(n.as_bytes());
        hash.update([0]);
    }
    hex::encode(&hash.finalize()[..16])
}

/// This build's stream table: the digest of the shapes it expects of sample spaces (and of
/// its version), so a verdict judged by another table is judged again.
pub fn table() -> &'static str {
    static TABLE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut hash = sha2::Sha256::new();
        hash.update(env!("CARGO_PKG_VERSION").as_bytes());
        for quota in [None, Some(1), Some(32 << 20), Some(4 << 30)] {
            hash.update(format!("{:?}", crate::streams::expected("t", quota)).as_bytes());
        }
        hex::encode(&hash.finalize()[..16])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const API: ApiCounters = ApiCounters {
        total: 27,
        errors: 1,
    };

    fn voucher(api: ApiCounters, names: &[&str]) -> Voucher {
        Voucher {
            api,
            streams: names_digest(names.iter().copied()),
        }
    }

    fn judged() -> DriftCache {
        let mut cache = DriftCache::new("NSERVER", "sha256:loaded");
        for account in ["AAA", "BBB"] {
            cache.accounts.insert(
                account.into(),
                Verdict {
                    api: API,
                    streams: names_digest(["CHAT_design", "KV_x"]),
                    token: "design".into(),
                    quota: Some(1 << 20),
                    drift: vec![("CHAT_design".into(), vec!["max_age".into()])],
                    artifact_max_bytes: Some(1 << 19),
                },
            );
        }
        cache
    }

    #[test]
    fn a_verdict_is_used_only_when_everything_that_vouches_for_it_is_equal() {
        let cache = judged();
        let names = ["KV_x", "CHAT_design"];
        let got = cache
            .verdict(
                "NSERVER",
                "sha256:loaded",
                "AAA",
                "design",
                Some(1 << 20),
                &voucher(API, &names),
            )
            .expect("everything equal, the names in any order");
        assert_eq!(got.drift.len(), 1);
        let moved = |total, errors| ApiCounters { total, errors };
        /// One question put to the cache: all as judged but what a case changes.
        #[derive(Clone)]
        struct Ask {
            server: &'static str,
            loaded: &'static str,
            account: &'static str,
            token: &'static str,
            quota: Option<u64>,
            voucher: Voucher,
        }
        let same = Ask {
            server: "NSERVER",
            loaded: "sha256:loaded",
            account: "AAA",
            token: "design",
            quota: Some(1 << 20),
            voucher: voucher(API, &names),
        };
        let cases = [
            (
                "a restarted server",
                Ask {
                    server: "NOTHER",
                    ..same.clone()
                },
            ),
            (
                "a config loaded by hand",
                Ask {
                    loaded: "sha256:other",
                    ..same.clone()
                },
            ),
            (
                "an account never judged",
                Ask {
                    account: "CCC",
                    ..same.clone()
                },
            ),
            (
                "an API request answered since",
                Ask {
                    voucher: voucher(moved(28, 1), &names),
                    ..same.clone()
                },
            ),
            (
                "an API error since",
                Ask {
                    voucher: voucher(moved(27, 2), &names),
                    ..same.clone()
                },
            ),
            (
                "a stream gone",
                Ask {
                    voucher: voucher(API, &names[..1]),
                    ..same.clone()
                },
            ),
            (
                "another stream",
                Ask {
                    voucher: voucher(API, &["CHAT_design", "KV_y"]),
                    ..same.clone()
                },
            ),
            (
                "another quota expected",
                Ask {
                    quota: Some(2 << 20),
                    ..same.clone()
                },
            ),
            (
                "another space's shapes",
                Ask {
                    token: "release",
                    ..same.clone()
                },
            ),
        ];
        for (why, a) in cases {
            assert!(
                cache
                    .verdict(a.server, a.loaded, a.account, a.token, a.quota, &a.voucher)
                    .is_none(),
                "{why}"
            );
        }
        let mut other_table = judged();
        other_table.table = "another build".into();
        assert!(
            other_table
                .verdict(
                    "NSERVER",
                    "sha256:loaded",
                    "AAA",
                    "design",
                    Some(1 << 20),
                    &voucher(API, &names)
                )
                .is_none(),
            "judged by another stream table"
        );
        assert!(
            DriftCache::default().vouchers("", "").is_none(),
            "a server that named no ID vouches for nothing"
        );
    }

    #[test]
    fn carried_verdicts_come_only_from_the_same_server_and_never_replace_fresh_ones() {
        let before = judged();
        let mut after = DriftCache::new("NSERVER", "sha256:reloaded");
        let fresh = Verdict {
            drift: Vec::new(),
            ..before.accounts["AAA"].clone()
        };
        after.accounts.insert("AAA".into(), fresh.clone());
        after.carry(&before, |a| a != "CCC");
        assert_eq!(after.accounts["AAA"], fresh, "the fresh verdict stands");
        assert_eq!(
            after.accounts["BBB"], before.accounts["BBB"],
            "an untouched account is carried, under the config now loaded"
        );
        let mut restarted = DriftCache::new("NOTHER", "sha256:reloaded");
        restarted.carry(&before, |_| true);
        assert!(restarted.accounts.is_empty(), "another server process");
    }
}
