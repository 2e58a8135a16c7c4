//! The wall clock, read in one place: timestamps of journals, audit records and lock holders,
//! and the `iat` of minted tokens. Never read by the pure core.

use std::time::SystemTime;

/// Now.
pub fn current() -> SystemTime {
    SystemTime::now()
}

/// Now, RFC 3339 UTC, seconds.
pub fn timestamp() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
