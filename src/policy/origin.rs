//! DNS-rebinding protection: `Host` and `Origin` validation for the HTTP listener.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;

use http::header::{HOST, ORIGIN};
use http::uri::Authority;
use http::{HeaderMap, Uri, Version};

use crate::config::SecurityConfig;

/// Decides whether a request's `Host` and `Origin` are acceptable.
#[derive(Debug, Clone)]
pub(crate) struct OriginPolicy {
    allowed_hosts: Arc<[String]>,
    allowed_origins: OriginList,
    loopback: bool,
}

/// Configured origins (`scheme://host[:port]`, or `*` for any), matched without regard
/// to ASCII case: the one matcher for the Origin check and for CORS.
#[derive(Debug, Clone, Default)]
pub(crate) struct OriginList {
    origins: Arc<[String]>,
}

impl OriginList {
    /// The list of `origins`, as configured.
    pub(crate) fn new<'a>(origins: impl IntoIterator<Item = &'a String>) -> OriginList {
        OriginList { origins: origins.into_iter().map(|o| o.to_ascii_lowercase()).collect() }
    }

    /// Whether `origin` (an `Origin` header's value) is on the list.
    pub(crate) fn allows(&self, origin: &str) -> bool {
        self.origins.iter().any(|o| o == "*" || o.eq_ignore_ascii_case(origin))
    }

    /// Whether the list is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.origins.is_empty()
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum OriginRefusal {
    /// The Host header names a host this listener does not serve.
    #[error("Host header not allowed")]
    Host,
    /// The Origin header names a site that may not call this gateway.
    #[error("Origin not allowed")]
    Origin,
    /// The request's authority is missing, malformed, or stated twice in different ways.
    #[error("{0}")]
    Ambiguous(&'static str),
}

const LOOPBACK_NAMES: &[&str] = &["localhost", "127.0.0.1", "[::1]", "::1"];

impl OriginPolicy {
    /// The policy for a listener bound to `listen`. Origins allowed for CORS
    /// (`security.cors.allowed_origins`) pass the Origin check too: a page the operator
    /// lets read answers may also send requests.
    pub(crate) fn new(security: &SecurityConfig, listen: SocketAddr) -> OriginPolicy {
        let origins = security.allowed_origins.iter().chain(&security.cors.allowed_origins);
        OriginPolicy {
            allowed_hosts: security.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            allowed_origins: OriginList::new(origins),
            loopback: listen.ip().is_loopback(),
        }
    }

    /// Checks a request's authority (its `Host` header, or the authority of an
    /// absolute-form or HTTP/2 request target) and its `Origin`.
    pub(crate) fn check(&self, version: Version, uri: &Uri, headers: &HeaderMap) -> Result<(), OriginRefusal> {
        let host = authority(version, uri, headers)?;
        if let Some(host) = &host
            && !self.host_allowed(host)
        {
            return Err(OriginRefusal::Host);
        }
        let mut origins = headers.get_all(ORIGIN).iter();
        let Some(origin) = origins.next() else {
            return Ok(());
        };
        if origins.next().is_some() {
            return Err(OriginRefusal::Ambiguous("more than one Origin header"));
        }
        let origin = origin.to_str().map_err(|_| OriginRefusal::Origin)?;
        if self.allowed_origins.allows(origin) {
            return Ok(());
        }
        let origin = origin.to_ascii_lowercase();
        let origin_host = origin.split_once("://").map(|(_, rest)| rest).unwrap_or("");
        let same_host = host.as_deref().is_some_and(|h| h == origin_host);
        let local = self.loopback && LOOPBACK_NAMES.contains(&strip_port(origin_host));
        if same_host || local { Ok(()) } else { Err(OriginRefusal::Origin) }
    }

    fn host_allowed(&self, host: &str) -> bool {
        if !self.allowed_hosts.is_empty() {
            return self.allowed_hosts.iter().any(|h| h == host || h == strip_port(host));
        }
        !self.loopback || LOOPBACK_NAMES.contains(&strip_port(host))
    }
}

/// The one authority a request names, lower-cased. Two that differ (Host header and
/// request target), several Host headers, a malformed one, or none at all on HTTP/1.1
/// and later are refused: each would let the request be checked against one host and
/// served as another.
fn authority<'a>(
    version: Version,
    uri: &'a Uri,
    headers: &'a HeaderMap,
) -> Result<Option<Cow<'a, str>>, OriginRefusal> {
    let mut values = headers.get_all(HOST).iter();
    let header = values.next();
    if values.next().is_some() {
        return Err(OriginRefusal::Ambiguous("more than one Host header"));
    }
    let header = header.map(|v| valid_authority(v.as_bytes())).transpose()?;
    let target = uri.authority().map(|a| valid_authority(a.as_str().as_bytes())).transpose()?;
    match (header, target) {
        (Some(h), Some(t)) if h != t => {
            Err(OriginRefusal::Ambiguous("the Host header does not match the request target"))
        }
        (Some(h), _) | (None, Some(h)) => Ok(Some(h)),
        (None, None) if version < Version::HTTP_11 => Ok(None),
        (None, None) => Err(OriginRefusal::Ambiguous("a Host header is required")),
    }
}

