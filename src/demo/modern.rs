//! The demo server's modern era (2026-07-28) on `POST /mcp`: a request whose
//! `MCP-Protocol-Version` names no handshake version is self-contained — no session,
//! the client's capabilities in `params._meta` — and is answered with JSON, or with
//! SSE when it sends progress first. A tool that asks the client something (sampling,
//! roots) answers `input_required` instead: the call stays parked under the result's
//! `requestState` until the client retries with `inputResponses`.
//!
//! Lists carry caching hints (`ttlMs: 5000`, `cacheScope: "public"` on `tools/list`)
//! so a gateway can be seen to pass them through.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt as _;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::rpc::{self, RpcError, code};
use super::server::{Accepted, DemoServer, Outcome, wants_stream};
use super::session::{Outbound, Session, Transport};

/// The modern version the demo speaks.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";

const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

/// How long a parked call waits for the client's retry.
const PARK_TIMEOUT: Duration = Duration::from_secs(60);

/// Calls waiting for the client's `inputResponses`, by `requestState`.
#[derive(Default)]
pub(crate) struct Parked {
    calls: Mutex<HashMap<String, ParkedCall>>,
}

/// The rest of a call: its final outcome (`None`: cancelled).
type Rest = std::pin::Pin<Box<dyn std::future::Future<Output = Option<Outcome>> + Send>>;

struct ParkedCall {
    session: Arc<Session>,
    method: String,
    pending: Rest,
    messages: mpsc::UnboundedReceiver<Value>,
    /// `inputRequests` key → the id of the request the tool made of the client.
    ids: HashMap<String, Value>,
}

