//! The innermost resilience layer: one attempt, on one endpoint, within its time.
//!
//! It picks the endpoint of a replicated upstream (avoiding those earlier attempts
//! tried), bounds the attempt by the request's deadline and, for idempotent requests, by
//! the attempt timeout (`timeouts.attempt`, restarted by progress), and records how the
//! attempt ended on its endpoint and how long it took
//! (`seawall_upstream_attempt_duration_seconds`). A timeout is an `Err` here, so the breaker and retry
//! layers above see it as a result like any other: [`GatewayError::Timeout`] when the
//! request's deadline passed, [`GatewayError::AttemptTimeout`] when only this attempt's.
//!
//! Without `timeouts.attempt`, an idempotent attempt on a replicated upstream still ends
//! after a third of the request's deadline (at least [`DERIVED_FLOOR`]) while a replica
//! the request has not tried remains: a hung replica then costs a third of the deadline
//! and the retry on another one fits in the rest, which gets the whole remaining time
//! (no replica left to go to). A single server gets no such cut: a retry would only go
//! back to it.
//!
//! With tracing on, each attempt runs in a span of its own (so retries are siblings
//! under the request's span) and carries that span's trace context upstream; a process
//! gets it in `params._meta`, replacing the client's. With tracing off, the client's own
//! context goes on as it came, and a process, which has no headers, gets a context the
//! client sent only in its HTTP headers in `_meta`.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;
use tower::{Layer, Service};
use tracing::Instrument as _;

use crate::call::{Answer, CallFuture, GatewayError, UpstreamCall};
use crate::mcp::trace_context;
use crate::telemetry::metrics;
use crate::telemetry::trace::spans;

/// The least attempt timeout derived from a deadline.
pub const DERIVED_FLOOR: Duration = Duration::from_secs(1);

/// The share of the request's deadline a derived attempt timeout allows (one in this).
const DERIVED_SHARE: u32 = 3;

/// The attempt timeout of `req` on `endpoint` when none is configured: a share of its
/// deadline while another replica the request has not tried could take the retry.
fn derived_timeout(req: &UpstreamCall, endpoint: Option<u16>) -> Option<Duration> {
    let endpoint = endpoint?;
    req.target.has_untried(endpoint, &req.avoid).then(|| (req.clock.allowed() / DERIVED_SHARE).max(DERIVED_FLOOR))
}

/// Applies [`Attempt`] with one upstream's attempt timeout.
#[derive(Clone, Copy, Debug, Default)]
pub struct AttemptLayer {
    timeout: Option<Duration>,
    traced: bool,
}

impl AttemptLayer {
    /// Attempts of idempotent requests end after `timeout` without progress (none: after
    /// a derived one on replicated upstreams, see the module's docs).
    pub fn new(timeout: Option<Duration>) -> AttemptLayer {
        AttemptLayer { timeout, traced: false }
    }

    /// The same layer, making a span of each attempt when `traced` (tracing is on).
    pub fn traced(self, traced: bool) -> AttemptLayer {
        AttemptLayer { traced, ..self }
    }
}

impl<S> Layer<S> for AttemptLayer {
    type Service = Attempt<S>;
    fn layer(&self, inner: S) -> Attempt<S> {
        Attempt { inner, timeout: self.timeout, traced: self.traced }
    }
}

/// Bounds one attempt in time and accounts for it on its endpoint.
#[derive(Clone, Debug)]
pub struct Attempt<S> {
    inner: S,
    timeout: Option<Duration>,
    traced: bool,
}

