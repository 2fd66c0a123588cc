//! Client authentication settings (the top-level `auth:` key). Absent means clients
//! do not authenticate, as before.

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Duration;

use http::Uri;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::locate::{FieldPath, Problem};
use super::schema::HumanDuration;

/// How clients of the HTTP listener authenticate.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Static API keys accepted as `Authorization: Bearer <key>`. Default `[]`; `auth`
    /// needs keys, `jwt`, or both.
    pub api_keys: Vec<ApiKeyConfig>,
    /// JWT bearer tokens verified against the issuer's public keys. Default: none.
    pub jwt: Option<JwtConfig>,
    /// OAuth Protected Resource Metadata (RFC 9728) served at
    /// `/.well-known/oauth-protected-resource[/mcp[/<upstream>]]` and named by the
    /// `WWW-Authenticate` header of every 401. Default: none (no document, and the
    /// header carries no `resource_metadata`).
    pub resource_metadata: Option<ResourceMetadataConfig>,
    /// Scopes every request must carry: a JWT in its `scope` (space-separated) or `scp`
    /// claim, an API key in its `scopes`. A request lacking one is answered 403 with
    /// `WWW-Authenticate: Bearer error="insufficient_scope", scope="…"`, so OAuth
    /// clients can ask for a token with more scope. Default `[]` (no scope required).
    pub required_scopes: Vec<String>,
}

/// One API key, given as is (`key`) or as the hex SHA-256 digest of the key (`sha256`);
/// exactly one of the two.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ApiKeyConfig {
    /// The principal a request with this key acts as (unique, non-empty). No default.
    pub name: String,
    /// The key itself (at least 16 characters; `${VAR}` expansion helps keep it out of
    /// the file). Default: none.
    pub key: Option<String>,
    /// The key's SHA-256 digest, 64 hex digits. Default: none.
    pub sha256: Option<String>,
    /// The scopes the key grants, as a JWT's `scope` claim would: matched by
    /// `claim:scope=<s>` in authorisation rules and checked against `required_scopes`.
    /// Default `[]`.
    pub scopes: Vec<String>,
}

/// The fields of the protected-resource metadata document.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ResourceMetadataConfig {
    /// seawall's own canonical URL as clients reach it, e.g. `https://gw.example/mcp`
    /// (an `http`/`https` URL without fragment). Default: `auth.jwt.audience` when that
    /// is such a URL (the audience tokens are minted for); otherwise it must be given.
    pub resource: String,
    /// Issuer URLs of the authorization servers clients may get tokens from.
    /// Default `[]`.
    pub authorization_servers: Vec<String>,
    /// Scopes clients may request. Default `[]` (left out of the document).
    pub scopes_supported: Vec<String>,
}

/// Gives `resource_metadata.resource` its default, the JWT audience, when it is not
/// written and the audience is a resource URL (run after `${VAR}` expansion, before the
/// checks, so the check reports only a resource that is still missing).
pub(crate) fn default_resource(auth: Option<&mut AuthConfig>) {
    let Some(auth) = auth else { return };
    let audience = auth.jwt.as_ref().map(|jwt| jwt.audience.as_str()).filter(|a| is_resource_url(a));
    if let (Some(meta), Some(audience)) = (auth.resource_metadata.as_mut(), audience)
        && meta.resource.is_empty()
    {
        meta.resource = audience.to_owned();
    }
}

/// Shortest accepted literal API key (characters).
const MIN_KEY_CHARS: usize = 16;

