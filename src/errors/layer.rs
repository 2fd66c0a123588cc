//! The outermost layer of the client stack: every failure from any layer below becomes
//! one sanitised answer here, with the HTTP hint its transport needs.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use super::Rewriter;
use crate::call::{BoxFuture, GatewayError, Reply};
use crate::client::{Answered, ClientRequest};

/// Applies [`Rewrite`] with one rewriter.
#[derive(Clone)]
pub struct RewriteLayer {
    rewriter: Arc<Rewriter>,
}

impl RewriteLayer {
    /// A layer answering failures with `rewriter`.
    pub fn new(rewriter: Arc<Rewriter>) -> RewriteLayer {
        RewriteLayer { rewriter }
    }
}

impl<S> Layer<S> for RewriteLayer {
    type Service = Rewrite<S>;
    fn layer(&self, inner: S) -> Rewrite<S> {
        Rewrite { inner, rewriter: Arc::clone(&self.rewriter) }
    }
}

/// Turns every failure into an answer.
#[derive(Clone)]
pub struct Rewrite<S> {
    inner: S,
    rewriter: Arc<Rewriter>,
}

impl<S> Service<ClientRequest> for Rewrite<S>
where
    S: Service<ClientRequest, Response = Reply, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Answered;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Answered, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness failures of the layers below are answered per request.
        match self.inner.poll_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, req: ClientRequest) -> Self::Future {
        let tool = req.tool.clone();
        let rewriter = Arc::clone(&self.rewriter);
        let fut = self.inner.call(req);
        Box::pin(async move {
            Ok(match fut.await {
                Ok(reply) => Answered { reply, overloaded: None },
                Err(e) => {
                    let overloaded = match &e {
                        GatewayError::Overloaded { retry_after, .. } => Some(*retry_after),
                        _ => None,
                    };
                    Answered { reply: rewriter.failure(&e, tool.as_deref()), overloaded }
                }
            })
        })
    }
}
