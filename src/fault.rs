//! Named crash points for the reliability tests (issue: prove it survives).
//!
//! Compiled to nothing unless the `fault-injection` feature is on. With it, setting
//! `COTAL_CRASH_AT=<name>` makes the process abort at that point, as a power cut would: no
//! destructors, no flushing, no cleanup.

/// Corrupt a promoted config so the broker refuses its reload, when `COTAL_FAULT=break-config`
/// (fault-injection builds only): the preflight has passed, so only the reload can catch it.
#[inline(always)]
pub fn break_config(_path: &std::path::Path) {
    #[cfg(feature = "fault-injection")]
    if std::env::var("COTAL_FAULT").as_deref() == Ok("break-config") {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(_path)
            .expect("promoted config");
        writeln!(f, "max_payload: \"not a size\"").expect("append");
    }
}

/// Abort here when `COTAL_CRASH_AT` names this point (fault-injection builds only).
#[inline(always)]
pub fn point(_name: &str) {
    #[cfg(feature = "fault-injection")]
    if std::env::var("COTAL_CRASH_AT").as_deref() == Ok(_name) {
        eprintln!("cotal: crash injected at {_name}");
        std::process::abort();
    }
}
