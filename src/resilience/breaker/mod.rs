//! Circuit breakers, per upstream and per tool (DESIGN.md §4).
//!
//! While a breaker is open, calls fail fast with [`GatewayError::CircuitOpen`] without
//! touching the upstream; after a break a few probes go through, and their outcome
//! closes the breaker or opens it again for longer.
//!
//! - [`state`]: the state machine of one breaker ([`Breaker`], [`Permit`]).
//! - [`classify`]: how a finished call counts on the upstream's breaker and the tool's.
//! - [`registry`]: every breaker of the gateway ([`Breakers`]).
//! - this module and [`layer`]: the tower [`Service`] and [`Layer`](tower::Layer).
//!
//! A `tools/call` goes through its upstream's breaker and its tool's. Each failure is
//! counted on the breaker it says something about ([`classify::split`]): transport
//! failures on the upstream's, error answers and timeouts on the tool's. So one broken
//! tool opens its own breaker while the upstream's other tools keep working.
//!
//! An operator may hold any breaker open (isolating a tool or an upstream by hand, with a
//! reason that refused clients are told) or closed, and reset it ([`Breaker::force`]);
//! the admin API does that.
//!
//! Breakers are per replica unless marked `shared`: then [`shared`] publishes their
//! transitions and holds through Redis and repeats those of the other replicas here,
//! off the request path, which still reads local state only.

pub mod classify;
pub mod layer;
pub mod registry;
pub mod shared;
pub mod state;
pub mod transition;

mod admission;
mod window;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::task::{Context, Poll};

use tower::Service;

pub use layer::BreakerLayer;
pub use registry::Breakers;
pub use state::{Breaker, Snapshot};
pub use transition::{BreakerKey, Change, Feed, Hold, Origin, Remote, State};
pub use window::Totals;

use admission::Admission;

use crate::call::{Answer, CallFuture, GatewayError, UpstreamCall};
use crate::config::BreakerConfig;

/// Refuses calls while their upstream's or tool's breaker is open, bounds probes by
/// `probe_timeout`, and counts how every admitted call ends.
#[derive(Clone, Debug)]
pub struct CircuitBreaker<S> {
    inner: S,
    breakers: Arc<Breakers>,
    cfg: BreakerConfig,
}

impl<S> CircuitBreaker<S> {
    /// Leave from the upstream's breaker and, for a `tools/call`, the tool's; the error
    /// names the breaker that refused, and the operator's reason when it is held open.
    fn admit(&self, req: &UpstreamCall) -> Result<Admission, GatewayError> {
        let refused = |breaker: &Breaker, tool: Option<&Arc<str>>, retry_after| GatewayError::CircuitOpen {
            upstream: Arc::clone(&req.upstream),
            tool: tool.cloned(),
            retry_after,
            isolated: breaker.isolation(),
        };
        // One reading of the clock for both breakers and the call's start.
        let now = tokio::time::Instant::now();
        let upstream = self.breakers.upstream(&req.upstream, &self.cfg);
        let upstream = upstream.try_acquire_at(now).map_err(|after| refused(&upstream, None, after))?;
        let tool = match &req.tool {
            Some(tool) => match self.breakers.tool(&req.upstream, tool, &self.cfg) {
                // Refusing here drops the upstream's permit, which frees its probe slot.
                Some(breaker) => {
                    Some(breaker.try_acquire_at(now).map_err(|after| refused(&breaker, Some(tool), after))?)
                }
                None => None,
            },
            None => None,
        };
        Ok(Admission::new(upstream, tool, now, self.cfg.slow_call))
    }
}

impl<S> Service<UpstreamCall> for CircuitBreaker<S>
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
        let admission = match self.admit(&req) {
            Ok(admission) => admission,
            Err(refused) => return Box::pin(std::future::ready(Err(refused))),
        };
        let probe_timeout = admission.probing().then_some(self.cfg.probe_timeout);
        req.trace.breaker = Some(if probe_timeout.is_some() { "half_open" } else { "closed" });
        let upstream = Arc::clone(&req.upstream);
        let target = Arc::clone(&req.target);
        let fut = self.inner.call(req);
        Box::pin(async move {
            let result = match probe_timeout {
                Some(after) => match tokio::time::timeout(after, fut).await {
                    Ok(result) => result,
                    Err(_elapsed) => Err(GatewayError::AttemptTimeout { upstream, after, endpoint: None }),
                },
                None => fut.await,
            };
            // One replica that fails or hangs while another is healthy is that replica's
            // failure, ejected by outlier detection and retried elsewhere: it says nothing
            // about the tool or the upstream as a whole.
            if let Err(e) = &result
                && let Some(endpoint) = e.endpoint()
                && e.class().health.is_endpoint_failure()
                && target.has_spare(endpoint)
            {
                admission.finish_ignored();
                return result;
            }
            admission.finish(&result);
            result
        })
    }
}
