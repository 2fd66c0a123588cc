//! Error rewriting through the real binary: nothing raw from an upstream reaches a
//! client, every failure still says something precise, arguments are checked before any
//! upstream traffic and malformed structured output is withheld. Assertions are on the
//! raw bytes of the HTTP responses.

mod common;
#[path = "support/fake_upstream.rs"]
mod fake_upstream;
#[path = "support/mcp_client.rs"]
mod mcp_client;

use std::sync::atomic::Ordering;

use common::Seawall;
use fake_upstream::PLANTED;
use mcp_client::{Client, Reply};
use serde_json::{Value, json};

fn assert_clean(what: &str, reply: &Reply) {
    for planted in PLANTED {
        assert!(!reply.raw.contains(planted), "{what}: {planted:?} reached the client: {}", reply.raw);
    }
    assert!(
        reply.raw.bytes().all(|b| b == b'\n' || (0x20..0x7f).contains(&b)),
        "{what}: non-ASCII bytes: {}",
        reply.raw
    );
    assert!(reply.raw.len() < 8 * 1024, "{what}: {} bytes", reply.raw.len());
    let id = &reply.response()["id"];
    assert!(!id.is_null(), "{what}: the id was readable, so it must be echoed");
}

fn text_of(v: &Value) -> String {
    v["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

async fn gateway(extra: &str) -> (Seawall, Client, std::sync::Arc<fake_upstream::Counters>) {
    let (url, counters) = fake_upstream::start().await;
    let config = format!(
        "{extra}\nupstreams:\n  - name: fake\n    url: {url}\n  - name: demo\n    command: seawall\n    args: [demo-upstream, --stdio]\n"
    );
    let gw = Seawall::start(&config).await;
    let c = Client::connect(&gw.url, json!({})).await;
    // Learn the tools (and their schemas), as every client does first.
    c.request(1000, "tools/list", json!({})).await;
    (gw, c, counters)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaky_upstream_failures_reach_the_client_clean_and_actionable() {
    let (_gw, c, _) = gateway("").await;
    let call = |id: u64, name: &str| {
        let c = c.clone();
        let name = name.to_owned();
        async move { c.request(id, "tools/call", json!({"name": name, "arguments": {}})).await }
    };

    // Tool failures become isError results with a correlation id.
    for (id, tool, expect) in [
        (1, "fake__html500", "answered HTTP 500"),
        (2, "fake__trace", "reported an internal error"),
        (3, "fake__java", "reported an internal error"),
        (4, "fake__garbage", "sent an invalid answer"),
        (5, "demo__fail", "reported an internal error"),
    ] {
        let reply = call(id, tool).await;
        assert_clean(tool, &reply);
        let result = reply.result();
        assert_eq!(result["isError"], true, "{tool}: {}", reply.raw);
        let text = text_of(result);
        assert!(text.contains(expect) && text.contains("correlation id"), "{tool}: {text}");
    }

    // A client-fault code passes through, sanitised and bounded.
    let reply = call(6, "fake__ansi_huge").await;
    assert_clean("ansi_huge", &reply);
    assert_eq!(reply.error()["code"], -32602);
    assert!(reply.error()["message"].as_str().unwrap().contains("bad request"));

    // An isError result the tool wrote on purpose stays recognisable, scrubbed.
    let reply = call(7, "fake__ansi_result").await;
    assert_clean("ansi_result", &reply);
    let text = text_of(reply.result());
    assert!(text.contains("failed") && text.contains("IllegalStateException"), "{text}");

    // Resource failures are JSON-RPC errors naming the client's own URI, escaped; the
    // upstream's text around it is scrubbed.
    let reply = c.request(8, "resources/read", json!({"uri": "fake://x/\u{1b}[31mred"})).await;
    assert_clean("resources/read", &reply);
    assert_eq!(reply.error()["code"], -32002);
    assert_eq!(reply.error()["data"]["uri"], "fake://x/\\x1b[31mred", "{}", reply.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_arguments_never_reach_the_upstream_and_name_each_pointer() {
    let (_gw, c, counters) = gateway("").await;
    let bad = c.call_tool(1, "fake__strict", json!({"count": "three", "extra": true})).await;
    assert_eq!(bad["isError"], true);
    let text = text_of(&bad);
    assert!(text.contains("/count"), "{text}");
    assert!(text.contains("label") || text.contains("(root)"), "{text}");
    assert_eq!(counters.strict.load(Ordering::SeqCst), 0, "the upstream saw nothing");

    let ok = c.call_tool(2, "fake__strict", json!({"count": 3, "label": "x"})).await;
    assert_eq!(text_of(&ok), "strict ok");
    assert_eq!(counters.strict.load(Ordering::SeqCst), 1);

    // The demo's own schema too (over stdio).
    let bad = c.call_tool(3, "demo__add", json!({"a": "one"})).await;
    assert_eq!(bad["isError"], true);
    assert!(text_of(&bad).contains("/a"), "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_can_switch_to_json_rpc_errors() {
    let (_gw, c, counters) = gateway("errors: { tool_failures: error, argument_errors: error }").await;
    let reply = c.request(1, "tools/call", json!({"name": "fake__trace", "arguments": {}})).await;
    assert_clean("trace", &reply);
    assert_eq!(reply.error()["code"], -32603);
    assert!(reply.error()["data"]["correlationId"].is_string());
    let reply = c.request(2, "tools/call", json!({"name": "fake__strict", "arguments": {"count": 0}})).await;
    assert_eq!(reply.error()["code"], -32602);
    let violations = reply.error()["data"]["validation_errors"].as_array().unwrap();
    assert!(!violations.is_empty() && violations.len() <= 8);
    assert!(violations.iter().any(|v| v["pointer"] == "/count"), "{violations:?}");
    assert_eq!(counters.strict.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn structured_output_that_breaks_its_schema_is_withheld() {
    let (_gw, c, _) = gateway("").await;
    let reply = c.request(1, "tools/call", json!({"name": "fake__bad_output", "arguments": {}})).await;
    assert_clean("bad_output", &reply);
    assert!(!reply.raw.contains("not a number"), "{}", reply.raw);
    assert_eq!(reply.result()["isError"], true);
    assert!(text_of(reply.result()).contains("output schema"));
    // Conforming output passes untouched.
    let sum = c.call_tool(2, "demo__add", json!({"a": 1, "b": 2})).await;
    assert_eq!(sum["structuredContent"]["sum"], json!(3));
}
