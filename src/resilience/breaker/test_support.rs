//! What the unit tests of the breaker's modules share: a scripted inner service and small
//! numbers, with a paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::json;
use tower::util::BoxCloneSyncService;
use tower::{Layer, service_fn};

use super::classify::{Outcome, Verdict};
use super::{BreakerLayer, Breakers};
use crate::call::{Answer, GatewayError, UpstreamCall, UpstreamError};
use crate::config::BreakerConfig;
use crate::resilience::test_support::{call_to, failed};

/// Small numbers so that tests read easily.
pub(super) fn cfg() -> BreakerConfig {
    BreakerConfig {
        window: Duration::from_secs(10),
        min_calls: 4,
        failure_rate: 0.5,
        consecutive_failures: 3,
        break_duration: Duration::from_secs(1),
        max_break: Duration::from_secs(4),
        half_open_probes: 2,
        probe_timeout: Duration::from_millis(500),
        slow_call: Duration::from_millis(100),
        slow_call_rate: 0.5,
        hide_open_tools: false,
        shared: false,
    }
}

pub(super) const SUCCESS: Verdict = Verdict { outcome: Outcome::Success, slow: false };
pub(super) const FAILURE: Verdict = Verdict { outcome: Outcome::Failure, slow: false };

/// Asserts that `d` is `base` with ±20% jitter.
pub(super) fn assert_jittered(d: Duration, base: Duration) {
    assert!(d >= base.mul_f64(0.8) && d <= base.mul_f64(1.2), "{d:?} is not {base:?} ±20%");
}

pub(super) fn result() -> Result<Answer, GatewayError> {
    Ok(Answer::parse(Ok(crate::jsonrpc::to_raw(&json!({ "content": [] }))), true))
}

pub(super) fn is_error_result() -> Result<Answer, GatewayError> {
    Ok(Answer::parse(Ok(crate::errors::tool_error("the tool says no")), true))
}

pub(super) fn rpc_error(code: i64) -> Result<Answer, GatewayError> {
    Ok(Answer::parse(Err(crate::jsonrpc::error_object(code, "error", None)), true))
}

pub(super) fn transport_error() -> Result<Answer, GatewayError> {
    Err(failed(UpstreamError::Io("reset".into())))
}

/// A call to upstream `u`, a `tools/call` of `tool` when given.
pub(super) fn call(tool: Option<&str>) -> UpstreamCall {
    call_to(tool, true, Duration::from_secs(30))
}

pub(super) type Stack = BoxCloneSyncService<UpstreamCall, Answer, GatewayError>;

/// The breaker over an inner service that sleeps and answers as `script` says, and a
/// count of the calls that reached the inner service.
pub(super) fn stack<F>(breakers: &Arc<Breakers>, script: F) -> (Stack, Arc<AtomicUsize>)
where
    F: Fn(&UpstreamCall) -> (Duration, Result<Answer, GatewayError>) + Clone + Send + Sync + 'static,
{
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let inner = service_fn(move |req: UpstreamCall| {
        counted.fetch_add(1, Ordering::SeqCst);
        let (delay, result) = script(&req);
        async move {
            tokio::time::sleep(delay).await;
            result
        }
    });
    let svc = BreakerLayer::new(Arc::clone(breakers), cfg()).layer(inner);
    (BoxCloneSyncService::new(svc), calls)
}
