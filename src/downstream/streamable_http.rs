//! Streamable HTTP for clients (legacy session era, 2025-03-26 … 2025-11-25).
//!
//! `POST /mcp[/<upstream>]` carries one message (or, in 2025-03-26, a batch); a request is
//! answered with JSON when nothing precedes its response, else with an SSE stream that
//! carries related notifications and server requests first. `GET` opens the session's
//! stream for messages not tied to a request; `DELETE` ends the session.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use futures::{Stream, StreamExt};
use tokio::sync::{mpsc, oneshot};

use crate::gateway::{Answer, Gateway, InitError};
use crate::jsonrpc::{self, DecodeError, Id, Message, Payload, code};
use crate::mcp;
use crate::policy::origin::OriginPolicy;
use crate::session::{Scope, Session};
use crate::sse;

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// Interval of SSE comments that keep idle streams (and their proxies) alive.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Shared state of the HTTP listener.
#[derive(Clone)]
pub struct HttpState {
    /// The gateway core.
    pub gateway: Arc<Gateway>,
    /// Host/Origin validation.
    pub origin: OriginPolicy,
    /// Largest accepted body.
    pub max_body_bytes: usize,
}

/// The MCP routes.
pub fn router(state: HttpState) -> Router {
    Router::new().route("/mcp", any(aggregate)).route("/mcp/{upstream}", any(single)).with_state(state)
}

async fn aggregate(State(st): State<HttpState>, method: Method, headers: HeaderMap, body: Body) -> Response {
    endpoint(st, Scope::Aggregate, method, headers, body).await
}

async fn single(
    State(st): State<HttpState>,
    Path(upstream): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(handle) = st.gateway.upstreams().get(&upstream) else {
        return error_response(StatusCode::NOT_FOUND, None, code::INVALID_REQUEST, "No such upstream");
    };
    let scope = Scope::Single(Arc::clone(&handle.name));
    endpoint(st, scope, method, headers, body).await
}

async fn endpoint(st: HttpState, scope: Scope, method: Method, headers: HeaderMap, body: Body) -> Response {
    if let Err(refusal) = st.origin.check(&headers) {
        return error_response(StatusCode::FORBIDDEN, None, code::INVALID_REQUEST, &format!("Forbidden: {refusal}"));
    }
    match method {
        Method::POST => post(st, scope, headers, body).await,
        Method::GET => get(st, scope, headers).await,
        Method::DELETE => delete(st, scope, headers).await,
        _ => {
            let mut resp =
                error_response(StatusCode::METHOD_NOT_ALLOWED, None, code::INVALID_REQUEST, "Method not allowed");
            resp.headers_mut().insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            resp
        }
    }
}

/// What the client's `Accept` header allows.
struct Accepts {
    json: bool,
    sse: bool,
}

fn accepts(headers: &HeaderMap) -> Accepts {
    let values: Vec<&str> = headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).collect();
    if values.is_empty() {
        return Accepts { json: true, sse: true };
    }
    let has = |ty: &str| {
        values.iter().flat_map(|v| v.split(',')).any(|item| {
            let media = item.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
            media == ty || media == "*/*" || (media.ends_with("/*") && ty.starts_with(&media[..media.len() - 1]))
        })
    };
    Accepts { json: has("application/json"), sse: has("text/event-stream") }
}

async fn post(st: HttpState, scope: Scope, headers: HeaderMap, body: Body) -> Response {
    let accept = accepts(&headers);
    if !accept.json && !accept.sse {
        return error_response(
            StatusCode::NOT_ACCEPTABLE,
            None,
            code::INVALID_REQUEST,
            "Not Acceptable: Accept must include application/json and text/event-stream",
        );
    }
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !content_type.to_ascii_lowercase().starts_with("application/json") {
        return error_response(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            None,
            code::INVALID_REQUEST,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    let bytes = match axum::body::to_bytes(body, st.max_body_bytes).await {
        Ok(b) => b,
        Err(_) => {
            return error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                None,
                code::INVALID_REQUEST,
                &format!("Request body larger than {} bytes", st.max_body_bytes),
            );
        }
    };
    let payload = match jsonrpc::split_payload(&bytes) {
        Ok(p) => p,
        Err(e) => return decode_error_response(&e),
    };
    match payload {
        Payload::Single(raw) => {
            let msg = match jsonrpc::decode(raw.get()) {
                Ok(m) => m,
                Err(e) => return decode_error_response(&e),
            };
            if let Message::Request(req) = &msg
                && req.method == mcp::method::INITIALIZE
            {
                return initialize(&st, scope, req).await;
            }
            let session = match session_for(&st, &scope, &headers) {
                Ok(s) => s,
                Err(resp) => return *resp,
            };
            dispatch(&st, &session, msg, accept.sse).await
        }
        Payload::Batch(items) => {
            let session = match session_for(&st, &scope, &headers) {
                Ok(s) => s,
                Err(resp) => return *resp,
            };
            if !mcp::allows_batches(&session.version) {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    None,
                    code::INVALID_REQUEST,
                    "JSON-RPC batches are only allowed in protocol version 2025-03-26",
                );
            }
            batch(&st, &session, items.iter().map(|r| r.get().to_owned()).collect()).await
        }
    }
}

