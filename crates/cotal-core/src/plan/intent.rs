//! What one run asks beyond `cotal.toml`: keys to rotate (`cotal rotate`), spaces to empty
//! (`cotal space purge`), the receipts of moves (`--relocated`), and whether to proceed
//! with nodes down (`--allow-degraded`). The plan's third input, next to the desired state and
//! the observation; never read from the file, so a file always means the same plan.

use crate::model::SpaceName;
use std::collections::BTreeSet;

/// The operator's intent for this run, beside the desired state.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Intent {
    /// Keys to replace: the plan then re-issues with new keys what it names.
    pub rotate: Rotate,
    /// Spaces to empty (`cotal space purge`): every stream and bucket loses its messages and
    /// keeps its config.
    pub purge: BTreeSet<SpaceName>,
    /// Proceed when a quorum of the nodes runs and the others do not (`--allow-degraded`).
    pub allow_degraded: bool,
    /// Receipts of moves (`--relocated FILE`), each with the digest of its file: a removal
    /// of a space whose relocation is recorded needs the one its destination wrote.
    pub relocated: Vec<(String, crate::adopt::relocation::Receipt)>,
    /// Drop the revocations of monitoring users whose recorded expiry has passed
    /// (`--prune-revocations`): never by itself, so a host clock that jumps ahead cannot let
    /// revoked creds in again.
    pub prune_revocations: bool,
}

/// Keys to replace in this run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rotate {
    /// New system signing keys (control, observer, monitor, evictor), every $SYS creds
    /// re-minted.
    pub sys: bool,
    /// New account signing keys for these spaces; users signed by the old keys are refused.
    pub accounts: BTreeSet<SpaceName>,
}
