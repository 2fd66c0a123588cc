//! `seawall stdio`: seawall launched by its client as a stdio MCP server, through the real
//! binary in front of real demo upstreams (a stdio child and an HTTP server on port 0).
//!
//! The SDK tests need what `tests/run` installs (the Python venv, Node 22 and the npm
//! peers); the raw tests need nothing but the binary.

use std::time::{Duration, Instant};

use crate::support::{
    DemoUpstream, Interop, StdioSeawall, TestDir, Upstream, children_of, config_yaml, is_alive, run_script,
    seawall_bin, text_of,
};
use serde_json::{Value, json};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(150);

/// A stdio demo upstream (`demo`, one process per session, recording to `record`) and,
/// when given, an HTTP one (`remote`); the file's `listen`/`admin_listen` replaced by
/// `listen_lines`.
fn config(record: Option<&std::path::Path>, remote: Option<&str>, listen_lines: &str, extra: &str) -> String {
    let extra_args = match record {
        Some(path) => vec!["--record".to_owned(), path.display().to_string()],
        None => Vec::new(),
    };
    let mut upstreams = vec![Upstream::DemoStdio { name: "demo".into(), per_session: true, extra_args }];
    if let Some(url) = remote {
        upstreams.push(Upstream::http("remote", url));
    }
    config_yaml(&upstreams, extra).replace("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n", listen_lines)
}

/// The official Python SDK's stdio client launches `seawall stdio` in front of a stdio
/// and an HTTP demo upstream: initialize, tools, progress, cancellation (reaching both
/// upstreams), a resource, prompts, sampling and roots relayed, logging, concurrency.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_stdio_client_launches_seawall() {
    let interop = Interop::from_env();
    let remote = DemoUpstream::start(true, &[]).await;
    let dir = TestDir::new("stdio-python");
    let record = dir.join("demo-record.jsonl");
    let config_path = dir.write("seawall.yaml", &config(Some(&record), Some(&remote.url), "", ""));
    let remote_record = remote.record.clone().expect("record file");
    let script = interop.path("python/stdio_client_test.py");
    let mut cmd = interop.python_command([script.as_os_str(), seawall_bin().as_os_str(), config_path.as_os_str()]);
    cmd.arg("--record").arg(format!("demo={}", record.display()));
    cmd.arg("--record").arg(format!("remote={}", remote_record.display()));
    run_script("python stdio client", cmd, SCRIPT_TIMEOUT)
        .await
        .assert_success("python SDK stdio client (tests/interop/python/stdio_client_test.py)");
}

/// The TypeScript SDK's `StdioClientTransport` launches `seawall stdio`: tools, progress,
/// an aborted call, a resource, a prompt, sampling; closing stdin makes seawall exit 0
/// before the SDK would send SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_stdio_client_launches_seawall() {
    let interop = Interop::from_env();
    let dir = TestDir::new("stdio-ts");
    let config_path = dir.write("seawall.yaml", &config(None, None, "", ""));
    let script = interop.path("ts/stdio_client_test.mjs");
    let cmd = interop.node_command([
        script.as_os_str(),
        seawall_bin().as_os_str(),
        config_path.as_os_str(),
        "--upstream".as_ref(),
        "demo".as_ref(),
    ]);
    run_script("ts stdio client", cmd, SCRIPT_TIMEOUT)
        .await
        .assert_success("TypeScript SDK stdio client (tests/interop/ts/stdio_client_test.mjs)");
}