/// Checks the `auth:` section, when present.
pub(crate) fn check_auth(auth: Option<&AuthConfig>, out: &mut Vec<Problem>) {
    let Some(auth) = auth else { return };
    let at = FieldPath::root().key("auth");
    if auth.api_keys.is_empty() && auth.jwt.is_none() {
        out.push(Problem::new(at.key("api_keys"), "at least one API key (or jwt) is needed when auth is configured"));
    }
    if let Some(jwt) = &auth.jwt {
        check_jwt(&at.key("jwt"), jwt, out);
    }
    let mut names = HashSet::new();
    for (i, entry) in auth.api_keys.iter().enumerate() {
        let here = at.key("api_keys").index(i);
        if entry.name.trim().is_empty() {
            out.push(Problem::new(here.key("name"), "must not be empty"));
        } else if !names.insert(entry.name.as_str()) {
            out.push(Problem::new(here.key("name"), format!("duplicate API key name {:?}", entry.name)));
        }
        match (&entry.key, &entry.sha256) {
            (Some(_), Some(_)) => out.push(Problem::new(here, "give either key or sha256, not both")),
            (None, None) => out.push(Problem::new(here, "give key or sha256")),
            (Some(key), None) if key.chars().count() < MIN_KEY_CHARS => out.push(Problem::new(
                here.key("key"),
                format!("must be at least {MIN_KEY_CHARS} characters (is the variable set?)"),
            )),
            (None, Some(hex)) if !is_sha256_hex(hex) => {
                out.push(Problem::new(here.key("sha256"), "must be 64 hex digits"))
            }
            _ => {}
        }
    }
    check_scopes(&auth.required_scopes, &at.key("required_scopes"), out);
    for (i, key) in auth.api_keys.iter().enumerate() {
        check_scopes(&key.scopes, &at.key("api_keys").index(i).key("scopes"), out);
    }
    if let Some(meta) = &auth.resource_metadata {
        let here = at.key("resource_metadata");
        if meta.resource.is_empty() {
            out.push(Problem::new(
                here.key("resource"),
                "missing: give seawall's URL as clients reach it (e.g. https://gw.example/mcp), \
                 or an http(s) auth.jwt.audience it defaults to",
            ));
        } else if !is_resource_url(&meta.resource) {
            out.push(Problem::new(
                here.key("resource"),
                format!("not an http(s) URL without fragment: {:?}", meta.resource),
            ));
        }
        for (i, server) in meta.authorization_servers.iter().enumerate() {
            if !is_resource_url(server) {
                out.push(Problem::new(
                    here.key("authorization_servers").index(i),
                    format!("not an http(s) URL: {server:?}"),
                ));
            }
        }
    }
}

fn check_scopes(scopes: &[String], at: &FieldPath, out: &mut Vec<Problem>) {
    for (i, scope) in scopes.iter().enumerate() {
        if !is_scope_token(scope) {
            out.push(Problem::new(
                at.index(i),
                format!("{scope:?} is not a scope (printable ASCII without spaces, quotes or backslashes)"),
            ));
        }
    }
}

/// A scope token of RFC 6749 §3.3: printable ASCII except space, `"` and `\\`.
fn is_scope_token(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b == 0x21 || (0x23..=0x5B).contains(&b) || (0x5D..=0x7E).contains(&b))
}

/// 64 hex digits, either case.
pub(crate) fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// An absolute `http`/`https` URL with a host and no fragment (RFC 8707 resource).
fn is_resource_url(text: &str) -> bool {
    !text.contains('#')
        && text.parse::<Uri>().is_ok_and(|uri| {
            matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some_and(|h| !h.is_empty())
        })
}

/// JWTs accepted as bearer tokens.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct JwtConfig {
    /// The `iss` a token must carry (exact match). No default.
    pub issuer: String,
    /// The `aud` a token must contain: seawall's own canonical URL (RFC 8707). No
    /// default.
    pub audience: String,
    /// A JWKS file with the issuer's public keys, read at start. Exactly one of
    /// `jwks_file` and `jwks_url`. Default: none.
    pub jwks_file: Option<PathBuf>,
    /// A URL serving the JWKS, fetched at start and again when a token names an
    /// unknown `kid` (at most once per 10 s). Default: none.
    pub jwks_url: Option<String>,
    /// Accepted signature algorithms, public-key ones only (RS256/384/512,
    /// PS256/384/512, ES256/384, EdDSA). Default `[RS256, ES256]`.
    pub algorithms: Vec<String>,
    /// Allowed clock difference for `exp` and `nbf` (duration). Default `30s`.
    #[schemars(with = "HumanDuration")]
    #[serde(with = "humantime_serde")]
    pub leeway: Duration,
}

