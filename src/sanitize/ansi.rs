//! Terminal escape sequences: colours, cursor moves, titles, hyperlinks.

use std::borrow::Cow;

use super::bytes::at;

/// Removes complete CSI (`ESC [ … final`, without spaces) and OSC (`ESC ] … BEL|ESC \`)
/// sequences. Incomplete ones stay and are escaped later, visible and harmless.
pub(super) fn strip_ansi(text: &str) -> Cow<'_, str> {
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
            // Not the space (0x20), which ECMA-48 also allows: a sequence that took it
            // would swallow the gap between two words and the first letter of the
            // second, so that `ESC [` before ` Bearer <token>` left `earer <token>` for
            // redaction to miss. Such a sequence stays, escaped.
            while (0x21..=0x2f).contains(&at(b, j)) {
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
