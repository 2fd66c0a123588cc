//! The POSTs of HTTP+SSE clients: `.../messages?sessionId=ID` carries one message (or,
//! in a 2025-03-26 session, a batch). Every accepted POST is answered 202 at once;
//! requests run concurrently in their own tasks and their answers go to the stream
//! (except the answer to a request the client cancelled: none is sent).
//!
//! The HTTP refusals are those of Streamable HTTP: 400 for a missing `sessionId`, an
//! unsupported `MCP-Protocol-Version` or a malformed body, 404 for a stream that is
//! unknown, closed, opened on another endpoint or by another caller, 413/408/415 for
//! the body.

use std::sync::Arc;

use axum::body::Body;
use axum::http::Uri;
use axum::response::Response;
use serde_json::json;

use super::super::http::{Cx, VERSION_HEADER, accepted, read_json_body};
use super::super::refusal::Refusal;
use super::Channel;
use crate::gateway::InitError;
use crate::jsonrpc::{self, Message, Payload, code};
use crate::mcp;
use crate::mcp::trace_context;
use crate::session::Scope;
use crate::session::cancelled::Tracked;

/// Takes one POST on `scope`'s messages URL.
pub(super) async fn post(cx: &Cx<'_>, scope: Scope, uri: &Uri, body: Body) -> Response {
    if let Some(version) = cx.headers.get(VERSION_HEADER)
        && !version.to_str().is_ok_and(mcp::is_supported)
    {
        return cx.refuse(Refusal::UnsupportedVersion, None);
    }
    let channel = match channel_for(cx, &scope, uri) {
        Ok(channel) => channel,
        Err(refusal) => return cx.refuse(refusal, None),
    };
    let bytes = match read_json_body(cx, body).await {
        Ok(bytes) => bytes,
        Err(refusal) => return cx.refuse(refusal, None),
    };
    match jsonrpc::split_payload(&bytes) {
        Err(e) => cx.refuse(Refusal::Malformed(e), None),
        Ok(Payload::Single(text)) => match jsonrpc::decode(text) {
            Ok(msg) => {
                take(cx, &channel, msg).await;
                accepted()
            }
            Err(e) => cx.refuse(Refusal::Malformed(e), None),
        },
        Ok(Payload::Batch(items)) => {
            if !channel.session().is_some_and(|s| mcp::allows_batches(&s.version)) {
                let why = "JSON-RPC batches are only allowed in protocol version 2025-03-26";
                return cx.refuse(Refusal::BadRequest(why), None);
            }
            for item in items {
                match jsonrpc::decode(item.get()) {
                    Ok(msg) => take(cx, &channel, msg).await,
                    Err(e) => to_stream(&channel, Refusal::Malformed(e).body(None, &crate::errors::correlation_id())),
                }
            }
            accepted()
        }
    }
}

/// The stream a POST names, with the spec's answers when there is none to use. A stream
/// opened by another caller is not found: its existence is not revealed.
fn channel_for(cx: &Cx<'_>, scope: &Scope, uri: &Uri) -> Result<Arc<Channel>, Refusal> {
    let Some(id) = session_id(uri) else {
        return Err(Refusal::BadRequest("the sessionId query parameter is required"));
    };
    match cx.st.sse.find(id) {
        Some(channel) if &channel.scope == scope && channel.admits(cx.principal.as_deref()) => Ok(channel),
        _ => Err(Refusal::SessionNotFound),
    }
}

/// The `sessionId` query parameter (ids are minted URL-safe, so none needs decoding).
fn session_id(uri: &Uri) -> Option<&str> {
    uri.query()?.split('&').find_map(|pair| pair.strip_prefix("sessionId=")).filter(|id| !id.is_empty())
}

