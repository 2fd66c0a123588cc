//! The hostile HTTP upstream of the "nothing leaks" suite: an MCP server that fails
//! every request the way its name says (a [`Kind`]: a tool, prompt, resource URI or list
//! cursor named after it), each time with the planted secrets in every field it can.
//!
//! * `/json/mcp`: Streamable HTTP answering JSON (both eras: `initialize` with a
//!   session, and `server/discover` with stateless requests);
//! * `/sse/mcp`: the same, answering `text/event-stream`, every event with a comment
//!   and an event id that carry secrets too;
//! * `/legacy/sse` (+ `/legacy/messages`): HTTP+SSE (2024-11-05);
//! * `/badinit/mcp`, `/badinit500/mcp`, `/badinit/sse`: refusing the handshake (a
//!   JSON-RPC error, an HTTP 500 page, an error on the event stream).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::planted::{self, Kind};

/// How a Streamable HTTP endpoint answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Json,
    Sse,
}

/// What the server does with one request.
enum Step {
    /// Answers this JSON-RPC message, after `prelude` (SSE data, or JSON for `Json`).
    Reply { prelude: Vec<String>, message: Value },
    /// Answers this HTTP status, headers and body instead.
    Status(StatusCode, Vec<(HeaderName, String)>, String, &'static str),
    /// 202, nothing to answer.
    Accepted,
    /// SSE: sends `prelude`, then closes the stream unanswered.
    Close { prelude: Vec<String> },
}

#[derive(Default)]
struct Fake {
    /// Requests handled.
    requests: AtomicUsize,
    /// HTTP+SSE sessions: the stream of each.
    streams: Mutex<HashMap<String, mpsc::UnboundedSender<String>>>,
    next_stream: AtomicUsize,
}

/// A running hostile upstream.
pub struct LeakyUpstream {
    pub addr: std::net::SocketAddr,
    fake: Arc<Fake>,
}

impl LeakyUpstream {
    pub async fn start() -> LeakyUpstream {
        let fake = Arc::new(Fake::default());
        let app = Router::new()
            .route("/json/mcp", post(json_post).get(not_allowed).delete(ended))
            .route("/sse/mcp", post(sse_post).get(not_allowed).delete(ended))
            .route("/badinit/mcp", post(badinit_post).get(not_allowed).delete(ended))
            .route("/badinit500/mcp", post(badinit500_post).get(not_allowed).delete(ended))
            .route("/legacy/sse", get(legacy_stream))
            .route("/legacy/messages", post(legacy_post))
            .route("/badinit/sse", get(badinit_stream))
            .route("/badinit/messages", post(badinit_legacy_post))
            .with_state(Arc::clone(&fake));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        LeakyUpstream { addr, fake }
    }

    /// Requests handled so far.
    pub fn requests(&self) -> usize {
        self.fake.requests.load(Ordering::Relaxed)
    }
}

async fn not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

async fn ended() -> StatusCode {
    StatusCode::OK
}

fn name_list() -> Vec<String> {
    Kind::all().into_iter().map(Kind::name).collect()
}

/// The kind a request names, and whether the request is a list with no cursor.
fn kind_of(method: &str, params: &Value) -> Option<Kind> {
    let name = match method {
        "tools/call" | "prompts/get" => params["name"].as_str()?.to_owned(),
        "resources/read" => params["uri"].as_str()?.strip_prefix("leak://")?.to_owned(),
        _ => params["cursor"].as_str()?.to_owned(),
    };
    Kind::from_name(&name)
}

fn result_of(method: &str, params: &Value, badinit: bool) -> Option<Result<Value, Value>> {
    let refused = || Err(planted::error_for(Kind::Code(-32603), 0));
    Some(match method {
        "initialize" if badinit => refused(),
        "server/discover" if badinit => refused(),
        "initialize" => Ok(json!({
            "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-11-25"),
            "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
            "serverInfo": {"name": "leaky", "version": "1"},
        })),
        "server/discover" => Ok(json!({
            "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "leaky", "version": "1"}},
        })),
        "ping" => Ok(json!({})),
        "tools/list" if params.get("cursor").is_none() => Ok(json!({
            "tools": name_list().into_iter().map(|n| json!({"name": n, "inputSchema": {"type": "object"}})).collect::<Vec<_>>()
        })),
        "prompts/list" if params.get("cursor").is_none() => {
            Ok(json!({"prompts": name_list().into_iter().map(|n| json!({"name": n})).collect::<Vec<_>>()}))
        }
        "resources/list" if params.get("cursor").is_none() => Ok(json!({"resources": []})),
        "resources/templates/list" if params.get("cursor").is_none() => {
            Ok(json!({"resourceTemplates": [{"uriTemplate": "leak://{kind}", "name": "leak"}]}))
        }
        _ => return None,
    })
}

