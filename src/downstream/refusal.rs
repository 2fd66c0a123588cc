//! Every refusal of the client-facing HTTP transport, and the one table that turns it
//! into an answer: HTTP status, headers (`Allow`, `Retry-After`, `Connection: close`)
//! and a JSON-RPC error that carries the request's id whenever it could be read.
//!
//! | refusal | code | HTTP |
//! |---|---|---|
//! | HTTP/1.x head malformed or framed ambiguously (then closed) | -32600 | 400 |
//! | HTTP/1.x head over 64 KiB or 100 fields (then closed) | -32600 | 431 |
//! | a transfer coding other than `chunked` (then closed) | -32600 | 501 |
//! | body is not JSON / not JSON-RPC | -32700 / -32600 | 400 |
//! | `initialize` without usable params | -32602 | 400 |
//! | no, malformed or unknown bearer token (when `auth` is on) | -32000 | 401 + `WWW-Authenticate` |
//! | a good credential without an `auth.required_scopes` scope | -32000 | 403 + `WWW-Authenticate` |
//! | ambiguous or malformed Host / authority, batch outside 2025-03-26 | -32600 | 400 |
//! | missing `Mcp-Session-Id` / unknown session | -32600 | 400 / 404 |
//! | unsupported `MCP-Protocol-Version` | -32600 | 400 |
//! | Host or Origin not allowed | -32600 | 403 |
//! | no such upstream | -32600 | 404 |
//! | other HTTP method | -32600 | 405 + `Allow` |
//! | `Accept` without JSON or SSE | -32600 | 406 |
//! | body not received within `limits.body_timeout` | -32600 | 408 |
//! | second GET stream on a session | -32600 | 409 |
//! | body over `limits.max_body_bytes` | -32600 | 413 |
//! | `Content-Type` other than `application/json` | -32600 | 415 |
//! | too many sessions / connections | -32012 | 503 + `Retry-After` |

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::errors::correlation_id;
use crate::h1::server::HeadError;
use crate::jsonrpc::{self, DecodeError, Id, code};
use crate::mcp;
use crate::policy::auth::Unauthenticated;
use crate::policy::origin::OriginRefusal;

/// Why the HTTP transport refused a request.
#[derive(Debug, Clone)]
pub(crate) enum Refusal {
    /// `/mcp/<name>` names no configured upstream.
    NoSuchUpstream,
    /// The `Accept` header rules out every answer the request could get.
    NotAcceptable {
        /// GET needs `text/event-stream`; POST needs JSON or SSE.
        stream: bool,
    },
    /// The body is not declared as `application/json`.
    UnsupportedMediaType,
    /// The body is (or is declared) larger than the limit.
    TooLarge {
        /// `limits.max_body_bytes`.
        limit: usize,
    },
    /// The body did not arrive within `limits.body_timeout`.
    BodyTimeout,
    /// The body is not JSON, or not a JSON-RPC message.
    Malformed(DecodeError),
    /// Something else about the request is wrong.
    BadRequest(&'static str),
    /// An `initialize` whose params the gateway cannot use.
    InvalidInitialize(String),
    /// A request after `initialize` without `Mcp-Session-Id`.
    SessionRequired,
    /// The session is unknown, ended, or belongs to another endpoint.
    SessionNotFound,
    /// `MCP-Protocol-Version` names a version seawall does not speak.
    UnsupportedVersion,
    /// Client authentication is on and the request did not authenticate.
    Unauthorized(Unauthenticated),
    /// The Host, authority or Origin failed the DNS-rebinding checks.
    Forbidden(OriginRefusal),
    /// An HTTP method other than GET, POST and DELETE.
    MethodNotAllowed,
    /// A second GET stream on one session.
    StreamConflict,
    /// The session table (or the caller's share of it) is full.
    TooManySessions {
        /// When to try again.
        retry_after: Duration,
    },
    /// The listener's connection cap (or the caller's share of it) is reached.
    TooManyConnections,
    /// An HTTP/1.x request head longer or with more fields than seawall reads.
    HeadTooLarge,
    /// A transfer coding seawall does not decode.
    NotImplemented(&'static str),
}

impl From<HeadError> for Refusal {
    fn from(refused: HeadError) -> Refusal {
        match refused {
            HeadError::Malformed(why) => Refusal::BadRequest(why),
            HeadError::TooLarge => Refusal::HeadTooLarge,
            HeadError::NotImplemented(why) => Refusal::NotImplemented(why),
        }
    }
}

/// `Retry-After` of a refused connection.
const CONNECTION_RETRY_AFTER: Duration = Duration::from_secs(1);

impl Refusal {
    /// The HTTP status.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Refusal::Malformed(_)
            | Refusal::BadRequest(_)
            | Refusal::InvalidInitialize(_)
            | Refusal::SessionRequired
            | Refusal::UnsupportedVersion => StatusCode::BAD_REQUEST,
            Refusal::Unauthorized(why) if why.insufficient_scope.is_some() => StatusCode::FORBIDDEN,
            Refusal::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Refusal::Forbidden(OriginRefusal::Ambiguous(_)) => StatusCode::BAD_REQUEST,
            Refusal::Forbidden(_) => StatusCode::FORBIDDEN,
            Refusal::NoSuchUpstream | Refusal::SessionNotFound => StatusCode::NOT_FOUND,
            Refusal::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Refusal::NotAcceptable { .. } => StatusCode::NOT_ACCEPTABLE,
            Refusal::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            Refusal::StreamConflict => StatusCode::CONFLICT,
            Refusal::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Refusal::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Refusal::TooManySessions { .. } | Refusal::TooManyConnections => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::HeadTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Refusal::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
        }
    }

