//! The layer over a scripted inner service.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::{Instant, advance, timeout};
use tower::{Service, ServiceExt};

use super::{Stack, assert_jittered, call, cfg, is_error_result, result, rpc_error, stack, transport_error};
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