async fn initialize(st: &HttpState, scope: Scope, req: &jsonrpc::Request) -> Response {
    match st.gateway.initialize(scope, req).await {
        Ok((session, result)) => {
            let body = jsonrpc::encode_response(Some(&req.id), Ok(&result));
            let mut resp = json_response(StatusCode::OK, body);
            if let Ok(v) = HeaderValue::from_str(&session.id) {
                resp.headers_mut().insert(SESSION_HEADER, v);
            }
            resp
        }
        Err(InitError::Invalid(why)) => {
            error_response(StatusCode::BAD_REQUEST, Some(&req.id), code::INVALID_PARAMS, &why)
        }
        Err(InitError::Full) => {
            let mut resp = error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                Some(&req.id),
                code::INTERNAL_ERROR,
                "Too many sessions",
            );
            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            resp
        }
        Err(InitError::Failed(e)) => {
            let body = st.gateway.rewriter().failure(&e, None);
            json_response(StatusCode::OK, jsonrpc::encode_reply(Some(&req.id), &body))
        }
    }
}

/// Finds the session a request names, with the spec's status codes when it cannot.
#[allow(clippy::result_large_err)]
fn session_for(st: &HttpState, scope: &Scope, headers: &HeaderMap) -> Result<Arc<Session>, Box<Response>> {
    if let Some(version) = headers.get(VERSION_HEADER) {
        let ok = version.to_str().is_ok_and(mcp::is_supported);
        if !ok {
            return Err(Box::new(error_response(
                StatusCode::BAD_REQUEST,
                None,
                code::INVALID_REQUEST,
                &format!("Unsupported protocol version (supported: {})", mcp::LEGACY_VERSIONS.join(", ")),
            )));
        }
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            None,
            code::INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required",
        )));
    };
    match st.gateway.session(id) {
        Some(session) if &session.scope == scope => Ok(session),
        _ => Err(Box::new(error_response(StatusCode::NOT_FOUND, None, code::INVALID_REQUEST, "Session not found"))),
    }
}

async fn dispatch(st: &HttpState, session: &Arc<Session>, msg: Message, sse_ok: bool) -> Response {
    match msg {
        Message::Notification(n) => {
            st.gateway.handle_notification(session, n).await;
            accepted()
        }
        Message::Response(r) => {
            st.gateway.handle_response(session, r).await;
            accepted()
        }
        Message::Request(req) => answer(st, session, req, sse_ok).await,
    }
}

/// Runs a request in its own task (a dropped connection is not a cancellation) and
/// answers with JSON, or with SSE as soon as something precedes the response.
async fn answer(st: &HttpState, session: &Arc<Session>, req: jsonrpc::Request, sse_ok: bool) -> Response {
    let (out_tx, mut out_rx) = mpsc::channel::<String>(64);
    let (final_tx, mut final_rx) = oneshot::channel::<Answer>();
    let gateway = Arc::clone(&st.gateway);
    let task_session = Arc::clone(session);
    let id = req.id.clone();
    tokio::spawn(async move {
        let out = sse_ok.then_some(out_tx);
        let response = gateway.handle_request(&task_session, req, out).await;
        let _ = final_tx.send(response);
    });
    let first = tokio::select! {
        biased;
        Some(message) = out_rx.recv() => Some(message),
        response = &mut final_rx => {
            match out_rx.try_recv() {
                Ok(message) => {
                    // Something preceded the answer after all: stream both.
                    let tail = futures::stream::once(async move { message })
                        .chain(tokio_stream::wrappers::ReceiverStream::new(out_rx))
                        .chain(futures::stream::iter(response.ok().map(|a| a.body)));
                    return sse_response(tail);
                }
                Err(_) => {
                    return match response {
                        Ok(Answer { body, overloaded: Some(after) }) => {
                            let mut resp = json_response(StatusCode::SERVICE_UNAVAILABLE, body);
                            resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(after.as_secs().max(1)));
                            resp
                        }
                        Ok(answer) => json_response(StatusCode::OK, answer.body),
                        Err(_) => json_response(StatusCode::OK, internal_error(&id)),
                    };
                }
            }
        }
    };
    let head = futures::stream::iter(first);
    let rest = tokio_stream::wrappers::ReceiverStream::new(out_rx);
    let last =
        futures::stream::once(async move { final_rx.await.map(|a| a.body).unwrap_or_else(|_| internal_error(&id)) });
    sse_response(head.chain(rest).chain(last))
}

