//! Retries of idempotent requests, bounded by a budget and by the request's deadline.
//!
//! A failed attempt is retried when [`policy::verdict`] allows it, nothing of its answer
//! has reached the client, the per-upstream [`TpsBudget`] has room, and the deadline
//! leaves room for the backoff. Every retry is a new upstream request with a new id (the
//! link mints them), sent to an endpoint the request has not tried yet.
//!
//! The budget bounds what an outage costs: over any 10 s, an upstream that fails every
//! attempt sees at most `N · (1 + budget_percent/100) + 10 · budget_min_per_sec`
//! attempts for `N` requests (and never more than `max_attempts · N`). With the defaults
//! (20 %, 1/s) that is 130 attempts for 100 requests, 1,210 for 1,000.

pub mod policy;

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::retry::budget::{Budget, TpsBudget};
use tower::{Layer, Service, ServiceExt};

use crate::call::{Answer, CallFuture, GatewayError, UpstreamCall};
use crate::config::RetryConfig;
use crate::telemetry::metrics;
use policy::Decision;

/// How long a deposit counts in the budget.
const BUDGET_TTL: Duration = Duration::from_secs(10);

/// Applies [`Retry`] with one upstream's settings and budget.
#[derive(Clone)]
pub struct RetryLayer {
    config: RetryConfig,
    budget: Arc<TpsBudget>,
}

impl RetryLayer {
    /// A layer with its own budget.
    pub fn new(config: RetryConfig) -> RetryLayer {
        let percent = if config.budget_percent.is_finite() { config.budget_percent.clamp(0.0, 100_000.0) } else { 0.0 };
        let min_per_sec = config.budget_min_per_sec.min(i32::MAX as u32 - 1);
        let budget = TpsBudget::new(BUDGET_TTL, min_per_sec, (percent / 100.0) as f32);
        RetryLayer { config, budget: Arc::new(budget) }
    }
}

impl<S> Layer<S> for RetryLayer {
    type Service = Retry<S>;
    fn layer(&self, inner: S) -> Retry<S> {
        Retry { inner, config: self.config, budget: Arc::clone(&self.budget) }
    }
}

/// Retries failed attempts that are safe to retry.
#[derive(Clone)]
pub struct Retry<S> {
    inner: S,
    config: RetryConfig,
    budget: Arc<TpsBudget>,
}

impl<S> Service<UpstreamCall> for Retry<S>
where
    S: Service<UpstreamCall, Response = Answer, Error = GatewayError> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Answer;
    type Error = GatewayError;
    type Future = CallFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is awaited per attempt (`oneshot`), so each retry waits its turn.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: UpstreamCall) -> Self::Future {
        let inner = self.inner.clone();
        let config = self.config;
        let budget = Arc::clone(&self.budget);
        budget.deposit();
        Box::pin(async move {
            let max_attempts = config.max_attempts.max(1);
            let mut attempt = 1;
            loop {
                let relayed_before = relayed(&req);
                req.trace.attempt = attempt;
                let result = inner.clone().oneshot(req.clone()).await;
                let Err(error) = &result else { return result };
                let class = error.class();
                let delay = match policy::decide(&class, req.idempotent, attempt) {
                    Decision::Stop => return result,
                    Decision::Retry => crate::backoff::full_jitter(config.base_delay, config.max_delay, attempt - 1),
                    Decision::RetryAfter(after) => after,
                };
                let free_retry = attempt == 1 && !class.reached;
                if attempt >= max_attempts && !free_retry {
                    return result;
                }
                if relayed(&req) != relayed_before {
                    tracing::debug!(upstream = %req.upstream, "not retrying: part of the answer reached the client");
                    return result;
                }
                if delay >= req.clock.remaining() {
                    tracing::debug!(upstream = %req.upstream, ?delay, "not retrying: the deadline leaves no room");
                    return result;
                }
                if !budget.withdraw() {
                    tracing::warn!(upstream = %req.upstream, method = %req.method, "retry budget exhausted");
                    metrics::retry_budget_exhausted(&req.upstream);
                    return result;
                }
                metrics::retry(&req.upstream, class.retry_reason);
                tracing::info!(
                    upstream = %req.upstream,
                    method = %req.method,
                    attempt,
                    delay_ms = delay.as_millis() as u64,
                    error = %error,
                    "retrying"
                );
                if let Some(endpoint) = error.endpoint() {
                    req.avoid.push(endpoint);
                }
                req.trace.retry_reason = Some(class.retry_reason);
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
        })
    }
}

