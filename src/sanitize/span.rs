//! What a detector reports — a byte span and the marker that replaces it — and the
//! replacing itself. A leaf: the detectors and [`redact`](super::redact) share it.

/// A byte range of the text to replace with a marker.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) marker: &'static str,
}

/// Replaces `spans` of `text` with their markers; overlapping spans merge into one.
pub(super) fn apply(text: &str, mut spans: Vec<Span>) -> String {
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
