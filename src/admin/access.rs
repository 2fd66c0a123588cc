//! Who may use the admin API. With `admin.token`, every request must carry it as a
//! bearer token, whatever its address; the token is kept as its SHA-256 digest and
//! compared in constant time. Without one, only loopback clients are answered: the API
//! isolates tools and shows the configuration, so an admin listener bound to every
//! interface for probes and scrapers must not open it to the network by accident.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::AdminConfig;
use crate::downstream::connection::PeerAddr;

/// The `WWW-Authenticate` challenge of a 401.
const CHALLENGE: &str = "Bearer realm=\"seawall-admin\"";
/// The same, for a token that was presented and is wrong.
const CHALLENGE_INVALID: &str = "Bearer realm=\"seawall-admin\", error=\"invalid_token\"";

/// The admin API's guard.
#[derive(Clone, Debug)]
pub(super) struct AdminAccess {
    /// The digest of `admin.token`, when set.
    token: Option<[u8; 32]>,
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// A token is configured and the request carries none.
    NoToken,
    /// The request carries a token that is not the configured one.
    WrongToken,
    /// No token is configured and the request does not come from loopback.
    NotLoopback,
}

impl AdminAccess {
    /// The guard of `config`.
    pub(super) fn new(config: &AdminConfig) -> AdminAccess {
        AdminAccess { token: config.token.as_deref().map(digest) }
    }

    /// Whether a request with `headers` from `peer` may use the admin API.
    pub(super) fn check(&self, headers: &HeaderMap, peer: Option<IpAddr>) -> Result<(), Refused> {
        let Some(expected) = &self.token else {
            return match peer {
                Some(ip) if is_loopback(ip) => Ok(()),
                _ => Err(Refused::NotLoopback),
            };
        };
        let presented = bearer(headers).ok_or(Refused::NoToken)?;
        if bool::from(expected.ct_eq(&digest(presented))) { Ok(()) } else { Err(Refused::WrongToken) }
    }
}

impl Refused {
    fn response(self) -> Response {
        let (status, challenge, why) = match self {
            Refused::NoToken => (
                StatusCode::UNAUTHORIZED,
                Some(CHALLENGE),
                "the admin API needs the bearer token of admin.token (Authorization: Bearer TOKEN)",
            ),
            Refused::WrongToken => {
                (StatusCode::UNAUTHORIZED, Some(CHALLENGE_INVALID), "the bearer token is not the admin token")
            }
            Refused::NotLoopback => (
                StatusCode::FORBIDDEN,
                None,
                "without admin.token the admin API answers loopback clients only; set admin.token to use it from elsewhere",
            ),
        };
        let mut response = (status, axum::Json(json!({ "error": why }))).into_response();
        if let Some(challenge) = challenge {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        }
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        response
    }
}

/// The middleware: refused requests never reach the admin API's handlers.
pub(super) async fn guard(State(access): State<AdminAccess>, request: Request, next: Next) -> Response {
    let peer = request.extensions().get::<PeerAddr>().map(|p| p.0.ip());
    match access.check(request.headers(), peer) {
        Ok(()) => next.run(request).await,
        Err(refused) => {
            tracing::info!(
                peer = ?peer,
                method = %request.method(),
                path = %request.uri().path(),
                refused = ?refused,
                "admin API: request refused"
            );
            refused.response()
        }
    }
}

/// Loopback, IPv4-mapped IPv6 loopback included.
pub(super) fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme in any case).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn digest(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_auth(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        headers
    }

    const LOOPBACK: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

    #[test]
    fn a_token_is_needed_from_everywhere_once_configured() {
        let access = AdminAccess::new(&AdminConfig { token: Some("0123456789abcdef-admin".into()) });
        let remote: Option<IpAddr> = Some("10.1.2.3".parse().unwrap());
        assert_eq!(access.check(&HeaderMap::new(), LOOPBACK), Err(Refused::NoToken));
        assert_eq!(access.check(&with_auth("Bearer nope-nope-nope-nope"), LOOPBACK), Err(Refused::WrongToken));
        assert_eq!(access.check(&with_auth("Basic 0123456789abcdef-admin"), LOOPBACK), Err(Refused::NoToken));
        assert_eq!(access.check(&with_auth("Bearer 0123456789abcdef-admin"), remote), Ok(()));
        assert_eq!(access.check(&with_auth("bearer 0123456789abcdef-admin"), LOOPBACK), Ok(()));
        assert_eq!(access.check(&with_auth("Bearer 0123456789abcdef-admin "), None), Ok(()));
        assert_eq!(access.check(&with_auth("Bearer 0123456789abcdef-admi"), LOOPBACK), Err(Refused::WrongToken));
    }

    #[test]
    fn without_a_token_only_loopback_is_answered() {
        let access = AdminAccess::new(&AdminConfig::default());
        assert_eq!(access.check(&HeaderMap::new(), LOOPBACK), Ok(()));
        assert_eq!(access.check(&HeaderMap::new(), Some("::1".parse().unwrap())), Ok(()));
        assert_eq!(access.check(&HeaderMap::new(), Some("::ffff:127.0.0.1".parse().unwrap())), Ok(()));
        assert_eq!(access.check(&HeaderMap::new(), Some("192.168.1.9".parse().unwrap())), Err(Refused::NotLoopback));
        assert_eq!(access.check(&HeaderMap::new(), None), Err(Refused::NotLoopback));
        // A token sent anyway changes nothing.
        let remote = Some("192.168.1.9".parse().unwrap());
        assert_eq!(access.check(&with_auth("Bearer whatever-whatever"), remote), Err(Refused::NotLoopback));
    }
}
