//! CORS for browser-based clients (`security.cors`): which origins' pages may call the
//! gateway, and the headers that tell their browser so. The decisions only; the HTTP
//! layer that applies them is `downstream::cors`.
//!
//! A browser sends a preflight (`OPTIONS` with `Origin` and
//! `Access-Control-Request-Method`) before any request a page makes with
//! `Authorization`, `Mcp-Session-Id` or a JSON body; it lets the page read an answer
//! only when it carries `Access-Control-Allow-Origin`, and only the headers listed in
//! `Access-Control-Expose-Headers` besides the safelisted ones.

use http::header::{
    ACCESS_CONTROL_ALLOW_CREDENTIALS, ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS,
    ACCESS_CONTROL_ALLOW_ORIGIN, ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS,
    ACCESS_CONTROL_REQUEST_METHOD, ORIGIN, VARY,
};
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use super::origin::OriginList;
use crate::config::CorsConfig;

/// The methods of the MCP endpoints.
const ALLOW_METHODS: &str = "GET, POST, DELETE, OPTIONS";

/// Request headers every preflight allows: those MCP clients send.
const ALLOW_HEADERS: [&str; 8] = [
    "accept",
    "authorization",
    "content-type",
    "last-event-id",
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "mcp-session-id",
];

/// Response headers a page may read besides the safelisted ones: the session id and
/// version it must send back, the authentication challenge, and when to retry.
const EXPOSE_HEADERS: &str = "Mcp-Session-Id, MCP-Protocol-Version, WWW-Authenticate, Retry-After";

/// What a preflight answer varies by, for caches between the browser and the gateway.
const PREFLIGHT_VARY: &str = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers";

/// Requested headers never allowed: hop-by-hop and proxy headers, and those that claim
/// a client address or identity that something in front of the gateway may trust.
const UNSAFE_HEADERS: [&str; 11] = [
    "connection",
    "cookie",
    "forwarded",
    "host",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "x-real-ip",
    "x-client-ip",
];

/// Unsafe header name prefixes.
const UNSAFE_PREFIXES: [&str; 3] = ["proxy-", "sec-", "x-forwarded-"];

/// Most requested headers a preflight answer allows beyond [`ALLOW_HEADERS`], and the
/// longest name: more is no client's need.
const MAX_EXTRA_HEADERS: usize = 16;
const MAX_HEADER_NAME: usize = 64;

/// The configured CORS policy; exists only when some origin is allowed.
#[derive(Debug, Clone)]
pub(crate) struct CorsPolicy {
    origins: OriginList,
    max_age: HeaderValue,
    allow_credentials: bool,
}

impl CorsPolicy {
    /// The policy of `config`; `None` (CORS off) when it allows no origin.
    pub(crate) fn new(config: &CorsConfig) -> Option<CorsPolicy> {
        let origins = OriginList::new(&config.allowed_origins);
        (!origins.is_empty()).then(|| CorsPolicy {
            origins,
            max_age: HeaderValue::from(config.max_age.as_secs()),
            allow_credentials: config.allow_credentials,
        })
    }

    /// The request's one `Origin`, when it has exactly one.
    pub(crate) fn origin_of(headers: &HeaderMap) -> Option<&HeaderValue> {
        let mut values = headers.get_all(ORIGIN).iter();
        match (values.next(), values.next()) {
            (Some(origin), None) => Some(origin),
            _ => None,
        }
    }

