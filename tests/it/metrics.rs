//! Metrics, dashboards and alerts through the real binary: after one scripted scenario
//! (successes, tool errors, a denial, a rate limit, a breaker opening, a timeout, a
//! cancellation) `/metrics` shows the exact counts per label set; and a real Prometheus
//! scraping seawall during the same scenario answers every query of the Grafana
//! dashboard and every selector of the alert rules with data, loads the rules without
//! error (and `promtool check rules` passes), and fires the error-ratio alert for the
//! failing tool.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Prometheus, Seawall, TestDir, prometheus_binary};
use serde_json::{Value, json};

const KEY: &str = "metrics-key-0123456789abcdef";

/// The scenario's gateway: one HTTP demo upstream `remote`, 1 s tool deadlines, a tool
/// breaker that opens after 3 failures in a row and stays open, `remote__add` denied,
/// and `remote__big` limited to one call a minute.
async fn gateway(remote: &DemoUpstream) -> Seawall {
    Seawall::start(&format!(
        "defaults:\n  timeouts: {{ tool_call: 1s, request: 1s }}\n  \
         breaker: {{ consecutive_failures: 3, break: 10m, max_break: 10m }}\n\
         upstreams:\n  - name: remote\n    url: {}\n\
         auth:\n  api_keys:\n    - {{ name: ci, key: {KEY} }}\n\
         authorization:\n  rules:\n    - {{ principals: [ci], deny: {{ tools: [remote__add] }} }}\n\
         rate_limits:\n  limits:\n    - {{ per: tool, tools: [remote__big], rate: 1/m, burst: 1 }}\n",
        remote.url
    ))
    .await
}

/// Calls of the scenario that reach the failing tool after its breaker opened (enough
/// for the error-ratio alert's minimum traffic over its 5-minute window).
const REFUSED_BY_BREAKER: u64 = 21;

