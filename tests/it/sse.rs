//! HTTP+SSE (the transport of protocol version 2024-11-05) through the real binary:
//! clients on `/sse`, `/mcp/<upstream>/sse` and a plain GET of `/mcp[/<upstream>]`, and
//! upstreams with `transport: sse` (the demo's `/sse`). The sessions are the gateway's
//! own, so authentication, caps, limits and resilience apply as for Streamable HTTP.

use std::time::{Duration, Instant};

use crate::support::sse_client::{SseClient, WAIT};
use crate::support::{DemoUpstream, Seawall, Upstream, config_yaml, text_of};
use serde_json::{Value, json};

/// seawall in front of the demo twice: `remote` over Streamable HTTP, `old` over HTTP+SSE.
async fn gateway(remote: &DemoUpstream, old: &DemoUpstream, extra: &str) -> Seawall {
    Seawall::start(&config_yaml(&[Upstream::http("remote", &remote.url), Upstream::sse("old", &old.sse_url())], extra))
        .await
}

/// `http://127.0.0.1:PORT`.
fn root(gw: &Seawall) -> String {
    gw.url.trim_end_matches("/mcp").to_owned()
}

/// Polls a demo's record until `pick` holds for an event (10 s at most).
async fn recorded(demo: &DemoUpstream, what: &str, pick: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if demo.recorded().iter().any(&pick) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} not recorded: {:#?}", demo.recorded());
}

