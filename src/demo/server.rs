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
mod tests {
    //! Unit tests of the transport-independent demo server.

    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::sync::mpsc::UnboundedReceiver;

    use super::*;
    use crate::demo::record::Recorder;

    fn server() -> DemoServer {
        DemoServer::new(DemoConfig::default(), None)
    }

    fn stdio_session() -> Arc<Session> {
        Session::new(None, Transport::Stdio)
    }

    fn request(id: Value, method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    fn tool_call(id: i64, name: &str, arguments: Value) -> Value {
        request(json!(id), "tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// Send `msg` and wait for its response, with a sink that is thrown away.
    async fn ask(server: &DemoServer, session: &Arc<Session>, msg: Value) -> Value {
        let (out, _rx) = Outbound::channel();
        ask_with(server, session, msg, out).await
    }

    async fn ask_with(server: &DemoServer, session: &Arc<Session>, msg: Value, out: Outbound) -> Value {
        match server.accept(session, msg, out) {
            Accepted::Request(pending) => match pending.outcome().await {
                Some(Outcome::Reply(reply)) => reply,
                other => panic!("unexpected outcome {other:?}"),
            },
            other => panic!("not a request: {other:?}"),
        }
    }

    async fn next(rx: &mut UnboundedReceiver<Value>) -> Value {
        tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.ok().flatten().unwrap_or(Value::Null)
    }

    #[tokio::test]
    async fn initialize_negotiates_version_and_declares_capabilities() {
        let server = server();
        let session = stdio_session();
        for (asked, answered) in
            [("2024-11-05", "2024-11-05"), ("2025-06-18", "2025-06-18"), ("1999-01-01", LATEST_VERSION)]
        {
            let reply = ask(
                &server,
                &session,
                request(json!("init"), "initialize", json!({"protocolVersion": asked, "capabilities": {}})),
            )
            .await;
            assert_eq!(reply["id"], "init");
            let result = &reply["result"];
            assert_eq!(result["protocolVersion"], answered);
            assert_eq!(result["serverInfo"]["name"], "seawall-demo");
            assert_eq!(result["capabilities"]["tools"]["listChanged"], true);
            assert_eq!(result["capabilities"]["resources"]["subscribe"], true);
            assert!(result["capabilities"]["completions"].is_object());
            assert!(result.get("instructions").is_none());
        }
    }

    #[tokio::test]
    async fn tools_list_has_schemas_and_annotations() {
        let server = server();
        let reply = ask(&server, &stdio_session(), request(json!(1), "tools/list", json!({}))).await;
        let tools = reply["result"]["tools"].as_array().cloned().unwrap_or_default();
        let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(names, ["echo", "add", "sleep", "fail", "flaky", "crash", "big", "sample", "roots", "log"]);
        for tool in &tools {
            assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        }
        let by_name = |name: &str| tools.iter().find(|t| t["name"] == name).cloned().unwrap_or_default();
        let echo = by_name("echo");
        assert_eq!(echo["annotations"]["readOnlyHint"], true);
        assert_eq!(echo["annotations"]["idempotentHint"], true);
        assert_eq!(echo["inputSchema"]["required"], json!(["message"]));
        let add = by_name("add");
        assert_eq!(add["outputSchema"]["required"], json!(["sum"]));
        assert_eq!(add["annotations"]["readOnlyHint"], true);
        let fail = by_name("fail");
        assert_eq!(fail["annotations"]["destructiveHint"], false);
        assert_eq!(fail["annotations"]["readOnlyHint"], false);
        assert!(reply["result"].get("nextCursor").is_none());
    }

    #[tokio::test]
    async fn tools_list_paginates_with_opaque_cursor() {
        let config = DemoConfig { page_size: 4, ..DemoConfig::default() };
        let server = DemoServer::new(config, None);
        let session = stdio_session();
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 0.. {
            assert!(page < 5, "pagination does not end");
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let reply = ask(&server, &session, request(json!(page), "tools/list", params)).await;
            let tools = reply["result"]["tools"].as_array().cloned().unwrap_or_default();
            assert!(!tools.is_empty() && tools.len() <= 4);
            seen.extend(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)));
            match reply["result"]["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
        }
        assert_eq!(seen.len(), 10);
        for bad in [json!("nope"), json!("999"), json!("0"), json!(3)] {
            let reply = ask(&server, &session, request(json!("bad"), "tools/list", json!({"cursor": bad}))).await;
            assert_eq!(reply["error"]["code"], -32602, "{bad}");
        }
    }

    #[tokio::test]
    async fn extra_tools_are_listed_after_the_demo_tools_and_answer() {
        let server = DemoServer::new(DemoConfig { extra_tools: 120, ..DemoConfig::default() }, None);
        let session = stdio_session();
        let reply = ask(&server, &session, request(json!(1), "tools/list", json!({}))).await;
        let names: Vec<&str> =
            reply["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
        assert_eq!(names.len(), 130);
        assert_eq!((names[10], names[129]), ("extra_0001", "extra_0120"));
        let named = ask(&server, &session, tool_call(2, "extra_0007", json!({}))).await;
        assert_eq!(named["result"]["content"][0]["text"], "extra_0007");
        let echoed = ask(&server, &session, tool_call(3, "extra_0120", json!({"message": "hi"}))).await;
        assert_eq!(echoed["result"]["content"][0]["text"], "hi");
        for unknown in ["extra_0121", "extra_7", "extra_0000", "extra_"] {
            let reply = ask(&server, &session, tool_call(4, unknown, json!({}))).await;
            assert_eq!(reply["error"]["code"], -32602, "{unknown}");
        }
    }

    #[tokio::test]
    async fn add_returns_structured_content() {
        let server = server();
        let session = stdio_session();
        let reply = ask(&server, &session, tool_call(1, "add", json!({"a": 2, "b": 40}))).await;
        assert_eq!(reply["result"]["structuredContent"], json!({"sum": 42}));
        assert_eq!(reply["result"]["content"][0]["text"], "42");
        let reply = ask(&server, &session, tool_call(2, "add", json!({"a": 0.5, "b": 1}))).await;
        assert_eq!(reply["result"]["structuredContent"]["sum"].as_f64(), Some(1.5));
        let reply = ask(&server, &session, tool_call(3, "add", json!({"a": "2", "b": 1}))).await;
        assert_eq!(reply["error"]["code"], -32602);
    }

    #[tokio::test]
    async fn unknown_tool_and_method_are_rejected() {
        let server = server();
        let session = stdio_session();
        let reply = ask(&server, &session, tool_call(5, "nope", json!({}))).await;
        assert_eq!(reply["id"], 5);
        assert_eq!(reply["error"]["code"], -32602);
        assert_eq!(reply["error"]["message"], "Unknown tool: nope");
        let reply = ask(&server, &session, request(json!("m"), "frobnicate", json!({}))).await;
        assert_eq!(reply["error"]["code"], -32601);
        let reply = ask(&server, &session, request(json!(6), "tools/call", json!("x"))).await;
        assert_eq!(reply["error"]["code"], -32602);
        assert!(matches!(
            server.accept(&session, json!({"jsonrpc": "2.0", "id": null, "method": "ping"}), Outbound::channel().0),
            Accepted::Rejected(_)
        ));
    }

    #[tokio::test]
    async fn ids_are_echoed_exactly() {
        let server = server();
        let session = stdio_session();
        for id in [json!("abc"), json!(12345678901234567890u64), json!(-3), json!(1.5)] {
            let reply = ask(&server, &session, request(id.clone(), "ping", Value::Null)).await;
            assert_eq!(reply["id"].to_string(), id.to_string());
            assert_eq!(reply["result"], json!({}));
        }
    }

    #[tokio::test]
    async fn completion_filters_by_prefix() {
        let server = server();
        let session = stdio_session();
        let complete = |reference: Value, name: &str, value: &str| {
            request(
                json!(1),
                "completion/complete",
                json!({"ref": reference, "argument": {"name": name, "value": value}}),
            )
        };
        let prompt = json!({"type": "ref/prompt", "name": "greet"});
        let reply = ask(&server, &session, complete(prompt.clone(), "name", "al")).await;
        assert_eq!(reply["result"]["completion"], json!({"values": ["alice", "albert"], "total": 2, "hasMore": false}));
        let reply = ask(&server, &session, complete(prompt, "name", "")).await;
        assert_eq!(reply["result"]["completion"]["total"], 4);
        let template = json!({"type": "ref/resource", "uri": "demo://echo/{text}"});
        let reply = ask(&server, &session, complete(template, "text", "hel")).await;
        assert_eq!(reply["result"]["completion"]["values"], json!(["hello", "help"]));
        let reply = ask(&server, &session, complete(json!({"type": "ref/prompt", "name": "x"}), "name", "")).await;
        assert_eq!(reply["error"]["code"], -32602);
    }

    #[tokio::test]
    async fn cancelled_sleep_sends_nothing_and_is_recorded() {
        let path = std::env::temp_dir().join(format!("seawall-demo-test-{}.jsonl", rand::random::<u64>()));
        let recorder = Recorder::open(&path).ok();
        let server = DemoServer::new(DemoConfig::default(), recorder);
        let session = stdio_session();
        let (out, _rx) = Outbound::channel();
        let Accepted::Request(pending) =
            server.accept(&session, tool_call(7, "sleep", json!({"ms": 10_000})), out.clone())
        else {
            panic!("sleep is a request");
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 7, "reason": "user gave up"}});
        assert!(matches!(server.accept(&session, cancel, out), Accepted::Consumed));
        let outcome = tokio::time::timeout(Duration::from_secs(2), pending.outcome()).await;
        assert_eq!(outcome.ok(), Some(None), "a cancelled call must not answer");

        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let _ = std::fs::remove_file(&path);
        let events: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        assert_eq!(events.len(), 3, "{text}");
        assert_eq!(events[0], json!({"event": "request", "method": "tools/call", "id": 7}));
        assert_eq!(events[1], json!({"event": "call", "tool": "sleep", "id": 7, "arguments": {"ms": 10_000}}));
        assert_eq!(events[2], json!({"event": "cancelled", "requestId": 7, "reason": "user gave up"}));
        assert_eq!(server.stats(1)["cancelled"], 1);
        assert_eq!(server.stats(1)["calls"]["sleep"], 1);
    }

    #[tokio::test]
    async fn sleep_reports_increasing_progress() {
        let server = server();
        let session = stdio_session();
        let (out, mut rx) = Outbound::channel();
        let msg = request(
            json!(1),
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 200}, "_meta": {"progressToken": "tok"}}),
        );
        let reply = ask_with(&server, &session, msg, out).await;
        assert_eq!(reply["result"]["content"][0]["text"], "slept 200 ms");
        let mut last = 0;
        let mut count = 0;
        while let Ok(note) = rx.try_recv() {
            assert_eq!(note["method"], "notifications/progress");
            assert_eq!(note["params"]["progressToken"], "tok");
            assert_eq!(note["params"]["total"], 200);
            let progress = note["params"]["progress"].as_u64().unwrap_or(0);
            assert!(progress > last);
            last = progress;
            count += 1;
        }
        assert!(count >= 3, "only {count} progress notifications");
    }

    #[tokio::test]
    async fn sample_round_trips_through_the_client() {
        let server = server();
        let session = stdio_session();
        ask(
            &server,
            &session,
            request(json!(0), "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}})),
        )
        .await;
        let (out, mut rx) = Outbound::channel();
        let Accepted::Request(pending) =
            server.accept(&session, tool_call(1, "sample", json!({"prompt": "hi", "maxTokens": 5})), out)
        else {
            panic!("sample is a request");
        };
        let ask_client = next(&mut rx).await;
        assert_eq!(ask_client["method"], "sampling/createMessage");
        assert_eq!(ask_client["id"], "demo-1");
        assert_eq!(ask_client["params"]["maxTokens"], 5);
        assert_eq!(ask_client["params"]["messages"][0]["content"]["text"], "hi");
        let answer = json!({"jsonrpc": "2.0", "id": "demo-1",
            "result": {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"}});
        assert!(matches!(server.accept(&session, answer, Outbound::channel().0), Accepted::Consumed));
        let reply = match pending.outcome().await {
            Some(Outcome::Reply(reply)) => reply,
            other => panic!("{other:?}"),
        };
        assert_eq!(reply["result"]["content"][0]["text"], "sampled: hello");

        // Client errors become isError results.
        let (out, mut rx) = Outbound::channel();
        let Accepted::Request(pending) = server.accept(&session, tool_call(2, "sample", json!({"prompt": "x"})), out)
        else {
            panic!("sample is a request");
        };
        let ask_client = next(&mut rx).await;
        let refusal = json!({"jsonrpc": "2.0", "id": ask_client["id"],
            "error": {"code": -1, "message": "user rejected sampling"}});
        server.accept(&session, refusal, Outbound::channel().0);
        let Some(Outcome::Reply(reply)) = pending.outcome().await else {
            panic!("no reply");
        };
        assert_eq!(reply["result"]["isError"], true);
        assert_eq!(reply["result"]["content"][0]["text"], "user rejected sampling");
    }

    #[tokio::test]
    async fn sample_and_roots_need_client_capabilities() {
        let server = server();
        let session = stdio_session();
        let reply = ask(&server, &session, tool_call(1, "sample", json!({"prompt": "hi"}))).await;
        assert_eq!(reply["result"]["isError"], true);
        assert_eq!(reply["result"]["content"][0]["text"], "client does not support sampling");
        let reply = ask(&server, &session, tool_call(2, "roots", json!({}))).await;
        assert_eq!(reply["result"]["isError"], true);
    }

    #[tokio::test]
    async fn fail_leaks_like_a_real_upstream() {
        let server = server();
        let session = stdio_session();
        let reply = ask(&server, &session, tool_call(1, "fail", json!({}))).await;
        assert_eq!(reply["error"]["code"], -32603);
        let message = reply["error"]["message"].as_str().unwrap_or_default();
        for needle in [
            "Traceback (most recent call last):",
            "/home/deploy/.config/app/secrets.yaml",
            "http://10.0.3.7:5432/db",
            "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
            "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZW1vIn0.c2VjcmV0",
        ] {
            assert!(message.contains(needle), "missing {needle}");
        }
        assert_eq!(reply["error"]["data"], message);
        let reply = ask(&server, &session, tool_call(2, "fail", json!({"mode": "result"}))).await;
        assert_eq!(reply["result"]["isError"], true);
        assert_eq!(reply["result"]["content"][0]["text"], message);
    }

    #[tokio::test]
    async fn flaky_fails_first_calls_per_key() {
        let server = server();
        let session = stdio_session();
        let args = json!({"key": "k", "fail_first": 2});
        for id in 0..2 {
            let reply = ask(&server, &session, tool_call(id, "flaky", args.clone())).await;
            assert_eq!(reply["error"]["code"], -32603);
            assert_eq!(reply["error"]["message"], "transient failure");
        }
        let reply = ask(&server, &session, tool_call(3, "flaky", args)).await;
        assert_eq!(reply["result"]["content"][0]["text"], "ok after 2 failures");
        let reply = ask(&server, &session, tool_call(4, "flaky", json!({"key": "other"}))).await;
        assert_eq!(reply["result"]["content"][0]["text"], "ok after 0 failures");
        // On HTTP the http_503 mode asks the transport for a 503.
        let http = Session::new(Some("s".into()), Transport::Http);
        let Accepted::Request(pending) = server.accept(
            &http,
            tool_call(5, "flaky", json!({"key": "h", "fail_first": 1, "mode": "http_503"})),
            Outbound::channel().0,
        ) else {
            panic!("flaky is a request");
        };
        assert_eq!(pending.outcome().await, Some(Outcome::Unavailable));
    }

    #[tokio::test]
    async fn big_returns_exact_size_and_caps() {
        let server = server();
        let session = stdio_session();
        let reply = ask(&server, &session, tool_call(1, "big", json!({"n": 1000}))).await;
        assert_eq!(reply["result"]["content"][0]["text"].as_str().map(str::len), Some(1000));
        let reply = ask(&server, &session, tool_call(2, "big", json!({"n": 64 * 1024 * 1024 + 1}))).await;
        assert_eq!(reply["error"]["code"], -32602);
    }

    #[tokio::test]
    async fn resources_read_templates_and_errors() {
        let server = server();
        let session = stdio_session();
        let read = |id: i64, uri: &str| request(json!(id), "resources/read", json!({"uri": uri}));
        let reply = ask(&server, &session, read(1, "demo://echo/hello%20world%21")).await;
        assert_eq!(reply["result"]["contents"][0]["text"], "hello world!");
        let reply = ask(&server, &session, read(2, "demo://binary")).await;
        assert_eq!(reply["result"]["contents"][0]["blob"], "3q2+7wABAgM=");
        let reply = ask(&server, &session, read(3, "demo://missing")).await;
        assert_eq!(reply["error"]["code"], -32002);
        assert_eq!(reply["error"]["data"]["uri"], "demo://missing");
        let reply = ask(&server, &session, read(4, "demo://flaky/r/1")).await;
        assert_eq!(reply["error"]["code"], -32603);
        let reply = ask(&server, &session, read(5, "demo://flaky/r/1")).await;
        assert_eq!(reply["result"]["contents"][0]["text"], "ok");
        let reply = ask(&server, &session, request(json!(6), "resources/templates/list", Value::Null)).await;
        assert_eq!(reply["result"]["resourceTemplates"][0]["uriTemplate"], "demo://echo/{text}");
    }

    #[tokio::test]
    async fn touch_notifies_subscribers() {
        let server = server();
        let session = stdio_session();
        let (out, mut rx) = Outbound::channel();
        let touch = || tool_call(2, "echo", json!({"message": "touch"}));
        ask_with(&server, &session, touch(), out.clone()).await;
        assert!(rx.try_recv().is_err(), "not subscribed yet");
        let subscribe = request(json!(1), "resources/subscribe", json!({"uri": "demo://readme"}));
        assert_eq!(ask(&server, &session, subscribe).await["result"], json!({}));
        ask_with(&server, &session, touch(), out).await;
        let note = next(&mut rx).await;
        assert_eq!(note["method"], "notifications/resources/updated");
        assert_eq!(note["params"]["uri"], "demo://readme");
    }

    #[tokio::test]
    async fn prompts_and_logging_levels() {
        let server = server();
        let session = stdio_session();
        let get = |args: Value| request(json!(1), "prompts/get", json!({"name": "greet", "arguments": args}));
        let reply = ask(&server, &session, get(json!({"name": "Ada"}))).await;
        assert_eq!(reply["result"]["messages"][0]["content"]["text"], "Please greet Ada.");
        let reply = ask(&server, &session, get(json!({}))).await;
        assert_eq!(reply["error"]["code"], -32602);

        let set = request(json!(2), "logging/setLevel", json!({"level": "warning"}));
        assert_eq!(ask(&server, &session, set).await["result"], json!({}));
        let (out, mut rx) = Outbound::channel();
        let quiet = tool_call(3, "log", json!({"level": "info", "message": "hush"}));
        assert_eq!(ask_with(&server, &session, quiet, out.clone()).await["result"]["content"][0]["text"], "logged");
        assert!(rx.try_recv().is_err());
        let loud = tool_call(4, "log", json!({"level": "error", "message": "boom"}));
        ask_with(&server, &session, loud, out).await;
        let note = next(&mut rx).await;
        assert_eq!(note["params"], json!({"level": "error", "logger": "demo", "data": "boom"}));
    }

    #[test]
    fn wants_stream_picks_requests_that_talk_back() {
        let call =
            |name: &str, args: Value| json!({"method": "tools/call", "params": {"name": name, "arguments": args}});
        assert!(wants_stream(&call("sample", json!({}))));
        assert!(wants_stream(&call("echo", json!({"message": "touch"}))));
        assert!(!wants_stream(&call("echo", json!({"message": "hi"}))));
        assert!(wants_stream(&json!({"method": "tools/call",
            "params": {"name": "sleep", "_meta": {"progressToken": 1}}})));
        assert!(!wants_stream(&json!({"method": "ping"})));
    }
}
