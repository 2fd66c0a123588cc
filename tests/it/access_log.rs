//! The access log through the real binary: one JSON line per client request, with what
//! became of it, in the configured file; nothing when it is off.

use std::time::Duration;

use crate::support::mcp_client::Client;
use crate::support::{Seawall, TestDir, Upstream, config_yaml};
use serde_json::{Value, json};

fn lines(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_gets_one_line_with_its_outcome() {
    let dir = TestDir::new("access");
    let path = dir.join("access.jsonl");
    let extra = format!("access_log: {{ path: {} }}\n", serde_json::to_string(&path).expect("path"));
    let gw = Seawall::start(&config_yaml(&[Upstream::demo_stdio("demo", false)], &extra)).await;
    let c = Client::connect(&gw.url, json!({})).await;
    c.call_tool(1, "demo__echo", json!({"message": "hi"})).await;
    c.call_tool(2, "demo__fail", json!({"mode": "result"})).await;
    let unknown = c.request(3, "tools/call", json!({"name": "demo__nope", "arguments": {}})).await;
    assert_eq!(unknown.error()["code"], -32602);
    c.request(4, "tools/list", json!({})).await;

    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = lines(&path);
        if seen.len() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let methods: Vec<&str> = seen.iter().filter_map(|l| l["method"].as_str()).collect();
    assert_eq!(methods, ["initialize", "tools/call", "tools/call", "tools/call", "tools/list"], "{seen:#?}");
    let by_id = |id: i64| seen.iter().find(|l| l["id"] == id).unwrap_or_else(|| panic!("no line for id {id}"));
    assert_eq!((by_id(1)["outcome"].as_str(), by_id(1)["tool"].as_str()), (Some("ok"), Some("demo__echo")));
    assert_eq!(by_id(2)["outcome"], "tool_error");
    assert_eq!((by_id(3)["outcome"].as_str(), by_id(3)["code"].as_i64()), (Some("error"), Some(-32602)));
    assert!(by_id(3)["correlationId"].is_string(), "{}", by_id(3));
    let session = by_id(1)["session"].clone();
    assert!(seen.iter().skip(1).all(|l| l["session"] == session), "one session: {seen:#?}");
    assert!(seen.iter().all(|l| l["duration_ms"].as_f64().is_some_and(|d| d >= 0.0) && l["time"].is_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_writes_nothing() {
    let dir = TestDir::new("access-off");
    let path = dir.join("access.jsonl");
    let extra = format!("access_log: {{ enabled: false, path: {} }}\n", serde_json::to_string(&path).expect("path"));
    let gw = Seawall::start(&config_yaml(&[Upstream::demo_stdio("demo", false)], &extra)).await;
    let c = Client::connect(&gw.url, json!({})).await;
    c.call_tool(1, "demo__echo", json!({"message": "hi"})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!path.exists(), "no access log file when it is off");
}
