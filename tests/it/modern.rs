//! Modern-era (2026-07-28) clients through the real binary, in front of legacy
//! upstreams: stateless POSTs with the per-request envelope, the header ladder and its
//! error codes, `server/discover`, results stamped as the era requires, cancellation by
//! closing the response stream, and multi round-trip requests bridging a legacy
//! upstream's sampling request into an `input_required` result.

use std::time::Duration;

use crate::support::mcp_client::{Client, Reply};
use crate::support::{DemoUpstream, Seawall, Upstream, config_yaml};
use serde_json::{Value, json};

const VERSION: &str = "2026-07-28";

fn envelope(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "seawall-tests", "version": "1"},
    })
}

/// `params` with the envelope added to its `_meta`.
fn with_envelope(mut params: Value, capabilities: Value) -> Value {
    let meta = params.as_object_mut().expect("params object").entry("_meta").or_insert_with(|| json!({}));
    for (k, v) in envelope(capabilities).as_object().expect("object") {
        meta[k] = v.clone();
    }
    params
}

/// The name header a method mirrors.
fn name_of(method: &str, params: &Value) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        _ => return None,
    };
    params[key].as_str().map(str::to_owned)
}

/// A modern request as an SDK sends it: envelope, `MCP-Protocol-Version`, `Mcp-Method`
/// and `Mcp-Name`; `extra` headers replace those.
async fn send(url: &str, id: Value, method: &str, params: Value, extra: &[(&str, &str)]) -> Reply {
    let params = with_envelope(params, json!({"sampling": {}}));
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let name = name_of(method, &params);
    let mut headers = vec![("mcp-protocol-version", VERSION), ("mcp-method", method)];
    if let Some(name) = &name {
        headers.push(("mcp-name", name));
    }
    headers.extend_from_slice(extra);
    Client::new(url).post_raw(body.to_string(), &headers).await
}

fn code_of(reply: &Reply) -> i64 {
    reply.error()["code"].as_i64().unwrap_or_default()
}

/// `demo` over stdio (the legacy era) and `remote` over HTTP in `protocol` (the demo
/// speaks both eras; `auto` finds the modern one).
fn gateway_yaml_speaking(demo_url: &str, protocol: &str) -> String {
    let yaml = config_yaml(&[Upstream::demo_stdio("demo", true), Upstream::http("remote", demo_url)], "");
    yaml.replace(&format!("url: \"{demo_url}\"\n"), &format!("url: \"{demo_url}\"\n    protocol: {protocol}\n"))
}