/// With debug logs on, stdout holds nothing but JSON-RPC messages, one per line; the logs
/// are on stderr. The file's `listen` and `admin_listen` name ports already in use, and
/// do not apply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_carries_only_json_rpc_even_with_debug_logs() {
    let remote = DemoUpstream::start(false, &[]).await;
    let busy = [(); 2].map(|()| std::net::TcpListener::bind("127.0.0.1:0").expect("bind"));
    let [a, b] = busy.each_ref().map(|l| l.local_addr().expect("addr"));
    let listen = format!("listen: {a}\nadmin_listen: {b}\n");
    let mut sw = StdioSeawall::start(&config(None, Some(&remote.url), &listen, ""), &[], &[("RUST_LOG", "debug")]);

    sw.send_line("this is no JSON").await;
    sw.initialize("2025-11-25").await;
    sw.request(json!(1), "tools/list", json!({})).await;
    let sleep = json!({"name": "demo__sleep", "arguments": {"ms": 300}, "_meta": {"progressToken": "p1"}});
    let (answer, before) = {
        sw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": sleep})).await;
        sw.response(&json!(2)).await
    };
    assert_eq!(text_of(&answer["result"]), "slept 300 ms", "{answer}");
    assert!(before.iter().any(|m| m["method"] == "notifications/progress"), "progress precedes the answer: {before:?}");
    sw.request(json!(3), "logging/setLevel", json!({"level": "debug"})).await;
    sw.call_tool(4, "remote__log", json!({"level": "info", "message": "to the client"})).await;
    sw.request(json!(5), "resources/read", json!({"uri": "demo://readme"})).await;
    sw.close_stdin();
    while sw.next_or_end().await.is_some() {}
    let status = sw.wait_exit(Duration::from_secs(10)).await;
    assert!(status.success(), "{status:?}");

    let lines = sw.stdout_lines();
    assert!(lines.len() >= 8, "{lines:#?}");
    for line in &lines {
        let msg: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"));
        assert_eq!(msg["jsonrpc"], "2.0", "{line}");
        assert!(msg.get("id").is_some() || msg.get("method").is_some(), "not a JSON-RPC message: {line}");
    }
    assert!(lines.iter().any(|l| l.contains("notifications/message")), "the log notification reached stdout");
    let stderr = sw.stderr();
    assert!(stderr.contains("DEBUG"), "debug logs go to stderr:\n{stderr}");
    assert!(!stderr.contains("cannot listen"), "the file's listeners do not apply:\n{stderr}");
    drop(busy);
}

/// A garbage line is answered -32700 with a null id, a truncated message too, an overlong
/// line -32600 without being kept; the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_overlong_lines_are_refused_and_the_session_goes_on() {
    let mut sw = StdioSeawall::start(&config(None, None, "", "limits:\n  max_body_bytes: 4096\n"), &[], &[]);
    sw.initialize("2025-11-25").await;
    for garbage in ["garbage", r#"{"jsonrpc":"2.0","id":5,"method":"#] {
        sw.send_line(garbage).await;
        let refused = sw.next().await;
        assert_eq!(refused["error"]["code"], -32700, "{refused}");
        assert!(refused["id"].is_null(), "{refused}");
    }
    assert_eq!(text_of(&sw.call_tool(1, "demo__echo", json!({"message": "still here"})).await), "still here");
    let long = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "demo__echo", "arguments": {"message": "x".repeat(10_000)}}});
    sw.send(long).await;
    let refused = sw.next().await;
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("4096"), "{refused}");
    assert_eq!(text_of(&sw.call_tool(3, "demo__echo", json!({"message": "after"})).await), "after");
}

/// A slow call does not hold up a ping or another call: they are answered first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_are_answered_out_of_order() {
    let mut sw = StdioSeawall::start(&config(None, None, "", ""), &[], &[]);
    sw.initialize("2025-11-25").await;
    let slow = json!({"name": "demo__sleep", "arguments": {"ms": 2000, "progress": false}});
    sw.send(json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": slow})).await;
    let sent = Instant::now();
    sw.send(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).await;
    sw.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "demo__echo", "arguments": {"message": "fast"}}}))
        .await;
    let mut order = Vec::new();
    for _ in 0..3 {
        order.push(sw.next().await["id"].clone());
        if order.len() == 2 {
            assert!(sent.elapsed() < Duration::from_millis(1500), "the fast answers waited: {:?}", sent.elapsed());
        }
    }
    assert_eq!(order[2], "slow", "{order:?}");
    assert!(order[..2].contains(&json!(1)) && order[..2].contains(&json!(2)), "{order:?}");
}

