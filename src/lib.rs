//! cotal: declarative tenants (spaces) on a shared NATS broker.
//!
//! Pure core: [`model`], [`desired`], [`jwt`], [`render`], [`plan`], [`report`], [`digest`].
//! Edges: [`store`] (every on-disk artifact), [`observe`], [`apply`], [`broker`], [`cli`].

pub mod apply;
pub mod audit;
pub mod backup;
pub mod broker;
pub mod cli;
pub mod desired;
pub mod digest;
pub mod edit;
pub mod error;
pub mod fault;
pub mod jwt;
pub mod lifecycle;
pub mod mint;
pub mod model;
pub mod observe;
pub mod observed;
pub mod permissions;
pub mod plan;
pub mod render;
pub mod report;
pub mod secret;
pub mod store;
pub mod streams;
