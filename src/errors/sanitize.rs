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
//!    frames; the headline a handler wrote on purpose (`ValueError: bad input`) stays,
//!    and a trace with no headline at all becomes `[trace]`;
//! 5. **redact** URLs (`[url]`), absolute paths (`[path]`), addresses and internal host
//!    names (`[host]`) and credentials (`[redacted]`);
//! 6. **escape** every byte outside printable ASCII as `\xNN`;
//! 7. **cap** to a byte budget, ending in `...` when cut — never inside an escape or a
//!    marker, and after a nearby delimiter rather than inside a word.
//!
//! Steps 2–5 are [`scrub`], which long texts use on their own. Redaction comes before
//! escaping and capping, so a secret is never half cut and left recognisable.
//!
//! Every scanner is a hand-written single pass over bytes — no regular expressions, no
//! backtracking — so the cost is linear in the (bounded) input. The scanners read an
//! escape `\xNN` as the delimiter its raw byte was, split lines at `\x0a` as at a
//! newline, and let a marker border its neighbours as the token it replaced did; so a
//! second run over the output normally finds nothing new. A cut can still leave the
//! front of a long token that reads differently on its own, so [`sanitize`] repeats the
//! pipeline until nothing changes (at most four runs, the later ones over at most `cap`
//! bytes): idempotence is a property of the construction, not a hope.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// Cap in bytes for short identifiers a peer sent: tool names, cursors, versions, ids.
pub const IDENT_CAP: usize = 80;
/// Cap in bytes for longer quoted text: URIs, causes, messages.
pub const TEXT_CAP: usize = 256;

/// Replaces a credential or anything too risky to show.
const MARK_REDACTED: &str = "[redacted]";
/// Replaces an absolute file system path.
const MARK_PATH: &str = "[path]";
/// Replaces a URL.
const MARK_URL: &str = "[url]";
/// Replaces an IP address, `host:port`, or an internal host name.
const MARK_HOST: &str = "[host]";
/// Stands for a stack trace that had no headline to keep.
const MARK_TRACE: &str = "[trace]";
/// Every marker; a value that already is one is left alone.
const MARKERS: [&str; 5] = [MARK_REDACTED, MARK_PATH, MARK_URL, MARK_HOST, MARK_TRACE];
/// Ends a text that was cut.
const ELLIPSIS: &str = "...";

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
    let mut current = pass(text, cap);
    for _ in 1..MAX_PASSES {
        let next = pass(&current, cap);
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
fn pass(text: &str, cap: usize) -> String {
    let bounded = bound(text, SCAN_LIMIT.max(cap.saturating_mul(2)));
    let scrubbed = scrub(&bounded);
    escape_and_cap(scrubbed.trim_matches(|c: char| c.is_ascii_whitespace()), cap)
}

// ---------------------------------------------------------------------------------------
// Bounding, escaping, capping
// ---------------------------------------------------------------------------------------

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
    let mut out = String::with_capacity(budget.min(full) + ELLIPSIS.len());
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

// ---------------------------------------------------------------------------------------
// ANSI sequences
// ---------------------------------------------------------------------------------------

/// Removes complete CSI (`ESC [ … final`) and OSC (`ESC ] … BEL|ESC \`) sequences.
/// Incomplete ones stay and are escaped later, visible and harmless.
fn strip_ansi(text: &str) -> Cow<'_, str> {
    let b = text.as_bytes();
    if !b.contains(&0x1b) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut i) = (0, 0);
    // Once an OSC ran to the end unterminated, every later one would too.
    let mut osc_unterminated = false;
    while i < b.len() {
        if b[i] == 0x1b
            && let Some(end) = ansi_end(b, i, &mut osc_unterminated)
        {
            out.push_str(text.get(copied..i).unwrap_or(""));
            copied = end;
            i = end;
            continue;
        }
        i += 1;
    }
    out.push_str(text.get(copied..).unwrap_or(""));
    Cow::Owned(out)
}

