//! CORS on the client listener: the tower layer that applies [`CorsPolicy`] to the MCP
//! endpoints (`/mcp`, `/mcp/<upstream>`) and the protected-resource metadata.
//!
//! It wraps the whole router, so it runs before authentication: a preflight carries no
//! credentials and is answered here (204, or 403 for an origin not allowed), never by the
//! endpoint. Every other answer from an allowed origin, refusals included (401, 403, 404,
//! 429, 503), gets `Access-Control-Allow-Origin` and the exposed headers, so the page can
//! read why it was refused. The Host/Origin check ([`OriginPolicy`]) applies first, to
//! preflights as to every request: CORS never admits what DNS-rebinding protection
//! refuses. Without a policy (CORS off) requests pass through untouched; either way the
//! layer allocates nothing per request.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::body::Body;
use axum::http::{HeaderValue, Request, StatusCode};
use axum::response::Response;
use tower::{Layer, Service};

use super::connection::PeerAddr;
use super::refusal::{Refusal, RequestInfo};
use crate::policy::cors::CorsPolicy;
use crate::policy::origin::{OriginPolicy, OriginRefusal};

/// The well-known path of the protected-resource metadata, and its sub-paths.
const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Applies [`Cors`].
#[derive(Clone, Debug)]
pub(crate) struct CorsLayer {
    policy: Option<Arc<CorsPolicy>>,
    origin: OriginPolicy,
}

impl CorsLayer {
    /// The layer for `policy` (`None`: CORS off), checking Host and Origin with `origin`
    /// first.
    pub(crate) fn new(policy: Option<CorsPolicy>, origin: OriginPolicy) -> CorsLayer {
        CorsLayer { policy: policy.map(Arc::new), origin }
    }
}

impl<S> Layer<S> for CorsLayer {
    type Service = Cors<S>;
    fn layer(&self, inner: S) -> Cors<S> {
        Cors { inner, policy: self.policy.clone(), origin: self.origin.clone() }
    }
}

/// Answers preflights and marks answers to allowed origins.
#[derive(Clone, Debug)]
pub(crate) struct Cors<S> {
    inner: S,
    policy: Option<Arc<CorsPolicy>>,
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
    fn preflight<B>(&self, policy: &CorsPolicy, req: &Request<B>) -> Response {
        let refuse = |refusal: OriginRefusal| {
            let info = RequestInfo {
                method: req.method().clone(),
                uri: req.uri().clone(),
                peer: req.extensions().get::<PeerAddr>().map(|p| p.0),
            };
            let mut resp = info.refuse(&Refusal::Forbidden(refusal), None);
            CorsPolicy::add_vary(resp.headers_mut());
            resp
        };
        if let Err(refusal) = self.origin.check(req.version(), req.uri(), req.headers()) {
            return refuse(refusal);
        }
        let Some(origin) = CorsPolicy::origin_of(req.headers()).filter(|o| policy.allows(o)) else {
            return refuse(OriginRefusal::Origin);
        };
        let mut resp = Response::new(Body::empty());
        *resp.status_mut() = StatusCode::NO_CONTENT;
        *resp.headers_mut() = policy.preflight_headers(origin, req.headers());
        resp
    }

    /// The request's origin when the answer may carry CORS headers: allowed, and passing
    /// the Host/Origin check.
    fn admitted_origin<B>(&self, policy: &CorsPolicy, req: &Request<B>) -> Option<HeaderValue> {
        let origin = CorsPolicy::origin_of(req.headers()).filter(|o| policy.allows(o))?;
        self.origin.check(req.version(), req.uri(), req.headers()).is_ok().then(|| origin.clone())
    }
}

impl<S, B> Service<Request<B>> for Cors<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = CorsFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let Some(policy) = self.policy.as_ref().filter(|_| applies(req.uri().path())) else {
            return CorsFuture::Inner { inner: self.inner.call(req), mark: None };
        };
        if CorsPolicy::is_preflight(req.method(), req.headers()) {
            return CorsFuture::Answered { response: Some(self.preflight(policy, &req)) };
        }
        let mark = Mark { policy: Arc::clone(policy), origin: self.admitted_origin(policy, &req) };
        // Decided before the call: the inner service is called now, while it is ready.
        CorsFuture::Inner { inner: self.inner.call(req), mark: Some(mark) }
    }
}

/// What an answer gets on its way out: `Vary: Origin`, and the CORS headers for an
/// admitted origin.
pub(crate) struct Mark {
    policy: Arc<CorsPolicy>,
    origin: Option<HeaderValue>,
}

pin_project_lite::pin_project! {
    /// The answer of [`Cors`]: a preflight's own, or the inner service's, marked.
    #[project = CorsProjection]
    pub(crate) enum CorsFuture<F> {
        /// Answered by the layer (a preflight).
        Answered { response: Option<Response> },
        /// Answered by the inner service.
        Inner { #[pin] inner: F, mark: Option<Mark> },
    }
}

impl<F> Future for CorsFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project() {
            CorsProjection::Answered { response } => {
                Poll::Ready(Ok(response.take().unwrap_or_else(|| Response::new(Body::empty()))))
            }
            CorsProjection::Inner { inner, mark } => {
                let Ok(mut resp) = ready!(inner.poll(cx));
                if let Some(mark) = mark.take() {
                    CorsPolicy::add_vary(resp.headers_mut());
                    if let Some(origin) = &mark.origin {
                        mark.policy.add_response_headers(origin, resp.headers_mut());
                    }
                }
                Poll::Ready(Ok(resp))
            }
        }
    }
}

#[cfg(test)]
mod tests;
