//! The secret-free state of a root (see [`crate::observed::state`]): exported on request (`cotal state
//! export`) and written to `.cotal/state.json` after every apply, so the review loop always has
//! the latest.

use crate::error::{Error, Result};
use crate::observe;
use crate::store::{Root, atomic};

/// The root's state as JSON.
pub fn export(root: &Root) -> Result<Vec<u8>> {
    export_remembering(root, Default::default()).map(|(bytes, _, _)| bytes)
}

/// [`export`], with the observation it was made from and what it made for the next one (the
/// memo of the signatures it verified, the folders it read).
fn export_remembering(
    root: &Root,
    seeded: std::collections::BTreeMap<crate::model::SpaceName, u64>,
) -> Result<(Vec<u8>, crate::observed::Observed, observe::ForNext)> {
    let (desired, digest, _) = observe::desired_for_reading(root)?;
    let (observed, next) = observe::observe_remembering(root, &desired, digest, seeded)?;
    Ok((encode(root, &observed)?, observed, next))
}

/// The state of `observed` as JSON, signed with the root's state key (made now if the root
/// has none).
fn encode(root: &Root, observed: &crate::observed::Observed) -> Result<Vec<u8>> {
    let mut state =
        crate::observed::state::export(observed, &crate::clock::timestamp(), Some(root.dir()))
            .map_err(|e| {
                Error::refused(
                    e.context("no state exported")
                        .blast("none, nothing was written."),
                )
            })?;
    Ok(crate::trust::state_signature::sign_pretty(
        &mut state,
        &crate::store::state_key::load_or_create(root)?,
    ))
}

/// After `up` or `down`: `.cotal/state.json` again when what it records moved (the broker
/// running or not, its open-file limit, the config `up` promoted), under the root's lock, and
/// with it the memo of the signatures verified (`store::caches::signature_memo`) and the channel
/// registries read (`store::caches::registry_cache`; after `up` only: a stopped broker's are not read,
/// and the cache is kept).
/// Returns whether it was written. Skipped (`Ok(false)`) when another cotal holds the root,
/// when `cotal.toml` cannot be read (a state of a default topology would be wrong), and when
/// the state cannot be exported (a journal is open, a record is untrusted: the next apply
/// writes it).
pub fn refresh(
    root: &Root,
    seeded: std::collections::BTreeMap<crate::model::SpaceName, u64>,
) -> Result<bool> {
    let Ok(_lock) =
        crate::store::lock::take(root, &crate::operator::holder(), std::time::Duration::ZERO)
    else {
        return Ok(false);
    };
    if observe::desired_for_reading(root)?.2.is_some() {
        return Ok(false);
    }
    let bytes = match export_remembering(root, seeded) {
        Ok((b, observed, next)) => {
            save_for_next(root, &next);
            // The registries this observation read (after `up`, every one): the first apply
            // after it reads again only those whose stream moved since.
            save_registry_cache(root, &observed, None);
            save_drift_cache(root, &observed);
            b
        }
        Err(e) => {
            tracing::info!(error = %e, "state.json left as it is");
            return Ok(false);
        }
    };
    // The export time (and so the signature's bytes) alone never makes a write; a state that
    // is unsigned, or signed by another key, is written again.
    let without_time = |b: &[u8]| -> Option<serde_json::Value> {
        let mut v: serde_json::Value = serde_json::from_slice(b).ok()?;
        v.as_object_mut()?.remove("exported_at");
        if let Some(signature) = v.get_mut("signature").and_then(|s| s.as_object_mut()) {
            signature.remove("sig");
        }
        Some(v)
    };
    let current = match atomic::read_no_follow_within(
        &root.state_file(),
        crate::observed::state::MAX_STATE_BYTES,
    ) {
        Ok(atomic::Found::File(bytes)) => Some(bytes),
        _ => None,
    };
    if current.as_deref().and_then(without_time) == without_time(&bytes) {
        return Ok(false);
    }
    atomic::write(&root.state_file(), &bytes, atomic::PUBLIC)?;
    Ok(true)
}

