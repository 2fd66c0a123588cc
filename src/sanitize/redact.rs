//! Redaction: every detector reports byte spans, which are then replaced by their markers.

use super::addresses::{ipv4, ipv6};
use super::hosts::hostnames;
use super::paths::paths;
use super::secrets::{auth_schemes, key_values, userinfo};
use super::span::apply;
use super::tokens::{blobs, prefixed_tokens};
use super::urls::urls;

/// Replaces every sensitive span with its marker. Detectors run independently; where
/// their spans overlap, the union is replaced by the marker of the one starting first.
pub(super) fn redact(text: &str) -> String {
    redact_keeping(text, &[], false)
}

/// [`redact`], but a span that lies wholly inside an occurrence of one of `kept` (what
/// the client itself sent) stays; with `credentials_only`, URLs, paths, addresses and
/// host names stay too.
pub(super) fn redact_keeping(text: &str, kept: &[String], credentials_only: bool) -> String {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    if !credentials_only {
        urls(b, &mut spans);
    }
    key_values(b, &mut spans);
    auth_schemes(b, &mut spans);
    userinfo(b, &mut spans);
    prefixed_tokens(b, &mut spans);
    blobs(b, &mut spans);
    if !credentials_only {
        paths(b, &mut spans);
        ipv4(b, &mut spans);
        ipv6(b, &mut spans);
        hostnames(b, &mut spans);
    }
    if !kept.is_empty() && !spans.is_empty() {
        let occurrences = occurrences(b, kept);
        spans.retain(|s| !occurrences.iter().any(|&(start, end)| start <= s.start && s.end <= end));
    }
    apply(text, spans)
}

/// Where each of `kept` occurs in `b`, as byte ranges.
fn occurrences(b: &[u8], kept: &[String]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for value in kept.iter().filter(|v| !v.is_empty()) {
        let finder = memchr::memmem::Finder::new(value.as_bytes());
        out.extend(finder.find_iter(b).map(|at| (at, at + value.len())));
    }
    out
}

/// Replaces credentials only (`key=value` secrets, `Authorization` schemes, the
/// `user:password` of connection strings, prefixed tokens, key-like blobs): paths,
/// hosts, addresses and URLs stay.
pub(super) fn redact_credentials(text: &str) -> String {
    redact_keeping(text, &[], true)
}
