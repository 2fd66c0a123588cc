//! Test helpers for the layers: a request over a transport that is never reached (the
//! layers under test sit on a mock service).

use std::sync::Arc;
use std::time::Duration;

use crate::call::{Answer, BoxFuture, Clock, EventSink, GatewayError, Reply, Transport, UpstreamCall, UpstreamError};
use crate::jsonrpc::{Id, Notification};
use crate::mcp::init::InitResult;

/// A transport for layer tests: every operation fails, nothing is sent anywhere.
pub(crate) struct Unreachable;

impl Transport for Unreachable {
    fn send<'a>(&'a self, _call: &'a UpstreamCall) -> BoxFuture<'a, Result<Reply, UpstreamError>> {
        Box::pin(async { Err(UpstreamError::NotRunning("test transport".into())) })
    }
    fn notify(&self, _n: Notification) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(async { Ok(()) })
    }
    fn respond(&self, _e: Option<u16>, _id: Id, _body: Reply) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(async { Ok(()) })
    }
    fn init_result(&self) -> Option<Arc<InitResult>> {
        None
    }
    fn subscribe(&self, _key: u64, _sink: EventSink) {}
    fn unsubscribe(&self, _key: u64) {}
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// A `resources/read` (or, with `tool`, a `tools/call`) with this deadline.
pub(crate) fn call_to(tool: Option<&str>, idempotent: bool, timeout: Duration) -> UpstreamCall {
    let (tx, _rx) = crate::call::events(1);
    let up: Arc<str> = Arc::from("u");
    UpstreamCall {
        upstream: Arc::clone(&up),
        method: Arc::from(if tool.is_some() { "tools/call" } else { "resources/read" }),
        params: None,
        progress_token: None,
        tool: tool.map(Arc::from),
        idempotent,
        clock: Clock::new(timeout),
        events: EventSink::new(up, tx),
        target: Arc::new(Unreachable),
        avoid: Vec::new(),
        endpoint: None,
        attempt_deadline: None,
        headers: Arc::from([]),
        trace: Default::default(),
    }
}

/// A `resources/read` with this deadline.
pub(crate) fn call(idempotent: bool, timeout: Duration) -> UpstreamCall {
    call_to(None, idempotent, timeout)
}

/// An empty successful answer.
pub(crate) fn ok() -> Result<Answer, GatewayError> {
    Ok(Answer::result(crate::jsonrpc::to_raw(&serde_json::json!({}))))
}

/// A transport failure of upstream `u`.
pub(crate) fn failed(source: UpstreamError) -> GatewayError {
    GatewayError::Upstream { upstream: Arc::from("u"), source, endpoint: None }
}
