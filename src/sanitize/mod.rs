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

#[cfg(test)]
mod tests;
