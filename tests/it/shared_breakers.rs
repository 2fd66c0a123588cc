//! Breakers shared through a real Redis by two real gateways in front of one demo
//! upstream: a breaker that opens on one replica refuses calls on the other within a
//! second without upstream traffic (and hides the tool there), a probe's success closes
//! it on both; an operator's hold travels with its reason; a replica started later
//! catches up; a Redis outage leaves breakers local and sharing resumes with Redis; and
//! breakers not marked `shared` stay per replica.

use std::time::{Duration, Instant};

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, RedisServer, Seawall, text_of};
use serde_json::{Value, json};

/// How soon a replica must follow another's transition.
const WITHIN: Duration = Duration::from_secs(1);

/// Arguments that make `flaky` fail every call (its count is kept by the demo upstream,
/// which both gateways call).
fn failing() -> Value {
    json!({"key": "k", "fail_first": 1_000_000, "mode": "error"})
}

/// A gateway config: one HTTP upstream `remote` whose breakers open after 3 failures in a
/// row for `brk`, hide their tools, and are `shared` (or not) through `redis`.
fn config(demo: &DemoUpstream, redis: &RedisServer, shared: bool, brk: &str, extra: &str) -> String {
    format!(
        "defaults:\n  breaker: {{ consecutive_failures: 3, break: {brk}, max_break: {brk}, hide_open_tools: true, shared: {shared} }}\n\
         breaker_sharing:\n  redis: {}\n  prefix: 'test:breakers:'\n{extra}\
         upstreams:\n  - name: remote\n    url: {}\n",
        redis.url, demo.url
    )
}

/// The breaker of `tool` of `remote` as the admin API lists it (`None` before it exists).
async fn breaker(gw: &Seawall, tool: &str) -> Option<Value> {
    let all = Client::get_json(&format!("{}/admin/breakers?upstream=remote", gw.admin_url)).await;
    all["breakers"].as_array()?.iter().find(|b| b["tool"] == tool).cloned()
}

async fn state(gw: &Seawall, tool: &str) -> String {
    breaker(gw, tool).await.and_then(|b| b["state"].as_str().map(str::to_owned)).unwrap_or_else(|| "closed".into())
}

