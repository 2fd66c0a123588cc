//! Streamable HTTP for clients (legacy session era, 2025-03-26 … 2025-11-25).
//!
//! `POST /mcp[/<upstream>]` carries one message (or, in 2025-03-26, a batch); a request is
//! answered with JSON when nothing precedes its response, else with an SSE stream that
//! carries related notifications and server requests first. `GET` opens the session's
//! stream for messages not tied to a request; `DELETE` ends the session. Both kinds of
//! stream are resumable with `GET` and `Last-Event-ID` (see [`super::resumable`]).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use super::http::{Cx, Final, SESSION_HEADER, VERSION_HEADER, accepted, accepts, json_response, read_json_body};
use super::refusal::Refusal;
use super::run_to_end::RunToEnd;
use crate::gateway::{InitError, NoSession};
use crate::jsonrpc::{self, Message, Payload, code};
use crate::mcp;
use crate::mcp::trace_context::{self, TraceContext};
use crate::session::{Front, Scope, Session};

pub(super) async fn post(cx: &Cx<'_>, scope: Scope, body: Body) -> Response {
    let accept = accepts(&cx.headers);
    if !accept.json && !accept.sse {
        return cx.refuse(Refusal::NotAcceptable { stream: false }, None);
    }
    let bytes = match read_json_body(cx, body).await {
        Ok(b) => b,
        Err(refusal) => return cx.refuse(refusal, None),
    };
    let payload = match jsonrpc::split_payload(&bytes) {
        Ok(p) => p,
        Err(e) => return cx.refuse(Refusal::Malformed(e), None),
    };
    let st = cx.st;
    match payload {
        Payload::Single(text) => {
            let msg = match jsonrpc::decode(text) {
                Ok(m) => m,
                Err(e) => return cx.refuse(Refusal::Malformed(e), None),
            };
            let id = match &msg {
                Message::Request(req) => Some(req.id.clone()),
                _ => None,
            };
            if let Message::Request(req) = &msg
                && req.method == mcp::method::INITIALIZE
            {
                return initialize(cx, scope, req).await;
            }
            let session = match session_for(cx, &scope) {
                Ok(s) => s,
                Err(refusal) => return cx.refuse(refusal, id.as_ref()),
            };
            dispatch(cx, &session, msg, accept.sse).await
        }
        Payload::Batch(items) => {
            let session = match session_for(cx, &scope) {
                Ok(s) => s,
                Err(refusal) => return cx.refuse(refusal, None),
            };
            if !mcp::allows_batches(&session.version) {
                return cx.refuse(
                    Refusal::BadRequest("JSON-RPC batches are only allowed in protocol version 2025-03-26"),
                    None,
                );
            }
            let trace = trace_context::from_headers(&cx.headers);
            batch(st, &session, items.iter().map(|r| r.get().to_owned()).collect(), trace).await
        }
    }
}

async fn initialize(cx: &Cx<'_>, scope: Scope, req: &jsonrpc::Request) -> Response {
    let peer = cx.info.peer.map(|p| p.ip());
    let trace = trace_context::from_headers(&cx.headers);
    match cx.st.gateway.initialize(scope, req, peer, cx.principal.clone(), Front::StreamableHttp, trace).await {
        Ok((session, result)) => {
            let body = jsonrpc::encode_response(Some(&req.id), Ok(&result));
            let mut resp = json_response(StatusCode::OK, body);
            if let Ok(v) = HeaderValue::from_str(session.id()) {
                resp.headers_mut().insert(SESSION_HEADER, v);
            }
            resp
        }
        Err(InitError::Invalid(why)) => cx.refuse(Refusal::InvalidInitialize(why), Some(&req.id)),
        Err(InitError::Full { retry_after }) => {
            crate::telemetry::metrics::load_shed("sessions");
            cx.refuse(Refusal::TooManySessions { retry_after }, Some(&req.id))
        }
        Err(InitError::Failed(e)) => {
            let body = cx.st.gateway.rewriter().failure(&e, None);
            json_response(StatusCode::OK, jsonrpc::encode_reply(Some(&req.id), &body))
        }
    }
}

