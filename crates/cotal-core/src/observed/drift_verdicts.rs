//! Verdicts on stream configs and what vouches for them (`store::caches::drift_cache` keeps them in
//! `.cotal/maintenance/drift.json`): each account's streams that drifted from the shapes cotal
//! expects and its artifact store's cap, as judged on a single server's report, with the
//! server process, its loaded config, the account's JetStream API counters and stream names,
//! and what the expected shapes were made of. Why equal vouchers mean an unchanged verdict is
//! in `store::caches::drift_cache`'s header and `docs/design/decisions.md`.
//!
//! Invariants: a verdict holds only when every part of what vouches for it is equal
//! ([`DriftCache::verdict`]); verdicts are carried only between reports of the same server
//! process judged by the same stream table ([`DriftCache::carry`]).

use serde::{Deserialize, Serialize};
use sha2::Digest;
use std::collections::{BTreeMap, HashMap};

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
    /// The server's JetStream API counters over every account in the latest report judged.
    pub server_api: ApiCounters,
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

impl ApiCounters {
    /// The later of two counts of the same server (the higher total).
    pub fn max_by_total(self, other: ApiCounters) -> ApiCounters {
        if (other.total, other.errors) > (self.total, self.errors) {
            other
        } else {
            self
        }
    }

    /// Whether either count is lower than in `then`: counted again from zero since.
    pub fn lower_than(&self, then: &ApiCounters) -> bool {
        self.total < then.total || self.errors < then.errors
    }
}

/// What vouches for an account's cached verdict, as a report must match it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Voucher {
    pub api: ApiCounters,
    pub streams: String,
}

/// The drift cache read for one report, with the expectation each space's records make now
/// (by account: the space's token and storage quota): what decides which accounts' configs the
/// report may leave out.
pub struct Vouching<'a> {
    pub cache: &'a DriftCache,
    pub expected: &'a HashMap<String, (String, Option<u64>)>,
}

impl Vouching<'_> {
    /// Whether the cache may vouch for anything in the report of `server_id` with `loaded` in
    /// force, whose counters are `server_api` over every account and `accounts` each: the same
    /// process, config and stream table, and no counter lower than judged. A JetStream started
    /// again in place (after running out of space, by a reload of the same config) counts
    /// every account from zero again, with the same ID and digest: a tenant could bring its
    /// own counters back to the judged ones, but not every account's and the server's.
    pub fn intact<'b>(
        &self,
        server_id: &str,
        loaded: &str,
        server_api: ApiCounters,
        mut accounts: impl Iterator<Item = (&'b str, ApiCounters)>,
    ) -> bool {
        self.cache.vouchers(server_id, loaded).is_some()
            && !server_api.lower_than(&self.cache.server_api)
            && !accounts.any(|(account, api)| {
                self.cache
                    .accounts
                    .get(account)
                    .is_some_and(|v| api.lower_than(&v.api))
            })
    }

    /// Whether the verdict on `account` holds for `voucher` (in a report found
    /// [`Vouching::intact`]).
    pub fn holds(&self, server_id: &str, loaded: &str, account: &str, voucher: &Voucher) -> bool {
        self.expected.get(account).is_some_and(|(token, quota)| {
            self.cache
                .verdict(server_id, loaded, account, token, *quota, voucher)
                .is_some()
        })
    }
}

