//! A verified reload: SIGHUP to the recorded pid (after checking it is this root's nats-server),
//! confirmed by the log written after the signal.
//!
//! `Reloaded server configuration` confirms; `Failed to reload server configuration` refuses;
//! silence until the timeout counts as failure.

use crate::broker::process::{self, Pidfile};
use crate::error::{Error, Result};
use crate::store::Root;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// How long a reload may take to be confirmed.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The verdict read from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Confirmed,
    Failed(String),
    Pending,
}

/// Read a verdict from log text written after the signal. Pure.
pub fn verdict(log: &str) -> Verdict {
    for line in log.lines() {
        if let Some(i) = line.find("Failed to reload server configuration") {
            return Verdict::Failed(line[i..].trim().to_string());
        }
        if line.contains("Reloaded server configuration") {
            return Verdict::Confirmed;
        }
    }
    Verdict::Pending
}

/// SIGHUP the root's broker and wait for the log to confirm. Returns how long it took.
pub fn reload(root: &Root, timeout: Duration) -> Result<Duration> {
    let pid = match process::pidfile(root) {
        Pidfile::Running(pid) => pid,
        other => {
            return Err(Error::Other(format!(
                "cannot reload: the pidfile does not name this root's running nats-server ({other:?})"
            )));
        }
    };
    let offset = process::log_offset(root);
    let started = Instant::now();
    kill(Pid::from_raw(pid as i32), Signal::SIGHUP)
        .map_err(|e| Error::Other(format!("SIGHUP to pid {pid}: {e}")))?;
    let deadline = started + timeout;
    loop {
        match verdict(&process::log_since(root, offset)?) {
            Verdict::Confirmed => return Ok(started.elapsed()),
            Verdict::Failed(line) => {
                return Err(Error::Other(format!(
                    "nats-server refused the reload: {line}"
                )));
            }
            Verdict::Pending if Instant::now() >= deadline => {
                return Err(Error::Other(format!(
                    "nats-server did not confirm the reload within {timeout:?}{}",
                    process::log_tail(root, offset)
                )));
            }
            // The log is a local file: polling it every millisecond costs nothing measurable
            // and adds at most a millisecond to the reload.
            Verdict::Pending => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_come_from_the_first_reload_line() {
        assert_eq!(
            verdict("[INF] Trapped \"hangup\" signal\n"),
            Verdict::Pending
        );
        assert_eq!(
            verdict(
                "[INF] Trapped \"hangup\" signal\n[INF] Reloaded server configuration (sha256:ab)\n"
            ),
            Verdict::Confirmed
        );
        assert_eq!(
            verdict(
                "[ERR] Failed to reload server configuration: config reload not supported for Port\n"
            ),
            Verdict::Failed(
                "Failed to reload server configuration: config reload not supported for Port"
                    .into()
            )
        );
    }
}
