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
use crate::identity::Credential;
use crate::identity::Principal;

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

#[cfg(test)]
mod tests {
    use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
    use serde_json::json;

    use super::*;

    fn pair() -> Ed25519KeyPair {
        let doc = Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new()).unwrap();
        Ed25519KeyPair::from_pkcs8(doc.as_ref()).unwrap()
    }

    fn verifier(pair: &Ed25519KeyPair, extra: Vec<Value>) -> JwtVerifier {
        let x = B64.encode(pair.public_key().as_ref());
        let mut keys = vec![json!({"kty": "OKP", "crv": "Ed25519", "kid": "k", "x": x})];
        keys.extend(extra);
        let set: JwkSet = serde_json::from_value(json!({ "keys": keys })).unwrap();
        JwtVerifier {
            issuer: "https://idp".into(),
            audience: "https://gw/mcp".into(),
            algorithms: vec![Algorithm::EdDSA],
            leeway: 30,
            source: Source::File,
            keys: RwLock::new(Arc::new(set.keys)),
            last_fetch: tokio::sync::Mutex::new(None),
        }
    }

    fn sign(pair: &Ed25519KeyPair, header: Value, claims: Value) -> String {
        let input = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
        format!("{input}.{}", B64.encode(pair.sign(input.as_bytes()).as_ref()))
    }

    fn now() -> i64 {
        i64::try_from(jsonwebtoken::get_current_timestamp()).unwrap()
    }

    fn claims(exp_in: i64) -> Value {
        json!({"iss": "https://idp", "aud": "https://gw/mcp", "sub": "alice", "exp": now() + exp_in, "role": "dev"})
    }

    #[tokio::test]
    async fn claims_are_checked_with_the_leeway() {
        let p = pair();
        let v = verifier(&p, vec![]);
        let eddsa = json!({"alg": "EdDSA", "kid": "k"});
        let ok = v.verify(&sign(&p, eddsa.clone(), claims(60))).await.unwrap();
        assert_eq!((ok.label(), ok.claims["role"].clone()), ("sub:alice".to_owned(), json!("dev")));
        assert!(v.verify(&sign(&p, eddsa.clone(), claims(-10))).await.is_ok(), "within the leeway");
        assert_eq!(v.verify(&sign(&p, eddsa.clone(), claims(-60))).await.err(), Some("the token has expired"));
        let mut c = claims(60);
        c["aud"] = json!(["https://other", "https://gw/mcp"]);
        assert!(v.verify(&sign(&p, eddsa.clone(), c.clone())).await.is_ok(), "one of several audiences");
        c["aud"] = json!("https://other");
        assert_eq!(v.verify(&sign(&p, eddsa.clone(), c)).await.err(), Some("the token's audience is not this gateway"));
        let mut c = claims(60);
        c["iss"] = json!("https://idp/");
        assert_eq!(
            v.verify(&sign(&p, eddsa.clone(), c)).await.err(),
            Some("the token's issuer is not the configured one")
        );
        let mut c = claims(60);
        c["nbf"] = json!(now() + 120);
        assert_eq!(v.verify(&sign(&p, eddsa.clone(), c)).await.err(), Some("the token is not valid yet"));
        let mut c = claims(60);
        c["sub"] = json!("");
        assert_eq!(v.verify(&sign(&p, eddsa, c)).await.err(), Some("the token has no subject"));
    }

    #[tokio::test]
    async fn only_the_configured_algorithms_and_public_keys_verify() {
        let p = pair();
        let secret = json!({"kty": "oct", "kid": "s", "k": B64.encode(b"shared-secret")});
        let v = verifier(&p, vec![secret]);
        let other = sign(&pair(), json!({"alg": "EdDSA", "kid": "k"}), claims(60));
        assert_eq!(v.verify(&other).await.err(), Some("the token's signature is invalid"));
        let unknown = sign(&p, json!({"alg": "EdDSA", "kid": "nope"}), claims(60));
        assert_eq!(v.verify(&unknown).await.err(), Some("no key for the token"));
        let no_kid = sign(&p, json!({"alg": "EdDSA"}), claims(60));
        assert!(v.verify(&no_kid).await.is_ok(), "without kid, the key of the right family");
        for alg in ["HS256", "none", "RS256"] {
            let token = sign(&p, json!({"alg": alg, "kid": "s"}), claims(60));
            assert!(v.verify(&token).await.is_err(), "{alg}");
        }
        assert!(JwtVerifier::looks_like_jwt("a.b.c") && !JwtVerifier::looks_like_jwt("plain-api-key"));
    }
}
