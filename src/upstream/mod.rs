//! Upstream transports: how seawall talks to the MCP servers behind it.
//!
//! Each link implements [`crate::call::Transport`]: a Streamable HTTP session
//! (`http::HttpLink`), sessions with several replicas (`pool::PoolLink`), an HTTP+SSE
//! session (`sse_legacy::SseLink`), or a supervised child process (`stdio::StdioLink`). Links know nothing of policies; they
//! send a request with a fresh id, deliver what the upstream says about it, and report
//! failures typed by whether the upstream may have seen the request. Dropping a call's
//! future cancels it upstream.

mod cancel;
pub(crate) mod client;
pub(crate) mod failure;
pub(crate) mod http;
pub(crate) mod pool;
pub(crate) mod registry;
pub(crate) mod settings;
pub(crate) mod sse_legacy;
pub(crate) mod stdio;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;

use crate::call::{EventSink, UpstreamCall, UpstreamEvent};
use crate::mcp::trace_context::{TRACEPARENT, TRACESTATE};
use crate::mcp::{meta, method};

/// The `traceparent` and `tracestate` headers of a call's trace context, for an HTTP
/// upstream (none when it has none).
pub(crate) fn trace_headers(call: &UpstreamCall) -> Vec<(String, String)> {
    let Some(context) = &call.trace.context else { return Vec::new() };
    let mut headers = vec![(TRACEPARENT.to_owned(), context.traceparent())];
    if let Some(state) = context.state() {
        headers.push((TRACESTATE.to_owned(), state.to_owned()));
    }
    headers
}

/// Appends `extra` (a call's own fields, as text) to `headers`; one that is not a valid
/// HTTP field is left out, and logged.
pub(crate) fn push_headers(
    headers: &mut Vec<(::http::HeaderName, ::http::HeaderValue)>,
    extra: &[(String, String)],
    upstream: &str,
) {
    for (name, value) in extra {
        match (::http::HeaderName::try_from(name.as_str()), ::http::HeaderValue::try_from(value.as_str())) {
            (Ok(name), Ok(value)) => headers.push((name, value)),
            _ => tracing::debug!(upstream = %upstream, header = %name, "header not sent: not a valid HTTP header"),
        }
    }
}

/// State every link has: who hears unrelated events, and where progress goes.
#[derive(Default)]
pub(crate) struct LinkShared {
    /// Subscribers to events not tied to a call.
    pub fanout: Fanout,
    /// Calls waiting for progress notifications, by the upstream-side token.
    pub progress: Arc<ProgressRoutes>,
}

impl LinkShared {
    /// Delivers an event that arrived outside any call's stream (or that may belong to
    /// a call through its progress token).
    pub(crate) fn deliver_unrelated(&self, event: UpstreamEvent) {
        if let Some(sink) = self.progress.route(&event) {
            sink.send(event);
            return;
        }
        self.fanout.broadcast(event);
    }

    /// Delivers an event that arrived on a call's own stream.
    pub(crate) fn deliver_related(&self, related: &EventSink, event: UpstreamEvent) {
        match self.progress.route(&event) {
            Some(sink) => sink.send(event),
            None => related.send(event),
        }
    }
}

/// Subscribers to a link's unrelated events, keyed by client session.
#[derive(Default)]
pub(crate) struct Fanout {
    subs: Mutex<HashMap<u64, EventSink>>,
}

impl Fanout {
    /// Adds a subscriber.
    pub(crate) fn subscribe(&self, key: u64, sink: EventSink) {
        self.subs.lock().insert(key, sink);
    }

    /// Removes a subscriber.
    pub(crate) fn unsubscribe(&self, key: u64) {
        self.subs.lock().remove(&key);
    }

    /// Sends an event to every subscriber.
    pub(crate) fn broadcast(&self, event: UpstreamEvent) {
        let subs: Vec<EventSink> = self.subs.lock().values().cloned().collect();
        for sink in subs {
            sink.send(event.clone());
        }
    }
}

/// Progress tokens of in-flight calls → the call's sink.
#[derive(Default)]
pub(crate) struct ProgressRoutes {
    routes: Mutex<HashMap<String, EventSink>>,
}

impl ProgressRoutes {
    /// Registers a call's token; the returned guard removes it.
    pub(crate) fn register(self: &Arc<Self>, token: &Value, sink: EventSink) -> ProgressGuard {
        let key = meta::token_key(token);
        self.routes.lock().insert(key.clone(), sink);
        ProgressGuard { routes: Arc::clone(self), key }
    }

    fn route(&self, event: &UpstreamEvent) -> Option<EventSink> {
        let UpstreamEvent::Notification(n) = event else {
            return None;
        };
        if n.method != method::PROGRESS {
            return None;
        }
        let p: meta::ProgressParams = crate::jsonrpc::view(n.params.as_deref())?;
        self.routes.lock().get(&meta::token_key(&p.progress_token)).cloned()
    }
}

/// Removes a progress route when the call ends.
pub(crate) struct ProgressGuard {
    routes: Arc<ProgressRoutes>,
    key: String,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        self.routes.routes.lock().remove(&self.key);
    }
}

/// The static headers of an HTTP upstream (`headers:`), as its requests carry them.
pub(crate) fn header_map(
    headers: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<::http::header::HeaderMap> {
    let mut map = ::http::header::HeaderMap::new();
    for (k, v) in headers {
        map.insert(::http::header::HeaderName::from_bytes(k.as_bytes())?, ::http::header::HeaderValue::from_str(v)?);
    }
    Ok(map)
}
