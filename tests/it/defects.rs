//! Defects reported from outside, each checked through the real binary: breaker state
//! names, SIGHUP, configuration errors, resource-not-found URIs, -32042 data and
//! request ids MCP forbids, pretty-printed requests to stdio upstreams.

use std::process::Command;
use std::time::Duration;

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall, text_of};
use serde_json::json;

/// `/readyz` names a half-open breaker exactly as the metrics do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_spells_half_open_like_the_metrics() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = Seawall::start(&format!(
        "defaults:\n  breaker: {{ consecutive_failures: 2, break: 1s, max_break: 1s }}\nupstreams:\n  - name: remote\n    url: {}\n",
        remote.url
    ))
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let failing = json!({"key": "k", "fail_first": 1000, "mode": "error"});
    for id in 0..2 {
        c.request(id, "tools/call", json!({"name": "remote__flaky", "arguments": failing})).await;
    }
    // Two failures open the tool's breaker; past the break (at most 1 s), reading the
    // state moves it to half-open.
    tokio::time::sleep(Duration::from_millis(2000)).await;
    let status = Client::get_json(&format!("{}/readyz", gw.admin_url)).await;
    let tool = status["breakers"].as_array().unwrap().iter().find(|b| b["tool"] == "flaky").cloned().unwrap();
    assert_eq!(tool["state"], "half_open", "{status}");
    let metrics = reqwest::get(format!("{}/metrics", gw.admin_url)).await.unwrap().text().await.unwrap();
    for line in [
        r#"seawall_breaker_transitions_total{upstream="remote",scope="tool",to="open"} 1"#,
        r#"seawall_breaker_transitions_total{upstream="remote",scope="tool",to="half_open"} 1"#,
    ] {
        assert!(metrics.contains(line), "missing {line} in\n{metrics}");
    }
}

/// SIGHUP is a reload request, not a reason to drop every session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_leaves_the_gateway_serving() {
    let mut gw =
        Seawall::start(&crate::support::config_yaml(&[crate::support::Upstream::demo_stdio("demo", false)], "")).await;
    let c = Client::connect(&gw.url, json!({})).await;
    assert_eq!(text_of(&c.call_tool(1, "demo__echo", json!({"message": "before"})).await), "before");

    let pid = gw.proc.id().expect("seawall runs").to_string();
    for _ in 0..2 {
        let status = Command::new("kill").args(["-HUP", &pid]).status().expect("kill");
        assert!(status.success());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(gw.proc.try_status().is_none(), "seawall exited on SIGHUP:\n{}", gw.proc.output());
    // The same session still works, new sessions open, and the admin routes answer.
    assert_eq!(text_of(&c.call_tool(2, "demo__echo", json!({"message": "after"})).await), "after");
    let fresh = Client::connect(&gw.url, json!({})).await;
    assert_eq!(text_of(&fresh.call_tool(1, "demo__echo", json!({"message": "new"})).await), "new");
    let health = reqwest::get(format!("{}/healthz", gw.admin_url)).await.unwrap();
    assert_eq!(health.status(), 200);
    assert!(gw.proc.output().contains("configuration reloaded"), "SIGHUP reloads the file:\n{}", gw.proc.output());
    let status = gw.stop(Duration::from_secs(10)).await.expect("seawall stops on SIGTERM");
    assert!(status.success(), "SIGTERM still ends it cleanly: {status:?}");
}

/// A stdio upstream whose command cannot start does not hold up sessions and calls for
/// its connect timeout: while its last start failed, it is answered as not running at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_upstream_that_cannot_start_is_refused_at_once() {
    let config = "defaults:\n  timeouts: { connect: 20s }\nupstreams:\n  - name: good\n    command: seawall\n    args: [demo-upstream, --stdio]\n  - name: missing\n    command: /nonexistent/mcp-server\n";
    let gw = Seawall::start(config).await;
    // Let the first attempt to start it fail.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let c = Client::connect(&gw.url, json!({})).await;
    assert_eq!(text_of(&c.call_tool(1, "good__echo", json!({"message": "fast"})).await), "fast");
    let single = Client::new(&gw.upstream_url("missing"));
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let refused = single.request(2, "initialize", init).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "answered without waiting out the 20 s connect timeout: {took:?}");
    let error = refused.error();
    assert!(error["message"].as_str().unwrap_or_default().contains("missing"), "{error}");
    assert!(!refused.raw.contains("/nonexistent"), "the command is not shown to clients: {}", refused.raw);
}

