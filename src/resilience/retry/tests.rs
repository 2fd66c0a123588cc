use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tower::{Layer, ServiceExt, service_fn};

use super::*;
use crate::call::UpstreamError;
use crate::resilience::testing::{call, failed, ok};

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
        Err::<Answer, _>(failed(UpstreamError::HttpStatus { status: 429, retry_after: Some(Duration::from_secs(60)) }))
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
