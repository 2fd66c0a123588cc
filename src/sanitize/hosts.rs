//! Host names: any name with a port, and internal names (`localhost`, `*.internal`) alone.

use super::bytes::{at, is_alnum, marker_at, marker_before, run_end, skip_escape, word_continues};
use super::markers::MARK_HOST;
use super::span::Span;

/// Host names that only make sense inside a network.
const INTERNAL_SUFFIXES: &[&[u8]] =
    &[b"internal", b"local", b"localdomain", b"lan", b"corp", b"intranet", b"intra", b"svc", b"home.arpa"];
/// `file.py:12` is a source location, not a host and port.
const SOURCE_EXTENSIONS: &[&[u8]] = &[
    b"py", b"js", b"mjs", b"cjs", b"ts", b"tsx", b"jsx", b"rs", b"go", b"java", b"kt", b"rb", b"php", b"cc", b"cpp",
    b"hpp", b"cs", b"swift", b"scala", b"ex", b"exs", b"erl", b"lua", b"pl", b"sh", b"json", b"yaml", b"yml", b"toml",
    b"txt", b"log", b"md", b"html", b"css", b"sql", b"xml", b"ini", b"conf", b"cfg", b"env", b"lock", b"so", b"dll",
    b"exe", b"class",
];
/// Single words that precede `:1234` without being hosts.
const NOT_HOSTS: &[&[u8]] = &[
    b"line",
    b"lines",
    b"col",
    b"column",
    b"row",
    b"pos",
    b"position",
    b"offset",
    b"index",
    b"idx",
    b"char",
    b"byte",
    b"bytes",
    b"page",
    b"item",
    b"step",
    b"port",
    b"code",
    b"status",
    b"error",
    b"errno",
    b"time",
    b"at",
    b"size",
    b"len",
    b"length",
    b"limit",
    b"count",
    b"max",
    b"min",
    b"id",
    b"version",
    b"attempt",
    b"retry",
    b"year",
    b"pid",
];

fn is_host_byte(c: u8) -> bool {
    is_alnum(c) || matches!(c, b'.' | b'-' | b'_')
}

/// `db.prod.internal:5432`, `api.example.com:443`, `redis:6379`, `localhost`,
/// `cache.svc` — names with a port, and internal names without one.
pub(super) fn hostnames(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        if !is_host_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = skip_escape(b, i);
        let run = run_end(b, i, is_host_byte);
        i = run;
        if marker_before(b, start) || marker_at(b, run) {
            // Glued to a token already replaced: not a name of its own.
            continue;
        }
        let mut end = run;
        while end > start && matches!(b[end - 1], b'.' | b'-') {
            end -= 1;
        }
        let Some(name) = b.get(start..end).filter(|n| !n.is_empty()) else {
            continue;
        };
        let with_port = (end == run && at(b, end) == b':')
            .then(|| port_end(b, end + 1))
            .flatten()
            .filter(|&pe| host_with_port(name, pe - end - 1));
        if let Some(pe) = with_port {
            spans.push(Span { start, end: pe, marker: MARK_HOST });
            i = pe;
        } else if is_internal_name(name) {
            spans.push(Span { start, end, marker: MARK_HOST });
        }
    }
}

/// End of a port starting at `j`; not a `line:col` pair or a decimal.
fn port_end(b: &[u8], j: usize) -> Option<usize> {
    let end = run_end(b, j, |c| c.is_ascii_digit());
    let len = end - j;
    let next = at(b, end);
    let continues = word_continues(b, end) || (matches!(next, b':' | b'.') && at(b, end + 1).is_ascii_digit());
    ((1..=5).contains(&len) && !continues).then_some(end)
}

fn labels(name: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    name.split(|&c| c == b'.')
}

fn valid_labels(name: &[u8]) -> bool {
    labels(name).all(|label| !label.is_empty() && label[0] != b'-' && label[label.len() - 1] != b'-')
}

fn host_with_port(name: &[u8], port_digits: usize) -> bool {
    if name.eq_ignore_ascii_case(b"localhost") {
        return true;
    }
    if !valid_labels(name) {
        return false;
    }
    match labels(name).next_back() {
        Some(tld) if name.contains(&b'.') => {
            tld.len() >= 2
                && tld.iter().all(u8::is_ascii_alphabetic)
                && !SOURCE_EXTENSIONS.iter().any(|ext| tld.eq_ignore_ascii_case(ext))
        }
        _ => {
            port_digits >= 4
                && name.len() >= 2
                && name.iter().any(u8::is_ascii_alphabetic)
                && !NOT_HOSTS.iter().any(|w| name.eq_ignore_ascii_case(w))
        }
    }
}

fn is_internal_name(name: &[u8]) -> bool {
    if name.eq_ignore_ascii_case(b"localhost") {
        return true;
    }
    name.contains(&b'.')
        && valid_labels(name)
        && INTERNAL_SUFFIXES.iter().any(|suffix| {
            name.len() > suffix.len() + 1
                && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
                && name[name.len() - suffix.len() - 1] == b'.'
        })
}

#[cfg(test)]
mod tests {
    //! Addresses and internal host names become markers; look-alikes stay.

    use crate::sanitize::test_support::big;

    #[test]
    fn addresses_and_internal_hosts_are_redacted() {
        let cases = [
            ("dial tcp 10.0.3.7:5432: connect: connection refused", "dial tcp [host]: connect: connection refused"),
            ("from 192.168.1.20 via 10.0.0.0/8", "from [host] via [host]"),
            ("listen [fe80::1]:80 failed", "listen [host] failed"),
            ("peer fe80::1ff:fe23:4567:890a%eth0", "peer [host]%eth0"),
            ("addr 2001:db8:85a3::8a2e:370:7334 down", "addr [host] down"),
            ("mapped ::ffff:10.0.0.1 here", "mapped [host] here"),
            ("loopback ::1 and 1:2:3:4:5:6:7:8", "loopback [host] and [host]"),
            ("connect db.prod.internal:5432 refused", "connect [host] refused"),
            ("host redis.default.svc.cluster.local unreachable", "host [host] unreachable"),
            ("api.example.com:443 timed out", "[host] timed out"),
            ("dial redis:6379: refused", "dial [host]: refused"),
            ("localhost refused", "[host] refused"),
            ("http on localhost:8080", "http on [host]"),
            ("printer.corp is down", "[host] is down"),
            ("mail to ops@mx1.internal", "mail to ops@[host]"),
        ];
        for (input, expected) in cases {
            assert_eq!(big(input), expected, "{input}");
        }
    }

    #[test]
    fn things_that_are_not_hosts_stay() {
        for s in [
            "syntax error at line:12",
            "at 12:30:45 UTC",
            "in app.py:42 and main.go:7",
            "index.js:10:5",
            "version 1.2.3",
            "std::io::Error and Vec::new",
            "ratio 3.14",
            "MAC aa:bb:cc:dd:ee:ff",
            "example.com is public",
            "see section 4.2.1",
            "2024-01-01T12:30:00Z",
        ] {
            assert_eq!(big(s), s, "{s}");
        }
    }
}
