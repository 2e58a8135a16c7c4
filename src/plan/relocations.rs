//! The removals that end a recorded move (`crate::relocation`): a space whose relocation is
//! recorded on this (source) root is removed only with the receipt its destination wrote, or
//! once a receipt was verified and recorded. Pure: the receipts are read by the caller and
//! checked here against the observed records.

use super::guards::Refusal;
use super::removals::Removals;
use crate::diagnostic::Diagnostic;
use crate::model::SpaceName;
use crate::observed::Observed;

/// Prove every removal of a moving space with its receipt (recorded, or among `receipts`:
/// `(file digest, receipt)`), setting the removal's `receipt`; refuse the removals nothing
/// proves, naming the phase and what to do. A journaled removal passed this check when it was
/// planned: it is finished, with the receipt recorded if any. Returns the warnings for the
/// receipts given that no removal of this plan needs.
pub fn prove(
    observed: &Observed,
    removals: &mut Removals,
    receipts: &[(String, crate::relocation::Receipt)],
) -> Result<Vec<String>, Refusal> {
    let mut refused = Diagnostic::default().blast("none, nothing was changed.");
    let mut used = Vec::new();
    let mut moving: Vec<SpaceName> = Vec::new();
    for (name, removal) in removals.0.iter_mut() {
        let Some(space) = observed.inventory.spaces.get(name) else {
            continue;
        };
        let Some(record) = space
            .relocation
            .as_ref()
            .filter(|r| r.account == removal.account && space.account_pub == removal.account)
        else {
            continue;
        };
        if removal.journaled || record.verified(&space.jwt) {
            removal.receipt = record.receipt.clone();
            continue;
        }
        let given: Vec<&(String, crate::relocation::Receipt)> = receipts
            .iter()
            .filter(|(_, r)| r.space == name.as_str())
            .collect();
        let mut why = Vec::new();
        for (digest, receipt) in &given {
            match record.check(name, &space.jwt, receipt) {
                Ok(()) => {
                    removal.receipt = Some(digest.clone());
                    used.push(digest.clone());
                    break;
                }
                Err(e) => why.push(e),
            }
        }
        if removal.receipt.is_some() {
            continue;
        }
        moving.push(name.clone());
        let artifact = match &record.artifact {
            Some(a) => format!(
                ", artifact {} exported to {} at {}",
                a.digest, a.path, a.exported_at
            ),
            None => String::new(),
        };
        let line = if why.is_empty() {
            format!(
                "{} is being moved to another broker (recorded by `cotal space backup` at {} by {}: phase {}{artifact}); removing it before the destination verified the artifact could lose it.",
                name.quoted(),
                record.started_at,
                record.by,
                record.phase
            )
        } else {
            format!(
                "{} is being moved (phase {}{artifact}), and the receipt given does not prove it: {}.",
                name.quoted(),
                record.phase,
                why.join("; ")
            )
        };
        if !refused.what.is_empty() {
            refused.what.push('\n');
        }
        refused.what.push_str(&line);
        refused.next.push(format!(
            "restore it on the destination (`cotal space restore {n} DIR --relocate`), bring back the receipt it writes, then `cotal space rm {n} --relocated RECEIPT` (or `cotal apply --relocated RECEIPT`); if it is not moving, `cotal space relocation {n} --cancel`",
            n = name.as_str()
        ));
    }
    if !moving.is_empty() {
        return Err(refused.tenants(moving));
    }
    Ok(receipts
        .iter()
        .filter(|(digest, _)| !used.contains(digest))
        .map(|(_, r)| {
            format!(
                "the receipt of space {:?} is not needed: this plan removes no moving space of that name",
                r.space
            )
        })
        .collect())
}