/// Hands one message to the gateway; whatever it answers goes to the stream.
async fn take(cx: &Cx<'_>, channel: &Arc<Channel>, msg: Message) {
    let gateway = &cx.st.gateway;
    let session = channel.session();
    if let Some(session) = &session {
        session.touch();
    }
    match msg {
        Message::Request(req) if req.method == mcp::method::INITIALIZE && channel.begin_initialize() => {
            initialize(cx, channel, req);
        }
        Message::Request(req) => match session {
            Some(session) => {
                let tracked = channel.inflight.track(&req.id);
                let (gateway, channel) = (Arc::clone(gateway), Arc::clone(channel));
                let trace = trace_context::from_headers(&cx.headers);
                tokio::spawn(async move {
                    let answer = gateway.handle_request(&session, req, Some(channel.sender()), trace).await;
                    // The receiver of `notifications/cancelled` sends nothing for that request.
                    if tracked.as_ref().is_some_and(Tracked::cancelled) {
                        tracing::debug!(session = session.key, "withheld the answer to a request the client cancelled");
                        return;
                    }
                    channel.send(answer.body).await;
                });
            }
            // Before initialize only ping is allowed.
            None if req.method == mcp::method::PING => {
                to_stream(channel, jsonrpc::encode_response(Some(&req.id), Ok(&jsonrpc::to_raw(&json!({})))));
            }
            None => {
                let why = "the session is not initialized: send initialize first";
                to_stream(channel, jsonrpc::encode_error(Some(&req.id), code::INVALID_REQUEST, why, None));
            }
        },
        Message::Notification(n) => match session {
            Some(session) => {
                channel.inflight.note(&n);
                gateway.handle_notification(&session, n).await;
            }
            None => tracing::debug!(method = %n.method, "dropped a notification sent before initialize"),
        },
        Message::Response(r) => match session {
            Some(session) => gateway.handle_response(&session, r).await,
            None => tracing::debug!(id = %r.id, "dropped a response sent before initialize"),
        },
    }
}

/// Opens the channel's gateway session, as `initialize` does on Streamable HTTP: the
/// session caps, the principal binding and the upstream sessions are the gateway's.
fn initialize(cx: &Cx<'_>, channel: &Arc<Channel>, req: jsonrpc::Request) {
    let (gateway, channel) = (Arc::clone(&cx.st.gateway), Arc::clone(channel));
    let (peer, principal) = (cx.info.peer.map(|p| p.ip()), cx.principal.clone());
    let trace = trace_context::from_headers(&cx.headers);
    tokio::spawn(async move {
        let (body, opened) = match gateway
            .initialize(channel.scope.clone(), &req, peer, principal, crate::session::Front::Sse, trace)
            .await
        {
            Ok((session, result)) => {
                if !channel.opened(Arc::clone(&session)) {
                    gateway.end_session(&session).await; // the client left meanwhile
                    return;
                }
                (jsonrpc::encode_response(Some(&req.id), Ok(&result)), Some(session))
            }
            Err(e) => {
                channel.initialize_failed();
                let correlation = crate::errors::correlation_id();
                let body = match e {
                    InitError::Invalid(why) => Refusal::InvalidInitialize(why).body(Some(&req.id), &correlation),
                    InitError::Full { retry_after } => {
                        crate::telemetry::metrics::load_shed("sessions");
                        let refusal = Refusal::TooManySessions { retry_after };
                        refusal.body(Some(&req.id), &correlation)
                    }
                    InitError::Failed(e) => jsonrpc::encode_reply(Some(&req.id), &gateway.rewriter().failure(&e, None)),
                };
                (body, None)
            }
        };
        // The answer first, then whatever the session has for the client.
        channel.send(body).await;
        if let Some(session) = opened {
            super::relay(channel, session).await;
        }
    });
}

/// Sends a message to the stream without holding up the POST.
fn to_stream(channel: &Arc<Channel>, message: String) {
    let channel = Arc::clone(channel);
    tokio::spawn(async move { channel.send(message).await });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_id_is_read_from_the_query() {
        let uri = |s: &str| s.parse::<Uri>().unwrap();
        assert_eq!(session_id(&uri("/messages?sessionId=abc")), Some("abc"));
        assert_eq!(session_id(&uri("/messages?x=1&sessionId=abc")), Some("abc"));
        assert_eq!(session_id(&uri("/messages?sessionId=")), None);
        assert_eq!(session_id(&uri("/messages")), None);
        assert_eq!(session_id(&uri("/messages?session=abc")), None);
    }

    #[test]
    fn an_http_sse_get_is_told_apart_from_a_streamable_one() {
        use axum::http::{HeaderMap, HeaderValue};
        let with = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(*k, HeaderValue::from_static(v));
            }
            super::super::opens_session(&h)
        };
        assert!(with(&[("accept", "text/event-stream")]));
        assert!(with(&[("accept", "application/json, Text/Event-Stream;q=1")]));
        assert!(!with(&[]), "no Accept: not an explicit request for a stream");
        assert!(!with(&[("accept", "*/*")]));
        assert!(!with(&[("accept", "text/event-stream"), ("mcp-session-id", "s")]));
        assert!(!with(&[("accept", "text/event-stream"), ("mcp-protocol-version", "2025-06-18")]));
    }
}