/// Runs the scenario; returns how many client requests it made (`initialize` included).
/// `scraped` waits after the first call refused by the breaker: a counter's series
/// starts at its first value, so Prometheus sees only the increases after that.
async fn scenario(gw: &Seawall, remote: &DemoUpstream, scraped: Duration) -> u64 {
    let c = Client::with_bearer(&gw.url, KEY).initialize(json!({})).await;
    let mut id = 0;
    let mut next = || {
        id += 1;
        id
    };
    for _ in 0..3 {
        let echoed = c.call_tool(next(), "remote__echo", json!({"message": "hi"})).await;
        assert_eq!(echoed["content"][0]["text"], "hi", "{echoed}");
    }
    for _ in 0..2 {
        let failed = c.call_tool(next(), "remote__fail", json!({"mode": "result"})).await;
        assert_eq!(failed["isError"], true, "{failed}");
    }
    let denied = c.request(next(), "tools/call", json!({"name": "remote__add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(denied.error()["code"], -32602, "{}", denied.raw);
    let big = c.call_tool(next(), "remote__big", json!({"n": 8})).await;
    assert!(big.get("isError").is_none_or(|e| e == false), "{big}");
    let limited = c.request(next(), "tools/call", json!({"name": "remote__big", "arguments": {"n": 8}})).await;
    assert_eq!(limited.error()["code"], -32013, "{}", limited.raw);
    let failing = json!({"key": "k", "fail_first": 1000, "mode": "error"});
    for _ in 0..3 {
        let r = c.request(next(), "tools/call", json!({"name": "remote__flaky", "arguments": failing})).await;
        assert!(r.raw.contains("transient failure") || r.raw.contains("isError"), "{}", r.raw);
    }
    for n in 0..REFUSED_BY_BREAKER {
        let refused = c.call_tool(next(), "remote__flaky", failing.clone()).await;
        assert!(refused["content"][0]["text"].as_str().is_some_and(|t| t.contains("retry in")), "{refused}");
        if n == 0 {
            tokio::time::sleep(scraped).await;
        }
    }
    let timed_out = c.call_tool(next(), "remote__sleep", json!({"ms": 10000})).await;
    assert_eq!(timed_out["isError"], true, "{timed_out}");

    // A call the client cancels once the upstream has it.
    let cancelled_id = next();
    let sleeping = {
        let c = c.clone();
        tokio::spawn(async move {
            c.request(cancelled_id, "tools/call", json!({"name": "remote__sleep", "arguments": {"ms": 900}})).await
        })
    };
    wait_until("the upstream has the second sleep", || {
        remote.recorded().iter().filter(|e| e["event"] == "call" && e["tool"] == "sleep").count() == 2
    })
    .await;
    assert_eq!(c.notify("notifications/cancelled", json!({"requestId": cancelled_id})).await, 202);
    let ended = tokio::time::timeout(Duration::from_secs(5), sleeping).await.expect("ended").expect("joined");
    assert!(ended.messages.iter().all(|m| m["id"] != cancelled_id), "answered: {}", ended.raw);
    id + 1
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting until {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_scripted_scenario_the_metrics_show_the_exact_counts() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = gateway(&remote).await;
    scenario(&gw, &remote, Duration::ZERO).await;
    let circuit_open = REFUSED_BY_BREAKER.to_string();
    let expected: Vec<(&str, &str)> = vec![
        // What each upstream call came to, per tool.
        (r#"seawall_requests_total{upstream="remote",method="tools/call",tool="echo",outcome="ok"}"#, "3"),
        (r#"seawall_requests_total{upstream="remote",method="tools/call",tool="fail",outcome="tool_error"}"#, "2"),
        (r#"seawall_requests_total{upstream="remote",method="tools/call",tool="big",outcome="ok"}"#, "1"),
        (r#"seawall_requests_total{upstream="remote",method="tools/call",tool="flaky",outcome="error"}"#, "3"),
        (
            r#"seawall_requests_total{upstream="remote",method="tools/call",tool="flaky",outcome="circuit_open"}"#,
            &circuit_open,
        ),
        (r#"seawall_requests_total{upstream="remote",method="tools/call",tool="sleep",outcome="timeout"}"#, "1"),
        (r#"seawall_requests_total{upstream="remote",method="tools/call",tool="sleep",outcome="cancelled"}"#, "1"),
        // What each client request came to, those refused before routing included; an
        // upstream's error for a tool reaches the client as an isError result.
        (r#"seawall_client_requests_total{method="initialize",outcome="ok"}"#, "1"),
        (r#"seawall_client_requests_total{method="tools/call",outcome="ok"}"#, "4"),
        (r#"seawall_client_requests_total{method="tools/call",outcome="tool_error"}"#, "5"),
        (r#"seawall_client_requests_total{method="tools/call",outcome="denied"}"#, "1"),
        (r#"seawall_client_requests_total{method="tools/call",outcome="rate_limited"}"#, "1"),
        (r#"seawall_client_requests_total{method="tools/call",outcome="circuit_open"}"#, &circuit_open),
        (r#"seawall_client_requests_total{method="tools/call",outcome="timeout"}"#, "1"),
        (r#"seawall_client_requests_total{method="tools/call",outcome="cancelled"}"#, "1"),
        (r#"seawall_rate_limited_total{scope="tool"}"#, "1"),
        // One attempt per call that reached the upstream, timed beside the whole call.
        (r#"seawall_upstream_attempt_duration_seconds_count{upstream="remote",method="tools/call",outcome="ok"}"#, "4"),
        (
            r#"seawall_upstream_attempt_duration_seconds_count{upstream="remote",method="tools/call",outcome="error"}"#,
            "3",
        ),
        (
            r#"seawall_upstream_attempt_duration_seconds_count{upstream="remote",method="tools/call",outcome="timeout"}"#,
            "1",
        ),
        (
            r#"seawall_upstream_attempt_duration_seconds_count{upstream="remote",method="tools/call",outcome="cancelled"}"#,
            "1",
        ),
        (r#"seawall_breaker_transitions_total{upstream="remote",scope="tool",to="open"}"#, "1"),
        // Gauges read at scrape time: the breaker open, the session, nothing in flight.
        (r#"seawall_breaker_state{upstream="remote",tool="flaky"}"#, "2"),
        (r#"seawall_breaker_state{upstream="remote",tool="echo"}"#, "0"),
        (r#"seawall_sessions{front="streamable_http"}"#, "1"),
        (r#"seawall_sessions{front="modern"}"#, "0"),
        (r#"seawall_in_flight_requests{upstream="remote"}"#, "0"),
        (r#"seawall_client_in_flight_requests"#, "0"),
        // Counters that start at zero, so dashboards have a series before the first event.
        (r#"seawall_retry_budget_exhausted_total{upstream="remote"}"#, "0"),
        (r#"seawall_access_log_dropped_total"#, "0"),
    ];
    // The cancelled call's attempt and request are counted as it unwinds: wait for it.
    let mut text = String::new();
    for _ in 0..50 {
        text = gw.metrics().await;
        if expected.iter().all(|(series, value)| value_of(&text, series) == Some((*value).to_owned())) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let wrong: Vec<String> = expected
        .iter()
        .filter(|(series, value)| value_of(&text, series).as_deref() != Some(*value))
        .map(|(series, value)| format!("  {series}: want {value}, got {:?}", value_of(&text, series)))
        .collect();
    panic!("metrics differ:\n{}\nall metrics:\n{text}", wrong.join("\n"));
}

/// The value of one series in the exposition text.
fn value_of(text: &str, series: &str) -> Option<String> {
    text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ').map(str::to_owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_prometheus_answers_every_dashboard_query_and_alert_and_the_error_ratio_alert_fires() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let rules_path = repo.join("dashboards/alerts.yaml");
    let rules = std::fs::read_to_string(&rules_path).expect("dashboards/alerts.yaml");
    let checked = std::process::Command::new(prometheus_binary("promtool"))
        .args(["check", "rules"])
        .arg(&rules_path)
        .output()
        .expect("run promtool");
    assert!(checked.status.success(), "promtool check rules: {}", String::from_utf8_lossy(&checked.stderr));

    let remote = DemoUpstream::start(true, &[]).await;
    let gw = gateway(&remote).await;
    let dir = TestDir::new("prometheus");
    let target = gw.admin_url.trim_start_matches("http://").to_owned();
    // The rules as shipped, but alerting at once: the test cannot wait out `for: 5m`.
    let prompt_rules: String = rules
        .lines()
        .map(|line| if line.trim_start().starts_with("for: ") { "        for: 0s" } else { line })
        .collect::<Vec<_>>()
        .join("\n");
    let prometheus = Prometheus::start(&dir, &target, &prompt_rules).await;

    // The scenario starts once Prometheus scrapes seawall.
    let mut up = false;
    for _ in 0..100 {
        let result = prometheus.query(r#"up{job="seawall"} == 1"#).await;
        if !result.is_empty() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(up, "Prometheus never scraped seawall");
    let total = scenario(&gw, &remote, Duration::from_millis(2500)).await;
    // Wait until Prometheus has scraped the scenario's last request.
    let mut seen = 0.0;
    for _ in 0..100 {
        let result = prometheus.query("sum(seawall_client_requests_total)").await;
        seen = result.first().and_then(|r| r["value"][1].as_str()?.parse::<f64>().ok()).unwrap_or(0.0);
        if seen >= total as f64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(seen, total as f64, "Prometheus never saw all {total} client requests");
    // A second scrape after the last one, so that every rate has two samples with it.
    tokio::time::sleep(Duration::from_millis(2500)).await;

    // Every query of every dashboard panel (and template variable) returns data.
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.join("dashboards/seawall.json")).expect("dashboard"))
            .expect("dashboard JSON");
    let mut queries: Vec<String> = dashboard["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(str::to_owned))
        .collect();
    assert!(queries.len() > 20, "the dashboard has its panels: {queries:?}");
    for variable in dashboard["templating"]["list"].as_array().expect("templating") {
        if let Some(q) = variable["definition"].as_str().and_then(|d| d.strip_prefix("label_values(")) {
            // label_values(metric, label) asks whether the metric has that label.
            let (metric, label) = q.trim_end_matches(')').split_once(',').expect("label_values(metric, label)");
            queries.push(format!("count by ({}) ({metric})", label.trim()));
        }
    }
    let mut empty = Vec::new();
    for query in &queries {
        let promql = query.replace("$__rate_interval", "1m").replace("$upstream", ".*");
        if prometheus.query(&promql).await.is_empty() {
            empty.push(promql);
        }
    }
    assert!(empty.is_empty(), "dashboard queries without data:\n{}", empty.join("\n"));

    // Every selector of every alert rule names series that exist, and Prometheus loaded
    // every rule without an evaluation error.
    let selectors: BTreeSet<String> = selectors(&rules);
    assert!(selectors.len() >= 6, "{selectors:?}");
    let mut missing = Vec::new();
    for selector in &selectors {
        if prometheus.query(&format!("count({selector})")).await.is_empty() {
            missing.push(selector.clone());
        }
    }
    assert!(missing.is_empty(), "alert rule selectors without series:\n{}", missing.join("\n"));
    let groups = prometheus.api("/api/v1/rules", &[]).await;
    let loaded: Vec<&Value> = groups["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().expect("rules"))
        .collect();
    assert_eq!(loaded.len(), 8, "{groups}");
    for rule in &loaded {
        assert_eq!(rule["health"], "ok", "rule {} : {}", rule["name"], rule["lastError"]);
    }

    // The error-ratio alert fires for the failing tool, and for no other.
    let mut firing = Vec::new();
    for _ in 0..50 {
        let alerts = prometheus.api("/api/v1/alerts", &[]).await;
        firing = alerts["alerts"]
            .as_array()
            .expect("alerts")
            .iter()
            .filter(|a| a["labels"]["alertname"] == "SeawallToolErrorRatioHigh" && a["state"] == "firing")
            .map(|a| (a["labels"]["upstream"].clone(), a["labels"]["tool"].clone()))
            .collect();
        if !firing.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(firing, [(json!("remote"), json!("flaky"))]);
}

/// The vector selectors of seawall's metrics in a rule file: `seawall_x{labels}`.
fn selectors(rules: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = rules;
    while let Some(at) = rest.find("seawall_") {
        let tail = &rest[at..];
        let name_len = tail.find(|c: char| !(c.is_ascii_lowercase() || c == '_')).unwrap_or(tail.len());
        let mut end = name_len;
        if tail[name_len..].starts_with('{')
            && let Some(close) = tail[name_len..].find('}')
        {
            end = name_len + close + 1;
        }
        let selector = &tail[..end];
        // Text in annotations names metrics too; a `{{ $labels.x }}` template is no
        // selector, and a histogram named as a whole has its series under `_count`.
        if !selector.contains("$labels") {
            let (name, labels) = selector.split_at(name_len);
            let name = if name.ends_with("_seconds") { format!("{name}_count") } else { name.to_owned() };
            out.insert(format!("{name}{labels}"));
        }
        rest = &tail[end..];
    }
    out
}
