use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::{HeaderValue, Method, header};
use tower::{ServiceExt, service_fn};

use super::*;
use crate::config::{CorsConfig, SecurityConfig};

const APP: &str = "https://app.example";

fn layer() -> CorsLayer {
    let cors = CorsConfig { allowed_origins: vec![APP.into()], max_age: Duration::from_secs(60), ..Default::default() };
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
    h.insert(header::ACCESS_CONTROL_REQUEST_HEADERS, HeaderValue::from_static("content-type, authorization, x-trace"));
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
