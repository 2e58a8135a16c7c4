//! The removals that end a recorded move (`crate::adopt::relocation`): a space whose relocation is
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
    receipts: &[(String, crate::adopt::relocation::Receipt)],
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
        if removal.journaled {
            if removal.receipt.is_none() {
                removal.receipt = record.receipt.clone();
            }
            continue;
        }
        let fenced = space.limits.is_suspended() || space.archived.is_some();
        if fenced && record.verified() {
            removal.receipt = record.receipt.clone();
            continue;
        }
        let given: Vec<&(String, crate::adopt::relocation::Receipt)> = receipts
            .iter()
            .filter(|(_, r)| r.space == name.as_str())
            .collect();
        let mut why = Vec::new();
        for (digest, receipt) in &given {
            let checked = match fenced {
                true => record.check(name, receipt),
                false => Err("the space is served again (neither suspended nor archived): what it holds now may not be in the artifact; fence it, back it up and restore it again".into()),
            };
            match checked {
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
        let others: Vec<String> = receipts
            .iter()
            .filter(|(_, r)| r.space != name.as_str())
            .map(|(_, r)| format!("{:?}", r.space))
            .collect();
        let artifact = match &record.artifact {
            Some(a) => format!(
                ", artifact {} exported to {} at {}",
                a.digest, a.path, a.exported_at
            ),
            None => String::new(),
        };
        let line = if why.is_empty() {
            format!(
                "{} is being moved to another broker (recorded by `cotal space backup` at {} by {}: phase {}{artifact}); removing it before the destination verified the artifact could lose it{}.",
                name.quoted(),
                record.started_at,
                record.by,
                record.phase,
                match others.as_slice() {
                    [] => String::new(),
                    names => format!(
                        " (the receipt given is of space {}, not of this one)",
                        names.join(", ")
                    ),
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adopt::relocation::{Artifact, Phase, Receipt, Relocation, StreamCount};
    use crate::model::{SpaceSpec, SpaceState};
    use crate::plan::removals::Removal;
    use crate::testing::{name, observed, space};

    fn moving(state: SpaceState) -> Observed {
        let spec = SpaceSpec {
            state,
            ..SpaceSpec::default()
        };
        let mut s = space("AMOVE", &spec);
        s.relocation = Some(Relocation {
            account: "AMOVE".into(),
            phase: Phase::Exported,
            started_at: "t".into(),
            by: "ops@a".into(),
            fenced_jwt: crate::adopt::relocation::jwt_digest(&s.jwt),
            artifact: Some(Artifact {
                path: "/b".into(),
                digest: "sha256:art".into(),
                exported_at: "t".into(),
                streams: vec![StreamCount {
                    name: "CHAT_m".into(),
                    messages: 2,
                    last_seq: 2,
                }],
            }),
            receipt: None,
        });
        observed(&[("m", s)])
    }

    fn removing(journaled: bool) -> Removals {
        Removals(
            [(
                name("m"),
                Removal {
                    account: "AMOVE".into(),
                    committed: false,
                    journaled,
                    receipt: journaled.then(|| "sha256:journaled".to_string()),
                },
            )]
            .into(),
        )
    }

    fn receipt() -> (String, Receipt) {
        (
            "sha256:receipt".into(),
            Receipt {
                kind: crate::adopt::relocation::RECEIPT_KIND.into(),
                format_version: crate::adopt::relocation::RECEIPT_FORMAT,
                space: "m".into(),
                source_account: "AMOVE".into(),
                artifact_digest: "sha256:art".into(),
                destination_operator: "O".into(),
                destination_account: "A".into(),
                streams: vec![StreamCount {
                    name: "CHAT_m".into(),
                    messages: 2,
                    last_seq: 2,
                }],
                verified_at: "t".into(),
                by: "ops@b".into(),
            },
        )
    }

    #[test]
    fn a_moving_space_is_removed_only_fenced_and_with_its_receipt() {
        let fenced = moving(SpaceState::Suspended);
        let mut r = removing(false);
        let e = prove(&fenced, &mut r, &[]).unwrap_err();
        assert!(e.what.contains("is being moved") && e.what.contains("phase exported"));
        let mut r = removing(false);
        assert_eq!(
            prove(&fenced, &mut r, &[receipt()]).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(r.0[&name("m")].receipt.as_deref(), Some("sha256:receipt"));
        // Served again (its JWT unchanged: the limits were the declared ones all along).
        let served = moving(SpaceState::Active);
        let mut r = removing(false);
        let e = prove(&served, &mut r, &[receipt()]).unwrap_err();
        assert!(e.what.contains("served again"), "{}", e.what);
        // An interrupted removal passed this check when it was planned: finished, its
        // receipt kept from the journal.
        let mut r = removing(true);
        prove(&served, &mut r, &[]).unwrap();
        assert_eq!(r.0[&name("m")].receipt.as_deref(), Some("sha256:journaled"));
        // A receipt nothing needs is said.
        let mut none = Removals::default();
        let warned = prove(&fenced, &mut none, &[receipt()]).unwrap();
        assert_eq!(warned.len(), 1);
    }
}
