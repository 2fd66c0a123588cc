//! The guards through the real binary: CORS for browser clients (preflights before
//! authentication, readable answers and refusals, other origins refused), sessions and
//! requests in flight per principal, and rate limits that tell unauthenticated clients
//! apart by address.

use std::time::Duration;

use crate::support::mcp_client::{Client, Reply, initialize_body};
use crate::support::{DemoUpstream, Seawall, assert_overloaded};
use serde_json::{Value, json};

const CI_KEY: &str = "ci-key-0123456789abcdef";
const OPS_KEY: &str = "ops-key-0123456789abcdef";
const APP: &str = "https://app.example";

fn auth_yaml() -> String {
    format!(
        "auth:\n  api_keys:\n    - {{ name: ci, key: {CI_KEY} }}\n    - {{ name: ops, key: {OPS_KEY} }}\n  \
         resource_metadata:\n    resource: https://gw.example/mcp\n    authorization_servers: [https://idp.example]\n"
    )
}

fn demo_stdio() -> &'static str {
    "upstreams:\n  - name: demo\n    command: seawall\n    args: [demo-upstream, --stdio]\n"
}

fn demo_http(demo: &DemoUpstream) -> String {
    format!("upstreams:\n  - name: demo\n    url: {}\n", demo.url)
}

fn bearer(key: &str) -> String {
    format!("Bearer {key}")
}

/// Asserts that a page at [`APP`] may read `reply`.
#[track_caller]
fn assert_readable(reply: &Reply) {
    assert_eq!(reply.header("access-control-allow-origin").as_deref(), Some(APP), "{:?}", reply.headers);
    let exposed = reply.header("access-control-expose-headers").unwrap_or_default();
    for name in ["Mcp-Session-Id", "MCP-Protocol-Version", "WWW-Authenticate"] {
        assert!(exposed.contains(name), "{exposed}");
    }
    assert!(reply.headers.get_all("vary").iter().any(|v| v == "Origin"), "{:?}", reply.headers);
}

async fn preflight(url: &str, origin: &str) -> reqwest::Response {
    reqwest::Client::new()
        .request(reqwest::Method::OPTIONS, url)
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type, authorization, mcp-session-id, traceparent")
        .send()
        .await
        .expect("OPTIONS")
}

