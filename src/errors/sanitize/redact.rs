//! Redaction: detectors report byte spans, which are then replaced by their markers.

use super::addresses::{ipv4, ipv6};
use super::hosts::hostnames;
use super::paths::paths;
use super::secrets::{auth_schemes, key_values};
use super::tokens::{blobs, prefixed_tokens};
use super::urls::urls;

/// A byte range of the text to replace with a marker.
#[derive(Clone, Copy, Debug)]
pub(super) struct Span {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) marker: &'static str,
}

/// Replaces every sensitive span with its marker. Detectors run independently; where
/// their spans overlap, the union is replaced by the marker of the one starting first.
pub(super) fn redact(text: &str) -> String {
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
