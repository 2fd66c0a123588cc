//! JWT bearer tokens: signature by one of the issuer's public keys (a JWKS from a file
//! or a URL), issuer, audience (seawall's own URL, RFC 8707), `exp`/`nbf` with leeway,
//! and only the configured public-key algorithms — never `none`, never HMAC, whatever
//! the token's header asks for.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use parking_lot::RwLock;
use serde_json::{Map, Value};

use crate::config::JwtConfig;
use crate::policy::Principal;
use crate::policy::principal::Credential;

/// At most one JWKS fetch per this interval, however many unknown `kid`s arrive (the
/// fetch at start aside).
const REFRESH_INTERVAL: Duration = Duration::from_secs(10);
/// Longest wait for the JWKS URL to answer.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest accepted JWKS document (bytes).
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// Where the keys come from.
#[derive(Debug)]
enum Source {
    /// Read once at start.
    File,
    /// Fetched at start and again for unknown `kid`s.
    Url { url: String, http: reqwest::Client },
}

/// Verifies JWTs for one issuer.
#[derive(Debug)]
pub(crate) struct JwtVerifier {
    issuer: String,
    audience: String,
    algorithms: Vec<Algorithm>,
    leeway: u64,
    source: Source,
    keys: RwLock<Arc<Vec<Jwk>>>,
    /// When the JWKS URL was last asked; held while a fetch runs, so fetches queue.
    last_fetch: tokio::sync::Mutex<Option<Instant>>,
}

impl JwtVerifier {
    /// A verifier for `config`: reads the JWKS file, or fetches the URL (a failed first
    /// fetch is logged and retried when a token arrives).
    pub(crate) async fn new(config: &JwtConfig) -> anyhow::Result<JwtVerifier> {
        let algorithms = config
            .algorithms
            .iter()
            .filter(|a| crate::config::PUBLIC_KEY_ALGORITHMS.contains(&a.as_str()))
            .filter_map(|a| Algorithm::from_str(a).ok())
            .collect();
        let (source, keys) = match (&config.jwks_file, &config.jwks_url) {
            (Some(path), _) => {
                let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
                let set: JwkSet = serde_json::from_slice(&text)
                    .with_context(|| format!("{} is not a JWKS document", path.display()))?;
                (Source::File, set.keys)
            }
            (None, Some(url)) => {
                let http = reqwest::Client::builder().timeout(FETCH_TIMEOUT).build()?;
                (Source::Url { url: url.clone(), http }, Vec::new())
            }
            (None, None) => anyhow::bail!("auth.jwt needs jwks_file or jwks_url"),
        };
        let verifier = JwtVerifier {
            issuer: config.issuer.clone(),
            audience: config.audience.clone(),
            algorithms,
            leeway: config.leeway.as_secs(),
            source,
            keys: RwLock::new(Arc::new(keys)),
            last_fetch: tokio::sync::Mutex::new(None),
        };
        // The first fetch does not count against the refresh bound: a key rotated just
        // after start is fetched at once.
        verifier.fetch_now().await;
        Ok(verifier)
    }

    /// Whether `token` looks like a JWT (three dot-separated parts) at all.
    pub(crate) fn looks_like_jwt(token: &str) -> bool {
        token.split('.').count() == 3
    }

    /// The principal `token` proves, or why it proves nothing (never the token).
    pub(crate) async fn verify(&self, token: &str) -> Result<Arc<Principal>, &'static str> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| "the token is not a well-formed JWT")?;
        if !self.algorithms.contains(&header.alg) {
            return Err("the token's algorithm is not allowed");
        }
        let known = find_key(&self.keys(), &header);
        let key = match known {
            Some(key) => key,
            None if self.refresh().await => find_key(&self.keys(), &header).ok_or("no key for the token")?,
            None => return Err("no key for the token"),
        };
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = self.leeway;
        let data =
            jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation).map_err(|e| reason_of(e.kind()))?;
        let subject = data.claims.get("sub").and_then(Value::as_str).filter(|s| !s.is_empty());
        let subject = subject.ok_or("the token has no subject")?;
        Ok(Arc::new(Principal { name: Arc::from(subject), credential: Credential::Jwt, claims: data.claims }))
    }

    /// The keys known now (a snapshot: no lock is held across a fetch).
    fn keys(&self) -> Arc<Vec<Jwk>> {
        Arc::clone(&self.keys.read())
    }

    /// Fetches the JWKS URL unless it was fetched in the last [`REFRESH_INTERVAL`];
    /// whether new keys were stored.
    async fn refresh(&self) -> bool {
        if !matches!(self.source, Source::Url { .. }) {
            return false;
        }
        let mut last = self.last_fetch.lock().await;
        if last.is_some_and(|at| at.elapsed() < REFRESH_INTERVAL) {
            return false;
        }
        *last = Some(Instant::now());
        self.fetch_now().await
    }

    /// Fetches the JWKS URL and stores its keys; whether it worked.
    async fn fetch_now(&self) -> bool {
        let Source::Url { url, http } = &self.source else { return false };
        match fetch(http, url).await {
            Ok(set) => {
                tracing::info!(url = %url, keys = set.keys.len(), "fetched the JWKS");
                *self.keys.write() = Arc::new(set.keys);
                true
            }
            Err(why) => {
                tracing::warn!(url = %url, error = %why, "cannot fetch the JWKS");
                false
            }
        }
    }
}

async fn fetch(http: &reqwest::Client, url: &str) -> anyhow::Result<JwkSet> {
    let resp = http.get(url).send().await?.error_for_status()?;
    if resp.content_length().is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
        anyhow::bail!("the JWKS is larger than {MAX_JWKS_BYTES} bytes");
    }
    let body = resp.bytes().await?;
    if body.len() > MAX_JWKS_BYTES {
        anyhow::bail!("the JWKS is larger than {MAX_JWKS_BYTES} bytes");
    }
    Ok(serde_json::from_slice(&body)?)
}

/// The public key the token's header names (by `kid`, or the first of the right family
/// when it names none). Symmetric (`oct`) keys are never used.
fn find_key(keys: &[Jwk], header: &Header) -> Option<DecodingKey> {
    keys.iter()
        .filter(|jwk| !matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)))
        .filter(|jwk| header.kid.is_none() || jwk.common.key_id == header.kid)
        .filter_map(|jwk| DecodingKey::from_jwk(jwk).ok())
        .find(|key| key.family() == header.alg.family())
}

fn reason_of(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet",
        ErrorKind::InvalidIssuer => "the token's issuer is not the configured one",
        ErrorKind::InvalidAudience => "the token's audience is not this gateway",
        ErrorKind::InvalidSignature => "the token's signature is invalid",
        ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim",
        ErrorKind::InvalidAlgorithm => "the token's algorithm does not fit the key",
        _ => "the token cannot be verified",
    }
}