/// Up to how many touched spaces the state after an apply asks the broker for one by one (more
/// are asked for in one request for every account).
const TOUCHED_ASKED_ONE_BY_ONE: usize = 32;

/// After a successful apply: `.cotal/state.json`, so the state the review loop needs is always
/// the latest. The registries are not read again: what the apply observed before, patched with
/// what it wrote (a space whose registry was not read before is left unknown, but one that this
/// apply's provisioning seeded is known when its stream holds that seed alone). The live
/// figures are asked again only of the spaces the plan touched (see
/// [`observe::observe_after_apply`]). The registries read before the apply, and those seeded,
/// are cached for the next plan (`store::caches::registry_cache`), beside the memo and the drift cache,
/// while the state is encoded. A failure is the caller's to report as a warning: the apply
/// itself is done.
pub fn write_after_apply(
    root: &Root,
    desired: &crate::desired::Desired,
    before: &crate::observed::Observed,
    outcome: &crate::apply::Outcome,
    plan: &crate::plan::Plan,
) -> Result<()> {
    // Each part's time since this began, at `-vv` (the profile of a hot apply's tail).
    let started = std::time::Instant::now();
    observe_and_write(root, desired, before, outcome, plan, started)
}

/// [`write_after_apply`]'s state: observed again (the registries `before` knew, patched with
/// what `outcome` wrote), encoded, signed and written, with the signature memo beside it.
fn observe_and_write(
    root: &Root,
    desired: &crate::desired::Desired,
    before: &crate::observed::Observed,
    outcome: &crate::apply::Outcome,
    plan: &crate::plan::Plan,
    started: std::time::Instant,
) -> Result<()> {
    use crate::observed::RegistryState;
    let mut known = std::collections::BTreeMap::new();
    for (name, space) in &before.inventory.spaces {
        let mut state = space.registry.clone();
        // A purge emptied the registry, and provisioning seeded it again: what it holds now
        // is not known without reading it (like an added space's).
        if outcome.purged.iter().any(|p| &p.space == name) {
            state = RegistryState::Unknown;
        }
        // A space whose write failed may have written some keys: what its registry holds now
        // is not known without reading it again.
        if outcome.failed.iter().any(|f| &f.space == name) {
            state = RegistryState::Unknown;
        }
        if let Some(written) = outcome.channels_written.get(name) {
            state = match state {
                RegistryState::Read(mut r) => {
                    for (key, value, revision) in written {
                        match (value, revision) {
                            (Some(v), Some(rev)) => {
                                r.insert(
                                    key.clone(),
                                    crate::space::channels::Entry {
                                        value: serde_json::from_str(v)
                                            .unwrap_or_else(|_| v.clone().into()),
                                        revision: *rev,
                                    },
                                );
                            }
                            _ => {
                                r.remove(key);
                            }
                        }
                    }
                    RegistryState::Read(r)
                }
                _ => RegistryState::Unknown,
            };
        }
        known.insert(name.clone(), (space.account_pub.clone(), state));
    }
    // The spaces whose live figures this apply may have moved; a change of the system account,
    // or a bulk change, has every account's figures asked for again.
    let touched: Option<std::collections::BTreeSet<crate::model::SpaceName>> = {
        use crate::plan::Step;
        let whole = plan
            .steps
            .iter()
            .any(|s| matches!(s, Step::ReissueSystemAccount { .. }));
        // A fence names no one space (it fences several), yet re-signs each one's account.
        let names: std::collections::BTreeSet<_> = plan
            .steps
            .iter()
            .flat_map(|s| match s {
                Step::Fence { spaces, .. } => spaces.iter().map(|f| f.space.clone()).collect(),
                _ => s.space().cloned().into_iter().collect::<Vec<_>>(),
            })
            .collect();
        (!whole && names.len() <= TOUCHED_ASKED_ONE_BY_ONE).then_some(names)
    };
    let known = observe::KnownRegistries {
        read: Some(known),
        seeded: outcome.registry_seeded.clone(),
    };
    observe::observe_after_apply(
        root,
        desired,
        before.desired_digest.clone(),
        known,
        before,
        touched.as_ref(),
    )
    .and_then(|(o, next)| {
        tracing::debug!(took = ?started.elapsed(), "observed the state after the apply");
        // The memo and the caches (files of their own, synced) are saved while the state is
        // encoded.
        let ((), encoded) = rayon::join(
            || {
                save_for_next(root, &next);
                save_drift_cache(root, &o);
                save_registry_cache(root, before, Some((&o, &outcome.registry_seeded)));
                tracing::debug!(took = ?started.elapsed(), "saved the memo and the caches");
            },
            || encode(root, &o),
        );
        encoded
    })
    .and_then(|b| {
        tracing::debug!(took = ?started.elapsed(), "encoded and signed the state");
        atomic::write(&root.state_file(), &b, atomic::PUBLIC)?;
        tracing::debug!(took = ?started.elapsed(), "wrote the state");
        Ok(())
    })
}

