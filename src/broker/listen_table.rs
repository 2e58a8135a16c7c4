//! The kernel's table of listening TCP sockets, asked through `sock_diag` (a netlink dump of the
//! sockets in state LISTEN only), with `/proc/net/tcp{,6}` as the fallback.
//!
//! Why not `/proc` alone: reading `/proc/net/tcp` makes the kernel walk every bucket of its
//! established-socket table, even when it is empty; on a 2-core host that was about 10 ms of
//! every plan. A `sock_diag` dump asking for LISTEN only walks the listening sockets.
//!
//! Invariants: both sources yield the same [`Entry`] for a socket (its local address, port and
//! inode: the tests bind one and compare); a failed dump (a kernel without `inet_diag`, a
//! sandbox that refuses the netlink socket) is not an error but the fallback, so the probe's
//! answer never depends on which source served it.

use crate::broker::identity::{Entry, parse_table};
use crate::error::Result;
use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_sock_diag::SockDiagMessage;
use netlink_packet_sock_diag::constants::{AF_INET, AF_INET6, IPPROTO_TCP};
use netlink_packet_sock_diag::inet::{ExtensionFlags, InetRequest, SocketId, StateFlags};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_SOCK_DIAG};

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

/// The LISTEN sockets of both families through one netlink `sock_diag` socket.
pub fn sock_diag() -> std::io::Result<Vec<Entry>> {
    let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
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
        let mut offset = 0;
        while offset < size {
            let message = NetlinkMessage::<SockDiagMessage>::deserialize(&received[offset..size])
                .map_err(|e| std::io::Error::other(format!("a sock_diag reply: {e}")))?;
            match message.payload {
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => out.push(Entry {
                    ip: r.header.socket_id.source_address,
                    port: r.header.socket_id.source_port,
                    inode: u64::from(r.header.inode),
                }),
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => {
                    return Err(std::io::Error::other(format!("sock_diag refused: {e:?}")));
                }
                _ => {}
            }
            let length = message.header.length as usize;
            if length == 0 {
                break;
            }
            offset += length;
        }
    }
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
