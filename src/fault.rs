//! Named crash points for the reliability tests (issue: prove it survives), as a closed set.
//!
//! Compiled to nothing unless the `fault-injection` feature is on. With it:
//! - `COTAL_CRASH_AT=<name>` makes the process abort at that point, as a power cut would: no
//!   destructors, no flushing, no cleanup. It first prints `cotal: crash injected at <name>` on
//!   stderr, so a test can prove the point was reached.
//! - `COTAL_PAUSE_AT=<name>` with `COTAL_PAUSE_FIFO=<path>` makes the process stop at that point:
//!   it opens the FIFO (which the test holds open), prints `cotal: paused at <name>`, and reads
//!   until the test closes its end: a rendezvous without sleeps.
//! - `COTAL_FAULT=break-config` corrupts a promoted config after the preflight.
//! - `COTAL_FAULT=race-registry:<space>` writes each channel key of that space (through the
//!   real broker, as a racing tenant would) just before cotal's compare-and-set of it, so every
//!   try loses and the bounded retry is exercised.
//! - `COTAL_FAULT=refuse-verify` fails the data-plane check after a reload the broker confirmed,
//!   so the rollback of a config the broker already runs is exercised.

/// Declares [`Point`], its names and [`Point::ALL`] from one list, so no point can be left out.
macro_rules! points {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)+) => {
        /// Every point where a fault-injection build can crash or pause, in the order apply
        /// meets them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Point {
            $($(#[$doc])* $variant,)+
        }

        impl Point {
            /// Every point, in the order apply meets them.
            pub const ALL: &'static [Point] = &[$(Point::$variant,)+];

            /// The name `COTAL_CRASH_AT` and `COTAL_PAUSE_AT` take.
            pub fn name(self) -> &'static str {
                match self {
                    $(Point::$variant => $name,)+
                }
            }
        }
    };
}

points! {
    /// The root's lock is held; nothing has been read or written yet.
    AfterLock => "after-lock",
    /// The journal is open; nothing else was written.
    AfterJournalOpen => "after-journal-open",
    /// A removal is journaled as committed; its streams are not deleted yet.
    AfterRemovalCommitted => "after-removal-committed",
    /// The fenced records of the removed spaces are on disk; the fence is not promoted yet.
    AfterFenceWritten => "after-fence-written",
    /// The fence's config replaced the old one; no reload yet.
    AfterFencePromoted => "after-fence-promoted",
    /// The broker confirmed the fence's reload; the generation is not advanced yet.
    AfterFenceReload => "after-fence-reload",
    /// A removal's streams are deleted.
    AfterStreamsDeleted => "after-streams-deleted",
    /// A purge is journaled as committed; no stream of the space is emptied yet.
    AfterPurgeCommitted => "after-purge-committed",
    /// A new or re-issued account record is on disk.
    AfterRecordWritten => "after-record-written",
    /// The new `server.conf` replaced the old one; no reload yet.
    AfterConfigPromoted => "after-config-promoted",
    /// Just before the reload request.
    BeforeReload => "before-reload",
    /// The broker confirmed the reload; the generation is not advanced yet.
    AfterReload => "after-reload",
    /// An added space's streams exist, its buckets not yet.
    MidProvision => "mid-provision",
    /// A removed space's record is deleted, its folder not yet.
    MidReap => "mid-reap",
    /// A removed space's local material is reaped.
    AfterReap => "after-reap",
    /// Everything is done but the journal is still open.
    BeforeJournalClose => "before-journal-close",
    /// A backup (`space backup`, `root backup`) copied its first file into its partial copy;
    /// the artifact is not in place. Not an apply's point.
    MidBackupCopy => "mid-backup-copy",
}

impl std::fmt::Display for Point {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Run `race` (a write of the key about to be written) when `COTAL_FAULT=race-registry:<space>`
/// names `space` (fault-injection builds only).
pub async fn race_registry<F, Fut>(_space: &str, _race: F)
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    #[cfg(feature = "fault-injection")]
    if std::env::var("COTAL_FAULT").ok().as_deref()
        == Some(format!("race-registry:{_space}").as_str())
    {
        _race().await;
    }
}

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

/// Fail the data-plane check of a confirmed reload when `COTAL_FAULT=refuse-verify`
/// (fault-injection builds only).
#[inline(always)]
pub fn refuse_verify() -> Result<(), String> {
    #[cfg(feature = "fault-injection")]
    if std::env::var("COTAL_FAULT").as_deref() == Ok("refuse-verify") {
        return Err("the data-plane check was failed by COTAL_FAULT=refuse-verify".into());
    }
    Ok(())
}

/// Abort (or pause) here when `COTAL_CRASH_AT` (or `COTAL_PAUSE_AT`) names this point
/// (fault-injection builds only).
#[inline(always)]
pub fn point(_point: Point) {
    #[cfg(feature = "fault-injection")]
    {
        let name = _point.name();
        if std::env::var("COTAL_CRASH_AT").as_deref() == Ok(name) {
            eprintln!("cotal: crash injected at {name}");
            std::process::abort();
        }
        if std::env::var("COTAL_PAUSE_AT").as_deref() == Ok(name)
            && let Ok(fifo) = std::env::var("COTAL_PAUSE_FIFO")
        {
            use std::io::Read;
            // Open first (the test holds the FIFO open, so this does not block), then say so:
            // the test acts on the report, and its closing of the FIFO ends the read below.
            let mut gate = std::fs::File::open(&fifo).expect("the pause FIFO");
            eprintln!("cotal: paused at {name}");
            let mut rest = Vec::new();
            let _ = gate.read_to_end(&mut rest);
            eprintln!("cotal: resumed at {name}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_point_has_a_distinct_name() {
        let names: std::collections::BTreeSet<&str> = Point::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(names.len(), Point::ALL.len());
    }
}
