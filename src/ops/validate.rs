//! `cotal validate`: `cotal.toml` checked as a plan would check it before reading any record:
//! its schema, names, limits, topology and channels ([`crate::desired::parse`]), and the files
//! it names (`[broker.tls]`, `[cluster.tls]`, `[broker] include`). No root, no seed and no
//! broker are read, so it runs in a pre-commit hook or on a pull request's checkout.

use crate::desired::Desired;
use crate::store::Root;

/// What a valid file declares, for the one line that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Valid {
    pub spaces: usize,
    /// Nodes of a cluster (`None`: one server).
    pub cluster_nodes: Option<usize>,
}

/// Check `text` (the file at `file`, whose folder `dir` the paths it names are relative to).
/// Every problem is `FILE:LINE:COLUMN: what` where the file says it, else names the file.
pub fn validate(dir: &Root, file: &str, text: &str) -> Result<Valid, Vec<String>> {
    let desired: Desired = crate::desired::parse(text, file).map_err(|e| vec![e])?;
    let mut problems = Vec::new();
    if let Some(tls) = &desired.broker.tls {
        problems.extend(crate::tls::observe(dir, tls, crate::tls::Use::Listener).problems);
    }
    if let Some(tls) = &desired.topology.route_tls {
        problems.extend(crate::tls::observe(dir, tls, crate::tls::Use::Routes).problems);
    }
    if let Some(include) = &desired.broker.include {
        problems.extend(crate::include::observe(dir.dir(), &include.path, &include.at).problems);
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Valid {
        spaces: desired.spaces.len(),
        cluster_nodes: desired
            .topology
            .is_cluster()
            .then_some(desired.topology.nodes.len()),
    })
}
