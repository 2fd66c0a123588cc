//! The client stack's outermost layer when tracing is on: each client request runs in
//! its span ([`spans::request`]), continuing the client's trace, and its answer is
//! recorded on it; the span's ids go into the request, for the access log below.

use std::convert::Infallible;
use std::task::{Context, Poll};

use tower::{Layer, Service};
use tracing::Instrument as _;

use super::spans::{self, context_of};
use crate::call::BoxFuture;
use crate::client::{Answered, ClientRequest};

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
        let span = spans::request(&req);
        req.trace.set_span(context_of(&span));
        let fut = span.in_scope(|| self.inner.call(req));
        Box::pin(async move {
            let Ok(answered) = fut.instrument(span.clone()).await;
            spans::record_reply(&span, &answered.reply, answered.outcome);
            Ok(answered)
        })
    }
}
