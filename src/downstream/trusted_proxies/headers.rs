//! The client named in `X-Forwarded-For` or `Forwarded` (RFC 7239).
//!
//! Both headers are lists each proxy appends to; a request may carry several lines of
//! either, read as one list in order. With `hops` trusted proxies in front of seawall,
//! the client is the entry `hops` from the right: the entries to its right were added by
//! those proxies, and those to its left are whatever the client sent, which nothing
//! vouches for. Entries are counted by position only (none is skipped for being trusted
//! or not). Empty entries are not counted. An entry that is not an address (`unknown`,
//! an obfuscated `_name`, garbage), or a list shorter than `hops`, names no client.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use http::HeaderValue;
use http::header::GetAll;

/// The client `hops` entries from the right of the `X-Forwarded-For` lines `values`.
pub(super) fn x_forwarded_for(values: GetAll<'_, HeaderValue>, hops: usize) -> Option<SocketAddr> {
    let entry = values
        .iter()
        .rev()
        .flat_map(|line| line.as_bytes().rsplit(|b| *b == b','))
        .map(trim)
        .filter(|entry| !entry.is_empty())
        .nth(hops.checked_sub(1)?)?;
    address(std::str::from_utf8(entry).ok()?)
}

/// The client in the `for=` parameter of the `Forwarded` element `hops` from the right
/// of the lines `values`. An element without `for=` names no client.
pub(super) fn forwarded(values: GetAll<'_, HeaderValue>, hops: usize) -> Option<SocketAddr> {
    let mut elements = Vec::new();
    for line in values {
        elements.extend(outside_quotes(line.as_bytes(), b',').map(trim).filter(|e| !e.is_empty()));
    }
    let element = elements.len().checked_sub(hops).map(|i| elements[i])?;
    let value = outside_quotes(element, b';').find_map(|pair| {
        let (name, value) = split_once(trim(pair), b'=')?;
        trim(name).eq_ignore_ascii_case(b"for").then(|| unquoted(trim(value)))
    })??;
    address(&value)
}

/// The address in one entry: an IPv4 or IPv6 address, either with a port
/// (`192.0.2.1:80`, `[2001:db8::1]:80`), or an IPv6 address in brackets alone; RFC
/// 7239's obfuscated port (`_name`) counts as none (0).
fn address(entry: &str) -> Option<SocketAddr> {
    let (ip, port) = if let Ok(ip) = entry.parse::<IpAddr>() {
        (ip, None)
    } else if let Some(rest) = entry.strip_prefix('[') {
        let (ip, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?),
        };
        (IpAddr::V6(ip.parse().ok()?), port)
    } else {
        let (ip, port) = entry.split_once(':')?;
        (IpAddr::V4(ip.parse::<Ipv4Addr>().ok()?), Some(port))
    };
    let port = match port {
        None => 0,
        Some(obfuscated) if obfuscated.starts_with('_') => 0,
        Some(port) => port.parse::<u16>().ok()?,
    };
    Some(SocketAddr::new(ip.to_canonical(), port))
}

/// `bytes` split at each `sep` outside a quoted string (a quoted value may hold commas
/// and semicolons; `\` escapes the next byte inside one).
fn outside_quotes(bytes: &[u8], sep: u8) -> impl Iterator<Item = &[u8]> {
    let (mut quoted, mut escaped) = (false, false);
    bytes.split(move |&b| {
        match (escaped, quoted, b) {
            (true, ..) => escaped = false,
            (false, true, b'\\') => escaped = true,
            (false, _, b'"') => quoted = !quoted,
            (false, false, b) if b == sep => return true,
            _ => {}
        }
        false
    })
}

/// A parameter's value: a token as it is, or a quoted string without its quotes and
/// escapes; `None` when the bytes are not text.
fn unquoted(value: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(value).ok()?;
    let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) else {
        return Some(text.to_owned());
    };
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        out.push(if c == '\\' { chars.next()? } else { c });
    }
    Some(out)
}

fn split_once(bytes: &[u8], sep: u8) -> Option<(&[u8], &[u8])> {
    let at = bytes.iter().position(|&b| b == sep)?;
    Some((&bytes[..at], &bytes[at + 1..]))
}

/// `bytes` without the spaces and tabs around them.
fn trim(bytes: &[u8]) -> &[u8] {
    bytes.trim_ascii()
}

#[cfg(test)]
mod tests {
    use http::HeaderMap;

    use super::*;

    fn xff(lines: &[&str], hops: usize) -> Option<String> {
        let mut map = HeaderMap::new();
        for line in lines {
            map.append("x-forwarded-for", line.parse().unwrap());
        }
        x_forwarded_for(map.get_all("x-forwarded-for"), hops).map(|a| a.to_string())
    }

    fn fwd(lines: &[&str], hops: usize) -> Option<String> {
        let mut map = HeaderMap::new();
        for line in lines {
            map.append("forwarded", line.parse().unwrap());
        }
        forwarded(map.get_all("forwarded"), hops).map(|a| a.to_string())
    }

    fn some(addr: &str) -> Option<String> {
        Some(addr.to_owned())
    }