    /// Whether a request is a CORS preflight: `OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`.
    pub(crate) fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
        method == Method::OPTIONS && headers.contains_key(ORIGIN) && headers.contains_key(ACCESS_CONTROL_REQUEST_METHOD)
    }

    /// Whether pages from `origin` may call the gateway.
    pub(crate) fn allows(&self, origin: &HeaderValue) -> bool {
        origin.to_str().is_ok_and(|o| self.origins.allows(o))
    }

    /// The headers of the answer to a preflight from the allowed `origin`: the origin
    /// echoed, the methods, the headers (ours, and those asked for that are safe), and
    /// how long the browser may cache the answer.
    pub(crate) fn preflight_headers(&self, origin: &HeaderValue, request: &HeaderMap) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        h.insert(ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(ALLOW_METHODS));
        if let Ok(allowed) = HeaderValue::from_str(&allowed_headers(request)) {
            h.insert(ACCESS_CONTROL_ALLOW_HEADERS, allowed);
        }
        h.insert(ACCESS_CONTROL_MAX_AGE, self.max_age.clone());
        if self.allow_credentials {
            h.insert(ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
        }
        h.insert(VARY, HeaderValue::from_static(PREFLIGHT_VARY));
        h
    }

    /// Adds to an answer for the allowed `origin` what lets its page read it.
    pub(crate) fn add_response_headers(&self, origin: &HeaderValue, h: &mut HeaderMap) {
        h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        h.insert(ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSE_HEADERS));
        if self.allow_credentials {
            h.insert(ACCESS_CONTROL_ALLOW_CREDENTIALS, HeaderValue::from_static("true"));
        }
    }

    /// Marks an answer as depending on `Origin`: with CORS on, every answer of the MCP
    /// endpoints does.
    pub(crate) fn add_vary(h: &mut HeaderMap) {
        h.append(VARY, HeaderValue::from_static("Origin"));
    }
}

/// [`ALLOW_HEADERS`] and the safe headers the preflight asks for, comma-separated.
fn allowed_headers(request: &HeaderMap) -> String {
    let mut allowed: Vec<String> = ALLOW_HEADERS.iter().map(|h| (*h).to_owned()).collect();
    let requested = request.get_all(ACCESS_CONTROL_REQUEST_HEADERS).iter().filter_map(|v| v.to_str().ok());
    for name in requested.flat_map(|v| v.split(',')).map(|n| n.trim().to_ascii_lowercase()) {
        if allowed.len() >= ALLOW_HEADERS.len() + MAX_EXTRA_HEADERS {
            break;
        }
        if is_safe(&name) && !allowed.contains(&name) {
            allowed.push(name);
        }
    }
    allowed.join(", ")
}