    /// The JSON-RPC error code.
    pub(crate) fn code(&self) -> i64 {
        match self {
            Refusal::Malformed(DecodeError::Parse(_)) => code::PARSE_ERROR,
            Refusal::InvalidInitialize(_) => code::INVALID_PARAMS,
            Refusal::TooManySessions { .. } | Refusal::TooManyConnections => code::OVERLOADED,
            Refusal::Unauthorized(_) => code::UNAUTHORIZED,
            _ => code::INVALID_REQUEST,
        }
    }

    /// The JSON-RPC error message.
    pub(crate) fn message(&self) -> String {
        match self {
            Refusal::NoSuchUpstream => "No such upstream".into(),
            Refusal::NotAcceptable { stream: true } => "Not Acceptable: Accept must include text/event-stream".into(),
            Refusal::NotAcceptable { stream: false } => {
                "Not Acceptable: Accept must include application/json and text/event-stream".into()
            }
            Refusal::UnsupportedMediaType => "Unsupported Media Type: Content-Type must be application/json".into(),
            Refusal::TooLarge { limit } => format!("Request body larger than {limit} bytes"),
            Refusal::BodyTimeout => "Request Timeout: the body did not arrive in time".into(),
            Refusal::Malformed(DecodeError::Parse(why)) => format!("Parse error: {why}"),
            Refusal::Malformed(DecodeError::Invalid { reason, .. }) => format!("Invalid Request: {reason}"),
            Refusal::BadRequest(why) => format!("Bad Request: {why}"),
            Refusal::InvalidInitialize(why) => why.clone(),
            Refusal::SessionRequired => "Bad Request: Mcp-Session-Id header is required".into(),
            Refusal::SessionNotFound => "Session not found".into(),
            Refusal::UnsupportedVersion => {
                format!("Unsupported protocol version (supported: {})", mcp::LEGACY_VERSIONS.join(", "))
            }
            Refusal::Unauthorized(why) if why.insufficient_scope.is_some() => "Forbidden: insufficient scope".into(),
            Refusal::Unauthorized(_) => "Unauthorized".into(),
            Refusal::Forbidden(OriginRefusal::Ambiguous(why)) => format!("Bad Request: {why}"),
            Refusal::Forbidden(why) => format!("Forbidden: {why}"),
            Refusal::MethodNotAllowed => "Method not allowed".into(),
            Refusal::StreamConflict => "Conflict: only one GET stream is allowed per session".into(),
            Refusal::TooManySessions { retry_after } => {
                format!("Overloaded: too many sessions; retry in {} s", seconds(*retry_after))
            }
            Refusal::TooManyConnections => {
                format!("Overloaded: too many connections; retry in {} s", seconds(CONNECTION_RETRY_AFTER))
            }
            Refusal::HeadTooLarge => "Request Header Fields Too Large".into(),
            Refusal::NotImplemented(why) => format!("Not Implemented: {why}"),
        }
    }

    /// More than the client is told, for the log (never a credential).
    fn detail(&self) -> &str {
        match self {
            Refusal::Unauthorized(why) => why.reason,
            _ => "",
        }
    }

    /// `Retry-After`, for refusals that pass.
    fn retry_after(&self) -> Option<u64> {
        match self {
            Refusal::TooManySessions { retry_after } => Some(seconds(*retry_after)),
            Refusal::TooManyConnections => Some(seconds(CONNECTION_RETRY_AFTER)),
            _ => None,
        }
    }

    /// Refusals after which the connection is closed: the body was not (fully) read, or
    /// the request's authority is ambiguous (a front proxy may have routed it otherwise,
    /// so what follows on the connection is not trusted either).
    fn closes(&self) -> bool {
        matches!(
            self,
            Refusal::TooLarge { .. }
                | Refusal::BodyTimeout
                | Refusal::TooManyConnections
                | Refusal::Forbidden(OriginRefusal::Ambiguous(_))
        )
    }

