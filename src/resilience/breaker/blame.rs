//! A process death counted against the tool called, once the call as a whole failed
//! with it.
//!
//! A supervised process that dies fails every call in flight. The transport decides at
//! once whether the evidence points at a call ([`Health::Crashed`]: it was alone in
//! flight, or its tool had a call in flight at the previous death too), but an idempotent
//! call is then retried on the restarted process, and a retry that succeeds shows the
//! tool was not at fault. So the breaker layer below the retries counts no death per
//! attempt, and this layer, above them, counts one on the tool's breaker when the call
//! ends with it: one failed call, as if the tool's breaker had admitted it now.

use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use super::classify::{Outcome, Verdict};
use super::registry::Breakers;
use crate::call::{Answer, CallFuture, GatewayError, Health, UpstreamCall};
use crate::config::BreakerConfig;

/// Applies [`Blame`] with one upstream's breaker settings.
#[derive(Clone, Debug)]
pub struct BlameLayer {
    breakers: Arc<Breakers>,
    cfg: BreakerConfig,
}

impl BlameLayer {
    /// A layer counting on the tool breakers of `breakers` (created with `cfg`).
    pub fn new(breakers: Arc<Breakers>, cfg: BreakerConfig) -> BlameLayer {
        BlameLayer { breakers, cfg }
    }
}

impl<S> Layer<S> for BlameLayer {
    type Service = Blame<S>;

    fn layer(&self, inner: S) -> Blame<S> {
        Blame { inner, breakers: Arc::clone(&self.breakers), cfg: self.cfg }
    }
}

/// Counts a process death the evidence lays at a call's door on its tool's breaker,
/// once the call (all its attempts) failed with it.
#[derive(Clone, Debug)]
pub struct Blame<S> {
    inner: S,
    breakers: Arc<Breakers>,
    cfg: BreakerConfig,
}

impl<S> Service<UpstreamCall> for Blame<S>
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

    fn call(&mut self, req: UpstreamCall) -> Self::Future {
        let called = req.tool.clone().map(|tool| (Arc::clone(&req.upstream), tool));
        let (breakers, cfg) = (Arc::clone(&self.breakers), self.cfg);
        let fut = self.inner.call(req);
        Box::pin(async move {
            let result = fut.await;
            if let (Err(e), Some((upstream, tool))) = (&result, called)
                && e.class().health == Health::Crashed
            {
                blame(&breakers, &cfg, &upstream, &tool);
            }
            result
        })
    }
}

/// Counts one failed call on `tool`'s breaker (none while it is open or its probes are
/// all out: it is failing already).
fn blame(breakers: &Breakers, cfg: &BreakerConfig, upstream: &Arc<str>, tool: &Arc<str>) {
    let Some(breaker) = breakers.tool(upstream, tool, cfg) else { return };
    if let Ok(permit) = breaker.try_acquire() {
        tracing::debug!(%upstream, %tool, "the process died on this tool's call: counted on its breaker");
        permit.record(Verdict::new(Outcome::Failure));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::call::UpstreamError;
    use crate::resilience::test_support::{call_to, failed, ok};

    /// The tool breaker's failures in a row after a call of `sleep` ending with `result`.
    async fn failures_after(result: Result<Answer, GatewayError>) -> u32 {
        let breakers = Arc::new(Breakers::new());
        let cfg = BreakerConfig::default();
        let inner = service_fn(move |_req: UpstreamCall| {
            let result = result.clone();
            async move { result }
        });
        let svc = BlameLayer::new(Arc::clone(&breakers), cfg).layer(inner);
        let _ = svc.oneshot(call_to(Some("sleep"), true, Duration::from_secs(5))).await;
        let tool = breakers.tool(&Arc::from("u"), &Arc::from("sleep"), &cfg).expect("a tool breaker");
        tool.snapshot().consecutive_failures
    }

    #[tokio::test]
    async fn only_a_death_that_points_at_the_call_and_ends_it_counts_on_its_tool() {
        let died = |implicated| Err(failed(UpstreamError::ProcessExited { implicated }));
        assert_eq!(failures_after(died(true)).await, 1);
        assert_eq!(failures_after(died(false)).await, 0, "several calls in flight: none is blamed");
        assert_eq!(failures_after(ok()).await, 0, "the retry succeeded: nothing to blame");
        let other = Err(failed(UpstreamError::Io("reset".into())));
        assert_eq!(failures_after(other).await, 0, "other failures count per attempt, below the retries");
    }
}
