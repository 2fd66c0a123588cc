//! HTTP+SSE for clients (the transport of protocol version 2024-11-05).
//!
//! `GET /sse` (every upstream) or `GET /mcp/<upstream>/sse` (one) — and a GET of `/mcp`
//! or `/mcp/<upstream>` asking for `text/event-stream` with neither `Mcp-Session-Id` nor
//! `MCP-Protocol-Version` — opens an event stream whose first event, `endpoint`, names
//! the URL to POST messages to: `/messages?sessionId=ID` or
//! `/mcp/<upstream>/messages?sessionId=ID`. Each POSTed message is answered 202; its
//! answer, and every other message for the client, is a `message` event on the stream.
//! The stream carries one of the gateway's sessions, opened by the client's
//! `initialize`, so the client stack applies as for Streamable HTTP; closing the stream
//! ends that session.
//!
//! `mod.rs` opens streams; `messages` takes the POSTs; `channel` holds the open streams.

pub(crate) mod channel;
mod messages;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, header};
use axum::response::Response;
use axum::routing::{get, post};
use futures::StreamExt;

use channel::Channel;
pub(crate) use channel::Channels;

use super::http::{Cx, HttpState, KEEP_ALIVE, SESSION_HEADER, VERSION_HEADER, accepts, info_of, sse_headers};
use super::refusal::Refusal;
use crate::gateway::Gateway;
use crate::identity::Principal;
use crate::session::table::Holder;
use crate::session::{Scope, Session};
use crate::sse;

/// A stream whose client sends no `initialize` within this time is closed.
const INITIALIZE_WITHIN: Duration = Duration::from_secs(60);

/// The HTTP+SSE routes; `/mcp` and `/mcp/<upstream>` hand their GETs over through
/// [`opens_session`] and [`open`].
pub(super) fn routes() -> Router<HttpState> {
    Router::new()
        .route("/sse", get(aggregate_stream))
        .route("/messages", post(aggregate_message))
        .route("/mcp/{upstream}/sse", get(single_stream))
        .route("/mcp/{upstream}/messages", post(single_message))
}

/// Whether a GET of `/mcp[/<upstream>]` comes from an HTTP+SSE client: it asks for an
/// event stream by name and carries neither a session id nor a protocol version (a
/// Streamable HTTP client sends both once initialised, and never GETs before).
pub(super) fn opens_session(headers: &HeaderMap) -> bool {
    let names_stream = headers.get_all(header::ACCEPT).iter().filter_map(|v| v.to_str().ok()).any(|v| {
        v.split(',')
            .any(|item| item.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream")))
    });
    names_stream && !headers.contains_key(SESSION_HEADER) && !headers.contains_key(VERSION_HEADER)
}

async fn aggregate_stream(State(st): State<HttpState>, req: Request) -> Response {
    match admit(&st, "/mcp", req).await {
        Ok((cx, _)) => open(&cx, Scope::Aggregate).await,
        Err(refusal) => refusal,
    }
}

async fn single_stream(State(st): State<HttpState>, Path(upstream): Path<String>, req: Request) -> Response {
    let resource = format!("/mcp/{upstream}");
    let (cx, _) = match admit(&st, &resource, req).await {
        Ok(admitted) => admitted,
        Err(refusal) => return refusal,
    };
    match scope_of(&st, &upstream) {
        Some(scope) => open(&cx, scope).await,
        None => cx.refuse(Refusal::NoSuchUpstream, None),
    }
}

async fn aggregate_message(State(st): State<HttpState>, req: Request) -> Response {
    match admit(&st, "/mcp", req).await {
        Ok((cx, (uri, body))) => messages::post(&cx, Scope::Aggregate, &uri, body).await,
        Err(refusal) => refusal,
    }
}

async fn single_message(State(st): State<HttpState>, Path(upstream): Path<String>, req: Request) -> Response {
    let resource = format!("/mcp/{upstream}");
    let (cx, (uri, body)) = match admit(&st, &resource, req).await {
        Ok(admitted) => admitted,
        Err(refusal) => return refusal,
    };
    match scope_of(&st, &upstream) {
        Some(scope) => messages::post(&cx, scope, &uri, body).await,
        None => cx.refuse(Refusal::NoSuchUpstream, None),
    }
}

fn scope_of(st: &HttpState, upstream: &str) -> Option<Scope> {
    st.gateway.upstreams().get(upstream).map(|handle| Scope::Single(Arc::clone(&handle.name)))
}

/// The checks every MCP request passes first, as on `/mcp`: Host and Origin, then who is
/// calling (`resource` names the endpoint in a 401's metadata URL). A `/mcp/<name>`
/// naming no upstream is refused afterwards, so only an authenticated client learns it.
async fn admit<'a>(
    st: &'a HttpState,
    resource: &str,
    req: Request,
) -> Result<(Cx<'a>, (axum::http::Uri, Body)), Response> {
    let info = info_of(&req);
    let (parts, body) = req.into_parts();
    if let Err(refusal) = st.origin.check(parts.version, &parts.uri, &parts.headers) {
        return Err(info.refuse(&Refusal::Forbidden(refusal), None));
    }
    let principal = match st.auth.load_full().authenticate(&parts.headers, resource).await {
        Ok(principal) => principal,
        Err(why) => return Err(info.refuse(&Refusal::Unauthorized(why), None)),
    };
    Ok((Cx { st, info, headers: parts.headers, principal }, (parts.uri, body)))
}

