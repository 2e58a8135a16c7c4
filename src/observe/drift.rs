//! Drift of the live streams from the table: the verdicts the drift cache vouches for, taken
//! as they are; the others judged again from the live figures, and the figures applied to the
//! inventory.

use super::*;

/// The verdicts on stream configs cached (`cache`), with the expectation each space's records
/// make now (its token and storage quota, by account): what says whether a verdict still holds.
pub(super) struct DriftVouch {
    pub(super) cache: DriftCache,
    pub(super) expected: std::collections::HashMap<String, (String, Option<u64>)>,
}

impl DriftVouch {
    pub(super) fn new(cache: DriftCache, inventory: &Inventory) -> Self {
        let expected = inventory
            .spaces
            .iter()
            .map(|(name, space)| {
                (
                    space.account_pub.clone(),
                    (name.token(), space.limits.storage_quota()),
                )
            })
            .collect();
        DriftVouch { cache, expected }
    }

    pub(super) fn vouching(&self) -> Vouching<'_> {
        Vouching {
            cache: &self.cache,
            expected: &self.expected,
        }
    }
}

/// Give each space whose configs the broker left out (the cached verdict vouched for them) that
/// verdict: its streams' drift and its artifact store's cap.
pub(super) fn take_vouched_verdicts(
    inventory: &mut Inventory,
    figures: &live::Figures,
    cache: &DriftCache,
) {
    for space in inventory.spaces.values_mut() {
        if let Some(verdict) = figures
            .accounts
            .get(&space.account_pub)
            .filter(|a| a.configs_vouched)
            .and_then(|_| cache.accounts.get(&space.account_pub))
        {
            space.stream_drift = verdict.drift.clone();
            space.artifact_max_bytes = verdict.artifact_max_bytes;
        }
    }
}

/// Of a single server's figures: each space's verdict on its stream configs (as the figures
/// gave it, fresh or vouched for, and as `inventory` now holds it), with what vouches for it,
/// for an apply or `up` to cache.
pub(super) fn judged(inventory: &Inventory, figures: &live::Figures) -> Option<DriftCache> {
    let server_id = figures.server_id.as_ref()?;
    let loaded = figures
        .loaded
        .values()
        .next()
        .map(String::as_str)
        .unwrap_or("");
    let mut cache = DriftCache::new(server_id, loaded, figures.server_api);
    for (name, space) in &inventory.spaces {
        let Some(account) = figures.accounts.get(&space.account_pub) else {
            continue;
        };
        let Some(voucher) = &account.voucher else {
            continue;
        };
        if !account.configs_vouched && account.streams.iter().any(|s| s.shape.is_none()) {
            continue;
        }
        cache.accounts.insert(
            space.account_pub.clone(),
            verdict(
                name,
                space.limits.storage_quota(),
                voucher,
                (space.stream_drift.clone(), space.artifact_max_bytes),
            ),
        );
    }
    Some(cache)
}

/// The verdict `judgement` (drift, artifact cap) on the space `name` (storage `quota`), with
/// what vouches for it.
pub(super) fn verdict(
    name: &SpaceName,
    quota: Option<u64>,
    voucher: &crate::observed::drift_verdicts::Voucher,
    (drift, artifact_max_bytes): (Vec<(String, Vec<String>)>, Option<i64>),
) -> Verdict {
    Verdict {
        api: voucher.api,
        streams: voucher.streams.clone(),
        token: name.token(),
        quota,
        drift,
        artifact_max_bytes,
    }
}

/// The verdict on the stream configs of the space `name` (storage `quota`) in a single
/// server's report of its account, every config in it; `None` otherwise.
pub(super) fn verdict_of(
    name: &SpaceName,
    quota: Option<u64>,
    account: &live::AccountFigures,
) -> Option<Verdict> {
    let voucher = account.voucher.as_ref()?;
    if account.streams.iter().any(|s| s.shape.is_none()) {
        return None;
    }
    Some(verdict(
        name,
        quota,
        voucher,
        judge(name, quota, account, None),
    ))
}

/// Judge again the verdicts of the accounts `read` (sorted) from a report of their configs
/// asked now (of every account's, past [`live::CONFIGS_ASKED_ONE_BY_ONE`]); a verdict that
/// cannot be judged again is left out.
pub(super) fn judge_again(
    root: &Root,
    listener: &Listener,
    inventory: &Inventory,
    verdicts: &mut DriftCache,
    read: &[String],
) {
    let only = (read.len() <= live::CONFIGS_ASKED_ONE_BY_ONE).then_some(read);
    let after = match live_figures(root, listener, 1, 1, only, None) {
        Ok(after) if after.server_id.as_deref() == Some(verdicts.server_id.as_str()) => after,
        _ => {
            verdicts
                .accounts
                .retain(|a, _| read.binary_search(a).is_err());
            return;
        }
    };
    for (name, space) in &inventory.spaces {
        if read.binary_search(&space.account_pub).is_err() {
            continue;
        }
        verdicts.accounts.remove(&space.account_pub);
        let Some(account) = after.accounts.get(&space.account_pub) else {
            continue;
        };
        if let Some(verdict) = verdict_of(name, space.limits.storage_quota(), account) {
            verdicts.accounts.insert(space.account_pub.clone(), verdict);
        }
    }
}

