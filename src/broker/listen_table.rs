//! The kernel's table of listening TCP sockets, asked through `sock_diag` (a netlink dump of the
//! sockets in state LISTEN only), with `/proc/net/tcp{,6}` as the fallback.
//!
//! Why not `/proc` alone: reading `/proc/net/tcp` makes the kernel walk every bucket of its
//! established-socket table, even when it is empty; on a 2-core host that was about 10 ms of
//! every plan. A `sock_diag` dump asking for LISTEN only walks the listening sockets.
//!
//! Invariants: both sources yield the same [`Entry`] for a socket (its local address, port and
//! inode: the tests bind one and compare); a failed dump (a kernel without `inet_diag`, a
//! sandbox that refuses the netlink socket, a socket silent past its deadline, a dump the
//! kernel ends with an error code) is not an error but the fallback, and never a partial list,
//! so the probe's answer never depends on which source served it.

use crate::error::Result;
use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_SOCK_DIAG};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One listening TCP socket: its local address, port and inode (from `sock_diag` or
/// `/proc/net/tcp{,6}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub ip: IpAddr,
    pub port: u16,
    pub inode: u64,
}

/// The LISTEN entries of a `/proc/net/tcp` or `/proc/net/tcp6` text. Pure.
pub fn parse_table(text: &str) -> Vec<Entry> {
    const LISTEN: &str = "0A";
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            if cols.len() < 10 || cols[3] != LISTEN {
                return None;
            }
            let (addr, port) = cols[1].split_once(':')?;
            Some(Entry {
                ip: parse_ip(addr)?,
                port: u16::from_str_radix(port, 16).ok()?,
                inode: cols[9].parse().ok()?,
            })
        })
        .collect()
}

/// The kernel prints each 32-bit word of the address as a number in host byte order.
fn parse_ip(hex: &str) -> Option<IpAddr> {
    let word = |i: usize| -> Option<[u8; 4]> {
        Some(
            u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16)
                .ok()?
                .to_ne_bytes(),
        )
    };
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(0)?))),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            Some(IpAddr::V6(Ipv6Addr::from(bytes)))
        }
        _ => None,
    }
}

/// Every TCP socket in state LISTEN, IPv4 and IPv6: from `sock_diag`, or from
/// `/proc/net/tcp{,6}` when the dump is not available.
pub fn listening() -> Result<Vec<Entry>> {
    match sock_diag() {
        Ok(entries) => Ok(entries),
        Err(why) => {
            tracing::debug!(%why, "sock_diag unavailable; reading /proc/net/tcp{{,6}}");
            proc_tables()
        }
    }
}

/// The LISTEN entries of `/proc/net/tcp` and `/proc/net/tcp6` (a table that does not exist, a
/// kernel without IPv6, is skipped).
pub fn proc_tables() -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        match std::fs::read_to_string(table) {
            Ok(text) => out.extend(parse_table(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(crate::error::Error::io(table, e)),
        }
    }
    Ok(out)
}

/// How long the kernel may take to answer one read of the dump (it answers at once; a socket
/// that stays silent is a refusal, and the probe reads `/proc`).
const RECEIVE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(1);

/// The LISTEN sockets of both families through one netlink `sock_diag` socket. An error, a
/// silent socket, or a dump the kernel ends with an error code (`NLMSG_DONE` carrying a
/// negative errno: a kernel without `tcp_diag`, a dump that failed part way) is an `Err`,
/// never a partial list.
pub fn sock_diag() -> std::io::Result<Vec<Entry>> {
    let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
    let deadline = nix::sys::time::TimeVal::new(RECEIVE_DEADLINE.as_secs() as i64, 0);
    nix::sys::socket::setsockopt(
        &socket,
        nix::sys::socket::sockopt::ReceiveTimeout,
        &deadline,
    )
    .map_err(std::io::Error::from)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut out = Vec::new();
    for (family, id) in [
        (AF_INET, SocketId::new_v4()),
        (AF_INET6, SocketId::new_v6()),
    ] {
        dump(&socket, family, id, &mut out)?;
    }
    Ok(out)
}

/// One family's dump: the request, then every reply until the kernel's `Done`.
fn dump(socket: &Socket, family: u8, id: SocketId, out: &mut Vec<Entry>) -> std::io::Result<()> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut request = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::LISTEN,
            socket_id: id,
        })
        .into(),
    );
    request.finalize();
    let mut bytes = vec![0; request.buffer_len()];
    request.serialize(&mut bytes);
    socket.send(&bytes, 0)?;
    let mut received = vec![0u8; 32 * 1024];
    loop {
        let size = socket.recv(&mut &mut received[..], 0)?;
        if size == 0 {
            return Err(std::io::Error::other(
                "the sock_diag socket closed mid-dump",
            ));
        }
        if let Read::Done = read_replies(&received[..size], out)? {
            return Ok(());
        }
    }
}

