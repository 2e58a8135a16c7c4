//! SIGINT and SIGTERM during an apply: the first asks the executor to stop at the next step
//! boundary ([`requested`]), so the lock is released, the journal and the audit say what was
//! done, and the next `cotal apply` finishes it; a second ends the process at once (exit 130),
//! as an impatient operator expects. Before [`watch`] (planning, the confirmation prompt) the
//! signals keep their default: nothing has been changed yet.
//!
//! Invariants: [`watch`] registers once per process; [`requested`] is only ever set by a signal.

use crate::error::{Error, Result, exit};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// From now on, SIGINT and SIGTERM ask for a stop at the next step boundary; a second one
/// exits at once with [`exit::STOPPED`].
pub fn watch() -> Result<()> {
    if REQUESTED.get().is_some() {
        return Ok(());
    }
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // The shutdown is registered first: it acts only once the flag is already set, so the
        // first signal sets the flag and the second exits.
        signal_hook::flag::register_conditional_shutdown(signal, exit::STOPPED, Arc::clone(&flag))
            .and_then(|_| signal_hook::flag::register(signal, Arc::clone(&flag)))
            .map_err(|e| Error::other(format!("cannot watch for interrupts: {e}")))?;
    }
    let _ = REQUESTED.set(flag);
    Ok(())
}

/// Whether a signal asked the apply to stop.
pub fn requested() -> bool {
    REQUESTED.get().is_some_and(|f| f.load(Ordering::SeqCst))
}
