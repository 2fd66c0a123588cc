//! Every failure inside seawall, and the one place that turns it into an answer.
//!
//! Failures are typed where they happen ([`GatewayError`]); [`rewrite`] maps them to a
//! JSON-RPC error object or, for a `tools/call` whose tool could not do its job, to a
//! `CallToolResult` with `isError: true`. Raw upstream detail goes to the log next to a
//! correlation id and never to the client.

pub mod sanitize;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use serde_json::value::RawValue;

use crate::jsonrpc::{self, code};
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

impl GatewayError {
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

/// Turns a failure into the answer for the client. `tool` is set for `tools/call`, whose
/// tool-side failures become `isError` results.
pub fn rewrite(err: &GatewayError, tool: Option<&str>) -> Result<Box<RawValue>, Box<RawValue>> {
    let cid = correlation_id();
    match err {
        GatewayError::InvalidParams(_)
        | GatewayError::MethodNotFound(_)
        | GatewayError::UnknownTool(_)
        | GatewayError::UnknownPrompt(_)
        | GatewayError::ResourceNotFound(_)
        | GatewayError::Cancelled
        | GatewayError::CircuitOpen { .. }
        | GatewayError::Overloaded { .. } => {
            tracing::debug!(correlation_id = %cid, error = %err, "refused a request");
        }
        _ => tracing::warn!(correlation_id = %cid, error = %err, "request failed"),
    }
    let data = || Some(json!({ "correlationId": cid }));
    match err {
        GatewayError::InvalidParams(m) => {
            Err(jsonrpc::error_object(code::INVALID_PARAMS, &format!("Invalid params: {m}"), data()))
        }
        GatewayError::MethodNotFound(m) => {
            Err(jsonrpc::error_object(code::METHOD_NOT_FOUND, &format!("Method not found: {m}"), data()))
        }
        GatewayError::UnknownTool(t) => {
            Err(jsonrpc::error_object(code::INVALID_PARAMS, &format!("Unknown tool: {t}"), data()))
        }
        GatewayError::UnknownPrompt(p) => {
            Err(jsonrpc::error_object(code::INVALID_PARAMS, &format!("Unknown prompt: {p}"), data()))
        }
        GatewayError::ResourceNotFound(uri) => Err(jsonrpc::error_object(
            code::RESOURCE_NOT_FOUND,
            "Resource not found",
            Some(json!({ "uri": uri, "correlationId": cid })),
        )),
        GatewayError::Cancelled => Err(jsonrpc::error_object(code::REQUEST_CANCELLED, "Request cancelled", data())),
        GatewayError::Timeout { after, .. } => match tool {
            Some(tool) => Ok(tool_error(&format!(
                "tool '{tool}' timed out after {}; the outcome is unknown (correlation id {cid})",
                human(*after)
            ))),
            None => Err(jsonrpc::error_object(code::REQUEST_TIMEOUT, "Request timed out", data())),
        },
        GatewayError::Upstream { upstream, source } => match tool {
            Some(tool) => Ok(tool_error(&format!(
                "tool '{tool}' failed: {} (correlation id {cid})",
                upstream_summary(source, upstream)
            ))),
            None => Err(jsonrpc::error_object(code::UPSTREAM_UNAVAILABLE, &upstream_summary(source, upstream), data())),
        },
        GatewayError::Unavailable { upstream, .. } => match tool {
            Some(tool) => Ok(tool_error(&format!(
                "tool '{tool}' is unavailable: upstream '{upstream}' cannot be reached; try again later (correlation id {cid})"
            ))),
            None => Err(jsonrpc::error_object(
                code::UPSTREAM_UNAVAILABLE,
                &format!("Upstream '{upstream}' is unavailable"),
                data(),
            )),
        },
        GatewayError::CircuitOpen { upstream, tool: open_tool, retry_after } => {
            let secs = retry_after.as_secs().max(1);
            match tool {
                Some(tool) => Ok(tool_error(&format!(
                    "tool '{tool}' is temporarily unavailable: {} is failing and calls are paused; retry in {secs} s (correlation id {cid})",
                    match open_tool {
                        Some(_) => "the tool".to_owned(),
                        None => format!("upstream '{upstream}'"),
                    }
                ))),
                None => Err(jsonrpc::error_object(
                    code::CIRCUIT_OPEN,
                    &format!("Upstream '{upstream}' is failing and requests are paused; retry in {secs} s"),
                    Some(json!({ "correlationId": cid, "retryAfterSeconds": secs })),
                )),
            }
        }
        GatewayError::Overloaded { retry_after, .. } => {
            let secs = retry_after.as_secs().max(1);
            Err(jsonrpc::error_object(
                code::OVERLOADED,
                &format!("Overloaded: too many requests in flight; retry in {secs} s"),
                Some(json!({ "correlationId": cid, "retryAfterSeconds": secs })),
            ))
        }
        GatewayError::Internal(_) => Err(jsonrpc::error_object(code::INTERNAL_ERROR, "Internal error", data())),
    }
}

/// One sentence a client can act on, without the raw detail.
fn upstream_summary(source: &UpstreamError, upstream: &str) -> String {
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

fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{} s", d.as_secs()) } else { format!("{} ms", d.as_millis()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_failures_become_is_error_results_and_others_json_rpc_errors() {
        let timeout = GatewayError::Timeout { upstream: Arc::from("u"), after: Duration::from_secs(2) };
        let result = rewrite(&timeout, Some("u__slow")).unwrap();
        assert!(result.get().contains("\"isError\":true"));
        assert!(result.get().contains("timed out after 2 s; the outcome is unknown"));
        let err = rewrite(&timeout, None).unwrap_err();
        assert!(err.get().starts_with(r#"{"code":-32001,"message":"Request timed out""#));
        let raw =
            GatewayError::Upstream { upstream: Arc::from("u"), source: UpstreamError::Io("secret /etc/x".into()) };
        assert!(!rewrite(&raw, None).unwrap_err().get().contains("secret"));
    }
}
