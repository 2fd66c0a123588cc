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
mod tests;