/// The end of the sequence whose ESC is at `i`, if it is complete.
fn ansi_end(b: &[u8], i: usize, osc_unterminated: &mut bool) -> Option<usize> {
    match at(b, i + 1) {
        b'[' => {
            let mut j = i + 2;
            while (0x30..=0x3f).contains(&at(b, j)) {
                j += 1;
            }
            while (0x20..=0x2f).contains(&at(b, j)) {
                j += 1;
            }
            (0x40..=0x7e).contains(&at(b, j)).then_some(j + 1)
        }
        b']' if !*osc_unterminated => {
            for j in i + 2..b.len() {
                match b[j] {
                    0x07 => return Some(j + 1),
                    0x1b if at(b, j + 1) == b'\\' => return Some(j + 2),
                    _ => {}
                }
            }
            *osc_unterminated = true;
            None
        }
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// Stack traces
// ---------------------------------------------------------------------------------------

/// Where in a multi-line trace the previous line left us.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Trace {
    /// Not inside a trace.
    Outside,
    /// After `Traceback (most recent call last):` or a `File "…", line N` frame.
    Python,
    /// After Rust's `stack backtrace:`.
    RustBacktrace,
    /// After Go's `goroutine N [running]:`.
    Go,
}

/// What happens to one line.
enum Verdict {
    Keep,
    Drop,
    Replace(String),
}

/// Drops the frame lines of stack traces, keeping the headline exception lines.
fn reduce_traces(text: &str) -> Cow<'_, str> {
    let mut kept: Vec<Cow<'_, str>> = Vec::new();
    let mut changed = false;
    // Blank lines that separated a dropped trace from its neighbours go with it.
    let mut after_drop = false;
    let mut state = Trace::Outside;
    for raw in split_lines(text) {
        let line = raw.strip_suffix('\r').or_else(|| raw.strip_suffix("\\x0d")).unwrap_or(raw);
        match classify(line, &mut state) {
            Verdict::Keep if after_drop && is_blank(line) => {}
            Verdict::Keep => {
                kept.push(Cow::Borrowed(raw));
                after_drop = false;
            }
            Verdict::Drop => {
                while kept.last().is_some_and(|l| is_blank(l)) {
                    kept.pop();
                }
                changed = true;
                after_drop = true;
            }
            Verdict::Replace(headline) => {
                kept.push(Cow::Owned(headline));
                changed = true;
                after_drop = false;
            }
        }
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    if kept.iter().all(|line| is_blank(line)) {
        return Cow::Borrowed(MARK_TRACE);
    }
    Cow::Owned(kept.join("\n"))
}

/// Splits at `\n` and at the escape `\x0a` that stands for it in sanitised text, so that
/// a second pass sees the lines the first one saw.
fn split_lines(text: &str) -> impl Iterator<Item = &str> {
    let b = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    std::iter::from_fn(move || {
        if start > b.len() {
            return None;
        }
        while i < b.len() {
            let width = match b[i] {
                b'\n' => 1,
                b'\\' if escape_at(b, i) && b[i + 2] == b'0' && matches!(b[i + 3], b'a' | b'A') => 4,
                _ => 0,
            };
            if width > 0 {
                let line = text.get(start..i).unwrap_or("");
                i += width;
                start = i;
                return Some(line);
            }
            i += 1;
        }
        let line = text.get(start..).unwrap_or("");
        start = b.len() + 1;
        Some(line)
    })
}

/// Only ASCII whitespace counts: a second pass sees other blanks escaped.
fn ascii_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_ascii_whitespace())
}

fn is_blank(s: &str) -> bool {
    ascii_trim(s).is_empty()
}

fn classify(line: &str, state: &mut Trace) -> Verdict {
    let t = ascii_trim(line);
    let indented = line.starts_with([' ', '\t']);
    let continues = match *state {
        Trace::Outside => false,
        Trace::Python => indented || t.is_empty(),
        Trace::RustBacktrace => indented || t.is_empty() || is_numbered_frame(t),
        Trace::Go => {
            indented || t.is_empty() || is_go_call(t) || t.starts_with("created by ") || is_goroutine_header(t)
        }
    };
    if continues {
        return Verdict::Drop;
    }
    *state = Trace::Outside;

    if t == "Traceback (most recent call last):" || is_python_frame(t) {
        *state = Trace::Python;
        return Verdict::Drop;
    }
    if t == "stack backtrace:" {
        *state = Trace::RustBacktrace;
        return Verdict::Drop;
    }
    if is_goroutine_header(t) {
        *state = Trace::Go;
        return Verdict::Drop;
    }
    if let Some(verdict) = rust_panic(t) {
        // The message is judged as the line it will be on a second pass.
        return match verdict {
            Verdict::Replace(message) => match classify(&message, state) {
                Verdict::Keep => Verdict::Replace(message),
                other => other,
            },
            other => other,
        };
    }
    let frame = is_at_frame(t, indented)
        || is_more_frames(t)
        || is_caret_marker(t)
        || t == "During handling of the above exception, another exception occurred:"
        || t == "The above exception was the direct cause of the following exception:"
        || t.starts_with("Caused by:")
        || t.starts_with("Suppressed:")
        || t.starts_with("note: run with `RUST_BACKTRACE=")
        || t.starts_with("note: Some details are omitted")
        || t.starts_with("[signal ");
    if frame { Verdict::Drop } else { Verdict::Keep }
}

