//! One overall deadline per request, covering every attempt and backoff sleep.
//!
//! The deadline lives in the request's [`Clock`](crate::call::Clock); the attempt layer
//! below never lets an attempt outlive it, so the inner stack normally answers
//! [`GatewayError::Timeout`] itself and every layer in between sees that result. This
//! layer is the backstop: when the deadline passes it drops the inner future (which makes
//! the link send `notifications/cancelled` upstream). For `tools/call`, each progress
//! notification moves the deadline to at least now + `tool_idle`, never past `tool_max`
//! from the start.

use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use crate::call::{Activity, Answer, CallFuture, GatewayError, UpstreamCall};
use crate::config::Timeouts;

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
    S: Service<UpstreamCall, Response = Answer, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Answer;
    type Error = GatewayError;
    type Future = CallFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: UpstreamCall) -> Self::Future {
        let activity = Arc::new(Activity::default());
        req.events = req.events.clone().with_activity(Arc::clone(&activity));
        let clock = Arc::clone(&req.clock);
        let extend_on_progress = req.tool.is_some();
        let (idle, max) = (self.timeouts.tool_idle, self.timeouts.tool_max);
        let upstream = Arc::clone(&req.upstream);
        let mut progress = activity.progress();
        let fut = self.inner.call(req);
        Box::pin(async move {
            tokio::pin!(fut);
            loop {
                tokio::select! {
                    biased;
                    result = &mut fut => return result,
                    Ok(()) = progress.changed(), if extend_on_progress => {
                        let now = tokio::time::Instant::now();
                        clock.set_deadline(clock.deadline().max(now + idle).min(clock.started() + max));
                    }
                    _ = tokio::time::sleep_until(clock.deadline()) => {
                        if clock.expired() {
                            return Err(GatewayError::Timeout { upstream, after: clock.allowed() });
                        }
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
    use crate::resilience::testing::{call, ok};

    #[tokio::test(start_paused = true)]
    async fn times_out_and_drops_the_inner_call() {
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&dropped);
        let inner = service_fn(move |_req: UpstreamCall| {
            let guard = DropFlag(Arc::clone(&flag));
            async move {
                let _guard = guard;
                tokio::time::sleep(Duration::from_secs(60)).await;
                ok()
            }
        });
        let svc = DeadlineLayer::default().layer(inner);
        let started = tokio::time::Instant::now();
        let err = svc.oneshot(call(true, Duration::from_secs(2))).await.unwrap_err();
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
}
