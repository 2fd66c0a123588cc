//! The service at the bottom of every upstream stack, which sends one attempt over the
//! request's link, and the types of the stack above it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower::Service;

use super::answer::Answer;
use super::failure::GatewayError;
use super::request::{BoxFuture, UpstreamCall};

/// The future every layer of an upstream stack returns.
pub(crate) type CallFuture = BoxFuture<'static, Result<Answer, GatewayError>>;

/// The type-erased stack each upstream's requests go through.
pub(crate) type UpstreamService = tower::util::BoxCloneSyncService<UpstreamCall, Answer, GatewayError>;

/// The bottom of every upstream stack: sends the attempt over its link and reads the
/// answer once.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SendAttempt;

impl Service<UpstreamCall> for SendAttempt {
    type Response = Answer;
    type Error = GatewayError;
    type Future = CallFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: UpstreamCall) -> Self::Future {
        Box::pin(async move {
            let reply = req.target.send(&req).await.map_err(|source| GatewayError::Upstream {
                upstream: Arc::clone(&req.upstream),
                source,
                endpoint: req.endpoint,
            })?;
            Ok(Answer::parse(reply, req.tool.is_some()))
        })
    }
}

pin_project_lite::pin_project! {
    /// A future that holds `held` (a slot, a place in a cap) until it ends or is dropped,
    /// and is otherwise the future it wraps.
    pub struct Holding<F, G> {
        #[pin]
        inner: F,
        held: G,
    }
}

impl<F, G> Holding<F, G> {
    /// `inner`, holding `held` for as long as it lives.
    pub(crate) fn new(inner: F, held: G) -> Holding<F, G> {
        Holding { inner, held }
    }
}

impl<F: Future, G> Future for Holding<F, G> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.project().inner.poll(cx)
    }
}
