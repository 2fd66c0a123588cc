//! The client half of the request path: what every layer between a client's request
//! and the router handles. The stack itself is assembled in [`crate::app`].
//!
//! - [`ClientRequest`]: one request of a client session, parsed once.
//! - [`Routed`]: the answer below the rewrite layer (seawall's own, or an upstream's
//!   with what its rewrite needs).
//! - [`Answered`]: the answer the transport encodes, with its HTTP hint.
//! - [`RequestSpanLayer`], [`AccessLayer`]: each request's span and access log line.
//! - [`CancelLayer`]: the client's own cancellation ends its request.

mod cache;
mod cancel;
mod observe;
mod routed;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;

pub(crate) use cache::CacheLayer;
pub(crate) use cancel::CancelLayer;
pub(crate) use observe::AccessLayer;
pub(crate) use observe::RequestSpanLayer;
pub(crate) use routed::{FromUpstream, Routed};

use crate::call::{BoxFuture, EventTx, GatewayError, Reply};
use crate::identity::Principal;
use crate::jsonrpc::Id;
use crate::mcp::method;
use crate::mcp::trace_context::RequestTrace;
use crate::session::Session;
use crate::session::signal::CancelSignal;

/// One client request on its way to the router.
pub(crate) struct ClientRequest {
    /// The client session.
    pub session: Arc<Session>,
    /// The client's id.
    pub id: Id,
    /// The method.
    pub method: Arc<str>,
    /// The parameters (with the gateway's own progress token, if the client sent one).
    pub params: Option<Box<RawValue>>,
    /// For `tools/call`, the tool name as the client wrote it.
    pub tool: Option<Arc<str>>,
    /// For `tools/call`, its arguments, read in the same pass as the tool's name (the
    /// router checks them without reading the params again).
    pub arguments: Option<Arc<Value>>,
    /// The upstream-side progress token written into `params`, if any.
    pub progress: Option<Value>,
    /// Where related upstream events go.
    pub related: EventTx,
    /// Fires when the client cancels the request: set when the session admits it (none
    /// before, so that a request does not make a signal only to have it replaced); taken
    /// by the cancel layer, which waits for it.
    pub cancel: Option<CancelSignal>,
    /// Who is calling, when clients authenticate (the session's principal).
    pub principal: Option<Arc<Principal>>,
    /// A modern-era client's `Mcp-Param-*` headers (lowercase names, in the order
    /// received): checked against the arguments of its `tools/call`, the undeclared ones
    /// forwarded. `None` for clients of other transports and eras.
    pub param_headers: Option<Arc<[(String, String)]>>,
    /// The client's address, when its transport has one (the address that opened the
    /// session): what unauthenticated clients are told apart by.
    pub peer: Option<IpAddr>,
    /// The trace context the client sent (in `_meta`, or its HTTP request's headers),
    /// and seawall's span for the request when tracing is on.
    pub trace: RequestTrace,
}

impl ClientRequest {
    /// A request of `session`; related events go to `related`.
    #[cfg(test)]
    pub(crate) fn new(
        session: Arc<Session>,
        id: Id,
        method: &str,
        params: Option<Box<RawValue>>,
        progress: Option<Value>,
        related: EventTx,
    ) -> ClientRequest {
        let called = (method == method::TOOLS_CALL).then(|| crate::mcp::meta::read_with_name(params.as_deref()).1);
        ClientRequest::named(session, id, method, params, called.flatten(), progress, related)
    }

    /// [`ClientRequest::new`] with the `name` and `arguments` of its params already
    /// read: the tool of a `tools/call` (ignored for other methods).
    pub(crate) fn named(
        session: Arc<Session>,
        id: Id,
        method: &str,
        params: Option<Box<RawValue>>,
        called: Option<crate::mcp::meta::Called>,
        progress: Option<Value>,
        related: EventTx,
    ) -> ClientRequest {
        let (tool, arguments) = match called.filter(|_| method == method::TOOLS_CALL) {
            Some(called) => (Some(Arc::from(called.name)), called.arguments.map(Arc::new)),
            None => (None, None),
        };
        let principal = session.principal().cloned();
        let peer = session.peer();
        ClientRequest {
            session,
            id,
            method: Arc::from(method),
            params,
            tool,
            arguments,
            progress,
            principal,
            peer,
            related,
            cancel: None,
            param_headers: None,
            trace: RequestTrace::default(),
        }
    }
}

/// The answer to one client request.
#[derive(Debug)]
pub(crate) struct Answered {
    /// The JSON-RPC result or error object.
    pub reply: Reply,
    /// What became of the request, as the metrics and the access log name it: `ok`,
    /// `tool_error` (a `tools/call` result with `isError`), `error` (an upstream's
    /// JSON-RPC error), or the failure's own outcome (`timeout`, `connection`,
    /// `circuit_open`, `shed`, `rate_limited`, `denied`, `cancelled`, `refused`, ...).
    pub outcome: &'static str,
    /// Set when the request was refused as overloaded or rate limited: transports that
    /// can answer with this HTTP status and `Retry-After`.
    pub http: Option<HttpHint>,
}

/// The HTTP status and `Retry-After` a refusal rides when its answer is a plain JSON
/// response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HttpHint {
    /// The HTTP status (503 overloaded, 429 rate limited).
    pub status: http::StatusCode,
    /// When the client may try again.
    pub retry_after: Duration,
}

impl HttpHint {
    /// The hint for a refusal, if it has one.
    pub(crate) fn of(error: &GatewayError) -> Option<HttpHint> {
        let (status, retry_after) = match error {
            GatewayError::Overloaded { retry_after, .. } => (http::StatusCode::SERVICE_UNAVAILABLE, *retry_after),
            GatewayError::RateLimited { retry_after, .. } => (http::StatusCode::TOO_MANY_REQUESTS, *retry_after),
            _ => return None,
        };
        Some(HttpHint { status, retry_after })
    }
}

/// The future of every layer below the rewrite layer.
pub(crate) type ClientFuture = BoxFuture<'static, Result<Routed, GatewayError>>;

/// The whole client stack, type-erased: it always answers.
pub(crate) type ClientService = tower::util::BoxCloneSyncService<ClientRequest, Answered, std::convert::Infallible>;