/// How many events of this request have been relayed towards the client so far.
fn relayed(req: &UpstreamCall) -> u64 {
    req.events.activity().map_or(0, |a| a.relayed())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use tower::{Layer, ServiceExt, service_fn};

    use super::*;
    use crate::call::UpstreamError;
    use crate::resilience::test_support::{call, failed, ok};

    fn failing_then_ok(
        failures: u32,
        error: UpstreamError,
    ) -> (Arc<AtomicU32>, impl Fn() -> Result<Answer, GatewayError> + Clone) {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let f = move || {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            if n < failures { Err(failed(error.clone())) } else { ok() }
        };
        (calls, f)
    }

    fn config(max_attempts: u32) -> RetryConfig {
        RetryConfig { max_attempts, budget_percent: 100.0, budget_min_per_sec: 100, ..RetryConfig::default() }
    }

    #[tokio::test(start_paused = true)]
    async fn idempotent_requests_are_retried_until_they_succeed() {
        let (calls, f) = failing_then_ok(2, UpstreamError::Io("reset".into()));
        let svc = RetryLayer::new(config(3)).layer(service_fn(move |_req: UpstreamCall| {
            let f = f.clone();
            async move { f() }
        }));
        let result = svc.oneshot(call(true, Duration::from_secs(30))).await;
        assert!(result.is_ok());
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn non_idempotent_requests_run_once() {
        let (calls, f) = failing_then_ok(1, UpstreamError::Io("reset".into()));
        let svc = RetryLayer::new(config(3)).layer(service_fn(move |_req: UpstreamCall| {
            let f = f.clone();
            async move { f() }
        }));
        assert!(svc.oneshot(call(false, Duration::from_secs(30))).await.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn requests_that_never_left_are_retried_once_whatever_the_method() {
        let (calls, f) = failing_then_ok(5, UpstreamError::Connect("refused".into()));
        let svc = RetryLayer::new(config(5)).layer(service_fn(move |_req: UpstreamCall| {
            let f = f.clone();
            async move { f() }
        }));
        assert!(svc.oneshot(call(false, Duration::from_secs(30))).await.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn attempts_stop_at_the_maximum_and_when_the_deadline_is_near() {
        let (calls, f) = failing_then_ok(100, UpstreamError::HttpStatus { status: 503, retry_after: None });
        let f2 = f.clone();
        let svc = RetryLayer::new(config(4)).layer(service_fn(move |_req: UpstreamCall| {
            let f = f.clone();
            async move { f() }
        }));
        assert!(svc.oneshot(call(true, Duration::from_secs(30))).await.is_err());
        assert_eq!(calls.load(Ordering::SeqCst), 4);

        // Retry-After beyond the deadline: no retry.
        let limited = RetryLayer::new(config(4)).layer(service_fn(move |_req: UpstreamCall| async move {
            Err::<Answer, _>(failed(UpstreamError::HttpStatus {
                status: 429,
                retry_after: Some(Duration::from_secs(60)),
            }))
        }));
        let started = tokio::time::Instant::now();
        assert!(limited.oneshot(call(true, Duration::from_secs(5))).await.is_err());
        assert_eq!(started.elapsed(), Duration::ZERO);
        drop(f2);
    }

    #[tokio::test(start_paused = true)]
    async fn the_budget_caps_retries_under_a_full_outage() {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let cfg =
            RetryConfig { max_attempts: 3, budget_percent: 20.0, budget_min_per_sec: 0, ..RetryConfig::default() };
        let layer = RetryLayer::new(cfg);
        let svc = layer.layer(service_fn(move |_req: UpstreamCall| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { Err::<Answer, _>(failed(UpstreamError::HttpStatus { status: 503, retry_after: None })) }
        }));
        let requests = 100;
        for _ in 0..requests {
            let _ = svc.clone().oneshot(call(true, Duration::from_secs(30))).await;
        }
        let attempts = calls.load(Ordering::SeqCst);
        assert!(attempts <= requests * 12 / 10 + 1, "{attempts} attempts for {requests} requests");
        assert!(attempts > requests, "some retries happen");
    }

    #[tokio::test(start_paused = true)]
    async fn the_default_budget_keeps_a_dead_upstream_near_the_offered_load() {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let svc = RetryLayer::new(RetryConfig::default()).layer(service_fn(move |_req: UpstreamCall| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Err::<Answer, _>(failed(UpstreamError::HttpStatus { status: 503, retry_after: None })) }
        }));
        for _ in 0..100 {
            let _ = svc.clone().oneshot(call(true, Duration::from_secs(30))).await;
        }
        // 100 requests + 20 % + the 10 s reserve of 1 retry per second.
        let attempts = calls.load(Ordering::SeqCst);
        assert!((110..=130).contains(&attempts), "{attempts} attempts for 100 requests");
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_on_503_is_honoured_within_the_deadline() {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = Arc::clone(&calls);
        let svc = RetryLayer::new(config(3)).layer(service_fn(move |_req: UpstreamCall| {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    Err(failed(UpstreamError::HttpStatus { status: 503, retry_after: Some(Duration::from_secs(2)) }))
                } else {
                    ok()
                }
            }
        }));
        let started = tokio::time::Instant::now();
        assert!(svc.oneshot(call(true, Duration::from_secs(30))).await.is_ok());
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }
}