/// `host[:port]` in visible ASCII, without user information.
fn valid_authority(bytes: &[u8]) -> Result<Cow<'_, str>, OriginRefusal> {
    // The usual Host, a lower-case name or IPv4 address with a port, needs no parser
    // and no copy.
    if let Some(plain) = plain_authority(bytes) {
        return Ok(Cow::Borrowed(plain));
    }
    let bad = OriginRefusal::Ambiguous("the Host is not a valid host[:port]");
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_graphic) || bytes.contains(&b'@') {
        return Err(bad);
    }
    let parsed = Authority::try_from(bytes).map_err(|_| bad)?;
    Ok(Cow::Owned(parsed.as_str().to_ascii_lowercase()))
}

/// `bytes` when they are `name[:port]` with a name of lower-case letters, digits, dots
/// and hyphens and a port of 1 to 5 digits: valid as they are and already lower-case.
fn plain_authority(bytes: &[u8]) -> Option<&str> {
    let (name, port) = match bytes.iter().position(|&b| b == b':') {
        Some(at) => (&bytes[..at], Some(&bytes[at + 1..])),
        None => (bytes, None),
    };
    let name_ok = !name.is_empty()
        && name.iter().all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    let port_ok = port.is_none_or(|p| (1..=5).contains(&p.len()) && p.iter().all(u8::is_ascii_digit));
    if name_ok && port_ok { std::str::from_utf8(bytes).ok() } else { None }
}

