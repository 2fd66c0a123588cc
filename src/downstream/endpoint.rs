//! The HTTP front door: every MCP request passes the Host/Origin check and
//! authentication here, then goes to the front of its era — modern (2026-07-28),
//! HTTP+SSE (2024-11-05) or Streamable HTTP with sessions.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::Method;
use axum::response::Response;
use axum::routing::any;
use tower::Service;

use super::http::{Cx, HttpState, info_of};
use super::refusal::Refusal;
use super::{modern, sse_legacy, streamable_http};
use crate::call::BoxFuture;
use crate::session::Scope;

/// The MCP routes, with those of HTTP+SSE (2024-11-05).
pub(crate) fn router(state: HttpState) -> Router {
    Router::new()
        .route("/mcp", any(aggregate))
        .route("/mcp/{upstream}", any(single))
        .merge(sse_legacy::routes())
        .with_state(state)
}

async fn aggregate(State(st): State<HttpState>, req: Request) -> Response {
    endpoint(&st, Some(Scope::Aggregate), req).await
}

async fn single(State(st): State<HttpState>, Path(upstream): Path<String>, req: Request) -> Response {
    let scope = scope_of(&st, &upstream);
    endpoint(&st, scope, req).await
}

/// The scope of `/mcp/<name>`: the upstream it names, if that exists.
fn scope_of(st: &HttpState, name: &str) -> Option<Scope> {
    st.gateway.upstreams().get(name).map(|handle| Scope::Single(Arc::clone(&handle.name)))
}

/// The client listener's routes. `/mcp` and `/mcp/<upstream>`, every MCP request's
/// path, are matched here and go straight to [`endpoint`], without the router's
/// per-request matching, extraction and boxing; every other path (HTTP+SSE, metadata,
/// and an `/mcp/` path with percent-escapes, which the router decodes) goes to `rest`,
/// which also has the two routes, so both ways answer alike.
#[derive(Clone)]
pub(crate) struct Front {
    state: Arc<HttpState>,
    rest: Router,
}

impl Front {
    /// `rest` routes what is not an MCP endpoint.
    pub(crate) fn new(state: HttpState, rest: Router) -> Front {
        Front { state: Arc::new(state), rest }
    }
}

/// Which MCP endpoint `path` is, when [`Front`] serves it itself.
#[derive(Debug, PartialEq)]
enum Endpoint<'a> {
    Aggregate,
    Single(&'a str),
}

fn endpoint_of(path: &str) -> Option<Endpoint<'_>> {
    if path == "/mcp" {
        return Some(Endpoint::Aggregate);
    }
    let name = path.strip_prefix("/mcp/")?;
    (!name.is_empty() && !name.contains(['/', '%'])).then_some(Endpoint::Single(name))
}

impl<B> Service<axum::http::Request<B>> for Front
where
    B: axum::body::HttpBody<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Neither way waits: `rest`, a router, is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: axum::http::Request<B>) -> Self::Future {
        let scope = match endpoint_of(req.uri().path()) {
            Some(Endpoint::Aggregate) => Some(Scope::Aggregate),
            Some(Endpoint::Single(name)) => scope_of(&self.state, name),
            None => return Box::pin(self.rest.call(req)),
        };
        let state = Arc::clone(&self.state);
        Box::pin(async move { Ok(endpoint(&state, scope, req.map(Body::new)).await) })
    }
}

/// `scope` is `None` for `/mcp/<name>` naming no upstream, which only an authenticated
/// client learns.
async fn endpoint(st: &HttpState, scope: Option<Scope>, req: Request) -> Response {
    let info = info_of(&req);
    let (parts, body) = req.into_parts();
    if let Err(refusal) = st.origin.check(parts.version, &parts.uri, &parts.headers) {
        return info.refuse(&Refusal::Forbidden(refusal), None);
    }
    let principal = match st.auth.load_full().authenticate(&parts.headers, info.path()).await {
        Ok(principal) => principal,
        Err(why) => return info.refuse(&Refusal::Unauthorized(why), None),
    };
    let Some(scope) = scope else { return info.refuse(&Refusal::NoSuchUpstream, None) };
    let cx = Cx { st, info, headers: parts.headers, principal };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_front_serves_the_two_mcp_paths_and_leaves_the_rest_to_the_router() {
        assert_eq!(endpoint_of("/mcp"), Some(Endpoint::Aggregate));
        assert_eq!(endpoint_of("/mcp/echo"), Some(Endpoint::Single("echo")));
        assert_eq!(endpoint_of("/mcp/a.b_c-d"), Some(Endpoint::Single("a.b_c-d")));
        for rest in ["/mcp/", "/mcp/echo/", "/mcp/echo/sse", "/mcp/ec%68o", "/mcpx", "/sse", "/messages", "/", ""] {
            assert_eq!(endpoint_of(rest), None, "{rest}");
        }
    }
}
