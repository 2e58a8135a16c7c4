//! Named crash points for the reliability tests (issue: prove it survives).
//!
//! Compiled to nothing unless the `fault-injection` feature is on. With it, setting
//! `COTAL_CRASH_AT=<name>` makes the process abort at that point, as a power cut would: no
//! destructors, no flushing, no cleanup.

/// Abort here when `COTAL_CRASH_AT` names this point (fault-injection builds only).
#[inline(always)]
pub fn point(_name: &str) {
    #[cfg(feature = "fault-injection")]
    if std::env::var("COTAL_CRASH_AT").as_deref() == Ok(_name) {
        eprintln!("cotal: crash injected at {_name}");
        std::process::abort();
    }
}