/// `host:port` → `host`, keeping bracketed IPv6 literals whole.
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |i| &host[..=i]);
    }
    match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(HOST, host.parse().unwrap());
        if let Some(o) = origin {
            h.insert(ORIGIN, o.parse().unwrap());
        }
        h
    }

    trait CheckHeaders {
        fn check_h(&self, h: &HeaderMap) -> Result<(), OriginRefusal>;
    }

    impl CheckHeaders for OriginPolicy {
        fn check_h(&self, h: &HeaderMap) -> Result<(), OriginRefusal> {
            self.check(Version::HTTP_11, &Uri::from_static("/mcp"), h)
        }
    }

    #[test]
    fn plain_authorities_read_as_the_parser_reads_them() {
        for host in ["localhost", "127.0.0.1:8080", "a-b.example.com:443", "x:1", "h:65535"] {
            let parsed = Authority::try_from(host.as_bytes()).unwrap().as_str().to_ascii_lowercase();
            assert_eq!(plain_authority(host.as_bytes()), Some(parsed.as_str()), "{host}");
            assert_eq!(valid_authority(host.as_bytes()).as_deref(), Ok(parsed.as_str()));
        }
        for odd in ["Example.com", "[::1]:80", "h:", ":80", "h:123456", "a b", "h:8x", "u@h"] {
            assert_eq!(plain_authority(odd.as_bytes()), None, "{odd}");
        }
        assert_eq!(valid_authority(b"Example.COM:80").as_deref(), Ok("example.com:80"));
        assert_eq!(valid_authority(b"[::1]:80").as_deref(), Ok("[::1]:80"));
        assert!(valid_authority(b"u@h").is_err());
    }

    #[test]
    fn authority_must_be_single_valid_and_consistent() {
        let p = OriginPolicy::new(&SecurityConfig::default(), "127.0.0.1:8080".parse().unwrap());
        let origin_form = Uri::from_static("/mcp");
        let absolute = Uri::from_static("http://evil.example/mcp");
        let ok = headers("127.0.0.1:8080", None);
        assert_eq!(p.check(Version::HTTP_11, &origin_form, &ok), Ok(()));
        assert!(matches!(p.check(Version::HTTP_11, &absolute, &ok), Err(OriginRefusal::Ambiguous(_))));
        // HTTP/2: the authority alone.
        assert_eq!(p.check(Version::HTTP_2, &absolute, &HeaderMap::new()), Err(OriginRefusal::Host));
        let local = Uri::from_static("http://127.0.0.1:8080/mcp");
        assert_eq!(p.check(Version::HTTP_2, &local, &HeaderMap::new()), Ok(()));
        let empty = HeaderMap::new();
        assert!(matches!(p.check(Version::HTTP_11, &origin_form, &empty), Err(OriginRefusal::Ambiguous(_))));
        assert_eq!(p.check(Version::HTTP_10, &origin_form, &empty), Ok(()));
        let mut twice = ok.clone();
        twice.append(HOST, "127.0.0.1:8080".parse().unwrap());
        assert!(matches!(p.check(Version::HTTP_11, &origin_form, &twice), Err(OriginRefusal::Ambiguous(_))));
        let mut non_ascii = HeaderMap::new();
        non_ascii.insert(HOST, http::HeaderValue::from_bytes(b"\xe9vil.example").unwrap());
        assert!(matches!(p.check(Version::HTTP_11, &origin_form, &non_ascii), Err(OriginRefusal::Ambiguous(_))));
        assert!(matches!(
            p.check(Version::HTTP_11, &origin_form, &headers("user@127.0.0.1", None)),
            Err(OriginRefusal::Ambiguous(_))
        ));
        let mut two_origins = headers("127.0.0.1:8080", Some("http://127.0.0.1:8080"));
        two_origins.append(ORIGIN, "http://evil.example".parse().unwrap());
        assert!(matches!(p.check(Version::HTTP_11, &origin_form, &two_origins), Err(OriginRefusal::Ambiguous(_))));
    }

    #[test]
    fn loopback_listener_refuses_foreign_hosts_and_origins() {
        let p = OriginPolicy::new(&SecurityConfig::default(), "127.0.0.1:8080".parse().unwrap());
        assert_eq!(p.check_h(&headers("127.0.0.1:8080", Some("http://127.0.0.1:8080"))), Ok(()));
        assert_eq!(p.check_h(&headers("localhost:8080", None)), Ok(()));
        assert_eq!(p.check_h(&headers("[::1]:8080", Some("http://localhost:3000"))), Ok(()));
        assert_eq!(p.check_h(&headers("evil.example.com", Some("http://evil.example.com"))), Err(OriginRefusal::Host));
        assert_eq!(p.check_h(&headers("127.0.0.1:8080", Some("http://evil.example.com"))), Err(OriginRefusal::Origin));
    }

    #[test]
    fn public_listener_checks_origin_against_host_and_list() {
        let sec = SecurityConfig { allowed_origins: vec!["https://app.example.com".into()], ..Default::default() };
        let p = OriginPolicy::new(&sec, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(p.check_h(&headers("gw.example.com", None)), Ok(()));
        assert_eq!(p.check_h(&headers("gw.example.com", Some("https://app.example.com"))), Ok(()));
        assert_eq!(p.check_h(&headers("gw.example.com", Some("https://gw.example.com"))), Ok(()));
        assert_eq!(p.check_h(&headers("gw.example.com", Some("https://evil.example.com"))), Err(OriginRefusal::Origin));
    }

    #[test]
    fn origins_allowed_for_cors_pass_the_origin_check_but_not_the_host_check() {
        let mut sec = SecurityConfig::default();
        sec.cors.allowed_origins = vec!["https://App.Example.com".into()];
        let p = OriginPolicy::new(&sec, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(p.check_h(&headers("127.0.0.1:8080", Some("https://app.example.com"))), Ok(()));
        assert_eq!(p.check_h(&headers("127.0.0.1:8080", Some("HTTPS://APP.EXAMPLE.COM"))), Ok(()));
        assert_eq!(p.check_h(&headers("127.0.0.1:8080", Some("https://app.example.org"))), Err(OriginRefusal::Origin));
        assert_eq!(p.check_h(&headers("app.example.com", Some("https://app.example.com"))), Err(OriginRefusal::Host));
    }

    #[test]
    fn an_origin_list_matches_whole_origins_or_star() {
        let list = OriginList::new(&["https://a.example".to_owned()]);
        assert!(list.allows("https://a.example") && list.allows("https://A.example"));
        assert!(!list.allows("https://a.example:8443") && !list.allows("http://a.example") && !list.allows(""));
        assert!(OriginList::new(&["*".to_owned()]).allows("null"));
        assert!(OriginList::default().is_empty() && !OriginList::default().allows("https://a.example"));
    }
}
