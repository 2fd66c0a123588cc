use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tower::{Layer, ServiceExt, service_fn};

use super::*;
use crate::upstream::service::CallCtx;
use crate::upstream::{Call, EventSink, Link, UpstreamError};

fn call(idempotent: bool, timeout: Duration) -> UpstreamCall {
    let (tx, _rx) = tokio::sync::mpsc::channel(1);
    let up: Arc<str> = Arc::from("u");
    UpstreamCall {
        upstream: Arc::clone(&up),
        link: Link::Stdio(crate::upstream::stdio::StdioLink::detached_for_tests()),
        call: Call {
            method: "resources/read".into(),
            params: None,
            progress_token: None,
            related: EventSink::new(up, tx),
        },
        timeout,
        tool: None,
        idempotent,
        ctx: CallCtx::new(timeout),
    }
}

fn failing_then_ok(
    failures: u32,
    error: UpstreamError,
) -> (Arc<AtomicU32>, impl Fn() -> Result<Reply, GatewayError> + Clone) {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let f = move || {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        if n < failures {
            Err(GatewayError::Upstream { upstream: Arc::from("u"), source: error.clone() })
        } else {
            Ok(Ok(crate::jsonrpc::to_raw(&serde_json::json!({}))))
        }
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
    assert!(matches!(result, Ok(Ok(_))));
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
        Err::<Reply, _>(GatewayError::Upstream {
            upstream: Arc::from("u"),
            source: UpstreamError::HttpStatus { status: 429, retry_after: Some(Duration::from_secs(60)) },
        })
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
    let cfg = RetryConfig { max_attempts: 3, budget_percent: 20.0, budget_min_per_sec: 0, ..RetryConfig::default() };
    let layer = RetryLayer::new(cfg);
    let svc = layer.layer(service_fn(move |_req: UpstreamCall| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move {
            Err::<Reply, _>(GatewayError::Upstream {
                upstream: Arc::from("u"),
                source: UpstreamError::HttpStatus { status: 503, retry_after: None },
            })
        }
    }));
    let requests = 100;
    for _ in 0..requests {
        let _ = svc.clone().oneshot(call(true, Duration::from_secs(30))).await;
    }
    let attempts = calls.load(Ordering::SeqCst);
    assert!(attempts <= requests * 12 / 10 + 1, "{attempts} attempts for {requests} requests");
    assert!(attempts > requests, "some retries happen");
}
