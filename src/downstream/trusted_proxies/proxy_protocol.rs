//! The PROXY protocol header (HAProxy's `proxy-protocol.txt`, versions 1 and 2) a
//! trusted proxy sends before anything else on a connection, read with the `ppp` crate.

use std::net::SocketAddr;
use std::time::Instant;

use ppp::{HeaderResult, PartialResult as _, v1, v2};

use crate::downstream::http1::Wire;

/// How a version 1 header starts.
const V1_SIGNATURE: &[u8] = b"PROXY ";
/// The longest version 1 header, its CRLF included.
const V1_MAX: usize = 107;

/// What the first bytes of a connection hold, as a PROXY header.
#[derive(Debug, PartialEq, Eq)]
enum ProxyHeader {
    /// The start of one: more bytes are needed.
    Incomplete,
    /// Not a well-formed header (why, for the log).
    Malformed(String),
    /// A header of `len` bytes naming the client, or naming none (v1 `UNKNOWN`, a v2
    /// `LOCAL` connection such as the proxy's own health check, or an address family
    /// without an IP address): the connection is then its own client.
    Read { len: usize, client: Option<SocketAddr> },
}

/// Reads the PROXY protocol header a trusted proxy at `peer` starts with, by `deadline`,
/// and leaves what follows it in `wire`: the client it names, `peer` when it names none,
/// `None` (close) when there is none, it is malformed, or it comes too late.
pub(in crate::downstream) async fn read_header(
    wire: &mut Wire,
    peer: SocketAddr,
    deadline: Instant,
) -> Option<SocketAddr> {
    loop {
        match read(wire.buffered()) {
            ProxyHeader::Read { len, client } => {
                wire.skip(len);
                return Some(client.map_or(peer, |c| SocketAddr::new(c.ip().to_canonical(), c.port())));
            }
            ProxyHeader::Malformed(why) => {
                tracing::debug!(target: "seawall::downstream", peer = %peer, reason = %why, "closed a connection: no well-formed PROXY protocol header from a trusted proxy");
                return None;
            }
            ProxyHeader::Incomplete => {}
        }
        if !matches!(wire.fill(Some(deadline)).await, Ok(1..)) {
            tracing::debug!(target: "seawall::downstream", peer = %peer, "closed a connection: its PROXY protocol header did not arrive in time");
            return None;
        }
    }
}

/// Reads the PROXY header at the start of `bytes`.
fn read(bytes: &[u8]) -> ProxyHeader {
    // `ppp` takes a version 1 line cut after a space for a malformed one: such a line is
    // read once it is whole (or longer than one may be).
    let n = bytes.len().min(V1_SIGNATURE.len());
    if bytes[..n] == V1_SIGNATURE[..n] && bytes.len() < V1_MAX && !bytes.contains(&b'\n') {
        return ProxyHeader::Incomplete;
    }
    let parsed = HeaderResult::parse(bytes);
    if parsed.is_incomplete() {
        return ProxyHeader::Incomplete;
    }
    match parsed {
        HeaderResult::V1(Ok(header)) => {
            let client = match header.addresses {
                v1::Addresses::Tcp4(a) => Some(SocketAddr::new(a.source_address.into(), a.source_port)),
                v1::Addresses::Tcp6(a) => Some(SocketAddr::new(a.source_address.into(), a.source_port)),
                v1::Addresses::Unknown => None,
            };
            ProxyHeader::Read { len: header.header.len(), client }
        }
        HeaderResult::V2(Ok(header)) => {
            let client = match (header.command, header.addresses) {
                (v2::Command::Proxy, v2::Addresses::IPv4(a)) => {
                    Some(SocketAddr::new(a.source_address.into(), a.source_port))
                }
                (v2::Command::Proxy, v2::Addresses::IPv6(a)) => {
                    Some(SocketAddr::new(a.source_address.into(), a.source_port))
                }
                _ => None,
            };
            ProxyHeader::Read { len: header.len(), client }
        }
        HeaderResult::V1(Err(e)) => ProxyHeader::Malformed(e.to_string()),
        HeaderResult::V2(Err(e)) => ProxyHeader::Malformed(e.to_string()),
    }
}