/// Give every space whose account was not `touched` the live figures observed `before`.
pub(super) fn keep_untouched_figures(
    inventory: &mut Inventory,
    before: &Observed,
    touched: &[String],
) {
    for (name, space) in inventory.spaces.iter_mut() {
        if touched.contains(&space.account_pub) {
            continue;
        }
        if let Some(b) = before
            .inventory
            .spaces
            .get(name)
            .filter(|b| b.account_pub == space.account_pub)
        {
            space.usage = b.usage.clone();
            space.stream_drift = b.stream_drift.clone();
            space.replication = b.replication;
            space.registry_fingerprint = b.registry_fingerprint.clone();
        }
    }
}

/// Fill each space's usage and stream drift from live figures.
/// `replicas`: the declared replica count on a cluster (`None` for a single server).
pub(super) fn apply_figures(
    inventory: &mut Inventory,
    figures: &live::Figures,
    replicas: Option<usize>,
) {
    let clustered = replicas.is_some();
    // Each space's figures are its own: they are applied on every core (at thousands of spaces,
    // each with its fifteen streams judged, this was milliseconds of a hot apply on one).
    inventory.spaces.par_iter_mut().for_each(|(name, space)| {
        let account = figures.accounts.get(&space.account_pub);
        if account.is_none() && space.archived.is_some() {
            // Not loaded: its usage is what its store folders hold (read with the local facts).
            return;
        }
        space.usage = Usage {
            source: UsageSource::Live,
            streams: account
                .map(|a| {
                    a.streams
                        .iter()
                        .map(|s| StreamUsage {
                            name: s.name.clone(),
                            messages: Some(s.messages),
                            bytes: s.bytes,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            connections: None,
            per_account: Vec::new(),
            by_member: BTreeMap::new(),
        };
        // Its own account's connections, then its members' accounts' (each bounded on its own).
        let mut per_account = vec![account.map(|a| a.connections).unwrap_or(0)];
        per_account.extend(
            space
                .sides
                .iter()
                .filter(|(role, _)| {
                    matches!(role, crate::space::side_accounts::SideRole::Member(_))
                })
                .filter_map(|(_, side)| figures.accounts.get(&side.account_pub))
                .map(|a| a.connections)
                .filter(|c| *c > 0),
        );
        space.usage.connections = Some(per_account.iter().sum());
        space.usage.per_account = per_account;
        space.usage.by_member = space
            .sides
            .iter()
            .filter_map(|(role, side)| match role {
                crate::space::side_accounts::SideRole::Member(p) => Some((
                    p.to_string(),
                    figures
                        .accounts
                        .get(&side.account_pub)
                        .map_or(0, |a| a.connections),
                )),
                _ => None,
            })
            .collect();
        let Some(account) = account else { return };
        // Only a single server's: a cluster's report may come from a replica that is behind.
        let bucket = streams::registry_stream(&name.token());
        // A server that does not report the creation time gives no fingerprint: a bucket made
        // again could not be told from the old one.
        space.registry_fingerprint = account
            .streams
            .iter()
            .find(|s| s.name == bucket && !clustered && !s.fingerprint.created.is_empty())
            .map(|s| s.fingerprint.clone());
        space.replication = clustered
            .then(|| {
                account
                    .streams
                    .iter()
                    .filter_map(|s| s.replication)
                    .reduce(|(a, x), (b, y)| (a.min(b), x && y))
            })
            .flatten();
        // On a cluster the shapes are made of each replica's share of the quota.
        let share = streams::per_replica(
            space.limits.storage_quota(),
            replicas.map_or(1, |r| r as u8),
        );
        (space.stream_drift, space.artifact_max_bytes) = judge(name, share, account, replicas);
    });
}

/// The verdict on a space's stream configs in its account's figures: the streams whose config
/// differs from the shape cotal expects (with the fields), and its artifact store's cap.
/// `quota`: each replica's share of the storage quota ([`streams::per_replica`]); `replicas`:
/// the declared replica count on a cluster.
pub(super) fn judge(
    name: &SpaceName,
    quota: Option<u64>,
    account: &live::AccountFigures,
    replicas: Option<usize>,
) -> (Vec<(String, Vec<String>)>, Option<i64>) {
    let artifacts = streams::artifact_stream(&name.token());
    let artifact_max_bytes = account
        .streams
        .iter()
        .find(|s| s.name == artifacts)
        .and_then(|s| s.shape.as_ref())
        .map(|shape| shape.max_bytes);
    let mut drift = Vec::new();
    for want in streams::expected(&name.token(), quota) {
        let stream_name = want.stream_name();
        let live = account.streams.iter().find(|s| s.name == stream_name);
        if let Some(shape) = live.and_then(|s| s.shape.as_ref()) {
            let mut fields = streams::drift(&want.shape(), shape);
            // On a cluster the declared replicas are part of the shape (updatable in place).
            if let (Some(want), Some(have)) = (replicas, live.and_then(|s| s.num_replicas))
                && want != have
            {
                fields.push("replicas");
            }
            if !fields.is_empty() {
                drift.push((stream_name, fields.iter().map(|f| f.to_string()).collect()));
            }
        }
    }
    (drift, artifact_max_bytes)
}