/// `File "/srv/app/x.py", line 12, in handler`
fn is_python_frame(t: &str) -> bool {
    t.starts_with("File \"") && t.contains("\", line ")
}

/// Java `at com.x.Y.m(Y.java:12)`, JavaScript `at fn (/app/x.js:1:2)`, `at async …`,
/// `at /app/x.js:1:2`. Unindented lines must end in something that looks like a source
/// location, so that prose starting with "at " survives.
fn is_at_frame(t: &str, indented: bool) -> bool {
    let Some(rest) = t.strip_prefix("at ") else {
        return false;
    };
    let rest = rest.strip_prefix("async ").unwrap_or(rest);
    if let Some(body) = rest.strip_suffix(')') {
        return match body.rfind('(') {
            Some(open) => {
                let inner = body.get(open + 1..).unwrap_or("");
                indented
                    || ends_with_line_number(inner)
                    || matches!(inner, "Native Method" | "Unknown Source" | "<anonymous>")
            }
            None => false,
        };
    }
    !rest.is_empty() && !rest.contains(' ') && ends_with_line_number(rest)
}

/// `…:12` or `…:12:5`.
fn ends_with_line_number(s: &str) -> bool {
    let digits = s.trim_end_matches(|c: char| c.is_ascii_digit());
    digits.len() < s.len() && digits.ends_with(':')
}

/// Java's `... 5 more` / `... 12 common frames omitted`.
fn is_more_frames(t: &str) -> bool {
    let Some(rest) = t.strip_prefix("... ") else {
        return false;
    };
    let tail = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    tail.len() < rest.len() && (tail == " more" || tail == " common frames omitted")
}

/// Python 3.11's `^^^^^` under a frame's source line, and Node's `^` under a thrown one.
fn is_caret_marker(t: &str) -> bool {
    !t.is_empty() && t.bytes().all(|c| matches!(c, b'^' | b'~' | b' '))
}

/// Rust backtrace frame `12: std::rt::lang_start`.
fn is_numbered_frame(t: &str) -> bool {
    let rest = t.trim_start_matches(|c: char| c.is_ascii_digit());
    rest.len() < t.len() && rest.starts_with(':')
}

/// Go's `goroutine 1 [running]:`.
fn is_goroutine_header(t: &str) -> bool {
    t.starts_with("goroutine ") && t.ends_with("]:")
}

/// Go frame function line `main.(*Server).handle(0xc000010000, {0x4b7b8e, 0x3})`.
fn is_go_call(t: &str) -> bool {
    t.ends_with(')') && t.find('(').is_some_and(|p| p > 0 && !t[..p].contains(' '))
}

/// Rust's `thread 'main' panicked at src/x.rs:1:2:` (the message follows on the next
/// line, which is kept) or the older `thread 'main' panicked at 'boom', src/x.rs:1:2`
/// (reduced to the message, unwrapping panics that quote panics).
fn rust_panic(t: &str) -> Option<Verdict> {
    let mut after = panic_location(t)?;
    loop {
        let Some(quoted) = after.strip_prefix('\'') else {
            return Some(Verdict::Drop);
        };
        let message = quoted.rfind("', ").map_or(quoted, |end| &quoted[..end]);
        match panic_location(message) {
            Some(inner) => after = inner,
            None => return Some(Verdict::Replace(message.to_owned())),
        }
    }
}

/// What follows `thread '…' panicked at `.
fn panic_location(t: &str) -> Option<&str> {
    const AT: &str = "' panicked at ";
    let rest = t.strip_prefix("thread '")?;
    rest.get(rest.find(AT)? + AT.len()..)
}

// ---------------------------------------------------------------------------------------
// Redaction
// ---------------------------------------------------------------------------------------

/// A byte range of the text to replace with a marker.
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    end: usize,
    marker: &'static str,
}

/// Replaces every sensitive span with its marker. Detectors run independently; where
/// their spans overlap, the union is replaced by the marker of the one starting first.
fn redact(text: &str) -> String {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    urls(b, &mut spans);
    key_values(b, &mut spans);
    auth_schemes(b, &mut spans);
    prefixed_tokens(b, &mut spans);
    blobs(b, &mut spans);
    paths(b, &mut spans);
    ipv4(b, &mut spans);
    ipv6(b, &mut spans);
    hostnames(b, &mut spans);
    apply(text, spans)
}

