//! CORS on the client listener: the tower layer that applies [`CorsPolicy`] to the MCP
//! endpoints (`/mcp`, `/mcp/<upstream>`) and the protected-resource metadata.
//!
//! It wraps every route, so it runs before authentication: a preflight carries no
//! credentials and is answered here (204, or 403 for an origin not allowed), never by the
//! endpoint. Every other answer from an allowed origin, refusals included (401, 403, 404,
//! 429, 503), gets `Access-Control-Allow-Origin` and the exposed headers, so the page can
//! read why it was refused. The Host/Origin check ([`OriginPolicy`]) applies first, to
//! preflights as to every request: CORS never admits what DNS-rebinding protection
//! refuses.

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use futures::future::BoxFuture;
use tower::{Layer, Service};

use super::listener::PeerAddr;
use super::refusal::{Refusal, RequestInfo};
use crate::policy::cors::CorsPolicy;
use crate::policy::origin::{OriginPolicy, OriginRefusal};

/// The well-known path of the protected-resource metadata, and its sub-paths.
const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Applies [`Cors`].
#[derive(Clone, Debug)]
pub(crate) struct CorsLayer {
    policy: Arc<CorsPolicy>,
    origin: OriginPolicy,
}

impl CorsLayer {
    /// The layer for `policy`, checking Host and Origin with `origin` first.
    pub(crate) fn new(policy: CorsPolicy, origin: OriginPolicy) -> CorsLayer {
        CorsLayer { policy: Arc::new(policy), origin }
    }
}

impl<S> Layer<S> for CorsLayer {
    type Service = Cors<S>;
    fn layer(&self, inner: S) -> Cors<S> {
        Cors { inner, policy: Arc::clone(&self.policy), origin: self.origin.clone() }
    }
}

/// Answers preflights and marks answers to allowed origins.
#[derive(Clone, Debug)]
pub(crate) struct Cors<S> {
    inner: S,
    policy: Arc<CorsPolicy>,
    origin: OriginPolicy,
}

/// Whether CORS applies to `path`: the MCP endpoints and the metadata document.
fn applies(path: &str) -> bool {
    let mcp = |p: &str| p == "/mcp" || p.strip_prefix("/mcp/").is_some_and(|rest| !rest.contains('/'));
    mcp(path) || path == METADATA_PATH || path.strip_prefix(METADATA_PATH).is_some_and(mcp)
}

impl<S> Cors<S> {
    /// The answer to a preflight: 204 with the CORS headers for an allowed origin that
    /// passes the Host/Origin check, else the refusal, without them.
    fn preflight(&self, req: &Request) -> Response {
        let refuse = |refusal: OriginRefusal| {
            let info = RequestInfo {
                method: req.method().clone(),
                path: req.uri().path().to_owned(),
                peer: req.extensions().get::<PeerAddr>().map(|p| p.0),
            };
            info.refuse(&Refusal::Forbidden(refusal), None)
        };
        if let Err(refusal) = self.origin.check(req.version(), req.uri(), req.headers()) {
            return refuse(refusal);
        }
        let Some(origin) = CorsPolicy::origin_of(req.headers()).filter(|o| self.policy.allows(o)) else {
            return refuse(OriginRefusal::Origin);
        };
        let mut resp = Response::new(Body::empty());
        *resp.status_mut() = StatusCode::NO_CONTENT;
        *resp.headers_mut() = self.policy.preflight_headers(origin, req.headers());
        resp
    }

    /// Whether the answer to this request may carry CORS headers: its origin is allowed
    /// and passes the Host/Origin check.
    fn admits(&self, req: &Request) -> bool {
        CorsPolicy::origin_of(req.headers()).is_some_and(|o| self.policy.allows(o))
            && self.origin.check(req.version(), req.uri(), req.headers()).is_ok()
    }
}

impl<S> Service<Request> for Cors<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        if !applies(req.uri().path()) {
            return Box::pin(self.inner.call(req));
        }
        if CorsPolicy::is_preflight(req.method(), req.headers()) {
            let mut resp = self.preflight(&req);
            if resp.status() != StatusCode::NO_CONTENT {
                CorsPolicy::add_vary(resp.headers_mut());
            }
            return Box::pin(std::future::ready(Ok(resp)));
        }
        let origin = self.admits(&req).then(|| CorsPolicy::origin_of(req.headers()).cloned()).flatten();
        let policy = Arc::clone(&self.policy);
        // Decided before the call: the inner service is called now, while it is ready.
        let answer = self.inner.call(req);
        Box::pin(async move {
            let Ok(mut resp) = answer.await;
            let headers: &mut HeaderMap = resp.headers_mut();
            CorsPolicy::add_vary(headers);
            if let Some(origin) = &origin {
                policy.add_response_headers(origin, headers);
            }
            Ok(resp)
        })
    }
}

#[cfg(test)]
mod tests;
