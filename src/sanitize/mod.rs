//! Scrubbing of any text a peer wrote, before the gateway quotes it to a client.
//!
//! Upstream servers put whatever they like into error messages: stack traces, file
//! paths, internal addresses, credentials, terminal colour codes. Everything the gateway
//! quotes from a peer goes through [`sanitize`] (or its shorthands [`ident`] and
//! [`text`]), which runs one pipeline:
//!
//! 1. **bound** — only a prefix is looked at (64 KiB, or twice the cap if that is more);
//!    the cut is moved back to a separator so that no token straddles it;
//! 2. **strip** complete ANSI CSI/OSC sequences (colours, titles, hyperlinks);
//! 3. **drop key blocks** (`-----BEGIN … PRIVATE KEY-----` … `-----END …-----`), which
//!    span lines and must go before lines are judged one by one;
//! 4. **reduce traces** — Python, Java, JavaScript, Rust and Go stack traces lose their
//!    frames and headers (`Traceback (most recent call last):`); the headline a handler
//!    wrote on purpose (`ValueError: bad input`) stays, and a trace with no headline at
//!    all becomes `[trace]`;
//! 5. **redact** URLs (`[url]`), absolute paths (`[path]`), addresses and internal host
//!    names (`[host]`) and credentials (`[redacted]`);
//! 6. **escape** every byte outside printable ASCII as `\xNN`;
//! 7. **cap** to a byte budget, ending in `...` when cut — never inside an escape or a
//!    marker, and after a nearby delimiter rather than inside a word.
//!
//! Steps 2–5 are [`scrub`], which long texts use on their own. Redaction comes before
//! escaping and capping, so a secret is never half cut and left recognisable.
//!
//! `quote` runs steps 6 and 7 alone, for the few texts that must stay as written.
//!
//! Every scanner is a hand-written single pass over bytes — no regular expressions, no
//! backtracking — so the cost is linear in the (bounded) input. The scanners read an
//! escape `\xNN` as the delimiter its raw byte was, split lines at `\x0a` as at a
//! newline, and let a marker border its neighbours as the token it replaced did; so a
//! second run over the output normally finds nothing new. A cut can still leave the
//! front of a long token that reads differently on its own, so [`sanitize`] repeats the
//! pipeline until nothing changes (at most four runs, the later ones over at most `cap`
//! bytes): idempotence is a property of the construction, not a hope.
//!
//! One file per concern: `ansi` and `traces` (steps 2 and 4), then `redact` (step 5),
//! which runs the detectors in `urls`, `paths`, `addresses`, `hosts`, `secrets` (also
//! step 3) and `tokens` over the byte helpers in `bytes`; each detector reports a
//! `span::Span` to replace with one of the texts in `markers`; `json` bounds whole JSON
//! values. This file holds the pipeline, escaping and capping.

mod addresses;
mod ansi;
mod bytes;
mod hosts;
mod json;
mod markers;
mod paths;
mod redact;
mod secrets;
mod span;
mod tokens;
mod traces;
mod urls;

use std::borrow::Cow;

use serde_json::Value;

use ansi::strip_ansi;
use bytes::{is_alnum, is_space_or_control};
use markers::{ELLIPSIS, MARK_REDACTED, MARKERS};
use redact::redact;

use secrets::redact_pem_blocks;
use traces::reduce_traces;

/// Cap in bytes for short identifiers a peer sent: tool names, cursors, versions, ids.
pub const IDENT_CAP: usize = 80;
/// Cap in bytes for longer quoted text: URIs, causes, messages.
pub const TEXT_CAP: usize = 256;

/// How much of the input is looked at, at least. The output is at most `cap` bytes, so
/// scanning a megabyte to produce 256 bytes would be wasted work.
const SCAN_LIMIT: usize = 64 * 1024;
/// A cut moves back to a delimiter at most this far.
const CUT_WORD_WINDOW: usize = 24;
/// The pipeline normally settles after one pass (the second confirms it).
const MAX_PASSES: usize = 4;

/// Scrubs, escapes and caps `text` to at most `cap` bytes of printable ASCII.
///
/// The result never contains a byte outside 0x20–0x7E, is at most `cap` bytes long
/// (including a trailing `...` when cut) and is a fixed point:
/// `sanitize(&sanitize(x, c), c) == sanitize(x, c)`.
pub fn sanitize(text: &str, cap: usize) -> String {
    sanitize_quoting(text, cap, &Quoting::default())
}

