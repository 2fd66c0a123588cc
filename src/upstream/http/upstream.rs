//! One configured Streamable HTTP upstream: its URL, static headers and pooled client,
//! and the protocol era it was found to speak (remembered across its sessions).

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use http::Uri;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};

use crate::config::UpstreamProtocol;
use crate::jsonrpc;
use crate::upstream::client::UpstreamClient;
use crate::upstream::sse_legacy::SseUpstream;

/// One configured Streamable HTTP upstream: its URL, static headers and connection pool.
pub(crate) struct HttpUpstream {
    /// The upstream's name (for logs).
    pub name: Arc<str>,
    pub(super) client: UpstreamClient,
    pub(super) url: url::Url,
    /// `url`, parsed once for requests.
    pub(super) uri: Uri,
    /// The configured static headers.
    pub(super) headers: HeaderMap,
    /// The static headers of a POST: the configured ones, `Content-Type` and `Accept`.
    pub(super) post_headers: HeaderMap,
    /// The static headers of the GET stream: the configured ones and `Accept`.
    pub(super) get_headers: HeaderMap,
    pub(super) max_message_bytes: usize,
    /// The era to speak (`protocol:`).
    pub(super) protocol: UpstreamProtocol,
    /// With `protocol: auto`, the era the last handshake found (`UNKNOWN`,
    /// `LEGACY_ONLY`, `MODERN_ONLY`, `NEITHER` or `SSE_ONLY`).
    pub(super) detected: AtomicU8,
    /// With `protocol: auto`, the same URL as an HTTP+SSE (2024-11-05) server, tried when
    /// both Streamable HTTP eras are refused.
    pub(super) sse_fallback: Option<Arc<SseUpstream>>,
    /// The era of the last handshake that succeeded (`SPOKE_*`), for status pages.
    pub(super) spoke: AtomicU8,
    /// Its last large results (list pages), found again in its answers rather than
    /// read again.
    pub(super) known: jsonrpc::KnownResults,
}

/// What an upstream was found to speak: both eras, as far as seawall knows.
pub(super) const UNKNOWN: u8 = 0;
/// It refused the modern era: the session era only.
pub(super) const LEGACY_ONLY: u8 = 1;
/// It refused the session era: the stateless era only.
pub(super) const MODERN_ONLY: u8 = 2;
/// It refused both Streamable HTTP eras: HTTP+SSE is tried next, when it may be.
pub(super) const NEITHER: u8 = 3;
/// It speaks only HTTP+SSE (2024-11-05) at this URL.
pub(super) const SSE_ONLY: u8 = 4;

/// No handshake has succeeded yet.
pub(super) const SPOKE_NONE: u8 = 0;
/// The last handshake was `initialize` (the session era).
pub(super) const SPOKE_LEGACY: u8 = 1;
/// The last handshake was `server/discover` (the modern era).
pub(super) const SPOKE_MODERN: u8 = 2;
/// The last handshake was HTTP+SSE's, at the same URL (`auto` fell back to it).
pub(super) const SPOKE_SSE: u8 = 3;

/// An HTTP upstream's protocol era as a status page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EraStatus {
    /// The configured `protocol`: `auto`, `modern` or `legacy`.
    pub protocol: &'static str,
    /// With `auto`, what handshakes found: `unknown` (nothing refused yet, so both are
    /// tried), `legacy_only`, `modern_only` or `sse_only`; `None` for a pinned era.
    pub detected: Option<&'static str>,
    /// The era of the last handshake that succeeded: `legacy`, `modern` or `sse`; `None`
    /// before one.
    pub speaking: Option<&'static str>,
}

impl HttpUpstream {
    /// Builds the upstream and its pooled client, speaking the session era; see
    /// [`HttpUpstream::speaking`].
    pub(crate) fn new(
        name: &str,
        url: &str,
        headers: &std::collections::BTreeMap<String, String>,
        connect_timeout: Duration,
        max_message_bytes: usize,
    ) -> anyhow::Result<HttpUpstream> {
        let map = crate::upstream::header_map(headers)?;
        let client = UpstreamClient::new(connect_timeout)?;
        let url = url::Url::parse(url)?;
        let uri: Uri = url.as_str().parse()?;
        let mut post_headers = map.clone();
        post_headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        post_headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        let mut get_headers = map.clone();
        get_headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        Ok(HttpUpstream {
            name: Arc::from(name),
            client,
            url,
            uri,
            headers: map,
            post_headers,
            get_headers,
            max_message_bytes,
            protocol: UpstreamProtocol::Legacy,
            detected: AtomicU8::new(UNKNOWN),
            sse_fallback: None,
            spoke: AtomicU8::new(SPOKE_NONE),
            known: jsonrpc::KnownResults::default(),
        })
    }

    /// The same upstream, speaking `protocol`.
    pub(crate) fn speaking(mut self, protocol: UpstreamProtocol) -> HttpUpstream {
        self.protocol = protocol;
        self
    }

    /// The same upstream, falling back to HTTP+SSE at its URL when it refuses both
    /// Streamable HTTP eras (only with `protocol: auto`).
    pub(crate) fn with_sse_fallback(mut self, sse: SseUpstream) -> HttpUpstream {
        if self.protocol == UpstreamProtocol::Auto {
            self.sse_fallback = Some(Arc::new(sse));
        }
        self
    }

    /// The URL of its MCP endpoint.
    pub(crate) fn url(&self) -> &url::Url {
        &self.url
    }

    /// The configured era, what `auto` found, and what the last handshake spoke.
    pub(crate) fn era(&self) -> EraStatus {
        let protocol = match self.protocol {
            UpstreamProtocol::Auto => "auto",
            UpstreamProtocol::Modern => "modern",
            UpstreamProtocol::Legacy => "legacy",
        };
        let detected = (self.protocol == UpstreamProtocol::Auto).then(|| match self.detected.load(Ordering::Relaxed) {
            LEGACY_ONLY => "legacy_only",
            MODERN_ONLY => "modern_only",
            SSE_ONLY => "sse_only",
            _ => "unknown",
        });
        let speaking = match self.spoke.load(Ordering::Relaxed) {
            SPOKE_LEGACY => Some("legacy"),
            SPOKE_MODERN => Some("modern"),
            SPOKE_SSE => Some("sse"),
            _ => None,
        };
        EraStatus { protocol, detected, speaking }
    }

    /// Remembers what handshakes found (`protocol: auto`).
    pub(super) fn remember(&self, found: u8) {
        if self.protocol == UpstreamProtocol::Auto && self.detected.swap(found, Ordering::Relaxed) != found {
            let name = match found {
                MODERN_ONLY => "modern only (2026-07-28)",
                LEGACY_ONLY => "legacy only (initialize)",
                SSE_ONLY => "HTTP+SSE only (2024-11-05)",
                // A step on the way to HTTP+SSE, which says what it found.
                NEITHER => return,
                _ => "unknown: detect again",
            };
            tracing::info!(upstream = %self.name, era = name, "upstream protocol era");
        }
    }

    pub(super) fn detected(&self) -> u8 {
        self.detected.load(Ordering::Relaxed)
    }
}
