//! The desired state an imperative verb is judged on: `cotal.toml` for the spaces it names, and
//! for every other space what is applied now (a pending add of another space is left out, a
//! pending removal kept, a pending change undone). Its plan then holds only the named spaces'
//! changes, and no guard refuses it for another space's pending edit.
//!
//! Invariant: pure; for an applied space, the spec it derives re-issues nothing (its JWT's
//! limits are exactly `AccountLimits::for_space` of it) and records no protection change.

use crate::desired::Desired;
use crate::model::{ByteSize, Limits, SpaceName, SpaceSpec, SpaceState};
use crate::observed::{Observed, ObservedSpace};
use crate::trust::jwt::{AccountLimits, UNLIMITED};
use std::collections::BTreeSet;

/// `desired` with every space outside `only` as it is applied.
pub fn narrow(desired: &Desired, observed: &Observed, only: &BTreeSet<SpaceName>) -> Desired {
    let mut out = desired.clone();
    out.spaces
        .retain(|name, _| only.contains(name) || observed.inventory.spaces.contains_key(name));
    for (name, space) in &observed.inventory.spaces {
        if !only.contains(name) {
            // An applied space keeps what else the file declares of it (its channels, members,
            // suspension reason); only its spec is what is applied. A pending add outside
            // `only` was left out whole above: its channels are neither written nor warned about
            // by this verb (the plan says it is pending, for `cotal apply`).
            out.spaces.entry(name.clone()).or_default().spec = applied_spec(space);
        }
    }
    out
}

/// The spaces outside `only` whose `cotal.toml` entry is not what is applied (an add, a
/// removal, a change): what the verb leaves for `cotal apply`.
pub fn pending_elsewhere(
    desired: &Desired,
    narrowed: &Desired,
    only: &BTreeSet<SpaceName>,
) -> Vec<SpaceName> {
    let same = |a: Option<&SpaceSpec>, b: Option<&SpaceSpec>| match (a, b) {
        (Some(a), Some(b)) => {
            AccountLimits::for_space(a) == AccountLimits::for_space(b) && a.protect == b.protect
        }
        (None, None) => true,
        _ => false,
    };
    desired
        .spaces
        .keys()
        .chain(narrowed.spaces.keys())
        .filter(|n| !only.contains(*n))
        .filter(|n| !same(desired.spec(n), narrowed.spec(n)))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The spec an applied space's record says it has. An archived space's record holds its
/// fence's JWT (JetStream off): its storage limits read as unset, not as zero bytes.
pub fn applied_spec(space: &ObservedSpace) -> SpaceSpec {
    let l = &space.limits;
    let some = |v: i64| (v != UNLIMITED && v >= 0).then_some(v as u64);
    let quiesced = space.archived.is_some() && l.mem_storage == 0 && l.disk_storage == 0;
    let storage = |v: i64| some(v).filter(|_| !quiesced);
    SpaceSpec {
        state: if space.archived.is_some() {
            SpaceState::Archived
        } else if l.is_suspended() {
            SpaceState::Suspended
        } else {
            SpaceState::Active
        },
        protect: space.protect_recorded,
        limits: Limits {
            // A suspended account's `conn` is 0 whatever its limit: any value renders the same.
            max_connections: if l.is_suspended() { None } else { some(l.conn) },
            max_storage: storage(l.disk_storage).map(ByteSize),
            max_memory: storage(l.mem_storage).map(ByteSize),
            max_streams: some(l.streams),
            max_consumers: some(l.consumer),
            max_payload: some(l.payload).map(ByteSize),
        },
    }
}

/// Whether `applied_spec` reads `limits` back exactly (what the invariant needs).
#[cfg(test)]
fn round_trips(limits: &AccountLimits) -> bool {
    let mut space = crate::testing::space("A", &SpaceSpec::default());
    space.limits = *limits;
    AccountLimits::for_space(&applied_spec(&space)) == *limits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{name, observed, space};

    #[test]
    fn every_applied_spec_re_issues_nothing() {
        let limited = SpaceSpec {
            limits: Limits {
                max_connections: Some(7),
                max_storage: Some(ByteSize(1 << 30)),
                max_memory: Some(ByteSize(1 << 20)),
                max_streams: Some(40),
                max_consumers: Some(9),
                max_payload: Some(ByteSize(4096)),
            },
            ..SpaceSpec::default()
        };
        for spec in [
            SpaceSpec::default(),
            limited,
            SpaceSpec {
                state: SpaceState::Suspended,
                ..limited
            },
        ] {
            assert!(round_trips(&AccountLimits::for_space(&spec)), "{spec:?}");
        }
    }

    #[test]
    fn other_spaces_keep_what_is_applied() {
        let applied = SpaceSpec {
            protect: true,
            ..SpaceSpec::default()
        };
        let mut gone = space("AGONE", &applied);
        gone.protect_recorded = true;
        let o = observed(&[
            ("gone", gone),
            ("mine", space("AMINE", &SpaceSpec::default())),
        ]);
        let d = crate::desired::parse(
            "version = 1\n[spaces.mine]\nstate = \"suspended\"\n[spaces.other]\n",
            "f",
        )
        .unwrap();
        let n = narrow(&d, &o, &BTreeSet::from([name("mine")]));
        let names: Vec<&str> = n.spaces.keys().map(|s| s.as_str()).collect();
        assert_eq!(
            names,
            ["gone", "mine"],
            "the other add left out, the removal undone"
        );
        assert!(n.spaces[&name("gone")].spec.protect);
        assert_eq!(n.spaces[&name("mine")].spec.state, SpaceState::Suspended);
        let pending = pending_elsewhere(&d, &n, &BTreeSet::from([name("mine")]));
        assert_eq!(pending, [name("gone"), name("other")]);
    }
}
