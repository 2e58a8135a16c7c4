//! Whether a root's broker is running, stopped or unknown, from what the kernel says rather than
//! from a pidfile alone (docs/design/architecture.md, "The running broker").
//!
//! Invariants:
//! - *Running* only when the recorded pid is alive, runs as this user, is a nats-server (its
//!   executable, `/proc/<pid>/exe`) whose `-c` argument resolves (against that process's own
//!   working directory) to this root's canonical `server.conf`, and owns every listening socket
//!   on the configured host and port (their inodes are among the process's open files and in
//!   the kernel's LISTEN sockets, [`crate::broker::listen_table`]): a second listener beside
//!   it could answer cotal's connection instead.
//! - *Stopped* only when no nats-server of this root runs at all (the recorded pid is not one, and
//!   no other process of this user runs a nats-server on this root's `server.conf`, even with
//!   its pidfile lost or its file deleted) and nothing listens on the port.
//! - Anything else is *unknown*, with what was seen in words; every verb that writes refuses on
//!   it. Linux only (`/proc`), like the rest of cotal's process handling.
//! - A holder of the port is called *another program's* ([`held_by_another_program`]) only when
//!   that is known, not merely because it was not recognised: every holder could be inspected,
//!   none is a nats-server, and the pidfile's pid is not alive.

use crate::error::Result;
use crate::store::atomic::{self, Found};
use crate::store::{NodeFiles, process_alive};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, ToSocketAddrs};
use std::path::{Path, PathBuf};

pub use crate::model::Listener;

/// What the probe concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    Running {
        pid: u32,
    },
    /// Nothing of this root runs and nothing listens. `stale_pid`: the pidfile named a pid that is
    /// not this root's broker (dead, or reused by another program).
    Stopped {
        stale_pid: Option<u32>,
    },
    /// Neither: what was seen, for the refusal.
    Unknown {
        seen: String,
    },
}

/// The pid the pidfile records: `Ok(None)` when there is none, `Err` (what is wrong with it)
/// when the pidfile is not a regular file holding a pid.
pub fn recorded_pid(node: &NodeFiles) -> Result<Result<Option<u32>, String>> {
    Ok(match atomic::read_no_follow(&node.pid)? {
        Found::Absent => Ok(None),
        Found::NotRegular(what) => Err(format!(
            "the pidfile {} is {what}, not a regular file",
            node.pid.display()
        )),
        Found::File(bytes) => String::from_utf8_lossy(&bytes)
            .trim()
            .parse::<u32>()
            .map(Some)
            .map_err(|_| format!("the pidfile {} does not hold a pid", node.pid.display())),
    })
}

/// Probe the root's broker node on `listener`.
pub fn probe(node: &NodeFiles, listener: &Listener) -> Result<Liveness> {
    let recorded = match recorded_pid(node)? {
        Ok(pid) => pid,
        Err(seen) => return Ok(Liveness::Unknown { seen }),
    };
    let sockets = listening_sockets(listener)?;
    let ours = recorded.filter(|pid| is_root_broker(node, *pid));
    Ok(match ours {
        Some(pid) if owns_all(pid, &sockets) => Liveness::Running { pid },
        Some(pid) => Liveness::Unknown {
            seen: format!(
                "pid {pid} is this root's nats-server but is not the only listener on {listener}: {}",
                describe_holders(&sockets, listener)
            ),
        },
        None if sockets.is_empty() => match root_brokers(node).first() {
            // This root's broker runs without (or beside) its pidfile, somewhere else.
            Some(pid) => Liveness::Unknown {
                seen: format!(
                    "pid {pid} is this root's nats-server, but {}, and nothing listens on {listener}",
                    match recorded {
                        Some(r) => format!("the pidfile names pid {r}"),
                        None => "there is no pidfile".into(),
                    }
                ),
            },
            None => Liveness::Stopped {
                stale_pid: recorded,
            },
        },
        None => Liveness::Unknown {
            seen: format!(
                "{}{}{}",
                match recorded {
                    Some(pid) => format!(
                        "the pidfile names pid {pid}, which is not this root's nats-server, and "
                    ),
                    None => "no pidfile, and ".into(),
                },
                describe_holders(&sockets, listener),
                if held_by_another_program(node, &sockets, recorded) {
                    format!(
                        "; it is not this root's broker (no nats-server of this user was started on {}), so cotal leaves it alone",
                        node.conf.display()
                    )
                } else {
                    String::new()
                }
            ),
        },
    })
}

