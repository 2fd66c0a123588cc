//! Circuit breakers, per upstream and per tool (DESIGN.md §4).
//!
//! While a breaker is open, calls fail fast with [`GatewayError::CircuitOpen`] without
//! touching the upstream; after a break a few probes go through, and their outcome
//! closes the breaker or opens it again for longer.
//!
//! - [`state`]: the state machine of one breaker ([`Breaker`], [`Permit`]).
//! - [`classify`]: how a finished call counts on the upstream's breaker and the tool's.
//! - [`blame`]: a process death counted on the tool's breaker once the call as a whole
//!   failed with it (above the retries, where that is known).
//! - [`registry`]: every breaker of the gateway ([`Breakers`]).
//! - this module and [`layer`]: the tower [`Service`] and [`Layer`](tower::Layer).
//!
//! A `tools/call` goes through its upstream's breaker and its tool's. Each failure is
//! counted on the breaker it says something about ([`classify::split`]): transport
//! failures on the upstream's, error answers and timeouts on the tool's. So one broken
//! tool opens its own breaker while the upstream's other tools keep working. A process
//! death counts on a tool only when the evidence points at it and no retry succeeded
//! ([`blame`]).
//!
//! An operator may hold any breaker open (isolating a tool or an upstream by hand, with a
//! reason that refused clients are told) or closed, and reset it ([`Breaker::force`]);
//! the admin API does that.
//!
//! Breakers are per replica unless marked `shared`: then [`shared`] publishes their
//! transitions and holds through Redis and repeats those of the other replicas here,
//! off the request path, which still reads local state only.

pub mod blame;
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

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::Either;
use tower::Service;

pub use blame::BlameLayer;
pub use layer::BreakerLayer;
pub use registry::Breakers;
pub use state::{Breaker, Snapshot};
pub use transition::{BreakerKey, Hold, State};
pub use window::Totals;

use admission::Admission;

use crate::call::{Answer, GatewayError, Link, UpstreamCall};
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
    type Future = Either<std::future::Ready<Result<Answer, GatewayError>>, Admitted<S::Future>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: UpstreamCall) -> Self::Future {
        let admission = match self.admit(&req) {
            Ok(admission) => admission,
            Err(refused) => return Either::Left(std::future::ready(Err(refused))),
        };
        let probe = admission.probing().then(|| {
            let after = self.cfg.probe_timeout;
            (Box::pin(tokio::time::sleep(after)), after)
        });
        req.trace.breaker = Some(if probe.is_some() { "half_open" } else { "closed" });
        let (upstream, target) = (Arc::clone(&req.upstream), Arc::clone(&req.target));
        Either::Right(Admitted { inner: self.inner.call(req), probe, upstream, ends: Some(Ends { admission, target }) })
    }
}

pin_project_lite::pin_project! {
    /// A call the breakers admitted: its attempt, cut short at the probe timeout when it
    /// is a probe, and counted on the breakers once it ends. Dropped unfinished (the
    /// client went away), it counts on none.
    pub(crate) struct Admitted<F> {
        #[pin]
        inner: F,
        // Boxed: only a probe has one, and the usual call's future stays small.
        probe: Option<(Pin<Box<tokio::time::Sleep>>, Duration)>,
        upstream: Arc<str>,
        ends: Option<Ends>,
    }
}

/// What [`Admitted`] needs when its call ends.
struct Ends {
    admission: Admission,
    target: Link,
}

impl<F> Future for Admitted<F>
where
    F: Future<Output = Result<Answer, GatewayError>>,
{
    type Output = Result<Answer, GatewayError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let result = match this.inner.poll(cx) {
            Poll::Ready(result) => result,
            Poll::Pending => {
                let Some((sleep, after)) = this.probe.as_mut() else { return Poll::Pending };
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                Err(GatewayError::AttemptTimeout { upstream: Arc::clone(this.upstream), after: *after, endpoint: None })
            }
        };
        if let Some(Ends { admission, target }) = this.ends.take() {
            // One replica that fails or hangs while another is healthy is that replica's
            // failure, ejected by outlier detection and retried elsewhere: it says nothing
            // about the tool or the upstream as a whole.
            match &result {
                Err(e)
                    if e.endpoint().is_some_and(|endpoint| {
                        e.class().health.is_endpoint_failure() && target.has_spare(endpoint)
                    }) =>
                {
                    admission.finish_ignored()
                }
                _ => admission.finish(&result),
            }
        }
        Poll::Ready(result)
    }
}