fn apply(text: &str, mut spans: Vec<Span>) -> String {
    if spans.is_empty() {
        return text.to_owned();
    }
    // Stable: on equal ranges the detector that ran first wins.
    spans.sort_by(|x, y| x.start.cmp(&y.start).then(y.end.cmp(&x.end)));
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    let mut spans = spans.into_iter().peekable();
    while let Some(mut span) = spans.next() {
        while let Some(next) = spans.next_if(|next| next.start < span.end) {
            span.end = span.end.max(next.end);
        }
        let start = floor_boundary(text, span.start.max(pos));
        out.push_str(text.get(pos..start).unwrap_or(""));
        out.push_str(span.marker);
        pos = ceil_boundary(text, span.end.max(start));
    }
    out.push_str(text.get(pos..).unwrap_or(""));
    out
}

fn floor_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_boundary(text: &str, mut i: usize) -> usize {
    i = i.min(text.len());
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

// --- byte helpers ------------------------------------------------------------------------

/// The byte at `i`, or 0 (a control byte, hence a delimiter) past the end.
fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

/// The byte before `i`, or 0 at the start.
fn before(b: &[u8], i: usize) -> u8 {
    i.checked_sub(1).map_or(0, |j| at(b, j))
}

fn is_space_or_control(c: u8) -> bool {
    c <= 0x20 || c == 0x7f
}

fn is_alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

/// An escape `\xNN` (as this module writes them) starts at `i`.
fn escape_at(b: &[u8], i: usize) -> bool {
    at(b, i) == b'\\' && at(b, i + 1) == b'x' && at(b, i + 2).is_ascii_hexdigit() && at(b, i + 3).is_ascii_hexdigit()
}

/// An escape ends right before `i`: what follows starts a new token, as it would after
/// the raw byte the escape stands for.
fn escape_before(b: &[u8], i: usize) -> bool {
    i >= 4 && escape_at(b, i - 4)
}

/// A run of token bytes that begins at `start` may begin with the `xNN` of an escape
/// whose backslash ended the previous run; those three bytes belong to the escape.
fn skip_escape(b: &[u8], start: usize) -> usize {
    if start >= 1 && escape_at(b, start - 1) { start + 3 } else { start }
}

/// `i` starts a word: the byte before is not alphanumeric (or is the end of an escape).
fn word_start(b: &[u8], i: usize) -> bool {
    escape_before(b, i) || !(is_alnum(before(b, i)) || marker_before(b, i))
}

/// A marker ends right before `i`. It replaced a token, so on a second pass it must
/// border what follows as that token did, not as a delimiter.
fn marker_before(b: &[u8], i: usize) -> bool {
    before(b, i) == b']' && MARKERS.iter().any(|m| b.get(..i).is_some_and(|head| head.ends_with(m.as_bytes())))
}

/// A marker starts at `i`; see [`marker_before`].
fn marker_at(b: &[u8], i: usize) -> bool {
    at(b, i) == b'[' && MARKERS.iter().any(|m| b.get(i..).is_some_and(|tail| tail.starts_with(m.as_bytes())))
}

/// The word goes on at `i`: an alphanumeric byte, or a marker standing for a token.
fn word_continues(b: &[u8], i: usize) -> bool {
    is_alnum(at(b, i)) || marker_at(b, i)
}

/// Index of the first occurrence of `needle` at or after `from`.
fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

/// End of the maximal run of bytes satisfying `keep`, starting at `i`.
fn run_end(b: &[u8], mut i: usize, keep: impl Fn(u8) -> bool) -> usize {
    while i < b.len() && keep(b[i]) {
        i += 1;
    }
    i
}

/// A value byte: anything but whitespace, control, quotes and markup brackets.
fn is_value_byte(c: u8) -> bool {
    !is_space_or_control(c) && !matches!(c, b'"' | b'\'' | b'`' | b'<' | b'>' | b'&')
}

/// End of an unquoted value starting at `i`; an escape ends it like a control byte.
fn value_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_value_byte(b[i]) && !escape_at(b, i) {
        i += 1;
    }
    i
}

/// A marker, or the `...` of a cut (a value cut to nothing).
fn is_marker(value: &[u8]) -> bool {
    value == ELLIPSIS.as_bytes() || MARKERS.iter().any(|m| m.as_bytes() == value)
}

// --- PEM blocks --------------------------------------------------------------------------

/// Replaces PEM blocks (private keys, certificates) with a marker.
fn redact_pem_blocks(text: &str) -> Cow<'_, str> {
    let mut spans = Vec::new();
    pem_blocks(text.as_bytes(), &mut spans);
    if spans.is_empty() { Cow::Borrowed(text) } else { Cow::Owned(apply(text, spans)) }
}

