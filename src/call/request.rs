//! One request on its way to one upstream, as every layer of its stack sees it, and
//! what the link it travels over must do ([`Transport`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::answer::Reply;
use super::clock::Clock;
use super::events::EventSink;
use super::failure::UpstreamError;
use crate::jsonrpc::{Id, Notification};
use crate::mcp::init::InitResult;
use crate::mcp::trace_context::TraceContext;

/// One request on its way to one upstream. Cloned for every attempt, so every field is
/// cheap to clone.
#[derive(Clone)]
pub(crate) struct UpstreamCall {
    /// The upstream's name.
    pub upstream: Arc<str>,
    /// The method.
    pub method: Arc<str>,
    /// The parameters exactly as they go upstream.
    pub params: Option<Arc<RawValue>>,
    /// The progress token carried in `params._meta` (upstream side), if any.
    pub progress_token: Option<Value>,
    /// The tool name as the upstream knows it, for `tools/call`.
    pub tool: Option<Arc<str>>,
    /// Whether sending the request twice is safe (decided by the router from the method,
    /// the operator's tool settings and trusted annotations).
    pub idempotent: bool,
    /// The request's deadline, covering every attempt.
    pub clock: Arc<Clock>,
    /// Where related notifications and server requests go.
    pub events: EventSink,
    /// The session's link to the upstream.
    pub target: Link,
    /// Endpoints earlier attempts went to (replicated upstreams), so a retry goes elsewhere.
    pub avoid: Vec<u16>,
    /// The endpoint this attempt goes to, chosen by the attempt layer.
    pub endpoint: Option<u16>,
    /// When this attempt must be over, set by the attempt layer.
    pub attempt_deadline: Option<Instant>,
    /// Extra HTTP headers of the request (`Mcp-Param-*` for a modern upstream); links
    /// that have no headers ignore them.
    pub headers: Arc<[(String, String)]>,
    /// What tracing knows of the attempt: which one it is, and the trace context it
    /// carries upstream.
    pub trace: CallTrace,
}

/// The tracing side of one attempt: set by the retry and breaker layers for the
/// attempt's span, and by the attempt layer for propagation.
#[derive(Clone, Debug, Default)]
pub(crate) struct CallTrace {
    /// Which attempt this is (1 for the first).
    pub attempt: u32,
    /// Why the attempt before it was retried (the `reason` of `seawall_retries_total`).
    pub retry_reason: Option<&'static str>,
    /// The state of the breakers that admitted it: `closed`, or `half_open` for a probe.
    pub breaker: Option<&'static str>,
    /// The W3C trace context the attempt carries upstream (HTTP upstreams in headers, a
    /// process in `params._meta`): the attempt span's when tracing is on, else the
    /// client's own, passed through.
    pub context: Option<Arc<TraceContext>>,
    /// Whether the client wrote its context into `params._meta` (it travels upstream with
    /// the params, and is replaced there when tracing is on).
    pub in_meta: bool,
}

impl std::fmt::Debug for UpstreamCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamCall")
            .field("upstream", &self.upstream)
            .field("method", &self.method)
            .field("tool", &self.tool)
            .field("idempotent", &self.idempotent)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// A boxed, sendable future.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One client session's connection to one upstream: a Streamable HTTP session, a
/// supervised process, or sessions with several replicas. Dropping the future of
/// [`Transport::send`] cancels the request upstream.
pub(crate) trait Transport: Send + Sync {
    /// Sends one attempt of a call and waits for its answer; related messages go to
    /// `call.events`. Sent to `call.endpoint` when the upstream has several.
    fn send<'a>(&'a self, call: &'a UpstreamCall) -> BoxFuture<'a, Result<Reply, UpstreamError>>;

    /// For replicated upstreams: the endpoint for the next attempt, avoiding `avoid`.
    fn pick(&self, _avoid: &[u16]) -> Option<u16> {
        None
    }

    /// For replicated upstreams: how an attempt on an endpoint ended (outlier ejection).
    fn record(&self, _endpoint: u16, _failed: bool) {}

    /// For replicated upstreams: whether an endpoint other than `endpoint` and those
    /// `tried` could take a retry (any not ejected by hand: an ejected one is still
    /// tried when the others fail).
    fn has_untried(&self, _endpoint: u16, _tried: &[u16]) -> bool {
        false
    }

    /// For replicated upstreams: whether an endpoint other than `endpoint` is healthy
    /// (not ejected), so that a failure of `endpoint` is that endpoint's alone.
    fn has_spare(&self, _endpoint: u16) -> bool {
        false
    }

    /// Whether the link is a child process on pipes (stdio): its requests have no
    /// headers, so their trace context travels in `params._meta`.
    fn is_process(&self) -> bool {
        false
    }

    /// Sends a notification.
    fn notify(&self, n: Notification) -> BoxFuture<'_, Result<(), UpstreamError>>;

    /// Answers a server-initiated request (made by `endpoint`, for replicated upstreams).
    fn respond(&self, endpoint: Option<u16>, id: Id, body: Reply) -> BoxFuture<'_, Result<(), UpstreamError>>;

    /// The upstream's answer to initialize, once the handshake has completed.
    fn init_result(&self) -> Option<Arc<InitResult>>;

    /// Starts receiving events not tied to a call (list_changed, resources/updated, ...).
    fn subscribe(&self, key: u64, sink: EventSink);

    /// Stops receiving unrelated events.
    fn unsubscribe(&self, key: u64);

    /// The client opened its stream for messages not tied to a request: open the
    /// upstream's counterpart (HTTP upstreams open it only then, so an idle session
    /// holds no upstream connection). Nothing to do for a process.
    fn want_unrelated_stream(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Ends the upstream session (HTTP DELETE) or stops the process.
    fn close(&self) -> BoxFuture<'_, ()>;

    /// The upstream sessions behind the link that another process may re-attach to (for
    /// a sealed session id); none for a link bound to this process (a child process, an
    /// event stream, a modern upstream, which has no session).
    fn attached(&self) -> Vec<AttachedSession> {
        Vec::new()
    }

    /// Lets go of the link while other replicas may still use its upstream sessions: its
    /// streams stop, the upstream sessions stay. A link bound to this process closes.
    fn detach(&self) -> BoxFuture<'_, ()> {
        self.close()
    }
}

/// An upstream session that another process can re-attach to by its id alone: a
/// Streamable HTTP session of the session era.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AttachedSession {
    /// Which endpoint holds it, for replicated upstreams.
    pub endpoint: Option<u16>,
    /// The upstream's `Mcp-Session-Id`.
    pub session_id: String,
    /// The version it negotiated (sent as `MCP-Protocol-Version`).
    pub version: String,
    /// The names of the capabilities the upstream declared.
    pub capabilities: Vec<String>,
}

/// A shared link to an upstream.
pub(crate) type Link = Arc<dyn Transport>;
