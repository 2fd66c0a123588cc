//! seawall speaking the modern era (2026-07-28) to HTTP upstreams, through the real
//! binary: `protocol: auto` serves each client in its own era where the upstream speaks
//! it (the demo upstream speaks both; `--legacy-only` makes it a 2025-11-25 server) and
//! remembers an era refused, a legacy client's
//! session runs on a stateless upstream (ping answered by seawall, subscriptions and its
//! GET stream served by `subscriptions/listen`), and `protocol: modern` in front of a
//! legacy-only server finds it unavailable.

use std::time::Duration;

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall};
use serde_json::{Value, json};

fn yaml(upstreams: &[(&str, &str, &str)]) -> String {
    let mut y = String::from("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n");
    for (name, url, protocol) in upstreams {
        y.push_str(&format!("  - name: {name}\n    url: {url}\n    protocol: {protocol}\n"));
    }
    y
}

fn count(demo: &DemoUpstream, method: &str) -> usize {
    demo.recorded().iter().filter(|e| e["event"] == "request" && e["method"] == method).count()
}

/// A modern request to `url` (the envelope, and the headers an SDK sends).
async fn modern(url: &str, id: u64, method: &str, mut params: Value) -> crate::support::mcp_client::Reply {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    });
    let name = params["name"].as_str().map(str::to_owned);
    let mut headers = vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", method)];
    if let Some(name) = &name {
        headers.push(("mcp-name", name));
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    Client::new(url).post_raw(body, &headers).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_serves_each_client_in_its_own_era_when_it_can_and_remembers_a_refusal() {
    let both = DemoUpstream::start(true, &[]).await;
    let old = DemoUpstream::start(true, &["--legacy-only"]).await;
    let mut gw = Seawall::start(&yaml(&[("both", &both.url, "auto"), ("old", &old.url, "auto")])).await;

    // Legacy clients: the session era on both upstreams, nothing bridged.
    for round in 0..2 {
        let c = Client::connect(&gw.url, json!({})).await;
        for upstream in ["both", "old"] {
            let echoed = c.call_tool(1, &format!("{upstream}__echo"), json!({"message": upstream})).await;
            assert_eq!(echoed["content"][0]["text"], upstream, "round {round}: {echoed}");
        }
        assert_eq!(c.delete().await, 200);
    }
    assert_eq!((count(&both, "initialize"), count(&both, "server/discover")), (2, 0));
    assert_eq!(count(&old, "initialize"), 2);

    // Modern clients: the modern era where it is spoken, the legacy one behind seawall's
    // bridge where it is refused (found once, then remembered).
    for (i, scope) in ["both", "old", "old"].iter().enumerate() {
        let url = gw.upstream_url(scope);
        let echoed = modern(&url, i as u64, "tools/call", json!({"name": "echo", "arguments": {"message": "m"}})).await;
        assert_eq!(echoed.result()["content"][0]["text"], "m", "{scope}: {}", echoed.raw);
    }
    assert_eq!(count(&both, "server/discover"), 1, "one context on /mcp/both");
    assert_eq!(count(&both, "initialize"), 2, "no legacy session for the modern client");
    assert_eq!(count(&old, "initialize"), 3, "one context on /mcp/old, bridged onto a legacy session");

    gw.stop(Duration::from_secs(5)).await;
    let log = gw.proc.output();
    let lines = |upstream: &str| {
        log.lines()
            .filter(|l| l.contains("upstream protocol era") && l.contains(&format!("upstream={upstream}")))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert!(lines("both").is_empty(), "nothing refused, nothing to remember:\n{log}");
    let old_lines = lines("old");
    assert!(old_lines.len() == 1 && old_lines[0].contains("legacy only"), "{old_lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_session_runs_on_a_stateless_upstream() {
    let new = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&yaml(&[("new", &new.url, "modern")])).await;
    let c = Client::connect(&gw.upstream_url("new"), json!({"sampling": {}})).await;

    // ping and logging/setLevel are gone from the modern era: seawall answers them.
    assert_eq!(c.request(1, "ping", json!({})).await.result(), &json!({}));
    assert_eq!(c.request(2, "logging/setLevel", json!({"level": "error"})).await.result(), &json!({}));
    assert_eq!(count(&new, "ping") + count(&new, "logging/setLevel"), 0);

    // The upstream's own errors arrive as JSON-RPC errors, not transport failures.
    let unknown = c.request(3, "tools/call", json!({"name": "nope", "arguments": {}})).await;
    assert_eq!(unknown.error()["code"], -32602, "{}", unknown.raw);

    // A subscription and the GET stream ride one subscriptions/listen stream upstream.
    assert_eq!(c.request(4, "resources/subscribe", json!({"uri": "demo://readme"})).await.result(), &json!({}));
    let (status, mut stream) = c.open_stream().await;
    assert_eq!(status, 200);
    let listening = async {
        loop {
            let filters: Vec<Value> = new.recorded().into_iter().filter(|e| e["event"] == "listen").collect();
            if filters.iter().any(|f| f["notifications"]["resourceSubscriptions"] == json!(["demo://readme"])) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), listening).await.expect("a listen stream with the subscription");
    c.call_tool(5, "echo", json!({"message": "touch"})).await;
    let updated = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let m = stream.recv().await.expect("stream open");
            if m["method"] == "notifications/resources/updated" {
                return m;
            }
        }
    })
    .await
    .expect("resources/updated on the GET stream");
    assert_eq!(updated["params"]["uri"], "demo://readme");

    // Sampling asked through input_required reaches the client as its own request.
    let reply = c
        .request_with(json!(6), "tools/call", json!({"name": "sample", "arguments": {"prompt": "hi"}}), |m| {
            assert_eq!(m["method"], "sampling/createMessage");
            Some(json!({"role": "assistant", "content": {"type": "text", "text": "from the client"}, "model": "t"}))
        })
        .await;
    assert_eq!(reply.result()["content"][0]["text"], "sampled: from the client", "{}", reply.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_modern_in_front_of_a_legacy_only_server_finds_it_unavailable() {
    let old = DemoUpstream::start(true, &["--legacy-only"]).await;
    let gw = Seawall::start(&yaml(&[("old", &old.url, "modern")])).await;
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let reply = Client::new(&gw.upstream_url("old")).post(body).await;
    assert_eq!(reply.error()["code"], -32010, "{}", reply.raw);
    assert_eq!(count(&old, "initialize"), 0, "seawall never falls back when told the era");
}