fn header(resp: &reqwest::Response, name: &str) -> Option<String> {
    resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

// ---------------------------------------------------------------------------------------
// CORS
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflights_are_answered_before_authentication_and_other_origins_refused() {
    let extra = format!("{}security:\n  cors: {{ allowed_origins: ['{APP}'], max_age: 5m }}\n", auth_yaml());
    let gw = Seawall::start(&format!("{}{extra}", demo_stdio())).await;
    let root = gw.url.trim_end_matches("/mcp").to_owned();
    let metadata = format!("{root}/.well-known/oauth-protected-resource/mcp");
    for url in [gw.url.clone(), gw.upstream_url("demo"), gw.upstream_url("nosuch"), metadata] {
        let resp = preflight(&url, APP).await;
        assert_eq!(resp.status(), 204, "{url}");
        assert_eq!(header(&resp, "access-control-allow-origin").as_deref(), Some(APP), "{url}");
        assert_eq!(header(&resp, "access-control-allow-methods").as_deref(), Some("GET, POST, DELETE, OPTIONS"));
        assert_eq!(header(&resp, "access-control-max-age").as_deref(), Some("300"));
        let allowed = header(&resp, "access-control-allow-headers").unwrap_or_default();
        for name in ["content-type", "authorization", "mcp-session-id", "mcp-protocol-version", "last-event-id"] {
            assert!(allowed.split(", ").any(|a| a == name), "{name}: {allowed}");
        }
        assert!(allowed.ends_with("traceparent"), "{allowed}");
        assert!(header(&resp, "vary").is_some_and(|v| v.starts_with("Origin")));
        assert!(header(&resp, "access-control-allow-credentials").is_none());
    }
    for origin in ["https://evil.example", "http://localhost:3000", "null"] {
        let resp = preflight(&gw.url, origin).await;
        assert_eq!(resp.status(), 403, "{origin}");
        assert!(header(&resp, "access-control-allow-origin").is_none(), "{origin}");
        let body: Value = serde_json::from_str(&resp.text().await.expect("body")).expect("JSON body");
        assert_eq!(body["error"]["message"], "Forbidden: Origin not allowed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_to_an_allowed_origin_are_readable_refusals_included() {
    let demo = DemoUpstream::start(false, &[]).await;
    let extra = format!(
        "{}security:\n  cors: {{ allowed_origins: ['{APP}'] }}\nsession: {{ max_sessions_per_principal: 1 }}\n\
         rate_limits:\n  limits:\n    - {{ per: tool, tools: ['demo__add'], rate: 1/m, burst: 1 }}\n",
        auth_yaml()
    );
    let gw = Seawall::start(&format!("{}{extra}", demo_http(&demo))).await;

    // 401: the page can read the challenge.
    let anonymous = Client::with(&gw.url, &[("origin", APP)], None).post(initialize_body(json!(1))).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.raw);
    assert_readable(&anonymous);
    assert!(anonymous.header("www-authenticate").is_some());

    // 200: the session id it must send back.
    let headers = [("origin", APP), ("authorization", &bearer(CI_KEY))];
    let c = Client::with(&gw.url, &headers, None).open().await;
    let listed = c.request(2, "tools/list", json!({})).await;
    assert_eq!(listed.status, 200);
    assert_readable(&listed);
    let init = Client::with(&gw.url, &[("origin", APP), ("authorization", &bearer(OPS_KEY))], None)
        .post(initialize_body(json!(3)))
        .await;
    assert_readable(&init);
    assert!(init.header("mcp-session-id").is_some());

    // 503 (this principal's session cap, while its one session reads its GET stream),
    // 429 (rate limit), 404 (unknown session).
    let (status, _stream) = c.open_stream().await;
    assert_eq!(status, 200);
    let over = Client::with(&gw.url, &headers, None).post(initialize_body(json!(4))).await;
    assert_overloaded(&over, json!(4));
    assert_readable(&over);
    assert_eq!(c.call_tool(5, "demo__add", json!({"a": 1, "b": 2})).await["isError"], json!(null));
    let limited = c.request(6, "tools/call", json!({"name": "demo__add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(limited.status, 429, "{}", limited.raw);
    assert_readable(&limited);
    let mut lost = Client::with(&gw.url, &headers, None);
    lost.session = Some("no-such-session".into());
    let unknown = lost.request(7, "tools/list", json!({})).await;
    assert_eq!(unknown.status, 404);
    assert_readable(&unknown);

    // Another origin's answers carry nothing a browser would let its page read.
    let evil = Client::with(&gw.url, &[("origin", "https://evil.example"), ("authorization", &bearer(CI_KEY))], None)
        .post(initialize_body(json!(8)))
        .await;
    assert_eq!(evil.status, 403, "{}", evil.raw);
    assert!(evil.header("access-control-allow-origin").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_cors_an_allowed_origin_is_refused_and_preflights_are_not_answered() {
    let gw = Seawall::start(&format!("{}{}", demo_stdio(), auth_yaml())).await;
    let page = Client::with(&gw.url, &[("origin", APP), ("authorization", &bearer(CI_KEY))], None);
    let refused = page.post(initialize_body(json!(1))).await;
    assert_eq!(refused.status, 403, "the DNS-rebinding check refuses a foreign origin: {}", refused.raw);
    let resp = preflight(&gw.url, APP).await;
    assert_eq!(resp.status(), 403, "a preflight is refused by the Origin check like any request");
    assert!(header(&resp, "access-control-allow-origin").is_none());
    assert!(header(&resp, "vary").is_none());
}

// ---------------------------------------------------------------------------------------
// Sessions per address and per principal, requests in flight per principal
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principal_cannot_take_every_session() {
    let extra = format!("{}session: {{ max_sessions: 10, max_sessions_per_principal: 2 }}\n", auth_yaml());
    let gw = Seawall::start(&format!("{}{extra}", demo_stdio())).await;
    let ci = |local: &str| Client::with(&gw.url, &[("authorization", &bearer(CI_KEY))], Some(local.parse().unwrap()));
    let first = ci("127.0.0.1").open().await;
    let second = ci("127.0.0.2").open().await;
    // Both busy (their GET streams read): no session of ci's can make room, and from
    // any address the cap is the principal's.
    let streams = [first.open_stream().await, second.open_stream().await];
    assert!(streams.iter().all(|(status, _)| *status == 200));
    let third = ci("127.0.0.3").post(initialize_body(json!("third"))).await;
    assert_overloaded(&third, json!("third"));
    let ops = Client::with(&gw.url, &[("authorization", &bearer(OPS_KEY))], None).open().await;
    assert_eq!(ops.request(1, "ping", json!({})).await.status, 200);
    // An ended session gives its place back.
    assert_eq!(first.delete().await, 200);
    let again = ci("127.0.0.3").open().await;
    assert_eq!(again.request(1, "ping", json!({})).await.status, 200);
}

/// A modern-era `tools/list` whose envelope offers `capabilities` (a context per set).
async fn modern_list(c: &Client, id: u64, capabilities: Value) -> Reply {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "seawall-tests", "version": "1"},
    });
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": {"_meta": meta}});
    c.post_raw(body.to_string(), &[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")]).await
}

/// Polls the demo's record until an upstream session was ended by a DELETE.
async fn upstream_session_deleted(demo: &DemoUpstream) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while tokio::time::Instant::now() < deadline {
        if demo.recorded().iter().any(|e| e["event"] == "session_closed" && e["by"] == "DELETE") {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_left_open_make_room_for_their_address_and_busy_ones_never_go() {
    let demo = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&format!("{}session: {{ max_sessions_per_peer: 3 }}\n", demo_http(&demo))).await;
    let from = |local: &str| Client::with(&gw.url, &[], Some(local.parse().unwrap()));
    // Three sessions never DELETEd, as many clients leave theirs; the oldest is busy.
    let busy = from("127.0.0.2").open().await;
    let oldest_idle = from("127.0.0.2").open().await;
    let idle = from("127.0.0.2").open().await;
    let sleep = |c: &Client, id: u64, ms: u64| {
        let c = c.clone();
        tokio::spawn(async move { c.call_tool(id, "demo__sleep", json!({"ms": ms, "progress": false})).await })
    };
    let call = sleep(&busy, 1, 1500);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(demo.recorded().iter().all(|e| e["event"] != "session_closed"));

    // A fourth is admitted: the least recently used idle session makes room, ended as a
    // DELETE ends it (404 from then on, its upstream session deleted).
    let fourth = from("127.0.0.2").open().await;
    assert_eq!(oldest_idle.request(2, "ping", json!({})).await.status, 404, "the least recently used idle one goes");
    assert!(upstream_session_deleted(&demo).await, "its upstream session is deleted: {:?}", demo.recorded());
    assert_eq!(idle.request(2, "ping", json!({})).await.status, 200);
    let slept = call.await.expect("sleep task");
    assert!(slept["isError"].is_null() && slept.get("content").is_some(), "the busy session's call ends well: {slept}");
    assert_eq!(busy.request(2, "ping", json!({})).await.status, 200, "a session with a call in flight never goes");

    // Every session of the address busy (a call in flight, a GET stream read): refused,
    // with a retry hint that holds — a place is made as soon as one goes idle.
    let calls = [sleep(&busy, 3, 2500), sleep(&idle, 3, 2500)];
    let (status, stream) = fourth.open_stream().await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = from("127.0.0.2").post(initialize_body(json!("late"))).await;
    assert_overloaded(&refused, json!("late"));
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"), "{}", refused.raw);
    assert_eq!(from("127.0.0.3").open().await.request(1, "ping", json!({})).await.status, 200, "other addresses");
    for call in calls {
        call.await.expect("sleep task");
    }
    drop(stream);
    let admitted = from("127.0.0.2").post(initialize_body(json!("later"))).await;
    assert_eq!(admitted.status, 200, "admitted once a session is idle again: {}", admitted.raw);

    // A modern client's contexts count the same way: a fourth set of capabilities from
    // one address is served, the least recently used context making room.
    let modern = from("127.0.0.4");
    for (id, capability) in ["sampling", "roots", "elicitation", "experimental"].into_iter().enumerate() {
        let listed = modern_list(&modern, id as u64, json!({ capability: {} })).await;
        assert_eq!(listed.status, 200, "context {id}: {}", listed.raw);
    }
    let again = modern_list(&modern, 9, json!({"sampling": {}})).await;
    assert_eq!(again.status, 200, "a context let go opens again when used: {}", again.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principal_cannot_take_every_request_in_flight() {
    let demo = DemoUpstream::start(false, &[]).await;
    let extra = format!("{}limits: {{ max_in_flight_per_principal: 2 }}\n", auth_yaml());
    let gw = Seawall::start(&format!("{}{extra}", demo_http(&demo))).await;
    let as_key = |key: &str| Client::with(&gw.url, &[("authorization", &bearer(key))], None);
    let (a, b) = (as_key(CI_KEY).open().await, as_key(CI_KEY).open().await);
    let sleep = |c: Client, id: u64| {
        tokio::spawn(async move {
            c.request(id, "tools/call", json!({"name": "demo__sleep", "arguments": {"ms": 4000, "progress": false}}))
                .await
        })
    };
    let slow = [sleep(a.clone(), 1), sleep(b.clone(), 1)];
    // Once both sleeps are admitted, ci's places are taken, over its two sessions.
    let started = tokio::time::Instant::now();
    let refused = loop {
        let reply = a.request(2, "ping", json!({})).await;
        if reply.status != 200 || started.elapsed() > Duration::from_secs(3) {
            break reply;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_overloaded(&refused, json!(2));
    let ops = as_key(OPS_KEY).open().await;
    assert_eq!(ops.request(1, "ping", json!({})).await.status, 200, "another principal has its own places");
    for task in slow {
        let reply = task.await.expect("sleep task");
        assert_eq!(reply.status, 200, "{}", reply.raw);
        assert!(reply.result()["isError"].is_null(), "{}", reply.raw);
    }
    assert_eq!(b.request(3, "ping", json!({})).await.status, 200, "the places are free again");
}

// ---------------------------------------------------------------------------------------
// Rate limits per address for unauthenticated clients
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_clients_have_a_rate_limit_budget_per_address() {
    let extra = "rate_limits:\n  limits:\n    - { per: principal, rate: 1/m, burst: 2 }\n";
    let gw = Seawall::start(&format!("{}{extra}", demo_stdio())).await;
    let from = |local: &str| Client::with(&gw.url, &[], Some(local.parse().unwrap()));
    let (a1, a2) = (from("127.0.0.1").open().await, from("127.0.0.1").open().await);
    let b = from("127.0.0.2").open().await;
    assert_eq!(a1.request(1, "ping", json!({})).await.status, 200);
    assert_eq!(a2.request(1, "ping", json!({})).await.status, 200);
    let limited = a1.request(2, "ping", json!({})).await;
    assert_eq!(limited.status, 429, "two sessions from one address share a budget: {}", limited.raw);
    assert_eq!(limited.error()["code"], -32013);
    for id in 1..=2 {
        assert_eq!(b.request(id, "ping", json!({})).await.status, 200, "another address has its own budget");
    }
    assert_eq!(b.request(3, "ping", json!({})).await.status, 429);
}
