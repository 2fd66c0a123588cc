//! Streamable HTTP for modern-era clients (2026-07-28): one self-contained POST per
//! request, no session id (one sent is ignored, none is minted), GET and DELETE 405.
//!
//! A request is modern when its `MCP-Protocol-Version` header names no legacy version;
//! the ladder of [`crate::mcp::modern::classify`] then decides whether it is served
//! (an unknown version is answered -32022 with the versions seawall serves). Answers
//! are JSON, or SSE when progress or other related messages precede the response; a
//! client that closes the response stream before its answer cancels the request.
//! Envelope and parameter errors ride HTTP 400, an unknown or removed method 404.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::http::{Cx, Final, accepted, accepts, json_or_stream, json_response, read_json_body};
use super::refusal::Refusal;
use super::run_to_end::RunToEnd;
use crate::gateway::{ModernAnswer, ModernRequest};
use crate::jsonrpc::{self, Id, Message, Payload, code};
use crate::mcp::{self, modern};
use crate::session::Scope;

/// Whether a request speaks the modern era: its `MCP-Protocol-Version` header is present
/// and names no legacy version (an unknown one is the modern ladder's to refuse).
pub(super) fn is_modern_request(headers: &HeaderMap) -> bool {
    headers.get(super::http::VERSION_HEADER).is_some_and(|v| !v.to_str().is_ok_and(mcp::is_supported))
}

/// The one value of a routing header, `Err(name)` when it is given more than once.
fn single<'h>(headers: &'h HeaderMap, name: &'static str) -> Result<Option<&'h str>, &'static str> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(name);
    }
    Ok(first.and_then(|v| v.to_str().ok()))
}

/// The request's `Mcp-Param-*` headers, lowercase names, in order (repeats kept).
fn param_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with(modern::PARAM_HEADER_PREFIX))
        .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect()
}

fn answer(a: ModernAnswer) -> Final {
    Final { body: a.body, status: a.status, retry_after: a.retry_after, withheld: false }
}

fn rejected(id: Option<&Id>, rejection: modern::Rejection) -> Response {
    let a = ModernAnswer::error(id, rejection.code, &rejection.message, rejection.data);
    json_response(a.status, a.body)
}

/// Serves one modern request on `scope`.
pub(super) async fn serve(cx: &Cx<'_>, scope: Scope, method: &Method, body: Body) -> Response {
    if method != Method::POST {
        let mut resp = StatusCode::METHOD_NOT_ALLOWED.into_response();
        resp.headers_mut().insert(header::ALLOW, HeaderValue::from_static("POST"));
        return resp;
    }
    let accept = accepts(&cx.headers);
    if !accept.json {
        return cx.refuse(Refusal::NotAcceptable { stream: false }, None);
    }
    let bytes = match read_json_body(cx, body).await {
        Ok(b) => b,
        Err(refusal) => return cx.refuse(refusal, None),
    };
    let single_message = match jsonrpc::split_payload(&bytes) {
        Ok(Payload::Single(text)) => jsonrpc::decode(text),
        Ok(Payload::Batch(_)) => Err(jsonrpc::DecodeError::Invalid { id: None, reason: "a batch" }),
        Err(e) => Err(e),
    };
    let req = match single_message {
        Ok(Message::Request(req)) => req,
        Ok(Message::Notification(_)) => return notification(&cx.headers),
        Err(jsonrpc::DecodeError::Parse(why)) => {
            let body = jsonrpc::encode_error(None, code::PARSE_ERROR, &format!("Parse error: {why}"), None);
            return json_response(StatusCode::BAD_REQUEST, body);
        }
        Ok(Message::Response(_)) | Err(jsonrpc::DecodeError::Invalid { .. }) => {
            let message = "Invalid Request: the body must be a single JSON-RPC request or notification object";
            return json_response(
                StatusCode::BAD_REQUEST,
                jsonrpc::encode_error(None, code::INVALID_REQUEST, message, None),
            );
        }
    };
    let routing = (|| {
        Ok::<_, &'static str>(modern::RoutingHeaders {
            version: single(&cx.headers, modern::VERSION_HEADER)?,
            method: single(&cx.headers, modern::METHOD_HEADER)?,
            name: single(&cx.headers, modern::NAME_HEADER)?,
        })
    })();
    let routing = match routing {
        Ok(routing) => routing,
        Err(name) => {
            let message = format!("the {name} header appears more than once");
            let rejection = modern::Rejection { code: modern::HEADER_MISMATCH, message, data: None };
            return rejected(Some(&req.id), rejection);
        }
    };
    let envelope = match modern::classify(&req.method, req.params.as_deref(), routing) {
        Ok(envelope) => envelope,
        Err(rejection) => return rejected(Some(&req.id), rejection),
    };

    if req.method == modern::LISTEN {
        return listen(cx, scope, envelope, req, accept.sse).await;
    }
    let (out_tx, out_rx) = mpsc::channel::<String>(64);
    let abandoned = CancellationToken::new();
    let guard = abandoned.clone().drop_guard();
    let gateway = std::sync::Arc::clone(&cx.st.gateway);
    let principal = cx.principal.clone();
    let id = req.id.clone();
    let out = accept.sse.then_some(out_tx);
    let peer = cx.info.peer.map(|p| p.ip());
    let trace = crate::mcp::trace_context::from_headers(&cx.headers);
    let request =
        ModernRequest { scope, principal, envelope, req, param_headers: param_headers(&cx.headers), peer, trace };
    let run = async move { answer(gateway.handle_modern(request, out, abandoned).await) };
    // Boxed here: the future of this function and of those awaiting it stay small.
    json_or_stream(RunToEnd::new(run), out_rx, id, Some(guard)).await
}

/// `subscriptions/listen`: its answer is the stream (406 when the client does not take
/// SSE), kept alive with comments and ended when the gateway stops.
async fn listen(cx: &Cx<'_>, scope: Scope, envelope: modern::Envelope, req: jsonrpc::Request, sse: bool) -> Response {
    if !sse {
        return cx.refuse(Refusal::NotAcceptable { stream: true }, Some(&req.id));
    }
    let gateway = std::sync::Arc::clone(&cx.st.gateway);
    let peer = cx.info.peer.map(|p| p.ip());
    let request = ModernRequest {
        scope,
        principal: cx.principal.clone(),
        envelope,
        req,
        param_headers: Vec::new(),
        peer,
        trace: None,
    };
    match gateway.listen(request).await {
        Ok(messages) => super::http::long_stream(messages, cx.st.closing.clone()),
        Err(answer) => json_response(answer.status, answer.body),
    }
}

/// A notification POST: acknowledged (202) and dropped — the era defines no client
/// notifications over HTTP (a client cancels by closing its stream) — unless its
/// version is one seawall does not serve.
fn notification(headers: &HeaderMap) -> Response {
    let version = headers.get(modern::VERSION_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !modern::is_modern(version) {
        return rejected(None, modern::Rejection::unsupported(version));
    }
    accepted()
}
