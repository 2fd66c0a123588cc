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
    /// The overall deadline for this request (all attempts); for `tools/call` the
    /// deadline when no progress arrives.
    pub timeout: Duration,
    /// The tool name as the upstream knows it, for `tools/call`.
    pub tool: Option<Arc<str>>,
    /// Whether sending the request twice is safe (decided by the router from the method,
    /// the operator's tool settings and trusted annotations).
    pub idempotent: bool,
    /// State shared by the layers handling this request.
    pub ctx: Arc<CallCtx>,
}

/// Why a call was abandoned before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Abandon {
    /// Still running, or finished normally.
    None,
    /// The client cancelled it: not the upstream's fault.
    ClientCancelled,
    /// Its deadline passed: counts against the upstream.
    DeadlineExpired,
}

/// Per-request state shared by the layers: what the deadline layer decided, when the
/// upstream last said something about the request, and why it was abandoned.
#[derive(Debug)]
pub struct CallCtx {
    /// When the request started.
    pub started: tokio::time::Instant,
    deadline: std::sync::Mutex<tokio::time::Instant>,
    abandon: std::sync::Mutex<Abandon>,
    client: Option<tokio_util::sync::CancellationToken>,
    /// Endpoints already tried by earlier attempts (pooled upstreams).
    pub tried: std::sync::Mutex<Vec<u16>>,
}

impl CallCtx {
    /// A context whose deadline is `timeout` from now.
    pub fn new(timeout: Duration) -> Arc<CallCtx> {
        CallCtx::for_client(timeout, None)
    }

    /// A context tied to the client's cancellation of the request.
    pub fn for_client(timeout: Duration, client: Option<tokio_util::sync::CancellationToken>) -> Arc<CallCtx> {
        let now = tokio::time::Instant::now();
        Arc::new(CallCtx {
            started: now,
            deadline: std::sync::Mutex::new(now + timeout),
            abandon: std::sync::Mutex::new(Abandon::None),
            client,
            tried: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The current overall deadline.
    pub fn deadline(&self) -> tokio::time::Instant {
        *super::lock(&self.deadline)
    }

    /// Moves the overall deadline.
    pub fn set_deadline(&self, at: tokio::time::Instant) {
        *super::lock(&self.deadline) = at;
    }

    /// Time left before the overall deadline.
    pub fn remaining(&self) -> Duration {
        self.deadline().saturating_duration_since(tokio::time::Instant::now())
    }

    /// Why the call was abandoned, if it was.
    pub fn abandoned(&self) -> Abandon {
        let recorded = *super::lock(&self.abandon);
        if recorded == Abandon::None && self.client.as_ref().is_some_and(|c| c.is_cancelled()) {
            return Abandon::ClientCancelled;
        }
        recorded
    }

    /// Records why the call is being abandoned (set before its future is dropped).
    pub fn abandon(&self, why: Abandon) {
        let mut a = super::lock(&self.abandon);
        if *a == Abandon::None {
            *a = why;
        }
    }
}

/// The future every layer of the upstream stack returns.
pub type CallFuture = Pin<Box<dyn Future<Output = Result<Reply, GatewayError>> + Send>>;

/// The type-erased stack each upstream's requests go through.
pub type UpstreamService = tower::util::BoxCloneSyncService<UpstreamCall, Reply, GatewayError>;

/// Sends a call over its link.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinkService;

impl Service<UpstreamCall> for LinkService {
    type Response = Reply;
    type Error = GatewayError;
    type Future = CallFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: UpstreamCall) -> Self::Future {
        Box::pin(async move {
            req.link
                .call_avoiding(req.call, &req.ctx.tried)
                .await
                .map_err(|source| GatewayError::Upstream { upstream: req.upstream, source })
        })
    }
}
