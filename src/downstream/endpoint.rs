//! The HTTP front door: every MCP request passes the Host/Origin check and
//! authentication here, then goes to the front of its era — modern (2026-07-28),
//! HTTP+SSE (2024-11-05) or Streamable HTTP with sessions.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::Method;
use axum::response::Response;
use axum::routing::any;

use super::http::{Cx, HttpState, info_of};
use super::refusal::Refusal;
use super::{modern, sse_legacy, streamable_http};
use crate::session::Scope;

/// The MCP routes, with those of HTTP+SSE (2024-11-05).
pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/mcp", any(aggregate))
        .route("/mcp/{upstream}", any(single))
        .merge(sse_legacy::routes())
        .with_state(state)
}

async fn aggregate(State(st): State<HttpState>, req: Request) -> Response {
    endpoint(st, Some(Scope::Aggregate), req).await
}

async fn single(State(st): State<HttpState>, Path(upstream): Path<String>, req: Request) -> Response {
    let scope = st.gateway.upstreams().get(&upstream).map(|handle| Scope::Single(Arc::clone(&handle.name)));
    endpoint(st, scope, req).await
}

/// `scope` is `None` for `/mcp/<name>` naming no upstream, which only an authenticated
/// client learns.
async fn endpoint(st: HttpState, scope: Option<Scope>, req: Request) -> Response {
    let info = info_of(&req);
    let (parts, body) = req.into_parts();
    if let Err(refusal) = st.origin.check(parts.version, &parts.uri, &parts.headers) {
        return info.refuse(&Refusal::Forbidden(refusal), None);
    }
    let principal = match st.auth.load_full().authenticate(&parts.headers, &info.path).await {
        Ok(principal) => principal,
        Err(why) => return info.refuse(&Refusal::Unauthorized(why), None),
    };
    let Some(scope) = scope else { return info.refuse(&Refusal::NoSuchUpstream, None) };
    let cx = Cx { st: &st, info, headers: parts.headers, principal };
    if modern::is_modern_request(&cx.headers) {
        // Boxed: the session era's requests do not carry the modern era's future.
        return Box::pin(modern::serve(&cx, scope, &parts.method, body)).await;
    }
    match parts.method {
        Method::POST => streamable_http::post(&cx, scope, body).await,
        // No session and no protocol version: an HTTP+SSE (2024-11-05) client.
        Method::GET if sse_legacy::opens_session(&cx.headers) => sse_legacy::open(&cx, scope).await,
        Method::GET => streamable_http::get(&cx, scope).await,
        Method::DELETE => streamable_http::delete(&cx, scope).await,
        _ => cx.refuse(Refusal::MethodNotAllowed, None),
    }
}