/// Whether `bytes` may be the start of a PROXY header: `Some(true)` when they hold a
/// whole signature of either version, `Some(false)` when they cannot be one, `None`
/// while they are too few to tell.
pub(in crate::downstream) fn starts_header(bytes: &[u8]) -> Option<bool> {
    let mut undecided = false;
    for signature in [V1_SIGNATURE, v2::PROTOCOL_PREFIX] {
        let n = bytes.len().min(signature.len());
        if bytes[..n] == signature[..n] {
            if n == signature.len() {
                return Some(true);
            }
            undecided = true;
        }
    }
    (!undecided).then_some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A version 2 header: `command` (0 LOCAL, 1 PROXY), the address family and
    /// protocol byte, and the address block.
    fn v2_header(command: u8, family: u8, addresses: &[u8]) -> Vec<u8> {
        let mut out = v2::PROTOCOL_PREFIX.to_vec();
        out.push(0x20 | command);
        out.push(family);
        out.extend_from_slice(&u16::try_from(addresses.len()).unwrap().to_be_bytes());
        out.extend_from_slice(addresses);
        out
    }

    fn ipv4_block() -> Vec<u8> {
        let mut block = vec![192, 0, 2, 9, 10, 0, 0, 1];
        block.extend_from_slice(&4711u16.to_be_bytes());
        block.extend_from_slice(&8080u16.to_be_bytes());
        block
    }

    #[test]
    fn version_1_names_the_source_and_leaves_the_request() {
        let bytes = b"PROXY TCP4 192.0.2.9 10.0.0.1 4711 8080\r\nPOST /mcp HTTP/1.1\r\n";
        let header = read(bytes);
        assert_eq!(header, ProxyHeader::Read { len: 41, client: Some("192.0.2.9:4711".parse().unwrap()) });
        let v6 = read(b"PROXY TCP6 2001:db8::9 2001:db8::1 4711 8080\r\n");
        assert_eq!(v6, ProxyHeader::Read { len: 46, client: Some("[2001:db8::9]:4711".parse().unwrap()) });
        assert_eq!(read(b"PROXY UNKNOWN\r\nGET"), ProxyHeader::Read { len: 15, client: None });
    }

    #[test]
    fn version_1_in_pieces_is_incomplete_and_garbage_malformed() {
        let whole = b"PROXY TCP4 192.0.2.9 10.0.0.1 4711 8080\r\n";
        for cut in 0..whole.len() - 1 {
            assert_eq!(read(&whole[..cut]), ProxyHeader::Incomplete, "cut at {cut}");
        }
        assert!(matches!(read(b"PROXY TCP4 192.0.2.999 10.0.0.1 1 2\r\n"), ProxyHeader::Malformed(_)));
        assert!(matches!(read(b"PROXY TCP5 192.0.2.9 10.0.0.1 1 2\r\n"), ProxyHeader::Malformed(_)));
        assert!(matches!(read(b"POST /mcp HTTP/1.1\r\n"), ProxyHeader::Malformed(_)));
        assert!(matches!(read(&[b'A'; 200]), ProxyHeader::Malformed(_)), "longer than a v1 header may be");
    }

    #[test]
    fn version_2_proxy_names_the_source_and_local_names_none() {
        let header = v2_header(1, 0x11, &ipv4_block());
        let mut bytes = header.clone();
        bytes.extend_from_slice(b"POST /mcp HTTP/1.1\r\n");
        let read_back = read(&bytes);
        assert_eq!(read_back, ProxyHeader::Read { len: header.len(), client: Some("192.0.2.9:4711".parse().unwrap()) });
        for cut in 0..header.len() {
            assert_eq!(read(&header[..cut]), ProxyHeader::Incomplete, "cut at {cut}");
        }
        let local = v2_header(0, 0x00, &[]);
        assert_eq!(read(&local), ProxyHeader::Read { len: 16, client: None });
        let local_with_addresses = v2_header(0, 0x11, &ipv4_block());
        assert_eq!(read(&local_with_addresses), ProxyHeader::Read { len: 28, client: None });
        let mut v6 = vec![0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
        v6.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        v6.extend_from_slice(&[0x12, 0x67, 0x1f, 0x90]);
        let read_v6 = read(&v2_header(1, 0x21, &v6));
        assert_eq!(read_v6, ProxyHeader::Read { len: 52, client: Some("[2001:db8::9]:4711".parse().unwrap()) });
    }

    #[test]
    fn version_2_with_a_bad_version_or_command_is_malformed() {
        let mut bad_version = v2_header(1, 0x11, &ipv4_block());
        bad_version[12] = 0x31;
        assert!(matches!(read(&bad_version), ProxyHeader::Malformed(_)));
        let mut bad_command = v2_header(1, 0x11, &ipv4_block());
        bad_command[12] = 0x2f;
        assert!(matches!(read(&bad_command), ProxyHeader::Malformed(_)));
        let short_block = v2_header(1, 0x11, &[192, 0, 2, 9]);
        assert!(matches!(read(&short_block), ProxyHeader::Malformed(_)));
    }

    #[test]
    fn signatures_are_told_from_http_as_soon_as_the_bytes_allow() {
        assert_eq!(starts_header(b""), None);
        assert_eq!(starts_header(b"PRO"), None);
        assert_eq!(starts_header(b"PROXY "), Some(true));
        assert_eq!(starts_header(b"PRI * HTTP/2.0"), Some(false));
        assert_eq!(starts_header(b"POST /mcp"), Some(false));
        assert_eq!(starts_header(b"\r\n\r\n\0\r\n"), None);
        assert_eq!(starts_header(&v2_header(0, 0, &[])), Some(true));
        assert_eq!(starts_header(b"\r\n\r\nGET"), Some(false));
    }
}
