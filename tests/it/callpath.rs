//! The request path through the real binary, for defects found from outside: resource
//! lookups under one deadline, shared resource URIs, one answer for every overload,
//! cancelled requests in the metrics, schemas known before the first call, stdio crashes
//! that do not cut an upstream off, hung replicas avoided, and upstream breakers that
//! announce the tools they hide.

use std::time::{Duration, Instant};

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall, Upstream, config_yaml, text_of};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unclaimed_resource_read_has_one_deadline_and_a_timeout_is_not_not_found() {
    let f = DemoUpstream::start(false, &["--read-latency", "10000"]).await;
    let g = DemoUpstream::start(false, &["--read-latency", "10000"]).await;
    let gw = Seawall::start(&format!(
        "upstreams:\n  - name: f\n    url: {}\n    timeouts: {{ request: 1s }}\n  - name: g\n    url: {}\n    timeouts: {{ request: 2s }}\n",
        f.url, g.url
    ))
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let started = Instant::now();
    let read = c.request(1, "resources/read", json!({"uri": "f://r"})).await;
    let took = started.elapsed();
    assert_eq!(read.error()["code"], -32001, "{}", read.raw);
    // Both candidates are asked at once: the lookup ends with the longer deadline (2 s),
    // not after the sum of both.
    assert!(took < Duration::from_millis(2800), "took {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_uri_listed_by_two_upstreams_is_listed_once_and_read_from_the_first() {
    let a = DemoUpstream::start(true, &[]).await;
    let b = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&format!("upstreams:\n  - name: a\n    url: {}\n  - name: b\n    url: {}\n", a.url, b.url))
        .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let listed = c.request(1, "resources/list", json!({})).await;
    let readmes =
        listed.result()["resources"].as_array().unwrap().iter().filter(|r| r["uri"] == "demo://readme").count();
    assert_eq!(readmes, 1, "{}", listed.raw);
    let read = c.request(2, "resources/read", json!({"uri": "demo://readme"})).await;
    assert!(read.result()["contents"][0]["text"].is_string(), "{}", read.raw);
    let reads = |d: &DemoUpstream| {
        d.recorded().iter().filter(|e| e["event"] == "request" && e["method"] == "resources/read").count()
    };
    assert_eq!((reads(&a), reads(&b)), (1, 0), "the read goes to the first upstream in configuration order");

    // The warning names the URI and both upstreams, once, however often and by however
    // many sessions the list is asked for.
    let other = Client::connect(&gw.url, json!({})).await;
    for id in 3..6 {
        assert!(c.request(id, "resources/list", json!({})).await.result()["resources"].is_array());
        assert!(other.request(id, "resources/list", json!({})).await.result()["resources"].is_array());
    }
    let mut gw = gw;
    gw.stop(Duration::from_secs(5)).await;
    let log = gw.proc.output();
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("list the same resource URI")).collect();
    assert_eq!(warnings.len(), 2, "one per duplicated URI (readme, binary):\n{log}");
    let readme = warnings.iter().find(|l| l.contains("uri=demo://readme")).expect("the readme's URI is named");
    assert!(readme.contains("served_by=a") && readme.contains("also_listed_by=b"), "{readme}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlisted_resource_is_subscribed_with_every_upstream_that_has_it_not_the_fastest_only() {
    // Both serve demo://readme; `slow` answers a subscription 500 ms after `fast`.
    let fast = DemoUpstream::start(true, &[]).await;
    let slow = DemoUpstream::start(true, &["--subscribe-latency", "500"]).await;
    let gw =
        Seawall::start(&config_yaml(&[Upstream::http("fast", &fast.url), Upstream::http("slow", &slow.url)], "")).await;
    let c = Client::connect(&gw.url, json!({})).await;
    let subscribed = c.request(1, "resources/subscribe", json!({"uri": "demo://readme"})).await;
    assert_eq!(subscribed.result(), &json!({}), "{}", subscribed.raw);
    // Each upstream's update reaches the client (on the call's own stream: the touch
    // sends it while answering): the slower answer to the subscription was waited for,
    // not cut off when the first one came.
    for (id, upstream) in [(2, "slow"), (3, "fast")] {
        let params = json!({"name": format!("{upstream}__echo"), "arguments": {"message": "touch"}});
        let touched = c.request(id, "tools/call", params).await;
        let updates = touched.notifications("notifications/resources/updated");
        assert_eq!(updates.len(), 1, "after touching {upstream}: {}", touched.raw);
        assert_eq!(updates[0]["params"]["uri"], "demo://readme");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_list_pages_answered_again_reach_the_client_as_the_upstream_sent_them() {
    // Pages of 120 tools (about 9 KB each): large enough to be found again rather than
    // read again when the upstream answers them a second time.
    let demo = DemoUpstream::start(false, &["--extra-tools", "300", "--page-size", "120"]).await;
    let gw = Seawall::start(&format!("upstreams:\n  - name: remote\n    url: {}\n", demo.url)).await;
    let direct = Client::connect(&demo.url, json!({})).await;
    let through = Client::connect(&gw.upstream_url("remote"), json!({})).await;
    let pages = |c: Client| async move {
        let mut pages = Vec::new();
        let mut cursor: Option<Value> = None;
        for id in 1.. {
            let params = cursor.as_ref().map_or_else(|| json!({}), |c| json!({"cursor": c}));
            let page = c.request(id, "tools/list", params).await;
            let result = page.result().clone();
            assert!(result["tools"].is_array(), "{}", page.raw);
            cursor = result.get("nextCursor").cloned();
            pages.push(result["tools"].clone());
            if cursor.is_none() {
                return pages;
            }
        }
        unreachable!()
    };
    let expected = pages(direct).await;
    assert_eq!(expected.len(), 3, "three pages");
    // Three rounds through seawall, a small call between: the same pages every time.
    for round in 0..3 {
        assert_eq!(pages(through.clone()).await, expected, "round {round}");
        let echoed = through.call_tool(100 + round, "echo", json!({"message": "between"})).await;
        assert_eq!(text_of(&echoed), "between");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_session_cap_refuses_like_every_other_overload() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = Seawall::start(&format!(
        "limits: {{ max_in_flight_per_session: 1 }}\nupstreams:\n  - name: remote\n    url: {}\n",
        remote.url
    ))
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let busy = {
        let c = c.clone();
        tokio::spawn(async move { c.call_tool(1, "remote__sleep", json!({"ms": 2000})).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let refused = c.request(2, "tools/list", json!({})).await;
    assert_eq!(refused.status, 503, "{}", refused.raw);
    assert_eq!(refused.header("retry-after").as_deref(), Some("1"));
    let error = refused.error();
    assert_eq!(error["code"], -32012, "{error}");
    assert_eq!(refused.response()["id"], 2);
    assert_eq!(error["data"]["retryAfterSeconds"], 1);
    assert!(error["data"]["correlationId"].is_string(), "{error}");
    assert_eq!(text_of(&busy.await.unwrap()), "slept 2000 ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_client_cancels_is_counted_as_cancelled() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = Seawall::start(&format!("upstreams:\n  - name: remote\n    url: {}\n", remote.url)).await;
    let c = Client::connect(&gw.url, json!({})).await;
    let _ = c.request(1, "tools/list", json!({})).await;
    let sleeping = {
        let c = c.clone();
        tokio::spawn(async move {
            c.request(7, "tools/call", json!({"name": "remote__sleep", "arguments": {"ms": 5000}})).await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    c.notify("notifications/cancelled", json!({"requestId": 7, "reason": "changed my mind"})).await;
    // The request's stream ends at once, without an answer: the receiver of a
    // cancellation sends nothing for the request.
    let ended = tokio::time::timeout(Duration::from_secs(4), sleeping).await.expect("ended at once").unwrap();
    assert!(ended.sse, "{}", ended.raw);
    let answer = ended.messages.iter().find(|m| m["id"] == 7);
    assert!(answer.is_none(), "the cancelled request was answered: {answer:?}");
    let line = r#"seawall_requests_total{upstream="remote",method="tools/call",tool="sleep",outcome="cancelled"} 1"#;
    let mut text = String::new();
    for _ in 0..20 {
        text = gw.metrics().await;
        if text.contains(line) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("missing {line} in\n{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_are_checked_from_the_first_call_on_a_fresh_gateway() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&format!("upstreams:\n  - name: d\n    url: {}\n", remote.url)).await;
    let c = Client::connect(&gw.url, json!({})).await;
    // No session has listed the tools: seawall lists them itself before forwarding.
    let refused = c.call_tool(1, "d__add", json!({"a": "one", "b": 2})).await;
    assert_eq!(refused["isError"], true, "{refused}");
    let text = text_of(&refused);
    assert!(text.contains("invalid arguments for tool 'd__add'") && text.contains("/a"), "{text}");
    let adds = remote.recorded().iter().filter(|e| e["event"] == "call" && e["tool"] == "add").count();
    assert_eq!(adds, 0, "the bad call never reached the upstream");
    let sum = c.call_tool(2, "d__add", json!({"a": 1, "b": 2})).await;
    assert_eq!(sum["structuredContent"]["sum"], json!(3), "{sum}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_crash_does_not_cut_the_upstream_off() {
    let gw = Seawall::start(
        "upstreams:\n  - name: s\n    command: seawall\n    args: [demo-upstream, --stdio]\n    restart: { base_delay: 100ms }\n",
    )
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    // Calls in flight when the process dies: more than the upstream breaker's five
    // consecutive failures.
    let in_flight: Vec<_> = (0..6)
        .map(|i| {
            let c = c.clone();
            tokio::spawn(async move { c.call_tool(10 + i, "s__sleep", json!({"ms": 3000})).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let crashed = c.call_tool(2, "s__crash", json!({})).await;
    assert_eq!(crashed["isError"], true, "{crashed}");
    for call in in_flight {
        assert_eq!(call.await.unwrap()["isError"], true);
    }
    // Requests arriving while the process restarts wait for it, within their deadline.
    for id in 20..25 {
        let read = c.request(id, "resources/read", json!({"uri": "demo://readme"})).await;
        assert!(read.result()["contents"][0]["text"].is_string(), "{}", read.raw);
    }
    let status = Client::get_json(&format!("{}/readyz", gw.admin_url)).await;
    let upstream =
        status["breakers"].as_array().unwrap().iter().find(|b| b["upstream"] == "s" && b["tool"].is_null()).cloned();
    assert_eq!(upstream.map(|b| b["state"].clone()), Some(json!("closed")), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_replica_is_timed_out_per_attempt_and_ejected() {
    let frozen = DemoUpstream::start(false, &[]).await;
    let healthy = DemoUpstream::start(false, &[]).await;
    let gw = Seawall::start(&format!(
        "upstreams:\n  - name: r\n    url: {}\n    endpoints: [{}]\n    timeouts: {{ request: 10s, attempt: 1s }}\n",
        frozen.url, healthy.url
    ))
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let pid = nix::unistd::Pid::from_raw(frozen.proc.id().unwrap() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let mut slowest = Duration::ZERO;
    for id in 1..=30 {
        let started = Instant::now();
        let read = c.request(id, "resources/read", json!({"uri": "demo://readme"})).await;
        slowest = slowest.max(started.elapsed());
        assert!(read.response().get("result").is_some(), "read {id}: {}", read.raw);
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert!(
        slowest < Duration::from_secs(4),
        "an attempt timeout and a retry elsewhere, not the deadline: {slowest:?}"
    );
    let status = Client::get_json(&format!("{}/readyz", gw.admin_url)).await;
    assert_eq!(status["upstreams"]["r"]["endpoints_ejected"], json!([true, false]), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_upstream_breaker_hides_its_tools_and_says_so() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = Seawall::start(&format!(
        "defaults:\n  breaker: {{ hide_open_tools: true, consecutive_failures: 2, break: 30s }}\nupstreams:\n  - name: remote\n    url: {}\n  - name: local\n    command: seawall\n    args: [demo-upstream, --stdio]\n",
        remote.url
    ))
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let listed = c.request(1, "tools/list", json!({})).await;
    assert!(listed.result()["tools"].to_string().contains("remote__echo"));
    let (status, mut stream) = c.open_stream().await;
    assert_eq!(status, 200);
    for id in 2..4 {
        let failed = c
            .call_tool(id, "remote__flaky", json!({"key": format!("k{id}"), "fail_first": 9, "mode": "http_503"}))
            .await;
        assert_eq!(failed["isError"], true, "{failed}");
    }
    let changed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if stream.recv().await.expect("stream")["method"] == "notifications/tools/list_changed" {
                return;
            }
        }
    })
    .await;
    assert!(changed.is_ok(), "clients hear list_changed when an upstream's tools are hidden");
    let listed = c.request(4, "tools/list", json!({})).await;
    let tools = listed.result()["tools"].to_string();
    assert!(!tools.contains("remote__echo") && tools.contains("local__echo"), "{}", listed.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_on_a_503_is_honoured() {
    let remote = DemoUpstream::start(true, &["--retry-after", "2"]).await;
    let gw = Seawall::start(&format!(
        "upstreams:\n  - name: safe\n    url: {}\n    tools:\n      flaky: {{ idempotent: true }}\n",
        remote.url
    ))
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let started = Instant::now();
    let retried = c.call_tool(1, "safe__flaky", json!({"key": "r", "fail_first": 1, "mode": "http_503"})).await;
    let took = started.elapsed();
    assert_eq!(text_of(&retried), "ok after 1 failures", "{retried}");
    assert!(took >= Duration::from_millis(1900) && took < Duration::from_secs(6), "retried after {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_upstream_sees_the_offered_load_plus_the_budget() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&format!(
        "defaults:\n  breaker: {{ consecutive_failures: 100000, min_calls: 100000 }}\nupstreams:\n  - name: dead\n    url: {}\n",
        remote.url
    ))
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    for id in 0..100u64 {
        let read = c.request(id + 1, "resources/read", json!({"uri": format!("demo://flaky/k{id}/1000")})).await;
        assert!(read.response().get("error").is_some(), "{}", read.raw);
    }
    let reads = remote.recorded().iter().filter(|e| e["event"] == "request" && e["method"] == "resources/read").count();
    // N·(1 + 20 %) + 10·1 with the default budget: at most 130 attempts for 100 requests.
    assert!((100..=130).contains(&reads), "{reads} attempts for 100 requests");
}

/// The worker threads that serve client connections, named `seawall-wrk-N`, of the
/// running gateway `pid`.
fn worker_threads(pid: u32) -> usize {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with("seawall-wrk-"))
        .count()
}

/// `workers: N` sets how many worker threads serve client connections; every one of
/// them answers calls (connections are handed to them in turn). Without it there is one
/// per core, and a value out of range is refused with the field's name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_sets_the_number_of_worker_threads() {
    let up = DemoUpstream::start(false, &[]).await;
    let gw = Seawall::start(&format!("workers: 3\nupstreams:\n  - name: d\n    url: {}\n", up.url)).await;
    assert_eq!(worker_threads(gw.proc.id().unwrap()), 3);
    // Three connections, one per worker: each answers.
    for n in 0..3 {
        let c = Client::connect(&gw.upstream_url("d"), json!({})).await;
        let r = c.request(1, "tools/call", json!({"name": "echo", "arguments": {"message": format!("w{n}")}})).await;
        assert_eq!(text_of(r.result()), format!("w{n}"), "{}", r.raw);
    }

    // A reload keeps the number in force, and says so.
    let pid = gw.proc.id().unwrap();
    let fewer = gw.config_path.with_extension("yaml.new");
    std::fs::write(&fewer, format!("workers: 1\nupstreams:\n  - name: d\n    url: {}\n", up.url)).unwrap();
    std::fs::rename(&fewer, &gw.config_path).unwrap();
    crate::support::until_logged(&gw, &["the values in force stay until a restart section=\"workers\""]).await;
    assert_eq!(worker_threads(pid), 3);
    let c = Client::connect(&gw.upstream_url("d"), json!({})).await;
    let r = c.request(1, "tools/call", json!({"name": "echo", "arguments": {"message": "after"}})).await;
    assert_eq!(text_of(r.result()), "after", "{}", r.raw);

    let default = Seawall::start(&format!("upstreams:\n  - name: d\n    url: {}\n", up.url)).await;
    let cores = match std::env::var("TOKIO_WORKER_THREADS").ok().and_then(|n| n.parse::<usize>().ok()) {
        Some(n) if n > 0 => n,
        _ => std::thread::available_parallelism().unwrap().get(),
    };
    assert_eq!(worker_threads(default.proc.id().unwrap()), cores);

    let dir = crate::support::TestDir::new("workers");
    let file = dir.write("zero.yaml", &format!("workers: 0\nupstreams:\n  - name: d\n    url: {}\n", up.url));
    let mut check = tokio::process::Command::new(crate::support::seawall_bin());
    check.arg("check-config").arg(&file);
    let out = crate::support::run_script("check-config", check, Duration::from_secs(60)).await;
    assert!(!out.status.success(), "workers: 0 was accepted");
    let want = format!("{}:1: workers: must be 1 to 1024, not 0", file.display());
    assert!(out.stderr.lines().any(|l| l == want), "{}", out.stderr);
}