impl DriftCache {
    /// An empty cache of what `server_id` reported with `loaded` in force and `server_api`
    /// counted, judged by this build.
    pub fn new(server_id: &str, loaded: &str, server_api: ApiCounters) -> Self {
        DriftCache {
            server_id: server_id.to_string(),
            loaded: loaded.to_string(),
            table: table().to_string(),
            server_api,
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

/// The version of the judgement itself (`observe::judge`, `streams::drift`, the mapping of a
/// reported config to a shape): bumped by hand whenever one of them changes, so verdicts judged
/// by the old rules are judged again.
const JUDGEMENT: u32 = 1;

/// This build's stream table: the digest of the shapes it expects of sample spaces, of its
/// version and of [`JUDGEMENT`], so a verdict judged by another table is judged again.
pub fn table() -> &'static str {
    static TABLE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut hash = sha2::Sha256::new();
        hash.update(env!("CARGO_PKG_VERSION").as_bytes());
        hash.update(JUDGEMENT.to_le_bytes());
        for quota in [None, Some(1), Some(32 << 20), Some(4 << 30)] {
            hash.update(format!("{:?}", crate::space::streams::expected("t", quota)).as_bytes());
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

    const SERVER_API: ApiCounters = ApiCounters {
        total: 54,
        errors: 2,
    };

    fn voucher(api: ApiCounters, names: &[&str]) -> Voucher {
        Voucher {
            api,
            streams: names_digest(names.iter().copied()),
        }
    }

    fn judged() -> DriftCache {
        let mut cache = DriftCache::new("NSERVER", "sha256:loaded", SERVER_API);
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
        impl Ask {
            fn put<'c>(&self, cache: &'c DriftCache) -> Option<&'c Verdict> {
                cache.verdict(
                    self.server,
                    self.loaded,
                    self.account,
                    self.token,
                    self.quota,
                    &self.voucher,
                )
            }
        }
        let same = Ask {
            server: "NSERVER",
            loaded: "sha256:loaded",
            account: "AAA",
            token: "design",
            quota: Some(1 << 20),
            voucher: voucher(API, &names),
        };
        let got = same
            .put(&cache)
            .expect("everything equal, the names in any order");
        assert_eq!(got.drift.len(), 1);
        let moved = |total, errors| ApiCounters { total, errors };
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
            assert!(a.put(&cache).is_none(), "{why}");
        }
        let mut other_table = judged();
        other_table.table = "another build".into();
        assert!(
            same.put(&other_table).is_none(),
            "judged by another stream table"
        );
        assert!(
            DriftCache::default().vouchers("", "").is_none(),
            "a server that named no ID vouches for nothing"
        );
    }

    #[test]
    fn a_jetstream_counting_again_from_zero_voids_every_verdict() {
        let cache = judged();
        let expected: HashMap<String, (String, Option<u64>)> = ["AAA", "BBB"]
            .into_iter()
            .map(|a| (a.to_string(), ("design".to_string(), Some(1 << 20))))
            .collect();
        let vouching = Vouching {
            cache: &cache,
            expected: &expected,
        };
        let names = ["CHAT_design", "KV_x"];
        let counted = |total, errors| ApiCounters { total, errors };
        let intact = |server: ApiCounters, a: ApiCounters, b: ApiCounters| {
            vouching.intact(
                "NSERVER",
                "sha256:loaded",
                server,
                [("AAA", a), ("BBB", b), ("NEW", counted(0, 0))].into_iter(),
            )
        };
        assert!(intact(SERVER_API, API, API), "as judged");
        assert!(
            intact(counted(90, 2), counted(40, 1), API),
            "counted on since: only AAA's verdict is void"
        );
        assert!(vouching.holds("NSERVER", "sha256:loaded", "BBB", &voucher(API, &names)));
        assert!(!vouching.holds(
            "NSERVER",
            "sha256:loaded",
            "AAA",
            &voucher(counted(40, 1), &names)
        ));
        assert!(
            !intact(counted(60, 2), API, counted(3, 0)),
            "a tenant brought AAA's counters back after JetStream started again: BBB's are lower"
        );
        assert!(
            !intact(counted(30, 2), API, API),
            "the server's count is lower than judged"
        );
        assert!(
            !intact(SERVER_API, counted(27, 0), API),
            "fewer errors than judged"
        );
        assert!(
            !vouching.holds("NSERVER", "sha256:loaded", "CCC", &voucher(API, &names)),
            "an account no space of the records has"
        );
    }

    #[test]
    fn carried_verdicts_come_only_from_the_same_server_and_never_replace_fresh_ones() {
        let before = judged();
        let mut after = DriftCache::new("NSERVER", "sha256:reloaded", SERVER_API);
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
        let mut restarted = DriftCache::new("NOTHER", "sha256:reloaded", SERVER_API);
        restarted.carry(&before, |_| true);
        assert!(restarted.accounts.is_empty(), "another server process");
    }
}
