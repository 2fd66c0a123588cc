//! Transport-independent MCP logic of the demo server.
//!
//! A transport hands each incoming message to [`DemoServer::accept`] together
//! with the [`Outbound`] sink for messages tied to it (progress, server-to-client
//! requests). Requests are handled on their own task, so a slow `sleep` never
//! blocks an `echo`, and `notifications/cancelled` can abort them: a cancelled
//! request yields no response at all.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::catalog;
use super::handler::{CallContext, DemoConfig, Failure, Handled, ServerState};
use super::record::Recorder;
use super::rpc::{self, Incoming, RpcError, code, params_object, required_str};
use super::session::{LogLevel, Outbound, Session, Transport};
use super::tools;

/// Protocol versions the demo server speaks, oldest first.
pub(crate) const SUPPORTED_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The version offered when the client asks for one we do not speak.
pub(crate) const LATEST_VERSION: &str = "2025-11-25";

/// The final answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// A complete JSON-RPC response message (result or error).
    Reply(Value),
    /// HTTP only: answer the POST with `503 Service Unavailable` and `Retry-After`
    /// (`--retry-after`, default 0).
    Unavailable,
}

/// What became of one accepted message.
#[derive(Debug)]
pub(crate) enum Accepted {
    /// A request is being handled; await [`PendingReply::outcome`].
    Request(PendingReply),
    /// A notification or a response: nothing to send back.
    Consumed,
    /// Not a valid JSON-RPC message: send back this error response.
    Rejected(Value),
}

/// A request being answered: either already (`initialize`) or on its own task.
#[derive(Debug)]
pub(crate) struct PendingReply {
    id: Value,
    state: ReplyState,
}

#[derive(Debug)]
enum ReplyState {
    Ready(Outcome),
    Running(JoinHandle<Outcome>),
}

impl PendingReply {
    /// The request id.
    pub(crate) fn id(&self) -> &Value {
        &self.id
    }

    /// The answer if it is already known (no waiting), else the pending reply back.
    pub(crate) fn ready(self) -> Result<Outcome, Box<Self>> {
        match self.state {
            ReplyState::Ready(outcome) => Ok(outcome),
            state @ ReplyState::Running(_) => Err(Box::new(Self { id: self.id, state })),
        }
    }

    /// Wait for the answer; `None` if the request was cancelled (send nothing).
    pub(crate) async fn outcome(self) -> Option<Outcome> {
        let handle = match self.state {
            ReplyState::Ready(outcome) => return Some(outcome),
            ReplyState::Running(handle) => handle,
        };
        match handle.await {
            Ok(outcome) => Some(outcome),
            Err(err) if err.is_cancelled() => None,
            Err(err) => {
                tracing::error!(error = %err, "demo: request handler panicked");
                Some(Outcome::Reply(RpcError::internal("request handler failed").response(&self.id)))
            }
        }
    }
}

/// The demo MCP server; cheap to clone, shared by all sessions.
#[derive(Debug, Clone)]
pub(crate) struct DemoServer {
    state: Arc<ServerState>,
}