fn internal_error(id: &Id) -> String {
    jsonrpc::encode_error(Some(id), code::INTERNAL_ERROR, "Internal error", None)
}

/// A 2025-03-26 batch: every request runs concurrently; the answer is one JSON array.
async fn batch(st: &HttpState, session: &Arc<Session>, items: Vec<String>) -> Response {
    let mut requests = Vec::new();
    let mut answers = Vec::new();
    for text in items {
        match jsonrpc::decode(&text) {
            Ok(Message::Request(req)) if req.method == mcp::method::INITIALIZE => answers.push(jsonrpc::encode_error(
                Some(&req.id),
                code::INVALID_REQUEST,
                "initialize must not be part of a batch",
                None,
            )),
            Ok(Message::Request(req)) => requests.push(req),
            Ok(Message::Notification(n)) => st.gateway.handle_notification(session, n).await,
            Ok(Message::Response(r)) => st.gateway.handle_response(session, r).await,
            Err(e) => answers.push(decode_error_body(&e)),
        }
    }
    let runs = requests.into_iter().map(|req| st.gateway.handle_request(session, req, None));
    answers.extend(futures::future::join_all(runs).await.into_iter().map(|a| a.body));
    if answers.is_empty() {
        return accepted();
    }
    json_response(StatusCode::OK, format!("[{}]", answers.join(",")))
}

async fn get(st: HttpState, scope: Scope, headers: HeaderMap) -> Response {
    if !accepts(&headers).sse {
        return error_response(
            StatusCode::NOT_ACCEPTABLE,
            None,
            code::INVALID_REQUEST,
            "Not Acceptable: Accept must include text/event-stream",
        );
    }
    let session = match session_for(&st, &scope, &headers) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    let Some(rx) = session.take_outbox() else {
        return error_response(
            StatusCode::CONFLICT,
            None,
            code::INVALID_REQUEST,
            "Conflict: only one GET stream is allowed per session",
        );
    };
    let messages = OutboxStream { rx: Some(rx), session: Arc::clone(&session) };
    let events = messages.map(|m| sse::encode_message(&m, None));
    let keep_alive = futures::stream::unfold((), |()| async {
        tokio::time::sleep(KEEP_ALIVE).await;
        Some((Bytes::from_static(b": keep-alive\n\n"), ()))
    });
    let body = futures::stream::select(events, keep_alive).map(Ok::<_, Infallible>);
    sse_headers(Response::new(Body::from_stream(body)))
}

/// The GET stream's messages; gives the queue back to the session when the client leaves.
struct OutboxStream {
    rx: Option<mpsc::Receiver<String>>,
    session: Arc<Session>,
}

impl Stream for OutboxStream {
    type Item = String;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<String>> {
        match self.rx.as_mut() {
            Some(rx) => rx.poll_recv(cx),
            None => std::task::Poll::Ready(None),
        }
    }
}

impl Drop for OutboxStream {
    fn drop(&mut self) {
        if let Some(rx) = self.rx.take() {
            self.session.return_outbox(rx);
        }
    }
}

async fn delete(st: HttpState, scope: Scope, headers: HeaderMap) -> Response {
    let session = match session_for(&st, &scope, &headers) {
        Ok(s) => s,
        Err(resp) => return *resp,
    };
    st.gateway.end_session(&session).await;
    StatusCode::OK.into_response()
}

fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

fn sse_response(messages: impl Stream<Item = String> + Send + 'static) -> Response {
    // Empty messages only asked for the stream to open; they carry nothing.
    let body = messages
        .filter(|m| futures::future::ready(!m.is_empty()))
        .map(|m| Ok::<_, Infallible>(sse::encode_message(&m, None)));
    sse_headers(Response::new(Body::from_stream(body)))
}

fn sse_headers(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

fn json_response(status: StatusCode, body: String) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

fn error_response(status: StatusCode, id: Option<&Id>, code: i64, message: &str) -> Response {
    json_response(status, jsonrpc::encode_error(id, code, message, None))
}

fn decode_error_body(e: &DecodeError) -> String {
    match e {
        DecodeError::Parse(why) => jsonrpc::encode_error(None, code::PARSE_ERROR, &format!("Parse error: {why}"), None),
        DecodeError::Invalid { id, reason } => {
            jsonrpc::encode_error(id.as_ref(), code::INVALID_REQUEST, &format!("Invalid Request: {reason}"), None)
        }
    }
}

fn decode_error_response(e: &DecodeError) -> Response {
    json_response(StatusCode::BAD_REQUEST, decode_error_body(e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_parsing() {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        let a = accepts(&h);
        assert!(a.json && a.sse);
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        let a = accepts(&h);
        assert!(!a.json && !a.sse);
        h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(accepts(&h).sse);
        h.insert(header::ACCEPT, HeaderValue::from_static("application/*;q=0.9"));
        let a = accepts(&h);
        assert!(a.json && !a.sse);
    }
}
