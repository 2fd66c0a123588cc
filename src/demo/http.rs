//! The Streamable HTTP transport at `/mcp` — legacy sessions here, the modern era
//! (2026-07-28) in `modern.rs` — the HTTP+SSE transport of 2024-11-05 at `/sse` (in
//! `sse.rs`), plus two test hooks: `POST /admin/drop-sessions` and `GET /admin/stats`.
//!
//! A POSTed request is answered with JSON, or with an SSE stream when it will
//! send messages before its response (progress, sampling, roots, logging,
//! resource updates; see [`wants_stream`]). Server-to-client requests travel on
//! that stream; the client answers them with separate POSTs.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt as _};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::rpc::{self, RpcError, code};
use super::server::{Accepted, DemoServer, Outcome, PendingReply, wants_stream};
use super::session::{Outbound, Session, Transport};

/// The session header, as sent and expected.
pub(crate) const SESSION_HEADER: &str = "mcp-session-id";

/// Largest accepted POST body, in bytes.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// Bind `addr`, print `listening on http://IP:PORT/mcp` on stdout, serve forever.
pub(crate) async fn serve(server: DemoServer, addr: &str) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))?;
    let local = listener.local_addr()?;
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "listening on http://{}/mcp", shown_addr(local))?;
        stdout.flush()?;
    }
    tracing::info!(%local, "demo upstream listening");
    axum::serve(listener, router(server)).await?;
    Ok(())
}

/// The address to print: a wildcard bind is reachable on loopback.
fn shown_addr(local: SocketAddr) -> SocketAddr {
    match local.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), local.port()),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), local.port()),
        _ => local,
    }
}

/// The demo server's routes, ready to serve.
pub(crate) fn router(server: DemoServer) -> Router {
    let state = Arc::new(HttpState { server, sessions: Mutex::new(HashMap::new()), parked: Arc::default() });
    Router::new()
        .route("/mcp", post(post_mcp).get(get_mcp).delete(delete_mcp))
        .merge(sse::routes())
        .route("/admin/drop-sessions", post(drop_sessions))
        .route("/admin/stats", get(stats))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

struct HttpState {
    server: DemoServer,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Modern-era calls waiting for the client's input.
    parked: Arc<super::modern::Parked>,
}

type Shared = Arc<HttpState>;

impl HttpState {
    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    fn create_session(&self, transport: Transport) -> Arc<Session> {
        let id = format!("{:032x}", rand::random::<u128>());
        let session = Session::new(Some(id.clone()), transport);
        self.sessions().insert(id, Arc::clone(&session));
        session
    }

    fn remove_session(&self, id: &str) -> Option<Arc<Session>> {
        let session = self.sessions().remove(id);
        if let Some(session) = &session {
            session.close();
        }
        session
    }

    /// The session named by the request headers.
    fn session(&self, headers: &HeaderMap) -> Result<Arc<Session>, SessionError> {
        let name = headers.get(SESSION_HEADER).ok_or(SessionError::Missing)?;
        name.to_str().ok().and_then(|name| self.sessions().get(name).cloned()).ok_or(SessionError::Unknown)
    }
}

/// Why a request names no usable session.
#[derive(Debug, Clone, Copy)]
enum SessionError {
    /// No `Mcp-Session-Id` header: 400.
    Missing,
    /// An id that is unknown, ended or dropped: 404, the client must re-initialize.
    Unknown,
}

impl SessionError {
    /// The HTTP answer, with a JSON-RPC error body for request `id`.
    fn response(self, id: &Value) -> Response {
        let (status, err) = match self {
            Self::Missing => {
                (StatusCode::BAD_REQUEST, RpcError::new(code::INVALID_REQUEST, "Missing Mcp-Session-Id header"))
            }
            Self::Unknown => (StatusCode::NOT_FOUND, RpcError::new(code::SESSION_NOT_FOUND, "Session not found")),
        };
        json_response(status, &err.response(id))
    }
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body.to_string()).into_response()
}

fn unavailable(retry_after_secs: u64) -> Response {
    let retry_after = retry_after_secs.to_string();
    (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, retry_after)], "upstream temporarily unavailable")
        .into_response()
}