fn tool_names(reply: &Value) -> Vec<String> {
    reply["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gets_its_endpoint_first_and_every_answer_on_the_stream() {
    // A session-era server, so that its upstream session ends with a DELETE.
    let remote = DemoUpstream::start(true, &["--legacy-only"]).await;
    let old = DemoUpstream::start(true, &[]).await;
    let gw = gateway(&remote, &old, "").await;
    let mut c = SseClient::open(&format!("{}/sse", root(&gw))).await;
    assert!(c.endpoint.starts_with("/messages?sessionId="), "{}", c.endpoint);

    let init = c.initialize().await;
    assert_eq!(init["protocolVersion"], "2024-11-05");
    assert_eq!(init["serverInfo"]["name"], "seawall");
    // The upstream session over HTTP+SSE was opened with the client's version.
    recorded(&old, "initialize 2024-11-05", |e| e["event"] == "initialize" && e["protocolVersion"] == "2024-11-05")
        .await;

    let names = tool_names(&c.request(1, "tools/list", json!({})).await);
    for name in ["remote__echo", "old__echo", "old__sleep", "old__add"] {
        assert!(names.iter().any(|n| n == name), "{name} missing from {names:?}");
    }
    assert_eq!(text_of(&c.call_tool(2, "old__echo", json!({"message": "through sse"})).await), "through sse");
    assert_eq!(c.call_tool(3, "old__add", json!({"a": 2, "b": 40})).await["structuredContent"]["sum"], 42);

    // Requests run concurrently and their answers interleave: a slow call with progress
    // is overtaken by a quick one, and its progress comes before its answer.
    let slow = json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{
        "name":"old__sleep","arguments":{"ms":600},"_meta":{"progressToken":"p-4"}}});
    assert_eq!(c.post(slow).await, 202);
    assert_eq!(text_of(&c.call_tool(5, "remote__echo", json!({"message": "quick"})).await), "quick");
    let answer = c.response(&json!(4)).await;
    assert_eq!(text_of(&answer["result"]), "slept 600 ms");
    let progress: Vec<&Value> = c.backlog().iter().filter(|m| m["method"] == "notifications/progress").collect();
    assert!(!progress.is_empty(), "no progress before the answer: {:?}", c.backlog());
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "p-4"), "{progress:?}");

    let read = c.request(6, "resources/read", json!({"uri": "demo://readme"})).await;
    assert!(read["result"]["contents"][0]["text"].is_string(), "{read}");
    let prompt = c.request(7, "prompts/get", json!({"name": "old__greet", "arguments": {"name": "Ada"}})).await;
    assert_eq!(prompt["result"]["messages"][0]["content"]["text"], "Please greet Ada.");

    // POSTs that name no open stream.
    let root = root(&gw);
    let ping = json!({"jsonrpc":"2.0","id":8,"method":"ping"}).to_string();
    assert_eq!(c.post_to(&format!("{root}/messages?sessionId=nope"), ping.clone(), None).await.0, 404);
    assert_eq!(c.post_to(&format!("{root}/messages"), ping.clone(), None).await.0, 400);
    assert_eq!(c.post_to(&c.post_url.clone(), "{not json".into(), None).await.0, 400);

    // Closing the stream ends the session and both upstream sessions with it.
    let post_url = c.post_url.clone();
    let probe = SseClient::open(&format!("{root}/sse")).await;
    c.close();
    recorded(&remote, "the DELETE of the upstream session", |e| e["event"] == "session_closed" && e["by"] == "DELETE")
        .await;
    recorded(&old, "the close of the upstream stream", |e| e["event"] == "session_closed" && e["by"] == "stream").await;
    assert_eq!(probe.post_to(&post_url, ping, None).await.0, 404, "the closed stream's endpoint is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_without_a_session_opens_one_per_endpoint() {
    let remote = DemoUpstream::start(false, &[]).await;
    let old = DemoUpstream::start(false, &[]).await;
    let gw = gateway(&remote, &old, "").await;
    let root = root(&gw);

    // What SSEClientTransport does when pointed at the Streamable HTTP URL.
    let mut aggregate = SseClient::open(&gw.url).await;
    assert!(aggregate.endpoint.starts_with("/messages?sessionId="), "{}", aggregate.endpoint);
    aggregate.initialize().await;
    assert!(tool_names(&aggregate.request(1, "tools/list", json!({})).await).contains(&"old__echo".to_owned()));

    for url in [gw.upstream_url("old"), format!("{root}/mcp/old/sse")] {
        let mut single = SseClient::open(&url).await;
        assert!(single.endpoint.starts_with("/mcp/old/messages?sessionId="), "{}", single.endpoint);
        let init = single.initialize().await;
        assert_eq!(init["serverInfo"]["name"], "seawall-demo", "the upstream's own answer");
        let names = tool_names(&single.request(1, "tools/list", json!({})).await);
        assert!(names.contains(&"echo".to_owned()), "names unchanged on /mcp/old: {names:?}");
        // Its sessionId means nothing on another endpoint.
        let other = single.post_url.replace("/mcp/old/messages", "/messages");
        let ping = json!({"jsonrpc":"2.0","id":2,"method":"ping"}).to_string();
        assert_eq!(single.post_to(&other, ping, None).await.0, 404);
        single.close();
    }

    let missing = SseClient::open_with(&format!("{root}/mcp/nope/sse"), None, &[]).await.err().unwrap();
    assert_eq!(missing.status, 404);
    // A GET of /mcp with neither Accept nor session stays a Streamable HTTP refusal.
    let plain = reqwest::get(&gw.url).await.unwrap();
    assert_eq!(plain.status(), 400);
    // Before initialize only ping is served.
    let mut early = SseClient::open(&format!("{root}/sse")).await;
    assert_eq!(early.request(1, "ping", json!({})).await["result"], json!({}));
    assert_eq!(early.request(2, "tools/list", json!({})).await["error"]["code"], -32600);
}

