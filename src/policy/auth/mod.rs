//! Authentication of clients of the HTTP listener: `Authorization: Bearer <token>`
//! checked against the configured API keys, then as a JWT, turning a request into a
//! [`Principal`]. Off unless `auth:` is configured. The token is never logged, echoed or
//! forwarded upstream.

pub(crate) mod jwt;
pub(crate) mod keys;
pub(crate) mod metadata;

use std::fmt;
use std::sync::Arc;

use axum::http::{HeaderMap, header};

use self::jwt::JwtVerifier;
use self::keys::KeySet;
use self::metadata::Metadata;
use crate::config::AuthConfig;
use crate::identity::Principal;

/// Checks the credentials of client requests.
#[derive(Debug, Default)]
pub(crate) struct Authenticator {
    /// `None`: clients do not authenticate.
    keys: Option<KeySet>,
    jwt: Option<JwtVerifier>,
    metadata: Option<Arc<Metadata>>,
    /// Scopes every principal must hold (`auth.required_scopes`).
    required_scopes: Vec<String>,
}

/// Why a request is not authenticated. Carries no part of the token.
#[derive(Debug, Clone)]
pub(crate) struct Unauthenticated {
    /// What was wrong, for the log.
    pub(crate) reason: &'static str,
    /// Whether a bearer token was presented (then the challenge says `invalid_token`).
    pub(crate) token_presented: bool,
    /// The metadata document's URL for the path requested, when one is configured.
    pub(crate) metadata_url: Option<String>,
    /// Set when the credential is good but lacks a required scope: the scopes needed,
    /// space-separated (then the answer is 403 `insufficient_scope`, not 401).
    pub(crate) insufficient_scope: Option<String>,
}

impl Unauthenticated {
    /// The `WWW-Authenticate` value (RFC 6750 §3, RFC 9728 §5.1).
    pub(crate) fn challenge(&self) -> String {
        let mut params = Vec::new();
        if let Some(url) = &self.metadata_url {
            params.push(format!("resource_metadata=\"{url}\""));
        }
        if let Some(scope) = &self.insufficient_scope {
            params.push("error=\"insufficient_scope\"".to_owned());
            params.push(format!("scope=\"{scope}\""));
        } else if self.token_presented {
            params.push("error=\"invalid_token\"".to_owned());
        }
        if params.is_empty() { "Bearer".to_owned() } else { format!("Bearer {}", params.join(", ")) }
    }
}

impl fmt::Display for Unauthenticated {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason)
    }
}

impl Authenticator {
    /// The authenticator for the `auth:` section; `None` turns authentication off.
    /// Reads the JWKS file or fetches the JWKS URL when JWTs are configured.
    pub(crate) async fn new(config: Option<&AuthConfig>) -> anyhow::Result<Authenticator> {
        let Some(auth) = config else { return Ok(Authenticator::default()) };
        let jwt = match &auth.jwt {
            Some(jwt) => Some(JwtVerifier::new(jwt).await?),
            None => None,
        };
        Ok(Authenticator {
            keys: Some(KeySet::new(&auth.api_keys)),
            jwt,
            metadata: auth.resource_metadata.as_ref().map(|m| Arc::new(Metadata::new(m))),
            required_scopes: auth.required_scopes.clone(),
        })
    }

    /// The metadata document, when configured.
    pub(crate) fn metadata(&self) -> Option<&Arc<Metadata>> {
        self.metadata.as_ref()
    }

    /// One line for the start-up log: whether clients authenticate, and how.
    pub(crate) fn describe(&self) -> String {
        match &self.keys {
            None => "off".to_owned(),
            Some(keys) => format!(
                "on: {} API key(s), JWT {}; protected-resource metadata {}",
                keys.len(),
                if self.jwt.is_some() { "on" } else { "off" },
                if self.metadata.is_some() { "served" } else { "not configured" }
            ),
        }
    }

    /// The principal a request to `path` acts as: `Ok(None)` when authentication is
    /// off, an error when it is on and the request does not prove who it is.
    pub(crate) async fn authenticate(
        &self,
        headers: &HeaderMap,
        path: &str,
    ) -> Result<Option<Arc<Principal>>, Unauthenticated> {
        let Some(keys) = &self.keys else { return Ok(None) };
        let refuse = |reason, token_presented| Unauthenticated {
            reason,
            token_presented,
            metadata_url: self.metadata.as_ref().map(|m| m.url_for(path)),
            insufficient_scope: None,
        };
        let token = bearer_token(headers).map_err(|(reason, presented)| refuse(reason, presented))?;
        let principal = match (keys.lookup(token), &self.jwt) {
            (Some(principal), _) => principal,
            (None, Some(jwt)) if JwtVerifier::looks_like_jwt(token) => {
                // Boxed: a JWT may wait for its issuer's keys, and that future stays out of
                // every request's.
                Box::pin(jwt.verify(token)).await.map_err(|reason| refuse(reason, true))?
            }
            _ => return Err(refuse("the bearer token is not a valid credential", true)),
        };
        if self.required_scopes.iter().all(|scope| principal.has_scope(scope)) {
            return Ok(Some(principal));
        }
        Err(Unauthenticated {
            insufficient_scope: Some(self.required_scopes.join(" ")),
            ..refuse("the credential lacks a required scope", true)
        })
    }
}