/// A well-formed header name, short, and not one of [`UNSAFE_HEADERS`].
fn is_safe(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_HEADER_NAME
        && HeaderName::from_bytes(name.as_bytes()).is_ok()
        && !UNSAFE_HEADERS.contains(&name)
        && !UNSAFE_PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn policy(origins: &[&str], allow_credentials: bool) -> Option<CorsPolicy> {
        CorsPolicy::new(&CorsConfig {
            allowed_origins: origins.iter().map(|o| (*o).to_owned()).collect(),
            max_age: Duration::from_secs(600),
            allow_credentials,
        })
    }

    fn preflight(requested: Option<&'static str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(ORIGIN, HeaderValue::from_static("https://app.example"));
        h.insert(ACCESS_CONTROL_REQUEST_METHOD, HeaderValue::from_static("POST"));
        if let Some(r) = requested {
            h.insert(ACCESS_CONTROL_REQUEST_HEADERS, HeaderValue::from_static(r));
        }
        h
    }

    #[test]
    fn off_without_origins() {
        assert!(policy(&[], true).is_none());
        assert!(policy(&["https://app.example"], false).is_some());
    }

    #[test]
    fn preflights_are_options_with_origin_and_a_requested_method() {
        assert!(CorsPolicy::is_preflight(&Method::OPTIONS, &preflight(None)));
        assert!(!CorsPolicy::is_preflight(&Method::POST, &preflight(None)));
        let mut no_method = preflight(None);
        no_method.remove(ACCESS_CONTROL_REQUEST_METHOD);
        assert!(!CorsPolicy::is_preflight(&Method::OPTIONS, &no_method));
        let mut no_origin = preflight(None);
        no_origin.remove(ORIGIN);
        assert!(!CorsPolicy::is_preflight(&Method::OPTIONS, &no_origin));
    }

    #[test]
    fn only_listed_origins_are_allowed() {
        let p = policy(&["https://app.example"], false).unwrap();
        assert!(p.allows(&HeaderValue::from_static("https://app.example")));
        assert!(!p.allows(&HeaderValue::from_static("https://evil.example")));
        assert!(!p.allows(&HeaderValue::from_bytes(b"https://app.example\xff").unwrap()));
        let any = policy(&["*"], false).unwrap();
        assert!(any.allows(&HeaderValue::from_static("https://evil.example")));
        let mut twice = preflight(None);
        twice.append(ORIGIN, HeaderValue::from_static("https://other.example"));
        assert_eq!(CorsPolicy::origin_of(&twice), None);
        assert_eq!(CorsPolicy::origin_of(&preflight(None)).map(|o| o.as_bytes()), Some(&b"https://app.example"[..]));
    }

    #[test]
    fn a_preflight_answer_echoes_the_origin_and_allows_the_mcp_headers() {
        let p = policy(&["*"], false).unwrap();
        let origin = HeaderValue::from_static("https://app.example");
        let h = p.preflight_headers(&origin, &preflight(None));
        assert_eq!(h[ACCESS_CONTROL_ALLOW_ORIGIN], "https://app.example");
        assert_eq!(h[ACCESS_CONTROL_ALLOW_METHODS], "GET, POST, DELETE, OPTIONS");
        assert_eq!(h[ACCESS_CONTROL_MAX_AGE], "600");
        assert_eq!(h[VARY], PREFLIGHT_VARY);
        assert!(h.get(ACCESS_CONTROL_ALLOW_CREDENTIALS).is_none());
        let allowed = h[ACCESS_CONTROL_ALLOW_HEADERS].to_str().unwrap();
        for name in ["content-type", "authorization", "mcp-session-id", "mcp-protocol-version", "last-event-id"] {
            assert!(allowed.split(", ").any(|a| a == name), "{name} in {allowed}");
        }
        let creds = policy(&["https://app.example"], true).unwrap().preflight_headers(&origin, &preflight(None));
        assert_eq!(creds[ACCESS_CONTROL_ALLOW_CREDENTIALS], "true");
    }

    #[test]
    fn requested_headers_are_allowed_when_safe() {
        let requested = "traceparent, X-Custom ,Content-Type, cookie, x-forwarded-for, proxy-authorization, bad header, sec-fetch-mode, x-real-ip";
        let allowed = allowed_headers(&preflight(Some(requested)));
        let names: Vec<&str> = allowed.split(", ").collect();
        assert_eq!(&names[ALLOW_HEADERS.len()..], ["traceparent", "x-custom"]);
        assert_eq!(names.iter().filter(|n| **n == "content-type").count(), 1);
        let many: String = (0..100).map(|i| format!("x-h{i},")).collect();
        let mut h = preflight(None);
        h.insert(ACCESS_CONTROL_REQUEST_HEADERS, HeaderValue::from_str(&many).unwrap());
        assert_eq!(allowed_headers(&h).split(", ").count(), ALLOW_HEADERS.len() + MAX_EXTRA_HEADERS);
        assert!(!is_safe(&"x".repeat(65)));
    }

    #[test]
    fn answers_to_allowed_origins_expose_the_mcp_headers() {
        let p = policy(&["https://app.example"], false).unwrap();
        let mut h = HeaderMap::new();
        CorsPolicy::add_vary(&mut h);
        p.add_response_headers(&HeaderValue::from_static("https://app.example"), &mut h);
        assert_eq!(h[ACCESS_CONTROL_ALLOW_ORIGIN], "https://app.example");
        let exposed = h[ACCESS_CONTROL_EXPOSE_HEADERS].to_str().unwrap();
        for name in ["Mcp-Session-Id", "MCP-Protocol-Version", "WWW-Authenticate"] {
            assert!(exposed.contains(name), "{exposed}");
        }
        assert_eq!(h[VARY], "Origin");
    }
}