    #[test]
    fn x_forwarded_for_takes_the_entry_hops_from_the_right() {
        assert_eq!(xff(&["192.0.2.1"], 1), some("192.0.2.1:0"));
        // What the client wrote itself is left of what the proxy added.
        assert_eq!(xff(&["6.6.6.6, 192.0.2.1"], 1), some("192.0.2.1:0"));
        // Two proxies: the first added the client, the second the first.
        assert_eq!(xff(&["6.6.6.6, 192.0.2.1, 10.0.0.5"], 2), some("192.0.2.1:0"));
        // Several lines are one list, in order.
        assert_eq!(xff(&["6.6.6.6, 192.0.2.1", "10.0.0.5"], 2), some("192.0.2.1:0"));
        assert_eq!(xff(&["6.6.6.6", "192.0.2.1"], 1), some("192.0.2.1:0"));
    }

    #[test]
    fn x_forwarded_for_reads_spaces_ports_and_ipv6() {
        assert_eq!(xff(&["  192.0.2.1  ,\t198.51.100.2 "], 1), some("198.51.100.2:0"));
        assert_eq!(xff(&["198.51.100.2:4711"], 1), some("198.51.100.2:4711"));
        assert_eq!(xff(&["2001:db8::1"], 1), some("[2001:db8::1]:0"));
        assert_eq!(xff(&["[2001:db8::1]"], 1), some("[2001:db8::1]:0"));
        assert_eq!(xff(&["[2001:db8::1]:443"], 1), some("[2001:db8::1]:443"));
        assert_eq!(xff(&["::ffff:192.0.2.1"], 1), some("192.0.2.1:0"), "an IPv4 client is IPv4");
        // Empty entries are not counted.
        assert_eq!(xff(&["192.0.2.1, , 198.51.100.2,"], 2), some("192.0.2.1:0"));
    }

    #[test]
    fn x_forwarded_for_names_no_client_when_short_or_not_an_address() {
        assert_eq!(xff(&["192.0.2.1"], 2), None, "too few hops");
        assert_eq!(xff(&[], 1), None);
        assert_eq!(xff(&[""], 1), None);
        assert_eq!(xff(&["unknown"], 1), None);
        assert_eq!(xff(&["192.0.2.1, unknown"], 1), None, "the entry in its place, not another");
        assert_eq!(xff(&["client.example"], 1), None);
        assert_eq!(xff(&["[2001:db8::1"], 1), None);
        assert_eq!(xff(&["[2001:db8::1]x"], 1), None);
        assert_eq!(xff(&["192.0.2.1:80:80"], 1), None);
        assert_eq!(xff(&["192.0.2.1:"], 1), None);
        assert_eq!(xff(&["300.0.0.1"], 1), None);
        assert_eq!(xff(&["192.0.2.1"], 0), None);
    }

    #[test]
    fn forwarded_takes_the_for_of_the_element_hops_from_the_right() {
        assert_eq!(fwd(&["for=192.0.2.60;proto=http;by=203.0.113.43"], 1), some("192.0.2.60:0"));
        assert_eq!(fwd(&["for=6.6.6.6, for=192.0.2.60"], 1), some("192.0.2.60:0"));
        assert_eq!(fwd(&["for=192.0.2.60, for=10.0.0.5"], 2), some("192.0.2.60:0"));
        assert_eq!(fwd(&["for=192.0.2.60", "for=10.0.0.5"], 2), some("192.0.2.60:0"));
        // Names are case-insensitive; spaces around the separators are allowed.
        assert_eq!(fwd(&["proto=https ; For=192.0.2.60 ; by=x"], 1), some("192.0.2.60:0"));
    }

    #[test]
    fn forwarded_reads_quoted_ipv6_ports_and_quoted_separators() {
        assert_eq!(fwd(&[r#"for="[2001:db8:cafe::17]:4711""#], 1), some("[2001:db8:cafe::17]:4711"));
        assert_eq!(fwd(&[r#"for="[2001:db8:cafe::17]""#], 1), some("[2001:db8:cafe::17]:0"));
        assert_eq!(fwd(&[r#"for="192.0.2.43:47011""#], 1), some("192.0.2.43:47011"));
        assert_eq!(fwd(&[r#"for="192.0.2.43:_port""#], 1), some("192.0.2.43:0"));
        // A comma or semicolon inside a quoted value separates nothing.
        assert_eq!(fwd(&[r#"for=192.0.2.1;host="a,b;c", for=192.0.2.2"#], 2), some("192.0.2.1:0"));
        assert_eq!(fwd(&[r#"for="\"192.0.2.1\"""#], 1), None);
    }

    #[test]
    fn forwarded_names_no_client_for_hidden_unknown_missing_or_short() {
        assert_eq!(fwd(&["for=_hidden"], 1), None);
        assert_eq!(fwd(&["for=_SEVKISEK, for=192.0.2.1"], 2), None);
        assert_eq!(fwd(&["for=unknown"], 1), None);
        assert_eq!(fwd(&["proto=https;by=10.0.0.1"], 1), None, "an element without for=");
        assert_eq!(fwd(&["for=192.0.2.60"], 2), None, "too few hops");
        assert_eq!(fwd(&[r#"for="[2001:db8::1"#], 1), None);
        assert_eq!(fwd(&["for="], 1), None);
        assert_eq!(fwd(&["192.0.2.60"], 1), None);
    }
}