impl DemoServer {
    /// A server with `config`, recording events to `recorder` if given.
    pub(crate) fn new(config: DemoConfig, recorder: Option<Recorder>) -> Self {
        Self { state: Arc::new(ServerState::new(config, recorder)) }
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &DemoConfig {
        self.state.config()
    }

    /// `{"calls":…, "requests":…, "cancelled":…, "sessions": sessions}`.
    pub(crate) fn stats(&self, sessions: usize) -> Value {
        self.state.stats.snapshot(sessions)
    }

    /// The notifications of the server as a whole, for modern-era listeners.
    pub(crate) fn events(&self) -> tokio::sync::broadcast::Receiver<Value> {
        self.state.events.subscribe()
    }

    /// Counts a cancelled request in `/admin/stats`.
    pub(crate) fn count_cancelled(&self) {
        self.state.stats.cancelled();
    }

    /// Appends `event` to the record file.
    pub(crate) fn record(&self, session: &Session, event: Value) {
        self.state.record(session, event);
    }

    /// Records an HTTP request's header names and its `Authorization`, `traceparent` and
    /// `tracestate` values (`null` when absent), so tests can see exactly what a gateway
    /// forwards.
    pub(crate) fn record_headers(&self, session: &Session, headers: &axum::http::HeaderMap) {
        let names: Vec<&str> = headers.keys().map(|name| name.as_str()).collect();
        let value = |name: &str| headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        self.record(
            session,
            json!({
                "event": "http_headers",
                "names": names,
                "authorization": value("authorization"),
                "traceparent": value("traceparent"),
                "tracestate": value("tracestate"),
            }),
        );
    }

    /// Records the end of an HTTP session: `how` is `DELETE`, or `stream` when the
    /// client closed an HTTP+SSE session's event stream.
    pub(crate) fn record_session_closed(&self, session: &Session, how: &str) {
        self.record(session, json!({"event": "session_closed", "by": how}));
    }

    /// Take one incoming message. Requests are spawned (must be called inside a
    /// Tokio runtime); `out` receives messages tied to the request.
    pub(crate) fn accept(&self, session: &Arc<Session>, msg: Value, out: Outbound) -> Accepted {
        match Incoming::classify(msg) {
            Incoming::Request { id, method, params } => {
                let mut event = json!({"event": "request", "method": method, "id": id});
                // The trace context a gateway put in `_meta`, when there is one.
                for key in ["traceparent", "tracestate"] {
                    if let Some(value) = params.get("_meta").and_then(|m| m.get(key)) {
                        event[key] = value.clone();
                    }
                }
                self.record(session, event);
                self.state.stats.request(&method);
                if method == "initialize" {
                    // Answered inline, so the client's capabilities are known before
                    // the next message is read; never cancellable.
                    let handled = self.initialize(session, &params).map_err(Failure::from);
                    let outcome = self.finish(session, &id, handled);
                    return Accepted::Request(PendingReply { id, state: ReplyState::Ready(outcome) });
                }
                let server = self.clone();
                let task_session = Arc::clone(session);
                let task_id = id.clone();
                let task = async move {
                    let handled = server.handle(&task_session, &task_id, &method, params, out).await;
                    server.finish(&task_session, &task_id, handled)
                };
                let handle = session.spawn_cancellable(&id, task);
                Accepted::Request(PendingReply { id, state: ReplyState::Running(handle) })
            }
            Incoming::Notification { method, params } => {
                self.notification(session, &method, &params);
                Accepted::Consumed
            }
            Incoming::Response { id, outcome } => {
                if !session.complete(&id, outcome) {
                    tracing::debug!(%id, "demo: ignoring answer to unknown or finished request");
                }
                Accepted::Consumed
            }
            Incoming::Invalid(err) => Accepted::Rejected(err),
        }
    }

    fn finish(&self, session: &Session, id: &Value, handled: Handled) -> Outcome {
        match handled {
            Ok(result) => Outcome::Reply(rpc::result_response(id, result)),
            Err(Failure::Rpc(err)) => Outcome::Reply(err.response(id)),
            Err(Failure::Unavailable) if session.transport() == Transport::Http => Outcome::Unavailable,
            Err(Failure::Unavailable) => Outcome::Reply(RpcError::internal("transient failure").response(id)),
        }
    }

    fn notification(&self, session: &Session, method: &str, params: &Value) {
        if method != "notifications/cancelled" {
            self.record(session, json!({"event": "notification", "method": method}));
            return;
        }
        let request_id = params.get("requestId").cloned().unwrap_or(Value::Null);
        let reason = params.get("reason").cloned().unwrap_or(Value::Null);
        self.record(session, json!({"event": "cancelled", "requestId": request_id, "reason": reason}));
        self.state.stats.cancelled();
        if session.cancel(&request_id) {
            tracing::debug!(%request_id, "demo: request cancelled");
        }
    }

    async fn handle(&self, session: &Arc<Session>, id: &Value, method: &str, params: Value, out: Outbound) -> Handled {
        match method {
            "ping" => Ok(json!({})),
            "tools/list" => Ok(tools::list(self.config(), &params)?),
            "tools/call" => {
                let progress_token = params
                    .get("_meta")
                    .and_then(|meta| meta.get("progressToken"))
                    .filter(|token| !token.is_null())
                    .cloned();
                let ctx = CallContext {
                    id: id.clone(),
                    state: Arc::clone(&self.state),
                    session: Arc::clone(session),
                    out,
                    progress_token,
                };
                tools::call(&ctx, &params).await
            }
            "resources/list" => Ok(catalog::list_resources()),
            "resources/templates/list" => Ok(catalog::list_templates()),
            "resources/read" => {
                if !self.config().read_latency.is_zero() {
                    tokio::time::sleep(self.config().read_latency).await;
                }
                catalog::read_resource(&self.state, &params)
            }
            "resources/subscribe" => {
                let params = params_object(&params)?;
                if !self.config().subscribe_latency.is_zero() {
                    tokio::time::sleep(self.config().subscribe_latency).await;
                }
                session.subscribe(required_str(&params, "uri")?);
                Ok(json!({}))
            }
            "resources/unsubscribe" => {
                let params = params_object(&params)?;
                session.unsubscribe(required_str(&params, "uri")?);
                Ok(json!({}))
            }
            "prompts/list" => Ok(catalog::list_prompts()),
            "prompts/get" => Ok(catalog::get_prompt(&params)?),
            "completion/complete" => Ok(catalog::complete(&params)?),
            "logging/setLevel" => {
                let params = params_object(&params)?;
                let name = required_str(&params, "level")?;
                let level =
                    LogLevel::parse(name).ok_or_else(|| RpcError::invalid_params(format!("unknown level: {name}")))?;
                session.set_log_level(level);
                Ok(json!({}))
            }
            _ => Err(RpcError::new(code::METHOD_NOT_FOUND, format!("Method not found: {method}")).into()),
        }
    }

    fn initialize(&self, session: &Session, params: &Value) -> Result<Value, RpcError> {
        let params = params_object(params)?;
        let requested = params.get("protocolVersion").cloned().unwrap_or(Value::Null);
        let capabilities = match params.get("capabilities") {
            None | Some(Value::Null) => json!({}),
            Some(caps @ Value::Object(_)) => caps.clone(),
            Some(_) => return Err(RpcError::invalid_params("capabilities must be an object")),
        };
        self.record(
            session,
            json!({"event": "initialize", "protocolVersion": requested, "capabilities": capabilities}),
        );
        session.set_client_capabilities(capabilities);
        let version = requested.as_str().filter(|v| SUPPORTED_VERSIONS.contains(v)).unwrap_or(LATEST_VERSION);
        let config = self.config();
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": true},
                "resources": {"subscribe": true, "listChanged": true},
                "prompts": {"listChanged": true},
                "logging": {},
                "completions": {},
            },
            "serverInfo": {"name": config.name, "version": env!("CARGO_PKG_VERSION")},
        });
        if let (Some(text), Some(obj)) = (&config.instructions, result.as_object_mut()) {
            obj.insert("instructions".into(), json!(text));
        }
        Ok(result)
    }
}

/// Whether a request should be answered as an SSE stream on HTTP: it asked for
/// progress, or it is a call that talks to the client while running.
pub(crate) fn wants_stream(msg: &Value) -> bool {
    let params = msg.get("params");
    let has_progress =
        params.and_then(|p| p.get("_meta")).and_then(|m| m.get("progressToken")).is_some_and(|t| !t.is_null());
    if has_progress {
        return true;
    }
    if msg.get("method").and_then(Value::as_str) != Some("tools/call") {
        return false;
    }
    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    let message = params.and_then(|p| p.get("arguments")).and_then(|a| a.get("message")).and_then(Value::as_str);
    matches!(name, Some("sample" | "roots" | "log")) || (name == Some("echo") && message == Some("touch"))
}

#[cfg(test)]
mod tests;