impl Parked {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, ParkedCall>> {
        self.calls.lock().unwrap_or_else(|poison| poison.into_inner())
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (status, [(axum::http::header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

/// The era's HTTP status for an error code.
fn status_of(code_value: i64) -> StatusCode {
    match code_value {
        code::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        -32700 | -32600 | -32602 | -32020 | -32021 | -32022 => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

fn error(id: &Value, code_value: i64, message: &str, data: Option<Value>) -> Response {
    let mut err = RpcError::new(code_value, message);
    if let Some(data) = data {
        err = err.with_data(data);
    }
    json_response(status_of(code_value), &err.response(id))
}

/// Whether a POST speaks the modern era.
pub(crate) fn is_modern(headers: &HeaderMap) -> bool {
    headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| !super::server::SUPPORTED_VERSIONS.contains(&v))
}

/// Serves one modern POST.
pub(crate) async fn post(server: &DemoServer, parked: &Arc<Parked>, headers: &HeaderMap, msg: Value) -> Response {
    let version = headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok()).unwrap_or_default();
    let id = msg.get("id").cloned().unwrap_or(Value::Null);
    let unsupported = || json!({"supported": [MODERN_VERSION], "requested": version});
    if version != MODERN_VERSION {
        return error(&id, -32022, "Unsupported protocol version", Some(unsupported()));
    }
    if msg.get("id").is_none() {
        return StatusCode::ACCEPTED.into_response();
    }
    let method = msg.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    let params = msg.get("params").cloned().unwrap_or_else(|| json!({}));
    let meta = params.get("_meta").and_then(Value::as_object);
    let Some(meta) = meta.filter(|m| m.contains_key(PROTOCOL_VERSION_KEY) && m.contains_key(CLIENT_CAPABILITIES_KEY))
    else {
        return error(
            &id,
            code::INVALID_PARAMS,
            "params._meta lacks the protocol version or client capabilities",
            None,
        );
    };
    if meta[PROTOCOL_VERSION_KEY] != version {
        return error(&id, -32020, "MCP-Protocol-Version does not match params._meta", None);
    }
    if headers.get("mcp-method").and_then(|v| v.to_str().ok()) != Some(method.as_str()) {
        return error(&id, -32020, "Mcp-Method does not match the method", None);
    }
    let capabilities = meta[CLIENT_CAPABILITIES_KEY].clone();
    match method.as_str() {
        "initialize" | "ping" | "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => {
            return error(&id, code::METHOD_NOT_FOUND, &format!("Method not found: {method}"), None);
        }
        "server/discover" => {
            let session = Session::new(None, Transport::Http);
            server.record(&session, json!({"event": "request", "method": method, "id": id}));
            return json_response(StatusCode::OK, &rpc::result_response(&id, discover(server)));
        }
        "subscriptions/listen" => return listen(server, headers, &id, &params),
        _ => {}
    }
    if let Some(state) = params.get("requestState").and_then(Value::as_str) {
        let call = parked.lock().remove(state).filter(|call| call.method == method);
        let Some(call) = call else {
            return error(&id, code::INVALID_PARAMS, "unknown or expired requestState", None);
        };
        let responses = params.get("inputResponses").and_then(Value::as_object).cloned().unwrap_or_default();
        for (key, request_id) in &call.ids {
            let outcome = match responses.get(key) {
                Some(result) => Ok(result.clone()),
                None => Err(RpcError::invalid_params(format!("inputResponses lacks {key:?}"))),
            };
            call.session.complete(request_id, outcome);
        }
        return drive(server, parked, id, call.session, call.method, call.pending, call.messages, true).await;
    }
    let session = Session::new(None, Transport::Http);
    session.set_client_capabilities(capabilities);
    server.record_headers(&session, headers);
    let streaming = wants_stream(&msg);
    let (out, messages) = Outbound::channel();
    let pending = match server.accept(&session, msg, out) {
        Accepted::Request(pending) => pending,
        Accepted::Consumed => return StatusCode::ACCEPTED.into_response(),
        Accepted::Rejected(reply) => return json_response(StatusCode::BAD_REQUEST, &reply),
    };
    drive(server, parked, id, session, method, Box::pin(pending.outcome()), messages, streaming).await
}

/// How a call ended, as far as this request is concerned.
enum End {
    /// The response to send (the answer, or `input_required` with the call parked).
    Answer(Value),
    /// HTTP: a transient failure (`--retry-after`).
    Unavailable,
    /// The call was cancelled: nothing is sent.
    Cancelled,
}

/// Answers a request with its call's outcome: JSON, or (when `streaming`) an SSE stream
/// of the call's notifications as they come and then the answer. A client that closes
/// the connection before the answer cancels the call (a parked call is not cancelled).
#[allow(clippy::too_many_arguments)]
async fn drive(
    server: &DemoServer,
    parked: &Arc<Parked>,
    id: Value,
    session: Arc<Session>,
    method: String,
    outcome: Rest,
    messages: mpsc::UnboundedReceiver<Value>,
    streaming: bool,
) -> Response {
    let abandon = Abandon {
        server: server.clone(),
        session: Some(Arc::clone(&session)),
        id: id.clone(),
        done: std::sync::atomic::AtomicBool::new(false),
    };
    if !streaming {
        let end = follow(parked, &id, session, method, outcome, messages, |_| {}).await;
        abandon.disarm();
        return match end {
            End::Answer(answer) => {
                let status = answer["error"]["code"].as_i64().map_or(StatusCode::OK, status_of);
                json_response(status, &answer)
            }
            End::Unavailable => unavailable(server.config().retry_after_secs),
            End::Cancelled => StatusCode::ACCEPTED.into_response(),
        };
    }
    let (frames, rx) = mpsc::unbounded_channel::<Value>();
    let parked = Arc::clone(parked);
    let task_id = id.clone();
    let task = tokio::spawn(async move {
        let notes = frames.clone();
        let end = follow(&parked, &task_id, session, method, outcome, messages, move |n| {
            let _ = notes.send(n);
        })
        .await;
        match end {
            End::Answer(answer) => {
                let _ = frames.send(answer);
            }
            End::Unavailable => {
                let _ = frames.send(RpcError::internal("transient failure").response(&task_id));
            }
            End::Cancelled => {}
        }
    });
    let guard = StreamGuard { task: task.abort_handle(), abandon: Some(abandon) };
    let events = tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(move |msg| {
        if (msg.get("result").is_some() || msg.get("error").is_some())
            && let Some(abandon) = guard.abandon.as_ref()
        {
            abandon.done.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok::<_, std::convert::Infallible>(axum::response::sse::Event::default().event("message").data(msg.to_string()))
    });
    axum::response::sse::Sse::new(events).into_response()
}

fn unavailable(retry_after: u64) -> Response {
    let headers = [(axum::http::header::RETRY_AFTER, retry_after.to_string())];
    (StatusCode::SERVICE_UNAVAILABLE, headers, "upstream temporarily unavailable").into_response()
}

/// Follows a call until it answers (stamped, under `id`) or asks the client for input
/// (then it is parked and `input_required` is the answer); its notifications go to
/// `note`.
async fn follow(
    parked: &Arc<Parked>,
    id: &Value,
    session: Arc<Session>,
    method: String,
    mut outcome: Rest,
    mut messages: mpsc::UnboundedReceiver<Value>,
    mut note: impl FnMut(Value),
) -> End {
    loop {
        tokio::select! {
            biased;
            Some(msg) = messages.recv() => {
                if msg.get("id").is_none() || msg.get("method").is_none() {
                    note(msg);
                    continue;
                }
                let mut ids = HashMap::new();
                let mut requests = Map::new();
                let mut take = |msg: Value| {
                    let key = msg["id"].as_str().map_or_else(|| msg["id"].to_string(), str::to_owned);
                    requests.insert(key.clone(), json!({"method": msg["method"], "params": msg["params"]}));
                    ids.insert(key, msg["id"].clone());
                };
                take(msg);
                while let Ok(next) = messages.try_recv() {
                    if next.get("id").is_some() && next.get("method").is_some() { take(next) } else { note(next) }
                }
                let state = format!("demo-state-{:032x}", rand::random::<u128>());
                // The tool still waits for its answer: park the rest of the call.
                parked.lock().insert(state.clone(), ParkedCall { session, method, pending: outcome, messages, ids });
                let expiry = Arc::clone(parked);
                let key = state.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(PARK_TIMEOUT).await;
                    expiry.lock().remove(&key);
                });
                let result = json!({"resultType": "input_required", "inputRequests": requests, "requestState": state});
                return End::Answer(rpc::result_response(id, result));
            }
            outcome = &mut outcome => {
                while let Ok(msg) = messages.try_recv() {
                    note(msg);
                }
                return match outcome {
                    Some(Outcome::Reply(mut reply)) => {
                        reply["id"] = id.clone();
                        End::Answer(stamp(&method, reply))
                    }
                    Some(Outcome::Unavailable) => End::Unavailable,
                    None => End::Cancelled,
                };
            }
        }
    }
}

/// Ends a streamed call whose client went away before the answer.
struct StreamGuard {
    task: tokio::task::AbortHandle,
    abandon: Option<Abandon>,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let Some(abandon) = self.abandon.take() else { return };
        if abandon.done.load(std::sync::atomic::Ordering::Relaxed) {
            abandon.disarm();
        } else {
            self.task.abort();
        }
    }
}

/// Cancels a call whose client went away before its answer, recording it as a
/// cancellation of that request.
struct Abandon {
    server: DemoServer,
    session: Option<Arc<Session>>,
    id: Value,
    /// The answer went out: nothing to cancel.
    done: std::sync::atomic::AtomicBool,
}

impl Abandon {
    fn disarm(mut self) {
        self.session = None;
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let event = json!({"event": "cancelled", "requestId": self.id, "reason": "stream closed"});
            self.server.record(&session, event);
            self.server.count_cancelled();
            session.close();
        }
    }
}

/// `subscriptions/listen`: an SSE stream that acknowledges the filter, then carries the
/// server's notifications the filter asks for, each tagged with the listen request's id.
fn listen(server: &DemoServer, headers: &HeaderMap, id: &Value, params: &Value) -> Response {
    let filter = params.get("notifications").cloned().unwrap_or_else(|| json!({}));
    let session = Session::new(None, Transport::Http);
    server.record_headers(&session, headers);
    server.record(&session, json!({"event": "listen", "notifications": filter}));
    let tag = |mut note: Value, id: &Value| {
        if let Some(params) = note.get_mut("params").and_then(Value::as_object_mut) {
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            meta["io.modelcontextprotocol/subscriptionId"] = id.clone();
        }
        note
    };
    let ack = tag(rpc::notification("notifications/subscriptions/acknowledged", json!({"notifications": filter})), id);
    let wants = move |note: &Value| {
        let flag = |key: &str| filter.get(key).and_then(Value::as_bool) == Some(true);
        match note["method"].as_str() {
            Some("notifications/tools/list_changed") => flag("toolsListChanged"),
            Some("notifications/prompts/list_changed") => flag("promptsListChanged"),
            Some("notifications/resources/list_changed") => flag("resourcesListChanged"),
            Some("notifications/resources/updated") => filter
                .get("resourceSubscriptions")
                .and_then(Value::as_array)
                .is_some_and(|uris| uris.iter().any(|u| *u == note["params"]["uri"])),
            _ => false,
        }
    };
    let id = id.clone();
    let notes = futures::stream::unfold(server.events(), |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(note) => return Some((note, rx)),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    })
    .filter(move |note| std::future::ready(wants(note)))
    .map(move |note| tag(note, &id));
    let events = futures::stream::once(async move { ack }).chain(notes).map(|msg| {
        Ok::<_, std::convert::Infallible>(axum::response::sse::Event::default().event("message").data(msg.to_string()))
    });
    axum::response::sse::Sse::new(events).keep_alive(axum::response::sse::KeepAlive::default()).into_response()
}

/// A response with the members the era requires on its result.
fn stamp(method: &str, mut reply: Value) -> Value {
    let Some(result) = reply.get_mut("result").and_then(Value::as_object_mut) else {
        return reply;
    };
    result.entry("resultType").or_insert(json!("complete"));
    let (ttl, scope) = match method {
        "tools/list" => (5000, "public"),
        "prompts/list" | "resources/list" | "resources/templates/list" | "resources/read" => (0, "private"),
        _ => return reply,
    };
    result.entry("ttlMs").or_insert(json!(ttl));
    result.entry("cacheScope").or_insert(json!(scope));
    reply
}

fn discover(server: &DemoServer) -> Value {
    let config = server.config();
    let mut result = json!({
        "supportedVersions": [MODERN_VERSION],
        "capabilities": {
            "tools": {"listChanged": true},
            "resources": {"listChanged": true},
            "prompts": {"listChanged": true},
            "completions": {},
        },
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "public",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": config.name, "version": env!("CARGO_PKG_VERSION")}},
    });
    if let (Some(text), Some(obj)) = (&config.instructions, result.as_object_mut()) {
        obj.insert("instructions".into(), json!(text));
    }
    result
}