/// Whether the port's holders are known to be another program's, not this root's broker
/// unrecognised (started with another binary, as another user, through another path): the
/// recorded pid is not alive, no nats-server of this root is found, every holder of `sockets`
/// could be inspected, and none is a nats-server by its executable's name or is the binary
/// cotal starts.
pub fn held_by_another_program(
    node: &NodeFiles,
    sockets: &BTreeSet<u64>,
    recorded: Option<u32>,
) -> bool {
    if sockets.is_empty() || recorded.is_some_and(process_alive) || !root_brokers(node).is_empty() {
        return false;
    }
    let configured = configured_binary();
    let holders = socket_holders(sockets);
    for &pid in &holders {
        let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            return false;
        };
        if is_nats_executable(&exe, &configured) && !runs_another_roots_config(node, pid) {
            return false;
        }
    }
    !holders.is_empty()
}

/// Whether nats-server `pid` runs a config of another cotal root (its `-c` names a
/// `server.conf` in a `.cotal/` folder that is not this node's root's): that root's broker,
/// never this one's, whatever port it shares with this root's old config (a root restored
/// beside the one it was backed up from).
fn runs_another_roots_config(node: &NodeFiles, pid: u32) -> bool {
    let state_dir = |p: &Path| -> Option<PathBuf> {
        p.ancestors()
            .find(|a| a.file_name().is_some_and(|n| n == ".cotal"))
            .map(Path::to_path_buf)
    };
    let Some(ours) = state_dir(&node.conf) else {
        return false;
    };
    cmdline(pid)
        .and_then(|args| config_arg(&args))
        .and_then(|c| resolve_against(pid, &c))
        .and_then(|c| state_dir(&c))
        .is_some_and(|theirs| theirs != ours)
}

/// The pids (of those this user can inspect) that own any of `sockets`.
fn socket_holders(sockets: &BTreeSet<u64>) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| owns_any(*pid, sockets))
        .collect()
}

/// Alive, this user's, a nats-server executable, and started on this node's canonical
/// `server.conf`.
pub fn is_root_broker(node: &NodeFiles, pid: u32) -> bool {
    is_root_broker_of(node, pid, &configured_binary())
}

/// The nats-server binary cotal starts, canonical (`COTAL_NATS_SERVER` may name any file).
fn configured_binary() -> Option<PathBuf> {
    crate::broker::preflight::binary().and_then(|b| std::fs::canonicalize(b).ok())
}

/// Whether an executable is a nats-server: by its name, or the very binary cotal starts (which
/// `COTAL_NATS_SERVER` may name otherwise; `configured`, canonical).
fn is_nats_executable(exe: &Path, configured: &Option<PathBuf>) -> bool {
    exe.file_name()
        .is_some_and(|n| n.to_string_lossy().contains("nats-server"))
        || configured.as_deref() == Some(exe)
}

/// [`is_root_broker`], with the binary cotal starts found once (`configured`). The cheapest
/// checks first: a kernel thread or another user's process fails at its executable.
fn is_root_broker_of(node: &NodeFiles, pid: u32, configured: &Option<PathBuf>) -> bool {
    let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
        return false;
    };
    if !is_nats_executable(&exe, configured)
        || !process_alive(pid)
        || process_uid(pid) != Some(nix::unistd::geteuid().as_raw())
    {
        return false;
    }
    let Some(args) = cmdline(pid) else {
        return false;
    };
    config_arg(&args)
        .and_then(|c| resolve_against(pid, &c))
        .is_some_and(|c| c == node.conf)
}

/// Every process of this user that is a nats-server started on this node's `server.conf`,
/// whatever the pidfile says (scans `/proc`).
pub fn root_brokers(node: &NodeFiles) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let configured = configured_binary();
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| is_root_broker_of(node, *pid, &configured))
        .collect();
    pids.sort_unstable();
    pids
}

/// The real uid a process runs as.
fn process_uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The `-c`/`--config` argument of a nats-server command line; the last one wins, as in Go's
/// flag parser.
fn config_arg(args: &[String]) -> Option<String> {
    let mut found = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        for flag in ["-c", "--config", "-config"] {
            if a == flag {
                found = it.next().cloned();
            } else if let Some(v) = a.strip_prefix(&format!("{flag}=")) {
                found = Some(v.to_string());
            }
        }
    }
    found
}

