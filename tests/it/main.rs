//! The integration tests, one binary (one link instead of one per file):
//!
//! - pure tiers, run by a plain `cargo test` without nats-server: [`plan_snapshots`] (planning
//!   and rendering as snapshots), [`schema`], [`readers_never_panic`], [`converge`],
//!   [`executor`] (against a fake broker), [`architecture`] (the pure core imports no IO);
//! - the CLI tier, the built binary on temp roots with the broker stopped: [`cli`],
//!   [`cli_snapshots`] (what the operator reads, as redacted snapshots), [`hostile`];
//! - the generated references and the module map kept current: [`reference`];
//! - the real-broker tier, behind the `real-broker` feature (`scripts/test.sh` turns it on and
//!   installs nats-server): [`broker`], with the crash matrix and the trust tests.
//!
//! Helpers shared by all of them are in [`support`].

mod adopt;
mod architecture;
mod cli;
mod cli_snapshots;
mod converge;
mod executor;
mod folder_cache;
#[path = "docs/generate.rs"]
mod generate_docs;
mod hostile;
mod plan_snapshots;
mod readers_never_panic;
mod reference;
mod schema;
mod signature_memo;
mod support;

#[cfg(feature = "real-broker")]
mod broker;
