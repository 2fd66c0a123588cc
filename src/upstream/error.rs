//! Failures talking to an upstream, classified where they happen.

use std::time::Duration;

/// Why a call to an upstream failed. Each variant records whether the request may have
/// reached the upstream ([`UpstreamError::may_have_reached`]): the retry layer reads that
/// instead of guessing.
#[derive(Debug, Clone, thiserror::Error)]
pub enum UpstreamError {
    /// The connection could not be opened (refused, DNS, TLS); nothing was sent.
    #[error("could not connect to the upstream: {0}")]
    Connect(String),
    /// The process could not be started, or is between restarts; nothing was sent.
    #[error("the upstream process is not running: {0}")]
    NotRunning(String),
    /// The upstream did not complete its initialize handshake.
    #[error("the upstream failed its initialize handshake: {0}")]
    Handshake(String),
    /// The connection broke after the request was (possibly) sent.
    #[error("the connection to the upstream broke: {0}")]
    Io(String),
    /// The upstream process exited while the request was in flight.
    #[error("the upstream process exited while the request was in flight")]
    ProcessExited,
    /// The upstream answered with an HTTP status that is not a valid MCP answer.
    #[error("the upstream answered HTTP {status}")]
    HttpStatus {
        /// The status code.
        status: u16,
        /// `Retry-After`, when given in seconds.
        retry_after: Option<Duration>,
    },
    /// The upstream sent something that is not valid MCP (bad JSON, wrong content type, no answer).
    #[error("the upstream broke the protocol: {0}")]
    Protocol(String),
    /// A message from the upstream exceeded the configured size limit.
    #[error("a message from the upstream exceeded {limit} bytes")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The upstream session ended and could not be re-established.
    #[error("the upstream session was lost: {0}")]
    SessionLost(String),
}

impl UpstreamError {
    /// Whether the upstream may have received (and acted on) the request.
    pub fn may_have_reached(&self) -> bool {
        !matches!(self, UpstreamError::Connect(_) | UpstreamError::NotRunning(_) | UpstreamError::Handshake(_))
    }

    /// Classifies a reqwest error: a connect failure never reached the upstream.
    pub fn from_reqwest(e: &reqwest::Error) -> UpstreamError {
        if e.is_connect() { UpstreamError::Connect(describe(e)) } else { UpstreamError::Io(describe(e)) }
    }
}

/// A reqwest error with its source chain, without the URL (which may hold credentials).
fn describe(e: &reqwest::Error) -> String {
    let mut text = String::new();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    if e.is_timeout() {
        text.push_str("timed out");
    }
    while let Some(s) = source {
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&s.to_string());
        source = s.source();
    }
    if text.is_empty() {
        text = e.without_url_string();
    }
    text
}

trait WithoutUrl {
    fn without_url_string(&self) -> String;
}

impl WithoutUrl for reqwest::Error {
    fn without_url_string(&self) -> String {
        if self.is_body() {
            "body error".into()
        } else if self.is_decode() {
            "decode error".into()
        } else if self.is_request() {
            "request error".into()
        } else {
            "transport error".into()
        }
    }
}
