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
mod test_support;


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

#[cfg(test)]
mod tests {
    //! The layer over a scripted inner service.

    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use tokio::time::{Instant, advance, timeout};
    use tower::{Service, ServiceExt};

    use crate::resilience::breaker::test_support::{Stack, assert_jittered, call, cfg, is_error_result, result, rpc_error, stack, transport_error};
    use crate::call::{Answer, GatewayError, Reply, UpstreamCall};
    use crate::resilience::breaker::{BreakerKey, Breakers, State};

    const NOW: Duration = Duration::ZERO;
    const FOREVER: Duration = Duration::from_secs(3600);

    async fn send(svc: &Stack, tool: Option<&str>) -> Result<Reply, GatewayError> {
        svc.clone().oneshot(call(tool)).await.map(Answer::into_reply)
    }

    fn state(breakers: &Breakers, tool: Option<&str>) -> State {
        let key = BreakerKey { upstream: Arc::from("u"), tool: tool.map(Arc::from) };
        breakers.states().into_iter().find(|(k, _)| *k == key).map(|(_, s)| s).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn fails_fast_without_calling_the_upstream_while_open() {
        let breakers = Arc::new(Breakers::new());
        let (svc, calls) = stack(&breakers, |_| (NOW, transport_error()));
        for _ in 0..3 {
            assert!(matches!(send(&svc, None).await, Err(GatewayError::Upstream { .. })));
        }
        for _ in 0..5 {
            let err = send(&svc, None).await.unwrap_err();
            let GatewayError::CircuitOpen { upstream, tool: None, retry_after, isolated: None } = err else {
                panic!("{err:?}")
            };
            assert_eq!(&*upstream, "u");
            assert_jittered(retry_after, Duration::from_secs(1));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3, "refused calls never reach the upstream");
        assert!(breakers.is_open("u", None));
        assert!(breakers.is_open("u", Some("any")), "an open upstream refuses every tool");
    }

    #[tokio::test(start_paused = true)]
    async fn is_error_results_and_client_faults_never_open() {
        let breakers = Arc::new(Breakers::new());
        let (svc, calls) = stack(&breakers, |req: &UpstreamCall| match req.tool.as_deref() {
            Some("a") => (NOW, is_error_result()),
            Some("b") => (NOW, rpc_error(-32602)),
            _ => (NOW, rpc_error(-32601)),
        });
        for _ in 0..20 {
            for tool in [Some("a"), Some("b"), None] {
                let reply = send(&svc, tool).await.unwrap();
                assert_eq!(reply.is_ok(), tool == Some("a"), "only the tool result is a JSON-RPC result");
            }
        }
        assert_eq!(calls.load(Ordering::SeqCst), 60);
        assert!(breakers.states().iter().all(|(_, s)| *s == State::Closed), "{:?}", breakers.states());
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_calls_are_ignored_but_timeouts_count() {
        let breakers = Arc::new(Breakers::new());
        let (svc, _) = stack(&breakers, |_| (FOREVER, result()));
        // A client that cancels drops the call: that says nothing about the upstream.
        for _ in 0..10 {
            let mut fut = svc.clone().oneshot(call(None));
            assert!(timeout(Duration::from_secs(1), &mut fut).await.is_err());
            drop(fut);
        }
        assert_eq!(state(&breakers, None), State::Closed);
        // A timeout is an answer of the layer below, and counts.
        let timed_out = Err(GatewayError::Timeout { upstream: Arc::from("u"), after: Duration::from_secs(1) });
        let (svc, _) = stack(&breakers, move |_| (NOW, timed_out.clone()));
        for _ in 0..3 {
            send(&svc, None).await.unwrap_err();
        }
        assert_eq!(state(&breakers, None), State::Open);
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_tool_leaves_the_other_tools_flowing() {
        let breakers = Arc::new(Breakers::new());
        let (svc, calls) = stack(&breakers, |req: &UpstreamCall| match req.tool.as_deref() {
            Some("broken") => (NOW, rpc_error(-32603)),
            _ => (NOW, result()),
        });
        for _ in 0..3 {
            assert!(send(&svc, Some("broken")).await.unwrap().is_err());
        }
        let err = send(&svc, Some("broken")).await.unwrap_err();
        assert!(matches!(err, GatewayError::CircuitOpen { tool: Some(t), .. } if &*t == "broken"));
        for _ in 0..10 {
            send(&svc, Some("fine")).await.unwrap().unwrap();
            send(&svc, None).await.unwrap().unwrap();
        }
        assert_eq!(calls.load(Ordering::SeqCst), 23);
        assert_eq!(state(&breakers, None), State::Closed);
        assert!(breakers.is_open("u", Some("broken")));
        assert!(!breakers.is_open("u", Some("fine")));
    }

    #[tokio::test(start_paused = true)]
    async fn transport_failures_of_tool_calls_open_the_upstream() {
        let breakers = Arc::new(Breakers::new());
        let (svc, _) = stack(&breakers, |_| (NOW, transport_error()));
        for tool in ["a", "b", "c"] {
            send(&svc, Some(tool)).await.unwrap_err();
        }
        let err = send(&svc, Some("d")).await.unwrap_err();
        assert!(matches!(err, GatewayError::CircuitOpen { tool: None, .. }), "{err:?}");
        assert_eq!(state(&breakers, Some("a")), State::Closed, "counted once, on the upstream");
    }

    #[tokio::test(start_paused = true)]
    async fn half_open_lets_through_the_configured_probes_then_closes() {
        let breakers = Arc::new(Breakers::new());
        let healthy = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&healthy);
        let (svc, calls) = stack(&breakers, move |_| match flag.load(Ordering::SeqCst) {
            true => (Duration::from_millis(200), result()),
            false => (NOW, transport_error()),
        });
        for _ in 0..3 {
            send(&svc, None).await.unwrap_err();
        }
        advance(Duration::from_millis(1200)).await;
        healthy.store(true, Ordering::SeqCst);
        let probes = [send(&svc, None), send(&svc, None), send(&svc, None)];
        let [first, second, third] = futures::future::join_all(probes).await.try_into().unwrap();
        first.unwrap().unwrap();
        second.unwrap().unwrap();
        assert!(matches!(third, Err(GatewayError::CircuitOpen { .. })), "only two probes at once");
        assert_eq!(calls.load(Ordering::SeqCst), 5);
        assert_eq!(state(&breakers, None), State::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_probe_is_bounded_by_probe_timeout_and_reopens_for_longer() {
        let breakers = Arc::new(Breakers::new());
        let healthy = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&healthy);
        let (mut svc, _) = stack(&breakers, move |_| match flag.load(Ordering::SeqCst) {
            true => (FOREVER, result()),
            false => (NOW, transport_error()),
        });
        for _ in 0..3 {
            send(&svc, None).await.unwrap_err();
        }
        advance(Duration::from_millis(1200)).await;
        healthy.store(true, Ordering::SeqCst);
        let started = Instant::now();
        let err = svc.ready().await.unwrap().call(call(None)).await.map(Answer::into_reply).unwrap_err();
        assert!(matches!(err, GatewayError::AttemptTimeout { after, .. } if after == cfg().probe_timeout), "{err:?}");
        assert_eq!(started.elapsed(), cfg().probe_timeout);
        let Err(GatewayError::CircuitOpen { retry_after, .. }) = send(&svc, None).await else { panic!("not open") };
        assert_jittered(retry_after, Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn beyond_the_tool_limit_only_the_upstream_breaker_applies() {
        let breakers = Arc::new(Breakers::new().with_tool_limit(1));
        let (svc, _) = stack(&breakers, |_| (NOW, rpc_error(-32603)));
        send(&svc, Some("first")).await.unwrap().unwrap_err();
        for _ in 0..2 {
            send(&svc, Some("second")).await.unwrap().unwrap_err();
        }
        let keys: Vec<_> = breakers.states().into_iter().map(|(k, _)| k.to_string()).collect();
        assert_eq!(keys, ["u", "u/first"]);
        send(&svc, Some("third")).await.unwrap().unwrap_err();
        assert_eq!(state(&breakers, None), State::Open, "untracked tools count on the upstream");
    }
}
