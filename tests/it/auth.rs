//! Client authentication through the real binary: API keys admit their holders and
//! nobody else, refusals challenge with the protected-resource metadata URL, the
//! metadata document is served unauthenticated, a session belongs to the principal that
//! opened it, and the client's token never reaches an upstream.

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall};
use serde_json::{Value, json};

const CI_KEY: &str = "ci-key-0123456789abcdef";
const OPS_KEY: &str = "ops-key-0123456789abcdef";
const WRONG_KEY: &str = "wrong-key-0123456789abcdef";

/// SHA-256 of `text`, in hex, as an operator would write it into `sha256:`.
fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// An `auth:` section with the key `ci` as given, `ops` as a digest, and metadata.
fn auth_yaml() -> String {
    format!(
        "auth:\n  api_keys:\n    - {{ name: ci, key: {CI_KEY} }}\n    - {{ name: ops, sha256: {} }}\n  \
         resource_metadata:\n    resource: https://gw.example/mcp\n    \
         authorization_servers: [https://idp.example]\n    scopes_supported: [mcp:tools]\n",
        sha256_hex(OPS_KEY)
    )
}

fn gateway_yaml(upstreams: &str) -> String {
    format!("upstreams:\n{upstreams}{}", auth_yaml())
}

/// The listener's root, `http://127.0.0.1:PORT`.
fn root(gw: &Seawall) -> String {
    gw.url.trim_end_matches("/mcp").to_owned()
}

/// A client that sends `Authorization: Bearer <key>` on every request.
fn client(url: &str, key: &str) -> Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {key}").parse().expect("header value");
    headers.insert(reqwest::header::AUTHORIZATION, value);
    let http = reqwest::Client::builder().default_headers(headers).build().expect("client");
    Client { http, ..Client::new(url) }
}

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "seawall-tests", "version": "1"}}})
    .to_string()
}

/// `initialize` + `notifications/initialized` with `key`.
async fn connect(url: &str, key: &str) -> Client {
    let mut c = client(url, key);
    let reply = c.post_raw(initialize_body(), &[]).await;
    assert_eq!(reply.status, 200, "initialize failed: {}", reply.raw);
    c.session = Some(reply.header("mcp-session-id").expect("Mcp-Session-Id"));
    assert_eq!(c.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await.status, 202);
    c
}

fn demo_stdio() -> String {
    "  - name: demo\n    command: seawall\n    args: [demo-upstream, --stdio]\n".to_owned()
}