/// `-----BEGIN <LABEL>-----` … `-----END <LABEL>-----`, or to the end when unterminated.
fn pem_blocks(b: &[u8], spans: &mut Vec<Span>) {
    let mut from = 0;
    while let Some(start) = find(b, from, b"-----BEGIN ") {
        let Some(body) = pem_label_end(b, start + 11) else {
            from = start + 11;
            continue;
        };
        let end = find(b, body, b"-----END ").map_or(b.len(), |e| pem_label_end(b, e + 9).unwrap_or(e + 9));
        spans.push(Span { start, end, marker: MARK_REDACTED });
        from = end;
    }
}

/// After `-----BEGIN ` or `-----END `: the end of `LABEL-----`.
fn pem_label_end(b: &[u8], i: usize) -> Option<usize> {
    let end = run_end(b, i, |c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b' ');
    (end > i && b.get(end..end + 5) == Some(&b"-----"[..])).then_some(end + 5)
}

// --- URLs --------------------------------------------------------------------------------

fn is_scheme_byte(c: u8) -> bool {
    is_alnum(c) || matches!(c, b'+' | b'.' | b'-')
}

fn is_url_byte(c: u8) -> bool {
    !is_space_or_control(c) && !matches!(c, b'"' | b'\'' | b'<' | b'>' | b'`' | b'\\')
}

/// `scheme://anything-up-to-whitespace-or-quote`, minus trailing sentence punctuation.
fn urls(b: &[u8], spans: &mut Vec<Span>) {
    let mut from = 0;
    while let Some(sep) = find(b, from, b"://") {
        let mut start = sep;
        while start > 0 && sep - start < 32 && is_scheme_byte(b[start - 1]) {
            start -= 1;
        }
        while start < sep && !b[start].is_ascii_alphabetic() {
            start += 1;
        }
        // A marker here replaced something that ended the URL on the first pass.
        let mut end = sep + 3;
        while end < b.len() && is_url_byte(b[end]) && !marker_at(b, end) {
            end += 1;
        }
        let end = trim_url_end(b, sep + 3, end);
        if end > sep + 3 {
            spans.push(Span { start, end, marker: MARK_URL });
        }
        from = end.max(sep + 3);
    }
}

/// Drops trailing `.,;:!?` and closing brackets the URL did not open.
fn trim_url_end(b: &[u8], start: usize, mut end: usize) -> usize {
    let count = |c: u8| b[start..end].iter().filter(|&&x| x == c).count();
    let mut balance = [
        (b'(', b')', count(b'(') as isize - count(b')') as isize),
        (b'[', b']', count(b'[') as isize - count(b']') as isize),
        (b'{', b'}', count(b'{') as isize - count(b'}') as isize),
    ];
    while end > start {
        let last = b[end - 1];
        if matches!(last, b'.' | b',' | b';' | b':' | b'!' | b'?') {
            end -= 1;
            continue;
        }
        match balance.iter_mut().find(|(_, close, _)| *close == last) {
            Some((_, _, open_minus_close)) if *open_minus_close < 0 => {
                *open_minus_close += 1;
                end -= 1;
            }
            _ => break,
        }
    }
    end
}

// --- key = value credentials ------------------------------------------------------------

/// Keys whose value is a secret, matched case-insensitively as the end of an identifier
/// (`DB_PASSWORD`, `x-api-key`, `clientSecret`, `access_token`).
const SECRET_KEYS: &[&[u8]] = &[
    b"password",
    b"passwd",
    b"passphrase",
    b"pwd",
    b"secret",
    b"token",
    b"apikey",
    b"api_key",
    b"api-key",
    b"access_key",
    b"private_key",
    b"secret_key",
    b"credential",
    b"credentials",
];
/// Header-like keys whose value runs to the end of the line (`Authorization: Bearer x`).
const LINE_KEYS: &[&[u8]] = &[b"authorization", b"cookie"];

fn is_key_byte(c: u8) -> bool {
    is_alnum(c) || matches!(c, b'_' | b'-' | b'.')
}

/// `password=…`, `"api_key": "…"`, `Authorization: …`, `secret: …`, `token=…`.
fn key_values(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        if !is_key_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = skip_escape(b, i);
        let end = run_end(b, i, is_key_byte);
        i = end;
        let Some(whole_line) = secret_key(b, start, end) else {
            continue;
        };
        if let Some((vs, ve)) = key_value(b, end, whole_line) {
            if ve > vs && !is_marker(&b[vs..ve]) {
                spans.push(Span { start: vs, end: ve, marker: MARK_REDACTED });
            }
            i = i.max(ve);
        }
    }
}