/// What a sanitiser may leave of a peer's text besides what it always leaves.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Quoting<'a> {
    /// Texts the client itself sent (the values of its request's arguments, the URI it
    /// asked for): where one stands verbatim in the text, it is kept, escaped — it is no
    /// secret from that client, and a model needs it to correct its call.
    pub(crate) client_values: &'a [String],
    /// Remove credentials only: URLs, paths, addresses, host names and stack traces stay
    /// (for a server the operator trusts).
    pub(crate) credentials_only: bool,
}

/// Longest client value kept verbatim (bytes); a longer one is scrubbed like the rest.
pub(crate) const CLIENT_VALUE_CAP: usize = TEXT_CAP;

/// [`sanitize`] with `quoting`'s allowances. The guarantees are the same: printable
/// ASCII, at most `cap` bytes, a fixed point of itself.
pub(crate) fn sanitize_quoting(text: &str, cap: usize, quoting: &Quoting<'_>) -> String {
    // Later passes read escaped text: the client's values are looked for escaped too.
    let kept: Vec<String> = quoting
        .client_values
        .iter()
        .filter(|v| !v.is_empty() && v.len() <= CLIENT_VALUE_CAP)
        .flat_map(|v| {
            let escaped = escape_within(v, v.len().saturating_mul(4));
            let twice = (escaped != *v).then_some(escaped);
            std::iter::once(v.clone()).chain(twice)
        })
        .collect();
    let pass = |text: &str| pass_keeping(text, cap, &kept, quoting.credentials_only);
    let mut current = pass(text);
    for _ in 1..MAX_PASSES {
        let next = pass(&current);
        if next == current {
            return current;
        }
        current = next;
    }
    // A text that keeps changing under its own scrubbing is not worth showing.
    if MARK_REDACTED.len() <= cap { MARK_REDACTED.to_owned() } else { String::new() }
}

/// Sanitises an identifier (tool name, cursor, version, id) to [`IDENT_CAP`] bytes.
pub fn ident(text: &str) -> String {
    sanitize(text, IDENT_CAP)
}

/// Sanitises a URI, cause or message to [`TEXT_CAP`] bytes.
pub fn text(text: &str) -> String {
    sanitize(text, TEXT_CAP)
}

/// Escapes and caps `text` without redacting anything, for text the client must get
/// back as written: a URI it sent itself, or a URL an upstream asks it to open. Bytes
/// outside printable ASCII become `\xNN`; past `cap` bytes the text is cut and ends in
/// `...` (never inside an escape).
pub(crate) fn quote(text: &str, cap: usize) -> String {
    let full: usize = text.bytes().map(escaped_len).sum();
    if full <= cap {
        return escape_within(text, full);
    }
    let mut out = escape_within(text, cap.saturating_sub(ELLIPSIS.len()));
    out.push_str(ELLIPSIS.get(..cap.min(ELLIPSIS.len())).unwrap_or(""));
    out
}

/// Removes credentials only — keys, tokens, passwords, `Authorization` values, the
/// `user:password` of connection strings, PEM blocks — then escapes and caps as
/// [`quote`] does: for peer text the operator reads in seawall's own log (a stdio
/// server's stderr, a tool's text as it was before scrubbing), where paths, hosts and
/// URLs help find the fault and credentials have no place. Redaction comes first, so a
/// secret is never half cut and left recognisable.
pub(crate) fn redact_credentials(text: &str, cap: usize) -> String {
    let plain = strip_ansi(text);
    let keyless = redact_pem_blocks(&plain);
    let redacted = redact::redact_credentials(&keyless);
    quote(&redacted, cap)
}

/// `text` without its complete terminal escape sequences (CSI and OSC), the first step
/// of [`scrub`]: what the later steps see.
pub fn without_escapes(text: &str) -> String {
    strip_ansi(text).into_owned()
}

/// Applies the redactions only: strips ANSI sequences, reduces stack traces and replaces
/// URLs, paths, hosts and credentials with markers. Newlines and non-ASCII text survive
/// and nothing is capped; the caller caps (for long `isError` texts, with a larger cap).
pub fn scrub(text: &str) -> String {
    let plain = strip_ansi(text);
    // Key blocks span lines; trace reduction must not separate a body from its header.
    let keyless = redact_pem_blocks(&plain);
    let reduced = reduce_traces(&keyless);
    redact(&reduced)
}

