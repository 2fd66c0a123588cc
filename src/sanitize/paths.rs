//! Absolute file system paths: Unix, home-relative, Windows and UNC.

use super::bytes::{at, before, escape_at, escape_before, is_alnum, is_space_or_control, run_end, word_start};
use super::markers::MARK_PATH;
use super::span::Span;

/// Single-component absolute paths that are file system roots rather than, say, routes.
const KNOWN_ROOTS: &[&[u8]] = &[
    b"home",
    b"root",
    b"srv",
    b"etc",
    b"var",
    b"usr",
    b"opt",
    b"tmp",
    b"mnt",
    b"proc",
    b"sys",
    b"dev",
    b"run",
    b"Users",
    b"Volumes",
    b"private",
    b"app",
    b"data",
    b"nix",
    b"snap",
    b"lib",
    b"bin",
    b"sbin",
    b"boot",
    b"media",
    b"workspace",
    b"workspaces",
];

fn is_path_name_byte(c: u8) -> bool {
    is_alnum(c) || matches!(c, b'.' | b'_' | b'-' | b'~' | b'@' | b'+' | b'%' | b'$') || c >= 0x80
}

/// A path may start here: at the start, after whitespace, an opening bracket, quote,
/// `=`, `:`, `,`, `;`, `|`, a non-ASCII byte or an escape.
fn path_start(b: &[u8], i: usize) -> bool {
    let p = before(b, i);
    i == 0
        || escape_before(b, i)
        || is_space_or_control(p)
        || p >= 0x80
        || matches!(p, b'"' | b'\'' | b'(' | b'<' | b'>' | b'[' | b'{' | b'=' | b',' | b':' | b';' | b'|' | b'`')
}

/// Unix (`/srv/app/x.py`, `~/.config/x`), Windows (`C:\Users\x`) and UNC
/// (`\\host\share`) absolute paths. A lone `/`, relative paths and URL path parts stay
/// (the URL span, starting earlier, absorbs the latter).
pub(super) fn paths(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let end = match c {
            b'/' if path_start(b, i) => unix_path(b, i),
            b'~' if path_start(b, i) => home_path(b, i),
            b'\\' if path_start(b, i) && at(b, i + 1) == b'\\' && !escape_at(b, i + 1) => {
                is_alnum(at(b, i + 2)).then(|| windows_path_end(b, i + 2))
            }
            _ if c.is_ascii_alphabetic()
                && at(b, i + 1) == b':'
                && matches!(at(b, i + 2), b'\\' | b'/')
                && !escape_at(b, i + 2)
                && (is_alnum(at(b, i + 3)) || matches!(at(b, i + 3), b'_' | b'$') || at(b, i + 3) >= 0x80)
                && word_start(b, i) =>
            {
                Some(windows_path_end(b, i + 2))
            }
            _ => None,
        };
        match end {
            Some(end) if end > i => {
                spans.push(Span { start: i, end, marker: MARK_PATH });
                i = end;
            }
            _ => i += 1,
        }
    }
}

fn unix_path(b: &[u8], i: usize) -> Option<usize> {
    if !is_path_name_byte(at(b, i + 1)) {
        return None;
    }
    let end = trim_sentence_end(b, i, run_end(b, i, |c| c == b'/' || is_path_name_byte(c)));
    let path = &b[i + 1..end];
    let first = path.split(|&c| c == b'/').next().unwrap_or(path);
    let components = path.split(|&c| c == b'/').filter(|part| !part.is_empty()).count();
    (components >= 2 || KNOWN_ROOTS.contains(&first)).then_some(end)
}

/// `~/…` or `~user/…`.
fn home_path(b: &[u8], i: usize) -> Option<usize> {
    let user_end = run_end(b, i + 1, |c| is_path_name_byte(c) && c != b'~');
    if at(b, user_end) != b'/' || !is_path_name_byte(at(b, user_end + 1)) {
        return None;
    }
    Some(trim_sentence_end(b, i, run_end(b, user_end, |c| c == b'/' || is_path_name_byte(c))))
}

/// End of a Windows path whose first separator is at `i`. Spaces are crossed when the
/// next word still holds a backslash (`C:\Program Files\App\x.exe`).
fn windows_path_end(b: &[u8], i: usize) -> usize {
    let mut e = i;
    while e < b.len() {
        let c = b[e];
        let inside = (c == b'\\' && !escape_at(b, e))
            || c == b'/'
            || is_path_name_byte(c)
            || (c == b' ' && next_word_has_backslash(b, e + 1));
        if !inside {
            break;
        }
        e += 1;
    }
    trim_sentence_end(b, i, e)
}

fn next_word_has_backslash(b: &[u8], start: usize) -> bool {
    for k in start..b.len() {
        match b[k] {
            b'\\' => return !escape_at(b, k),
            c if c == b'/' || is_path_name_byte(c) => {}
            _ => return false,
        }
    }
    false
}

/// Drops a trailing `.` or `,` that ends the sentence rather than the path.
fn trim_sentence_end(b: &[u8], start: usize, mut end: usize) -> usize {
    while end > start + 1 && matches!(b[end - 1], b'.' | b',') {
        end -= 1;
    }
    end
}

#[cfg(test)]
mod tests {
    //! Absolute paths become markers; relative ones and look-alikes stay.

    use crate::sanitize::test_support::big;

    #[test]
    fn absolute_paths_are_redacted() {
        let cases = [
            ("open /home/alice/.ssh/id_rsa: permission denied", "open [path]: permission denied"),
            ("config /srv/app/config.yaml missing", "config [path] missing"),
            ("no such file: '/var/lib/app/db.sqlite'", "no such file: '[path]'"),
            ("read ~/.config/acme/credentials.json", "read [path]"),
            ("see ~deploy/app/logs", "see [path]"),
            ("cannot write /tmp", "cannot write [path]"),
            ("error at /srv/app/x.py:12", "error at [path]:12"),
            (r"C:\Users\bob\AppData\Local\acme\cfg.toml not found", "[path] not found"),
            (r"ran C:\Program Files\Acme Tools\bin\tool.exe today", "ran [path] today"),
            ("C:/Users/bob/x.txt", "[path]"),
            (r"share \\fileserver\finance\q3.xlsx is offline", "share [path] is offline"),
            ("path=/opt/acme/lib", "path=[path]"),
            ("/home/ünïcode/dir/file", "[path]"),
        ];
        for (input, expected) in cases {
            assert_eq!(big(input), expected, "{input}");
        }
    }

    #[test]
    fn things_that_are_not_absolute_paths_stay() {
        for s in [
            "a / b",
            "use / as separator",
            "read/write and TCP/IP",
            "relative src/main.rs:2:5",
            "ratio 1/2",
            "// comment",
            "see ./config.yaml",
            "route /health",
        ] {
            assert_eq!(big(s), s, "{s}");
        }
    }

    #[test]
    fn url_path_parts_are_part_of_the_url() {
        assert_eq!(big("GET https://api.example.com/home/alice/data failed"), "GET [url] failed");
        assert_eq!(big("file:///home/alice/notes.md"), "[url]");
    }
}