/// Whether `b[start..end]` ends with a secret key at an identifier boundary; `Some(true)`
/// for a header whose value is the rest of the line.
fn secret_key(b: &[u8], start: usize, end: usize) -> Option<bool> {
    let word = b.get(start..end)?;
    let matches = |key: &[u8]| {
        let Some(k) = word.len().checked_sub(key.len()) else {
            return false;
        };
        word[k..].eq_ignore_ascii_case(key)
            && (k == 0
                || matches!(word[k - 1], b'_' | b'-' | b'.')
                || (word[k].is_ascii_uppercase() && !word[k - 1].is_ascii_uppercase()))
    };
    if LINE_KEYS.iter().any(|k| matches(k)) {
        Some(true)
    } else if SECRET_KEYS.iter().any(|k| matches(k)) {
        Some(false)
    } else {
        None
    }
}

/// The value after a key ending at `j`: an optional closing quote of the key, `=` or
/// `:` (not `==`, `::`), blanks, then a quoted or bare value.
fn key_value(b: &[u8], mut j: usize, whole_line: bool) -> Option<(usize, usize)> {
    if matches!(at(b, j), b'"' | b'\'') {
        j += 1;
    }
    j = run_end(b, j, |c| c == b' ' || c == b'\t');
    let sep = at(b, j);
    if !matches!(sep, b'=' | b':') || at(b, j + 1) == sep {
        return None;
    }
    j = run_end(b, j + 1, |c| c == b' ' || c == b'\t');
    let quote = at(b, j);
    if matches!(quote, b'"' | b'\'') {
        let start = j + 1;
        let mut k = start;
        while k < b.len() && b[k] != quote && !is_control(b[k]) && !escape_at(b, k) {
            k += if b[k] == b'\\' { 2 } else { 1 };
        }
        return Some((start, k.min(b.len())));
    }
    if whole_line {
        let end = run_end(b, j, |c| !is_control(c) && c != b'"');
        let mut k = j;
        while k < end && !escape_at(b, k) {
            k += 1;
        }
        return Some((j, k));
    }
    Some((j, value_end(b, j)))
}

fn is_control(c: u8) -> bool {
    c < 0x20 || c == 0x7f
}

// --- Authorization schemes ---------------------------------------------------------------

/// `Bearer <token>` (token of 8 bytes or more) and `Basic <base64>`.
fn auth_schemes(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if !matches!(c, b'b' | b'B') || !word_start(b, i) {
            i += 1;
            continue;
        }
        let (bearer, basic) = (scheme_at(b, i, b"bearer"), scheme_at(b, i, b"basic"));
        let Some(after) = bearer.or(basic) else {
            i += 1;
            continue;
        };
        let start = run_end(b, after, |c| c == b' ' || c == b'\t');
        let end = value_end(b, start);
        let token = &b[start..end];
        let redact = if bearer.is_some() {
            token.len() >= 8 && !is_marker(token)
        } else {
            // "Basic" is also an English word: require something base64 and not prose.
            (b.get(i..i + 5) == Some(&b"Basic"[..]) || b.get(i..i + 5) == Some(&b"BASIC"[..]))
                && looks_like_basic_credentials(token)
                && !word_continues(b, end)
        };
        if start > after && redact {
            spans.push(Span { start, end, marker: MARK_REDACTED });
            i = end;
        } else {
            i = after;
        }
    }
}

/// The end of `word` (case-insensitive) at `i` when it is a whole word.
fn scheme_at(b: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    let end = i + word.len();
    (b.get(i..end)?.eq_ignore_ascii_case(word) && !word_continues(b, end)).then_some(end)
}

fn looks_like_basic_credentials(token: &[u8]) -> bool {
    token.len() >= 8
        && token.iter().all(|&c| is_alnum(c) || matches!(c, b'+' | b'/' | b'='))
        && token.iter().skip(1).any(|&c| c.is_ascii_digit() || c.is_ascii_uppercase() || !is_alnum(c))
}

// --- tokens with a known prefix ----------------------------------------------------------