/// Cache the channel registries `observed` read, each with its stream's fingerprint just before
/// the read (`store::caches::registry_cache`), and (`seeded`: the state after an apply, and the spaces
/// its provisioning seeded) each seeded registry that state knows, with the fingerprint that
/// showed the seed alone; for the next plan; nothing when there is none. A failure costs only
/// the next plan's speed.
fn save_registry_cache(
    root: &Root,
    observed: &crate::observed::Observed,
    seeded: Option<(
        &crate::observed::Observed,
        &std::collections::BTreeMap<crate::model::SpaceName, u64>,
    )>,
) {
    use crate::observed::RegistryState;
    let mut cache = crate::store::caches::registry_cache::Cache::default();
    // The registries read (before an apply, or by `up`'s refresh) and, after an apply, those
    // its provisioning seeded that the state after it found holding the seed alone.
    let after = seeded.into_iter().flat_map(|(after, seeded)| {
        seeded
            .keys()
            .filter_map(|name| after.inventory.spaces.get(name))
    });
    for space in observed.inventory.spaces.values().chain(after) {
        if let (RegistryState::Read(registry), Some(fingerprint)) =
            (&space.registry, &space.registry_fingerprint)
        {
            cache.accounts.insert(
                space.account_pub.clone(),
                crate::store::caches::registry_cache::Cached {
                    fingerprint: fingerprint.clone(),
                    registry: registry.clone(),
                },
            );
        }
    }
    if !cache.accounts.is_empty()
        && let Err(e) = crate::store::caches::registry_cache::save(root, &cache)
    {
        tracing::warn!(error = %e, "the registry cache was not written");
    }
}

/// Cache the verdicts on the stream configs `observed` holds, with what vouches for them
/// (`store::caches::drift_cache`), for the next plan; nothing when it holds none (a cluster, a stopped
/// broker). A failure costs only the next plan's speed.
fn save_drift_cache(root: &Root, observed: &crate::observed::Observed) {
    if let Some(cache) = observed
        .server
        .as_ref()
        .and_then(|s| s.drift_cache.as_ref())
        && let Err(e) = crate::store::caches::drift_cache::save(root, cache)
    {
        tracing::warn!(error = %e, "the drift cache was not written");
    }
}

/// Save the memo of verified signatures and the folder cache for the next plan; a failure
/// costs only its speed.
fn save_for_next(root: &Root, next: &observe::ForNext) {
    if let Err(e) = next.memo.save(root) {
        tracing::warn!(error = %e, "the memo of verified signatures was not written");
    }
    if let Some(folders) = &next.folders
        && let Err(e) = crate::store::caches::folder_cache::save(root, folders)
    {
        tracing::warn!(error = %e, "the folder cache was not written");
    }
}