/// Whether a dump goes on after one read of its replies.
#[derive(Debug, PartialEq, Eq)]
enum Read {
    More,
    Done,
}

/// The messages of one read of a dump (the kernel never splits a message across reads): each
/// socket into `out`; the kernel's end of the dump is [`Read::Done`], or the error it carries.
fn read_replies(bytes: &[u8], out: &mut Vec<Entry>) -> std::io::Result<Read> {
    let mut offset = 0;
    while offset < bytes.len() {
        let message = NetlinkMessage::<SockDiagMessage>::deserialize(&bytes[offset..])
            .map_err(|e| std::io::Error::other(format!("a sock_diag reply: {e}")))?;
        match message.payload {
            NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => out.push(Entry {
                ip: r.header.socket_id.source_address,
                port: r.header.socket_id.source_port,
                inode: u64::from(r.header.inode),
            }),
            NetlinkPayload::Done(done) if done.code < 0 => {
                return Err(std::io::Error::from_raw_os_error(-done.code));
            }
            NetlinkPayload::Done(_) => return Ok(Read::Done),
            NetlinkPayload::Error(e) if e.code.is_some() => {
                return Err(std::io::Error::other(format!("sock_diag refused: {e:?}")));
            }
            _ => {}
        }
        // Each message starts on a 4-byte boundary (`NLMSG_ALIGN`).
        let length = (message.header.length as usize).next_multiple_of(4);
        if length == 0 {
            return Err(std::io::Error::other("a sock_diag reply of length 0"));
        }
        offset += length;
    }
    Ok(Read::More)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// The entries of both sources for the port of `listener`.
    fn both(listener: &TcpListener) -> (Vec<Entry>, Vec<Entry>) {
        let port = listener.local_addr().expect("bound").port();
        let of = |entries: Vec<Entry>| -> Vec<Entry> {
            entries.into_iter().filter(|e| e.port == port).collect()
        };
        (
            of(sock_diag().expect("sock_diag answers on Linux")),
            of(proc_tables().expect("/proc/net/tcp reads")),
        )
    }

    /// Strict on purpose: on the hosts cotal's CI runs on, `sock_diag` answers, and this test
    /// proves the dump (not the fallback) reports the socket.
    #[test]
    fn sock_diag_and_proc_see_the_same_listening_socket() {
        let v4 = TcpListener::bind("127.0.0.1:0").expect("binds");
        let (diag, proc) = both(&v4);
        assert_eq!(diag.len(), 1, "{diag:?}");
        assert_eq!(diag, proc);
        assert_eq!(diag[0].ip, "127.0.0.1".parse::<std::net::IpAddr>().unwrap());
        // An IPv6 listener, where the host has IPv6.
        if let Ok(v6) = TcpListener::bind("[::1]:0") {
            let (diag, proc) = both(&v6);
            assert_eq!(diag.len(), 1, "{diag:?}");
            assert_eq!(diag, proc);
            assert_eq!(diag[0].ip, "::1".parse::<std::net::IpAddr>().unwrap());
        }
    }

    /// The kernel's end of a dump, carrying `code` (0, or a negative errno).
    fn done(code: i32) -> Vec<u8> {
        let mut end = netlink_packet_core::DoneMessage::default();
        end.code = code;
        let mut message = NetlinkMessage::<SockDiagMessage>::new(
            NetlinkHeader::default(),
            NetlinkPayload::Done(end),
        );
        message.finalize();
        let mut bytes = vec![0; message.buffer_len()];
        message.serialize(&mut bytes);
        bytes
    }

    #[test]
    fn a_dump_the_kernel_ends_with_an_error_is_an_error_not_an_empty_list() {
        let mut out = Vec::new();
        assert_eq!(read_replies(&done(0), &mut out).unwrap(), Read::Done);
        // A kernel without tcp_diag answers the dump with NLMSG_DONE carrying -ENOENT.
        let refused = read_replies(&done(-2), &mut out).unwrap_err();
        assert_eq!(refused.raw_os_error(), Some(2), "{refused}");
        assert!(out.is_empty());
        assert_eq!(read_replies(&[], &mut out).unwrap(), Read::More);
    }

    #[test]
    fn a_connected_socket_is_not_listening() {
        let server = TcpListener::bind("127.0.0.1:0").expect("binds");
        let port = server.local_addr().expect("bound").port();
        let client = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connects");
        let (_accepted, _) = server.accept().expect("accepts");
        let client_port = client.local_addr().expect("bound").port();
        drop(server);
        // The listener is gone; its accepted connection and the client's are established,
        // not listening: neither source reports them.
        for entries in [sock_diag().expect("answers"), proc_tables().expect("reads")] {
            assert!(
                !entries
                    .iter()
                    .any(|e| e.port == port || e.port == client_port),
                "{entries:?}"
            );
        }
    }
}
