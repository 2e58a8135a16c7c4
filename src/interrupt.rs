//! SIGINT and SIGTERM during an apply: the first asks the executor to stop at the next step
//! boundary ([`requested`]), so the lock is released, the journal and the audit say what was
//! done, and the next `cotal apply` finishes it; a second ends the process at once (exit 130)
//! and says so, as an impatient operator expects. The confirmation prompt waits through [`wait_for_input`],
//! so a Ctrl-C there cancels the apply (nothing changed, the lock released). Before [`watch`]
//! (planning) the signals keep their default: nothing has been changed yet.
//!
//! Invariants: [`watch`] registers once per process; [`requested`] is only ever set by a signal.

use crate::error::{Error, Result, exit};
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// What a second signal prints before the process ends: the step it was in may be half done,
/// and the journal keeps what the apply did, so the re-run finishes it.
const SECOND_SIGNAL: &str = "\ncotal: stopped at once by a second signal, possibly in the middle of a step; the journal keeps what the apply did.\nnext: run `cotal apply` to finish: it plans what is left.\n";

/// From now on, SIGINT and SIGTERM ask for a stop at the next step boundary; a second one
/// exits at once with [`exit::STOPPED`].
pub fn watch() -> Result<()> {
    if REQUESTED.get().is_some() {
        return Ok(());
    }
    let flag = Arc::new(AtomicBool::new(false));
    let failed = |e: std::io::Error| Error::other(format!("cannot watch for interrupts: {e}"));
    // Every delivery writes a byte (a pipe never merges two signals, as pending flags do); a
    // thread counts them and ends the process at the second, after saying so.
    let (mut deliveries, writer) = std::os::unix::net::UnixStream::pair().map_err(failed)?;
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&flag)).map_err(failed)?;
        signal_hook::low_level::pipe::register(signal, writer.try_clone().map_err(failed)?)
            .map_err(failed)?;
    }
    std::thread::Builder::new()
        .name("cotal-signals".into())
        .spawn(move || {
            use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
            use std::io::Read;
            // The signals go to the other threads: the prompt's `poll` must see them.
            let mut mask = SigSet::empty();
            mask.add(Signal::SIGINT);
            mask.add(Signal::SIGTERM);
            let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&mask), None);
            let mut byte = [0u8; 1];
            let mut seen = 0;
            while matches!(deliveries.read(&mut byte), Ok(1)) {
                seen += 1;
                if seen == 2 {
                    // Neither the stderr lock nor exit handlers: the main thread may hold one
                    // (blocked on a stalled pipe), and this must end the process whatever it
                    // is doing.
                    let _ = nix::unistd::write(std::io::stderr(), SECOND_SIGNAL.as_bytes());
                    signal_hook::low_level::exit(exit::STOPPED);
                }
            }
        })
        .map_err(failed)?;
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
