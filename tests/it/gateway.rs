//! The core gateway through the real binary: aggregation, routing, sessions, bad input,
//! server-to-client traffic, concurrency and stdio supervision. Upstreams are the
//! built-in demo server, over stdio (child processes of seawall) and over HTTP.

use std::time::Duration;

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall, Upstream, config_yaml, text_of};
use serde_json::{Value, json};

/// seawall in front of a per-session stdio demo (`demo`), a shared one (`shared`) and an
/// HTTP demo (`remote`).
async fn three_upstreams(remote: &DemoUpstream) -> Seawall {
    three_upstreams_speaking(remote, "auto").await
}

/// [`three_upstreams`], with `remote` spoken to in `protocol` (`auto`, `legacy`, `modern`).
async fn three_upstreams_speaking(remote: &DemoUpstream, protocol: &str) -> Seawall {
    let config = format!(
        r#"
limits: {{ max_body_bytes: 65536 }}
upstreams:
  - name: demo
    command: seawall
    args: [demo-upstream, --stdio]
    share: per_session
  - name: shared
    command: seawall
    args: [demo-upstream, --stdio]
  - name: remote
    url: {}
    protocol: {}
"#,
        remote.url, protocol
    );
    Seawall::start(&config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregates_and_routes_across_stdio_and_http_upstreams() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = three_upstreams(&remote).await;
    let c = Client::connect(&gw.url, json!({})).await;

    let tools = c.request(1, "tools/list", json!({})).await;
    let names: Vec<&str> =
        tools.result()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    for expected in ["demo__echo", "shared__echo", "remote__add", "remote__sleep"] {
        assert!(names.contains(&expected), "{expected} missing from {names:?}");
    }
    // Unknown fields of the upstream's tool entries pass through untouched.
    let echo = tools.result()["tools"].as_array().unwrap().iter().find(|t| t["name"] == "demo__echo").unwrap();
    assert_eq!(echo["annotations"]["readOnlyHint"], true);

    assert_eq!(text_of(&c.call_tool(2, "demo__echo", json!({"message": "via stdio"})).await), "via stdio");
    assert_eq!(text_of(&c.call_tool(3, "shared__echo", json!({"message": "via shared"})).await), "via shared");
    let sum = c.call_tool(4, "remote__add", json!({"a": 2, "b": 3.5})).await;
    assert_eq!(sum["structuredContent"]["sum"], json!(5.5));

    let prompt = c.request(5, "prompts/get", json!({"name": "remote__greet", "arguments": {"name": "Ada"}})).await;
    assert!(prompt.result()["messages"][0]["content"]["text"].as_str().unwrap().contains("Ada"));

    let read = c.request(6, "resources/read", json!({"uri": "demo://echo/hello"})).await;
    assert_eq!(read.result()["contents"][0]["text"], "hello");
    let completion = c
        .request(
            7,
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "demo__greet"},
            "argument": {"name": "name", "value": "al"}}),
        )
        .await;
    assert_eq!(completion.result()["completion"]["values"], json!(["alice", "albert"]));

    let unknown = c.request(8, "tools/call", json!({"name": "nosuch__tool", "arguments": {}})).await;
    assert_eq!(unknown.error()["code"], -32602);
    let no_method = c.request(9, "no/such/method", json!({})).await;
    assert_eq!(no_method.error()["code"], -32601);

    // The call reached the HTTP upstream under the upstream's own tool name.
    assert!(remote.recorded().iter().any(|e| e["event"] == "call" && e["tool"] == "add"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_upstream_endpoint_keeps_names_and_upstream_identity() {
    let remote = DemoUpstream::start(false, &["--name", "remote-demo", "--page-size", "3"]).await;
    let gw = three_upstreams(&remote).await;
    let c = Client::connect(&gw.upstream_url("remote"), json!({})).await;
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    for id in 1..20 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = c.request(id, "tools/list", params).await;
        names.extend(page.result()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()));
        cursor = page.result()["nextCursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    assert!(names.contains(&"echo".to_owned()) && names.contains(&"add".to_owned()), "{names:?}");
    assert_eq!(text_of(&c.call_tool(30, "echo", json!({"message": "plain"})).await), "plain");

    // The aggregated endpoint pages through the same upstream with its own cursor.
    let agg = Client::connect(&gw.url, json!({})).await;
    let mut agg_names = Vec::new();
    let mut cursor: Option<String> = None;
    for id in 1..40 {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let page = agg.request(id, "tools/list", params).await;
        agg_names
            .extend(page.result()["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()));
        cursor = page.result()["nextCursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    let remote_names: Vec<_> = agg_names.iter().filter_map(|n| n.strip_prefix("remote__")).map(str::to_owned).collect();
    assert_eq!(remote_names, names);
    let bad = agg.request(99, "tools/list", json!({"cursor": "not-a-cursor"})).await;
    assert_eq!(bad.error()["code"], -32602);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_the_right_json_rpc_error_and_http_status() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = three_upstreams(&remote).await;
    let c = Client::connect(&gw.url, json!({})).await;

    let parse = c.post_raw("{not json".into(), &[]).await;
    assert_eq!(parse.status, 400);
    assert_eq!(parse.error()["code"], -32700);
    assert_eq!(parse.response()["id"], Value::Null);

    let invalid = c.post_raw(r#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#.into(), &[]).await;
    assert_eq!(invalid.status, 400);
    assert_eq!(invalid.error()["code"], -32600);
    assert_eq!(invalid.response()["id"], 5);

    let batch = c.post_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.into(), &[]).await;
    assert_eq!(batch.status, 400, "batches are 2025-03-26 only");

    let not_acceptable =
        c.post_raw(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.into(), &[("accept", "text/html")]).await;
    assert_eq!(not_acceptable.status, 406);
    let media =
        c.post_raw(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.into(), &[("content-type", "text/plain")]).await;
    assert_eq!(media.status, 415);
    // An oversized body (the limit here is 64 KiB) is refused with 413.
    let huge = c
        .post_raw(
            format!(r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":"{}"}}}}"#, "a".repeat(100_000)),
            &[],
        )
        .await;
    assert_eq!(huge.status, 413);
    let version = c
        .post_raw(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.into(), &[("mcp-protocol-version", "1999-01-01")])
        .await;
    assert_eq!(version.status, 400);
    let foreign = c
        .post_raw(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.into(), &[("origin", "http://evil.example.com")])
        .await;
    assert_eq!(foreign.status, 403);

    let mut anonymous = c.clone();
    anonymous.session = None;
    assert_eq!(anonymous.post(json!({"jsonrpc":"2.0","id":1,"method":"ping"})).await.status, 400);
    let mut stranger = c.clone();
    stranger.session = Some("no-such-session".into());
    assert_eq!(stranger.post(json!({"jsonrpc":"2.0","id":1,"method":"ping"})).await.status, 404);

    let put = c.http.put(&c.url).send().await.unwrap();
    assert_eq!(put.status(), 405);

    // Garbage of every shape never takes the gateway down.
    for body in ["", "null", "[]", "[1,2]", "\"x\"", "{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"x\"}", "\u{0}\u{1}"]
    {
        let r = c.post_raw(body.into(), &[]).await;
        assert!(r.status == 400 || r.status == 200, "{body:?} → {}", r.status);
    }
    assert_eq!(c.request(2, "ping", json!({})).await.result(), &json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_end_with_delete_and_lost_upstream_sessions_are_renewed() {
    // Upstream sessions exist only in the legacy era.
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = three_upstreams_speaking(&remote, "legacy").await;
    let c = Client::connect(&gw.url, json!({})).await;
    assert_eq!(text_of(&c.call_tool(1, "remote__echo", json!({"message": "one"})).await), "one");

    // The upstream forgets every session: the next call re-initialises transparently.
    let dropped = reqwest::Client::new().post(remote.url.replace("/mcp", "/admin/drop-sessions")).send().await.unwrap();
    assert!(dropped.status().is_success());
    assert_eq!(text_of(&c.call_tool(2, "remote__echo", json!({"message": "two"})).await), "two");
    let inits = remote.recorded().iter().filter(|e| e["event"] == "initialize").count();
    assert_eq!(inits, 2, "one initialize per upstream session");

    let stats_url = remote.url.replace("/mcp", "/admin/stats");
    let before = Client::get_json(&stats_url).await;
    assert_eq!(c.delete().await, 200);
    assert_eq!(c.post(json!({"jsonrpc":"2.0","id":3,"method":"ping"})).await.status, 404);
    let after = Client::get_json(&stats_url).await;
    assert_eq!(
        after["sessions"].as_u64().unwrap() + 1,
        before["sessions"].as_u64().unwrap(),
        "DELETE ends the upstream session"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_sampling_and_logging_reach_the_right_client_stream() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = three_upstreams(&remote).await;
    let c = Client::connect(&gw.url, json!({"sampling": {}})).await;

    let slow = c
        .request(
            1,
            "tools/call",
            json!({"name": "demo__sleep", "arguments": {"ms": 300}, "_meta": {"progressToken": "p-1"}}),
        )
        .await;
    assert!(slow.sse);
    let progress = slow.notifications("notifications/progress");
    assert!(progress.len() >= 3, "{}", slow.raw);
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "p-1"));
    assert_eq!(text_of(slow.result()), "slept 300 ms");

    // Sampling asked by an HTTP upstream and by a stdio upstream is relayed and answered.
    for (id, tool) in [(2, "remote__sample"), (3, "demo__sample")] {
        let mut asked = None;
        let reply = c
            .request_with(json!(id), "tools/call", json!({"name": tool, "arguments": {"prompt": "hi"}}), |m| {
                assert_eq!(m["method"], "sampling/createMessage");
                asked = Some(m["id"].clone());
                Some(json!({"role": "assistant", "content": {"type": "text", "text": "hello from the client"}, "model": "test"}))
            })
            .await;
        assert!(asked.unwrap().as_str().unwrap().starts_with("seawall-"), "server requests get gateway ids");
        assert_eq!(text_of(reply.result()), "sampled: hello from the client", "{tool}");
    }

    // A notification not tied to a request arrives on the GET stream.
    // A second GET takes the stream over (a client whose connection died reconnects at
    // once); the first connection ends, and messages go to the newest only.
    let (status, mut first) = c.open_stream().await;
    assert_eq!(status, 200);
    let (second, mut stream) = c.open_stream().await;
    assert_eq!(second, 200);
    let ended = tokio::time::timeout(Duration::from_secs(10), async { while first.recv().await.is_some() {} }).await;
    assert!(ended.is_ok(), "the first GET stream ends when a second takes over");
    c.call_tool(4, "demo__log", json!({"message": "to the stream"})).await;
    let note = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let m = stream.recv().await.expect("stream open");
            if m["method"] == "notifications/message" {
                return m;
            }
        }
    })
    .await
    .expect("logging notification on the GET stream");
    assert_eq!(note["params"]["data"], "to the stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_cancellation_is_forwarded_upstream_with_the_upstream_id() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = three_upstreams(&remote).await;
    let c = Client::connect(&gw.url, json!({})).await;
    let call = {
        let c = c.clone();
        tokio::spawn(async move {
            c.request(77, "tools/call", json!({"name": "remote__sleep", "arguments": {"ms": 20000}})).await
        })
    };
    let upstream_id =
        wait_for(&remote, |e| (e["event"] == "call" && e["tool"] == "sleep").then(|| e["id"].clone())).await;
    assert_eq!(c.notify("notifications/cancelled", json!({"requestId": 77, "reason": "user"})).await, 202);
    let ended = tokio::time::timeout(Duration::from_secs(10), call).await.expect("ended at once").unwrap();
    assert!(ended.messages.iter().all(|m| m["id"] != 77), "the cancelled request was answered: {}", ended.raw);
    let cancelled = wait_for(&remote, |e| (e["event"] == "cancelled").then(|| e["requestId"].clone())).await;
    assert_eq!(cancelled, upstream_id, "the upstream hears its own id, not the client's");
    assert_ne!(upstream_id, json!(77));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_with_interleaved_ids_each_get_their_own_answers() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = three_upstreams(&remote).await;
    let mut tasks = Vec::new();
    for client in 0..12 {
        let url = gw.url.clone();
        tasks.push(tokio::spawn(async move {
            let c = Client::connect(&url, json!({})).await;
            let calls = (0..8).map(|i| {
                let c = c.clone();
                async move {
                    // Every client uses the same ids: the gateway must keep them apart.
                    let tool = ["demo__echo", "shared__echo", "remote__echo"][i % 3];
                    let message = format!("client {client} call {i}");
                    let reply = c.call_tool(i as u64, tool, json!({"message": message})).await;
                    assert_eq!(text_of(&reply), message, "{tool}");
                }
            });
            futures::future::join_all(calls).await;
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t).await.expect("in time").expect("client task");
    }
}

/// CPU time (ns) of each of a process's threads named `seawall-wrk-*`, by name.
fn worker_cpu(pid: u32) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads") {
        let dir = task.expect("a thread").path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default().trim().to_owned();
        if name.starts_with("seawall-wrk-") {
            let ran = std::fs::read_to_string(dir.join("schedstat")).unwrap_or_default();
            out.insert(name, ran.split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_connections_are_served_in_turn_by_as_many_workers_as_asked() {
    let remote = DemoUpstream::start(false, &[]).await;
    let yaml = config_yaml(&[Upstream::http("remote", &remote.url)], "");
    let gw = Seawall::start_with(&yaml, &[], &[("TOKIO_WORKER_THREADS", "3")]).await;
    let pid = gw.proc.id().expect("running");
    let before = worker_cpu(pid);
    assert_eq!(before.keys().cloned().collect::<Vec<_>>(), ["seawall-wrk-0", "seawall-wrk-1", "seawall-wrk-2"]);
    // Six clients, each on a connection of its own: two for each worker.
    let clients = (0..6).map(|n| {
        let url = gw.url.clone();
        async move {
            let c = Client::connect(&url, json!({})).await;
            for i in 0..20 {
                let message = format!("client {n} call {i}");
                assert_eq!(text_of(&c.call_tool(i, "remote__echo", json!({"message": message})).await), message);
            }
        }
    });
    futures::future::join_all(clients).await;
    let after = worker_cpu(pid);
    for (name, ran) in &after {
        assert!(*ran > before[name], "{name} served nothing: {before:?} then {after:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_stdio_upstream_fails_in_flight_calls_cleanly_and_restarts() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = three_upstreams(&remote).await;
    let c = Client::connect(&gw.url, json!({})).await;
    let slow = {
        let c = c.clone();
        tokio::spawn(async move { c.call_tool(1, "shared__sleep", json!({"ms": 20000})).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let crashed = c.call_tool(2, "shared__crash", json!({})).await;
    assert_eq!(crashed["isError"], true);
    let in_flight = tokio::time::timeout(Duration::from_secs(10), slow).await.expect("no hang").unwrap();
    assert_eq!(in_flight["isError"], true);
    assert!(text_of(&in_flight).contains("crashed"), "{in_flight}");
    // The supervisor restarts the process; the next call works.
    let again = c.call_tool(3, "shared__echo", json!({"message": "back"})).await;
    assert_eq!(text_of(&again), "back");
    let health = Client::get_json(&format!("{}/readyz", gw.admin_url)).await;
    assert_eq!(health["upstreams"]["shared"]["state"], "up");
}

/// Polls the demo upstream's record until `pick` finds something (10 s at most).
async fn wait_for(remote: &DemoUpstream, pick: impl Fn(&Value) -> Option<Value>) -> Value {
    for _ in 0..200 {
        if let Some(v) = remote.recorded().iter().find_map(&pick) {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not recorded: {:?}", remote.recorded());
}

/// A stdio process gets what programs need to run, its `env`, and what `inherit_env`
/// names of the gateway's environment; never the rest of it (the gateway's credentials).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_process_gets_only_the_environment_it_is_given() {
    let dir = crate::support::TestDir::new("noisy-env");
    let record = dir.join("noisy.json");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/noisy_server.py");
    let config = format!(
        "upstreams:\n  - name: noisy\n    command: python3\n    args: [\"{script}\"]\n    env: {{ NOISY_RECORD: \"{}\", GIVEN: \"${{SEAWALL_TEST_GIVEN}}\" }}\n    inherit_env: [SEAWALL_TEST_SHARED]\n",
        record.display()
    );
    let env = [
        ("SEAWALL_TEST_GIVEN", "g"),
        ("SEAWALL_TEST_SHARED", "s"),
        ("SEAWALL_TEST_SECRET", "gateway-credential"),
        ("AWS_SECRET_ACCESS_KEY", "gateway-credential"),
    ];
    let gw = Seawall::start_with(&config, &[], &env).await;
    let c = Client::connect(&gw.url, json!({})).await;
    assert_eq!(text_of(&c.call_tool(1, "noisy__echo", json!({"message": "hi"})).await), "hi");
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let names: Vec<&str> = recorded["env"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for given in ["PATH", "HOME", "NOISY_RECORD", "GIVEN", "SEAWALL_TEST_SHARED"] {
        assert!(names.contains(&given), "{given} missing from {names:?}");
    }
    for kept in ["SEAWALL_TEST_SECRET", "AWS_SECRET_ACCESS_KEY", "SEAWALL_TEST_GIVEN", "RUST_LOG"] {
        assert!(!names.contains(&kept), "{kept} reached the process: {names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noisy_stubborn_stdio_server_is_served_then_stopped_politely_then_killed() {
    let dir = crate::support::TestDir::new("noisy");
    let record = dir.join("noisy.json");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/noisy_server.py");
    let config = format!(
        "upstreams:\n  - name: noisy\n    command: python3\n    args: [\"{script}\", --stubborn]\n    env: {{ NOISY_RECORD: \"{}\" }}\n    shutdown_grace: 500ms\n",
        record.display()
    );
    let mut gw = Seawall::start(&config).await;
    let c = Client::connect(&gw.url, json!({"sampling": {}, "roots": {"listChanged": true}})).await;

    // Junk lines on stdout are skipped; the answers get through.
    let reply = c.call_tool(1, "noisy__echo", json!({"message": "through the noise"})).await;
    assert_eq!(text_of(&reply), "through the noise");
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    assert_eq!(recorded["capabilities"], json!({}), "a shared process is offered no client features");
    assert!(gw.proc.output().contains("noisy: ready"), "stderr goes to seawall's log");

    // Shutdown: close stdin, wait, SIGTERM (ignored), wait, SIGKILL.
    let pid = recorded["pid"].as_i64().unwrap();
    let started = std::time::Instant::now();
    gw.stop(Duration::from_secs(10)).await;
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "the stubborn process is gone");
    let log = gw.proc.output();
    assert!(log.contains("noisy: stdin closed") && log.contains("noisy: ignoring SIGTERM"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_session_processes_are_capped_and_freed_when_sessions_end() {
    let config = "upstreams:\n  - name: demo\n    command: seawall\n    args: [demo-upstream, --stdio]\n    share: per_session\n    max_processes: 1\n";
    let gw = Seawall::start(config).await;
    let first = Client::connect(&gw.url, json!({})).await;
    assert_eq!(text_of(&first.call_tool(1, "demo__echo", json!({"message": "one"})).await), "one");

    // A second session finds no process slot: a clean, immediate answer, no new process.
    let second = Client::connect(&gw.url, json!({})).await;
    let refused = second.call_tool(1, "demo__echo", json!({"message": "two"})).await;
    assert_eq!(refused["isError"], true);
    assert!(text_of(&refused).contains("unavailable"), "{refused}");

    // When the first session ends, its process slot is free again.
    assert_eq!(first.delete().await, 200);
    let served = second.call_tool(2, "demo__echo", json!({"message": "two"})).await;
    assert_eq!(text_of(&served), "two");
}
