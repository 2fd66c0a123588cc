//! The service at the bottom of every upstream stack, which sends one attempt over the
//! request's link, and the types of the stack above it.

use std::sync::Arc;
use std::task::{Context, Poll};

use tower::Service;

use super::answer::Answer;
use super::failure::GatewayError;
use super::request::{BoxFuture, UpstreamCall};

/// The future every layer of an upstream stack returns.
pub type CallFuture = BoxFuture<'static, Result<Answer, GatewayError>>;

/// The type-erased stack each upstream's requests go through.
pub type UpstreamService = tower::util::BoxCloneSyncService<UpstreamCall, Answer, GatewayError>;

/// The bottom of every upstream stack: sends the attempt over its link and reads the
/// answer once.
#[derive(Clone, Copy, Debug, Default)]
pub struct SendAttempt;

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
