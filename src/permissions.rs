//! The permissions of every user cotal mints, in one place. Pure.
//!
//! Each ephemeral user gets what its one job needs and nothing more (a removal's streams are
//! deleted by the system account's account purge, so no user of a tenant account holds a
//! delete right cotal needs); the long-lived $SYS pair
//! of a space is scoped to that space's account where NATS allows it (the evictor's KICK is
//! broker-wide by NATS's design, seed 000 section 5).

use crate::jwt::{Permission, Permissions};
use std::time::Duration;

/// How long an ephemeral user (provisioner, teardown, verifier, monitor) lives.
pub const EPHEMERAL: Duration = Duration::from_secs(300);

fn allow(publish: &[&str], subscribe: &[&str]) -> Permissions {
    Permissions {
        publish: Permission {
            allow: publish.iter().map(|s| s.to_string()).collect(),
            deny: Vec::new(),
        },
        subscribe: Permission {
            allow: subscribe.iter().map(|s| s.to_string()).collect(),
            deny: Vec::new(),
        },
    }
}

/// Creates and updates the space's streams and buckets, seeds the channel registry.
pub fn provisioner() -> Permissions {
    allow(&["$JS.API.>", "$KV.>"], &["_INBOX.>"])
}

/// Reads stream info: the backup and restore checks on an isolated broker.
pub fn reader() -> Permissions {
    allow(
        &[
            "$JS.API.INFO",
            "$JS.API.STREAM.INFO.>",
            "$JS.API.STREAM.NAMES",
        ],
        &["_INBOX.>"],
    )
}

/// Only connects: the data-plane check after a reload.
pub fn verifier() -> Permissions {
    Permissions {
        publish: Permission {
            allow: Vec::new(),
            deny: vec![">".into()],
        },
        subscribe: Permission {
            allow: Vec::new(),
            deny: vec![">".into()],
        },
    }
}

/// System-account monitor: JSZ, VARZ and account STATZ for plan and status.
pub fn monitor() -> Permissions {
    allow(
        &["$SYS.REQ.SERVER.PING.>", "$SYS.REQ.ACCOUNT.PING.STATZ"],
        &["_INBOX.>"],
    )
}

/// System-account controller of an apply: reload and confirm (`RELOAD`, `VARZ`), read which JWT
/// an account is loaded with (`ACCOUNTZ`), and purge a removed account's JetStream.
pub fn control() -> Permissions {
    allow(
        &[
            "$SYS.REQ.SERVER.*.RELOAD",
            "$SYS.REQ.SERVER.*.VARZ",
            "$SYS.REQ.SERVER.*.ACCOUNTZ",
            "$JS.API.ACCOUNT.PURGE.*",
        ],
        &["_INBOX.>"],
    )
}

/// A space's membership observer: CONNZ and connect/disconnect events of that account only.
pub fn membership_observer(account: &str) -> Permissions {
    allow(
        &[&format!("$SYS.REQ.ACCOUNT.{account}.CONNZ")],
        &[
            &format!("$SYS.ACCOUNT.{account}.CONNECT"),
            &format!("$SYS.ACCOUNT.{account}.DISCONNECT"),
            "_INBOX.>",
        ],
    )
}

/// The connection evictor: `$SYS.REQ.SERVER.*.KICK` (broker-wide in NATS).
pub fn connection_evictor() -> Permissions {
    allow(&["$SYS.REQ.SERVER.*.KICK"], &["_INBOX.>"])
}

/// A user an operator asks for with `cotal creds`: everything inside its own account.
pub fn operator_user() -> Permissions {
    Permissions::default()
}