/// The token of the one `Authorization: Bearer <token>` header, or why there is none
/// (and whether something token-like was presented).
fn bearer_token(headers: &HeaderMap) -> Result<&str, (&'static str, bool)> {
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (value, rest) = (values.next(), values.next());
    let Some(value) = value else { return Err(("no Authorization header", false)) };
    if rest.is_some() {
        return Err(("more than one Authorization header", true));
    }
    let text = value.to_str().map_err(|_| ("the Authorization header is not ASCII", true))?;
    let (scheme, token) = text.split_once(' ').unwrap_or((text, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(("the Authorization scheme is not Bearer", false));
    }
    let token = token.trim_matches(' ');
    if token.is_empty() || token.contains(' ') {
        return Err(("the bearer token is malformed", true));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;
    use crate::config::{ApiKeyConfig, ResourceMetadataConfig};

    const KEY: &str = "0123456789abcdef-ci";

    fn on() -> Authenticator {
        Authenticator {
            keys: Some(KeySet::new(&[ApiKeyConfig {
                name: "ci".into(),
                key: Some(KEY.into()),
                sha256: None,
                scopes: vec!["mcp".into()],
            }])),
            jwt: None,
            metadata: Some(Arc::new(Metadata::new(&ResourceMetadataConfig {
                resource: "https://gw.example/mcp".into(),
                ..ResourceMetadataConfig::default()
            }))),
            required_scopes: Vec::new(),
        }
    }

    fn with_auth(value: &'static str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
        h
    }

    #[tokio::test]
    async fn off_admits_everyone_as_nobody() {
        let auth = Authenticator::default();
        assert_eq!(auth.describe(), "off");
        assert_eq!(auth.authenticate(&HeaderMap::new(), "/mcp").await.ok(), Some(None));
    }

    #[tokio::test]
    async fn a_good_key_is_its_principal() {
        let h = with_auth("Bearer 0123456789abcdef-ci");
        let p = on().authenticate(&h, "/mcp").await.ok().flatten().map(|p| p.label());
        assert_eq!(p.as_deref(), Some("key:ci"));
        let h = with_auth("bearer   0123456789abcdef-ci");
        assert!(on().authenticate(&h, "/mcp").await.is_ok());
    }

    #[tokio::test]
    async fn refusals_challenge_with_the_metadata_url() {
        let auth = on();
        let missing = auth.authenticate(&HeaderMap::new(), "/mcp").await.err().map(|e| e.challenge());
        let url = "https://gw.example/.well-known/oauth-protected-resource/mcp";
        assert_eq!(missing, Some(format!("Bearer resource_metadata=\"{url}\"")));
        for bad in ["Bearer wrong-key-wrong-key", "Bearer ", "Bearer a b"] {
            let err = auth.authenticate(&with_auth(bad), "/mcp/github").await.err();
            let challenge = err.map(|e| e.challenge()).unwrap_or_default();
            assert!(challenge.ends_with("/mcp/github\", error=\"invalid_token\""), "{bad}: {challenge}");
        }
        let basic = auth.authenticate(&with_auth("Basic Y2k6MDEy"), "/mcp").await.err();
        assert_eq!(basic.map(|e| e.token_presented), Some(false));
    }

    #[tokio::test]
    async fn a_credential_without_a_required_scope_is_insufficient() {
        let mut auth = on();
        auth.required_scopes = vec!["mcp".into()];
        let h = with_auth("Bearer 0123456789abcdef-ci");
        assert!(auth.authenticate(&h, "/mcp").await.is_ok(), "the key grants mcp");
        auth.required_scopes = vec!["mcp".into(), "admin".into()];
        let err = auth.authenticate(&h, "/mcp").await.err();
        let challenge = err.map(|e| e.challenge()).unwrap_or_default();
        assert!(challenge.ends_with("error=\"insufficient_scope\", scope=\"mcp admin\""), "{challenge}");
        assert!(challenge.starts_with("Bearer resource_metadata=\"https://gw.example/"), "{challenge}");
    }

    #[tokio::test]
    async fn the_reason_never_contains_the_token() {
        let err = on().authenticate(&with_auth("Bearer secret-token-value"), "/mcp").await.err();
        let text = err.map(|e| format!("{e} {e:?} {}", e.challenge())).unwrap_or_default();
        assert!(!text.contains("secret-token-value"));
    }
}
