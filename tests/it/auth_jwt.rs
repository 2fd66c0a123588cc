//! JWT bearer tokens through the real binary: tokens signed in the test with Ed25519
//! keys it generates, the JWKS served by a small HTTP server on 127.0.0.1 port 0, a key
//! rotation that makes seawall fetch the JWKS again (at most once per 10 s), and every
//! kind of bad token refused with 401.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::Seawall;
use crate::support::mcp_client::Client;
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use parking_lot::Mutex;
use serde_json::{Value, json};

const ISSUER: &str = "https://idp.example";
const AUDIENCE: &str = "https://gw.example/mcp";

/// An Ed25519 signing key with its `kid`.
struct SigningKey {
    kid: String,
    pair: Ed25519KeyPair,
}

impl SigningKey {
    fn generate(kid: &str) -> SigningKey {
        let doc = Ed25519KeyPair::generate_pkcs8(&aws_lc_rs::rand::SystemRandom::new()).unwrap();
        SigningKey { kid: kid.to_owned(), pair: Ed25519KeyPair::from_pkcs8(doc.as_ref()).unwrap() }
    }

    fn public(&self) -> &[u8] {
        self.pair.public_key().as_ref()
    }

    fn jwk(&self) -> Value {
        json!({"kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "kid": self.kid, "x": B64.encode(self.public())})
    }

    /// A token with `header` (kid added) and `claims`, signed with this key.
    fn sign(&self, mut header: Value, claims: &Value) -> String {
        header["kid"] = json!(self.kid);
        let input = signing_input(&header, claims);
        format!("{input}.{}", B64.encode(self.pair.sign(input.as_bytes()).as_ref()))
    }

    fn token(&self, claims: &Value) -> String {
        self.sign(json!({"alg": "EdDSA", "typ": "JWT"}), claims)
    }
}

fn signing_input(header: &Value, claims: &Value) -> String {
    format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()))
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn claims(sub: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": sub, "iat": now(), "exp": now() + 600})
}

/// A JWKS server whose document the test changes, counting its fetches.
struct Jwks {
    url: String,
    doc: Arc<Mutex<Value>>,
    fetches: Arc<AtomicUsize>,
}

impl Jwks {
    async fn serve(keys: &[&SigningKey]) -> Jwks {
        let doc = Arc::new(Mutex::new(json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()})));
        let fetches = Arc::new(AtomicUsize::new(0));
        let (d, f) = (Arc::clone(&doc), Arc::clone(&fetches));
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let (d, f) = (Arc::clone(&d), Arc::clone(&f));
                async move {
                    f.fetch_add(1, Ordering::SeqCst);
                    axum::Json(d.lock().clone())
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Jwks { url, doc, fetches }
    }

    fn publish(&self, keys: &[&SigningKey]) {
        *self.doc.lock() = json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()});
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

fn gateway_yaml(jwks: &str) -> String {
    format!(
        "upstreams:\n  - name: demo\n    command: seawall\n    args: [demo-upstream, --stdio]\n\
         auth:\n  jwt:\n    issuer: {ISSUER}\n    audience: {AUDIENCE}\n    {jwks}\n    \
         algorithms: [EdDSA]\n    leeway: 30s\n  resource_metadata:\n    resource: {AUDIENCE}\n    \
         authorization_servers: [{ISSUER}]\n"
    )
}

fn client(url: &str, token: &str) -> Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().unwrap());
    Client { http: reqwest::Client::builder().default_headers(headers).build().unwrap(), ..Client::new(url) }
}

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "seawall-tests", "version": "1"}}})
    .to_string()
}

async fn connect(url: &str, token: &str) -> Client {
    let mut c = client(url, token);
    let reply = c.post_raw(initialize_body(), &[]).await;
    assert_eq!(reply.status, 200, "initialize failed: {}", reply.raw);
    c.session = Some(reply.header("mcp-session-id").expect("Mcp-Session-Id"));
    assert_eq!(c.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await.status, 202);
    c
}

