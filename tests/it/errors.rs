//! Error rewriting through the real binary: nothing raw from an upstream reaches a
//! client, every failure still says something precise, arguments are checked before any
//! upstream traffic and malformed structured output is withheld. Assertions are on the
//! raw bytes of the HTTP responses.

use std::sync::atomic::Ordering;

use crate::support::fake_upstream::PLANTED;
use crate::support::mcp_client::{Client, Reply};
use crate::support::{Seawall, text_of};
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

async fn gateway(extra: &str) -> (Seawall, Client, std::sync::Arc<crate::support::fake_upstream::Counters>) {
    let (url, counters) = crate::support::fake_upstream::start().await;
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

/// A tool's own `isError` result that seawall scrubbed carries a correlation id (in a
/// text and in `_meta`); the original is in seawall's log beside it (escaped and
/// bounded), and the access line says the result was rewritten. A result left as it was
/// gets none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrubbed_tool_result_carries_a_correlation_id_and_its_original_is_logged() {
    let dir = crate::support::TestDir::new("scrubbed");
    let access = dir.join("access.jsonl");
    let extra = format!("access_log: {{ path: {} }}", serde_json::to_string(&access).expect("path"));
    let (mut gw, c, _) = gateway(&extra).await;
    let reply = c.request(1, "tools/call", json!({"name": "fake__ansi_result", "arguments": {}})).await;
    assert_clean("ansi_result", &reply);
    let result = reply.result();
    let cid = result["_meta"]["seawall/correlationId"].as_str().expect("a correlation id in _meta").to_owned();
    let items = result["content"].as_array().expect("content");
    let note = items.last().and_then(|i| i["text"].as_str()).unwrap_or_default();
    assert!(note.contains(&format!("correlation id {cid}")), "{}", reply.raw);
    let kept = c.request(2, "tools/call", json!({"name": "demo__add", "arguments": {"a": 1e308, "b": 1e308}})).await;
    assert_eq!(kept.result()["isError"], true, "{}", kept.raw);
    assert!(kept.result().get("_meta").is_none() && !kept.raw.contains("correlation id"), "{}", kept.raw);

    let mut lines = Vec::new();
    for _ in 0..100 {
        lines = std::fs::read_to_string(&access).unwrap_or_default().lines().map(str::to_owned).collect();
        if lines.iter().any(|l| l.contains("\"id\":2")) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let line_of = |id: i64| -> Value {
        lines
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["id"] == id && l["method"] == "tools/call")
            .unwrap_or_else(|| panic!("no access line for {id}: {lines:#?}"))
    };
    let scrubbed = line_of(1);
    assert_eq!(scrubbed["outcome"], "tool_error");
    assert_eq!((scrubbed["rewritten"].as_str(), scrubbed["correlationId"].as_str()), (Some("scrubbed"), Some(&*cid)));
    assert!(line_of(2).get("rewritten").is_none());

    gw.stop(std::time::Duration::from_secs(5)).await;
    let log = gw.proc.output();
    let original = log
        .lines()
        .find(|l| l.contains(&format!("correlation_id={cid}")))
        .unwrap_or_else(|| panic!("no log line with correlation id {cid}:\n{log}"));
    assert!(
        original.contains("password=hunter2") && original.contains("IllegalStateException"),
        "{}",
        &original[..400]
    );
    assert!(original.contains("\\u001b[31m") && !original.contains('\u{1b}'), "escaped: {}", &original[..400]);
    assert!(original.len() < 10 * 1024, "bounded: {} bytes", original.len());
}

/// What the client itself sent stands in the upstream's error as it was sent (escaped):
/// a model can correct its call. What the upstream added is scrubbed, as far as the
/// upstream's `errors.sanitize` says: `standard` (the default) keeps only the client's
/// values, `strict` nothing, `trusted` all but credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_own_values_are_kept_in_error_texts_as_far_as_the_upstream_is_trusted() {
    let (url, _) = crate::support::fake_upstream::start().await;
    let asked = "/home/alice/notes.txt";
    for (level, kept, added) in [
        ("", asked, "not in [path]"),
        ("    errors: { sanitize: strict }\n", "[path]", "not in [path]"),
        ("    errors: { sanitize: trusted }\n", asked, "not in /srv/data"),
    ] {
        let gw = Seawall::start(&format!("upstreams:\n  - name: fake\n    url: {url}\n{level}")).await;
        let c = Client::connect(&gw.url, json!({})).await;
        c.request(1, "tools/list", json!({})).await;
        let result = c.call_tool(2, "fake__access", json!({"path": asked})).await;
        let text = text_of(&result);
        assert_eq!(result["isError"], true, "{level}: {result}");
        assert!(text.contains(&format!("directories: {kept} {added}")), "{level}: {text}");
        assert!(text.contains("password=[redacted]") && !text.contains("hunter2"), "{level}: {text}");

        let reply = c
            .request(3, "tools/call", json!({"name": "fake__access", "arguments": {"path": asked, "mode": "error"}}))
            .await;
        assert_eq!(reply.error()["code"], -32602, "{level}: {}", reply.raw);
        let message = reply.error()["message"].as_str().unwrap_or_default();
        assert!(message.contains(&format!("directories: {kept} {added}")), "{level}: {message}");
        assert!(!reply.raw.contains("hunter2"), "{level}: {}", reply.raw);
        assert_eq!(reply.error()["data"]["upstream"]["path"], kept, "{level}: {}", reply.raw);
    }
}
