//! One overall deadline per request. When it passes, the inner future is dropped — which
//! makes the upstream link send `notifications/cancelled` — and the caller gets
//! [`GatewayError::Timeout`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use crate::errors::GatewayError;
use crate::upstream::Reply;
use crate::upstream::service::UpstreamCall;

/// Applies [`Deadline`].
#[derive(Clone, Copy, Debug, Default)]
pub struct DeadlineLayer;

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;
    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline { inner }
    }
}

/// Bounds a call by its `timeout`.
#[derive(Clone, Debug)]
pub struct Deadline<S> {
    inner: S,
}

impl<S> Service<UpstreamCall> for Deadline<S>
where
    S: Service<UpstreamCall, Response = Reply, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = GatewayError;
    type Future = Pin<Box<dyn Future<Output = Result<Reply, GatewayError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: UpstreamCall) -> Self::Future {
        let after = req.timeout;
        let upstream = req.upstream.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            match tokio::time::timeout(after, fut).await {
                Ok(result) => result,
                Err(_) => Err(GatewayError::Timeout { upstream, after }),
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
        let svc = DeadlineLayer.layer(inner);
        let started = tokio::time::Instant::now();
        let err = svc
            .oneshot(test_call(Duration::from_secs(2)))
            .await
            .unwrap_err();
        assert!(
            matches!(err, GatewayError::Timeout { after, .. } if after == Duration::from_secs(2))
        );
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
        let link =
            crate::upstream::Link::Stdio(crate::upstream::stdio::StdioLink::detached_for_tests());
        UpstreamCall {
            upstream: Arc::clone(&up),
            link,
            call: Call {
                method: "ping".into(),
                params: None,
                progress_token: None,
                related: EventSink::new(up, tx),
            },
            timeout,
            tool: None,
        }
    }
}
