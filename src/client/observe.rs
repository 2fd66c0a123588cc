//! The client stack's two outermost layers, which hand what they observe to
//! [`crate::telemetry`]: each request runs in its span when tracing is on
//! ([`RequestSpanLayer`]), and gets one access log line when the log is on
//! ([`AccessLayer`]).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use futures::future::Either;
use tower::{Layer, Service};
use tracing::Instrument as _;

use super::{Answered, ClientRequest};
use crate::call::BoxFuture;
use crate::identity::Principal;
use crate::jsonrpc;
use crate::mcp::trace_context::TraceContext;
use crate::telemetry::access::{AccessLog, Recorded};
use crate::telemetry::trace::spans::{self, RequestFacts, context_of};

/// What a request's span says of it.
fn facts(req: &ClientRequest) -> RequestFacts<'_> {
    RequestFacts {
        method: &req.method,
        params: req.params.as_deref(),
        tool: req.tool.as_deref(),
        session: req.session.key,
        version: &req.session.version,
        id: &req.id,
        peer: req.peer,
        trace: &req.trace,
    }
}

/// Applies [`RequestSpans`]: installed only when tracing is on.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RequestSpanLayer;

impl<S> Layer<S> for RequestSpanLayer {
    type Service = RequestSpans<S>;
    fn layer(&self, inner: S) -> RequestSpans<S> {
        RequestSpans { inner }
    }
}

/// Runs each client request inside its span and records its answer; the span's ids go
/// into the request, for the access log.
#[derive(Clone, Debug)]
pub(crate) struct RequestSpans<S> {
    inner: S,
}

impl<S> Service<ClientRequest> for RequestSpans<S>
where
    S: Service<ClientRequest, Response = Answered, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Answered;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Answered, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: ClientRequest) -> Self::Future {
        let span = spans::request(&facts(&req));
        req.trace.set_span(context_of(&span));
        let fut = span.in_scope(|| self.inner.call(req));
        Box::pin(async move {
            let Ok(answered) = fut.instrument(span.clone()).await;
            spans::record_reply(&span, &answered.reply, answered.outcome);
            Ok(answered)
        })
    }
}

/// Applies [`Access`] when the log is on.
#[derive(Clone, Default)]
pub(crate) struct AccessLayer {
    log: Option<AccessLog>,
}

impl AccessLayer {
    /// The layer writing to `log` (none: the layer does nothing).
    pub(crate) fn new(log: Option<AccessLog>) -> AccessLayer {
        AccessLayer { log }
    }
}

impl<S> Layer<S> for AccessLayer {
    type Service = Access<S>;
    fn layer(&self, inner: S) -> Access<S> {
        Access { inner, log: self.log.clone().map(Arc::new) }
    }
}

/// Writes one access line per answered request.
#[derive(Clone)]
pub(crate) struct Access<S> {
    inner: S,
    log: Option<Arc<AccessLog>>,
}

impl<S> Service<ClientRequest> for Access<S>
where
    S: Service<ClientRequest, Response = Answered, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Answered;
    type Error = Infallible;
    type Future = Either<S::Future, Logged<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: ClientRequest) -> Self::Future {
        let Some(log) = self.log.clone() else {
            return Either::Left(self.inner.call(req));
        };
        let started = Instant::now();
        let session = req.session.key;
        let principal = req.principal.clone();
        let method_name = Arc::clone(&req.method);
        let tool = req.tool.clone();
        let id = req.id.clone();
        let span = req.trace.span.clone();
        let client_trace = req.trace.parent().cloned();
        let inner = self.inner.call(req);
        Either::Right(Logged {
            inner,
            entry: Some(ToLog { log, started, session, principal, method_name, tool, id, span, client_trace }),
        })
    }
}

pin_project_lite::pin_project! {
    /// A request's answer, logged when it comes.
    pub(crate) struct Logged<F> {
        #[pin]
        inner: F,
        entry: Option<ToLog>,
    }
}

/// What [`Logged`] writes of its request when the answer comes.
pub(super) struct ToLog {
    log: Arc<AccessLog>,
    started: Instant,
    session: u64,
    principal: Option<Arc<Principal>>,
    method_name: Arc<str>,
    tool: Option<Arc<str>>,
    id: jsonrpc::Id,
    span: Option<Box<TraceContext>>,
    client_trace: Option<TraceContext>,
}

impl<F> Future for Logged<F>
where
    F: Future<Output = Result<Answered, Infallible>>,
{
    type Output = Result<Answered, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let Ok(answered) = ready!(this.inner.poll(cx));
        if let Some(e) = this.entry.take() {
            let request = Recorded {
                started: e.started,
                session: e.session,
                principal: e.principal.as_deref(),
                method: &e.method_name,
                tool: e.tool.as_deref(),
                id: e.id.raw(),
                span: e.span.as_deref(),
                client_trace: e.client_trace.as_ref(),
            };
            e.log.record(request, &answered.reply, answered.outcome, answered.http.map(|h| h.status.as_u16()));
        }
        Poll::Ready(Ok(answered))
    }
}