/// Sets the trace context `req` carries upstream: the attempt span's when there is one
/// (written into `_meta` for a process, and wherever the client had put its own), else
/// the client's, written into `_meta` only for a process that would otherwise not get it.
fn propagate(req: &mut UpstreamCall, span: Option<&tracing::Span>) {
    let process = req.target.is_process();
    let (context, into_meta) = match span.and_then(spans::context_of) {
        Some(own) => {
            let own = Arc::new(own);
            req.trace.context = Some(Arc::clone(&own));
            (Some(own), process || req.trace.in_meta)
        }
        None => (req.trace.context.clone(), process && !req.trace.in_meta),
    };
    if into_meta
        && let Some(context) = context
        && let Some(params) = trace_context::with_meta(req.params.as_deref(), &context)
    {
        req.params = Some(Arc::from(params));
    }
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
            req.events.set_endpoint(i);
        }
        // A non-idempotent call cannot be tried again: cutting it short would only lose
        // its answer.
        let timeout = self.timeout.or_else(|| derived_timeout(&req, endpoint)).filter(|_| req.idempotent);
        let mut attempt_deadline = timeout.map(|t| Instant::now() + t);
        req.attempt_deadline = Some(attempt_deadline.map_or(req.clock.deadline(), |a| a.min(req.clock.deadline())));
        // Progress only matters when it restarts an attempt timeout: then an attempt
        // ends `timeout` after it started or after the last progress, whichever is later.
        let activity = timeout.and_then(|_| req.events.activity().cloned());
        let span = self.traced.then(|| spans::attempt(&req));
        if span.is_some() || req.trace.context.is_some() {
            propagate(&mut req, span.as_ref());
        }
        let (clock, target, upstream) = (Arc::clone(&req.clock), Arc::clone(&req.target), Arc::clone(&req.upstream));
        let timer = metrics::AttemptTimer::start(&upstream, &req.method);
        let fut = self.inner.call(req);
        let recorded = span.clone();
        let attempt = async move {
            tokio::pin!(fut);
            let result = loop {
                if let (Some(t), Some(at), Some(progressed)) =
                    (timeout, attempt_deadline, activity.as_ref().and_then(|a| a.last_progress()))
                {
                    attempt_deadline = Some(at.max(progressed + t));
                }
                let until = attempt_deadline.map_or(clock.deadline(), |a| a.min(clock.deadline()));
                tokio::select! {
                    biased;
                    result = &mut fut => break result,
                    _ = tokio::time::sleep_until(until) => {
                        if clock.expired() {
                            break Err(GatewayError::Timeout { upstream, after: clock.allowed() });
                        }
                        let progressed = activity.as_ref().and_then(|a| a.last_progress());
                        if let (Some(after), Some(at)) = (timeout, attempt_deadline)
                            && Instant::now() >= progressed.map_or(at, |p| at.max(p + after))
                        {
                            break Err(GatewayError::AttemptTimeout { upstream, after, endpoint });
                        }
                        // A deadline moved (progress): keep waiting.
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
            if let Some(span) = &recorded {
                spans::record_attempt(span, &result);
            }
            result
        };
        match span {
            Some(span) => Box::pin(attempt.instrument(span)),
            None => Box::pin(attempt),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::resilience::test_support::{call, ok};

    /// Two replicas: attempts go to the one not tried yet.
    struct TwoReplicas;

    impl crate::call::Transport for TwoReplicas {
        fn send<'a>(
            &'a self,
            call: &'a UpstreamCall,
        ) -> crate::call::BoxFuture<'a, Result<crate::call::Reply, crate::call::UpstreamError>> {
            crate::resilience::test_support::Unreachable.send(call)
        }
        fn pick(&self, avoid: &[u16]) -> Option<u16> {
            Some(u16::from(avoid.contains(&0)))
        }
        fn has_untried(&self, endpoint: u16, tried: &[u16]) -> bool {
            (0..2).any(|j| j != endpoint && !tried.contains(&j))
        }
        fn notify(
            &self,
            _n: crate::jsonrpc::Notification,
        ) -> crate::call::BoxFuture<'_, Result<(), crate::call::UpstreamError>> {
            Box::pin(async { Ok(()) })
        }
        fn respond(
            &self,
            _e: Option<u16>,
            _id: crate::jsonrpc::Id,
            _body: crate::call::Reply,
        ) -> crate::call::BoxFuture<'_, Result<(), crate::call::UpstreamError>> {
            Box::pin(async { Ok(()) })
        }
        fn init_result(&self) -> Option<Arc<crate::mcp::init::InitResult>> {
            None
        }
        fn subscribe(&self, _key: u64, _sink: crate::call::EventSink) {}
        fn unsubscribe(&self, _key: u64) {}
        fn close(&self) -> crate::call::BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }

    #[tokio::test(start_paused = true)]
    async fn without_an_attempt_timeout_a_replica_left_untried_bounds_an_idempotent_attempt() {
        let hung = service_fn(|_req: UpstreamCall| async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            ok()
        });
        let svc = AttemptLayer::new(None).layer(hung);
        let on_replicas = |idempotent, avoid: Vec<u16>| {
            let mut req = call(idempotent, Duration::from_secs(9));
            req.target = Arc::new(TwoReplicas);
            req.avoid = avoid;
            req
        };
        let started = Instant::now();
        let err = svc.clone().oneshot(on_replicas(true, vec![])).await.unwrap_err();
        assert!(matches!(err, GatewayError::AttemptTimeout { endpoint: Some(0), .. }), "{err:?}");
        assert_eq!(started.elapsed(), Duration::from_secs(3), "a third of the deadline");
        // The last replica left gets the whole deadline; so does a call that is not
        // idempotent; and a single server (no endpoints) too.
        for case in 0..3 {
            let req = match case {
                0 => on_replicas(true, vec![0]),
                1 => on_replicas(false, vec![]),
                _ => call(true, Duration::from_secs(9)),
            };
            let started = Instant::now();
            let err = svc.clone().oneshot(req).await.unwrap_err();
            assert!(matches!(err, GatewayError::Timeout { .. }), "{err:?}");
            assert_eq!(started.elapsed(), Duration::from_secs(9));
        }
    }

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