async fn post_mcp(State(state): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(msg) => msg,
        Err(err) => {
            tracing::warn!(error = %err, "demo: POST body is not JSON");
            return json_response(StatusCode::BAD_REQUEST, &rpc::parse_error(err));
        }
    };
    if super::modern::is_modern(&headers) && !state.server.config().legacy_only {
        return super::modern::post(&state.server, &state.parked, &headers, msg).await;
    }
    let request_id = msg.get("id").cloned().unwrap_or(Value::Null);
    let initialize = msg.get("method").and_then(Value::as_str) == Some("initialize") && !request_id.is_null();
    let session = if initialize {
        state.create_session(Transport::Http)
    } else {
        match state.session(&headers) {
            Ok(session) => session,
            Err(err) => return err.response(&request_id),
        }
    };
    state.server.record_headers(&session, &headers);
    let streaming = wants_stream(&msg);
    let (out, messages) = if streaming {
        let (out, rx) = Outbound::channel();
        (out, Some(rx))
    } else {
        // Nothing should be tied to a JSON answer; stray messages go to the GET stream.
        let out = session.standalone().unwrap_or_else(|| Outbound::channel().0);
        (out, None)
    };
    let pending = match state.server.accept(&session, msg, out) {
        Accepted::Request(pending) => pending,
        Accepted::Consumed => return StatusCode::ACCEPTED.into_response(),
        Accepted::Rejected(reply) => return json_response(StatusCode::BAD_REQUEST, &reply),
    };
    let mut response = match messages {
        Some(rx) => stream_reply(pending, rx, state.server.config().retry_after_secs).await,
        None => match pending.outcome().await {
            Some(Outcome::Reply(reply)) => json_response(StatusCode::OK, &reply),
            Some(Outcome::Unavailable) => unavailable(state.server.config().retry_after_secs),
            // Cancelled: the request gets no answer.
            None => StatusCode::ACCEPTED.into_response(),
        },
    };
    if initialize {
        let session_id = session.id().unwrap_or_default();
        if response.status() == StatusCode::OK
            && let Ok(value) = HeaderValue::from_str(session_id)
        {
            response.headers_mut().insert(SESSION_HEADER, value);
        } else {
            state.remove_session(session_id);
        }
    }
    response
}

/// One item of a POST's SSE stream.
enum Frame {
    Message(Value),
    Unavailable,
}

/// Answer a request as SSE: its related messages, then its response. If the
/// very first thing is a transient failure, the whole POST becomes a 503.
async fn stream_reply(
    pending: PendingReply,
    mut messages: mpsc::UnboundedReceiver<Value>,
    retry_after_secs: u64,
) -> Response {
    let id = pending.id().clone();
    let (frames, mut frames_rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let outcome = pending.outcome();
        tokio::pin!(outcome);
        loop {
            tokio::select! {
                biased;
                Some(msg) = messages.recv() => {
                    let _ = frames.send(Frame::Message(msg));
                }
                outcome = &mut outcome => {
                    while let Ok(msg) = messages.try_recv() {
                        let _ = frames.send(Frame::Message(msg));
                    }
                    let last = match outcome {
                        Some(Outcome::Reply(reply)) => Frame::Message(reply),
                        Some(Outcome::Unavailable) => Frame::Unavailable,
                        None => break,
                    };
                    let _ = frames.send(last);
                    break;
                }
            }
        }
    });
    let first = match frames_rx.recv().await {
        None => return StatusCode::ACCEPTED.into_response(),
        Some(Frame::Unavailable) => return unavailable(retry_after_secs),
        Some(Frame::Message(msg)) => msg,
    };
    let rest = UnboundedReceiverStream::new(frames_rx).map(move |frame| match frame {
        Frame::Message(msg) => msg,
        // Headers are already out: report the fault in-band instead.
        Frame::Unavailable => RpcError::internal("transient failure").response(&id),
    });
    sse(futures::stream::once(async move { first }).chain(rest))
}