/// One run of the pipeline.
#[cfg(test)]
fn pass(text: &str, cap: usize) -> String {
    pass_keeping(text, cap, &[], false)
}

/// One run of the pipeline, keeping what lies inside `kept` (and with
/// `credentials_only`, all but credentials).
fn pass_keeping(text: &str, cap: usize, kept: &[String], credentials_only: bool) -> String {
    let bounded = bound(text, SCAN_LIMIT.max(cap.saturating_mul(2)));
    let plain = strip_ansi(&bounded);
    let keyless = redact_pem_blocks(&plain);
    let scrubbed = if credentials_only {
        redact::redact_keeping(&keyless, kept, true)
    } else {
        redact::redact_keeping(&reduce_traces(&keyless), kept, false)
    };
    escape_and_cap(scrubbed.trim_matches(|c: char| c.is_ascii_whitespace()), cap)
}

/// Sanitises every string in `value`, object keys included, each to `cap` bytes.
///
/// The result is bounded: containers nested deeper than 8 levels become `"[truncated]"`,
/// at most 64 entries are kept per container and about 4 KiB in total; what is dropped is
/// counted in a trailing `"[N more]"` entry (under the key `"..."` in objects).
pub(crate) fn sanitize_json(value: &Value, cap: usize) -> Value {
    sanitize_json_quoting(value, cap, &Quoting::default())
}

/// [`sanitize_json`] with `quoting`'s allowances for every string.
pub(crate) fn sanitize_json_quoting(value: &Value, cap: usize, quoting: &Quoting<'_>) -> Value {
    let mut budget = json::JSON_BUDGET;
    json::json_value(value, cap, 0, &mut budget, quoting)
}

// --- bounding, escaping, capping ----------------------------------------------------------

/// Keeps at most `limit` bytes, cut back to a separator so that the token the limit
/// falls into — possibly a secret that would no longer be recognisable — is dropped.
fn bound(text: &str, limit: usize) -> Cow<'_, str> {
    if text.len() <= limit {
        return Cow::Borrowed(text);
    }
    let bytes = text.as_bytes();
    let head = bytes.get(..limit).unwrap_or(bytes);
    let cut = head.iter().rposition(|&c| is_cut_separator(c)).unwrap_or(0);
    // `cut` is at an ASCII byte, hence a char boundary.
    Cow::Owned(format!("{}{ELLIPSIS}", text.get(..cut).unwrap_or("")))
}

/// A byte no credential, path, host or JWT contains.
fn is_cut_separator(c: u8) -> bool {
    is_space_or_control(c)
        || matches!(c, b'"' | b'\'' | b'<' | b'>' | b',' | b';' | b'{' | b'}' | b'[' | b']' | b'(' | b')' | b'|' | b'`')
}

/// Escapes everything outside printable ASCII and cuts to `cap` bytes, `...` included.
fn escape_and_cap(text: &str, cap: usize) -> String {
    let full: usize = text.bytes().map(escaped_len).sum();
    let budget = if full <= cap { full } else { cap.saturating_sub(ELLIPSIS.len()) };
    let mut out = escape_within(text, budget);
    if full > cap {
        // Never leave half a marker.
        if let Some(open) = out.rfind('[')
            && MARKERS.iter().any(|m| m.len() > out.len() - open && m.starts_with(&out[open..]))
        {
            out.truncate(open);
        }
        // Cut after a delimiter when one is near: the front of a token can read as
        // something the whole did not (`10.0.0.1` of `10.0.0.123`, `localhost` of
        // `localhost-x`), and half words read badly anyway.
        if let Some(delimiter) = out.bytes().rposition(is_cut_point)
            && out.len() - delimiter <= CUT_WORD_WINDOW
        {
            out.truncate(delimiter + 1);
        }
        out.push_str(ELLIPSIS.get(..cap.min(ELLIPSIS.len())).unwrap_or(""));
    }
    out
}

/// The longest prefix of `text` whose escaped form fits in `budget` bytes, escaped.
fn escape_within(text: &str, budget: usize) -> String {
    let mut out = String::with_capacity(budget + ELLIPSIS.len());
    for c in text.bytes() {
        if out.len() + escaped_len(c) > budget {
            break;
        }
        if (0x20..=0x7e).contains(&c) {
            out.push(char::from(c));
        } else {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\x");
            out.push(char::from(HEX[usize::from(c >> 4)]));
            out.push(char::from(HEX[usize::from(c & 0xf)]));
        }
    }
    out
}