/// Vendor token shapes: a fixed prefix, then at least `min_tail` bytes of
/// `[A-Za-z0-9_-]`; `mixed` demands a digit or upper-case byte in the tail (so that
/// `sk-learn-some-long-name` stays).
const PREFIXES: &[(&[u8], usize, bool)] = &[
    // (prefix, min_tail, mixed)
    (b"sk-", 20, true),
    (b"sk_", 20, true),
    (b"rk_live_", 10, false),
    (b"rk_test_", 10, false),
    (b"whsec_", 20, false),
    (b"ghp_", 20, false),
    (b"gho_", 20, false),
    (b"ghs_", 20, false),
    (b"ghu_", 20, false),
    (b"ghr_", 20, false),
    (b"github_pat_", 20, false),
    (b"glpat-", 20, false),
    (b"xoxb-", 10, false),
    (b"xoxp-", 10, false),
    (b"xoxa-", 10, false),
    (b"xoxr-", 10, false),
    (b"xoxs-", 10, false),
    (b"xapp-", 10, false),
    (b"AIza", 30, false),
    (b"hf_", 30, false),
    (b"npm_", 30, false),
    (b"pypi-", 30, false),
];

fn is_token_byte(c: u8) -> bool {
    is_alnum(c) || c == b'_' || c == b'-'
}

/// Vendor tokens (`sk-…`, `ghp_…`, `xoxb-…`, `AKIA…`, …) and JWTs (`eyJ….….…`).
fn prefixed_tokens(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        if !is_token_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = skip_escape(b, i);
        let end = run_end(b, i, is_token_byte);
        i = end;
        // The last digit or upper-case byte, so that each candidate's tail check is O(1).
        let last_mixed = (start..end).rev().find(|&k| b[k].is_ascii_digit() || b[k].is_ascii_uppercase());
        // A JWT's second and third parts follow this run; scanned at most once.
        let mut jwt_end: Option<Option<usize>> = None;
        for k in start..end {
            if k > start && is_alnum(b[k - 1]) {
                continue;
            }
            if let Some(token_end) = token_at(b, k, end, last_mixed, &mut jwt_end) {
                spans.push(Span { start: k, end: token_end, marker: MARK_REDACTED });
                i = i.max(token_end);
                break;
            }
        }
    }
}

/// The end of a token starting at `k`, inside a run of token bytes ending at `run_end`.
fn token_at(
    b: &[u8],
    k: usize,
    run_end: usize,
    last_mixed: Option<usize>,
    jwt_end: &mut Option<Option<usize>>,
) -> Option<usize> {
    let word = b.get(k..run_end)?;
    for &(prefix, min_tail, mixed) in PREFIXES {
        if word.starts_with(prefix)
            && word.len() - prefix.len() >= min_tail
            && (!mixed || last_mixed.is_some_and(|m| m >= k + prefix.len()))
        {
            return Some(run_end);
        }
    }
    if (word.starts_with(b"AKIA") || word.starts_with(b"ASIA"))
        && word.len() >= 20
        && word[4..20].iter().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        && !word_continues(b, k + 20)
    {
        return Some(k + 20);
    }
    if word.starts_with(b"eyJ") && word.len() >= 10 {
        return *jwt_end.get_or_insert_with(|| jwt_rest(b, run_end));
    }
    None
}

/// Given the end of a JWT's first part, the end of its third part (which may be empty).
fn jwt_rest(b: &[u8], first_end: usize) -> Option<usize> {
    if at(b, first_end) != b'.' {
        return None;
    }
    let second_end = run_end(b, first_end + 1, is_token_byte);
    if second_end - (first_end + 1) < 2 || at(b, second_end) != b'.' {
        return None;
    }
    Some(run_end(b, second_end + 1, is_token_byte))
}

// --- long key-like blobs -----------------------------------------------------------------

fn is_blob_byte(c: u8) -> bool {
    is_alnum(c) || matches!(c, b'+' | b'/' | b'_' | b'-')
}

/// Runs of 32 or more hex digits mixing letters and digits, or of base64 that looks random (all three character
/// classes, at least two digits, few separators, frequent class changes — which long
/// `camelCase`, `snake_case` and paths do not have).
fn blobs(b: &[u8], spans: &mut Vec<Span>) {
    let mut i = 0;
    while i < b.len() {
        if !is_blob_byte(b[i]) {
            i += 1;
            continue;
        }
        let start = skip_escape(b, i);
        let end = run_end(b, i, is_blob_byte);
        i = end;
        if end.saturating_sub(start) >= 32 && looks_like_key(&b[start..end]) {
            spans.push(Span { start, end: run_end(b, end, |c| c == b'='), marker: MARK_REDACTED });
        }
    }
}