const KEY_A: &str = "key-a-0123456789abcdef";
const KEY_B: &str = "key-b-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_belongs_to_the_caller_that_opened_it() {
    let remote = DemoUpstream::start(true, &[]).await;
    let old = DemoUpstream::start(true, &[]).await;
    let auth = format!("auth:\n  api_keys:\n    - {{ name: a, key: {KEY_A} }}\n    - {{ name: b, key: {KEY_B} }}\n");
    let gw = gateway(&remote, &old, &auth).await;
    let url = format!("{}/sse", root(&gw));

    let anonymous = SseClient::open_with(&url, None, &[]).await.err().unwrap();
    assert_eq!(anonymous.status, 401);
    assert!(anonymous.headers.contains_key("www-authenticate"));

    let mut c = SseClient::open_with(&url, Some(KEY_A), &[]).await.unwrap();
    c.initialize().await;
    let ping = json!({"jsonrpc":"2.0","id":1,"method":"ping"}).to_string();
    let (status, body) = c.post_to(&c.post_url.clone(), ping.clone(), Some(KEY_B)).await;
    assert_eq!(status, 404, "another caller's POST is refused as an unknown session: {body}");
    assert_eq!(c.post_to(&c.post_url.clone(), ping.clone(), None).await.0, 401);
    assert_eq!(text_of(&c.call_tool(2, "old__echo", json!({"message": "mine"})).await), "mine");

    // The client's token reaches neither upstream.
    for demo in [&remote, &old] {
        let seen: Vec<Value> = demo
            .recorded()
            .into_iter()
            .filter(|e| e["event"] == "http_headers")
            .map(|e| e["authorization"].clone())
            .collect();
        assert!(!seen.is_empty() && seen.iter().all(Value::is_null), "{seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_caps_origin_checks_and_body_limits_apply() {
    let remote = DemoUpstream::start(false, &[]).await;
    let old = DemoUpstream::start(false, &[]).await;
    let gw = gateway(&remote, &old, "session: { max_sessions: 1 }\nlimits: { max_body_bytes: 4096 }\n").await;
    let url = format!("{}/sse", root(&gw));

    let mut first = SseClient::open(&url).await;
    first.initialize().await;
    let full = SseClient::open_with(&url, None, &[]).await.err().unwrap();
    assert_eq!(full.status, 503, "{}", full.body);
    assert!(full.headers.contains_key("retry-after"));
    assert_eq!(serde_json::from_str::<Value>(&full.body).unwrap()["error"]["code"], -32012);

    let foreign = SseClient::open_with(&url, None, &[("origin", "http://evil.example")]).await.err().unwrap();
    assert_eq!(foreign.status, 403);

    let post_url = first.post_url.clone();
    let big = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"old__echo",
        "arguments":{"message": "x".repeat(8000)}}});
    assert_eq!(first.post_to(&post_url, big.to_string(), None).await.0, 413);
    let text = first
        .http
        .post(&post_url)
        .header("content-type", "text/plain")
        .body(json!({"jsonrpc":"2.0","id":2,"method":"ping"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), 415);
    let wrong_version = first
        .http
        .post(&post_url)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "1999-01-01")
        .body(json!({"jsonrpc":"2.0","id":3,"method":"ping"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_version.status(), 400);
    // The SDK sends the negotiated version on its POSTs once initialised.
    let right_version = first
        .http
        .post(&post_url)
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2024-11-05")
        .body(json!({"jsonrpc":"2.0","id":4,"method":"ping"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(right_version.status(), 202);
    assert_eq!(first.response(&json!(4)).await["result"], json!({}));

    // The place frees up when the stream closes.
    first.close();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut again = loop {
        match SseClient::open_with(&url, None, &[]).await {
            Ok(c) => break c,
            Err(r) if r.status == 503 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(r) => panic!("{r:?}"),
        }
    };
    again.initialize().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_sse_upstream_that_dies_fails_calls_in_flight_and_is_used_again_when_back() {
    let mut old = DemoUpstream::start(true, &[]).await;
    let addr = old.url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let gw = Seawall::start(&config_yaml(&[Upstream::sse("old", &old.sse_url())], "")).await;
    let aggregate = crate::support::mcp_client::Client::connect(&gw.url, json!({})).await;
    let single = crate::support::mcp_client::Client::connect(&gw.upstream_url("old"), json!({})).await;
    let names = tool_names(aggregate.request(1, "tools/list", json!({})).await.response());
    assert!(names.contains(&"old__sleep".to_owned()), "{names:?}");
    assert_eq!(text_of(&single.call_tool(2, "echo", json!({"message": "up"})).await), "up");

    let in_flight = {
        let single = single.clone();
        tokio::spawn(async move {
            let result = single.call_tool(3, "sleep", json!({"ms": 30000})).await;
            (result, Instant::now())
        })
    };
    recorded(&old, "the long call", |e| e["event"] == "call" && e["tool"] == "sleep").await;
    let killed = Instant::now();
    old.proc.stop(Duration::from_secs(5)).await;
    let (result, answered) = tokio::time::timeout(WAIT, in_flight).await.expect("the call hangs").unwrap();
    assert!(answered - killed < Duration::from_secs(3), "answered {:?} after the kill", answered - killed);
    assert_eq!(result["isError"], true, "{result}");
    assert!(text_of(&result).contains("broke"), "{result}");

    let back = DemoUpstream::start_at(&addr, false, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut id = 10;
    for client in [&single, &aggregate] {
        let tool = if client.url.ends_with("/old") { "echo" } else { "old__echo" };
        loop {
            id += 1;
            let result = client.call_tool(id, tool, json!({"message": "back"})).await;
            if result["isError"] != true {
                assert_eq!(text_of(&result), "back");
                break;
            }
            assert!(Instant::now() < deadline, "the upstream never came back: {result}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    drop(back);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellations_and_deadlines_reach_an_http_sse_upstream() {
    let old = DemoUpstream::start(true, &[]).await;
    let extra = "defaults: { timeouts: { tool_call: 1s, tool_idle: 1s } }\n";
    let gw = Seawall::start(&config_yaml(&[Upstream::sse("old", &old.sse_url())], extra)).await;
    let mut c = SseClient::open(&format!("{}/mcp/old/sse", root(&gw))).await;
    c.initialize().await;

    // The client's own notifications/cancelled: forwarded upstream, and the request is not
    // answered (the receiver of a cancellation sends nothing for that request).
    let call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":800}}});
    assert_eq!(c.post(call).await, 202);
    recorded(&old, "the call", |e| e["event"] == "call" && e["tool"] == "sleep").await;
    let cancel = json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"no longer needed"}});
    assert_eq!(c.post(cancel).await, 202);
    recorded(&old, "the forwarded cancellation", |e| e["event"] == "cancelled").await;

    // A call past its deadline: a timed-out result, and the upstream is told.
    let result = c.call_tool(8, "sleep", json!({"ms": 5000, "progress": false})).await;
    assert_eq!(result["isError"], true, "{result}");
    assert!(text_of(&result).contains("timed out"), "{result}");
    assert!(!c.backlog().iter().any(|m| m["id"] == 7), "the cancelled request was answered: {:?}", c.backlog());
    let cancellations = || old.recorded().iter().filter(|e| e["event"] == "cancelled").count();
    let deadline = Instant::now() + Duration::from_secs(10);
    while cancellations() < 2 {
        assert!(Instant::now() < deadline, "the timed-out call was not cancelled upstream: {:#?}", old.recorded());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An HTTP+SSE server that answers in the POST's own body (200) rather than on its event
/// stream is heard there: its calls are answered at once, not at their deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_sse_upstream_that_answers_in_the_post_body_is_heard() {
    let old = DemoUpstream::start(false, &["--sse-inline"]).await;
    let extra = "defaults: { timeouts: { tool_call: 20s, request: 20s } }\n";
    let gw = Seawall::start(&config_yaml(&[Upstream::sse("old", &old.sse_url())], extra)).await;
    let started = Instant::now();
    let c = crate::support::mcp_client::Client::connect(&gw.upstream_url("old"), json!({})).await;
    let echoed = c.call_tool(1, "echo", json!({"message": "inline"})).await;
    assert_eq!(echoed["content"][0]["text"], "inline", "{echoed}");
    let failed = c.request(2, "tools/call", json!({"name": "add", "arguments": {"a": "x"}})).await;
    assert!(failed.response().get("error").is_some() || failed.result()["isError"] == true, "{}", failed.raw);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "answered without waiting for the 20 s deadline: {took:?}");
}
