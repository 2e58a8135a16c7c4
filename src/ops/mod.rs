//! The operations below the commands: each takes plain values (what a command parsed), does the
//! work through observation, the planner, the executor, the broker and the store, and returns
//! what happened as a value (or reports progress as typed events) for the command to render.
//! Commands parse, call one operation and print; operations never print.

pub mod adopt;
pub mod adopt_nsc;
pub mod apply;
pub mod backup;
pub mod broker;
pub mod creds;
pub mod evict;
pub mod init;
pub mod relocation;
pub mod routes;
pub mod space_list;
pub mod state;
pub mod status;
pub mod validate;
