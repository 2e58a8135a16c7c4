//! What the desired spaces commit the broker's JetStream to, and the refusal when it cannot
//! hold it.
//!
//! nats-server (2.15, measured) enables JetStream for an account only while the sum of every
//! account's positive `max_storage` (and `max_memory`) stays within its file (memory) store,
//! and every stream's `max_bytes` is reserved up front within it: quotas cannot over-commit the
//! broker, they are commitments. A space without a `max_storage` commits what its provisioned
//! buckets reserve (and may then use everything left); one without `max_memory` commits none.
//!
//! Invariant: pure; the commitment is of the state the plan leads to (the desired spaces).

use super::guards::Refusal;
use super::list;
use crate::desired::Desired;
use crate::model::{SpaceName, human_bytes};
use crate::observed::{Capacity, Observed};

/// What one space commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpaceCommitment {
    pub space: SpaceName,
    pub file: u64,
    pub memory: u64,
    /// It has no `max_storage`: it may take whatever is left of the file store.
    pub unlimited_file: bool,
}

/// What the desired spaces commit the broker to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Commitment {
    pub file: u64,
    pub memory: u64,
    pub spaces: Vec<SpaceCommitment>,
}

/// The commitment of the desired spaces.
pub fn commitment(desired: &Desired) -> Commitment {
    let mut out = Commitment::default();
    for (name, spec) in desired.specs() {
        let c = SpaceCommitment {
            space: name.clone(),
            file: spec
                .limits
                .max_storage
                .map(|b| b.0)
                .unwrap_or_else(|| crate::space::streams::reserved_storage(None)),
            memory: spec.limits.max_memory.map(|b| b.0).unwrap_or(0),
            unlimited_file: spec.limits.max_storage.is_none(),
        };
        out.file = out.file.saturating_add(c.file);
        out.memory = out.memory.saturating_add(c.memory);
        out.spaces.push(c);
    }
    out
}

/// What the applied spaces commit: each record's own limits (`-1` storage: its reservation).
pub fn applied(observed: &Observed) -> Commitment {
    let mut out = Commitment::default();
    for (name, space) in &observed.inventory.spaces {
        let limits = &space.limits;
        let c = SpaceCommitment {
            space: name.clone(),
            file: u64::try_from(limits.disk_storage)
                .unwrap_or_else(|_| crate::space::streams::reserved_storage(None)),
            memory: u64::try_from(limits.mem_storage).unwrap_or(0),
            unlimited_file: limits.disk_storage < 0,
        };
        out.file = out.file.saturating_add(c.file);
        out.memory = out.memory.saturating_add(c.memory);
        out.spaces.push(c);
    }
    out
}

/// Refuse a plan whose spaces commit more than the broker's JetStream can hold.
pub fn guard_capacity(desired: &Desired, observed: &Observed) -> Result<(), Refusal> {
    let c = commitment(desired);
    let cap = &observed.capacity;
    let mut over = Vec::new();
    if c.file > cap.file.size {
        over.push(over_by("max_storage", "file", c.file, cap, &c, |s| s.file));
    }
    if c.memory > cap.memory.size {
        over.push(over_by("max_memory", "memory", c.memory, cap, &c, |s| {
            s.memory
        }));
    }
    if over.is_empty() {
        return Ok(());
    }
    Err(crate::diagnostic::Diagnostic::refusal(
        format!(
            "{}; nats-server enables JetStream for a space only while every space's quota fits in its store, so the spaces past it would get none.",
            over.join("; ")
        ),
        "none, nothing was changed.",
        "lower max_storage / max_memory (in [defaults.limits] or per space), or give the broker more ([broker] max_file_store / max_memory_store, within what the machine has)",
    ))
}

/// Files the broker holds open beside its streams' (listeners, its log, cotal's own
/// connections), left out of what the spaces may use.
pub const OPEN_FILES_RESERVED: u64 = 64;

/// Files one space holds open: one per stream and bucket (measured with nats-server 2.15.1 when
/// a space held 12: 40 spaces held 491 descriptors, 80 held 971; with 15, 22 spaces fit a limit
/// of 400 in `a_running_broker_at_its_open_file_limit_refuses_adds_before_any_change`).
pub fn open_files_per_space() -> u64 {
    crate::space::streams::count() as u64
}

/// How many spaces an open-file limit holds.
pub fn spaces_within(limit: u64) -> u64 {
    limit.saturating_sub(OPEN_FILES_RESERVED) / open_files_per_space()
}

/// Refuse adding spaces past what the broker's open-file limit holds: nats-server would fail
/// the stream creations past it, with half a broker provisioned. Only adds are refused: a
/// broker already past its limit keeps every other change (and says so in `status`).
pub fn guard_open_files<'a>(
    desired: &Desired,
    observed: &Observed,
    adds: impl Iterator<Item = &'a SpaceName>,
) -> Result<(), Refusal> {
    let adds: Vec<&SpaceName> = adds.collect();
    let Some(files) = observed.capacity.open_files else {
        return Ok(());
    };
    let spaces = desired.spaces.len() as u64;
    let need = OPEN_FILES_RESERVED + spaces * open_files_per_space();
    if adds.is_empty() || need <= files.limit {
        return Ok(());
    }
    Err(crate::diagnostic::Diagnostic::refusal(
        format!(
            "adding {} would take the broker to {spaces} spaces, which hold {need} files open ({} per space, one per stream and bucket, and {OPEN_FILES_RESERVED} of its own), more than its open-file limit of {} ({}): it holds {} spaces.",
            super::list_some(adds.iter().copied(), 8),
            open_files_per_space(),
            files.limit,
            files.source,
            spaces_within(files.limit)
        ),
        "none, nothing was changed.",
        "raise the limit for the user that runs the broker (`ulimit -Hn`, `LimitNOFILE=` of a systemd unit, or /etc/security/limits.conf), then `cotal down` and `cotal up` so the broker gets it; or add fewer spaces",
    ))
}