/// At the end of stdin seawall finishes or cancels what is in flight, stops its stdio
/// upstreams (shared and per-session) and exits 0 within a few seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_exits_0_and_stops_the_stdio_upstreams() {
    let yaml = config_yaml(&[Upstream::demo_stdio("shared", false), Upstream::demo_stdio("mine", true)], "");
    let mut sw = StdioSeawall::start(&yaml, &[], &[]);
    sw.initialize("2025-11-25").await;
    for (id, tool) in [(1, "shared__echo"), (2, "mine__echo")] {
        assert_eq!(text_of(&sw.call_tool(id, tool, json!({"message": "up"})).await), "up");
    }
    let children = children_of(sw.pid());
    assert_eq!(children.len(), 2, "one shared and one per-session demo process: {children:?}");
    sw.send(json!({"jsonrpc": "2.0", "id": "stuck", "method": "tools/call",
        "params": {"name": "mine__sleep", "arguments": {"ms": 60000}}}))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let closed = Instant::now();
    sw.close_stdin();
    let (stuck, _) = sw.response(&json!("stuck")).await;
    assert!(stuck.get("result").is_some() || stuck.get("error").is_some(), "{stuck}");
    let status = sw.wait_exit(Duration::from_secs(10)).await;
    let took = closed.elapsed();
    assert_eq!(status.code(), Some(0), "{status:?}\n{}", sw.stderr());
    assert!(took < Duration::from_secs(6), "exit took {took:?}");
    for pid in children {
        assert!(!is_alive(pid), "upstream process {pid} outlived seawall");
    }
}

/// SIGTERM (and SIGINT) end seawall stdio cleanly while its stdin is still open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_and_sigint_exit_0_with_stdin_open() {
    for signal in [nix::sys::signal::Signal::SIGTERM, nix::sys::signal::Signal::SIGINT] {
        let mut sw = StdioSeawall::start(&config(None, None, "", ""), &[], &[]);
        sw.initialize("2025-11-25").await;
        let child = children_of(sw.pid());
        assert_eq!(child.len(), 1, "{child:?}");
        let sent = Instant::now();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(sw.pid() as i32), signal).expect("signal");
        let status = sw.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(status.code(), Some(0), "{signal}: {status:?}\n{}", sw.stderr());
        assert!(sent.elapsed() < Duration::from_secs(5), "{signal}: exit took {:?}", sent.elapsed());
        assert!(!is_alive(child[0]), "{signal}: the upstream process outlived seawall");
    }
}

/// Listeners run only when asked for; a port in use is logged and the stdio client is
/// served anyway. `--admin-listen` and `--listen` on port 0 log their addresses and serve.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_start_only_when_asked_and_a_busy_port_is_not_fatal() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken = busy.local_addr().expect("addr").to_string();
    let mut sw = StdioSeawall::start(&config(None, None, "", ""), &["--admin-listen", &taken, "--listen", &taken], &[]);
    sw.initialize("2025-11-25").await;
    assert_eq!(sw.request(json!(1), "ping", json!({})).await["result"], json!({}));
    let stderr = sw.stderr();
    assert!(stderr.contains("no admin listener") && stderr.contains("no HTTP listener"), "{stderr}");
    drop(busy);

    let args = ["--admin-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0"];
    let mut sw = StdioSeawall::start(&config(None, None, "", ""), &args, &[]);
    sw.initialize("2025-11-25").await;
    let url_in =
        |line: String| line.split("url=").nth(1).expect("url=").split_whitespace().next().expect("url").to_owned();
    let admin = url_in(sw.wait_for_log("admin listener", Duration::from_secs(10)).await);
    let health = reqwest::get(format!("{admin}/healthz")).await.expect("GET /healthz");
    assert_eq!(health.status(), 200);
    let mcp = url_in(sw.wait_for_log("HTTP listener", Duration::from_secs(10)).await);
    let http = crate::support::mcp_client::Client::connect(&mcp, json!({})).await;
    assert_eq!(text_of(&http.call_tool(1, "demo__echo", json!({"message": "over http"})).await), "over http");
    assert_eq!(text_of(&sw.call_tool(2, "demo__echo", json!({"message": "over stdio"})).await), "over stdio");
}

