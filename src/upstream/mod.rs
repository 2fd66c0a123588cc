//! Upstream transports: how seawall talks to the MCP servers behind it.
//!
//! A [`Link`] is one MCP client session with one upstream server: a Streamable HTTP
//! session ([`http::HttpLink`]) or a supervised child process ([`stdio::StdioLink`]).
//! Links know nothing of policies; they send a request with a fresh id, deliver what the
//! upstream says about it, and report failures typed by whether the upstream may have
//! seen the request ([`UpstreamError`]). Dropping a call's future cancels it upstream.

pub mod error;
pub mod http;
pub mod init;
pub mod pool;
pub mod registry;
pub mod service;
pub mod settings;
pub mod stdio;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

pub use error::UpstreamError;
pub use init::{InitParams, InitResult};

use crate::jsonrpc::{Id, Notification, Request};
use crate::mcp::{meta, method};

/// Something an upstream says that is not the answer to a call.
#[derive(Debug, Clone)]
pub enum UpstreamEvent {
    /// A notification (progress, logging, list_changed, resources/updated, ...).
    Notification(Notification),
    /// A server-initiated request (sampling, elicitation, roots/list, ...); answer it
    /// with [`Link::respond`] on the link it came from.
    Request(Request),
    /// The upstream chose to answer this call with an SSE stream; a transparent gateway
    /// answers its client the same way.
    Streaming,
}

/// An upstream event tagged with the upstream it came from (so that a session knows
/// which link to answer a server-initiated request on).
#[derive(Debug, Clone)]
pub struct Tagged {
    /// The upstream's name.
    pub upstream: Arc<str>,
    /// Which of the upstream's endpoints said it (for upstreams with several).
    pub endpoint: Option<u16>,
    /// What it said.
    pub event: UpstreamEvent,
}

/// Where upstream events go: a channel, the name of the upstream sending into it, and
/// optionally an [`Activity`] that counts them.
#[derive(Debug, Clone)]
pub struct EventSink {
    upstream: Arc<str>,
    endpoint: Option<u16>,
    tx: mpsc::Sender<Tagged>,
    activity: Option<Arc<Activity>>,
}

impl EventSink {
    /// A sink that tags events with `upstream`.
    pub fn new(upstream: Arc<str>, tx: mpsc::Sender<Tagged>) -> EventSink {
        EventSink { upstream, endpoint: None, tx, activity: None }
    }

    /// The same sink, tagging events with the endpoint they come from.
    pub fn with_endpoint(mut self, endpoint: u16) -> EventSink {
        self.endpoint = Some(endpoint);
        self
    }

    /// The same sink, also counting its events in `activity`.
    pub fn with_activity(mut self, activity: Arc<Activity>) -> EventSink {
        self.activity = Some(activity);
        self
    }

    /// The activity counter, if any.
    pub fn activity(&self) -> Option<&Arc<Activity>> {
        self.activity.as_ref()
    }
}

/// Counts what an upstream says about one call, so the deadline can be extended on
/// progress and the retry layer knows whether anything reached the client.
#[derive(Debug, Default)]
pub struct Activity {
    relayed: AtomicU64,
    progress: tokio::sync::Notify,
}

impl Activity {
    /// Records one event.
    pub fn record(&self, event: &UpstreamEvent) {
        match event {
            UpstreamEvent::Notification(n) => {
                self.relayed.fetch_add(1, Ordering::Relaxed);
                if n.method == method::PROGRESS {
                    self.progress.notify_one();
                }
            }
            UpstreamEvent::Request(_) => {
                self.relayed.fetch_add(1, Ordering::Relaxed);
            }
            UpstreamEvent::Streaming => {}
        }
    }

    /// Messages relayed towards the client so far.
    pub fn relayed(&self) -> u64 {
        self.relayed.load(Ordering::Relaxed)
    }