impl Default for JwtConfig {
    fn default() -> Self {
        JwtConfig {
            issuer: String::new(),
            audience: String::new(),
            jwks_file: None,
            jwks_url: None,
            algorithms: vec!["RS256".into(), "ES256".into()],
            leeway: Duration::from_secs(30),
        }
    }
}

/// The algorithms `jwt.algorithms` may name: signatures by public keys only.
pub(crate) const PUBLIC_KEY_ALGORITHMS: [&str; 9] =
    ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA"];

fn check_jwt(at: &FieldPath, jwt: &JwtConfig, out: &mut Vec<Problem>) {
    if jwt.issuer.is_empty() {
        out.push(Problem::new(at.key("issuer"), "must not be empty"));
    }
    if jwt.audience.is_empty() {
        out.push(Problem::new(at.key("audience"), "must not be empty (seawall's canonical URL)"));
    }
    match (&jwt.jwks_file, &jwt.jwks_url) {
        (Some(_), Some(_)) => out.push(Problem::new(at.clone(), "give either jwks_file or jwks_url, not both")),
        (None, None) => out.push(Problem::new(at.clone(), "give jwks_file or jwks_url")),
        (None, Some(url)) if !is_resource_url(url) => {
            out.push(Problem::new(at.key("jwks_url"), format!("not an http(s) URL: {url:?}")))
        }
        _ => {}
    }
    if jwt.algorithms.is_empty() {
        out.push(Problem::new(at.key("algorithms"), "at least one algorithm is needed"));
    }
    for (i, alg) in jwt.algorithms.iter().enumerate() {
        if !PUBLIC_KEY_ALGORITHMS.contains(&alg.as_str()) {
            out.push(Problem::new(
                at.key("algorithms").index(i),
                format!("{alg:?} is not a public-key algorithm (one of {})", PUBLIC_KEY_ALGORITHMS.join(", ")),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    //! The `auth:` section: each rule reported at its line and field.

    use crate::config::test_support::{assert_issue, issues, ok, with_upstream};

    #[test]
    fn api_keys_are_named_uniquely_with_exactly_one_credential() {
        let found = issues(&with_upstream(&[
            "auth:",
            "  api_keys:",
            "    - { name: ci, key: short }",
            "    - { name: ci, sha256: abc }",
            "    - { name: '', key: 0123456789abcdef, sha256: '' }",
            "    - name: none",
        ]));
        assert_eq!(found.len(), 6, "{found:#?}");
        assert_issue(&found[0], 3, "auth.api_keys[0].key", "at least 16 characters");
        assert_issue(&found[1], 4, "auth.api_keys[1].name", "duplicate API key name \"ci\"");
        assert_issue(&found[2], 4, "auth.api_keys[1].sha256", "64 hex digits");
        assert_issue(&found[3], 5, "auth.api_keys[2].name", "must not be empty");
        assert_issue(&found[4], 5, "auth.api_keys[2]", "not both");
        assert_issue(&found[5], 6, "auth.api_keys[3]", "give key or sha256");
    }

    #[test]
    fn auth_needs_a_key_and_valid_metadata_urls() {
        let found = issues(&with_upstream(&[
            "auth:",
            "  resource_metadata:",
            "    resource: gw.example/mcp",
            "    authorization_servers: ['https://idp.example', 'ftp://x']",
        ]));
        assert_eq!(found.len(), 3, "{found:#?}");
        assert_issue(&found[0], 1, "auth.api_keys", "at least one API key");
        assert_issue(&found[1], 3, "auth.resource_metadata.resource", "not an http(s) URL");
        assert_issue(&found[2], 4, "auth.resource_metadata.authorization_servers[1]", "not an http(s) URL");
    }

    #[test]
    fn the_metadata_resource_defaults_to_an_http_audience_and_is_otherwise_missing() {
        let config = ok(&with_upstream(&[
            "auth:",
            "  jwt: { issuer: 'https://idp.example', audience: 'https://gw.example/mcp', jwks_url: 'https://idp.example/jwks' }",
            "  resource_metadata: { authorization_servers: ['https://idp.example'] }",
        ]));
        let meta = config.auth.and_then(|a| a.resource_metadata).unwrap_or_default();
        assert_eq!(meta.resource, "https://gw.example/mcp");
        let found = issues(&with_upstream(&[
            "auth:",
            "  jwt: { issuer: 'https://idp.example', audience: 'urn:gw', jwks_url: 'https://idp.example/jwks' }",
            "  resource_metadata:",
            "    scopes_supported: [tools]",
        ]));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_issue(&found[0], 3, "auth.resource_metadata.resource", "missing");
    }

    #[test]
    fn a_full_auth_section_is_accepted() {
        let sha = format!("    - {{ name: ops, sha256: {} }}", "aB".repeat(32));
        let config = ok(&with_upstream(&[
            "auth:",
            "  api_keys:",
            "    - { name: ci, key: 0123456789abcdef }",
            &sha,
            "  resource_metadata:",
            "    resource: https://gw.example/mcp",
            "    authorization_servers: [https://idp.example]",
            "    scopes_supported: [tools]",
        ]));
        let auth = config.auth.unwrap_or_default();
        assert_eq!(auth.api_keys.len(), 2);
        assert!(ok(&with_upstream(&[])).auth.is_none());
    }

    #[test]
    fn jwt_needs_issuer_audience_one_jwks_source_and_public_key_algorithms() {
        let found = issues(&with_upstream(&[
            "auth:",
            "  jwt:",
            "    issuer: ''",
            "    jwks_file: /k.json",
            "    jwks_url: https://idp.example/jwks",
            "    algorithms: [RS256, HS256, none]",
        ]));
        assert_eq!(found.len(), 5, "{found:#?}");
        assert_issue(&found[0], 2, "auth.jwt.audience", "must not be empty");
        assert_issue(&found[1], 2, "auth.jwt", "not both");
        assert_issue(&found[2], 3, "auth.jwt.issuer", "must not be empty");
        assert_issue(&found[3], 6, "auth.jwt.algorithms[1]", "\"HS256\" is not a public-key algorithm");
        assert_issue(&found[4], 6, "auth.jwt.algorithms[2]", "\"none\" is not a public-key algorithm");
        let config = ok(&with_upstream(&[
            "auth:",
            "  jwt: { issuer: 'https://idp.example', audience: 'https://gw.example/mcp', jwks_url: 'https://idp.example/jwks' }",
        ]));
        let jwt = config.auth.and_then(|a| a.jwt).unwrap_or_default();
        assert_eq!((jwt.algorithms.len(), jwt.leeway.as_secs()), (2, 30));
    }

    #[test]
    fn api_keys_expand_variables_and_an_unset_one_is_an_error_at_its_key() {
        let config =
            ok(&with_upstream(&["auth:", "  api_keys:", "    - { name: ci, key: '${TOKEN}-0123456789abcdef' }"]));
        let auth = config.auth.expect("auth");
        assert_eq!(auth.api_keys[0].key.as_deref(), Some("secret-0123456789abcdef"));
        let found = issues(&with_upstream(&["auth:", "  api_keys:", "    - { name: ci, key: '${CI_KEY}' }"]));
        assert!(!found.is_empty());
        assert_issue(&found[0], 3, "auth.api_keys[0].key", "environment variable CI_KEY is not set");
    }
}