/// A byte no detector treats as part of a token.
fn is_cut_point(c: u8) -> bool {
    !(is_alnum(c)
        || matches!(
            c,
            b'.' | b'_' | b'-' | b':' | b'\\' | b'/' | b'[' | b']' | b'~' | b'@' | b'%' | b'+' | b'=' | b'$'
        ))
}

fn escaped_len(c: u8) -> usize {
    if (0x20..=0x7e).contains(&c) { 1 } else { 4 }
}

/// What the tests of several detectors share.
#[cfg(test)]
mod test_support {
    /// Sanitises with a cap large enough that nothing is cut.
    pub(super) fn big(text: &str) -> String {
        super::sanitize(text, 4096)
    }
}

#[cfg(test)]
mod tests {
    //! Tests of the sanitiser as a whole: the pipeline, escaping, capping and quoting;
    //! then properties over random and adversarial input.

    use proptest::prelude::*;

    use super::test_support::big;
    use super::tokens::looks_like_key;
    use super::*;

    fn assert_clean(out: &str, cap: usize) {
        assert!(out.len() <= cap, "{} > {cap}: {out:?}", out.len());
        assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)), "not printable: {out:?}");
        assert_eq!(sanitize(out, cap), out, "not idempotent");
    }

    // --- escaping and capping --------------------------------------------------------------

    #[test]
    fn printable_ascii_passes_unchanged() {
        let s = "tool 'search' failed: quota exceeded (try again in 5 s) {a: [1, 2]} ~!@#$%^&*_+|";
        assert_eq!(big(s), s);
    }

    #[test]
    fn bytes_outside_printable_ascii_become_hex_escapes() {
        assert_eq!(big("café"), "caf\\xc3\\xa9");
        assert_eq!(big("a\nb\tc\rd"), "a\\x0ab\\x09c\\x0dd");
        assert_eq!(big("bell\u{7}del\u{7f}nul\0"), "bell\\x07del\\x7fnul\\x00");
        assert_eq!(big("x\u{1b}y"), "x\\x1by");
        assert_eq!(big("\u{1F600}"), "\\xf0\\x9f\\x98\\x80");
    }

    #[test]
    fn surrounding_whitespace_is_trimmed() {
        assert_eq!(big("\n  error: boom \r\n"), "error: boom");
    }

    #[test]
    fn complete_ansi_sequences_are_stripped() {
        assert_eq!(big("\u{1b}[1;31mError\u{1b}[0m: boom"), "Error: boom");
        assert_eq!(big("\u{1b}[?25lhidden\u{1b}[K"), "hidden");
        // OSC 8 hyperlink (the URL inside goes with it) and a window title.
        assert_eq!(big("see \u{1b}]8;;http://10.0.0.1/x\u{1b}\\docs\u{1b}]8;;\u{1b}\\ now"), "see docs now");
        assert_eq!(big("\u{1b}]0;title\u{7}text"), "text");
        // Incomplete sequences stay, visible and harmless.
        assert_eq!(big("a\u{1b}[31"), "a\\x1b[31");
        assert_eq!(big("a\u{1b}]0;never ends"), "a\\x1b]0;never ends");
    }

    #[test]
    fn a_sequence_never_takes_the_space_before_a_secret_and_its_first_letter() {
        // `ESC [ SP B` is a complete CSI to ECMA-48; stripped, it took " B" from "Bearer".
        let out = scrub("x\u{1b}[ Bearer Zk3Q9x2LmPq7Rt5Vw8Y1 y");
        assert!(!out.contains("Zk3Q9x2LmPq7Rt5Vw8Y1"), "{out:?}");
        assert_eq!(big("\u{1b}[!p\u{1b}[2 q"), "\\x1b[2 q");
    }

    #[test]
    fn cap_counts_the_ellipsis() {
        let long = "a".repeat(100);
        let out = sanitize(&long, 10);
        assert_eq!(out, "aaaaaaa...");
        assert_eq!(sanitize(&"a".repeat(10), 10), "a".repeat(10));
        assert_eq!(sanitize(&"a".repeat(11), 10), "aaaaaaa...");
        assert_eq!(ident(&"t".repeat(200)).len(), IDENT_CAP);
        let out = text(&"word ".repeat(200));
        assert!(out.len() <= TEXT_CAP && out.ends_with("word ..."), "{out}");
        // A cut backs off to a space only when one is near.
        assert_eq!(sanitize(&format!("a {}", "b".repeat(100)), 16), "a ...");
        assert_eq!(sanitize(&format!("a {}", "b".repeat(100)), 40), format!("a {}...", "b".repeat(35)));
        // Nor does it leave half a marker.
        assert_eq!(sanitize("value password=hunter2", 22), "value ...");
    }

    #[test]
    fn cap_never_cuts_inside_an_escape() {
        // Each é is two escapes of four bytes; a cap of 12 leaves 9 for content: two escapes.
        let out = sanitize("éééé", 12);
        assert_eq!(out, "\\xc3\\xa9...");
        for cap in 0..40 {
            let out = sanitize("é€\u{1F600}x\ny", cap);
            assert_clean(&out, cap);
            let body = out.trim_end_matches('.');
            let tail = body.rsplit("\\x").next().unwrap_or("");
            assert!(!body.contains("\\x") || tail.len() >= 2, "cut escape: {out:?}");
        }
    }

    #[test]
    fn tiny_caps() {
        assert_eq!(sanitize("hello", 0), "");
        assert_eq!(sanitize("hello", 1), ".");
        assert_eq!(sanitize("hello", 2), "..");
        assert_eq!(sanitize("hello", 3), "...");
        assert_eq!(sanitize("hello", 4), "h...");
        assert_eq!(sanitize("", 10), "");
    }

    // --- scrub and bounding -----------------------------------------------------------------

    #[test]
    fn scrub_keeps_layout_and_unicode() {
        let out = scrub("Überprüfung fehlgeschlagen:\n  token=abc\n  path /srv/x/y\n");
        assert_eq!(out, "Überprüfung fehlgeschlagen:\n  token=[redacted]\n  path [path]\n");
    }

    #[test]
    fn a_megabyte_of_input_completes() {
        let adversarial = [
            "sk-".repeat(350_000),
            "eyJ".repeat(350_000),
            "eyJaaaaaaaaaa.".repeat(75_000),
            "[".repeat(1_000_000),
            ":".repeat(1_000_000),
            "/a".repeat(500_000),
            "\u{1b}]".repeat(500_000),
            "\u{1b}[".repeat(500_000),
            "http://".repeat(150_000),
            "password=".repeat(110_000),
            "a-".repeat(500_000),
            "1.".repeat(500_000),
            "at x (y:1)\n".repeat(90_000),
            "C:\\a b".repeat(160_000),
            "é".repeat(500_000),
        ];
        for input in &adversarial {
            let out = text(input);
            assert_clean(&out, TEXT_CAP);
            // The unbounded scrub is linear too.
            let _ = scrub(input);
        }
    }

    #[test]
    fn a_secret_straddling_the_scan_limit_does_not_leak() {
        // Frames that reduce to nothing push the secret to the scan limit while leaving the
        // output short enough that a leftover piece of it would show.
        let secret = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
        let mut head = String::from("Traceback (most recent call last):\n");
        while head.len() < SCAN_LIMIT - 200 {
            head.push_str("  File \"/x.py\", line 1\n");
        }
        head.push_str("Error: boom ");
        for shift in 1..secret.len() {
            let mut input = head.clone();
            while input.len() < SCAN_LIMIT - shift {
                input.push(' ');
            }
            input.push_str(secret);
            input.push_str(" tail");
            let out = sanitize(&input, 4096);
            assert!(out.starts_with("Error: boom"), "{shift}: {out}");
            assert!(!out.contains("ghp_") && !out.contains("16C7"), "{shift}: {out}");
        }
    }

    #[test]
    fn markers_and_fallback_are_fixed_points() {
        for marker in MARKERS {
            assert_eq!(big(marker), marker);
        }
        assert_eq!(
            big("password=[redacted] Bearer [redacted] [url] [path] [host]"),
            "password=[redacted] Bearer [redacted] [url] [path] [host]"
        );
    }

    #[test]
    fn samples_settle_in_one_pass() {
        let samples = [
            "Traceback (most recent call last):\n  File \"/a.py\", line 1\nValueError: x at 10.0.0.1:80",
            "café password=hunter2\nnext /home/a/b",
            "\u{1b}[31mBearer abcdefghijkl\u{1b}[0m é/home/x/y é10.0.0.1",
            "line\n\tat com.x.Y(Y.java:1)\nmore",
        ];
        for s in samples {
            for cap in [16, 40, 80, 256] {
                let once = pass(s, cap);
                assert_eq!(pass(&once, cap), once, "{s:?} @ {cap}");
            }
        }
    }

    // --- quoting without redaction -----------------------------------------------------------

    #[test]
    fn quote_keeps_urls_and_escapes_what_is_not_printable() {
        assert_eq!(quote("nope://missing/thing", TEXT_CAP), "nope://missing/thing");
        assert_eq!(quote("https://10.0.0.1/a?token=x", TEXT_CAP), "https://10.0.0.1/a?token=x");
        assert_eq!(quote("file:///é\n\u{1b}[31m", TEXT_CAP), "file:///\\xc3\\xa9\\x0a\\x1b[31m");
    }

    #[test]
    fn quote_caps_with_an_ellipsis_never_inside_an_escape() {
        let long = format!("demo://{}", "a".repeat(300));
        let out = quote(&long, TEXT_CAP);
        assert_eq!(out.len(), TEXT_CAP);
        assert!(out.starts_with("demo://aaa") && out.ends_with("a..."), "{out}");
        let wide = "é".repeat(100);
        let out = quote(&wide, 10);
        assert_eq!(out, "\\xc3...", "a cut escape is dropped whole");
        assert_eq!(quote("abcdef", 2), "..");
    }

    // --- credentials only (log lines) --------------------------------------------------------

    #[test]
    fn redacting_credentials_keeps_paths_hosts_and_urls() {
        use crate::sanitize::redact_credentials;
        let cases = [
            (
                "starting; DATABASE_URL=postgres://app_user:hunter2@db.internal:5432/orders",
                "starting; DATABASE_URL=postgres://[redacted]@db.internal:5432/orders",
            ),
            (
                "  File \"/srv/app/handlers/tools.py\", line 42, in call password=hunter2",
                "  File \"/srv/app/handlers/tools.py\", line 42, in call password=[redacted]",
            ),
            ("Authorization: Bearer Zm9vYmFyYmF6LWJlYXJlci10b2tlbi00Mg", "Authorization: [redacted]"),
            (
                "GET https://api.example/v1?api_key=Q1w2E3r4T5y6 from 10.0.3.7",
                "GET https://api.example/v1?api_key=[redacted] from 10.0.3.7",
            ),
            ("\u{1b}[31mred\u{1b}[0m tab\there é", "red tab\\x09here \\xc3\\xa9"),
        ];
        for (input, expected) in cases {
            assert_eq!(redact_credentials(input, 1024), expected, "{input}");
        }
        let long = format!("password=hunter2 {}", "x".repeat(2000));
        let out = redact_credentials(&long, 100);
        assert!(out.len() <= 100 && out.ends_with("...") && !out.contains("hunter2"), "{out}");
    }

    // --- what the client itself sent ---------------------------------------------------------

    #[test]
    fn what_the_client_sent_is_kept_and_what_the_upstream_added_is_not() {
        use crate::sanitize::{Quoting, TEXT_CAP, sanitize_quoting};
        let values = vec!["/home/alice/notes.txt".to_owned(), "/home/é/x".to_owned(), "hunter2".to_owned()];
        let standard = Quoting { client_values: &values, credentials_only: false };
        let cases = [
            (
                "Access denied - path outside allowed directories: /home/alice/notes.txt not in /srv/data",
                "Access denied - path outside allowed directories: /home/alice/notes.txt not in [path]",
            ),
            ("password=Upstream-Pw9 for /home/alice/notes.txt", "password=[redacted] for /home/alice/notes.txt"),
            // The client's own secret-looking value is its own.
            ("login failed: password=hunter2", "login failed: password=hunter2"),
            // What merely contains the client's value is still the upstream's.
            ("read file:///home/alice/notes.txt failed", "read [url] failed"),
            ("no such dir /home/é/x", "no such dir /home/\\xc3\\xa9/x"),
        ];
        for (input, expected) in cases {
            let out = sanitize_quoting(input, TEXT_CAP, &standard);
            assert_eq!(out, expected, "{input}");
            assert_eq!(sanitize_quoting(&out, TEXT_CAP, &standard), out, "a fixed point: {out}");
        }
        let strict = Quoting::default();
        assert_eq!(
            sanitize_quoting(cases[0].0, TEXT_CAP, &strict),
            "Access denied - path outside allowed directories: [path] not in [path]"
        );
        let trusted = Quoting { client_values: &values, credentials_only: true };
        assert_eq!(
            sanitize_quoting("cannot open /srv/data/x.db on db.internal: token=Upstream-T0ken-77", TEXT_CAP, &trusted),
            "cannot open /srv/data/x.db on db.internal: token=[redacted]"
        );
    }

    // --- properties --------------------------------------------------------------------------
    // Over random and adversarial input, output is capped, printable and a fixed point, and
    // planted secrets never survive.

    /// Fragments that exercise every detector and their interplay with escapes and cuts.
    const SOUP: &[&str] = &[
        " ",
        " ",
        "\n",
        "\t",
        "\r\n",
        "é",
        "€",
        "\u{1b}[31m",
        "\u{1b}]0;",
        "\u{7}",
        "\\",
        "\\x0a",
        "\\\\",
        "x0a",
        "[redacted]",
        "[url]",
        "[path]",
        "...",
        ".",
        ",",
        ":",
        "::",
        "=",
        "\"",
        "'",
        "(",
        ")",
        "[",
        "]",
        "/",
        "//",
        "~",
        "@",
        "-",
        "_",
        "C:",
        "C:\\",
        "http",
        "://",
        "eyJ",
        "eyJhbGciOiJIUzI1NiJ9",
        "sk-",
        "sk_test_",
        "ghp_",
        "AKIA",
        "ABCDEFGHIJKLMNOP",
        "xoxb-",
        "Bearer",
        "Basic",
        "password",
        "token",
        "Authorization",
        "secret",
        "at ",
        "File \"",
        "\", line 1",
        "Traceback (most recent call last):",
        "  ",
        "goroutine 1 [running]:",
        "stack backtrace:",
        "thread 'main' panicked at '",
        "', ",
        "Caused by:",
        "... 3 more",
        "10.0.0.1",
        "fe80",
        "1",
        "12",
        "5432",
        "localhost",
        ".internal",
        "db",
        "home",
        "srv",
        "0123456789abcdef",
        "A1b2C3d4E5f6",
        "aB3",
        "Zz9",
        "-----BEGIN ",
        "-----END ",
        "-----",
        "line",
        "main.go",
        "a",
        "word",
        "^^^",
    ];

    fn soup() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(SOUP), 0..60).prop_map(|parts| parts.concat())
    }

    fn secret_kind() -> impl Strategy<Value = (String, String)> {
        // (text to plant, the part that must not survive)
        let bare = |pattern: &'static str| pattern.prop_map(|s: String| (s.clone(), s));
        prop_oneof![
            "[A-Za-z0-9._~+/-]{19}[0-9]".prop_map(|t| (format!("Bearer {t}"), t)),
            "[A-Za-z0-9+/]{12,30}[0-9]={0,2}".prop_map(|t| (format!("Basic {t}"), t)),
            bare("eyJ[A-Za-z0-9_-]{10,30}\\.eyJ[A-Za-z0-9_-]{10,40}\\.[A-Za-z0-9_-]{20,43}"),
            bare("sk-(proj-|live-|ant-api03-)?[A-Za-z0-9]{19,40}[0-9]"),
            bare("sk_(test|live)_[A-Za-z0-9]{23}[0-9]"),
            bare("AKIA[A-Z0-9]{16}"),
            bare("(ghp|gho|ghs)_[A-Za-z0-9]{36}"),
            bare("github_pat_[A-Za-z0-9_]{22,82}"),
            bare("xox[bp]-[0-9]{10,13}-[0-9]{10,13}-[A-Za-z0-9]{24}"),
            bare("[0-9a-f]{32,64}"),
            ("(password|passwd|secret|api_key|token|DB_PASSWORD|clientSecret)(=|: |:)", "[A-Za-z0-9!#$%*+.^_~-]{11}[0-9]")
                .prop_map(|(k, v)| (format!("{k}{v}"), v)),
            ("(Authorization|authorization|Proxy-Authorization): (Bearer|Token|Basic|Digest) ", "[A-Za-z0-9]{16,32}")
                .prop_map(|(k, v)| (format!("{k}{v}"), v)),
            "[A-Za-z0-9 !#%*+.^_~-]{12,30}".prop_map(|v| (format!("{{\"password\": \"{v}\"}}"), v)),
            "[A-Za-z0-9]{12,20}".prop_map(|v| (format!("https://admin:{v}@db.example.com/x"), v)),
            "[A-Za-z0-9!$&*+._~-]{11}[0-9]".prop_map(|v| (format!("svc:{v}@db.example.com:5432"), v)),
            "[A-Za-z0-9+/]{40}".prop_filter("looks random", |s| looks_like_key(s.as_bytes())).prop_map(|s| (s.clone(), s)),
            "[A-Za-z0-9+/]{64}".prop_map(|s| (format!("-----BEGIN PRIVATE KEY-----\n{s}\n-----END PRIVATE KEY-----"), s)),
            (1u8..=254, 0u8..=255, 0u8..=255, 1u8..=254, 1024u16..).prop_map(|(a, b, c, d, p)| {
                let ip = format!("{a}.{b}.{c}.{d}:{p}");
                (ip.clone(), ip)
            }),
            "[a-z]{3,10}".prop_map(|h| (format!("{h}.prod.internal"), format!("{h}.prod.internal"))),
            "[a-z]{3,10}".prop_map(|u| (format!("/home/{u}/.ssh/id_ed25519"), format!("/home/{u}/.ssh"))),
        ]
    }

    fn prose() -> impl Strategy<Value = String> {
        prop_oneof!["[a-zA-Z0-9 ,.;:()\\n\\té'-]{0,60}", soup(), any::<String>(),]
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2000,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        #[test]
        fn quote_is_capped_printable_and_keeps_short_printable_text(input in any::<String>(), cap in 0usize..300) {
            let out = quote(&input, cap);
            prop_assert!(out.len() <= cap);
            prop_assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)));
            if input.len() <= cap && input.bytes().all(|c| (0x20..=0x7e).contains(&c)) {
                prop_assert_eq!(out, input);
            }
        }

        #[test]
        fn any_input_gives_capped_printable_idempotent_output(input in any::<String>(), cap in 0usize..300) {
            let out = sanitize(&input, cap);
            prop_assert!(out.len() <= cap);
            prop_assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)));
            prop_assert_eq!(sanitize(&out, cap), out);
        }

        #[test]
        fn adversarial_soup_gives_capped_printable_idempotent_output(input in soup(), cap in 0usize..300) {
            let out = sanitize(&input, cap);
            prop_assert!(out.len() <= cap);
            prop_assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)));
            prop_assert_eq!(sanitize(&out, cap), out);
        }

        #[test]
        fn keeping_the_clients_values_keeps_the_guarantees(
            input in soup(),
            from in 0usize..400,
            len in 1usize..40,
            cap in 0usize..300,
            credentials_only in any::<bool>(),
        ) {
            // A value the client sent: a piece of the text (cut at char boundaries).
            let start = input.floor_char_boundary(from.min(input.len()));
            let end = input.floor_char_boundary((start + len).min(input.len()));
            let values = vec![input[start..end].to_owned()];
            let quoting = Quoting { client_values: &values, credentials_only };
            let out = sanitize_quoting(&input, cap, &quoting);
            prop_assert!(out.len() <= cap);
            prop_assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)));
            prop_assert_eq!(sanitize_quoting(&out, cap, &quoting), out);
        }

        #[test]
        fn planted_secrets_the_client_did_not_send_never_survive(
            before in prose(),
            (planted, secret) in secret_kind(),
            after in prose(),
        ) {
            // The client sent the text around the secret, not the secret.
            let values = vec![before.clone(), after.clone()];
            prop_assume!(!values.iter().any(|v| v.contains(&secret)));
            let quoting = Quoting { client_values: &values, credentials_only: false };
            let input = format!("{before} {planted} {after}");
            let out = sanitize_quoting(&input, 8192, &quoting);
            prop_assert!(!out.contains(&secret), "{} in {}", secret, out);
        }

        #[test]
        fn planted_secrets_never_survive(
            before in prose(),
            (planted, secret) in secret_kind(),
            after in prose(),
        ) {
            let input = format!("{before} {planted} {after}");
            for out in [sanitize(&input, 8192), scrub(&input)] {
                prop_assert!(!out.contains(&secret), "{} in {}", secret, out);
                // Nor a recognisable piece of it.
                if secret.len() >= 16 {
                    for window in secret.as_bytes().windows(12) {
                        let window = std::str::from_utf8(window).unwrap();
                        prop_assert!(!out.contains(window), "{} of {} in {}", window, secret, out);
                    }
                }
            }
        }
    }
}