fn sse(messages: impl Stream<Item = Value> + Send + 'static) -> Response {
    let events = messages.map(|msg| Ok::<_, Infallible>(Event::default().event("message").data(msg.to_string())));
    Sse::new(events).into_response()
}

async fn get_mcp(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let accepts_sse =
        headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("text/event-stream"));
    if !accepts_sse {
        return (StatusCode::NOT_ACCEPTABLE, "GET /mcp needs Accept: text/event-stream").into_response();
    }
    let session = match state.session(&headers) {
        Ok(session) => session,
        Err(err) => return err.response(&Value::Null),
    };
    let (out, rx) = Outbound::channel();
    if !session.open_standalone(out) {
        return (StatusCode::CONFLICT, "a standalone stream is already open").into_response();
    }
    sse(UnboundedReceiverStream::new(rx))
}

async fn delete_mcp(State(state): State<Shared>, headers: HeaderMap) -> Response {
    match state.session(&headers) {
        Ok(session) => {
            if let Some(id) = session.id() {
                state.remove_session(id);
            }
            state.server.record_session_closed(&session, "DELETE");
            StatusCode::OK.into_response()
        }
        Err(err) => err.response(&Value::Null),
    }
}

async fn drop_sessions(State(state): State<Shared>) -> Response {
    // Forget only, like a server that lost its session table: calls in flight
    // still answer, later requests with these ids get 404.
    let dropped = state.sessions().drain().count();
    json_response(StatusCode::OK, &json!({"dropped": dropped}))
}

async fn stats(State(state): State<Shared>) -> Response {
    let sessions = state.sessions().len();
    json_response(StatusCode::OK, &state.server.stats(sessions))
}

mod sse;

#[cfg(test)]
mod tests {
    //! The HTTP transport against a real listener on port 0.

    use std::time::Duration;

    use futures::StreamExt as _;
    use serde_json::{Value, json};

    use super::*;
    use crate::demo::DemoConfig;

    struct Client {
        http: reqwest::Client,
        url: String,
        base: String,
    }

    impl Client {
        async fn start() -> Self {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.ok();
            let listener = listener.unwrap_or_else(|| panic!("cannot bind"));
            let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
            let app = router(DemoServer::new(DemoConfig::default(), None));
            tokio::spawn(async move { axum::serve(listener, app).await });
            Self { http: reqwest::Client::new(), url: format!("http://{addr}/mcp"), base: format!("http://{addr}") }
        }