    /// The JSON-RPC error text. A decode error names its own id, when it could read one.
    pub(crate) fn body(&self, id: Option<&Id>, correlation: &str) -> String {
        let id = match self {
            Refusal::Malformed(DecodeError::Invalid { id: Some(own), .. }) => Some(own),
            Refusal::Malformed(DecodeError::Parse(_)) => None,
            _ => id,
        };
        let data: Option<Value> =
            self.retry_after().map(|secs| json!({ "correlationId": correlation, "retryAfterSeconds": secs }));
        jsonrpc::encode_error(id, self.code(), &self.message(), data)
    }

    /// The answer, with the id of the request it refuses when known.
    pub(crate) fn respond(&self, id: Option<&Id>, correlation: &str) -> Response {
        let mut resp = Response::new(Body::from(self.body(id, correlation)));
        *resp.status_mut() = self.status();
        let h = resp.headers_mut();
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(secs) = self.retry_after() {
            h.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Refusal::Unauthorized(why) = self
            && let Ok(challenge) = HeaderValue::from_str(&why.challenge())
        {
            h.insert(header::WWW_AUTHENTICATE, challenge);
        }
        if matches!(self, Refusal::MethodNotAllowed) {
            h.insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
        }
        if self.closes() {
            h.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        resp
    }

    /// The whole answer as HTTP/1.1 bytes, for the accept loop, which refuses a
    /// connection before any HTTP is spoken on it.
    pub(crate) fn http1_bytes(&self) -> Vec<u8> {
        let body = self.body(None, &correlation_id());
        let status = self.status();
        let mut head = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
            body.len()
        );
        if let Some(secs) = self.retry_after() {
            let _ = write!(head, "retry-after: {secs}\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.as_bytes());
        bytes
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        self.respond(None, &correlation_id())
    }
}

/// What the refusal log line says about the request (never its body).
#[derive(Debug, Clone)]
pub(crate) struct RequestInfo {
    /// The HTTP method.
    pub(crate) method: Method,
    /// The request target (its path is logged with a refusal; a copy shares the
    /// request head's bytes).
    pub(crate) uri: axum::http::Uri,
    /// The client's address, when the listener recorded it.
    pub(crate) peer: Option<SocketAddr>,
}

impl RequestInfo {
    /// The request path.
    pub(crate) fn path(&self) -> &str {
        self.uri.path()
    }

    /// Logs the refusal once, at debug level, and answers it.
    pub(crate) fn refuse(&self, refusal: &Refusal, id: Option<&Id>) -> Response {
        let correlation = correlation_id();
        let peer = self.peer.map(|p| p.to_string()).unwrap_or_default();
        tracing::debug!(
            target: "seawall::downstream",
            status = refusal.status().as_u16(),
            code = refusal.code(),
            reason = %refusal.message(),
            detail = %refusal.detail(),
            method = %self.method,
            path = %self.path(),
            peer = %peer,
            id = id.map(Id::as_json).unwrap_or("null"),
            correlation_id = %correlation,
            "refused an HTTP request"
        );
        refusal.respond(id, &correlation)
    }
}

fn seconds(d: Duration) -> u64 {
    d.as_secs().max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_refusals_carry_retry_after_and_correlation_id() {
        let r = Refusal::TooManySessions { retry_after: Duration::from_secs(5) };
        let body: Value = serde_json::from_str(&r.body(Some(&Id::number(7)), "abc")).unwrap();
        assert_eq!(body["id"], 7);
        assert_eq!(body["error"]["code"], code::OVERLOADED);
        assert_eq!(body["error"]["data"], json!({"correlationId": "abc", "retryAfterSeconds": 5}));
        let resp = r.respond(None, "x");
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[header::RETRY_AFTER], "5");
    }

    #[test]
    fn raw_refusal_is_a_complete_http1_answer() {
        let bytes = Refusal::TooManyConnections.http1_bytes();
        let text = String::from_utf8(bytes).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
        assert!(head.contains(&format!("content-length: {}\r\n", body.len())));
        assert!(head.contains("retry-after: 1"));
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["error"]["code"], code::OVERLOADED);
    }

    #[test]
    fn decode_errors_keep_their_own_id() {
        let e = DecodeError::Invalid { id: Some(Id::number(3)), reason: "jsonrpc must be \"2.0\"" };
        let body: Value = serde_json::from_str(&Refusal::Malformed(e).body(None, "c")).unwrap();
        assert_eq!(body["id"], 3);
        assert_eq!(Refusal::Malformed(DecodeError::Parse("x".into())).status(), StatusCode::BAD_REQUEST);
    }
}
