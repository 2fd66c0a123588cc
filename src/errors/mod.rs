//! Every failure inside seawall, and the one place that turns it into an answer.
//!
//! Failures are typed where they happen ([`GatewayError`]); the [`Rewriter`] maps them —
//! and whatever error an upstream sent — to a JSON-RPC error object or, for a `tools/call`
//! whose tool could not do its job, to a `CallToolResult` with `isError: true`. Raw
//! upstream detail goes to the log next to a correlation id and never to the client;
//! everything quoted from a peer passes through [`sanitize`].

mod passthrough;
pub mod rewrite;
pub mod sanitize;

pub use rewrite::Rewriter;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use serde_json::value::RawValue;

use crate::jsonrpc;
use crate::upstream::UpstreamError;

/// A failure, classified by where it came from.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    /// The client sent params the gateway cannot act on.
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// The method is not known to the gateway or any upstream it could route to.
    #[error("method not found: {0}")]
    MethodNotFound(String),
    /// A tool name that no upstream serves.
    #[error("unknown tool: {0}")]
    UnknownTool(String),
    /// A prompt name that no upstream serves.
    #[error("unknown prompt: {0}")]
    UnknownPrompt(String),
    /// A resource URI that no upstream serves.
    #[error("resource not found: {0}")]
    ResourceNotFound(String),
    /// The client cancelled the request.
    #[error("request cancelled")]
    Cancelled,
    /// The request's deadline passed.
    #[error("upstream '{upstream}' did not answer within {after:?}")]
    Timeout {
        /// The upstream.
        upstream: Arc<str>,
        /// The deadline that passed.
        after: Duration,
    },
    /// Talking to an upstream failed.
    #[error("upstream '{upstream}': {source}")]
    Upstream {
        /// The upstream.
        upstream: Arc<str>,
        /// What went wrong.
        source: UpstreamError,
    },
    /// The upstream is not connected for this session and could not be reached.
    #[error("upstream '{upstream}' is unavailable: {reason}")]
    Unavailable {
        /// The upstream.
        upstream: Arc<str>,
        /// Why (logged only).
        reason: String,
    },
    /// A circuit breaker is open: the call was refused without upstream traffic.
    #[error("circuit open for upstream '{upstream}'{}", tool.as_deref().map(|t| format!(" tool '{t}'")).unwrap_or_default())]
    CircuitOpen {
        /// The upstream.
        upstream: Arc<str>,
        /// The tool whose breaker is open (None: the upstream's own breaker).
        tool: Option<Arc<str>>,
        /// When the breaker will admit a probe.
        retry_after: Duration,
    },
    /// Too many requests in flight (to one upstream, or to the gateway as a whole).
    #[error("overloaded: {scope}")]
    Overloaded {
        /// What is full ("upstream 'x'" or "gateway").
        scope: String,
        /// When to try again.
        retry_after: Duration,
    },
    /// A bug or resource exhaustion inside seawall.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Where a failure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The client's request is wrong.
    Client,
    /// A policy of seawall's refused it (load shedding, circuit breaker).
    Policy,
    /// The connection or process to the upstream failed.
    UpstreamTransport,
    /// The upstream answered something that is not valid MCP.
    UpstreamProtocol,
    /// The upstream's tool or handler failed (an upstream JSON-RPC error).
    UpstreamTool,
    /// seawall itself.
    Gateway,
}

impl Origin {
    /// A short name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Client => "client",
            Origin::Policy => "policy",
            Origin::UpstreamTransport => "upstream_transport",
            Origin::UpstreamProtocol => "upstream_protocol",
            Origin::UpstreamTool => "upstream_tool",
            Origin::Gateway => "gateway",
        }
    }
}

impl GatewayError {
    /// Where the failure came from.
    pub fn origin(&self) -> Origin {
        match self {
            GatewayError::InvalidParams(_)
            | GatewayError::MethodNotFound(_)
            | GatewayError::UnknownTool(_)
            | GatewayError::UnknownPrompt(_)
            | GatewayError::ResourceNotFound(_)
            | GatewayError::Cancelled => Origin::Client,
            GatewayError::CircuitOpen { .. } | GatewayError::Overloaded { .. } => Origin::Policy,
            GatewayError::Timeout { .. } | GatewayError::Unavailable { .. } => Origin::UpstreamTransport,
            GatewayError::Upstream { source, .. } => match source {
                UpstreamError::Protocol(_) | UpstreamError::TooLarge { .. } => Origin::UpstreamProtocol,
                _ => Origin::UpstreamTransport,
            },
            GatewayError::Internal(_) => Origin::Gateway,
        }
    }

    /// Whether the upstream may have seen the request.
    pub fn may_have_reached(&self) -> bool {
        match self {
            GatewayError::Upstream { source, .. } => source.may_have_reached(),
            GatewayError::Timeout { .. } => true,
            _ => false,
        }
    }
}

/// A fresh correlation id for one rewritten answer.
pub fn correlation_id() -> String {
    let bytes: [u8; 8] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One sentence a client can act on, without the raw detail.
pub(crate) fn upstream_summary(source: &UpstreamError, upstream: &str) -> String {
    match source {
        UpstreamError::Connect(_) | UpstreamError::NotRunning(_) | UpstreamError::Handshake(_) => {
            format!("upstream '{upstream}' is unavailable; the request was not sent")
        }
        UpstreamError::ProcessExited => {
            format!("upstream '{upstream}' crashed while handling the request; the outcome is unknown")
        }
        UpstreamError::Io(_) | UpstreamError::SessionLost(_) => {
            format!("the connection to upstream '{upstream}' broke; the outcome is unknown")
        }
        UpstreamError::HttpStatus { status, .. } => {
            format!("upstream '{upstream}' answered HTTP {status}")
        }
        UpstreamError::Protocol(_) => format!("upstream '{upstream}' sent an invalid answer"),
        UpstreamError::TooLarge { limit } => {
            format!("upstream '{upstream}' sent an answer larger than {limit} bytes")
        }
    }
}

/// A `CallToolResult` with `isError: true` and one text.
pub fn tool_error(text: &str) -> Box<RawValue> {
    jsonrpc::to_raw(&json!({ "content": [{ "type": "text", "text": text }], "isError": true }))
}

pub(crate) fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{} s", d.as_secs()) } else { format!("{} ms", d.as_millis()) }
}
