//! One overall deadline per request, covering every attempt and backoff sleep.
//!
//! The deadline lives in the request's [`Clock`](crate::call::Clock), set when the
//! request is made. The attempt layer below ends every attempt at it with
//! [`GatewayError::Timeout`] (dropping the attempt, which makes the link send
//! `notifications/cancelled` upstream), and the retry layer starts no attempt that cannot
//! finish before it, so every layer in between sees the timeout as a result. This layer
//! moves it: for `tools/call`, each progress notification moves the deadline to at least
//! now + `tool_idle`, never past `tool_max` from the start.

use std::sync::Arc;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use crate::call::{Activity, Answer, GatewayError, UpstreamCall};
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
{
    type Response = Answer;
    type Error = GatewayError;
    // The inner call's own future: this layer only changes the request.
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: UpstreamCall) -> Self::Future {
        let activity = Arc::new(Activity::default());
        req.events.set_activity(Arc::clone(&activity));
        if req.tool.is_none() {
            // Nothing extends the deadline: the attempt layer below ends every attempt at
            // it, and the retry layer starts none that cannot finish before it.
            return self.inner.call(req);
        }
        // Progress moves the deadline the layers below wait for; they read it when
        // their timers fire.
        req.clock.extend_on_progress(activity, self.timeouts.tool_idle, self.timeouts.tool_max);
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tower::{Layer, Service, ServiceExt, service_fn};

    use super::*;
    use crate::resilience::attempt::AttemptLayer;
    use crate::resilience::test_support::{call, ok};

    /// The deadline over the attempt layer, as the upstream stack has them.
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
        let svc = DeadlineLayer::default().layer(AttemptLayer::new(None).layer(inner));
        let started = tokio::time::Instant::now();
        let err = svc.oneshot(call(true, Duration::from_secs(2))).await.unwrap_err();
        assert!(matches!(err, GatewayError::Timeout { after, .. } if after == Duration::from_secs(2)));
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert!(dropped.load(std::sync::atomic::Ordering::SeqCst));
    }

    #[tokio::test(start_paused = true)]
    async fn progress_extends_a_tool_call_up_to_the_cap() {
        let timeouts =
            Timeouts { tool_idle: Duration::from_secs(2), tool_max: Duration::from_secs(5), ..Timeouts::default() };
        // A tool that reports progress every second and never answers.
        let inner = service_fn(|req: UpstreamCall| async move {
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let params = crate::jsonrpc::to_raw(&serde_json::json!({"progressToken": 1, "progress": 1}));
                let n = crate::jsonrpc::Notification { method: "notifications/progress".into(), params: Some(params) };
                req.events.send(crate::call::UpstreamEvent::Notification(n));
            }
            #[allow(unreachable_code)]
            ok()
        });
        let svc = DeadlineLayer::new(timeouts).layer(AttemptLayer::new(None).layer(inner));
        let started = tokio::time::Instant::now();
        let req = crate::resilience::test_support::call_to(Some("t"), false, Duration::from_secs(2));
        let err = svc.oneshot(req).await.unwrap_err();
        assert!(matches!(err, GatewayError::Timeout { .. }), "{err:?}");
        assert_eq!(started.elapsed(), Duration::from_secs(5), "kept alive by progress until tool_max");
    }

    /// A tool that reports progress at each of `at` (seconds after it starts), then
    /// answers after `answer` seconds, or never.
    fn reporting(
        at: &'static [u64],
        answer: Option<u64>,
    ) -> impl Service<UpstreamCall, Response = Answer, Error = GatewayError, Future: Send> + Clone {
        service_fn(move |req: UpstreamCall| async move {
            let started = tokio::time::Instant::now();
            for &s in at {
                tokio::time::sleep_until(started + Duration::from_secs(s)).await;
                let params = crate::jsonrpc::to_raw(&serde_json::json!({"progressToken": 1, "progress": s}));
                let n = crate::jsonrpc::Notification { method: "notifications/progress".into(), params: Some(params) };
                req.events.send(crate::call::UpstreamEvent::Notification(n));
            }
            match answer {
                Some(s) => tokio::time::sleep_until(started + Duration::from_secs(s)).await,
                None => std::future::pending().await,
            }
            ok()
        })
    }

    #[tokio::test(start_paused = true)]
    async fn progress_restarts_an_attempt_timeout_and_silence_ends_it() {
        let timeouts =
            Timeouts { tool_idle: Duration::from_secs(60), tool_max: Duration::from_secs(60), ..Timeouts::default() };
        let stack =
            |inner| DeadlineLayer::new(timeouts).layer(AttemptLayer::new(Some(Duration::from_secs(2))).layer(inner));
        // Progress every 1.5 s carries an idempotent attempt of 2 s to its answer at 7 s.
        let svc = stack(reporting(&[1, 3, 4, 6], Some(7)));
        let started = tokio::time::Instant::now();
        let req = crate::resilience::test_support::call_to(Some("t"), true, Duration::from_secs(30));
        svc.oneshot(req).await.expect("kept alive by progress");
        assert_eq!(started.elapsed(), Duration::from_secs(7));

        // Progress at 1 s and 2 s, then silence: the attempt ends 2 s after the last.
        let svc = stack(reporting(&[1, 2], None));
        let started = tokio::time::Instant::now();
        let req = crate::resilience::test_support::call_to(Some("t"), true, Duration::from_secs(30));
        let err = svc.oneshot(req).await.unwrap_err();
        assert!(matches!(err, GatewayError::AttemptTimeout { .. }), "{err:?}");
        assert_eq!(started.elapsed(), Duration::from_secs(4));
    }

    struct DropFlag(Arc<std::sync::atomic::AtomicBool>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
}