/// `--upstream NAME` gives one upstream's own names, as `/mcp/<upstream>`; an unknown
/// name is refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_flag_gives_the_single_upstream_view() {
    let remote = DemoUpstream::start(false, &[]).await;
    let mut sw = StdioSeawall::start(&config(None, Some(&remote.url), "", ""), &["--upstream", "remote"], &[]);
    let init = sw.initialize("2025-06-18").await;
    assert_eq!(init["serverInfo"]["name"], "seawall-demo", "the upstream's own initialize result: {init}");
    let tools = sw.request(json!(1), "tools/list", json!({})).await;
    let names: Vec<&str> =
        tools["result"]["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"echo") && !names.iter().any(|n| n.contains("__")), "{names:?}");
    assert_eq!(text_of(&sw.call_tool(2, "echo", json!({"message": "single"})).await), "single");

    let mut bad = StdioSeawall::start(&config(None, None, "", ""), &["--upstream", "nope"], &[]);
    let status = bad.wait_exit(Duration::from_secs(10)).await;
    assert!(!status.success());
    assert!(bad.stderr().contains("--upstream \"nope\""), "{}", bad.stderr());
}

/// `auth:` does not apply to stdio: the client is anonymous for the authorisation rules,
/// unless `--principal` names a configured API key; an unknown name is refused at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stdio_client_is_anonymous_unless_a_principal_is_named() {
    let extra = "auth:\n  api_keys:\n    - { name: ci, key: \"ci-key-0123456789abcdef\" }\n\
                 authorization:\n  default: deny\n  rules:\n\
                 \x20   - { principals: [ci], allow: { tools: [\"demo__echo\"] } }\n\
                 \x20   - { principals: [anonymous], allow: { tools: [\"demo__add\"] } }\n";
    let yaml = config(None, None, "", extra);
    let tool_names = |list: &Value| -> Vec<String> {
        list["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().unwrap_or("").to_owned())
            .collect()
    };

    let mut anonymous = StdioSeawall::start(&yaml, &[], &[]);
    anonymous.initialize("2025-11-25").await;
    assert_eq!(tool_names(&anonymous.request(json!(1), "tools/list", json!({})).await), ["demo__add"]);
    let denied =
        anonymous.request(json!(2), "tools/call", json!({"name": "demo__echo", "arguments": {"message": "x"}})).await;
    assert_eq!(denied["error"]["code"], -32602, "{denied}");
    assert!(anonymous.stderr().contains("the stdio client is anonymous"), "{}", anonymous.stderr());

    let mut ci = StdioSeawall::start(&yaml, &["--principal", "ci"], &[]);
    ci.initialize("2025-11-25").await;
    assert_eq!(tool_names(&ci.request(json!(1), "tools/list", json!({})).await), ["demo__echo"]);
    assert_eq!(text_of(&ci.call_tool(2, "demo__echo", json!({"message": "as ci"})).await), "as ci");

    let mut nobody = StdioSeawall::start(&yaml, &["--principal", "nobody"], &[]);
    assert!(!nobody.wait_exit(Duration::from_secs(10)).await.success());
    assert!(nobody.stderr().contains("--principal \"nobody\""), "{}", nobody.stderr());
}

