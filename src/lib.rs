//! cotal: declarative tenants (spaces) on a shared NATS broker.
//!
//! The map, in the order a change flows through it:
//!
//! | module | what it owns | pure? |
//! |---|---|---|
//! | [`cli`] | the command line: parse, call one operation, render its result; one file per verb | edge |
//! | [`ops`] | the operations below the commands: init, adopt, apply, up, down, the state after an apply, status, the space list, backups, credentials, eviction | edge |
//! | [`desired`] | `cotal.toml` parsed and validated (file:line:column errors) | pure |
//! | [`tls_config`] | the `[broker.tls]` and `[cluster.tls]` tables as declared, parsed and validated | pure |
//! | [`topology`] | the broker's nodes: a single server is a cluster of one; `[cluster]` parsed and validated | pure |
//! | [`model`] | the vocabulary: space names (and how they are shown), states, limits, sizes, listeners | pure |
//! | [`observe`] | reads everything a plan may depend on into an [`observed::Observed`] | edge (IO) |
//! | [`observed`] | what observation found, as plain data | pure |
//! | [`drift_verdicts`] | verdicts on stream configs and what vouches for them (the drift cache's data) | pure |
//! | [`plan`] | `(desired, observed, intent) -> Plan` in named stages (`plan::Intent`: the rotations and `--allow-degraded` of one run); the closed `Step` set; refusals | pure |
//! | [`report`] | a plan as text, JSON and markdown; the versioned JSON documents of what each verb did | pure |
//! | [`render`] | `server.conf` and its nats-server digest from the inventory; its parsed view | pure |
//! | [`route_auth`] | the cluster's route credential, derived from the operator seed, and its include file | pure |
//! | [`apply`] | the executor: the journal, one `match` over `Step`, promotion stages, rollback, audit | edge |
//! | [`broker`] | the only async IO boundary: identity from `/proc` and the kernel's socket table (`sock_diag`), the process, the system account's control plane, provisioning | edge (IO) |
//! | [`store`] | every artifact under the root, one module each; atomic writes, no-follow reads | edge (IO) |
//! | [`lifecycle`] | a space's derived state and servability | pure |
//! | [`relocation`] | a space's move to another broker: the source's record, the destination's receipt, and the check of one against the other | pure |
//! | [`adopt`] | adoption of a root the original Cotal made: what was found, what adopting it does, the `cotal.toml` it writes | pure |
//! | [`members`] | declared members of a space and their channel ACLs: who may read and post where, the `acl` records, what a plan changes of them | pure |
//! | [`side_accounts`] | the accounts beside a space's: one per declared member, its observer's and its evictor's, each importing from the space only what its principal may do; the space's and the system account's exports; the monitoring account; the check of kept imports | pure |
//! | [`nsc`] | adoption of an operator managed with nsc: its store's keys and JWTs as a broker and its spaces, the claims cotal does not model | pure |
//! | [`streams`] | the one table of a space's streams and buckets | pure |
//! | [`permissions`] | the permissions of every user cotal mints | pure |
//! | [`jwt`] | typed NATS JWTs, signing and verification | pure |
//! | [`digest`] | the sha256 digests plans and generation records pin | pure |
//! | [`mint`] | fresh keys and tokens (randomness, the clock) | edge |
//! | [`clock`] | the wall clock, read in one place | edge |
//! | [`operator`] | who is acting: user, host, lock holder | edge |
//! | [`audit`] | the lifecycle audit's record types | pure |
//! | [`credentials`] | users handed to people: minted with a profile and an expiry, recorded, revoked | edge |
//! | [`backup`] | per-space backup and restore of a preserved store | edge (IO) |
//! | [`root_backup`] | the root's trust and records, backed up and brought up on a new host | edge (IO) |
//! | [`edit`] | format-preserving edits of `cotal.toml` for the space verbs | pure |
//! | [`channels`] | channels declared per space: validation, wire form, diff against the registry | pure |
//! | [`secret`] | a seed that never prints | pure |
//! | [`tls`] | the TLS material of `[broker.tls]` and `[cluster.tls]`: read, parsed, checked, fingerprinted | edge (IO) |
//! | [`include`] | `[broker] include`: an operator's nats-server settings, read, checked and inlined | edge (IO) |
//! | [`state`] | the secret-free state `plan --state` plans against (export, and back to an observation) | pure |
//! | [`state_signature`] | the state's signature: sign with the root's state key, verify against the key given from outside the pull request | pure |
//! | [`error`] | the error kinds and their exit codes | pure |
//! | [`diagnostic`] | a refusal or error as data: what, tenants, blast radius, next steps | pure |
//! | [`interrupt`] | SIGINT and SIGTERM during an apply: stop at the next step boundary, a second at once | edge |
//! | [`toml_fmt`] | `cotal fmt`: cotal.toml in one canonical layout, comments and meaning kept | pure |
//! | [`fault`] | named crash and pause points (fault-injection builds) | edge |
//! | `testing` | fixtures shared by the unit and the integration tests (hidden, not an API) | tests |
//!
//! docs/design/architecture.md describes the shape; CONTRIBUTING.md how to work in it.
//! `tests/it/architecture.rs` fails when a pure module imports IO, a process, the environment,
//! the clock, randomness or the broker.

#![forbid(unsafe_code)]

pub mod adopt;
pub mod apply;
pub mod audit;
pub mod backup;
pub mod broker;
pub mod channels;
pub mod cli;
pub mod clock;
pub mod credentials;
pub mod desired;
pub mod diagnostic;
pub mod digest;
pub mod drift_verdicts;
pub mod edit;
pub mod error;
pub mod fault;
pub mod include;
pub mod interrupt;
pub mod jwt;
pub mod lifecycle;
pub mod members;
pub mod mint;
pub mod model;
pub mod nsc;
pub mod observe;
pub mod observed;
pub mod operator;
pub mod ops;
pub mod permissions;
pub mod plan;
pub mod relocation;
pub mod render;
pub mod report;
pub mod root_backup;
pub mod route_auth;
pub mod secret;
pub mod side_accounts;
pub mod state;
pub mod state_signature;
pub mod store;
pub mod streams;
#[doc(hidden)]
pub mod testing;
pub mod tls;
pub mod tls_config;
pub mod toml_fmt;
pub mod topology;