async fn assert_refused(url: &str, token: &str, what: &str) {
    let reply = client(url, token).post_raw(initialize_body(), &[]).await;
    assert_eq!(reply.status, 401, "{what}: {}", reply.raw);
    let challenge = reply.header("www-authenticate").unwrap_or_default();
    assert!(challenge.contains("resource_metadata=") && challenge.ends_with("error=\"invalid_token\""), "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_tokens_are_verified_and_a_new_kid_fetches_the_jwks_again() {
    let k1 = SigningKey::generate("k1");
    let jwks = Jwks::serve(&[&k1]).await;
    let mut gw = Seawall::start(&gateway_yaml(&format!("jwks_url: {}", jwks.url))).await;
    assert_eq!(jwks.fetches(), 1, "fetched once at start");

    let alice = connect(&gw.url, &k1.token(&claims("alice"))).await;
    let echoed = alice.call_tool(1, "demo__echo", json!({"message": "hi"})).await;
    assert_eq!(echoed["content"][0]["text"], "hi", "{echoed}");

    // Rotation: the issuer publishes k2 and signs with it; seawall fetches again.
    let k2 = SigningKey::generate("k2");
    jwks.publish(&[&k1, &k2]);
    let bob = connect(&gw.url, &k2.token(&claims("bob"))).await;
    assert_eq!(jwks.fetches(), 2);
    // Another unknown kid right after: refused without a third fetch (rate bound).
    let k3 = SigningKey::generate("k3");
    assert_refused(&gw.url, &k3.token(&claims("carol")), "unknown kid").await;
    assert_eq!(jwks.fetches(), 2, "at most one fetch per 10 s");

    // The session belongs to alice, whatever token she renews to; not to bob.
    let mut renewed =
        client(&gw.url, &k1.token(&json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now() + 900})));
    renewed.session = alice.session.clone();
    assert_eq!(renewed.request(2, "tools/list", json!({})).await.status, 200);
    let mut stolen = bob.clone();
    stolen.session = alice.session.clone();
    assert_eq!(stolen.request(3, "tools/list", json!({})).await.status, 404);

    let mut bad = Vec::new();
    let expired = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now() - 120});
    bad.push(("expired beyond the leeway", k1.token(&expired)));
    let early = json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "exp": now() + 600, "nbf": now() + 300});
    bad.push(("not valid yet", k1.token(&early)));
    let mut wrong_iss = claims("alice");
    wrong_iss["iss"] = json!("https://evil.example");
    bad.push(("wrong issuer", k1.token(&wrong_iss)));
    let mut wrong_aud = claims("alice");
    wrong_aud["aud"] = json!("https://other.example/mcp");
    bad.push(("wrong audience", k1.token(&wrong_aud)));
    bad.push(("no subject", k1.token(&json!({"iss": ISSUER, "aud": AUDIENCE, "exp": now() + 600}))));
    let none = signing_input(&json!({"alg": "none", "typ": "JWT", "kid": "k1"}), &claims("alice"));
    bad.push(("alg none", format!("{none}.")));
    let hs_input = signing_input(&json!({"alg": "HS256", "typ": "JWT", "kid": "k1"}), &claims("alice"));
    for secret in [k1.public().to_vec(), B64.encode(k1.public()).into_bytes()] {
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &secret);
        let tag = aws_lc_rs::hmac::sign(&key, hs_input.as_bytes());
        bad.push(("HS256 keyed with the public key", format!("{hs_input}.{}", B64.encode(tag.as_ref()))));
    }
    // Signed by k2 but claiming to be k1's: the signature does not verify.
    let forged = k2.token(&claims("alice")).replacen(
        &B64.encode(json!({"alg": "EdDSA", "typ": "JWT", "kid": "k2"}).to_string()),
        &B64.encode(json!({"alg": "EdDSA", "typ": "JWT", "kid": "k1"}).to_string()),
        1,
    );
    bad.push(("a signature by another key", forged));
    bad.push(("garbage with two dots", "a.b.c".to_owned()));
    for (what, token) in &bad {
        assert_refused(&gw.url, token, what).await;
    }

    gw.stop(Duration::from_secs(5)).await;
    let log = gw.proc.output();
    assert!(log.contains("JWT on"), "the start-up line says JWTs are on");
    for (_, token) in &bad {
        let signature = token.rsplit('.').next().unwrap_or_default();
        assert!(signature.len() < 16 || !log.contains(signature), "the log shows a token");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_file_is_read_at_start() {
    let k1 = SigningKey::generate("file-key");
    let dir = crate::support::TestDir::new("jwks");
    let path = dir.write("jwks.json", &json!({"keys": [k1.jwk()]}).to_string());
    let gw = Seawall::start(&gateway_yaml(&format!("jwks_file: {}", path.display()))).await;
    let c = connect(&gw.url, &k1.token(&claims("dave"))).await;
    assert!(c.request(1, "tools/list", json!({})).await.result()["tools"].is_array());
    assert_refused(&gw.url, &SigningKey::generate("other").token(&claims("eve")), "a key not in the file").await;
}

/// `resource_metadata` without `resource` names the JWT audience, the URL tokens are
/// minted for; without an audience to take, `check-config` and `run` say the key is
/// missing, at its line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_resource_defaults_to_the_audience_or_is_reported_missing() {
    let k1 = SigningKey::generate("file-key");
    let dir = crate::support::TestDir::new("jwks");
    let path = dir.write("jwks.json", &json!({"keys": [k1.jwk()]}).to_string());
    let yaml =
        gateway_yaml(&format!("jwks_file: {}", path.display())).replace(&format!("    resource: {AUDIENCE}\n"), "");
    assert!(!yaml.contains("resource:"), "{yaml}");
    let gw = Seawall::start(&yaml).await;
    let base = gw.url.trim_end_matches("/mcp").to_owned();
    let doc = Client::get_json(&format!("{base}/.well-known/oauth-protected-resource/mcp")).await;
    assert_eq!(doc["resource"], AUDIENCE, "{doc}");

    let file = dir.write(
        "keys-only.yaml",
        "upstreams:\n  - name: demo\n    command: seawall\n    args: [demo-upstream, --stdio]\n\
         auth:\n  api_keys:\n    - { name: ci, key: 0123456789abcdef }\n  resource_metadata:\n    \
         authorization_servers: [https://idp.example]\n",
    );
    let want = format!("{}:8: auth.resource_metadata.resource: missing", file.display());
    let mut check = tokio::process::Command::new(crate::support::seawall_bin());
    check.arg("check-config").arg(&file);
    let mut run = tokio::process::Command::new(crate::support::seawall_bin());
    run.args(["run", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--config"]).arg(&file);
    for (name, cmd) in [("check-config", check), ("run", run)] {
        let out = crate::support::run_script(name, cmd, Duration::from_secs(60)).await;
        assert!(!out.status.success(), "{name} accepted the file");
        assert!(out.stderr.lines().any(|l| l.starts_with(&want)), "{name}: want {want:?} in\n{}", out.stderr);
        assert!(!out.stderr.contains("without fragment: \"\""), "{name}: {}", out.stderr);
    }
}
