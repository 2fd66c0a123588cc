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
        "server/discover" => return json_response(StatusCode::OK, &rpc::result_response(&id, discover(server))),
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

/// Follows a call: its answer (stamped), or `input_required` when it asks the client.
#[allow(clippy::too_many_arguments)]
async fn drive(
    server: &DemoServer,
    parked: &Arc<Parked>,
    id: Value,
    session: Arc<Session>,
    method: String,
    mut outcome: Rest,
    mut messages: mpsc::UnboundedReceiver<Value>,
    streaming: bool,
) -> Response {
    let retry_after = server.config().retry_after_secs;
    let mut notes = Vec::new();
    // A client that closes its stream cancels the call (unless it is parked for input).
    let mut abandon = Abandon { server: server.clone(), session: Some(Arc::clone(&session)) };
    let answer = loop {
        tokio::select! {
            biased;
            Some(msg) = messages.recv() => {
                if msg.get("id").is_some() && msg.get("method").is_some() {
                    let mut ids = HashMap::new();
                    let mut requests = Map::new();
                    let mut take = |msg: Value| {
                        let key = msg["id"].as_str().map_or_else(|| msg["id"].to_string(), str::to_owned);
                        requests.insert(key.clone(), json!({"method": msg["method"], "params": msg["params"]}));
                        ids.insert(key, msg["id"].clone());
                    };
                    take(msg);
                    while let Ok(next) = messages.try_recv() {
                        if next.get("id").is_some() && next.get("method").is_some() { take(next) } else { notes.push(next) }
                    }
                    abandon.session = None;
                    let state = format!("demo-state-{:032x}", rand::random::<u128>());
                    // The tool is still waiting for its answer: park the rest of the call.
                    parked.lock().insert(state.clone(), ParkedCall { session, method, pending: outcome, messages, ids });
                    let expiry = Arc::clone(parked);
                    let key = state.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(PARK_TIMEOUT).await;
                        expiry.lock().remove(&key);
                    });
                    let result = json!({"resultType": "input_required", "inputRequests": requests, "requestState": state});
                    break rpc::result_response(&id, result);
                }
                notes.push(msg);
            }
            outcome = &mut outcome => {
                while let Ok(msg) = messages.try_recv() {
                    notes.push(msg);
                }
                match outcome {
                    Some(Outcome::Reply(mut reply)) => {
                        reply["id"] = id.clone();
                        break stamp(&method, reply);
                    }
                    Some(Outcome::Unavailable) => {
                        let headers = [(axum::http::header::RETRY_AFTER, retry_after.to_string())];
                        return (StatusCode::SERVICE_UNAVAILABLE, headers, "upstream temporarily unavailable").into_response();
                    }
                    None => return StatusCode::ACCEPTED.into_response(),
                }
            }
        }
    };
    abandon.session = None;
    if !streaming || notes.is_empty() {
        let status = answer["error"]["code"].as_i64().map_or(StatusCode::OK, status_of);
        return json_response(status, &answer);
    }
    notes.push(answer);
    let events = futures::stream::iter(notes.into_iter().map(|msg| {
        Ok::<_, std::convert::Infallible>(axum::response::sse::Event::default().event("message").data(msg.to_string()))
    }));
    axum::response::sse::Sse::new(events).into_response()
}

/// Cancels a call whose client went away before its answer.
struct Abandon {
    server: DemoServer,
    session: Option<Arc<Session>>,
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            self.server.record(&session, json!({"event": "cancelled", "requestId": null, "reason": "stream closed"}));
            session.close();
        }
    }
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