/// A path as the process `pid` sees it: relative paths against its working directory, every
/// link of its folder resolved (the file itself may have been deleted since).
fn resolve_against(pid: u32, path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?.join(p)
    };
    match std::fs::canonicalize(&abs) {
        Ok(resolved) => Some(resolved),
        Err(_) => Some(
            std::fs::canonicalize(abs.parent()?)
                .ok()?
                .join(abs.file_name()?),
        ),
    }
}

/// A process's command line.
pub fn cmdline(pid: u32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect(),
    )
}

/// Another process's command line as cotal shows it: its arguments joined by spaces, every
/// character that could hide or reorder what a terminal shows escaped as tenant text is
/// (whoever takes a port writes its own command line: `\x1b[2J` must not clear the
/// operator's screen), and at most 160 characters of it.
pub fn shown_command(args: &[String]) -> String {
    crate::space::channels::displayable(&args.join(" "))
        .chars()
        .take(160)
        .collect()
}

/// Whether `pid` has one of `sockets` open.
pub fn owns_any(pid: u32, sockets: &BTreeSet<u64>) -> bool {
    !sockets.is_empty() && !holds(pid, sockets, 1).is_empty()
}

/// Whether `pid` has every one of `sockets` (at least one) open.
pub fn owns_all(pid: u32, sockets: &BTreeSet<u64>) -> bool {
    !sockets.is_empty() && holds(pid, sockets, sockets.len()).len() == sockets.len()
}

/// Which of `sockets` the process has open, looked for among its descriptors in ascending
/// order and no further than the `enough`-th found (empty when it is gone or not ours to
/// read). A broker of thousands of spaces holds tens of thousands of store files; its
/// listeners are among its first descriptors, so the first [`FIRST_DESCRIPTORS`] are looked at
/// by number, and the listing of them all (15 ms at 1,000 spaces) is read only when those do
/// not hold enough.
fn holds(pid: u32, sockets: &BTreeSet<u64>, enough: usize) -> BTreeSet<u64> {
    holds_looking_first_at(pid, sockets, enough, FIRST_DESCRIPTORS)
}

/// [`holds`], looking at the first `first` descriptors by number.
fn holds_looking_first_at(
    pid: u32,
    sockets: &BTreeSet<u64>,
    enough: usize,
    first: u32,
) -> BTreeSet<u64> {
    let dir = format!("/proc/{pid}/fd");
    let mut found = BTreeSet::new();
    // Whether the descriptor made `found` enough.
    let look = |fd: u32, found: &mut BTreeSet<u64>| -> bool {
        let Ok(target) = std::fs::read_link(format!("{dir}/{fd}")) else {
            return false;
        };
        let inode = target
            .to_str()
            .and_then(|t| t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok());
        if let Some(inode) = inode.filter(|i| sockets.contains(i)) {
            found.insert(inode);
        }
        found.len() >= enough
    };
    if (0..first).any(|fd| look(fd, &mut found)) {
        return found;
    }
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return found;
    };
    let mut fds: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd >= first)
        .collect();
    fds.sort_unstable();
    for fd in fds {
        if look(fd, &mut found) {
            break;
        }
    }
    found
}

/// How many of a process's first descriptors [`holds`] looks at by number before it lists them.
const FIRST_DESCRIPTORS: u32 = 64;

/// Inodes of the TCP sockets listening where `listener` would bind: the same port on one of its
/// addresses, or on a wildcard address (either side's wildcard conflicts with any address).
pub fn listening_sockets(listener: &Listener) -> Result<BTreeSet<u64>> {
    let ours = addresses(&listener.host);
    Ok(crate::broker::listen_table::listening()?
        .into_iter()
        .filter(|entry| entry.port == listener.port && conflicts(&ours, entry.ip))
        .map(|entry| entry.inode)
        .collect())
}

/// The addresses a host name stands for (empty when it does not resolve: then only a wildcard
/// listener is known to conflict).
fn addresses(host: &str) -> Vec<IpAddr> {
    match host {
        "" | "0.0.0.0" => vec![IpAddr::V4(Ipv4Addr::UNSPECIFIED)],
        "::" | "[::]" => vec![IpAddr::V6(Ipv6Addr::UNSPECIFIED)],
        h => (h.trim_start_matches('[').trim_end_matches(']'), 0)
            .to_socket_addrs()
            .map(|it| it.map(|a| a.ip()).collect())
            .unwrap_or_default(),
    }
}

fn conflicts(ours: &[IpAddr], theirs: IpAddr) -> bool {
    let theirs = canonical_ip(theirs);
    theirs.is_unspecified()
        || ours
            .iter()
            .any(|o| o.is_unspecified() || canonical_ip(*o) == theirs)
}

