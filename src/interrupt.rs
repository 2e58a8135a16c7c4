//! SIGINT and SIGTERM during an apply: the first asks the executor to stop at the next step
//! boundary ([`requested`]), so the lock is released, the journal and the audit say what was
//! done, and the next `cotal apply` finishes it; a second ends the process at once (exit 130),
//! as an impatient operator expects. The confirmation prompt waits through [`wait_for_input`],
//! so a Ctrl-C there cancels the apply (nothing changed, the lock released). Before [`watch`]
//! (planning) the signals keep their default: nothing has been changed yet.
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

/// Wait until standard input has something to read. `Ok(false)` when a signal asked to stop
/// first: `poll` is interrupted by a signal whatever `SA_RESTART` says, where a read would be
/// restarted and wait on.
pub fn wait_for_input() -> Result<bool> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    loop {
        if requested() {
            return Ok(false);
        }
        let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => return Ok(!requested()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(Error::other(format!("waiting for an answer: {e}"))),
        }
    }
}
