//! One overall deadline per request, covering every attempt and backoff sleep.
//!
//! When it passes, the inner future is dropped — which makes the upstream link send
//! `notifications/cancelled` — and the caller gets [`GatewayError::Timeout`]. For
//! `tools/call`, each progress notification moves the deadline to at least
//! now + `tool_idle`, never past `tool_max` from the start.

use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use crate::config::Timeouts;
use crate::errors::GatewayError;
use crate::upstream::service::{Abandon, CallFuture, UpstreamCall};
use crate::upstream::{Activity, Reply};

/// Applies [`Deadline`] with one upstream's timeouts.
#[derive(Clone, Copy, Debug, Default)]
pub struct DeadlineLayer {
    timeouts: Timeouts,
}

impl DeadlineLayer {
    /// A layer using these timeouts for progress extension.
    pub fn new(timeouts: Timeouts) -> DeadlineLayer {
        DeadlineLayer { timeouts }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;
    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline { inner, timeouts: self.timeouts }
    }
}

/// Bounds a call by its deadline.
#[derive(Clone, Debug)]
pub struct Deadline<S> {
    inner: S,
    timeouts: Timeouts,
}

impl<S> Service<UpstreamCall> for Deadline<S>
where
    S: Service<UpstreamCall, Response = Reply, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = GatewayError;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: UpstreamCall) -> Self::Future {
        let activity = Arc::new(Activity::default());
        req.call.related = req.call.related.clone().with_activity(Arc::clone(&activity));
        let ctx = Arc::clone(&req.ctx);
        ctx.set_deadline(ctx.started + req.timeout);
        let extend_on_progress = req.tool.is_some();
        let (idle, max) = (self.timeouts.tool_idle, self.timeouts.tool_max);
        let upstream = req.upstream.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            tokio::pin!(fut);
            loop {
                tokio::select! {
                    result = &mut fut => return result,
                    _ = tokio::time::sleep_until(ctx.deadline()) => {
                        ctx.abandon(Abandon::DeadlineExpired);
                        return Err(GatewayError::Timeout { upstream, after: ctx.deadline() - ctx.started });
                    }
                    _ = activity.next_progress(), if extend_on_progress => {
                        let now = tokio::time::Instant::now();
                        let extended = ctx.deadline().max(now + idle).min(ctx.started + max);
                        ctx.set_deadline(extended);
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::upstream::{Call, EventSink};

    #[tokio::test(start_paused = true)]
    async fn times_out_and_drops_the_inner_call() {
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&dropped);
        let inner = service_fn(move |_req: UpstreamCall| {
            let guard = DropFlag(Arc::clone(&flag));
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<Reply, GatewayError>(Ok(crate::jsonrpc::to_raw(&serde_json::json!({}))))
            }
        });
        let svc = DeadlineLayer::default().layer(inner);
        let started = tokio::time::Instant::now();
        let err = svc.oneshot(test_call(Duration::from_secs(2))).await.unwrap_err();
        assert!(matches!(err, GatewayError::Timeout { after, .. } if after == Duration::from_secs(2)));
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
    }

    struct DropFlag(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn test_call(timeout: Duration) -> UpstreamCall {
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        let up: Arc<str> = Arc::from("u");
        let link = crate::upstream::Link::Stdio(crate::upstream::stdio::StdioLink::detached_for_tests());
        UpstreamCall {
            upstream: Arc::clone(&up),
            link,
            call: Call { method: "ping".into(), params: None, progress_token: None, related: EventSink::new(up, tx) },
            timeout,
            tool: None,
            idempotent: true,
            ctx: crate::upstream::service::CallCtx::new(timeout),
        }
    }
}
