//! One request on its way to one upstream, as every layer of its stack sees it.

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::time::Instant;

use super::clock::Clock;
use super::events::EventSink;
use super::transport::Link;

/// One request on its way to one upstream. Cloned for every attempt, so every field is
/// cheap to clone.
#[derive(Clone)]
pub struct UpstreamCall {
    /// The upstream's name.
    pub upstream: Arc<str>,
    /// The method.
    pub method: Arc<str>,
    /// The parameters exactly as they go upstream.
    pub params: Option<Arc<RawValue>>,
    /// The progress token carried in `params._meta` (upstream side), if any.
    pub progress_token: Option<Value>,
    /// The tool name as the upstream knows it, for `tools/call`.
    pub tool: Option<Arc<str>>,
    /// Whether sending the request twice is safe (decided by the router from the method,
    /// the operator's tool settings and trusted annotations).
    pub idempotent: bool,
    /// The request's deadline, covering every attempt.
    pub clock: Arc<Clock>,
    /// Where related notifications and server requests go.
    pub events: EventSink,
    /// The session's link to the upstream.
    pub target: Link,
    /// Endpoints earlier attempts went to (replicated upstreams), so a retry goes elsewhere.
    pub avoid: Vec<u16>,
    /// The endpoint this attempt goes to, chosen by the attempt layer.
    pub endpoint: Option<u16>,
    /// When this attempt must be over, set by the attempt layer.
    pub attempt_deadline: Option<Instant>,
}

impl std::fmt::Debug for UpstreamCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamCall")
            .field("upstream", &self.upstream)
            .field("method", &self.method)
            .field("tool", &self.tool)
            .field("idempotent", &self.idempotent)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}
