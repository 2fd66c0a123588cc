//! URLs: `scheme://…` up to whitespace or a quote, minus trailing punctuation.

use super::bytes::{find, is_alnum, is_space_or_control, marker_at};
use super::markers::MARK_URL;
use super::span::Span;

fn is_scheme_byte(c: u8) -> bool {
    is_alnum(c) || matches!(c, b'+' | b'.' | b'-')
}

fn is_url_byte(c: u8) -> bool {
    !is_space_or_control(c) && !matches!(c, b'"' | b'\'' | b'<' | b'>' | b'`' | b'\\')
}

/// `scheme://anything-up-to-whitespace-or-quote`, minus trailing sentence punctuation.
pub(super) fn urls(b: &[u8], spans: &mut Vec<Span>) {
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

#[cfg(test)]
mod tests {
    //! URLs become markers.

    use crate::sanitize::test_support::big;

    #[test]
    fn urls_are_redacted() {
        let cases = [
            ("fetch https://admin:hunter2@db.internal:8443/x?token=abc failed", "fetch [url] failed"),
            ("(see http://10.0.0.5/docs).", "(see [url])."),
            ("redis://cache:6379/0, retrying", "[url], retrying"),
            ("link <https://example.com/a_(b)>", "link <[url]>"),
            ("postgres://u:p@h/db", "[url]"),
            ("url: https://ex.com/a?b=c&d=e", "url: [url]"),
        ];
        for (input, expected) in cases {
            assert_eq!(big(input), expected, "{input}");
        }
    }
}