/// Opens an HTTP+SSE stream on `scope`: the `endpoint` event, then every message for the
/// client, keep-alive comments between them, until the client leaves, its session ends,
/// or the gateway stops. Refused 503 while the session table is full.
pub(super) async fn open(cx: &Cx<'_>, scope: Scope) -> Response {
    if !accepts(&cx.headers).sse {
        return cx.refuse(Refusal::NotAcceptable { stream: true }, None);
    }
    let gateway = &cx.st.gateway;
    let holder =
        Holder { peer: cx.info.peer.map(|p| p.ip()), principal: cx.principal.as_deref().map(Principal::identity) };
    // Only a check: the session takes its place at `initialize` (a session of the
    // caller's let go now leaves room for it then).
    if let Err(full) = gateway.reserve(holder) {
        crate::telemetry::metrics::load_shed("sessions");
        return cx.refuse(Refusal::TooManySessions { retry_after: full.retry_after }, None);
    }
    let (channel, rx) = cx.st.sse.open(scope, cx.principal.clone());
    tracing::debug!(scope = ?channel.scope, "HTTP+SSE stream opened");
    tokio::spawn(expect_initialize(Arc::clone(&channel)));
    let endpoint =
        sse::encode_event("endpoint", &format!("{}?sessionId={}", messages_path(&channel.scope), channel.id));
    let guard =
        StreamGuard { channels: Arc::clone(&cx.st.sse), gateway: Arc::clone(gateway), channel: Arc::clone(&channel) };
    // Empty messages only asked for a stream to open; this one is open already.
    let messages = tokio_stream::wrappers::ReceiverStream::new(rx)
        .filter(|m| futures::future::ready(!m.is_empty()))
        .map(|m| sse::encode_message(&m, None));
    let keep_alive = futures::stream::unfold((), |()| async {
        tokio::time::sleep(KEEP_ALIVE).await;
        Some((Bytes::from_static(b": keep-alive\n\n"), ()))
    });
    let (ended, closing) = (channel.ended.clone(), cx.st.closing.clone());
    let end = async move {
        tokio::select! {
            () = ended.cancelled() => {}
            () = closing.cancelled() => {}
        }
    };
    let body = futures::stream::once(async move { endpoint })
        .chain(futures::stream::select(messages, keep_alive))
        .take_until(Box::pin(end))
        .map(move |bytes| {
            let _open = &guard;
            Ok::<_, Infallible>(bytes)
        });
    sse_headers(Response::new(Body::from_stream(body)))
}

/// Where the stream's client POSTs: an absolute path, as the SDKs' own servers send it.
fn messages_path(scope: &Scope) -> String {
    match scope {
        Scope::Aggregate => "/messages".to_owned(),
        Scope::Single(name) => format!("/mcp/{name}/messages"),
    }
}

/// Closes a stream whose client sends no `initialize` in time.
async fn expect_initialize(channel: Arc<Channel>) {
    tokio::select! {
        () = tokio::time::sleep(INITIALIZE_WITHIN) => {
            if channel.session().is_none() {
                tracing::debug!("closed an HTTP+SSE stream that sent no initialize");
                channel.ended.cancel();
            }
        }
        () = channel.ended.cancelled() => {}
    }
}

/// Relays the session's messages not tied to a request into the stream, and ends the
/// stream when the session ends (idle expiry, shutdown).
async fn relay(channel: Arc<Channel>, session: Arc<Session>) {
    let Some(mut outbox) = session.take_outbox() else { return };
    session.open_upstream_streams().await;
    let ended = session.ended();
    loop {
        tokio::select! {
            () = ended.cancelled() => {
                channel.ended.cancel();
                return;
            }
            () = channel.ended.cancelled() => return,
            message = outbox.recv() => {
                let Some(message) = message else { return };
                if !channel.send(message).await {
                    return;
                }
            }
        }
    }
}

/// Lives as long as the stream's body: when the client goes (or the stream ends), the
/// channel is forgotten and its session ended, which closes its upstream sessions.
struct StreamGuard {
    channels: Arc<Channels>,
    gateway: Arc<Gateway>,
    channel: Arc<Channel>,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.channels.remove(&self.channel.id);
        let Some(session) = self.channel.close() else { return };
        if session.ended().is_cancelled() {
            return;
        }
        let gateway = Arc::clone(&self.gateway);
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { gateway.end_session(&session).await });
        }
    }
}
