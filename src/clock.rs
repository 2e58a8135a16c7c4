//! The wall clock, read in one place: timestamps of journals, audit records and lock holders,
//! and the `iat` of minted tokens. Never read by the pure core.
//!
//! A fault-injection build reads `COTAL_CLOCK_SKEW` (signed seconds, `-86400`), added to every
//! reading: the tests of a host clock that jumps ahead or behind. A release build has no such
//! hook.

use std::time::{Duration, SystemTime};

/// The skew a fault-injection build adds to the clock (`COTAL_CLOCK_SKEW`, signed seconds).
#[cfg(feature = "fault-injection")]
fn skew() -> i64 {
    std::env::var("COTAL_CLOCK_SKEW")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[cfg(not(feature = "fault-injection"))]
fn skew() -> i64 {
    0
}

/// Now.
pub fn current() -> SystemTime {
    let now = SystemTime::now();
    match skew() {
        0 => now,
        s if s > 0 => now + Duration::from_secs(s as u64),
        s => now - Duration::from_secs(s.unsigned_abs()),
    }
}

/// Now, RFC 3339 UTC, seconds.
pub fn timestamp() -> String {
    humantime::format_rfc3339_seconds(current()).to_string()
}

/// Seconds since the epoch.
pub fn now() -> i64 {
    current()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}