        async fn post(&self, session: Option<&str>, msg: &Value) -> reqwest::Response {
            let mut req = self
                .http
                .post(&self.url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(msg.to_string());
            if let Some(id) = session {
                req = req.header(SESSION_HEADER, id);
            }
            req.send().await.unwrap_or_else(|err| panic!("POST failed: {err}"))
        }

        async fn initialize(&self) -> String {
            let msg = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}}});
            let resp = self.post(None, &msg).await;
            assert_eq!(resp.status(), 200);
            let id = resp.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
            assert_eq!(id.len(), 32);
            assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
            let body: Value = serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default();
            assert_eq!(body["result"]["protocolVersion"], "2025-06-18");
            id
        }
    }

    fn call(id: i64, name: &str, arguments: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
    }

    /// The `data:` payloads of an SSE body.
    fn sse_messages(body: &str) -> Vec<Value> {
        body.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    }

    async fn json_body(resp: reqwest::Response) -> Value {
        serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default()
    }

    #[tokio::test]
    async fn sessions_json_answers_and_errors() {
        let client = Client::start().await;
        let session = client.initialize().await;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(client.post(Some(&session), &initialized).await.status(), 202);

        let resp = client.post(Some(&session), &call(1, "echo", json!({"message": "hi"}))).await;
        assert_eq!(resp.status(), 200);
        assert!(resp.headers()["content-type"].to_str().unwrap_or_default().starts_with("application/json"));
        assert_eq!(json_body(resp).await["result"]["content"][0]["text"], "hi");

        assert_eq!(client.post(None, &call(2, "echo", json!({"message": "x"}))).await.status(), 400);
        let resp = client.post(Some("0123"), &call(3, "echo", json!({"message": "x"}))).await;
        assert_eq!(resp.status(), 404);
        assert_eq!(json_body(resp).await["error"]["code"], -32001);

        let flaky = call(4, "flaky", json!({"key": "h", "fail_first": 1, "mode": "http_503"}));
        let resp = client.post(Some(&session), &flaky).await;
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()["retry-after"], "0");
        assert_eq!(client.post(Some(&session), &flaky).await.status(), 200);

        let stats: Value = client
            .http
            .get(format!("{}/admin/stats", client.base))
            .send()
            .await
            .map(|r| r.text())
            .unwrap_or_else(|err| panic!("{err}"))
            .await
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        assert_eq!(stats["calls"]["flaky"], 2);
        assert_eq!(stats["requests"]["initialize"], 1);
        assert_eq!(stats["sessions"], 1);

        let dropped = client.http.post(format!("{}/admin/drop-sessions", client.base)).send().await;
        assert!(dropped.is_ok_and(|r| r.status() == 200));
        assert_eq!(client.post(Some(&session), &call(5, "echo", json!({"message": "x"}))).await.status(), 404);

        let session = client.initialize().await;
        let deleted = client.http.delete(&client.url).header(SESSION_HEADER, &session).send().await;
        assert!(deleted.is_ok_and(|r| r.status() == 200));
        assert_eq!(client.post(Some(&session), &call(6, "echo", json!({"message": "x"}))).await.status(), 404);
    }

    #[tokio::test]
    async fn progress_streams_as_sse() {
        let client = Client::start().await;
        let session = client.initialize().await;
        let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"ms": 100}, "_meta": {"progressToken": 9}}});
        let resp = client.post(Some(&session), &msg).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let body = resp.text().await.unwrap_or_default();
        assert!(body.contains("event: message"), "{body}");
        let messages = sse_messages(&body);
        let (last, notes) = messages.split_last().unwrap_or_else(|| panic!("empty stream"));
        assert_eq!(last["result"]["content"][0]["text"], "slept 100 ms");
        assert!(!notes.is_empty());
        assert!(notes.iter().all(|n| n["method"] == "notifications/progress" && n["params"]["progressToken"] == 9));
    }

    #[tokio::test]
    async fn sampling_request_travels_on_the_post_stream() {
        let client = Client::start().await;
        let session = client.initialize().await;
        let resp = client.post(Some(&session), &call(1, "sample", json!({"prompt": "hi"}))).await;
        assert_eq!(resp.status(), 200);
        let mut stream = resp.bytes_stream();
        let mut text = String::new();
        let request = loop {
            let chunk = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
            let Ok(Some(Ok(chunk))) = chunk else { panic!("stream ended early: {text}") };
            text.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(msg) = sse_messages(&text).into_iter().next() {
                break msg;
            }
        };
        assert_eq!(request["method"], "sampling/createMessage");
        let answer = json!({"jsonrpc": "2.0", "id": request["id"],
            "result": {"role": "assistant", "content": {"type": "text", "text": "yo"}, "model": "m"}});
        assert_eq!(client.post(Some(&session), &answer).await.status(), 202);
        while let Ok(Some(Ok(chunk))) = tokio::time::timeout(Duration::from_secs(5), stream.next()).await {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        let messages = sse_messages(&text);
        assert_eq!(messages.len(), 2, "{text}");
        assert_eq!(messages[1]["result"]["content"][0]["text"], "sampled: yo");
    }

    #[tokio::test]
    async fn cancelled_call_gets_no_response() {
        let client = Client::start().await;
        let session = client.initialize().await;
        let slow = {
            let (client_http, url, session) = (client.http.clone(), client.url.clone(), session.clone());
            tokio::spawn(async move {
                client_http
                    .post(url)
                    .header(SESSION_HEADER, session)
                    .body(call(7, "sleep", json!({"ms": 10_000})).to_string())
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}});
        assert_eq!(client.post(Some(&session), &cancel).await.status(), 202);
        let status = tokio::time::timeout(Duration::from_secs(2), slow).await;
        assert!(matches!(status, Ok(Ok(Ok(202)))), "{status:?}");
    }
}