/// An IPv4-mapped IPv6 address as IPv4.
fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// Who holds the listening sockets, in words: "pid 123 (nats-server -c /x/server.conf) listens
/// on 127.0.0.1:4222". Scans `/proc/*/fd`, so only for messages.
pub fn describe_holders(sockets: &BTreeSet<u64>, listener: &Listener) -> String {
    if sockets.is_empty() {
        return format!("nothing listens on {listener}");
    }
    let holders: Vec<String> = socket_holders(sockets)
        .into_iter()
        .map(|pid| {
            let cmd = cmdline(pid).map(|a| shown_command(&a)).unwrap_or_default();
            format!("pid {pid} ({cmd})")
        })
        .collect();
    if holders.is_empty() {
        format!("a process this user cannot inspect listens on {listener}")
    } else {
        format!("{} listens on {listener}", holders.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::broker::listen_table::{Entry, parse_table};

    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1092 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1092 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1 0000000000000000 100 0 0 10 0
";
    const TCP6: &str = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:1092 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 98 1 0000000000000000 100 0 0 10 0
";

    /// A socket among a process's first descriptors and one past them are both found: the
    /// first by number, the second in the listing. (Where the first ones end is set from the
    /// descriptors' numbers, not assumed: other tests of this process open and close their
    /// own meanwhile.)
    #[test]
    fn a_socket_is_found_among_the_first_descriptors_and_past_them() {
        use std::os::fd::{AsFd, AsRawFd};
        let inode = |l: &std::net::TcpListener| nix::sys::stat::fstat(l.as_fd()).unwrap().st_ino;
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (early, late) = if a.as_raw_fd() < b.as_raw_fd() {
            (a, b)
        } else {
            (b, a)
        };
        // The first descriptors looked at by number end at the early one.
        let first = early.as_raw_fd() as u32 + 1;
        assert!(late.as_raw_fd() as u32 >= first);
        let pid = std::process::id();
        let both = BTreeSet::from([inode(&early), inode(&late)]);
        assert_eq!(holds_looking_first_at(pid, &both, 2, first), both);
        // Looking at none by number, or at every one of them, finds the same.
        assert_eq!(holds_looking_first_at(pid, &both, 2, 0), both);
        assert_eq!(holds_looking_first_at(pid, &both, 2, first + 2000), both);
        assert!(owns_all(pid, &both));
        // A socket no descriptor holds is not found, even after every descriptor was read.
        let foreign = BTreeSet::from([inode(&late), u64::MAX]);
        assert!(!owns_all(pid, &foreign));
    }

    #[test]
    fn listening_entries_are_parsed_with_their_addresses() {
        assert_eq!(
            parse_table(TCP),
            vec![
                Entry {
                    ip: "127.0.0.1".parse().unwrap(),
                    port: 4242,
                    inode: 4242
                },
                Entry {
                    ip: "0.0.0.0".parse().unwrap(),
                    port: 22,
                    inode: 77
                },
            ]
        );
        let six = parse_table(TCP6);
        assert_eq!(six[0].ip, "::1".parse::<IpAddr>().unwrap());
        assert_eq!(six[0].port, 4242);
        assert_eq!(
            canonical_ip(six[1].ip),
            "127.0.0.1".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn wildcards_conflict_with_every_address_and_addresses_with_themselves() {
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.0.1".parse().unwrap();
        let any: IpAddr = "0.0.0.0".parse().unwrap();
        assert!(conflicts(&[local], local));
        assert!(!conflicts(&[local], other));
        assert!(conflicts(&[local], any));
        assert!(conflicts(&[any], other));
        assert!(conflicts(&[local], "::ffff:127.0.0.1".parse().unwrap()));
        assert!(conflicts(&[local], "::".parse().unwrap()));
    }

    #[test]
    fn the_config_argument_is_found_in_every_spelling() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            config_arg(&args(&["nats-server", "-c", "/a/server.conf", "-l", "x"])),
            Some("/a/server.conf".into())
        );
        assert_eq!(
            config_arg(&args(&["nats-server", "--config=rel.conf"])),
            Some("rel.conf".into())
        );
        assert_eq!(
            config_arg(&args(&["nats-server", "-c", "first", "-c", "last"])),
            Some("last".into()),
            "the last one wins"
        );
        assert_eq!(config_arg(&args(&["nats-server", "-p", "4222"])), None);
    }
}
