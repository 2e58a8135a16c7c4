//! cotal: declarative tenants (spaces) on a shared NATS broker.
//!
//! Two crates. [`cotal_core`] decides: `desired + observed + intent -> plan` and everything it
//! needs, pure. This one holds the edges (the files under the root, the broker, processes, the
//! clock, randomness) and the command line, and re-exports every core module under its own name
//! (`cotal::plan` is `cotal_core::plan`), so the two read as one library.
//!
//! The map, in the order a change flows through it:
//!
//! | module | what it owns | pure? |
//! |---|---|---|
//! | [`cotal_core`] | what cotal decides (the model, `cotal.toml`, the planner, the reports), pure; every module of it is re-exported here by its name | pure |
//! | [`cli`] | the command line: parse, call one operation, render its result; one file per verb | edge |
//! | [`ops`] | the operations below the commands: init, adopt, apply, up, down, the state after an apply, status, the space list, backups, credentials, eviction | edge |
//! | [`observe`] | reads everything a plan may depend on into an [`observed::Observed`] | edge (IO) |
//! | [`apply`] | the executor: the journal, one `match` over `Step`, promotion stages, rollback, audit | edge |
//! | [`broker`] | the only async IO boundary: identity from `/proc` and the kernel's socket table (`sock_diag`), the process, the system account's control plane, provisioning | edge (IO) |
//! | [`store`] | every artifact under the root, one module each; atomic writes, no-follow reads; the caches in one room (`store::caches`: what vouches for each, what voids it, who writes and reads it) | edge (IO) |
//! | [`mint`] | fresh keys and tokens (randomness, the clock) | edge |
//! | [`clock`] | the wall clock, read in one place | edge |
//! | [`operator`] | who is acting: user, host, lock holder | edge |
//! | [`credentials`] | users handed to people: minted with a profile and an expiry, recorded, revoked | edge |
//! | [`backup`] | per-space backup and restore of a preserved store | edge (IO) |
//! | [`root_backup`] | the root's trust and records, backed up and brought up on a new host | edge (IO) |
//! | [`tls`] | the TLS material of `[broker.tls]` and `[cluster.tls]`: read, parsed, checked, fingerprinted | edge (IO) |
//! | [`interrupt`] | SIGINT and SIGTERM during an apply: stop at the next step boundary, a second at once | edge |
//! | [`fault`] | named crash and pause points (fault-injection builds) | edge |
//! | `testing` | fixtures shared by the unit and the integration tests (hidden, not an API) | tests |
//! | [`include`] | `[broker] include` read from the root (what it may hold is the core's, re-exported) | edge (IO) |
//!
//! docs/design/architecture.md describes the shape; CONTRIBUTING.md how to work in it.
//! `tests/it/architecture.rs` fails when the core's manifest gains an IO dependency or one of its
//! modules imports IO, a process, the environment, the clock, randomness or the broker.

#![forbid(unsafe_code)]

pub use cotal_core;
pub use cotal_core::{
    adopt, audit, desired, diagnostic, error, model, observed, outcomes, plan, render, report,
    space, trust,
};

pub mod apply;
pub mod backup;
pub mod broker;
pub mod cli;
pub mod clock;
pub mod credentials;
pub mod fault;
pub mod include;
pub mod interrupt;
pub mod mint;
pub mod observe;
pub mod operator;
pub mod ops;
pub mod root_backup;
pub mod store;
#[doc(hidden)]
pub mod testing;
pub mod tls;