/// Waits until the breaker of `tool` on `gw` is in `wanted`; returns how long it took.
async fn until_state(gw: &Seawall, tool: &str, wanted: &str, within: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let now = state(gw, tool).await;
        if now == wanted {
            return started.elapsed();
        }
        assert!(started.elapsed() < within, "{tool} stayed {now}, not {wanted}, for {within:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until `gw` says its shared breakers are (or are not) subscribed to Redis.
async fn until_connected(gw: &Seawall, connected: bool) {
    let line = format!("seawall_breaker_sharing_connected {}", u8::from(connected));
    let deadline = Instant::now() + Duration::from_secs(15);
    while !gw.metrics().await.contains(&line) {
        assert!(Instant::now() < deadline, "no `{line}`:\n{}", gw.metrics().await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Calls `flaky` on `c` until its breaker opens (3 failures).
async fn trip(c: &Client) {
    for id in 0..3 {
        let r = c.request(100 + id, "tools/call", json!({"name": "remote__flaky", "arguments": failing()})).await;
        assert!(r.raw.contains("transient failure") || r.raw.contains("isError"), "{}", r.raw);
    }
}

fn log_count(gw: &Seawall, text: &str) -> usize {
    gw.proc.output().lines().filter(|l| l.contains(text)).count()
}

/// Sorted delays: p50 and max, for the log of a run.
fn summary(mut delays: Vec<Duration>) -> String {
    delays.sort();
    let p50 = delays.get(delays.len() / 2).copied().unwrap_or_default();
    let max = delays.last().copied().unwrap_or_default();
    format!(
        "{} transitions: p50 {:.1} ms, max {:.1} ms",
        delays.len(),
        p50.as_secs_f64() * 1e3,
        max.as_secs_f64() * 1e3
    )
}

async fn post(gw: &Seawall, path: &str, body: Value) -> Value {
    let http = reqwest::Client::new();
    let request = http.post(format!("{}{path}", gw.admin_url)).header("content-type", "application/json");
    let response = request.body(body.to_string()).send().await.expect("admin POST");
    assert_eq!(response.status(), 200, "POST {path}");
    serde_json::from_str(&response.text().await.expect("body")).expect("JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_breaker_opened_on_one_replica_opens_on_the_other_and_a_probe_closes_it_on_both() {
    let redis = RedisServer::start().await;
    let demo = DemoUpstream::start(true, &[]).await;
    let config = config(&demo, &redis, true, "2s", "");
    let (a, b) = (Seawall::start(&config).await, Seawall::start(&config).await);
    until_connected(&a, true).await;
    until_connected(&b, true).await;
    let (ca, cb) = (Client::connect(&a.url, json!({})).await, Client::connect(&b.url, json!({})).await);
    let (_, mut b_stream) = cb.open_stream().await;
    assert!(cb.request(1, "tools/list", json!({})).await.tool_names().contains(&"remote__flaky".to_owned()));

    trip(&ca).await;
    assert_eq!(state(&a, "flaky").await, "open");
    let opened = until_state(&b, "flaky", "open", WITHIN).await;
    assert_eq!(demo.calls("flaky"), 3, "only A's calls reached the upstream");

    // B refuses the tool at once, as if its own breaker had opened; the upstream sees nothing.
    let started = Instant::now();
    let refused = cb.call_tool(2, "remote__flaky", failing()).await;
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(refused["isError"], true, "{refused}");
    let text = text_of(&refused);
    assert!(text.contains("remote__flaky") && text.contains("retry in"), "{text}");
    assert_eq!(demo.calls("flaky"), 3);
    let on_b = breaker(&b, "flaky").await.expect("B's breaker");
    assert_eq!(on_b["reason"], "replica", "{on_b}");
    assert!(on_b["retry_in_ms"].as_u64().is_some_and(|ms| ms <= 2_400), "the break left, not more: {on_b}");
    // Other tools of B keep working; the open tool is hidden and B's clients are told.
    assert_eq!(text_of(&cb.call_tool(3, "remote__echo", json!({"message": "fine"})).await), "fine");
    let listed = cb.request(4, "tools/list", json!({})).await.tool_names();
    assert!(!listed.contains(&"remote__flaky".to_owned()) && listed.contains(&"remote__echo".to_owned()), "{listed:?}");
    assert!(crate::support::tools_list_changed(&mut b_stream).await, "B's clients hear list_changed");

    // After the break, A's probe succeeds and closes the breaker; B follows (without a
    // probe of its own, it would be half-open).
    until_state(&a, "flaky", "half_open", Duration::from_secs(5)).await;
    let probe = ca.call_tool(5, "remote__flaky", json!({"key": "fresh", "fail_first": 0})).await;
    assert_eq!(text_of(&probe), "ok after 0 failures", "{probe}");
    assert_eq!(state(&a, "flaky").await, "closed");
    let closed = until_state(&b, "flaky", "closed", WITHIN).await;
    let on_b = breaker(&b, "flaky").await.expect("B's breaker");
    assert_eq!(on_b["reason"], "replica", "closed by A's probe, not by one of B's: {on_b}");
    let after = cb.call_tool(6, "remote__flaky", json!({"key": "fresh2", "fail_first": 0})).await;
    assert_eq!(text_of(&after), "ok after 0 failures");
    assert_eq!(demo.calls("flaky"), 5, "A's probe and B's call after the close");
    eprintln!("propagation (open, close): {opened:?}, {closed:?}");

    let counted = b.metrics().await;
    for line in [
        r#"seawall_breaker_remote_transitions_total{upstream="remote",scope="tool",to="open"} 1"#,
        r#"seawall_breaker_remote_transitions_total{upstream="remote",scope="tool",to="closed"} 1"#,
        r#"seawall_breaker_transitions_total{upstream="remote",scope="tool",to="open"} 1"#,
    ] {
        assert!(counted.contains(line), "missing {line} in\n{counted}");
    }
    let counted = a.metrics().await;
    assert!(
        counted.contains(r#"seawall_breaker_remote_transitions_total{upstream="remote",scope="tool",to="open"} 0"#),
        "A never repeats its own transitions:\n{counted}"
    );
    assert!(b.proc.output().contains("circuit breaker follows another replica"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_hold_on_one_replica_isolates_the_tool_everywhere_with_its_reason() {
    let redis = RedisServer::start().await;
    let demo = DemoUpstream::start(true, &[]).await;
    let a = Seawall::start(&config(&demo, &redis, true, "2s", "")).await;
    // B answers tool failures as JSON-RPC errors: clients see the code and the reason.
    let b = Seawall::start(&config(&demo, &redis, true, "2s", "errors:\n  tool_failures: error\n")).await;
    until_connected(&a, true).await;
    until_connected(&b, true).await;
    let cb = Client::connect(&b.url, json!({})).await;
    assert_eq!(text_of(&cb.call_tool(1, "remote__echo", json!({"message": "before"})).await), "before");
    let echoed = demo.calls("echo");

    let reason = "bad deploy, back at 14:00 UTC";
    let path = "/admin/upstreams/remote/tools/echo/breaker";
    let mut delays = Vec::new();
    for round in 0..10u64 {
        post(&a, &format!("{path}/open"), json!({ "reason": reason })).await;
        let started = Instant::now();
        until_state(&b, "echo", "open", WITHIN).await;
        delays.push(started.elapsed());
        if round == 0 {
            let refused =
                cb.request(2, "tools/call", json!({"name": "remote__echo", "arguments": {"message": "x"}})).await;
            let error = refused.error();
            assert_eq!(error["code"], -32011, "{}", refused.raw);
            assert!(
                error["message"].as_str().unwrap_or_default().contains(&format!("isolated by the operator: {reason}"))
            );
            assert_eq!(error["data"]["reason"], reason, "{}", refused.raw);
            assert_eq!(breaker(&b, "echo").await.expect("held")["forced"], json!({"state": "open", "reason": reason}));
            assert_eq!(demo.calls("echo"), echoed, "no upstream traffic from B while isolated");
        }
        post(&a, &format!("{path}/close"), json!({})).await;
        let started = Instant::now();
        until_state(&b, "echo", "closed", WITHIN).await;
        delays.push(started.elapsed());
    }
    // Held closed on A, so on B; B's clients reach the tool again.
    assert_eq!(breaker(&b, "echo").await.expect("held")["forced"], json!({"state": "closed"}));
    assert_eq!(text_of(&cb.call_tool(3, "remote__echo", json!({"message": "after"})).await), "after");
    // A reset hands it back to the automatic rules everywhere.
    post(&a, &format!("{path}/reset"), json!({})).await;
    let deadline = Instant::now() + WITHIN;
    while !breaker(&b, "echo").await.expect("breaker")["forced"].is_null() {
        assert!(Instant::now() < deadline, "B kept the hold after a reset on A");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!("hold propagation over {}", summary(delays));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_started_after_a_breaker_opened_sees_it_open() {
    let redis = RedisServer::start().await;
    let demo = DemoUpstream::start(true, &[]).await;
    let config = config(&demo, &redis, true, "30s", "");
    let a = Seawall::start(&config).await;
    until_connected(&a, true).await;
    let ca = Client::connect(&a.url, json!({})).await;
    trip(&ca).await;
    post(&a, "/admin/upstreams/remote/tools/echo/breaker/open", json!({"reason": "isolated before B started"})).await;
    let (flaky, echo) = (demo.calls("flaky"), demo.calls("echo"));

    let b = Seawall::start(&config).await;
    until_connected(&b, true).await;
    let cb = Client::connect(&b.url, json!({})).await;
    let refused = cb.call_tool(1, "remote__flaky", failing()).await;
    assert!(text_of(&refused).contains("retry in"), "{refused}");
    let isolated = cb.call_tool(2, "remote__echo", json!({"message": "x"})).await;
    assert!(text_of(&isolated).contains("isolated by the operator: isolated before B started"), "{isolated}");
    assert_eq!((demo.calls("flaky"), demo.calls("echo")), (flaky, echo), "B sent nothing upstream");
    let on_b = breaker(&b, "flaky").await.expect("B's breaker");
    let left = on_b["retry_in_ms"].as_u64().unwrap_or(0);
    assert!(left > 20_000 && left <= 36_000, "the break left on A, read on Redis's clock: {on_b}");
    let listed = cb.request(3, "tools/list", json!({})).await.tool_names();
    assert!(!listed.iter().any(|t| t == "remote__flaky" || t == "remote__echo"), "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_leaves_breakers_local_and_sharing_resumes_with_redis() {
    let mut redis = RedisServer::start().await;
    let demo = DemoUpstream::start(true, &[]).await;
    let config = config(&demo, &redis, true, "30s", "");
    let (a, b) = (Seawall::start(&config).await, Seawall::start(&config).await);
    until_connected(&a, true).await;
    until_connected(&b, true).await;
    let (ca, cb) = (Client::connect(&a.url, json!({})).await, Client::connect(&b.url, json!({})).await);

    redis.stop().await;
    until_connected(&a, false).await;
    until_connected(&b, false).await;
    // Requests are served as ever; a breaker that opens stays on its replica.
    trip(&ca).await;
    assert_eq!(state(&a, "flaky").await, "open");
    for (id, c) in [(1, &ca), (2, &cb)] {
        assert_eq!(text_of(&c.call_tool(id, "remote__echo", json!({"message": "up"})).await), "up");
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(state(&b, "flaky").await, "closed");
    let fresh = cb.call_tool(3, "remote__flaky", json!({"key": "b-only", "fail_first": 0})).await;
    assert_eq!(text_of(&fresh), "ok after 0 failures", "B's breaker is its own meanwhile");
    let outage = "breaker sharing cannot reach Redis";
    assert_eq!((log_count(&a, outage), log_count(&b, outage)), (1, 1), "an outage is logged once");

    // Back on the same port, empty: both reconnect by themselves, A publishes the open
    // it made meanwhile (with the break left), and sharing goes on.
    let _redis = RedisServer::start_on(redis.port).await;
    until_connected(&a, true).await;
    until_connected(&b, true).await;
    until_state(&b, "flaky", "open", Duration::from_secs(10)).await;
    post(&b, "/admin/upstreams/remote/tools/echo/breaker/open", json!({"reason": "after the outage"})).await;
    until_state(&a, "echo", "open", WITHIN).await;
    let isolated = ca.call_tool(4, "remote__echo", json!({"message": "x"})).await;
    assert!(text_of(&isolated).contains("after the outage"), "{isolated}");
    assert_eq!((log_count(&a, outage), log_count(&b, outage)), (1, 1));
    assert!(a.proc.output().contains("breaker sharing reached Redis again"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn breakers_not_marked_shared_stay_per_replica() {
    let redis = RedisServer::start().await;
    let demo = DemoUpstream::start(true, &[]).await;
    let config = config(&demo, &redis, false, "30s", "");
    let (a, b) = (Seawall::start(&config).await, Seawall::start(&config).await);
    let (ca, cb) = (Client::connect(&a.url, json!({})).await, Client::connect(&b.url, json!({})).await);
    trip(&ca).await;
    post(&a, "/admin/upstreams/remote/tools/echo/breaker/open", json!({"reason": "A only"})).await;
    assert_eq!(state(&a, "flaky").await, "open");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!((state(&b, "flaky").await, state(&b, "echo").await), ("closed".into(), "closed".into()));
    let flaky = demo.calls("flaky");
    let fresh = cb.call_tool(1, "remote__flaky", json!({"key": "b", "fail_first": 0})).await;
    assert_eq!(text_of(&fresh), "ok after 0 failures");
    assert_eq!(text_of(&cb.call_tool(2, "remote__echo", json!({"message": "b"})).await), "b");
    assert_eq!(demo.calls("flaky"), flaky + 1, "B called the upstream");
    for gw in [&a, &b] {
        assert!(!gw.metrics().await.contains("seawall_breaker_sharing_connected"), "no link without shared breakers");
    }
}

/// Which upstreams share their breakers follows a reload: a replica whose file stops
/// marking `remote` as shared no longer follows the other; marked again, it does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_decides_which_breakers_a_replica_follows() {
    let redis = RedisServer::start().await;
    let demo = DemoUpstream::start(true, &[]).await;
    let a = Seawall::start(&config(&demo, &redis, true, "60s", "")).await;
    let b = Seawall::start(&config(&demo, &redis, true, "60s", "")).await;
    until_connected(&a, true).await;
    until_connected(&b, true).await;
    let reload = |gw: &Seawall, yaml: String| {
        std::fs::write(&gw.config_path, yaml).expect("write config");
        let url = format!("{}/admin/reload", gw.admin_url);
        async move {
            let response = reqwest::Client::new().post(url).send().await.expect("reload");
            assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
        }
    };

    reload(&b, config(&demo, &redis, false, "60s", "")).await;
    let ca = Client::connect(&a.url, json!({})).await;
    trip(&ca).await;
    assert_eq!(state(&a, "flaky").await, "open");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(state(&b, "flaky").await, "closed", "B no longer follows A's breakers of remote");

    reload(&b, config(&demo, &redis, true, "60s", "")).await;
    for id in 0..3 {
        ca.request(200 + id, "tools/call", json!({"name": "remote__fail", "arguments": {}})).await;
    }
    assert_eq!(state(&a, "fail").await, "open");
    until_state(&b, "fail", "open", WITHIN * 3).await;
}
