//! Which spaces the plan removes: the removals an open journal names (always finished: their
//! commit point may have passed) and the spaces of the inventory no longer in `cotal.toml`.

use crate::desired::Desired;
use crate::model::SpaceName;
use crate::observed::{Inventory, JournalState, Observed};
use std::collections::BTreeMap;

/// One removal the plan performs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removal {
    pub account: String,
    /// Its commit point already passed in an interrupted apply.
    pub committed: bool,
    /// Named by the open journal (finished whatever `cotal.toml` says).
    pub journaled: bool,
    /// The digest of the receipt that proves the space's recorded move ([`super::relocations`]);
    /// `None` for a space that is not moving.
    pub receipt: Option<String>,
}

/// The plan's removals by space name.
#[derive(Debug, Clone, Default)]
pub struct Removals(pub BTreeMap<SpaceName, Removal>);

impl Removals {
    /// Removals the operator asks for now (journaled ones are only being finished).
    pub fn requested(&self) -> impl Iterator<Item = &SpaceName> {
        self.0.iter().filter(|(_, r)| !r.journaled).map(|(n, _)| n)
    }

    /// Whether `name` leaves the inventory: its record holds the removed account (a name whose
    /// record holds a new account stays, as that new account).
    pub fn leaving(&self, inv: &Inventory, name: &SpaceName) -> bool {
        self.0.get(name).is_some_and(|r| {
            inv.spaces
                .get(name)
                .is_some_and(|s| s.account_pub == r.account)
        })
    }

    pub fn iter(&self) -> impl Iterator<Item = (&SpaceName, &Removal)> {
        self.0.iter()
    }
}

/// Collect the removals: the open journal's first, then spaces gone from `cotal.toml`.
pub fn collect(desired: &Desired, observed: &Observed) -> Removals {
    let mut out = BTreeMap::new();
    if let JournalState::Valid(j) = &observed.journal {
        for r in &j.removals {
            out.insert(
                r.space.clone(),
                Removal {
                    account: r.account.clone(),
                    committed: r.committed,
                    journaled: true,
                    receipt: r.receipt.clone(),
                },
            );
        }
    }
    for (name, space) in &observed.inventory.spaces {
        if !desired.spaces.contains_key(name) && !out.contains_key(name) {
            out.insert(
                name.clone(),
                Removal {
                    account: space.account_pub.clone(),
                    committed: false,
                    journaled: false,
                    receipt: None,
                },
            );
        }
    }
    Removals(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SpaceSpec;
    use crate::testing::{journal, name, observed, space};

    #[test]
    fn journaled_removals_come_first_and_only_requested_ones_are_guarded() {
        let spec = SpaceSpec::default();
        let mut o = observed(&[
            ("keep", space("AKEEP", &spec)),
            ("gone", space("AGONE", &spec)),
            ("old", space("ANEW", &spec)),
        ]);
        o.journal = journal("old", "AOLD", true);
        let desired =
            crate::desired::parse("version = 1\n[spaces.keep]\n[spaces.old]\n", "f").unwrap();
        let r = collect(&desired, &o);
        assert_eq!(r.0.len(), 2);
        assert!(r.0[&name("old")].journaled && r.0[&name("old")].committed);
        assert!(!r.0[&name("gone")].journaled);
        assert_eq!(r.requested().collect::<Vec<_>>(), vec![&name("gone")]);
        // "old" is being re-added under a new account: the removal of AOLD does not take it.
        assert!(!r.leaving(&o.inventory, &name("old")));
        assert!(r.leaving(&o.inventory, &name("gone")));
    }
}
