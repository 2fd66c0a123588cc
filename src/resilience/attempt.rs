//! The innermost resilience layer: one attempt, on one endpoint, within its time.
//!
//! It picks the endpoint of a replicated upstream (avoiding those earlier attempts
//! tried), bounds the attempt by the request's deadline and, for idempotent requests, by
//! the attempt timeout (`timeouts.attempt`, restarted by progress), and records how the
//! attempt ended on its endpoint and how long it took
//! (`seawall_upstream_attempt_duration_seconds`). A timeout is an `Err` here, so the breaker and retry
//! layers above see it as a result like any other: [`GatewayError::Timeout`] when the
//! request's deadline passed, [`GatewayError::AttemptTimeout`] when only this attempt's.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Layer, Service};

use crate::call::{Answer, CallFuture, GatewayError, UpstreamCall};
use crate::telemetry::metrics;

/// Applies [`Attempt`] with one upstream's attempt timeout.
#[derive(Clone, Copy, Debug, Default)]
pub struct AttemptLayer {
    timeout: Option<Duration>,
}

impl AttemptLayer {
    /// Attempts of idempotent requests end after `timeout` without progress.
    pub fn new(timeout: Option<Duration>) -> AttemptLayer {
        AttemptLayer { timeout }
    }
}

impl<S> Layer<S> for AttemptLayer {
    type Service = Attempt<S>;
    fn layer(&self, inner: S) -> Attempt<S> {
        Attempt { inner, timeout: self.timeout }
    }
}

/// Bounds one attempt in time and accounts for it on its endpoint.
#[derive(Clone, Debug)]
pub struct Attempt<S> {
    inner: S,
    timeout: Option<Duration>,
}

impl<S> Service<UpstreamCall> for Attempt<S>
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
        let endpoint = req.target.pick(&req.avoid);
        if let Some(i) = endpoint {
            req.endpoint = Some(i);
            req.events = req.events.clone().with_endpoint(i);
        }
        // A non-idempotent call cannot be tried again: cutting it short would only lose
        // its answer.
        let timeout = self.timeout.filter(|_| req.idempotent);
        let mut attempt_deadline = timeout.map(|t| Instant::now() + t);
        req.attempt_deadline = Some(attempt_deadline.map_or(req.clock.deadline(), |a| a.min(req.clock.deadline())));
        // Progress only matters when it restarts an attempt timeout.
        let mut progress = timeout.and_then(|_| req.events.activity().map(|a| a.progress()));
        let (clock, target, upstream) = (Arc::clone(&req.clock), Arc::clone(&req.target), Arc::clone(&req.upstream));
        let timer = metrics::AttemptTimer::start(&upstream, &req.method);
        let fut = self.inner.call(req);
        Box::pin(async move {
            tokio::pin!(fut);
            let result = loop {
                let until = attempt_deadline.map_or(clock.deadline(), |a| a.min(clock.deadline()));
                tokio::select! {
                    biased;
                    result = &mut fut => break result,
                    Some(Ok(())) = async { match progress.as_mut() { Some(p) => Some(p.changed().await), None => None } } => {
                        attempt_deadline = timeout.map(|t| Instant::now() + t);
                    }
                    _ = tokio::time::sleep_until(until) => {
                        if clock.expired() {
                            break Err(GatewayError::Timeout { upstream, after: clock.allowed() });
                        }
                        if let (Some(after), Some(at)) = (timeout, attempt_deadline)
                            && Instant::now() >= at
                        {
                            break Err(GatewayError::AttemptTimeout { upstream, after, endpoint });
                        }
                        // The deadline moved (progress): keep waiting.
                    }
                }
            };
            if let Some(i) = endpoint {
                let health = match &result {
                    Ok(answer) => answer.health(),
                    Err(e) => e.class().health,
                };
                target.record(i, health.is_endpoint_failure());
            }
            timer.finish(match &result {
                Ok(answer) => answer.outcome(),
                Err(e) => e.class().outcome,
            });
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::resilience::testing::{call, ok};

    #[tokio::test(start_paused = true)]
    async fn an_idempotent_attempt_ends_at_its_own_timeout_within_the_deadline() {
        let calls = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&calls);
        let hung = service_fn(move |_req: UpstreamCall| {
            counter.fetch_add(1, Ordering::SeqCst);
            async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                ok()
            }
        });
        let svc = AttemptLayer::new(Some(Duration::from_secs(1))).layer(hung);
        let started = Instant::now();
        let err = svc.clone().oneshot(call(true, Duration::from_secs(10))).await.unwrap_err();
        assert!(matches!(err, GatewayError::AttemptTimeout { .. }), "{err:?}");
        assert_eq!(started.elapsed(), Duration::from_secs(1));

        // Not idempotent: only the deadline applies, and it is reported as such.
        let started = Instant::now();
        let err = svc.oneshot(call(false, Duration::from_secs(3))).await.unwrap_err();
        assert!(matches!(err, GatewayError::Timeout { .. }), "{err:?}");
        assert_eq!(started.elapsed(), Duration::from_secs(3));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
