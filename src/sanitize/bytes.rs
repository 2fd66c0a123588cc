//! Byte-level helpers shared by the detectors.
//!
//! Every scanner reads the text as bytes and asks these questions at an index; reads
//! past either end answer 0, a control byte, so that the ends of the text delimit tokens.
//! Escapes (`\xNN`) and markers are read as the bytes and tokens they replaced, which
//! is what makes a second pass find nothing new.

use super::markers::{ELLIPSIS, MARKERS};

/// The byte at `i`, or 0 (a control byte, hence a delimiter) past the end.
pub(super) fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

/// The byte before `i`, or 0 at the start.
pub(super) fn before(b: &[u8], i: usize) -> u8 {
    i.checked_sub(1).map_or(0, |j| at(b, j))
}

pub(super) fn is_space_or_control(c: u8) -> bool {
    c <= 0x20 || c == 0x7f
}

pub(super) fn is_alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

/// An escape `\xNN` (as this module writes them) starts at `i`.
pub(super) fn escape_at(b: &[u8], i: usize) -> bool {
    at(b, i) == b'\\' && at(b, i + 1) == b'x' && at(b, i + 2).is_ascii_hexdigit() && at(b, i + 3).is_ascii_hexdigit()
}

/// An escape ends right before `i`: what follows starts a new token, as it would after
/// the raw byte the escape stands for.
pub(super) fn escape_before(b: &[u8], i: usize) -> bool {
    i >= 4 && escape_at(b, i - 4)
}

/// A run of token bytes that begins at `start` may begin with the `xNN` of an escape
/// whose backslash ended the previous run; those three bytes belong to the escape.
pub(super) fn skip_escape(b: &[u8], start: usize) -> usize {
    if start >= 1 && escape_at(b, start - 1) { start + 3 } else { start }
}

/// `i` starts a word: the byte before is not alphanumeric (or is the end of an escape).
pub(super) fn word_start(b: &[u8], i: usize) -> bool {
    escape_before(b, i) || !(is_alnum(before(b, i)) || marker_before(b, i))
}

/// A marker ends right before `i`. It replaced a token, so on a second pass it must
/// border what follows as that token did, not as a delimiter.
pub(super) fn marker_before(b: &[u8], i: usize) -> bool {
    before(b, i) == b']' && MARKERS.iter().any(|m| b.get(..i).is_some_and(|head| head.ends_with(m.as_bytes())))
}

/// A marker starts at `i`; see [`marker_before`].
pub(super) fn marker_at(b: &[u8], i: usize) -> bool {
    at(b, i) == b'[' && MARKERS.iter().any(|m| b.get(i..).is_some_and(|tail| tail.starts_with(m.as_bytes())))
}

/// The word goes on at `i`: an alphanumeric byte, or a marker standing for a token.
pub(super) fn word_continues(b: &[u8], i: usize) -> bool {
    is_alnum(at(b, i)) || marker_at(b, i)
}

/// Index of the first occurrence of `needle` at or after `from`.
pub(super) fn find(b: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    b.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|p| p + from)
}

/// End of the maximal run of bytes satisfying `keep`, starting at `i`.
pub(super) fn run_end(b: &[u8], mut i: usize, keep: impl Fn(u8) -> bool) -> usize {
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
pub(super) fn value_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && is_value_byte(b[i]) && !escape_at(b, i) {
        i += 1;
    }
    i
}

/// A marker, or the `...` of a cut (a value cut to nothing).
pub(super) fn is_marker(value: &[u8]) -> bool {
    value == ELLIPSIS.as_bytes() || MARKERS.iter().any(|m| m.as_bytes() == value)
}

pub(super) fn is_control(c: u8) -> bool {
    c < 0x20 || c == 0x7f
}
