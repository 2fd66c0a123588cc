//! The JSON-RPC 2.0 envelope.
//!
//! Only `jsonrpc`, `id` and `method` are parsed eagerly; `params`, `result` and `error`
//! stay raw JSON ([`RawValue`]) so that whatever a peer sends — unknown fields, number
//! formats, key order — is forwarded byte for byte unless the gateway changes it.

use serde::Deserialize;
use serde_json::value::RawValue;

mod decode;
mod encode;
mod id;
mod known;
mod message;

pub use decode::{Payload, decode, split_payload};
pub use encode::encode;
pub(crate) use encode::{
    encode_error, encode_notification, encode_reply, encode_request, encode_response, error_object, push_json_str,
    to_json, to_raw,
};
pub use id::Id;
#[doc(hidden)] // public for the fuzz target `known`
pub use known::{KnownResults, around as known_around};
pub use message::{DecodeError, Message, Notification, Request, Response};

/// Standard JSON-RPC and MCP error codes the gateway itself emits.
pub(crate) mod code {
    /// Invalid JSON was received.
    pub(crate) const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object.
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters (also unknown tool or prompt).
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    /// Internal error.
    pub(crate) const INTERNAL_ERROR: i64 = -32603;
    /// Resource not found (MCP up to 2025-11-25).
    pub(crate) const RESOURCE_NOT_FOUND: i64 = -32002;
    /// The client did not authenticate (HTTP 401), as MCP SDKs answer it.
    pub(crate) const UNAUTHORIZED: i64 = -32000;
    /// Request timed out.
    pub(crate) const REQUEST_TIMEOUT: i64 = -32001;
    /// The upstream that serves this request is unavailable (seawall's own code).
    pub(crate) const UPSTREAM_UNAVAILABLE: i64 = -32010;
    /// A circuit breaker is open for the upstream (seawall's own code).
    pub(crate) const CIRCUIT_OPEN: i64 = -32011;
    /// The gateway or the upstream has too many requests in flight (seawall's own code).
    pub(crate) const OVERLOADED: i64 = -32012;
    /// A rate limit refused the request (seawall's own code).
    pub(crate) const RATE_LIMITED: i64 = -32013;
    /// The gateway is shutting down and stopped the request at the end of its grace
    /// period (seawall's own code).
    pub(crate) const SHUTTING_DOWN: i64 = -32014;
    /// The request was cancelled.
    pub(crate) const REQUEST_CANCELLED: i64 = -32800;
    /// The client must complete a URL elicitation first (MCP 2025-11-25).
    pub(crate) const URL_ELICITATION_REQUIRED: i64 = -32042;
    /// The request needs a client capability the client did not declare (2026-07-28).
    pub(crate) const MISSING_CLIENT_CAPABILITY: i64 = -32021;
}

#[derive(Deserialize)]
pub(crate) struct ErrorView {
    /// `code`.
    #[serde(default)]
    pub(crate) code: Option<i64>,
    /// `message`.
    #[serde(default)]
    pub(crate) message: Option<String>,
    /// `data`, for its correlation id.
    #[serde(default)]
    pub(crate) data: Option<ErrorData>,
}

/// The part of an error's `data` the telemetry reads.
#[derive(Deserialize)]
pub(crate) struct ErrorData {
    /// `correlationId`.
    #[serde(rename = "correlationId", default)]
    pub(crate) correlation_id: Option<String>,
}

/// Whether the JSON `text` may hold a member named `name` (plain ASCII): `false` only
/// when neither the name nor any `\u` escape (which could spell it) occurs in it, so
/// that most texts are told apart without a parse.
pub(crate) fn may_name(text: &str, name: &str) -> bool {
    let (text, name) = (text.as_bytes(), name.as_bytes());
    let Some(&first) = name.first() else { return true };
    // One pass for both, without a searcher built per call (texts are short).
    memchr::memchr2_iter(first, b'\\', text).any(|at| match text[at] {
        b'\\' => text.get(at + 1) == Some(&b'u') || text[at..].starts_with(name),
        _ => text[at..].starts_with(name),
    })
}

/// Parses a raw value into a typed view; `None` when it does not fit.
pub(crate) fn view<'a, T: Deserialize<'a>>(raw: Option<&'a RawValue>) -> Option<T> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

/// Parses raw JSON text into a `RawValue`, rejecting invalid JSON (for tests).
#[cfg(test)]
pub(crate) fn raw_from_str(text: &str) -> Result<Box<RawValue>, serde_json::Error> {
    let raw: &RawValue = serde_json::from_str(text)?;
    Ok(raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn may_name_is_false_only_without_the_name_or_an_escape() {
        assert!(may_name(r#"{"content":[],"isError":true}"#, "isError"));
        assert!(may_name(r#"{"\u0069sError":true}"#, "isError"), "an escape may spell it");
        assert!(may_name(r#"{"a":"\\","isError":1}"#, "isError"));
        assert!(!may_name(r#"{"content":[{"type":"text","text":"is it an Error?"}]}"#, "isError"));
        assert!(!may_name(r#"{"a":"\n\t\\"}"#, "isError"), "other escapes spell nothing");
        assert!(!may_name("", "isError"));
        assert!(may_name(r"isErro\u", "isError"));
    }
}
