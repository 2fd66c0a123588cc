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
    let b = text.as_bytes();
    let mut spans = Vec::new();
    urls(b, &mut spans);
    key_values(b, &mut spans);
    auth_schemes(b, &mut spans);
    userinfo(b, &mut spans);
    prefixed_tokens(b, &mut spans);
    blobs(b, &mut spans);
    paths(b, &mut spans);
    ipv4(b, &mut spans);
    ipv6(b, &mut spans);
    hostnames(b, &mut spans);
    apply(text, spans)
}

/// Replaces credentials only (`key=value` secrets, `Authorization` schemes, the
/// `user:password` of connection strings, prefixed tokens, key-like blobs): paths,
/// hosts, addresses and URLs stay.
pub(super) fn redact_credentials(text: &str) -> String {
    let b = text.as_bytes();
    let mut spans = Vec::new();
    key_values(b, &mut spans);
    auth_schemes(b, &mut spans);
    userinfo(b, &mut spans);
    prefixed_tokens(b, &mut spans);
    blobs(b, &mut spans);
    apply(text, spans)
}