/// What to do with one JSON-RPC message.
fn step(fake: &Fake, msg: &Value, mode: Mode, badinit: bool) -> Step {
    fake.requests.fetch_add(1, Ordering::Relaxed);
    let (Some(method), Some(id)) = (msg["method"].as_str(), msg.get("id").filter(|id| !id.is_null())) else {
        return Step::Accepted;
    };
    let params = msg.get("params").cloned().unwrap_or_else(|| json!({}));
    let reply = |body: Result<Value, Value>| {
        let message = match body {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        Step::Reply { prelude: Vec::new(), message }
    };
    if let Some(answer) = result_of(method, &params, badinit) {
        return reply(answer);
    }
    let Some(kind) = kind_of(method, &params) else {
        return reply(Err(json!({"code": -32601, "message": "Method not found"})));
    };
    let turn = planted::turn(method, kind);
    let texts = planted::texts(kind, turn);
    let noise = planted::message(&texts);
    let error = planted::error_for(kind, turn);
    let json_error = |status: u16| {
        let body = json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string();
        let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Step::Status(code, vec![(header::RETRY_AFTER, "1".into())], body, "application/json")
    };
    match kind {
        k if k.is_tool_result() && method == "tools/call" => reply(Ok(planted::tool_result(kind, turn))),
        Kind::Status(400 | 404 | 503) => json_error(match kind {
            Kind::Status(s) => s,
            _ => 500,
        }),
        Kind::Status(500) => Step::Status(
            StatusCode::INTERNAL_SERVER_ERROR,
            vec![(HeaderName::from_static("x-debug-trace"), header_safe(&noise))],
            format!("<html><body><h1>500</h1><pre>{noise}</pre></body></html>"),
            "text/html",
        ),
        Kind::Status(s) => Step::Status(
            StatusCode::from_u16(s).unwrap_or(StatusCode::BAD_GATEWAY),
            vec![(HeaderName::from_static("x-upstream-error"), header_safe(&noise))],
            noise,
            "text/plain",
        ),
        Kind::Unauthorized => Step::Status(
            StatusCode::UNAUTHORIZED,
            vec![(header::WWW_AUTHENTICATE, format!("Bearer realm=\"{}\"", header_safe(&noise)))],
            json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string(),
            "application/json",
        ),
        Kind::Garbage => Step::Status(StatusCode::OK, Vec::new(), format!("{{not json {noise}"), "application/json"),
        Kind::WrongType => {
            Step::Status(StatusCode::OK, Vec::new(), format!("<html><pre>{noise}</pre></html>"), "text/html")
        }
        Kind::UnknownId if mode == Mode::Json => Step::Reply {
            prelude: Vec::new(),
            message: json!({"jsonrpc": "2.0", "id": "nobody-asked", "error": error}),
        },
        Kind::UnknownId => Step::Reply {
            prelude: vec![json!({"jsonrpc": "2.0", "id": "nobody-asked", "error": error}).to_string()],
            message: json!({"jsonrpc": "2.0", "id": id, "error": error}),
        },
        Kind::SseGarbage | Kind::SseClose if mode == Mode::Sse => {
            let prelude =
                vec![format!("not json {noise}"), format!("{{\"jsonrpc\": \"2.0\", \"junk\": {}}}", json!(noise))];
            if kind == Kind::SseClose {
                Step::Close { prelude }
            } else {
                Step::Reply { prelude, message: json!({"jsonrpc": "2.0", "id": id, "error": error}) }
            }
        }
        _ => Step::Reply { prelude: Vec::new(), message: json!({"jsonrpc": "2.0", "id": id, "error": error}) },
    }
}

/// One line of planted text, safe as a header value.
fn header_safe(text: &str) -> String {
    text.chars().filter(|c| c.is_ascii_graphic() || *c == ' ').collect()
}

/// One SSE event carrying `data`, with a comment and an id that carry secrets too.
fn sse_event(n: usize, data: &str) -> String {
    let mut event = String::from(": debug ghp_R2d2C3poX9y8Z7w6V5u4T3s2R1q0P9o8N7m6 /home/deploy/.ssh/id_rsa\n");
    event.push_str(&format!("id: sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c-{n}\nevent: message\n"));
    for line in data.split('\n') {
        event.push_str("data: ");
        event.push_str(line);
        event.push('\n');
    }
    event.push('\n');
    event
}

fn respond(step: Step, mode: Mode) -> Response {
    let session = (HeaderName::from_static("mcp-session-id"), HeaderValue::from_static("leaky-session"));
    match step {
        Step::Accepted => StatusCode::ACCEPTED.into_response(),
        Step::Status(status, headers, body, content_type) => {
            let mut resp = (status, [(header::CONTENT_TYPE, content_type)], body).into_response();
            for (name, value) in headers {
                if let Ok(v) = HeaderValue::from_str(&value) {
                    resp.headers_mut().insert(name, v);
                }
            }
            resp
        }
        Step::Reply { message, .. } if mode == Mode::Json => {
            ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json")), session], message.to_string())
                .into_response()
        }
        Step::Reply { prelude, message } => {
            let mut events: Vec<String> = prelude.iter().enumerate().map(|(n, d)| sse_event(n, d)).collect();
            events.push(sse_event(events.len(), &message.to_string()));
            sse_response(events)
        }
        Step::Close { prelude } => sse_response(prelude.iter().enumerate().map(|(n, d)| sse_event(n, d)).collect()),
    }
}

fn sse_response(events: Vec<String>) -> Response {
    let stream = futures::stream::iter(events.into_iter().map(|e| Ok::<_, Infallible>(Bytes::from(e))));
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header("mcp-session-id", "leaky-session")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn parse(body: &Bytes) -> Option<Value> {
    serde_json::from_slice(body).ok()
}

async fn json_post(State(fake): State<Arc<Fake>>, body: Bytes) -> Response {
    let Some(msg) = parse(&body) else { return StatusCode::BAD_REQUEST.into_response() };
    respond(step(&fake, &msg, Mode::Json, false), Mode::Json)
}

async fn sse_post(State(fake): State<Arc<Fake>>, body: Bytes) -> Response {
    let Some(msg) = parse(&body) else { return StatusCode::BAD_REQUEST.into_response() };
    respond(step(&fake, &msg, Mode::Sse, false), Mode::Sse)
}

async fn badinit_post(State(fake): State<Arc<Fake>>, body: Bytes) -> Response {
    let Some(msg) = parse(&body) else { return StatusCode::BAD_REQUEST.into_response() };
    respond(step(&fake, &msg, Mode::Json, true), Mode::Json)
}

async fn badinit500_post(State(fake): State<Arc<Fake>>, body: Bytes) -> Response {
    fake.requests.fetch_add(1, Ordering::Relaxed);
    if parse(&body).is_some_and(|m| m.get("id").is_none()) {
        return StatusCode::ACCEPTED.into_response();
    }
    let texts = planted::texts(Kind::Status(500), 0);
    let page = format!("<html><body><pre>{}</pre></body></html>", planted::message(&texts));
    (StatusCode::INTERNAL_SERVER_ERROR, [(header::CONTENT_TYPE, "text/html")], page).into_response()
}

#[derive(serde::Deserialize)]
struct SessionQuery {
    session: String,
}

/// Opens an HTTP+SSE stream: the `endpoint` event, then whatever the POSTs answer.
fn open_stream(fake: &Fake, endpoint: &str) -> Response {
    let n = fake.next_stream.fetch_add(1, Ordering::Relaxed);
    let session = format!("s{n}");
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    let _ = tx.send(format!("event: endpoint\ndata: {endpoint}?session={session}\n\n"));
    fake.streams.lock().insert(session, tx);
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        let event = rx.recv().await?;
        Some((Ok::<_, Infallible>(Bytes::from(event)), rx))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

async fn legacy_stream(State(fake): State<Arc<Fake>>) -> Response {
    open_stream(&fake, "/legacy/messages")
}

async fn badinit_stream(State(fake): State<Arc<Fake>>) -> Response {
    open_stream(&fake, "/badinit/messages")
}

/// An HTTP+SSE POST: 202, and the answer on the session's stream (an HTTP status kind
/// answers the POST itself).
fn legacy(fake: &Fake, session: &str, body: &Bytes, badinit: bool) -> Response {
    let Some(msg) = parse(body) else { return StatusCode::BAD_REQUEST.into_response() };
    let Some(tx) = fake.streams.lock().get(session).cloned() else { return StatusCode::NOT_FOUND.into_response() };
    let proper = |n: usize| {
        let error = planted::error_for(Kind::Code(-32603), 0);
        sse_event(n, &json!({"jsonrpc": "2.0", "id": msg["id"], "error": error}).to_string())
    };
    match step(fake, &msg, Mode::Sse, badinit) {
        // A body on a 2xx is no answer here: it goes on the stream, then a real answer.
        Step::Status(status, _, body, _) if status.is_success() => {
            let _ = tx.send(sse_event(0, &body));
            let _ = tx.send(proper(1));
            StatusCode::ACCEPTED.into_response()
        }
        status @ Step::Status(..) => respond(status, Mode::Json),
        Step::Accepted => StatusCode::ACCEPTED.into_response(),
        Step::Reply { prelude, message } => {
            for (n, data) in prelude.iter().enumerate() {
                let _ = tx.send(sse_event(n, data));
            }
            let _ = tx.send(sse_event(prelude.len(), &message.to_string()));
            // A malformed error is no answer on a shared stream: answer properly too.
            if message.get("error").is_some_and(|e| !(e["code"].is_i64() && e["message"].is_string())) {
                let _ = tx.send(proper(prelude.len() + 1));
            }
            StatusCode::ACCEPTED.into_response()
        }
        // Closing would end the whole session: the noise, then an error instead.
        Step::Close { prelude } => {
            for (n, data) in prelude.iter().enumerate() {
                let _ = tx.send(sse_event(n, data));
            }
            let _ = tx.send(proper(prelude.len()));
            StatusCode::ACCEPTED.into_response()
        }
    }
}

async fn legacy_post(State(fake): State<Arc<Fake>>, Query(q): Query<SessionQuery>, body: Bytes) -> Response {
    legacy(&fake, &q.session, &body, false)
}

async fn badinit_legacy_post(State(fake): State<Arc<Fake>>, Query(q): Query<SessionQuery>, body: Bytes) -> Response {
    legacy(&fake, &q.session, &body, true)
}
