//! The bottom of every upstream's request stack: a tower [`Service`] that sends one
//! [`UpstreamCall`] over its link. Resilience layers wrap it (see `app.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::Service;

use super::{Call, Link, Reply};
use crate::errors::GatewayError;

/// One request on its way to one upstream.
#[derive(Clone)]
pub struct UpstreamCall {
    /// The upstream's name.
    pub upstream: Arc<str>,
    /// The session's link to it.
    pub link: Link,
    /// What to send.
    pub call: Call,
    /// The overall deadline for this request (all attempts).
    pub timeout: Duration,
    /// The tool name as the upstream knows it, for `tools/call`.
    pub tool: Option<Arc<str>>,
}

/// The type-erased stack each upstream's requests go through.
pub type UpstreamService = tower::util::BoxCloneSyncService<UpstreamCall, Reply, GatewayError>;

/// Sends a call over its link.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinkService;

impl Service<UpstreamCall> for LinkService {
    type Response = Reply;
    type Error = GatewayError;
    type Future = Pin<Box<dyn Future<Output = Result<Reply, GatewayError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: UpstreamCall) -> Self::Future {
        Box::pin(async move {
            req.link
                .call(req.call)
                .await
                .map_err(|source| GatewayError::Upstream {
                    upstream: req.upstream,
                    source,
                })
        })
    }
}