/// What HTTP answers with 429 and 503 is the same JSON-RPC error on stdio, with
/// `data.retryAfterSeconds`: a rate limit (-32013) and the session's in-flight cap (-32012).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_and_overload_are_json_rpc_errors() {
    let extra = "limits:\n  max_in_flight_per_session: 1\n\
                 rate_limits:\n  limits:\n    - { per: tool, tools: [\"demo__echo\"], rate: 1/m, burst: 2 }\n";
    let mut sw = StdioSeawall::start(&config(None, None, "", extra), &[], &[]);
    sw.initialize("2025-11-25").await;
    for id in 1..=2 {
        sw.call_tool(id, "demo__echo", json!({"message": "ok"})).await;
    }
    let limited =
        sw.request(json!(3), "tools/call", json!({"name": "demo__echo", "arguments": {"message": "x"}})).await;
    assert_eq!(limited["error"]["code"], -32013, "{limited}");
    assert!(limited["error"]["data"]["retryAfterSeconds"].as_u64().is_some_and(|s| s >= 1), "{limited}");

    sw.send(json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
        "params": {"name": "demo__sleep", "arguments": {"ms": 1000}}}))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let shed = sw.request(json!(4), "tools/call", json!({"name": "demo__add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(shed["error"]["code"], -32012, "{shed}");
    assert!(shed["error"]["data"]["retryAfterSeconds"].as_u64().is_some(), "{shed}");
    let (slow, _) = sw.response(&json!("slow")).await;
    assert_eq!(text_of(&slow["result"]), "slept 1000 ms", "{slow}");
}

/// In protocol 2025-03-26 a batch is answered with one array line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_in_2025_03_26_gets_one_array_line() {
    let mut sw = StdioSeawall::start(&config(None, None, "", ""), &[], &[]);
    sw.initialize("2025-03-26").await;
    sw.send_line(
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"demo__echo","arguments":{"message":"in a batch"}}}]"#,
    )
    .await;
    let answers = sw.next().await;
    let answers = answers.as_array().expect("one array");
    assert_eq!(answers.len(), 2, "{answers:?}");
    let echo = answers.iter().find(|a| a["id"] == 2).expect("the echo's answer");
    assert_eq!(text_of(&echo["result"]), "in a batch");
}

/// `seawall stdio` reloads its configuration too: a change of the file adds an upstream
/// the client can call at once, and the client hears that its tools changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seawall_stdio_reloads_its_configuration() {
    let mut sw = StdioSeawall::start(&config(None, None, "", ""), &[], &[]);
    sw.initialize("2025-11-25").await;
    let more =
        config(None, None, "", "") + "  - name: more\n    command: seawall\n    args: [demo-upstream, --stdio]\n";
    let tmp = sw.config_path.with_extension("yaml.new");
    std::fs::write(&tmp, more).expect("write");
    std::fs::rename(&tmp, &sw.config_path).expect("rename");
    sw.wait_for_log("configuration reloaded", Duration::from_secs(10)).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let message = tokio::time::timeout(Duration::from_secs(5), sw.next()).await.expect("a notification");
        if message["method"] == "notifications/tools/list_changed" {
            break;
        }
        assert!(Instant::now() < deadline, "no list_changed");
    }
    assert_eq!(text_of(&sw.call_tool(2, "more__echo", json!({"message": "reloaded"})).await), "reloaded");
}

/// Under `seawall stdio` its stderr is what the client shows as the server's log: no
/// access line per request there unless the file asks for the access log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_access_log_is_off_on_stdio_unless_configured() {
    let access_lines =
        |stderr: &str| stderr.lines().filter(|l| l.starts_with('{') && l.contains("\"outcome\"")).count();
    for (extra, logged) in [("", false), ("access_log: { enabled: true }\n", true)] {
        let mut sw = StdioSeawall::start(&config(None, None, "", extra), &[], &[]);
        sw.initialize("2025-11-25").await;
        assert_eq!(text_of(&sw.call_tool(1, "demo__echo", json!({"message": "quiet"})).await), "quiet");
        sw.close_stdin();
        let status = sw.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(status.code(), Some(0), "{status:?}\n{}", sw.stderr());
        assert_eq!(access_lines(&sw.stderr()) > 0, logged, "{extra:?}:\n{}", sw.stderr());
    }
}