/// One store over its size, in words, with the largest commitments named.
fn over_by(
    limit: &str,
    store: &str,
    committed: u64,
    cap: &Capacity,
    c: &Commitment,
    of: fn(&SpaceCommitment) -> u64,
) -> String {
    let size = if store == "file" {
        cap.file
    } else {
        cap.memory
    };
    let mut largest: Vec<&SpaceCommitment> = c.spaces.iter().filter(|s| of(s) > 0).collect();
    largest.sort_by(|a, b| of(b).cmp(&of(a)).then(a.space.cmp(&b.space)));
    let named: Vec<String> = largest
        .iter()
        .take(5)
        .map(|s| format!("{} {}", list([&s.space]), human_bytes(of(s))))
        .collect();
    let unlimited = c.spaces.iter().filter(|s| s.unlimited_file).count();
    let reserving = if store == "file" && unlimited > 0 {
        format!(
            " ({unlimited} of them without a max_storage, each reserving {} for its artifact store and buckets)",
            human_bytes(crate::space::streams::reserved_storage(None))
        )
    } else {
        String::new()
    };
    format!(
        "the {} spaces' {limit} add up to {}{reserving}, more than the broker's JetStream {store} store of {} ({}); the largest: {}",
        c.spaces.len(),
        human_bytes(committed),
        human_bytes(size.size),
        size.source,
        named.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_past_the_open_file_limit_are_refused_and_other_changes_are_not() {
        let desired = crate::desired::parse(
            "version = 1\n[spaces.a]\n[spaces.b]\n[spaces.c]\n",
            "cotal.toml",
        )
        .unwrap();
        let mut o = crate::testing::observed(&[]);
        let per = open_files_per_space();
        let limit = OPEN_FILES_RESERVED + 2 * per;
        o.capacity.open_files = Some(crate::observed::OpenFiles {
            limit,
            source: crate::observed::OpenFilesSource::Broker,
        });
        let c = crate::testing::name("c");
        let refused = guard_open_files(&desired, &o, [&c].into_iter()).unwrap_err();
        let text = refused.to_string();
        assert!(text.contains("\"c\""), "{text}");
        assert!(
            text.contains(&format!("{} files open", OPEN_FILES_RESERVED + 3 * per)),
            "{text}"
        );
        assert!(text.contains(&format!("limit of {limit}")), "{text}");
        assert!(text.contains("it holds 2 spaces"), "{text}");
        assert!(text.contains("ulimit -Hn"), "{text}");
        // No add: nothing refused, even past the limit.
        assert!(guard_open_files(&desired, &o, std::iter::empty()).is_ok());
        // Within it: allowed.
        o.capacity.open_files.as_mut().unwrap().limit = limit + per;
        assert!(guard_open_files(&desired, &o, [&c].into_iter()).is_ok());
        // Unknown: allowed.
        o.capacity.open_files = None;
        assert!(guard_open_files(&desired, &o, [&c].into_iter()).is_ok());
    }
    use crate::observed::{CapacitySource, Store};

    fn with_capacity(file: u64, memory: u64) -> Observed {
        let mut o = crate::testing::observed(&[]);
        o.capacity = Capacity {
            file: Store {
                size: file,
                source: CapacitySource::Configured,
                used: None,
            },
            memory: Store {
                size: memory,
                source: CapacitySource::Estimated,
                used: None,
            },
            open_files: None,
        };
        o
    }

    fn desired(text: &str) -> Desired {
        crate::desired::parse(&format!("version = 1\n{text}"), "f").unwrap()
    }

    #[test]
    fn quotas_are_commitments_and_a_space_without_one_commits_its_reservation() {
        let d = desired(
            "[defaults.limits]\nmax_storage = \"1GiB\"\nmax_memory = \"64MiB\"\n[spaces.a]\n[spaces.b.limits]\nmax_storage = \"3GiB\"\n",
        );
        let c = commitment(&d);
        assert_eq!(c.file, 4 << 30);
        assert_eq!(c.memory, 128 << 20);
        let open = commitment(&desired("[spaces.a]\n"));
        assert_eq!(open.file, crate::space::streams::reserved_storage(None));
        assert!(open.spaces[0].unlimited_file);
    }

    #[test]
    fn a_plan_that_commits_more_than_the_store_is_refused_naming_the_numbers() {
        let d = desired(
            "[spaces.a.limits]\nmax_storage = \"3GiB\"\n[spaces.b.limits]\nmax_storage = \"2GiB\"\n",
        );
        guard_capacity(&d, &with_capacity(5 << 30, 1 << 30)).unwrap();
        let r = guard_capacity(&d, &with_capacity(4 << 30, 1 << 30)).unwrap_err();
        let text = r.to_string();
        assert!(
            text.contains("add up to 5 GiB, more than the broker's JetStream file store of 4 GiB (set in cotal.toml)"),
            "{text}"
        );
        assert!(
            text.contains("the largest: \"a\" 3 GiB, \"b\" 2 GiB"),
            "{text}"
        );
        assert!(text.contains("next: lower max_storage"), "{text}");
    }
}
