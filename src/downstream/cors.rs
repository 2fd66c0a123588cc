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
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use axum::http::{HeaderValue, Method, header};
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::config::{CorsConfig, SecurityConfig};

    const APP: &str = "https://app.example";

    fn layer() -> CorsLayer {
        let cors =
            CorsConfig { allowed_origins: vec![APP.into()], max_age: Duration::from_secs(60), ..Default::default() };
        let security = SecurityConfig { cors: cors.clone(), ..Default::default() };
        let origin = OriginPolicy::new(&security, "127.0.0.1:8080".parse().unwrap());
        CorsLayer::new(CorsPolicy::new(&cors), origin)
    }

    /// The layer over an endpoint that answers 401 with a challenge, counting its calls.
    fn service() -> (impl Service<Request<Body>, Response = Response, Error = Infallible> + Clone, Arc<AtomicUsize>) {
        let reached = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&reached);
        let inner = service_fn(move |_req: Request<Body>| {
            count.fetch_add(1, Ordering::SeqCst);
            let mut resp = Response::new(Body::from("{}"));
            *resp.status_mut() = StatusCode::UNAUTHORIZED;
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            async { Ok::<_, Infallible>(resp) }
        });
        (layer().layer(inner), reached)
    }

    fn request(method: Method, path: &str, origin: Option<&str>, host: &str) -> Request<Body> {
        let mut b = Request::builder().method(method).uri(path).header(header::HOST, host);
        if let Some(o) = origin {
            b = b.header(header::ORIGIN, o);
        }
        b.body(Body::empty()).unwrap()
    }

    fn preflight(path: &str, origin: &str, host: &str) -> Request<Body> {
        let mut req = request(Method::OPTIONS, path, Some(origin), host);
        let h = req.headers_mut();
        h.insert(header::ACCESS_CONTROL_REQUEST_METHOD, HeaderValue::from_static("POST"));
        h.insert(
            header::ACCESS_CONTROL_REQUEST_HEADERS,
            HeaderValue::from_static("content-type, authorization, x-trace"),
        );
        req
    }

    async fn send(req: Request<Body>) -> (Response, usize) {
        let (svc, reached) = service();
        let resp = svc.oneshot(req).await.unwrap();
        (resp, reached.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn a_preflight_from_an_allowed_origin_is_answered_without_the_endpoint() {
        for path in
            ["/mcp", "/mcp/demo", "/mcp/no-such-upstream", METADATA_PATH, "/.well-known/oauth-protected-resource/mcp"]
        {
            let (resp, reached) = send(preflight(path, APP, "127.0.0.1:8080")).await;
            assert_eq!((resp.status(), reached), (StatusCode::NO_CONTENT, 0), "{path}");
            let h = resp.headers();
            assert_eq!(h[header::ACCESS_CONTROL_ALLOW_ORIGIN], APP);
            assert_eq!(h[header::ACCESS_CONTROL_ALLOW_METHODS], "GET, POST, DELETE, OPTIONS");
            assert_eq!(h[header::ACCESS_CONTROL_MAX_AGE], "60");
            assert!(h[header::ACCESS_CONTROL_ALLOW_HEADERS].to_str().unwrap().ends_with("mcp-session-id, x-trace"));
            assert!(h[header::VARY].to_str().unwrap().starts_with("Origin"));
        }
    }

    #[tokio::test]
    async fn a_preflight_from_another_origin_or_to_a_foreign_host_is_refused() {
        for (origin, host, status) in [
            ("https://evil.example", "127.0.0.1:8080", StatusCode::FORBIDDEN),
            ("http://localhost:3000", "127.0.0.1:8080", StatusCode::FORBIDDEN),
            (APP, "evil.example", StatusCode::FORBIDDEN),
            (APP, "user@127.0.0.1", StatusCode::BAD_REQUEST),
        ] {
            let (resp, reached) = send(preflight("/mcp", origin, host)).await;
            assert_eq!((resp.status(), reached), (status, 0), "{origin} to {host}");
            assert!(resp.headers().get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none());
            assert_eq!(resp.headers()[header::VARY], "Origin");
        }
    }

    #[tokio::test]
    async fn answers_to_an_allowed_origin_are_readable_refusals_included() {
        let (resp, reached) = send(request(Method::POST, "/mcp", Some(APP), "127.0.0.1:8080")).await;
        assert_eq!((resp.status(), reached), (StatusCode::UNAUTHORIZED, 1));
        let h = resp.headers();
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_ORIGIN], APP);
        assert!(h[header::ACCESS_CONTROL_EXPOSE_HEADERS].to_str().unwrap().contains("WWW-Authenticate"));
        assert_eq!(h[header::VARY], "Origin");
    }

    #[tokio::test]
    async fn answers_to_other_origins_and_other_paths_are_left_alone() {
        for (origin, host) in
            [(Some("https://evil.example"), "127.0.0.1:8080"), (None, "127.0.0.1:8080"), (Some(APP), "evil.example")]
        {
            let (resp, reached) = send(request(Method::POST, "/mcp", origin, host)).await;
            assert_eq!(reached, 1, "the endpoint decides: {origin:?}");
            assert!(resp.headers().get(header::ACCESS_CONTROL_ALLOW_ORIGIN).is_none(), "{origin:?} to {host}");
            assert_eq!(resp.headers()[header::VARY], "Origin");
        }
        // Not an endpoint of CORS: passed through untouched, preflight or not.
        let (resp, reached) = send(preflight("/mcp/a/b", APP, "127.0.0.1:8080")).await;
        assert_eq!((resp.status(), reached), (StatusCode::UNAUTHORIZED, 1));
        assert!(resp.headers().get(header::VARY).is_none());
        // An OPTIONS request that is no preflight goes to the endpoint (405 or 401 there).
        let (_, reached) = send(request(Method::OPTIONS, "/mcp", Some(APP), "127.0.0.1:8080")).await;
        assert_eq!(reached, 1);
    }

    #[test]
    fn cors_applies_to_the_mcp_endpoints_and_the_metadata() {
        for path in [
            "/mcp",
            "/mcp/x",
            METADATA_PATH,
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource/mcp/x",
        ] {
            assert!(applies(path), "{path}");
        }
        for path in [
            "/",
            "/mcpx",
            "/mcp/x/y",
            "/metrics",
            "/.well-known/oauth-protected-resourcex",
            "/.well-known/oauth-protected-resource/other",
        ] {
            assert!(!applies(path), "{path}");
        }
    }
}
