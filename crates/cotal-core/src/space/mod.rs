//! A space's contents and who may use them: its streams and buckets ([`streams`]), its channels
//! ([`channels`]), its members and their channel ACLs ([`members`]), the permissions of every
//! user cotal mints ([`permissions`]), the accounts beside a space's ([`side_accounts`]), and a
//! space's derived state ([`lifecycle`]).
//!
//! Pure, like the rest of the core.

pub mod channels;
pub mod lifecycle;
pub mod members;
pub mod permissions;
pub mod side_accounts;
pub mod streams;