/// Finds the session a request names — live here, or resumed from its sealed id — with
/// the spec's status codes when it cannot. A session opened by another principal is not
/// found: its existence is not revealed. A session that would be resumed past a session
/// cap is refused as `initialize` would be.
fn session_for(cx: &Cx<'_>, scope: &Scope) -> Result<Arc<Session>, Refusal> {
    let headers = &cx.headers;
    if let Some(version) = headers.get(VERSION_HEADER)
        && !version.to_str().is_ok_and(mcp::is_supported)
    {
        return Err(Refusal::UnsupportedVersion);
    }
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return Err(Refusal::SessionRequired);
    };
    let peer = cx.info.peer.map(|p| p.ip());
    match cx.st.gateway.find_session(id, scope, peer, cx.principal.as_ref()) {
        Ok(session) => Ok(session),
        Err(NoSession::NotFound) => Err(Refusal::SessionNotFound),
        Err(NoSession::Full(full)) => {
            tracing::debug!(peer = ?peer, cap = ?full.cap, limit = full.limit, "refused to resume a session: the session table is full");
            crate::telemetry::metrics::load_shed("sessions");
            Err(Refusal::TooManySessions { retry_after: full.retry_after })
        }
    }
}

async fn dispatch(cx: &Cx<'_>, session: &Arc<Session>, msg: Message, sse_ok: bool) -> Response {
    let st = cx.st;
    match msg {
        Message::Notification(n) => {
            session.cancels().note(&n);
            st.gateway.handle_notification(session, n).await;
            accepted()
        }
        Message::Response(r) => {
            st.gateway.handle_response(session, r).await;
            accepted()
        }
        Message::Request(req) => answer(cx, session, req, sse_ok).await,
    }
}

/// Runs a request in its own task (a dropped connection is not a cancellation) and
/// answers with JSON, or with a resumable SSE stream as soon as something precedes the
/// response.
async fn answer(cx: &Cx<'_>, session: &Arc<Session>, req: jsonrpc::Request, sse_ok: bool) -> Response {
    let (out_tx, out_rx) = mpsc::channel::<String>(64);
    let gateway = Arc::clone(&cx.st.gateway);
    let task_session = Arc::clone(session);
    let id = req.id.clone();
    // A second request with an id in flight is refused by admission; only the first one
    // can be withheld.
    let tracked = session.cancels().track(&id);
    let trace = trace_context::from_headers(&cx.headers);
    let run = async move {
        let out = sse_ok.then_some(out_tx);
        let answer = gateway.handle_request(&task_session, req, out, trace).await;
        let (status, retry_after) = match answer.http {
            Some(hint) => (hint.status, Some(hint.retry_after)),
            None => (StatusCode::OK, None),
        };
        let withheld = tracked.is_some_and(|t| t.cancelled());
        Final { body: answer.body, status, retry_after, withheld }
    };
    // Boxed here: the future of this function and of those awaiting it stay small.
    super::resumable::json_or_stream(cx, session, RunToEnd::new(run), out_rx, id).await
}

/// A 2025-03-26 batch: every request runs concurrently; the answer is one JSON array.
/// The HTTP request's trace context goes with each of its requests.
async fn batch(
    st: &super::http::HttpState,
    session: &Arc<Session>,
    items: Vec<String>,
    trace: Option<TraceContext>,
) -> Response {
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
    let runs = requests.into_iter().map(|req| st.gateway.handle_request(session, req, None, trace.clone()));
    answers.extend(futures::future::join_all(runs).await.into_iter().map(|a| a.body));
    if answers.is_empty() {
        return accepted();
    }
    json_response(StatusCode::OK, format!("[{}]", answers.join(",")))
}

pub(super) async fn get(cx: &Cx<'_>, scope: Scope) -> Response {
    if !accepts(&cx.headers).sse {
        return cx.refuse(Refusal::NotAcceptable { stream: true }, None);
    }
    let session = match session_for(cx, &scope) {
        Ok(s) => s,
        Err(refusal) => return cx.refuse(refusal, None),
    };
    super::resumable::get(cx, &session).await
}

pub(super) async fn delete(cx: &Cx<'_>, scope: Scope) -> Response {
    let session = match session_for(cx, &scope) {
        Ok(s) => s,
        Err(refusal) => return cx.refuse(refusal, None),
    };
    cx.st.gateway.end_session(&session).await;
    StatusCode::OK.into_response()
}

fn decode_error_body(e: &jsonrpc::DecodeError) -> String {
    match e {
        jsonrpc::DecodeError::Parse(why) => {
            jsonrpc::encode_error(None, code::PARSE_ERROR, &format!("Parse error: {why}"), None)
        }
        jsonrpc::DecodeError::Invalid { id, reason } => {
            jsonrpc::encode_error(id.as_ref(), code::INVALID_REQUEST, &format!("Invalid Request: {reason}"), None)
        }
    }
}
