//! The system account's re-issue step: its scoped signing keys (kept, adjusted to the evictor
//! opt-in, or new on a rotation or when replacing the legacy `sys.seed`), its revocations, and
//! one atomic write of the broker record that holds both.
//!
//! Invariants: the JWT and the keys it lists are written together (one file); the previous
//! broker record and `sys.seed` are remembered, so a reload that does not confirm puts them
//! back; the step is idempotent (a re-run re-issues the same keys with the same revocations).
//! No revocation is ever dropped by the clock here: only those the plan names (and shows)
//! leave the JWT, so a host clock that jumps ahead cannot let revoked creds in again.

use super::RunState;
use super::undo::remember;
use crate::error::{Error, Result};
use crate::mint;
use crate::model::SpaceName;
use crate::store::broker_record::{self, BrokerRecord, PreviousControl};
use crate::store::{Root, atomic};
use crate::trust::jwt::{self, AccountNats};
use std::collections::BTreeMap;

/// What the plan's re-issue step asks for.
pub struct Reissue<'a> {
    pub rotate: bool,
    pub evictor: Option<bool>,
    pub revoke: &'a BTreeMap<SpaceName, Vec<String>>,
    pub handed_out: &'a jwt::Revocations,
    /// Revocations of the monitoring account the plan drops (their users expired).
    pub pruned: &'a [String],
}

/// Re-issue the system account's JWT and write it with its keys; `record` is updated, so the
/// steps after this one (creds, promotion) use the new keys.
pub fn reissue_system_account(
    root: &Root,
    record: &mut BrokerRecord,
    state: &mut RunState,
    step: Reissue<'_>,
) -> Result<()> {
    let Reissue {
        rotate,
        evictor,
        revoke,
        handed_out,
        pruned,
    } = step;
    remember(&mut state.undo, &root.broker_record())?;
    remember(&mut state.undo, &root.sys_seed())?;
    let kept_evictor = record
        .sys
        .keys
        .as_ref()
        .is_some_and(|k| k.evictor.is_some());
    let evictor = evictor.unwrap_or(kept_evictor);
    let keys = match (&record.sys.keys, rotate) {
        (Some(kept), false) => {
            let mut keys = kept.clone();
            match (evictor, keys.evictor.is_some()) {
                (true, false) => keys.evictor = Some(mint::new_account_seed()),
                (false, true) => keys.evictor = None,
                _ => {}
            }
            // Roots made before the monitor key get one at their next re-issue.
            if keys.monitor.is_none() {
                keys.monitor = Some(mint::new_account_seed());
            }
            keys
        }
        // The control key changes: the old one is kept until the promotion is confirmed.
        (kept, _) => {
            let previous = match kept {
                Some(k) => Some(k.previous_control.clone().unwrap_or(PreviousControl {
                    seed: k.control.clone(),
                    scoped: true,
                })),
                None => broker_record::load_sys_seed(root)?.map(|seed| PreviousControl {
                    seed,
                    scoped: false,
                }),
            };
            let mut keys = mint::new_sys_keys(evictor);
            keys.previous_control = previous;
            keys
        }
    };
    let now = crate::clock::now();
    let mut revocations = jwt::decode_verified::<AccountNats>(&record.sys.jwt)
        .map(|c| c.nats.revocations)
        .unwrap_or_default();
    // Kept as they are: the system account lists cotal's control key only, and nothing adds
    // to these any more (the $SYS users of spaces live in their side accounts).
    for key in revoke.values().flatten() {
        revocations.insert(key.clone(), now);
    }
    let token = mint::sys_account_jwt(
        &record.operator,
        &record.sys.public,
        Some(&keys),
        &revocations,
    )
    .map_err(Error::other)?;
    // The monitoring account: its users' revocations (the handed-out ones recorded, less those
    // the plan drops because their users expired), and the monitor key scoped to its
    // template. A rotation's new key refuses every user of the old one, so none of the old
    // revocations is kept.
    let monitor_account = match &keys.monitor {
        Some(seed) => {
            let mut monitor_revocations = match (&record.sys.monitor_account, rotate) {
                (Some(m), false) => jwt::decode_verified::<AccountNats>(&m.jwt)
                    .map(|c| c.nats.revocations)
                    .unwrap_or_default(),
                _ => jwt::Revocations::new(),
            };
            monitor_revocations.retain(|key, _| !pruned.contains(key));
            if !rotate {
                for (key, at) in handed_out {
                    let ts = monitor_revocations.entry(key.clone()).or_insert(*at);
                    *ts = (*ts).max(*at);
                }
            }
            Some(
                mint::monitor_account(
                    &record.operator,
                    &record.sys.public,
                    seed,
                    &monitor_revocations,
                    record.sys.monitor_account.as_ref(),
                )
                .map_err(Error::other)?,
            )
        }
        None => None,
    };
    let mut next = record.clone();
    next.sys.jwt = token;
    next.sys.keys = Some(keys);
    next.sys.monitor_account = monitor_account;
    broker_record::save(root, &next)?;
    // The unscoped legacy seed is no longer listed by the JWT: nothing it signs is accepted.
    atomic::remove_file(&root.sys_seed())?;
    tracing::info!(
        rotate,
        evictor,
        revoked = revoke.values().map(Vec::len).sum::<usize>(),
        "system account re-issued"
    );
    *record = next;
    Ok(())
}

/// After a confirmed promotion: the broker runs the JWT of the keys on disk, so a previous
/// control key kept for an interrupted change is dropped.
pub fn forget_previous_control(root: &Root, record: &mut BrokerRecord) -> Result<()> {
    let Some(keys) = record.sys.keys.as_mut() else {
        return Ok(());
    };
    if keys.previous_control.take().is_none() {
        return Ok(());
    }
    broker_record::save(root, record)?;
    tracing::info!("previous control key dropped");
    Ok(())
}
