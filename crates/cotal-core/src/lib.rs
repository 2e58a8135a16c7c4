//! cotal-core: what cotal decides, as plain functions of their inputs. `desired + observed +
//! intent -> plan` lives here, with the vocabulary, `cotal.toml` parsed and edited, the
//! topology, the streams, channels, members and permissions of a space, its lifecycle, the JWTs,
//! the state and its signature, what observation found and the drift verdicts, adoption's
//! planning, the planner and every report. Nothing here reads a file, the environment or the
//! clock, starts a process or a thread of its own (rayon's `join` is its one parallelism, on
//! rayon's pool), draws randomness or talks to a broker: the `cotal`
//! crate holds those edges and re-exports every module below under its own name, so
//! `cotal::plan` is `cotal_core::plan`. `clippy.toml` disallows the IO, and
//! `tests/it/architecture.rs` (in `cotal`) checks the sources and this manifest.
//!
//! | module | what it owns |
//! |---|---|
//! | [`desired`] | `cotal.toml`, the room of what the operator declares: parsed and validated (file:line:column errors), and beside it: |
//! | [`desired::topology`] | the broker's nodes: a single server is a cluster of one; `[cluster]` parsed and validated |
//! | [`desired::tls_config`] | the `[broker.tls]` and `[cluster.tls]` tables as declared, parsed and validated |
//! | [`desired::include`] | `[broker] include`: what an operator's nats-server settings may hold, parsed as nats-server reads them (the edge reads the file) |
//! | [`desired::edit`] | format-preserving edits of `cotal.toml` for the space verbs |
//! | [`desired::toml_fmt`] | `cotal fmt`: cotal.toml in one canonical layout, comments and meaning kept |
//! | [`model`] | the vocabulary: space names (and how they are shown), states, limits, sizes, listeners |
//! | [`observed`] | what is there, the room of observation's data: what observation found, as plain data, and beside it: |
//! | [`observed::drift_verdicts`] | verdicts on stream configs and what vouches for them (the drift cache's data) |
//! | [`observed::state`] | the secret-free state `plan --state` plans against (export, and back to an observation) |
//! | [`plan`] | `(desired, observed, intent) -> Plan` in named stages (`plan::Intent`: the rotations and `--allow-degraded` of one run); the closed `Step` set; refusals |
//! | [`report`] | everything cotal prints: a plan as text, JSON and markdown; the status as text and OpenMetrics; the space list and the creds list as tables and JSON; the versioned JSON documents of what each verb did |
//! | [`outcomes`] | what the edge's operations tell and return (what an apply did, `up`'s and `down`'s events, a space's failed step), as plain data for the reports |
//! | [`render`] | `server.conf` and its nats-server digest from the inventory; its parsed view |
//! | [`space`] | a space's contents and who may use them: |
//! | [`space::streams`] | the one table of a space's streams and buckets |
//! | [`space::channels`] | channels declared per space: validation, wire form, diff against the registry |
//! | [`space::members`] | declared members of a space and their channel ACLs: who may read and post where, the `acl` records, what a plan changes of them |
//! | [`space::permissions`] | the permissions of every user cotal mints |
//! | [`space::lifecycle`] | a space's derived state and servability |
//! | [`space::side_accounts`] | the accounts beside a space's: one per declared member, its observer's and its evictor's, each importing from the space only what its principal may do; the space's and the system account's exports; the monitoring account; the check of kept imports |
//! | [`trust`] | what proves who signed what: |
//! | [`trust::jwt`] | typed NATS JWTs, signing and verification |
//! | [`trust::digest`] | the sha256 digests plans and generation records pin |
//! | [`trust::secret`] | a seed that never prints |
//! | [`trust::state_signature`] | the state's signature: sign with the root's state key, verify against the key given from outside the pull request |
//! | [`trust::route_auth`] | the cluster's route credential, derived from the operator seed, and its include file |
//! | [`adopt`] | what other tools and brokers hand over: adoption of a root the original Cotal made (what was found, what adopting it does, the `cotal.toml` it writes), and beside it: |
//! | [`adopt::nsc`] | adoption of an operator managed with nsc: its store's keys and JWTs as a broker and its spaces, the claims cotal does not model |
//! | [`adopt::relocation`] | a space's move to another broker: the source's record, the destination's receipt, and the check of one against the other |
//! | [`audit`] | the lifecycle audit's record types |
//! | [`error`] | the error kinds and their exit codes |
//! | [`diagnostic`] | a refusal or error as data: what, tenants, blast radius, next steps |
//! | `testing` | plain-data fixtures shared by the unit and the integration tests (hidden, not an API) |
//!
//! docs/design/architecture.md ("The shape of the code") describes the two crates.

#![forbid(unsafe_code)]
// Unit tests draw fresh keys and read the example files; the library itself is linted without
// this (clippy's lib target), so production code stays held to clippy.toml.
#![cfg_attr(test, allow(clippy::disallowed_methods, clippy::disallowed_types))]

pub mod adopt;
pub mod audit;
pub mod desired;
pub mod diagnostic;
pub mod error;
pub mod model;
pub mod observed;
pub mod outcomes;
pub mod plan;
pub mod render;
pub mod report;
pub mod space;
#[doc(hidden)]
pub mod testing;
pub mod trust;
