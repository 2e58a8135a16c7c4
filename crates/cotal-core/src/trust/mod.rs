//! What proves who signed what: typed NATS JWTs, signed and verified ([`jwt`]); a seed that
//! never prints ([`secret`]); the sha256 digests plans and generation records pin ([`digest`]);
//! the state's signature ([`state_signature`]); the cluster's route credential ([`route_auth`]).
//!
//! Pure: keys are drawn by the edge (`cotal::mint`) and handed in.

pub mod digest;
pub mod jwt;
pub mod route_auth;
pub mod secret;
pub mod state_signature;