fn looks_like_key(run: &[u8]) -> bool {
    let class = |c: u8| match c {
        b'A'..=b'Z' => 0,
        b'a'..=b'z' => 1,
        b'0'..=b'9' => 2,
        _ => 3,
    };
    let mut counts = [0usize; 4];
    let mut changes = 0;
    for (n, &c) in run.iter().enumerate() {
        counts[class(c)] += 1;
        if n > 0 && class(run[n - 1]) != class(c) {
            changes += 1;
        }
    }
    let [upper, lower, digits, separators] = counts;
    if run.iter().all(u8::is_ascii_hexdigit) {
        // A digest or hex key, not a run of one letter or a long decimal number.
        return upper + lower >= 2 && digits >= 2 && changes * 8 >= run.len();
    }
    upper > 0 && lower > 0 && digits >= 2 && separators * 6 <= run.len() && changes * 4 >= run.len()
}

// --- file system paths -------------------------------------------------------------------

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
fn paths(b: &[u8], spans: &mut Vec<Span>) {
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

// --- addresses and hosts -----------------------------------------------------------------

/// `10.0.3.7`, `10.0.3.7:5432`, `10.0.0.0/8`.
fn ipv4(b: &[u8], spans: &mut Vec<Span>) {
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
fn ipv6(b: &[u8], spans: &mut Vec<Span>) {
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
fn hostnames(b: &[u8], spans: &mut Vec<Span>) {
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

// ---------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------

/// Containers deeper than this become [`JSON_TRUNCATED`].
const JSON_MAX_DEPTH: usize = 8;
/// Entries kept per array or object.
const JSON_MAX_ENTRIES: usize = 64;
/// Rough bound on the serialised size of the result, in bytes.
const JSON_BUDGET: usize = 4096;
/// No child is started with less budget than this left.
const JSON_RESERVE: usize = 32;
/// Numbers with longer text than this (possible with arbitrary precision) are dropped.
const JSON_MAX_NUMBER: usize = 40;
/// Stands for a container nested too deep.
const JSON_TRUNCATED: &str = "[truncated]";

/// Sanitises every string in `value`, object keys included, each to `cap` bytes.
///
/// The result is bounded: containers nested deeper than 8 levels become `"[truncated]"`,
/// at most 64 entries are kept per container and about 4 KiB in total; what is dropped is
/// counted in a trailing `"[N more]"` entry (under the key `"..."` in objects).
pub fn sanitize_json(value: &Value, cap: usize) -> Value {
    let mut budget = JSON_BUDGET;
    json_value(value, cap, 0, &mut budget)
}

fn json_value(value: &Value, cap: usize, depth: usize, budget: &mut usize) -> Value {
    match value {
        Value::Null | Value::Bool(_) => {
            charge(budget, 5);
            value.clone()
        }
        Value::Number(n) => {
            let len = n.to_string().len();
            if len > JSON_MAX_NUMBER {
                Value::String(json_string("[number]", cap, budget))
            } else {
                charge(budget, len);
                value.clone()
            }
        }
        Value::String(s) => Value::String(json_string(s, cap, budget)),
        Value::Array(_) | Value::Object(_) if depth >= JSON_MAX_DEPTH => {
            Value::String(json_string(JSON_TRUNCATED, cap, budget))
        }
        Value::Array(items) => {
            charge(budget, 2);
            let mut out = Vec::new();
            for item in items {
                if out.len() >= JSON_MAX_ENTRIES || *budget < JSON_RESERVE {
                    break;
                }
                out.push(json_value(item, cap, depth + 1, budget));
            }
            let dropped = items.len() - out.len();
            if dropped > 0 {
                out.push(Value::String(more(dropped)));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            charge(budget, 2);
            let mut out = Map::new();
            let mut dropped = 0;
            for (taken, (key, item)) in map.iter().enumerate() {
                if taken >= JSON_MAX_ENTRIES || *budget < JSON_RESERVE {
                    dropped = map.len() - taken;
                    break;
                }
                let key = json_string(key, cap, budget);
                if out.contains_key(&key) {
                    dropped += 1;
                    continue;
                }
                let item = json_value(item, cap, depth + 1, budget);
                out.insert(key, item);
            }
            if dropped > 0 {
                out.insert(ELLIPSIS.to_owned(), Value::String(more(dropped)));
            }
            Value::Object(out)
        }
    }
}

fn json_string(s: &str, cap: usize, budget: &mut usize) -> String {
    let out = sanitize(s, cap.min(budget.saturating_sub(3)));
    charge(budget, out.len() + 3);
    out
}

fn charge(budget: &mut usize, cost: usize) {
    *budget = budget.saturating_sub(cost);
}

fn more(dropped: usize) -> String {
    format!("[{dropped} more]")
}

#[cfg(test)]
#[path = "sanitize_tests.rs"]
mod tests;
