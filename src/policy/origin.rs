//! DNS-rebinding protection: `Host` and `Origin` validation for the HTTP listener.

use std::net::SocketAddr;

use http::HeaderMap;
use http::header::{HOST, ORIGIN};

use crate::config::SecurityConfig;

/// Decides whether a request's `Host` and `Origin` are acceptable.
#[derive(Debug, Clone)]
pub struct OriginPolicy {
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    loopback: bool,
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginRefusal {
    /// The Host header names a host this listener does not serve.
    #[error("Host header not allowed")]
    Host,
    /// The Origin header names a site that may not call this gateway.
    #[error("Origin not allowed")]
    Origin,
}

const LOOPBACK_NAMES: &[&str] = &["localhost", "127.0.0.1", "[::1]", "::1"];

impl OriginPolicy {
    /// The policy for a listener bound to `listen`.
    pub fn new(security: &SecurityConfig, listen: SocketAddr) -> OriginPolicy {
        OriginPolicy {
            allowed_hosts: security.allowed_hosts.iter().map(|h| h.to_ascii_lowercase()).collect(),
            allowed_origins: security.allowed_origins.iter().map(|o| o.to_ascii_lowercase()).collect(),
            loopback: listen.ip().is_loopback(),
        }
    }

    /// Checks a request's headers.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), OriginRefusal> {
        let host = headers.get(HOST).and_then(|v| v.to_str().ok()).map(str::to_ascii_lowercase);
        if let Some(host) = &host
            && !self.host_allowed(host)
        {
            return Err(OriginRefusal::Host);
        }
        let Some(origin) = headers.get(ORIGIN) else {
            return Ok(());
        };
        let origin = origin.to_str().map_err(|_| OriginRefusal::Origin)?.to_ascii_lowercase();
        if self.allowed_origins.iter().any(|o| o == "*" || *o == origin) {
            return Ok(());
        }
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

    #[test]
    fn loopback_listener_refuses_foreign_hosts_and_origins() {
        let p = OriginPolicy::new(&SecurityConfig::default(), "127.0.0.1:8080".parse().unwrap());
        assert_eq!(p.check(&headers("127.0.0.1:8080", Some("http://127.0.0.1:8080"))), Ok(()));
        assert_eq!(p.check(&headers("localhost:8080", None)), Ok(()));
        assert_eq!(p.check(&headers("[::1]:8080", Some("http://localhost:3000"))), Ok(()));
        assert_eq!(p.check(&headers("evil.example.com", Some("http://evil.example.com"))), Err(OriginRefusal::Host));
        assert_eq!(p.check(&headers("127.0.0.1:8080", Some("http://evil.example.com"))), Err(OriginRefusal::Origin));
    }

    #[test]
    fn public_listener_checks_origin_against_host_and_list() {
        let sec = SecurityConfig { allowed_origins: vec!["https://app.example.com".into()], ..Default::default() };
        let p = OriginPolicy::new(&sec, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(p.check(&headers("gw.example.com", None)), Ok(()));
        assert_eq!(p.check(&headers("gw.example.com", Some("https://app.example.com"))), Ok(()));
        assert_eq!(p.check(&headers("gw.example.com", Some("https://gw.example.com"))), Ok(()));
        assert_eq!(p.check(&headers("gw.example.com", Some("https://evil.example.com"))), Err(OriginRefusal::Origin));
    }
}
