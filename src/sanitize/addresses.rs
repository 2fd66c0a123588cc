//! IP addresses: IPv4 and IPv6, with an optional port or prefix length.

use super::bytes::{at, before, escape_before, is_alnum, marker_before, run_end, word_continues};
use super::markers::MARK_HOST;
use super::span::Span;

/// `10.0.3.7`, `10.0.3.7:5432`, `10.0.0.0/8`.
pub(super) fn ipv4(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        let p = before(b, i);
        if b[i].is_ascii_digit()
            && (escape_before(b, i) || !(is_alnum(p) || p == b'.' || marker_before(b, i)))
            && let Some(end) = ipv4_at(b, i)
        {
            spans.push(Span { start: i, end, marker: MARK_HOST });
            i = end;
        } else {
            i += 1;
        }
    }
}

fn ipv4_at(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i;
    for octet in 0..4 {
        if octet > 0 {
            if at(b, j) != b'.' {
                return None;
            }
            j += 1;
        }
        let end = run_end(b, j, |c| c.is_ascii_digit());
        let digits = b.get(j..end)?;
        if digits.is_empty() || digits.len() > 3 || parse_small(digits) > 255 {
            return None;
        }
        j = end;
    }
    if word_continues(b, j) || (at(b, j) == b'.' && at(b, j + 1).is_ascii_digit()) {
        return None;
    }
    Some(port_or_prefix_end(b, j))
}

/// After an address, `:port` (1–5 digits) or `/prefix` (1–3 digits) belong to it.
fn port_or_prefix_end(b: &[u8], j: usize) -> usize {
    if matches!(at(b, j), b':' | b'/') {
        let end = run_end(b, j + 1, |c| c.is_ascii_digit());
        let len = end - (j + 1);
        let max = if at(b, j) == b':' { 5 } else { 3 };
        if (1..=max).contains(&len) && !word_continues(b, end) {
            return end;
        }
    }
    j
}

fn parse_small(digits: &[u8]) -> u32 {
    digits.iter().fold(0u32, |n, &d| n.saturating_mul(10).saturating_add(u32::from(d - b'0')))
}

fn is_ipv6_byte(c: u8) -> bool {
    c.is_ascii_hexdigit() || c == b':' || c == b'.'
}

/// `fe80::1`, `2001:db8::8a2e:370:7334`, `[::1]:8080`, `::ffff:10.0.0.1`.
pub(super) fn ipv6(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let p = before(b, i);
        let found = if c == b'[' {
            bracketed_ipv6(b, i)
        } else if is_ipv6_byte(c)
            && c != b'.'
            && (escape_before(b, i) || !(is_ipv6_byte(p) || is_alnum(p) || marker_before(b, i)))
        {
            let mut end = run_end(b, i, is_ipv6_byte);
            while end > i && b[end - 1] == b'.' {
                end -= 1;
            }
            let valid = !word_continues(b, end) && is_ipv6(&b[i..end]);
            if !valid {
                i = end.max(i + 1);
                continue;
            }
            Some(end)
        } else {
            None
        };
        match found {
            Some(end) => {
                spans.push(Span { start: i, end, marker: MARK_HOST });
                i = end;
            }
            None => i += 1,
        }
    }
}

fn bracketed_ipv6(b: &[u8], i: usize) -> Option<usize> {
    let close = run_end(b, i + 1, |c| is_ipv6_byte(c) || c == b'%' || is_alnum(c));
    if at(b, close) != b']' || close - i > 64 {
        return None;
    }
    let inside = &b[i + 1..close];
    let address = inside.split(|&c| c == b'%').next().unwrap_or(inside);
    is_ipv6(address).then(|| port_or_prefix_end(b, close + 1))
}

/// Whether `s` is an IPv6 address: hex groups of up to four digits separated by `:`,
/// either eight of them or fewer with one `::`, optionally ending in dotted IPv4.
fn is_ipv6(s: &[u8]) -> bool {
    let compressed = s.windows(2).filter(|w| w == b"::").count();
    if compressed > 1 || s.windows(3).any(|w| w == b":::") || !s.iter().any(u8::is_ascii_hexdigit) {
        return false;
    }
    let groups: Vec<&[u8]> = s.split(|&c| c == b':').collect();
    let last = groups.len().saturating_sub(1);
    let mut count = 0;
    for (n, group) in groups.iter().enumerate() {
        if group.is_empty() {
            continue;
        }
        if group.contains(&b'.') {
            if n != last || ipv4_at(group, 0) != Some(group.len()) {
                return false;
            }
            count += 2;
        } else if group.len() > 4 || !group.iter().all(u8::is_ascii_hexdigit) {
            return false;
        } else {
            count += 1;
        }
    }
    let colons = groups.len() - 1;
    // A colon at either end must be half of `::`.
    let ends_ok = (s[0] != b':' || s.starts_with(b"::")) && (s[s.len() - 1] != b':' || s.ends_with(b"::"));
    ends_ok && if compressed == 1 { colons >= 2 && count <= 7 } else { count == 8 }
}