fn gateway_yaml(demo_url: &str) -> String {
    gateway_yaml_speaking(demo_url, "auto")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_requests_are_served_and_stamped_and_never_get_a_session() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&gateway_yaml(&remote.url)).await;

    let discover = send(&gw.url, json!(1), "server/discover", json!({}), &[]).await;
    assert_eq!(discover.status, 200, "{}", discover.raw);
    let result = discover.result();
    assert_eq!(result["supportedVersions"], json!([VERSION]));
    assert_eq!((result["resultType"].as_str(), result["cacheScope"].as_str()), (Some("complete"), Some("private")));
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "seawall");
    assert!(discover.header("mcp-session-id").is_none(), "no session is minted");

    let list = send(&gw.url, json!("a"), "tools/list", json!({}), &[("mcp-session-id", "ignored")]).await;
    assert_eq!(list.status, 200, "{}", list.raw);
    assert_eq!(list.response()["id"], "a");
    let tools = list.result()["tools"].as_array().cloned().unwrap_or_default();
    assert!(tools.iter().any(|t| t["name"] == "demo__echo") && tools.iter().any(|t| t["name"] == "remote__echo"));
    assert!(list.header("mcp-session-id").is_none());
    let single = send(&gw.upstream_url("remote"), json!("b"), "tools/list", json!({}), &[]).await;
    assert_eq!(list.result()["cacheScope"], "private", "a merged list is cached by no one but its client");

    let echo =
        send(&gw.url, json!(3), "tools/call", json!({"name": "remote__echo", "arguments": {"message": "hi"}}), &[])
            .await;
    assert_eq!(echo.result()["content"][0]["text"], "hi", "{}", echo.raw);
    assert_eq!(echo.result()["resultType"], "complete");
    let read = send(&gw.url, json!(4), "resources/read", json!({"uri": "demo://readme"}), &[]).await;
    assert_eq!(read.result()["cacheScope"], "private", "{}", read.raw);

    // Progress goes out on the request's own stream, before the answer.
    let params = json!({"name": "demo__sleep", "arguments": {"ms": 300}, "_meta": {"progressToken": "p1"}});
    let slept = send(&gw.url, json!(5), "tools/call", params, &[]).await;
    assert!(slept.sse, "progress makes the answer a stream: {}", slept.raw);
    let progress = slept.notifications("notifications/progress");
    assert!(!progress.is_empty() && progress.iter().all(|p| p["params"]["progressToken"] == "p1"), "{}", slept.raw);
    assert_eq!(slept.result()["resultType"], "complete");

    // The modern upstream's own caching hints pass through; one discover serves every
    // request of one kind of client.
    assert_eq!(
        (single.result()["ttlMs"].as_u64(), single.result()["cacheScope"].as_str()),
        (Some(5000), Some("public"))
    );
    let discovers = remote.recorded().iter().filter(|e| e["method"] == "server/discover").count();
    assert_eq!(discovers, 2, "one link per context (`/mcp` and `/mcp/remote`), reused by every request");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_front_of_a_legacy_upstream_a_context_keeps_one_upstream_session_and_the_envelope_to_itself() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&gateway_yaml_speaking(&remote.url, "legacy")).await;
    for id in 1..=3 {
        let list = send(&gw.url, json!(id), "tools/list", json!({}), &[]).await;
        assert_eq!((list.result()["ttlMs"].as_u64(), list.result()["cacheScope"].as_str()), (Some(0), Some("private")));
    }
    let echo =
        send(&gw.url, json!(4), "tools/call", json!({"name": "remote__echo", "arguments": {"message": "x"}}), &[])
            .await;
    assert_eq!(echo.result()["resultType"], "complete", "{}", echo.raw);
    let initializes = remote.recorded().iter().filter(|e| e["method"] == "initialize").count();
    assert_eq!(initializes, 1, "the context's upstream session is reused");
    let meta_seen = remote.recorded().iter().any(|e| e.to_string().contains("io.modelcontextprotocol/protocolVersion"));
    assert!(!meta_seen, "the envelope is not forwarded to a legacy upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ladder_answers_each_fault_with_its_code_and_status() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = Seawall::start(&gateway_yaml(&remote.url)).await;
    let call = json!({"name": "remote__echo", "arguments": {"message": "x"}});

    let mismatch = send(&gw.url, json!(1), "tools/call", call.clone(), &[("mcp-name", "remote__add")]).await;
    assert_eq!((mismatch.status, code_of(&mismatch)), (400, -32020), "{}", mismatch.raw);
    assert_eq!(mismatch.response()["id"], 1);
    let method = send(&gw.url, json!(2), "tools/call", call.clone(), &[("mcp-method", "tools/list")]).await;
    assert_eq!((method.status, code_of(&method)), (400, -32020));

    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}).to_string();
    let headers = [("mcp-protocol-version", VERSION), ("mcp-method", "tools/list")];
    let bare = Client::new(&gw.url).post_raw(body, &headers).await;
    assert_eq!((bare.status, code_of(&bare)), (400, -32602), "no envelope: {}", bare.raw);

    let mut params = with_envelope(json!({}), json!({}));
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": params}).to_string();
    let future = Client::new(&gw.url)
        .post_raw(body, &[("mcp-protocol-version", "2099-01-01"), ("mcp-method", "tools/list")])
        .await;
    assert_eq!((future.status, code_of(&future)), (400, -32022), "{}", future.raw);
    assert_eq!(future.error()["data"], json!({"supported": [VERSION], "requested": "2099-01-01"}));

    for removed in ["ping", "initialize", "logging/setLevel", "resources/subscribe"] {
        let reply = send(&gw.url, json!(5), removed, json!({}), &[]).await;
        assert_eq!((reply.status, code_of(&reply)), (404, -32601), "{removed}: {}", reply.raw);
    }
    let unknown = send(&gw.url, json!(6), "tools/call", json!({"name": "remote__nope", "arguments": {}}), &[]).await;
    assert_eq!((unknown.status, code_of(&unknown)), (400, -32602), "{}", unknown.raw);

    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}).to_string();
    assert_eq!(Client::new(&gw.url).post_raw(note, &[("mcp-protocol-version", VERSION)]).await.status, 202);
    let batch = format!("[{}]", json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}));
    let batch = Client::new(&gw.url).post_raw(batch, &[("mcp-protocol-version", VERSION)]).await;
    assert_eq!((batch.status, code_of(&batch)), (400, -32600), "{}", batch.raw);

    let http = reqwest::Client::new();
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let resp =
            http.request(method.clone(), &gw.url).header("mcp-protocol-version", VERSION).send().await.expect("send");
        assert_eq!(resp.status().as_u16(), 405, "{method}");
        assert_eq!(resp.headers().get("allow").and_then(|v| v.to_str().ok()), Some("POST"));
    }

    // A legacy client on the same endpoint is untouched.
    let legacy = Client::connect(&gw.url, json!({})).await;
    let echoed = legacy.call_tool(8, "remote__echo", json!({"message": "legacy"})).await;
    assert_eq!(echoed["content"][0]["text"], "legacy");
    assert!(echoed.get("resultType").is_none(), "legacy results are not stamped: {echoed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_upstreams_sampling_request_becomes_input_required_and_the_retry_completes_it() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = Seawall::start(&gateway_yaml(&remote.url)).await;

    for upstream in ["demo", "remote"] {
        let call = json!({"name": format!("{upstream}__sample"), "arguments": {"prompt": "hello"}});
        let first = send(&gw.url, json!(1), "tools/call", call.clone(), &[]).await;
        let result = first.result().clone();
        assert_eq!(result["resultType"], "input_required", "{upstream}: {}", first.raw);
        let requests = result["inputRequests"].as_object().cloned().unwrap_or_default();
        assert_eq!(requests.len(), 1, "{result}");
        let (key, request) = requests.iter().next().expect("one input request");
        assert_eq!(request["method"], "sampling/createMessage");
        assert_eq!(request["params"]["messages"][0]["content"]["text"], "hello");
        let state = result["requestState"].as_str().expect("requestState").to_owned();

        let answer = json!({"role": "assistant", "model": "m", "content": {"type": "text", "text": "sampled reply"}});
        let mut retry = call.clone();
        retry["inputResponses"] = json!({ key.as_str(): answer });
        retry["requestState"] = json!(state);
        let done = send(&gw.url, json!(2), "tools/call", retry.clone(), &[]).await;
        assert_eq!(done.response()["id"], 2, "the retry is answered under its own id");
        assert_eq!(done.result()["content"][0]["text"], "sampled: sampled reply", "{upstream}: {}", done.raw);
        assert_eq!(done.result()["resultType"], "complete");

        let again = send(&gw.url, json!(3), "tools/call", retry, &[]).await;
        assert_eq!((again.status, code_of(&again)), (400, -32602), "a used requestState: {}", again.raw);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_response_stream_cancels_the_call_upstream() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&gateway_yaml(&remote.url)).await;

    let params = json!({"name": "remote__sleep", "arguments": {"ms": 20000}});
    let url = gw.url.clone();
    let call = tokio::spawn(async move { send(&url, json!(1), "tools/call", params, &[]).await });
    let started = tokio::time::Instant::now();
    while !remote.recorded().iter().any(|e| e["event"] == "call" && e["tool"] == "sleep") {
        assert!(started.elapsed() < Duration::from_secs(10), "the call never reached the upstream");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    call.abort();
    let cancelled = loop {
        if let Some(e) = remote.recorded().into_iter().find(|e| e["event"] == "cancelled") {
            break e;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no notifications/cancelled reached the upstream");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(cancelled["requestId"].is_number() || cancelled["requestId"].is_string(), "{cancelled}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_listen_acknowledges_and_relays_what_the_filter_asks_for() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&gateway_yaml(&remote.url)).await;

    for (scope, echo) in [(gw.upstream_url("remote"), "echo"), (gw.url.clone(), "demo__echo")] {
        let params = with_envelope(
            json!({"notifications": {"toolsListChanged": true, "resourceSubscriptions": ["demo://readme"]}}),
            // The same envelope as `send`'s: the same context, so the same upstream sessions.
            json!({"sampling": {}}),
        );
        let body = json!({"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen", "params": params});
        let resp = reqwest::Client::new()
            .post(&scope)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", VERSION)
            .header("mcp-method", "subscriptions/listen")
            .body(body.to_string())
            .send()
            .await
            .expect("listen");
        assert_eq!(resp.status().as_u16(), 200, "{scope}");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
        let reader = tokio::spawn(async move {
            let mut events =
                Box::pin(seawall::sse::decode_stream(futures::StreamExt::boxed(resp.bytes_stream()), 1 << 20));
            while let Some(Ok(ev)) = futures::StreamExt::next(&mut events).await {
                if let Ok(v) = serde_json::from_str::<Value>(&ev.data)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let ack = next(&mut rx).await;
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{scope}: {ack}");
        assert_eq!(ack["params"]["notifications"]["resourceSubscriptions"], json!(["demo://readme"]));
        assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "L1");

        let touched =
            send(&scope, json!(2), "tools/call", json!({"name": echo, "arguments": {"message": "touch"}}), &[]).await;
        assert_eq!(touched.result()["content"][0]["text"], "touch", "{}", touched.raw);
        let updated = next(&mut rx).await;
        assert_eq!(updated["method"], "notifications/resources/updated", "{scope}: {updated}");
        assert_eq!(updated["params"]["uri"], "demo://readme");
        assert_eq!(updated["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "L1");
        reader.abort();
    }

    let json_only = Client::new(&gw.url)
        .post_raw(
            json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
                   "params": with_envelope(json!({"notifications": {}}), json!({}))})
            .to_string(),
            &[
                ("mcp-protocol-version", VERSION),
                ("mcp-method", "subscriptions/listen"),
                ("accept", "application/json"),
            ],
        )
        .await;
    assert_eq!(json_only.status, 406, "a listen answer is a stream: {}", json_only.raw);
}

async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>) -> Value {
    tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("a message").expect("open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_serves_a_public_list_to_every_principal_filtered_for_each() {
    let remote = DemoUpstream::start(true, &[]).await;
    let yaml = format!(
        "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: remote\n    url: {}\n\
         cache: {{ enabled: true }}\nauth:\n  api_keys:\n    - {{ name: a, key: key-a-0123456789abcdef }}\n    \
         - {{ name: b, key: key-b-0123456789abcdef }}\nauthorization:\n  rules:\n    \
         - {{ principals: [a], allow: {{ tools: [echo] }} }}\n    - {{ principals: [a], deny: {{ tools: ['*'] }} }}\n",
        remote.url
    );
    let gw = Seawall::start(&yaml).await;
    let url = gw.upstream_url("remote");
    let names = |reply: &Reply| -> Vec<String> {
        let tools = reply.result()["tools"].as_array().cloned().unwrap_or_default();
        tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
    };
    let list = |key: &'static str| {
        let url = url.clone();
        async move {
            let auth = format!("Bearer {key}");
            send(&url, json!(1), "tools/list", json!({}), &[("authorization", auth.as_str())]).await
        }
    };
    let a = list("key-a-0123456789abcdef").await;
    let b = list("key-b-0123456789abcdef").await;
    let a_again = list("key-a-0123456789abcdef").await;
    assert_eq!(names(&a), ["echo"], "{}", a.raw);
    assert!(names(&b).len() > 3 && names(&b).contains(&"sleep".to_owned()), "{}", b.raw);
    assert_eq!(names(&a_again), ["echo"]);
    assert_eq!(b.result()["cacheScope"], "public");
    assert_eq!(count_requests(&remote, "tools/list"), 1, "one upstream listing served all three");
}

fn count_requests(demo: &DemoUpstream, method: &str) -> usize {
    demo.recorded().iter().filter(|e| e["event"] == "request" && e["method"] == method).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_call_sends_right_before_its_answer_reaches_the_client_before_it() {
    // The demo's `log` sends its message and answers at once, on the answer's stream
    // (over HTTP, in either era: a stdio server's messages are tied to no request).
    let remote = DemoUpstream::start(false, &[]).await;
    let legacy = DemoUpstream::start(false, &["--legacy-only"]).await;
    let yaml = config_yaml(&[Upstream::http("remote", &remote.url), Upstream::http("legacy", &legacy.url)], "");
    let gw = Seawall::start(&yaml).await;
    for scope in [gw.upstream_url("remote"), gw.upstream_url("legacy")] {
        for round in 0..20 {
            let mut params =
                json!({"name": "log", "arguments": {"message": format!("round {round}"), "level": "info"}});
            params["_meta"] = json!({"io.modelcontextprotocol/logLevel": "debug", "progressToken": round});
            let reply = send(&scope, json!(round), "tools/call", params, &[]).await;
            assert_eq!(reply.result()["content"][0]["text"], "logged", "{}", reply.raw);
            let logs = reply.notifications("notifications/message");
            assert_eq!(logs.len(), 1, "{scope}, round {round}: {}", reply.raw);
            assert_eq!(logs[0]["params"]["data"], format!("round {round}"));
        }
    }
}