    /// Resolves at the next progress notification (or at once if one arrived since the
    /// last wait).
    pub async fn next_progress(&self) {
        self.progress.notified().await
    }
}

/// Capacity of event channels; a peer that floods beyond it loses notifications, not memory.
pub const EVENT_BUFFER: usize = 1024;

/// The answer to a call: a raw result, or a raw JSON-RPC error object from the upstream.
pub type Reply = Result<Box<RawValue>, Box<RawValue>>;

/// One request to send upstream.
#[derive(Debug, Clone)]
pub struct Call {
    /// The method.
    pub method: String,
    /// The parameters exactly as they go upstream.
    pub params: Option<Box<RawValue>>,
    /// The progress token carried in `params._meta` (upstream side), if any.
    pub progress_token: Option<Value>,
    /// Where related notifications and server requests go.
    pub related: EventSink,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh upstream request id; ids are never reused in the life of the process.
pub fn fresh_id() -> Id {
    Id::number(NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

/// A connection to one upstream server.
#[derive(Clone)]
pub enum Link {
    /// Streamable HTTP session.
    Http(Arc<http::HttpLink>),
    /// Supervised child process speaking stdio.
    Stdio(Arc<stdio::StdioLink>),
    /// Streamable HTTP sessions with several replicas of one server.
    Pool(Arc<pool::PoolLink>),
}

impl Link {
    /// Sends a request and waits for its answer; related messages go to `call.related`.
    /// Dropping the returned future cancels the request upstream.
    pub async fn call(&self, call: Call) -> Result<Reply, UpstreamError> {
        match self {
            Link::Http(l) => l.call(call).await,
            Link::Stdio(l) => l.call(call).await,
            Link::Pool(l) => l.call(call, None).await,
        }
    }

    /// Like [`Link::call`], recording the endpoints tried in `tried` so that a retry goes
    /// to another one.
    pub async fn call_avoiding(&self, call: Call, tried: &std::sync::Mutex<Vec<u16>>) -> Result<Reply, UpstreamError> {
        match self {
            Link::Pool(l) => l.call(call, Some(tried)).await,
            other => other.call(call).await,
        }
    }

    /// Sends a notification.
    pub async fn notify(&self, n: Notification) -> Result<(), UpstreamError> {
        match self {
            Link::Http(l) => l.notify(n).await,
            Link::Stdio(l) => l.notify(n).await,
            Link::Pool(l) => l.notify(n).await,
        }
    }

    /// Answers a server-initiated request (made by `endpoint`, for pooled links).
    pub async fn respond(&self, endpoint: Option<u16>, id: Id, body: Reply) -> Result<(), UpstreamError> {
        match self {
            Link::Http(l) => l.respond(id, body).await,
            Link::Stdio(l) => l.respond(id, body).await,
            Link::Pool(l) => l.respond(endpoint, id, body).await,
        }
    }

    /// The upstream's answer to initialize, once the handshake has completed.
    pub fn init_result(&self) -> Option<Arc<InitResult>> {
        match self {
            Link::Http(l) => l.init_result(),
            Link::Stdio(l) => l.init_result(),
            Link::Pool(l) => l.init_result(),
        }
    }

    /// Starts receiving events not tied to a call (list_changed, resources/updated, ...).
    pub fn subscribe(&self, key: u64, sink: EventSink) {
        match self {
            Link::Http(l) => l.shared.fanout.subscribe(key, sink),
            Link::Stdio(l) => l.shared.fanout.subscribe(key, sink),
            Link::Pool(l) => l.subscribe(key, sink),
        }
    }

    /// Stops receiving unrelated events.
    pub fn unsubscribe(&self, key: u64) {
        match self {
            Link::Http(l) => l.shared.fanout.unsubscribe(key),
            Link::Stdio(l) => l.shared.fanout.unsubscribe(key),
            Link::Pool(l) => l.unsubscribe(key),
        }
    }

    /// The client opened its stream for messages not tied to a request: open the
    /// upstream's counterpart (HTTP upstreams open it only then, so an idle session
    /// holds no upstream connection).
    pub async fn want_unrelated_stream(&self) {
        match self {
            Link::Http(l) => l.want_get_stream(),
            Link::Pool(l) => l.want_get_stream().await,
            Link::Stdio(_) => {}
        }
    }

    /// Ends the upstream session (HTTP DELETE) or stops the process.
    pub async fn close(&self) {
        match self {
            Link::Http(l) => l.close().await,
            Link::Stdio(l) => l.close().await,
            Link::Pool(l) => l.close().await,
        }
    }
}

/// State every link has: who hears unrelated events, and where progress goes.
#[derive(Default)]
pub struct LinkShared {
    /// Subscribers to events not tied to a call.
    pub fanout: Fanout,
    /// Calls waiting for progress notifications, by the upstream-side token.
    pub progress: Arc<ProgressRoutes>,
}

impl LinkShared {
    /// Delivers an event that arrived outside any call's stream (or that may belong to
    /// a call through its progress token).
    pub fn deliver_unrelated(&self, event: UpstreamEvent) {
        if let Some(sink) = self.progress.route(&event) {
            send_event(&sink, event);
            return;
        }
        self.fanout.broadcast(event);
    }

    /// Delivers an event that arrived on a call's own stream.
    pub fn deliver_related(&self, related: &EventSink, event: UpstreamEvent) {
        let sink = self.progress.route(&event).unwrap_or_else(|| related.clone());
        send_event(&sink, event);
    }
}

/// Sends without waiting; a full or closed sink drops the event with a log line.
pub fn send_event(sink: &EventSink, event: UpstreamEvent) {
    if let Some(activity) = &sink.activity {
        activity.record(&event);
    }
    if let Err(e) = sink.tx.try_send(Tagged { upstream: Arc::clone(&sink.upstream), endpoint: sink.endpoint, event }) {
        tracing::debug!(error = %e, "dropped an upstream event: the receiver is gone or full");
    }
}

/// Subscribers to a link's unrelated events, keyed by client session.
#[derive(Default)]
pub struct Fanout {
    subs: std::sync::Mutex<HashMap<u64, EventSink>>,
}

impl Fanout {
    /// Adds a subscriber.
    pub fn subscribe(&self, key: u64, sink: EventSink) {
        lock(&self.subs).insert(key, sink);
    }

    /// Removes a subscriber.
    pub fn unsubscribe(&self, key: u64) {
        lock(&self.subs).remove(&key);
    }

    /// Sends an event to every subscriber.
    pub fn broadcast(&self, event: UpstreamEvent) {
        let subs: Vec<EventSink> = lock(&self.subs).values().cloned().collect();
        for sink in subs {
            send_event(&sink, event.clone());
        }
    }

    /// How many sessions listen.
    pub fn len(&self) -> usize {
        lock(&self.subs).len()
    }

    /// Whether nobody listens.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Progress tokens of in-flight calls → the call's sink.
#[derive(Default)]
pub struct ProgressRoutes {
    routes: std::sync::Mutex<HashMap<String, EventSink>>,
}

impl ProgressRoutes {
    /// Registers a call's token; the returned guard removes it.
    pub fn register(self: &Arc<Self>, token: &Value, sink: EventSink) -> ProgressGuard {
        let key = meta::token_key(token);
        lock(&self.routes).insert(key.clone(), sink);
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
        lock(&self.routes).get(&meta::token_key(&p.progress_token)).cloned()
    }
}

/// Removes a progress route when the call ends.
pub struct ProgressGuard {
    routes: Arc<ProgressRoutes>,
    key: String,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        lock(&self.routes.routes).remove(&self.key);
    }
}

/// Locks a std mutex, recovering from poisoning (no lock here guards an invariant a
/// panic could break half-way).
pub fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
