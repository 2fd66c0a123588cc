//! Resilience through the real binary against the demo upstream over HTTP: deadlines
//! that cancel upstream, progress that keeps calls alive, idempotent-only retries, the
//! retry budget under an outage, and load shedding; over stdio: a process death blamed
//! on the tool that caused it, not on those merely in flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall, text_of};
use serde_json::json;

async fn gateway(upstreams: &str, defaults: &str) -> Seawall {
    Seawall::start(&format!("defaults:\n{defaults}\nupstreams:\n{upstreams}")).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_answers_in_time_and_cancels_the_upstream_call() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw =
        gateway(&format!("  - name: remote\n    url: {}\n", remote.url), "  timeouts: { tool_call: 1s, request: 1s }")
            .await;
    let c = Client::connect(&gw.url, json!({})).await;

    let started = Instant::now();
    let result = c.call_tool(1, "remote__sleep", json!({"ms": 10000})).await;
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(950) && took < Duration::from_secs(4), "took {took:?}");
    assert_eq!(result["isError"], true);
    let text = text_of(&result);
    assert!(text.contains("timed out") && text.contains("outcome is unknown"), "{text}");

    // The upstream was told, with its own id for that call.
    let call_id =
        remote.recorded().iter().find(|e| e["event"] == "call" && e["tool"] == "sleep").unwrap()["id"].clone();
    let mut cancelled = None;
    for _ in 0..100 {
        cancelled = remote.recorded().iter().find(|e| e["event"] == "cancelled").map(|e| e["requestId"].clone());
        if cancelled.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(cancelled, Some(call_id));

    // Other methods get -32001.
    let slow_read = c.request(2, "resources/read", json!({"uri": "demo://readme"})).await;
    assert!(slow_read.response().get("result").is_some(), "a fast read is unaffected");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_keeps_a_tool_call_alive_until_the_hard_cap() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = gateway(
        &format!("  - name: remote\n    url: {}\n", remote.url),
        "  timeouts: { tool_call: 1s, tool_idle: 1s, tool_max: 3s }",
    )
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let with_progress =
        |ms: u64| json!({"name": "remote__sleep", "arguments": {"ms": ms}, "_meta": {"progressToken": ms}});

    // Longer than tool_call and tool_idle, but progress keeps coming: it completes.
    let alive = c.request(1, "tools/call", with_progress(2000)).await;
    assert_eq!(text_of(alive.result()), "slept 2000 ms", "{}", alive.raw);

    // Progress forever still ends at tool_max.
    let started = Instant::now();
    let capped = c.request(2, "tools/call", with_progress(8000)).await;
    let took = started.elapsed();
    assert_eq!(capped.result()["isError"], true, "{}", capped.raw);
    assert!(took >= Duration::from_millis(2900) && took < Duration::from_secs(6), "took {took:?}");

    // Without progress the plain deadline applies.
    let started = Instant::now();
    let silent = c.call_tool(3, "remote__sleep", json!({"ms": 8000})).await;
    assert_eq!(silent["isError"], true);
    assert!(started.elapsed() < Duration::from_millis(2500));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_idempotent_requests_are_retried() {
    let remote = DemoUpstream::start(true, &[]).await;
    let upstreams = format!(
        "  - name: plain\n    url: {url}\n  - name: safe\n    url: {url}\n    tools:\n      flaky: {{ idempotent: true }}\n",
        url = remote.url
    );
    let gw = gateway(&upstreams, "  retry: { max_attempts: 3, base_delay: 10ms, max_delay: 50ms }").await;
    let c = Client::connect(&gw.url, json!({})).await;

    // Not marked idempotent: executed exactly once, the failure reported.
    let once = c.call_tool(1, "plain__flaky", json!({"key": "a", "fail_first": 2, "mode": "http_503"})).await;
    assert_eq!(once["isError"], true, "{once}");
    assert_eq!(remote.calls("flaky"), 1);

    // Marked idempotent: retried until the fault clears.
    let retried = c.call_tool(2, "safe__flaky", json!({"key": "b", "fail_first": 2, "mode": "http_503"})).await;
    assert_eq!(retried.get("isError"), None, "{retried}");
    assert_eq!(text_of(&retried), "ok after 2 failures");
    assert_eq!(remote.calls("flaky"), 1 + 3);

    // resources/read is always idempotent.
    let read = c.request(3, "resources/read", json!({"uri": "demo://flaky/c/2"})).await;
    assert_eq!(read.result()["contents"][0]["text"], "ok", "{}", read.raw);
    let reads = remote.recorded().iter().filter(|e| e["event"] == "request" && e["method"] == "resources/read").count();
    assert_eq!(reads, 3);
    let metrics = reqwest::get(format!("{}/metrics", gw.admin_url)).await.unwrap().text().await.unwrap();
    assert!(metrics.contains(r#"seawall_retries_total{upstream="safe",reason="http_status"} 2"#), "{metrics}");

    // A JSON-RPC error from the tool itself is never retried.
    let failed = c
        .request(
            4,
            "tools/call",
            json!({"name": "safe__flaky", "arguments": {"key": "d", "fail_first": 1, "mode": "error"}}),
        )
        .await;
    assert_eq!(remote.calls("flaky"), 5, "{}", failed.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_retry_budget_bounds_load_on_a_dead_upstream() {
    let remote = DemoUpstream::start(true, &[]).await;
    let upstreams =
        format!("  - name: down\n    url: {}\n    tools:\n      flaky: {{ idempotent: true }}\n", remote.url);
    let gw = gateway(
        &upstreams,
        // Breakers would stop the traffic altogether; switch them off to see the budget alone.
        "  retry: { max_attempts: 3, base_delay: 1ms, max_delay: 5ms, budget_percent: 20, budget_min_per_sec: 1 }\n  concurrency: { max_in_flight: 256, queue: 256 }\n  breaker: { consecutive_failures: 1000000, min_calls: 1000000 }",
    )
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let n = 100;
    let burst =
        (0..n).map(|i| {
            let c = c.clone();
            async move {
                c.call_tool(i, "down__flaky", json!({"key": format!("k{i}"), "rate": 1.0, "mode": "http_503"})).await
            }
        });
    let results = futures::future::join_all(burst).await;
    assert!(results.iter().all(|r| r["isError"] == true));
    let attempts = remote.calls("flaky");
    // 20% of the offered load plus the per-second floor (1/s over the 10 s window).
    assert!(attempts <= n as usize * 12 / 10 + 10, "{attempts} attempts for {n} requests");
    assert!(attempts > n as usize, "retries do happen while the budget allows");
    println!("dead upstream: {attempts} attempts for {n} requests ({:.2}x)", attempts as f64 / n as f64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn excess_load_is_shed_with_503_and_retry_after() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = gateway(
        &format!("  - name: remote\n    url: {}\n", remote.url),
        "  concurrency: { max_in_flight: 2, queue: 1, queue_timeout: 200ms }",
    )
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let slow = (0..3).map(|i| {
        let c = c.clone();
        tokio::spawn(async move {
            c.request(i, "tools/call", json!({"name": "remote__sleep", "arguments": {"ms": 3000}})).await
        })
    });
    let slow: Vec<_> = slow.collect();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let refused = c.request(10, "tools/call", json!({"name": "remote__echo", "arguments": {"message": "x"}})).await;
    assert_eq!(refused.status, 503, "{}", refused.raw);
    assert!(refused.header("retry-after").is_some());
    assert_eq!(refused.error()["code"], -32012);
    let mut ok = 0;
    for t in slow {
        let r = t.await.unwrap();
        match r.response().get("result") {
            Some(result) => {
                assert_eq!(text_of(result), "slept 3000 ms");
                ok += 1;
            }
            // The queued one waited 200 ms for a slot, then was refused.
            None => assert_eq!(r.error()["code"], -32012),
        }
    }
    assert_eq!(ok, 2, "the admitted calls complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_tool_is_cut_off_by_its_breaker_while_other_tools_work() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = gateway(
        &format!("  - name: remote\n    url: {}\n", remote.url),
        "  breaker: { consecutive_failures: 3, break: 1s, max_break: 2s, hide_open_tools: true }",
    )
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let (_, mut stream) = c.open_stream().await;
    let failing = json!({"key": "k", "fail_first": 1000, "mode": "error"});
    for id in 0..3 {
        let r = c.request(id, "tools/call", json!({"name": "remote__flaky", "arguments": failing})).await;
        assert!(r.raw.contains("transient failure") || r.raw.contains("isError"), "{}", r.raw);
    }
    assert_eq!(remote.calls("flaky"), 3);

    // Open: answered at once, naming the tool and when to retry; the upstream sees nothing.
    let started = Instant::now();
    let refused = c.call_tool(10, "remote__flaky", failing.clone()).await;
    assert!(started.elapsed() < Duration::from_millis(500));
    assert_eq!(refused["isError"], true);
    let text = text_of(&refused);
    assert!(text.contains("remote__flaky") && text.contains("retry in"), "{text}");
    assert_eq!(remote.calls("flaky"), 3);

    // Other tools of the same upstream keep working; the open tool is hidden.
    assert_eq!(text_of(&c.call_tool(11, "remote__echo", json!({"message": "fine"})).await), "fine");
    let listed = c.request(12, "tools/list", json!({})).await;
    let names = listed.result()["tools"].to_string();
    assert!(!names.contains("remote__flaky") && names.contains("remote__echo"), "{names}");
    let changed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if stream.recv().await.expect("stream")["method"] == "notifications/tools/list_changed" {
                return;
            }
        }
    })
    .await;
    assert!(changed.is_ok(), "clients hear list_changed when a tool is hidden");

    // After the break a probe goes through; its success closes the breaker.
    tokio::time::sleep(Duration::from_millis(1400)).await;
    let probe = c.call_tool(13, "remote__flaky", json!({"key": "fresh", "fail_first": 0})).await;
    assert_eq!(text_of(&probe), "ok after 0 failures", "{probe}");
    let after = c.call_tool(14, "remote__flaky", json!({"key": "fresh2", "fail_first": 0})).await;
    assert_eq!(text_of(&after), "ok after 0 failures");
    assert_eq!(remote.calls("flaky"), 5);
    let status = Client::get_json(&format!("{}/readyz", gw.admin_url)).await;
    let tool = status["breakers"].as_array().unwrap().iter().find(|b| b["tool"] == "flaky").cloned().unwrap();
    assert_eq!(tool["state"], "closed");
    let metrics = reqwest::get(format!("{}/metrics", gw.admin_url)).await.unwrap().text().await.unwrap();
    for line in [
        r#"seawall_breaker_transitions_total{upstream="remote",scope="tool",to="open"} 1"#,
        r#"seawall_breaker_transitions_total{upstream="remote",scope="tool",to="closed"} 1"#,
        // seawall lists the tools itself before the first call, so each has its own label.
        r#"seawall_requests_total{upstream="remote",method="tools/call",tool="flaky",outcome="circuit_open"} 1"#,
        r#"seawall_requests_total{upstream="remote",method="tools/call",tool="flaky",outcome="ok"} 2"#,
    ] {
        assert!(metrics.contains(line), "missing {line} in\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_endpoint_takes_over_when_the_first_dies() {
    let mut first = DemoUpstream::start(true, &[]).await;
    let second = DemoUpstream::start(true, &[]).await;
    let upstreams = format!(
        "  - name: replicated\n    url: {}\n    endpoints: [{}]\n    tools:\n      echo: {{ idempotent: true }}\n",
        first.url, second.url
    );
    let gw = gateway(&upstreams, "  retry: { max_attempts: 3, base_delay: 10ms, max_delay: 50ms }").await;
    let c = Client::connect(&gw.url, json!({})).await;
    for id in 0..20 {
        assert_eq!(text_of(&c.call_tool(id, "replicated__echo", json!({"message": "m"})).await), "m");
    }
    let (a, b) = (first.calls("echo"), second.calls("echo"));
    assert!(a > 0 && b > 0, "requests are balanced: {a} / {b}");

    first.proc.stop(Duration::from_secs(2)).await;
    for id in 20..60 {
        let reply = c.call_tool(id, "replicated__echo", json!({"message": "still here"})).await;
        assert_eq!(text_of(&reply), "still here", "call {id}: {reply}");
        let read = c.request(1000 + id, "resources/read", json!({"uri": "demo://readme"})).await;
        assert!(read.response().get("result").is_some(), "{}", read.raw);
    }
    assert!(second.calls("echo") >= 40 + b);
    let status = Client::get_json(&format!("{}/readyz", gw.admin_url)).await;
    assert_eq!(status["upstreams"]["replicated"]["endpoints_ejected"], json!([true, false]), "{status}");
}

/// The states the breaker of `tool` on `upstream` was seen in by `/readyz` polls.
async fn watch_breaker(admin_url: String, tool: &'static str, stop: Arc<AtomicBool>) -> Vec<String> {
    let mut seen = Vec::new();
    while !stop.load(Ordering::SeqCst) {
        let status = Client::get_json(&format!("{admin_url}/readyz")).await;
        let breakers = status["breakers"].as_array().cloned().unwrap_or_default();
        if let Some(state) = breakers.iter().find(|b| b["tool"] == tool).and_then(|b| b["state"].as_str())
            && seen.last().is_none_or(|last| last != state)
        {
            seen.push(state.to_owned());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_death_counts_against_the_tool_that_caused_it_not_those_merely_in_flight() {
    let _alone = crate::support::one_at_a_time().await;
    let gw = gateway(
        "  - name: crashy\n    command: seawall\n    args: [demo-upstream, --stdio]\n    tools: { sleep: { idempotent: true } }\n",
        "  breaker: { consecutive_failures: 3 }",
    )
    .await;
    let clients: Vec<Client> = futures::future::join_all((0..8).map(|_| Client::connect(&gw.url, json!({})))).await;
    let stop = Arc::new(AtomicBool::new(false));
    let watchers =
        ["sleep", "crash"].map(|tool| tokio::spawn(watch_breaker(gw.admin_url.clone(), tool, Arc::clone(&stop))));
    // Eight clients keep a 200 ms idempotent `sleep` in flight each, all the time.
    let sleepers: Vec<_> = clients
        .iter()
        .cloned()
        .enumerate()
        .map(|(n, c)| {
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                let (mut ok, mut refused, mut failed) = (0, 0, Vec::new());
                let mut id = 0;
                while !stop.load(Ordering::SeqCst) {
                    id += 1;
                    let reply = c
                        .request(
                            id,
                            "tools/call",
                            json!({"name": "crashy__sleep", "arguments": {"ms": 200, "progress": false}}),
                        )
                        .await;
                    let answer =
                        reply.messages.iter().rev().find(|m| m.get("result").is_some() || m.get("error").is_some());
                    let result = answer.and_then(|m| m.get("result"));
                    let text = result.map(text_of).unwrap_or_default();
                    match result.map(|r| r["isError"].as_bool()) {
                        Some(None | Some(false)) => ok += 1,
                        Some(Some(true)) if text.contains("temporarily unavailable") => refused += 1,
                        _ => failed.push(format!("client {n} call {id}: {}", reply.raw)),
                    }
                }
                (ok, refused, failed)
            })
        })
        .collect();
    // Meanwhile a `crash` call kills the shared process every 1.3 s (it lives long enough
    // between deaths to be restarted at once), five times.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut crashes = Vec::new();
    for id in 0..5 {
        let reply =
            clients[0].request(1000 + id, "tools/call", json!({"name": "crashy__crash", "arguments": {}})).await;
        crashes.push(reply.raw);
        tokio::time::sleep(Duration::from_millis(1300)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let (mut ok, mut refused, mut failed) = (0, 0, Vec::new());
    for sleeper in sleepers {
        let (o, r, f) = sleeper.await.expect("sleeper");
        (ok, refused) = (ok + o, refused + r);
        failed.extend(f);
    }
    let [sleep_states, crash_states]: [Vec<String>; 2] = futures::future::join_all(watchers)
        .await
        .into_iter()
        .map(|w| w.expect("watcher"))
        .collect::<Vec<_>>()
        .try_into()
        .expect("two");
    println!(
        "sleep: {ok} ok, {refused} refused, {} failed; sleep breaker {sleep_states:?}, crash breaker {crash_states:?}; crashes: {crashes:?}",
        failed.len()
    );
    assert!(ok > 100, "the sleepers ran: {ok}");
    assert_eq!(sleep_states, ["closed"], "the breaker of a tool merely in flight at each death never opens");
    assert_eq!(refused, 0, "no `sleep` call was refused by its breaker");
    assert!(failed.len() * 100 <= ok, "each death's `sleep` calls are retried on the new process: {failed:?}");
    assert!(crash_states.iter().any(|s| s == "open"), "the tool in flight at every death is cut off: {crash_states:?}");
    assert!(crashes.last().is_some_and(|t| t.contains("temporarily unavailable")), "{crashes:?}");
}