const METADATA_URL: &str = "https://gw.example/.well-known/oauth-protected-resource/mcp";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_admit_their_holders_and_everyone_else_gets_401_with_the_metadata_url() {
    let mut gw = Seawall::start(&gateway_yaml(&demo_stdio())).await;
    let anonymous = Client::new(&gw.url);

    let missing = anonymous.post_raw(initialize_body(), &[]).await;
    assert_eq!(missing.status, 401, "{}", missing.raw);
    assert_eq!(missing.header("www-authenticate"), Some(format!("Bearer resource_metadata=\"{METADATA_URL}\"")));
    assert_eq!(missing.error()["code"], -32000);
    assert_eq!(missing.error()["message"], "Unauthorized");

    let basic = anonymous.post_raw(initialize_body(), &[("authorization", "Basic Y2k6eA==")]).await;
    assert_eq!(basic.status, 401);
    assert_eq!(basic.header("www-authenticate"), Some(format!("Bearer resource_metadata=\"{METADATA_URL}\"")));

    let invalid = format!("Bearer resource_metadata=\"{METADATA_URL}\", error=\"invalid_token\"");
    for bad in [WRONG_KEY, "", &sha256_hex(OPS_KEY), &CI_KEY[1..]] {
        let wrong = client(&gw.url, bad).post_raw(initialize_body(), &[]).await;
        assert_eq!(wrong.status, 401, "{bad:?}: {}", wrong.raw);
        assert_eq!(wrong.header("www-authenticate").as_deref(), Some(invalid.as_str()), "{bad:?}");
    }

    // One upstream's endpoint names its own document; an unknown upstream is not
    // revealed to an unauthenticated client.
    let single = Client::new(&gw.upstream_url("demo")).post_raw(initialize_body(), &[]).await;
    assert_eq!(single.status, 401);
    assert!(single.header("www-authenticate").is_some_and(|v| v.contains(&format!("{METADATA_URL}/demo\""))));
    let unknown = Client::new(&gw.upstream_url("nosuch")).post_raw(initialize_body(), &[]).await;
    assert_eq!(unknown.status, 401);
    assert_eq!(client(&gw.upstream_url("nosuch"), CI_KEY).post_raw(initialize_body(), &[]).await.status, 404);

    for key in [CI_KEY, OPS_KEY] {
        let c = connect(&gw.url, key).await;
        let echoed = c.call_tool(1, "demo__echo", json!({"message": "hi"})).await;
        assert_eq!(echoed["content"][0]["text"], "hi", "{echoed}");
        assert_eq!(c.delete().await, 200);
    }

    gw.stop(std::time::Duration::from_secs(5)).await;
    let log = gw.proc.output();
    assert!(log.contains("client authentication") && log.contains("on: 2 API key(s)"), "{log}");
    for secret in [CI_KEY, OPS_KEY, WRONG_KEY] {
        assert!(!log.contains(secret), "the log shows a token");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_protected_resource_metadata_is_served_unauthenticated() {
    let gw = Seawall::start(&gateway_yaml(&demo_stdio())).await;
    let base = root(&gw);
    for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"] {
        let doc: Value = Client::get_json(&format!("{base}{path}")).await;
        assert_eq!(
            doc,
            json!({
                "resource": "https://gw.example/mcp",
                "authorization_servers": ["https://idp.example"],
                "bearer_methods_supported": ["header"],
                "scopes_supported": ["mcp:tools"],
            }),
            "{path}"
        );
    }
    let single: Value = Client::get_json(&format!("{base}/.well-known/oauth-protected-resource/mcp/demo")).await;
    assert_eq!(single["resource"], "https://gw.example/mcp/demo");
    let unknown = reqwest::get(format!("{base}/.well-known/oauth-protected-resource/mcp/nosuch")).await.unwrap();
    assert_eq!(unknown.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_opened_by_one_principal_is_unknown_to_another() {
    let gw = Seawall::start(&gateway_yaml(&demo_stdio())).await;
    let owner = connect(&gw.url, CI_KEY).await;
    let session = owner.session.clone();

    let mut other = client(&gw.url, OPS_KEY);
    other.session = session;
    let stolen = other.request(1, "tools/list", json!({})).await;
    let mut bogus = client(&gw.url, OPS_KEY);
    bogus.session = Some("no-such-session".into());
    let unknown = bogus.request(1, "tools/list", json!({})).await;
    assert_eq!(stolen.status, 404, "{}", stolen.raw);
    assert_eq!(stolen.error(), unknown.error(), "a foreign session looks exactly like an unknown one");
    assert_eq!(other.delete().await, 404);

    let mut anonymous = Client::new(&gw.url);
    anonymous.session = owner.session.clone();
    assert_eq!(anonymous.request(2, "tools/list", json!({})).await.status, 401);

    // The owner's session is untouched.
    let listed = owner.request(3, "tools/list", json!({})).await;
    assert!(listed.result()["tools"].as_array().is_some_and(|t| !t.is_empty()), "{}", listed.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_token_never_reaches_an_upstream() {
    let with_cred = DemoUpstream::start(true, &[]).await;
    let without = DemoUpstream::start(true, &[]).await;
    let upstreams = format!(
        "  - name: a\n    url: {}\n    headers: {{ Authorization: \"Bearer upstream-credential\" }}\n  \
         - name: b\n    url: {}\n",
        with_cred.url, without.url
    );
    let gw = Seawall::start(&gateway_yaml(&upstreams)).await;
    let c = connect(&gw.url, CI_KEY).await;
    for (i, tool) in ["a__echo", "b__echo"].into_iter().enumerate() {
        let echoed = c.call_tool(i as u64 + 1, tool, json!({"message": "x"})).await;
        assert_eq!(echoed["content"][0]["text"], "x", "{echoed}");
    }
    let seen = |d: &DemoUpstream| -> Vec<Value> {
        d.recorded().into_iter().filter(|e| e["event"] == "http_headers").map(|e| e["authorization"].clone()).collect()
    };
    let (a, b) = (seen(&with_cred), seen(&without));
    assert!(!a.is_empty() && !b.is_empty(), "the upstreams saw requests");
    assert!(a.iter().all(|v| v == "Bearer upstream-credential"), "{a:?}");
    assert!(b.iter().all(Value::is_null), "{b:?}");
    for d in [&with_cred, &without] {
        let record = std::fs::read_to_string(d.record.as_ref().unwrap()).unwrap();
        assert!(!record.contains(CI_KEY), "an upstream saw the client's token");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_auth_clients_need_no_token_and_no_document_is_served() {
    let gw = Seawall::start(&format!("upstreams:\n{}", demo_stdio())).await;
    let c = Client::connect(&gw.url, json!({})).await;
    assert!(c.request(1, "tools/list", json!({})).await.result()["tools"].is_array());
    let doc = reqwest::get(format!("{}/.well-known/oauth-protected-resource", root(&gw))).await.unwrap();
    assert_eq!(doc.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_without_a_required_scope_gets_403_insufficient_scope() {
    let yaml = format!(
        "upstreams:\n{}auth:\n  required_scopes: [mcp:tools]\n  api_keys:\n    \
         - {{ name: ci, key: {CI_KEY}, scopes: [mcp:tools, extra] }}\n    - {{ name: ops, key: {OPS_KEY} }}\n  \
         resource_metadata:\n    resource: https://gw.example/mcp\n    scopes_supported: [mcp:tools]\n\
         authorization:\n  rules:\n    - {{ principals: ['claim:scope=extra'], deny: {{ tools: ['*__add'] }} }}\n",
        demo_stdio()
    );
    let gw = Seawall::start(&yaml).await;

    let lacking = client(&gw.url, OPS_KEY).post_raw(initialize_body(), &[]).await;
    assert_eq!(lacking.status, 403, "{}", lacking.raw);
    let challenge =
        format!("Bearer resource_metadata=\"{METADATA_URL}\", error=\"insufficient_scope\", scope=\"mcp:tools\"");
    assert_eq!(lacking.header("www-authenticate"), Some(challenge));
    assert_eq!(lacking.error()["message"], "Forbidden: insufficient scope");

    // The key's scopes are its `scope` claim: enough to pass, and seen by the rules.
    let ci = connect(&gw.url, CI_KEY).await;
    let echoed = ci.call_tool(1, "demo__echo", json!({"message": "hi"})).await;
    assert_eq!(echoed["content"][0]["text"], "hi", "{echoed}");
    let add = ci.request(2, "tools/call", json!({"name": "demo__add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(add.error()["code"], -32602, "{}", add.raw);
}