/// MCP ids are strings or integers: `1.5`, `1e400` and `-0` are refused as invalid
/// requests with a null id, never echoed; integers of any length still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_that_are_not_strings_or_integers_are_refused() {
    let gw =
        Seawall::start(&crate::support::config_yaml(&[crate::support::Upstream::demo_stdio("demo", false)], "")).await;
    let c = Client::connect(&gw.url, json!({})).await;
    for id in ["1.5", "1e400", "-0", "7.0"] {
        let reply = c.post_raw(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#), &[]).await;
        assert_eq!(reply.status, 400, "{id}: {}", reply.raw);
        let response = reply.response();
        assert_eq!(response["error"]["code"], -32600, "{id}: {}", reply.raw);
        assert!(response["id"].is_null(), "{id} must not be echoed: {}", reply.raw);
        assert!(!reply.raw.contains(id), "{id} must not be echoed: {}", reply.raw);
    }
    for id in ["-1", "0", "123456789012345678901234567890"] {
        let reply = c.post_raw(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#), &[]).await;
        assert_eq!(reply.status, 200, "{id}: {}", reply.raw);
        assert!(reply.raw.contains(&format!(r#""id":{id}"#)), "{id} is echoed as sent: {}", reply.raw);
    }
}

/// A -32002 answer names the URI the client asked for, escaped but never masked, both
/// when seawall itself finds no upstream for it and when the upstream says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_not_found_names_the_uri_the_client_sent() {
    let upstreams =
        [crate::support::Upstream::demo_stdio("a", false), crate::support::Upstream::demo_stdio("b", false)];
    let gw = Seawall::start(&crate::support::config_yaml(&upstreams, "")).await;
    // `/mcp` asks both upstreams and answers itself; `/mcp/a` relays a's own -32002.
    for url in [gw.url.clone(), gw.upstream_url("a")] {
        let c = Client::connect(&url, json!({})).await;
        let reply = c.request(1, "resources/read", json!({"uri": "nope://missing/thing"})).await;
        let error = reply.error();
        assert_eq!(error["code"], -32002, "{url}: {}", reply.raw);
        assert_eq!(error["data"]["uri"], "nope://missing/thing", "{url}: {}", reply.raw);
        assert!(error["message"].as_str().unwrap().contains("nope://missing/thing"), "{url}: {}", reply.raw);
        assert!(error["data"]["correlationId"].is_string(), "{url}: {}", reply.raw);

        let reply = c.request(2, "resources/read", json!({"uri": "nope://missing/\u{e9}\n"})).await;
        assert_eq!(reply.error()["data"]["uri"], "nope://missing/\\xc3\\xa9\\x0a", "{url}: {}", reply.raw);
        let long = format!("nope://{}", "x".repeat(400));
        let reply = c.request(3, "resources/read", json!({"uri": long})).await;
        let uri = reply.error()["data"]["uri"].as_str().unwrap().to_owned();
        assert!(uri.len() == 256 && uri.starts_with("nope://xxx") && uri.ends_with("..."), "{url}: {uri}");
    }
}

/// Every secret an upstream plants in a -32042 error stays out; what the client needs
/// to go on (the elicitation URL and id) and a correlation id reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn url_elicitation_errors_keep_the_url_and_lose_the_secrets() {
    const PLANTED: [&str; 10] = [
        "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
        "hunter2",
        "postgres://",
        "10.0.3.7",
        "/srv/app",
        "/home/deploy",
        "secrets.yaml",
        "Traceback",
        "eyJhbGci",
        "\\u001b",
    ];
    for mode in ["result", "error"] {
        let extra = format!("errors:\n  tool_failures: {mode}\n");
        let gw = Seawall::start(&crate::support::config_yaml(
            &[crate::support::Upstream::demo_stdio("demo", false)],
            &extra,
        ))
        .await;
        let c = Client::connect(&gw.url, json!({})).await;
        c.request(1, "tools/list", json!({})).await;
        let reply = c.request(2, "tools/call", json!({"name": "demo__fail", "arguments": {"mode": "elicit"}})).await;
        for planted in PLANTED {
            assert!(!reply.raw.contains(planted), "{mode}: {planted:?} reached the client: {}", reply.raw);
        }
        assert!(reply.raw.bytes().all(|b| b == b'\n' || (0x20..0x7f).contains(&b)), "{mode}: {}", reply.raw);
        let error = reply.error();
        assert_eq!(error["code"], -32042, "{mode}: {}", reply.raw);
        let data = &error["data"];
        assert_eq!(
            data["elicitations"],
            json!([{
                "mode": "url",
                "elicitationId": "demo-1",
                "url": "https://auth.example.com/connect?elicitation=demo-1",
                "message": data["elicitations"][0]["message"],
            }]),
            "{mode}: only the four fields of the one URL elicitation: {}",
            reply.raw
        );
        assert!(data["correlationId"].as_str().is_some_and(|c| !c.is_empty()), "{mode}: {}", reply.raw);
        let keys: Vec<&String> = data.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["elicitations", "correlationId"], "{mode}: {}", reply.raw);
    }
}

/// `check-config` and `run` report every problem of a file at once, one
/// `FILE:LINE: field: message` line each, in line order, and exit non-zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_config_problem_is_reported_in_one_run() {
    let dir = crate::support::TestDir::new("config");
    let file = dir.write(
        "bad.yaml",
        "defaults:\n  retry: {max_attempts: \"three\"}\n  brake: {consecutive_failures: 3}\n\
         upstreams:\n  - name: a\n    command: x\n    share: sometimes\n  - name: b\n    url: ftp://x\n",
    );
    let f = file.display().to_string();
    let expected = [
        format!("{f}:2: defaults.retry.max_attempts: invalid type: string \"three\", expected u32"),
        format!("{f}:3: defaults: unknown field `brake`, expected one of"),
        format!("{f}:7: upstreams[0].share: unknown variant `sometimes`"),
        format!("{f}:9: upstreams[1].url: not an http(s) URL: \"ftp://x\""),
    ];
    let mut check = tokio::process::Command::new(crate::support::seawall_bin());
    check.arg("check-config").arg(&file);
    let mut run = tokio::process::Command::new(crate::support::seawall_bin());
    run.args(["run", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--config"]).arg(&file);
    for (name, cmd) in [("check-config", check), ("run", run)] {
        let out = crate::support::run_script(name, cmd, Duration::from_secs(60)).await;
        assert!(!out.status.success(), "{name} accepted an invalid file");
        let lines: Vec<&str> = out.stderr.lines().filter(|l| l.starts_with(&f)).collect();
        assert_eq!(lines.len(), expected.len(), "{name}:\n{}", out.stderr);
        for (line, want) in lines.iter().zip(&expected) {
            assert!(line.starts_with(want.as_str()), "{name}: {line:?} should start with {want:?}");
        }
    }
}

/// A pretty-printed request is forwarded to a stdio upstream byte for byte on
/// `/mcp/<upstream>`, and its line breaks must not split it into several lines on the
/// child's stdin: the call is answered, not left to time out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pretty_printed_requests_reach_a_stdio_upstream_as_one_line() {
    let gw =
        Seawall::start(&crate::support::config_yaml(&[crate::support::Upstream::demo_stdio("demo", false)], "")).await;
    let c = Client::connect(&gw.upstream_url("demo"), json!({})).await;
    let body = "{\"jsonrpc\": \"2.0\", \"id\": 7, \"method\": \"tools/call\", \"params\": {\n  \"name\": \"echo\",\r\n  \
                \"arguments\": {\"message\": \"one\\nline\"}\n}}";
    let reply = tokio::time::timeout(Duration::from_secs(10), c.post_raw(body.to_owned(), &[]))
        .await
        .expect("the call is answered");
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(text_of(reply.result()), "one\nline", "{}", reply.raw);
}

/// A connection that breaks before the handshake's answer (most often a pooled one the
/// server closed as it went idle) does not make the upstream unavailable: the handshake
/// is sent once more, on another connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_whose_connection_breaks_is_sent_again() {
    use tokio::io::AsyncReadExt as _;
    let remote = DemoUpstream::start(false, &[]).await;
    let target = remote.url.trim_start_matches("http://").split('/').next().expect("host:port").to_owned();
    // In front of the demo: the first connection is read from and closed unanswered; the
    // others are relayed.
    let front = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = front.local_addr().expect("addr");
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&connections);
    tokio::spawn(async move {
        while let Ok((mut client, _)) = front.accept().await {
            let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let target = target.clone();
            tokio::spawn(async move {
                if n == 0 {
                    let mut buf = [0u8; 4096];
                    let _ = client.read(&mut buf).await;
                    return;
                }
                if let Ok(mut server) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    let config = format!("upstreams:\n  - name: flaky-net\n    url: http://{addr}/mcp\n    protocol: legacy\n");
    let gw = Seawall::start(&config).await;
    let c = Client::connect(&gw.upstream_url("flaky-net"), json!({})).await;
    assert_eq!(text_of(&c.call_tool(1, "echo", json!({"message": "through"})).await), "through");
    assert!(connections.load(std::sync::atomic::Ordering::SeqCst) >= 2, "the handshake went again on a new connection");
}
