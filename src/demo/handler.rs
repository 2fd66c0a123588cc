//! What the demo server's handlers share: the configuration, the state every session
//! sees, the context of one tool call, and how a handler fails.
//!
//! [`server`](super::server) dispatches to [`tools`](super::tools) and
//! [`catalog`](super::catalog); all three take these types from here, so the handlers
//! need nothing of the dispatcher.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::record::{Recorder, Stats};
use super::rpc::RpcError;
use super::session::{Outbound, Session};

/// Behaviour knobs, filled from the command line.
#[derive(Debug, Clone)]
pub(crate) struct DemoConfig {
    /// `serverInfo.name`.
    pub name: String,
    /// `instructions` in the initialize result, if any.
    pub instructions: Option<String>,
    /// Delay added before every `tools/call` answer.
    pub latency: Duration,
    /// Delay added before every `resources/read` answer.
    pub read_latency: Duration,
    /// Delay added before every `resources/subscribe` answer (the subscription is made
    /// when it ends).
    pub subscribe_latency: Duration,
    /// HTTP only: the `Retry-After` (seconds) of 503 answers.
    pub retry_after_secs: u64,
    /// Fraction (0..=1) of `tools/call` requests failed with -32603.
    pub error_rate: f64,
    /// Tools per `tools/list` page; 0 disables pagination.
    pub page_size: usize,
    /// Further tools `extra_0001` … listed after the demo's own.
    pub extra_tools: usize,
    /// HTTP: refuse the modern era.
    pub legacy_only: bool,
    /// HTTP+SSE: answer requests in the POST's body, not on the stream.
    pub sse_inline: bool,
}

impl Default for DemoConfig {
    fn default() -> Self {
        Self {
            name: "seawall-demo".to_owned(),
            instructions: None,
            latency: Duration::ZERO,
            read_latency: Duration::ZERO,
            subscribe_latency: Duration::ZERO,
            retry_after_secs: 0,
            error_rate: 0.0,
            page_size: 0,
            extra_tools: 0,
            legacy_only: false,
            sse_inline: false,
        }
    }
}

/// How a handler can fail.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Answer with this JSON-RPC error.
    Rpc(RpcError),
    /// A transient fault: HTTP answers the whole POST with 503, stdio with -32603.
    Unavailable,
}

impl From<RpcError> for Failure {
    fn from(err: RpcError) -> Self {
        Self::Rpc(err)
    }
}

/// What a handler returns: a JSON-RPC `result` or a failure.
pub(crate) type Handled = Result<Value, Failure>;

/// Everything a tool call may use.
pub(crate) struct CallContext {
    /// The id of the `tools/call` request.
    pub id: Value,
    /// The state of the server that took the call.
    pub state: Arc<ServerState>,
    /// The session the call came on.
    pub session: Arc<Session>,
    /// Where messages tied to this call go.
    pub out: Outbound,
    /// `params._meta.progressToken` of the call, if any.
    pub progress_token: Option<Value>,
}

/// What every session of one demo server shares.
#[derive(Debug)]
pub(crate) struct ServerState {
    config: DemoConfig,
    recorder: Option<Recorder>,
    /// Counters of requests, calls and cancellations.
    pub(crate) stats: Stats,
    /// Per-key `(calls, failures)` of the `flaky` tool, process-wide.
    flaky_tool: Mutex<HashMap<String, (u64, u64)>>,
    /// Per-key reads of `demo://flaky/{key}/{n}`, process-wide.
    flaky_resource: Mutex<HashMap<String, u64>>,
    /// Notifications for every modern-era `subscriptions/listen` stream (each stream
    /// keeps what its filter asks for).
    pub(crate) events: tokio::sync::broadcast::Sender<Value>,
}

impl ServerState {
    /// A state with `config`, recording events to `recorder` if given.
    pub(crate) fn new(config: DemoConfig, recorder: Option<Recorder>) -> Self {
        Self {
            config,
            recorder,
            stats: Stats::default(),
            flaky_tool: Mutex::new(HashMap::new()),
            flaky_resource: Mutex::new(HashMap::new()),
            events: tokio::sync::broadcast::channel(64).0,
        }
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &DemoConfig {
        &self.config
    }

    /// Append `event` to the record file, tagged with the HTTP session id.
    pub(crate) fn record(&self, session: &Session, mut event: Value) {
        let Some(recorder) = &self.recorder else {
            return;
        };
        if let (Some(id), Some(obj)) = (session.id(), event.as_object_mut()) {
            obj.insert("session".into(), json!(id));
        }
        recorder.write(&event);
    }

    pub(crate) fn count_call(&self, tool: &str) {
        self.stats.call(tool);
    }

    /// One `flaky` call for `key`: `Ok(failures so far)` to succeed, `Err(())` to fail.
    pub(crate) fn flaky_attempt(&self, key: &str, fail_first: u64, rate: f64) -> Result<u64, ()> {
        let mut map = self.flaky_tool.lock().unwrap_or_else(|poison| poison.into_inner());
        let (calls, failures) = map.entry(key.to_owned()).or_default();
        let fail = *calls < fail_first || (rate > 0.0 && rand::random::<f64>() < rate);
        *calls += 1;
        if fail {
            *failures += 1;
            Err(())
        } else {
            Ok(*failures)
        }
    }

    /// One read of `demo://flaky/{key}/{n}`: true if it must fail.
    pub(crate) fn flaky_resource_fails(&self, key: &str, n: u64) -> bool {
        let mut map = self.flaky_resource.lock().unwrap_or_else(|poison| poison.into_inner());
        let reads = map.entry(key.to_owned()).or_default();
        *reads += 1;
        *reads <= n
    }
}
